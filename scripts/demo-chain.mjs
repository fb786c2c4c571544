// The demo's local chain (scripts/demo.sh): what a newcomer needs on an anvil node that plays "base" so that
// every part of docs/guide.md can be tried without real money. Node.js only (no packages beyond test-tools).
//
//   node scripts/demo-chain.mjs setup RPC               deploys the demo contracts; prints their addresses (JSON)
//   node scripts/demo-chain.mjs fund RPC ADDRESS [ETH] [USDC]
//                                                       sends test ETH and mints test USDC to ADDRESS (default 1, 100)
//   node scripts/demo-chain.mjs paywall RPC PORT PAY_TO serves a sample x402 paywall on 127.0.0.1:PORT
//
// `setup` places a test USDC (tests/contracts/Eip3009Token.sol: EIP-3009, "USD Coin" version "2" as USDC's EIP-712
// domain on base) at USDC's base address and WETH9 at the OP-stack predeploy (base:WETH), so the registry's tokens
// answer balances; deploys Uniswap V2 (the npm builds) with a USDC/WETH pool, and a token outside the registry with
// EIP-2612 permits (Uniswap's test ERC-20). Every transaction comes from the node's first unlocked dev account.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { isDeepStrictEqual } from 'node:util';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const tools = join(repoRoot, 'test-tools');

/** The registry's base addresses (src/domain/asset.rs). */
const USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const WETH = '0x4200000000000000000000000000000000000006';
const E18 = 10n ** 18n;
const E6 = 10n ** 6n;

const word = (v) => (typeof v === 'bigint' ? v.toString(16) : v.replace(/^0x/, '').toLowerCase()).padStart(64, '0');
const utf8Hex = (text) => Buffer.from(text, 'utf8').toString('hex');
/** A `bytes`/`string` tail: its length, then the data right-padded to whole words. */
const dynamic = (hex) => {
  const data = hex.replace(/^0x/, '');
  return word(BigInt(data.length / 2)) + data.padEnd(Math.ceil(data.length / 64) * 64, '0');
};
const hexValue = (v) => `0x${v.toString(16)}`;

function client(url) {
  let id = 0;
  return async (method, params = []) => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: (id += 1), method, params }),
    });
    const body = await res.json();
    if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
    return body.result;
  };
}

async function selector(rpc, signature) {
  return (await rpc('web3_sha3', [`0x${utf8Hex(signature)}`])).slice(2, 10);
}

