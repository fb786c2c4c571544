// What the demo's chain (scripts/demo-chain.mjs) and the browser tests (web/tests) do on an anvil node, in one place:
// a JSON-RPC client, ABI encoding by hand (function selectors come from the node, `web3_sha3`), transactions from
// the node's unlocked dev accounts, the test USDC at USDC's base address, and a sample x402 v2 paywall paid in it.
// Node.js only (node:http, no packages; the contracts come from test-tools).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { isDeepStrictEqual } from 'node:util';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const tools = join(repoRoot, 'test-tools');

/** USDC's canonical address on base (src/domain/asset.rs, docs/api.md §13). */
export const USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';

let rpcId = 0;
/** One JSON-RPC call to a node: its result, or an error naming the method. */
export async function jsonRpc(url, method, params = []) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: (rpcId += 1), method, params }),
  });
  const body = await response.json();
  if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}

/** `rpc(method, params)` bound to a node's URL: what every helper here takes. */
export const client = (url) => (method, params) => jsonRpc(url, method, params);

/** An ABI word: an address or bytes32 (hex) or a bigint, as 32 bytes of hex without 0x. */
export const word = (v) => (typeof v === 'bigint' ? v.toString(16) : v.replace(/^0x/, '').toLowerCase()).padStart(64, '0');
/** A uint256 word from a number, a bigint or a decimal string. */
export const uint = (v) => word(BigInt(v));
export const utf8Hex = (text) => Buffer.from(text, 'utf8').toString('hex');
/** A `bytes`/`string` tail: its length, then the data right-padded to whole words. */
export const dynamic = (hex) => {
  const data = hex.replace(/^0x/, '');
  return uint(data.length / 2) + data.padEnd(Math.ceil(data.length / 64) * 64, '0');
};

/** The 4-byte selector of a function signature (hex without 0x), by the node's keccak. */
export async function selector(rpc, signature) {
  return (await rpc('web3_sha3', [`0x${utf8Hex(signature)}`])).slice(2, 10);
}

