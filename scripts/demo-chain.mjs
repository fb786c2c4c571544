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
// The ABI encoding, the test USDC and the paywall are scripts/evm.mjs, shared with the browser tests (web/tests).
import { USDC, call, client, deploy, mintUsdc, place, placeUsdc, send, startPaywall, uniswap, utf8Hex, word } from './evm.mjs';

/** The registry's WETH on base (src/domain/asset.rs); USDC's address is evm.mjs's. */
const WETH = '0x4200000000000000000000000000000000000006';
const E18 = 10n ** 18n;
const E6 = 10n ** 6n;
const hexValue = (v) => `0x${v.toString(16)}`;

async function setup(rpc) {
  const [dev] = await rpc('eth_accounts');
  await placeUsdc(rpc);
  await place(rpc, WETH, uniswap('v2-periphery', 'WETH9.json'));
  // WETH9 sets name, symbol and decimals in storage (slots 0, 1, 2), which the copy lacks: write them.
  const shortString = (text) => `0x${utf8Hex(text).padEnd(62, '0')}${(text.length * 2).toString(16).padStart(2, '0')}`;
  await rpc('anvil_setStorageAt', [WETH, '0x0', shortString('Wrapped Ether')]);
  await rpc('anvil_setStorageAt', [WETH, '0x1', shortString('WETH')]);
  await rpc('anvil_setStorageAt', [WETH, '0x2', `0x${word(18n)}`]);
  const factory = await deploy(rpc, uniswap('v2-core', 'UniswapV2Factory.json') + word(dev));
  const router = await deploy(rpc, uniswap('v2-periphery', 'UniswapV2Router02.json') + word(factory) + word(WETH));
  // A pool of 100 000 USDC and 40 ETH (2 500 USDC an ETH).
  await mintUsdc(rpc, dev, 1_000_000n * E6);
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
  await mintUsdc(rpc, address, units(usdc, 6));
  return { address, eth, usdc };
}

/**
 * The sample paywall (evm.mjs): `GET /report` costs 0.01 USDC on base, paid to `payTo` and settled from the node's
 * third dev account (the first deploys, the second is the demo's owner); `/free` is free.
 */
async function paywall(rpc, port, payTo) {
  const [, , facilitator] = await rpc('eth_accounts');
  const server = await startPaywall({
    rpc,
    port,
    facilitator,
    entry: {
      scheme: 'exact',
      network: 'eip155:8453',
      amount: '10000',
      asset: USDC,
      payTo,
      maxTimeoutSeconds: 300,
      extra: { name: 'USD Coin', version: '2' },
    },
    path: '/report',
    description: 'the agentd demo sample report',
    type: 'application/json',
    body: (auth) => JSON.stringify({ report: 'the paid sample report', paid_by: auth.from }),
    free: { type: 'application/json', body: '{"report": "free sample"}' },
  });
  console.log(`paywall listening on ${server.base}`);
  const stop = () => server.close().then(() => process.exit(0));
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