async function mined(rpc, hash) {
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

async function send(rpc, tx) {
  const [from] = await rpc('eth_accounts');
  return mined(rpc, await rpc('eth_sendTransaction', [{ from, gas: '0x1c9c380', ...tx }]));
}

async function call(rpc, to, signature, words, value = 0n) {
  return send(rpc, { to, data: `0x${await selector(rpc, signature)}${words.join('')}`, value: hexValue(value) });
}

async function deploy(rpc, code) {
  return (await send(rpc, { data: `0x${code.replace(/^0x/, '')}` })).contractAddress;
}

/** Deploys `code` elsewhere and copies what it leaves to `address` (constructor storage is not copied). */
async function place(rpc, address, code) {
  const deployed = await deploy(rpc, code);
  await rpc('anvil_setCode', [address, await rpc('eth_getCode', [deployed, 'latest'])]);
}

const uniswap = (pkg, file) =>
  JSON.parse(readFileSync(join(tools, 'node_modules', '@uniswap', pkg, 'build', file), 'utf8')).bytecode.replace(/^0x/, '');

async function setup(rpc) {
  const [dev] = await rpc('eth_accounts');
  const token = JSON.parse(
    execFileSync('node', [join(tools, 'solc-compile.mjs'), join(repoRoot, 'tests', 'contracts', 'Eip3009Token.sol'), 'Eip3009Token'], {
      maxBuffer: 64 * 1024 * 1024,
    }).toString(),
  );
  // constructor(string name, string version, string symbol): three offsets, then the three strings.
  const tails = ['USD Coin', '2', 'USDC'].map((s) => dynamic(utf8Hex(s)));
  const heads = [];
  let offset = BigInt(3 * 32);
  for (const tail of tails) {
    heads.push(word(offset));
    offset += BigInt(tail.length / 2);
  }
  await place(rpc, USDC, token.bytecode + heads.join('') + tails.join(''));
  await place(rpc, WETH, uniswap('v2-periphery', 'WETH9.json'));
  // WETH9 sets name, symbol and decimals in storage (slots 0, 1, 2), which the copy lacks: write them.
  const shortString = (text) => `0x${utf8Hex(text).padEnd(62, '0')}${(text.length * 2).toString(16).padStart(2, '0')}`;
  await rpc('anvil_setStorageAt', [WETH, '0x0', shortString('Wrapped Ether')]);
  await rpc('anvil_setStorageAt', [WETH, '0x1', shortString('WETH')]);
  await rpc('anvil_setStorageAt', [WETH, '0x2', `0x${word(18n)}`]);
  const factory = await deploy(rpc, uniswap('v2-core', 'UniswapV2Factory.json') + word(dev));
  const router = await deploy(rpc, uniswap('v2-periphery', 'UniswapV2Router02.json') + word(factory) + word(WETH));
  // A pool of 100 000 USDC and 40 ETH (2 500 USDC an ETH).
  await call(rpc, USDC, 'mint(address,uint256)', [word(dev), word(1_000_000n * E6)]);
  await call(rpc, USDC, 'approve(address,uint256)', [word(router), word(100_000n * E6)]);
  await call(
    rpc,
    router,
    'addLiquidityETH(address,uint256,uint256,uint256,address,uint256)',
    [word(USDC), word(100_000n * E6), word(0n), word(0n), word(dev), word(BigInt(2 ** 40))],
    40n * E18,
  );
  // A token outside the registry, with EIP-2612 permits (domain "Uniswap V2", version "1").
  const permitToken = await deploy(rpc, uniswap('v2-core', 'ERC20.json') + word(1_000_000n * E18));
  return { usdc: USDC, weth: WETH, factory, router, permit_token: permitToken };
}

async function fund(rpc, address, eth = '1', usdc = '100') {
  const units = (text, decimals) => {
    const [whole, frac = ''] = text.split('.');
    return BigInt(whole) * 10n ** BigInt(decimals) + BigInt((frac + '0'.repeat(decimals)).slice(0, decimals) || '0');
  };
  await send(rpc, { to: address, value: hexValue(units(eth, 18)), gas: '0x5208' });
  await call(rpc, USDC, 'mint(address,uint256)', [word(address), word(units(usdc, 6))]);
  return { address, eth, usdc };
}

const b64 = (value) => Buffer.from(JSON.stringify(value)).toString('base64');

/**
 * A sample x402 (protocol v2) paywall: `GET /report` costs 0.01 USDC on base, paid to `payTo`; `/free` is free.
 * A retry with `PAYMENT-SIGNATURE` is checked (the entry offered, recipient, amount, time window) and settled with
 * the token's `transferWithAuthorization` from the node's third dev account (the facilitator pays the gas); the
 * token checks the signature itself. A settled payment answers 200 with `PAYMENT-RESPONSE`.
 */
async function paywall(rpc, port, payTo) {
  const accounts = await rpc('eth_accounts');
  const facilitator = accounts[2];
  const settle = await selector(rpc, 'transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)');
  const entry = {
    scheme: 'exact',
    network: 'eip155:8453',
    amount: '10000',
    asset: USDC,
    payTo,
    maxTimeoutSeconds: 300,
    extra: { name: 'USD Coin', version: '2' },
  };
  const server = createServer((req, res) => {
    const path = new URL(req.url, 'http://paywall').pathname;
    const origin = `http://${req.headers.host}`;
    const refuse = (error) => {
      const required = {
        x402Version: 2,
        error,
        resource: { url: `${origin}/report`, description: 'the agentd demo sample report', mimeType: 'application/json' },
        accepts: [entry],
      };
      res.writeHead(402, { 'content-type': 'application/json', 'PAYMENT-REQUIRED': b64(required) });
      res.end('{}');
    };
    if (path === '/free') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"report": "free sample"}');
      return;
    }
    if (path !== '/report') {
      res.writeHead(404);
      res.end();
      return;
    }
    const header = req.headers['payment-signature'];
    if (!header) return refuse('PAYMENT-SIGNATURE header is required');
    let payload;
    try {
      payload = JSON.parse(Buffer.from(header, 'base64').toString('utf8'));
    } catch {
      return refuse('invalid_payload');
    }
    const auth = payload?.payload?.authorization ?? {};
    const signature = payload?.payload?.signature;
    if (!isDeepStrictEqual(payload?.accepted, entry)) return refuse('accepted_requirements_mismatch');
    if (typeof signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(signature)) return refuse('invalid_payload');
    if (String(auth.to).toLowerCase() !== payTo.toLowerCase() || auth.value !== entry.amount) return refuse('invalid_exact_evm_payload');
    const now = BigInt(Math.floor(Date.now() / 1000));
    if (BigInt(auth.validAfter ?? 0) > now || BigInt(auth.validBefore ?? 0) <= now) return refuse('invalid_exact_evm_payload_authorization_valid_before');
    const data =
      `0x${settle}` +
      [auth.from, auth.to].map(word).join('') +
      [auth.value, auth.validAfter, auth.validBefore].map((v) => word(BigInt(v))).join('') +
      word(auth.nonce) +
      word(BigInt(7 * 32)) +
      dynamic(signature);
    rpc('eth_sendTransaction', [{ from: facilitator, to: USDC, data, gas: '0x30d40' }])
      .then((hash) => mined(rpc, hash))
      .then(
        (receipt) => {
          const answer = { success: true, transaction: receipt.transactionHash, network: entry.network, payer: auth.from };
          res.writeHead(200, { 'content-type': 'application/json', 'PAYMENT-RESPONSE': b64(answer) });
          res.end(JSON.stringify({ report: 'the paid sample report', paid_by: auth.from }));
        },
        (e) => refuse(`settlement failed: ${e.message}`),
      );
  });
  await new Promise((r) => server.listen(Number(port), '127.0.0.1', r));
  console.log(`paywall listening on http://127.0.0.1:${server.address().port}`);
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

const [command, url, ...args] = process.argv.slice(2);
if (!url) {
  console.error('usage: demo-chain.mjs setup RPC | fund RPC ADDRESS [ETH] [USDC] | paywall RPC PORT PAY_TO');
  process.exit(2);
}
const rpc = client(url);
try {
  if (command === 'setup') console.log(JSON.stringify(await setup(rpc)));
  else if (command === 'fund') console.log(JSON.stringify(await fund(rpc, ...args)));
  else if (command === 'paywall') await paywall(rpc, args[0], args[1]);
  else throw new Error(`unknown command ${command}`);
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
