// The demo's local chain (scripts/demo.sh): what a newcomer needs on an anvil node that plays "base" so that
// every part of docs/guide.md can be tried without real money. Node.js only (no packages beyond test-tools).
//
//   node scripts/demo-chain.mjs setup RPC               deploys the demo contracts; prints their addresses (JSON)
//   node scripts/demo-chain.mjs fund RPC ADDRESS [ETH] [USDC]
//                                                       sends test ETH and mints test USDC to ADDRESS (default 1, 100)
//   node scripts/demo-chain.mjs paywall RPC PORT PAY_TO serves a sample x402 paywall on 127.0.0.1:PORT
//   node scripts/demo-chain.mjs upgrade RPC KEY IMPLEMENTATION
//                                                       upgrades KEY's account by EIP-7702 to IMPLEMENTATION
//   node scripts/demo-chain.mjs grant RPC KEY MANAGER ENFORCER DELEGATE TOKEN UNITS PERIOD_SECONDS
//                                                       prints a delegation from KEY's account to DELEGATE (JSON),
//                                                       signed: UNITS of TOKEN per period (erc20_period_transfer)
//
// `setup` places a test USDC (tests/contracts/Eip3009Token.sol: EIP-3009, "USD Coin" version "2" as USDC's EIP-712
// domain on base) at USDC's base address and WETH9 at the OP-stack predeploy (base:WETH), so the registry's tokens
// answer balances; deploys Uniswap V2 (the npm builds) with a USDC/WETH pool, and a token outside the registry with
// EIP-2612 permits (Uniswap's test ERC-20), and the MetaMask Delegation Framework v1.3 (§21) as npm
// `@metamask/delegation-abis` 2.0.0 ships it, unmodified: an EntryPoint v0.7, the DelegationManager, the
// EIP7702StatelessDeleGator an owner's account designates, and the enforcers agentd reads. The framework is deployed
// at fresh addresses, so agentd is told them (`DELEGATION_MANAGER_BASE`, `DELEGATION_ENFORCERS_BASE`: setup prints
// them). Every transaction of `setup` comes from the node's first unlocked dev account; `upgrade` and `grant` sign
// with the key they are given, by Foundry's cast (test-tools), as an owner's wallet would.
// The ABI encoding, the test USDC and the paywall are scripts/evm.mjs, shared with the browser tests (web/tests).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { USDC, call, client, deploy, mintUsdc, place, placeUsdc, send, startPaywall, uniswap, utf8Hex, word } from './evm.mjs';

const tools = join(resolve(dirname(fileURLToPath(import.meta.url)), '..'), 'test-tools');
const cast = join(tools, 'node_modules', '.bin', 'cast');

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
  return { usdc: USDC, weth: WETH, factory, router, permit_token: permitToken, ...(await framework(rpc, dev)) };
}

/** agentd's names of the enforcers it reads (docs/api.md §21), and the framework's contract of each. */
const ENFORCERS = {
  erc20_period_transfer: 'ERC20PeriodTransferEnforcer',
  native_token_period_transfer: 'NativeTokenPeriodTransferEnforcer',
  erc20_transfer_amount: 'ERC20TransferAmountEnforcer',
  native_token_transfer_amount: 'NativeTokenTransferAmountEnforcer',
  exact_calldata: 'ExactCalldataEnforcer',
  allowed_targets: 'AllowedTargetsEnforcer',
  allowed_methods: 'AllowedMethodsEnforcer',
  value_lte: 'ValueLteEnforcer',
  timestamp: 'TimestampEnforcer',
  limited_calls: 'LimitedCallsEnforcer',
};

/**
 * Deploys the framework from the creation bytecode npm `@metamask/delegation-abis` ships (the manager owned by `dev`).
 * Returns the manager, the 7702 delegator implementation, and the enforcers as `DELEGATION_ENFORCERS_<CHAIN>` spells
 * them (`name=address,...`).
 */
async function framework(rpc, dev) {
  const bytecode = createRequire(join(tools, 'package.json'))('@metamask/delegation-abis/bytecode');
  const entryPoint = await deploy(rpc, bytecode.EntryPoint);
  const manager = await deploy(rpc, bytecode.DelegationManager + word(dev));
  const delegator = await deploy(rpc, bytecode.EIP7702StatelessDeleGator + word(manager) + word(entryPoint));
  const enforcers = [];
  for (const [name, contract] of Object.entries(ENFORCERS)) {
    enforcers.push(`${name}=${await deploy(rpc, bytecode[contract])}`);
  }
  return { delegation_manager: manager, delegator_implementation: delegator, delegation_enforcers: enforcers.join(',') };
}

