// A tiny x402 v2 paid resource for the browser tests (node:http, no dependencies), and the EIP-3009 token it is paid
// in. `/paid` answers 402 with `PAYMENT-REQUIRED` (base64 JSON, one `exact` entry); a retry carrying
// `PAYMENT-SIGNATURE` is checked (the `accepted` entry is the one offered, `to` and `value` match it, the time window
// holds) and settled by calling the token's `transferWithAuthorization` on anvil from an unlocked dev account (the
// facilitator, which pays the gas); the token verifies the EIP-712 signature itself and reverts on a bad one. A
// settled payment answers 200 with `PAYMENT-RESPONSE` (base64 JSON naming the settlement transaction).
// Calls are ABI-encoded by hand; function selectors come from the node (`web3_sha3`).
import { createServer } from 'node:http';
import { execFileSync } from 'node:child_process';
import { isDeepStrictEqual } from 'node:util';
import { join } from 'node:path';
import { repoRoot } from './harness.mjs';

/** USDC's canonical address on base (docs/api.md §13). */
export const USDC_BASE = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
/** anvil's first dev account (deploys and mints) and second one (the facilitator: pays settlement gas). */
export const DEV = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
export const FACILITATOR = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';

const word = (hex) => hex.replace(/^0x/, '').toLowerCase().padStart(64, '0');
const uint = (value) => word(BigInt(value).toString(16));
const utf8Hex = (text) => Buffer.from(text, 'utf8').toString('hex');
/** `bytes`/`string` tail: length word, then the data right-padded to whole words. */
const dynamic = (hex) => {
  const data = hex.replace(/^0x/, '');
  const padded = data.padEnd(Math.ceil(data.length / 64) * 64, '0');
  return uint(data.length / 2) + padded;
};

async function selector(rpc, signature) {
  return (await rpc('web3_sha3', [`0x${utf8Hex(signature)}`])).slice(0, 10);
}

async function mined(rpc, hash) {
  for (let i = 0; i < 100; i += 1) {
    const receipt = await rpc('eth_getTransactionReceipt', [hash]);
    if (receipt) return receipt;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`transaction ${hash} was not mined`);
}

/**
 * Compiles `tests/contracts/Eip3009Token.sol`, deploys it as "USD Coin" version "2" (USDC's EIP-712 domain on base),
 * copies its code to USDC's base address (anvil_setCode) and mints `amount` units (6 decimals) to `holder` there.
 */
export async function usdcOnBase(rpc, holder, amount) {
  const compiled = JSON.parse(
    execFileSync('node', [join(repoRoot, 'test-tools', 'solc-compile.mjs'), join(repoRoot, 'tests', 'contracts', 'Eip3009Token.sol'), 'Eip3009Token'], {
      maxBuffer: 64 * 1024 * 1024,
    }).toString(),
  );
  // constructor(string name, string version, string symbol)
  const tails = ['USD Coin', '2', 'USDC'].map((s) => dynamic(utf8Hex(s)));
  let offset = 3 * 32;
  const heads = tails.map((tail) => {
    const head = uint(offset);
    offset += tail.length / 2;
    return head;
  });
  const deployHash = await rpc('eth_sendTransaction', [{ from: DEV, data: compiled.bytecode + heads.join('') + tails.join(''), gas: '0x989680' }]);
  const receipt = await mined(rpc, deployHash);
  if (receipt.status !== '0x1' || !receipt.contractAddress) throw new Error(`token deployment failed: ${JSON.stringify(receipt)}`);
  const code = await rpc('eth_getCode', [receipt.contractAddress, 'latest']);
  await rpc('anvil_setCode', [USDC_BASE, code]);
  const mint = await selector(rpc, 'mint(address,uint256)');
  const minted = await mined(rpc, await rpc('eth_sendTransaction', [{ from: DEV, to: USDC_BASE, data: mint + word(holder) + uint(amount) }]));
  if (minted.status !== '0x1') throw new Error('mint failed');
  return USDC_BASE;
}

/** The token balance of `owner` (units). */
export async function tokenBalance(rpc, token, owner) {
  const balanceOf = await selector(rpc, 'balanceOf(address)');
  return BigInt(await rpc('eth_call', [{ to: token, data: balanceOf + word(owner) }, 'latest']));
}

const b64 = (value) => Buffer.from(JSON.stringify(value)).toString('base64');

/**
 * Starts the paywall on 127.0.0.1. `entry` is the one `accepts` entry offered (`amount` in units as a decimal
 * string). Returns `{ base, url(path), paidRequests(), settlements, close() }`.
 */
export async function startPaywall({ rpc, entry }) {
  const transferWithAuthorization = await selector(
    rpc,
    'transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)',
  );
  const settlements = [];
  let paidRequests = 0;
  let base = '';

  const paymentRequired = (res, error) => {
    const document = {
      x402Version: 2,
      error,
      resource: { url: `${base}/paid`, description: 'a paid resource of the browser tests', mimeType: 'text/plain' },
      accepts: [entry],
    };
    res.writeHead(402, { 'content-type': 'application/json', 'PAYMENT-REQUIRED': b64(document) });
    res.end('{}');
  };

  /** The payment's authorization and signature, or the reason it is refused. */
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
    const path = new URL(req.url, 'http://paywall').pathname;
    if (path === '/free') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('free content');
      return;
    }
    if (path !== '/paid') {
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
      transferWithAuthorization +
      word(auth.from) +
      word(auth.to) +
      uint(auth.value) +
      uint(auth.validAfter) +
      uint(auth.validBefore) +
      word(auth.nonce) +
      uint(7 * 32) +
      dynamic(signature);
    (async () => {
      const hash = await rpc('eth_sendTransaction', [{ from: FACILITATOR, to: entry.asset, data, gas: '0x30d40' }]);
      const receipt = await mined(rpc, hash);
      if (receipt.status !== '0x1') throw new Error('settlement reverted');
      return hash;
    })().then(
      (hash) => {
        settlements.push({ from: auth.from, nonce: auth.nonce, hash });
        const answer = { success: true, transaction: hash, network: entry.network, payer: auth.from };
        res.writeHead(200, { 'content-type': 'text/plain', 'PAYMENT-RESPONSE': b64(answer) });
        res.end('paid content');
      },
      (e) => paymentRequired(res, `settlement failed: ${e.message}`),
    );
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}`;
  return {
    base,
    url: (path) => `${base}${path}`,
    paidRequests: () => paidRequests,
    settlements,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