/** The receipt of a transaction once mined (anvil mines at once); throws if it reverted or is not mined in 10 s. */
export async function mined(rpc, hash) {
  for (let i = 0; i < 200; i += 1) {
    const receipt = await rpc('eth_getTransactionReceipt', [hash]);
    if (receipt) {
      if (receipt.status !== '0x1') throw new Error(`transaction ${hash} reverted`);
      return receipt;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`transaction ${hash} was not mined`);
}

/** A transaction from the node's first dev account (unless `tx.from` says otherwise), mined: its receipt. */
export async function send(rpc, tx) {
  const from = tx.from ?? (await rpc('eth_accounts'))[0];
  return mined(rpc, await rpc('eth_sendTransaction', [{ from, gas: '0x1c9c380', ...tx }]));
}

/** Calls `signature` on `to` with the encoded `words` (and `value` wei) from the first dev account: its receipt. */
export async function call(rpc, to, signature, words, value = 0n) {
  return send(rpc, { to, data: `0x${await selector(rpc, signature)}${words.join('')}`, value: `0x${value.toString(16)}` });
}

/** Deploys creation `code` (constructor arguments appended) from the first dev account: its address. */
export async function deploy(rpc, code) {
  return (await send(rpc, { data: `0x${code.replace(/^0x/, '')}` })).contractAddress;
}

/** Deploys `code` elsewhere and copies what it leaves to `address` (constructor storage is not copied). */
export async function place(rpc, address, code) {
  const deployed = await deploy(rpc, code);
  await rpc('anvil_setCode', [address, await rpc('eth_getCode', [deployed, 'latest'])]);
}

/** The creation bytecode of an npm build of Uniswap V2 in test-tools (hex without 0x). */
export const uniswap = (pkg, file) =>
  JSON.parse(readFileSync(join(tools, 'node_modules', '@uniswap', pkg, 'build', file), 'utf8')).bytecode.replace(/^0x/, '');

/**
 * Compiles tests/contracts/Eip3009Token.sol (EIP-3009, open `mint`) and places it at USDC's base address as
 * "USD Coin" version "2", USDC's EIP-712 domain on base. Its name, version and symbol are immutables, so they survive
 * the copy; balances start empty (mint them).
 */
export async function placeUsdc(rpc) {
  const token = JSON.parse(
    execFileSync('node', [join(tools, 'solc-compile.mjs'), join(repoRoot, 'tests', 'contracts', 'Eip3009Token.sol'), 'Eip3009Token'], {
      maxBuffer: 64 * 1024 * 1024,
    }).toString(),
  );
  // constructor(string name, string version, string symbol): three offsets, then the three strings.
  const tails = ['USD Coin', '2', 'USDC'].map((s) => dynamic(utf8Hex(s)));
  let offset = 3 * 32;
  const heads = tails.map((tail) => {
    const head = uint(offset);
    offset += tail.length / 2;
    return head;
  });
  await place(rpc, USDC, token.bytecode + heads.join('') + tails.join(''));
  return USDC;
}

/** Mints `units` (6 decimals) of the test USDC to `holder`. */
export async function mintUsdc(rpc, holder, units) {
  await call(rpc, USDC, 'mint(address,uint256)', [word(holder), uint(units)]);
}

/** The ERC-20 balance of `owner` at `token` (units). */
export async function tokenBalance(rpc, token, owner) {
  const data = `0x${await selector(rpc, 'balanceOf(address)')}${word(owner)}`;
  return BigInt(await rpc('eth_call', [{ to: token, data }, 'latest']));
}

const b64 = (value) => Buffer.from(JSON.stringify(value)).toString('base64');

/**
 * A sample x402 (protocol v2) paywall on 127.0.0.1:`port` (0: any free one). `GET path` answers 402 with
 * `PAYMENT-REQUIRED` (base64 JSON offering `entry`, whose `amount` is in units as a decimal string); a retry carrying
 * `PAYMENT-SIGNATURE` is checked (x402Version 2, the `accepted` entry is the one offered, the authorization's fields
 * are strings, `to` and `value` match the entry, the time window holds and is no longer than the entry allows) and
 * settled with the token's `transferWithAuthorization` sent by `facilitator` (an unlocked dev account: it pays the
 * gas); the token verifies the EIP-712 signature itself and reverts on a bad one. A settled payment answers 200 with
 * `PAYMENT-RESPONSE` (base64 JSON naming the settlement transaction) and `body(authorization)` as `type`. With
 * `free` (`{ type, body }`), `/free` answers that without payment.
 * Returns `{ base, url(path), paidRequests(), settlements, close() }`: `paidRequests()` counts requests that carried a
 * payment, `settlements` lists `{ from, nonce, hash }` of those settled.
 */
export async function startPaywall({ rpc, entry, facilitator, path, description, type, body, free, port = 0 }) {
  const transferWithAuthorization = await selector(
    rpc,
    'transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)',
  );
  const settlements = [];
  let paidRequests = 0;
  let base = '';

  const paymentRequired = (res, error) => {
    const document = { x402Version: 2, error, resource: { url: `${base}${path}`, description, mimeType: type }, accepts: [entry] };
    res.writeHead(402, { 'content-type': 'application/json', 'PAYMENT-REQUIRED': b64(document) });
    res.end('{}');
  };

  /** The payment's authorization and signature, or the reason it is refused (x402's error codes). */
  const verify = (header) => {
    let document;
    try {
      document = JSON.parse(Buffer.from(header, 'base64').toString('utf8'));
    } catch {
      return { reason: 'invalid_payload' };
    }
    if (document?.x402Version !== 2) return { reason: 'invalid_x402_version' };
    if (!isDeepStrictEqual(document.accepted, entry)) return { reason: 'accepted_requirements_mismatch' };
    const auth = document.payload?.authorization ?? {};
    const signature = document.payload?.signature;
    if (typeof signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(signature)) return { reason: 'invalid_payload' };
    for (const key of ['from', 'to', 'value', 'validAfter', 'validBefore', 'nonce']) {
      if (typeof auth[key] !== 'string') return { reason: 'invalid_payload' };
    }
    if (auth.to !== entry.payTo) return { reason: 'invalid_exact_evm_payload_recipient_mismatch' };
    if (auth.value !== entry.amount) return { reason: 'invalid_exact_evm_payload_authorization_value' };
    const now = BigInt(Math.floor(Date.now() / 1000));
    if (BigInt(auth.validAfter) > now || BigInt(auth.validBefore) <= now || BigInt(auth.validBefore) > now + BigInt(entry.maxTimeoutSeconds + 5)) {
      return { reason: 'invalid_exact_evm_payload_authorization_valid_before' };
    }
    return { auth, signature };
  };

  const server = createServer((req, res) => {
    const asked = new URL(req.url, 'http://paywall').pathname;
    if (free && asked === '/free') {
      res.writeHead(200, { 'content-type': free.type });
      res.end(free.body);
      return;
    }
    if (asked !== path) {
      res.writeHead(404);
      res.end();
      return;
    }
    const header = req.headers['payment-signature'];
    if (!header) {
      paymentRequired(res, 'PAYMENT-SIGNATURE header is required');
      return;
    }
    paidRequests += 1;
    const checked = verify(header);
    if (checked.reason) {
      paymentRequired(res, checked.reason);
      return;
    }
    const { auth, signature } = checked;
    const data =
      `0x${transferWithAuthorization}` +
      word(auth.from) +
      word(auth.to) +
      uint(auth.value) +
      uint(auth.validAfter) +
      uint(auth.validBefore) +
      word(auth.nonce) +
      uint(7 * 32) +
      dynamic(signature);
    send(rpc, { from: facilitator, to: entry.asset, data, gas: '0x30d40' }).then(
      ({ transactionHash: hash }) => {
        settlements.push({ from: auth.from, nonce: auth.nonce, hash });
        const answer = { success: true, transaction: hash, network: entry.network, payer: auth.from };
        res.writeHead(200, { 'content-type': type, 'PAYMENT-RESPONSE': b64(answer) });
        res.end(body(auth));
      },
      (e) => paymentRequired(res, `settlement failed: ${e.message}`),
    );
  });
  await new Promise((r) => server.listen(Number(port), '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
  return {
    base,
    url: (p) => `${base}${p}`,
    paidRequests: () => paidRequests,
    settlements,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