const castOut = (args) => execFileSync(cast, args).toString().trim();

/**
 * The account of `key` designates `implementation` (EIP-7702): one type-4 transaction the account sends itself, its
 * authorization signed by the same key. Returns the account's code (`0xef0100 ‖ implementation`).
 */
async function upgrade(rpc, url, key, implementation) {
  const account = castOut(['wallet', 'address', '--private-key', key]);
  castOut(['send', '--rpc-url', url, '--private-key', key, '--auth', implementation, account]);
  const code = await rpc('eth_getCode', [account, 'latest']);
  if (code.toLowerCase() !== `0xef0100${implementation.replace(/^0x/, '').toLowerCase()}`) {
    throw new Error(`the EIP-7702 upgrade of ${account} did not take: its code is ${code}`);
  }
  return { account, code };
}

/**
 * A root delegation from the account of `key` to `delegate`: `units` of `token` per `period` seconds from the
 * latest block's time (ERC20PeriodTransferEnforcer's terms: token ‖ amount ‖ period ‖ start), a random salt, signed
 * as EIP-712 typed data under the manager's domain (what a wallet's eth_signTypedData_v4 signs). Returns the
 * framework's JSON form, as `POST /api/agents/{id}/delegations` takes it.
 */
async function grant(rpc, key, manager, enforcer, delegate, token, units, period) {
  const delegator = castOut(['wallet', 'address', '--private-key', key]);
  const latest = await rpc('eth_getBlockByNumber', ['latest', false]);
  const terms = `0x${token.replace(/^0x/, '').toLowerCase()}${word(BigInt(units))}${word(BigInt(period))}${word(BigInt(latest.timestamp))}`;
  const delegation = {
    delegate,
    delegator,
    authority: `0x${'f'.repeat(64)}`,
    caveats: [{ enforcer, terms, args: '0x' }],
    salt: BigInt(`0x${randomBytes(8).toString('hex')}`).toString(),
  };
  const typed = {
    types: {
      EIP712Domain: [
        { name: 'name', type: 'string' },
        { name: 'version', type: 'string' },
        { name: 'chainId', type: 'uint256' },
        { name: 'verifyingContract', type: 'address' },
      ],
      Delegation: [
        { name: 'delegate', type: 'address' },
        { name: 'delegator', type: 'address' },
        { name: 'authority', type: 'bytes32' },
        { name: 'caveats', type: 'Caveat[]' },
        { name: 'salt', type: 'uint256' },
      ],
      Caveat: [
        { name: 'enforcer', type: 'address' },
        { name: 'terms', type: 'bytes' },
      ],
    },
    primaryType: 'Delegation',
    domain: { name: 'DelegationManager', version: '1', chainId: Number(await rpc('eth_chainId')), verifyingContract: manager },
    message: { ...delegation, caveats: delegation.caveats.map(({ enforcer: e, terms: t }) => ({ enforcer: e, terms: t })) },
  };
  const signature = castOut(['wallet', 'sign', '--private-key', key, '--data', JSON.stringify(typed)]);
  return { ...delegation, signature };
}

async function fund(rpc, address, eth = '1', usdc = '100') {
  const units = (text, decimals) => {
    const [whole, frac = ''] = text.split('.');
    return BigInt(whole) * 10n ** BigInt(decimals) + BigInt((frac + '0'.repeat(decimals)).slice(0, decimals) || '0');
  };
  // No fixed 21 000 gas: an account upgraded by EIP-7702 (the demo's owner) runs its delegator's code on receipt.
  await send(rpc, { to: address, value: hexValue(units(eth, 18)) });
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
  console.error(
    'usage: demo-chain.mjs setup RPC | fund RPC ADDRESS [ETH] [USDC] | paywall RPC PORT PAY_TO | upgrade RPC KEY IMPLEMENTATION\n' +
      '       | grant RPC KEY MANAGER ENFORCER DELEGATE TOKEN UNITS PERIOD_SECONDS',
  );
  process.exit(2);
}
const rpc = client(url);
try {
  if (command === 'setup') console.log(JSON.stringify(await setup(rpc)));
  else if (command === 'fund') console.log(JSON.stringify(await fund(rpc, ...args)));
  else if (command === 'paywall') await paywall(rpc, args[0], args[1]);
  else if (command === 'upgrade') console.log(JSON.stringify(await upgrade(rpc, url, args[0], args[1])));
  else if (command === 'grant') console.log(JSON.stringify(await grant(rpc, ...args)));
  else throw new Error(`unknown command ${command}`);
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
