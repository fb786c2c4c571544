// The operator's paymaster for sponsored gas (docs/api.md §22) on an anvil node: Pimlico's SingletonPaymaster v0.7,
// unmodified, from the creation code npm `@pimlico/mock-paymaster` 0.0.7 ships (test-tools/paymaster-bytecode.mjs
// reads it), deployed against the EntryPoint the account implementation names, owned and managed by the node's first
// dev account, with no signer; then the operator's part for agentd's sponsor key: `addSigner(sponsor)`,
// `updateBundlerAllowlist([sponsor], true)`, ETH into the deposit (`deposit()`) and ETH to the sponsor for the
// bundles' gas. Used by scripts/demo.sh and the console's browser tests (web/tests). Node.js only.
//
//   node scripts/paymaster.mjs deploy RPC IMPLEMENTATION
//                                               deploys it; prints {"entry_point", "paymaster"} (JSON)
//   node scripts/paymaster.mjs sponsor RPC PAYMASTER SPONSOR DEPOSIT_ETH SPONSOR_ETH
//                                               trusts and allowlists SPONSOR, funds the deposit and SPONSOR
import { execFileSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { call, client, deploy, selector, send, uint, word } from './evm.mjs';

const tools = join(resolve(dirname(fileURLToPath(import.meta.url)), '..'), 'test-tools');
const E18 = 10n ** 18n;

/** Whole ETH as a decimal string ("0.5") in wei. */
export function wei(eth) {
  const [whole, frac = ''] = String(eth).split('.');
  return BigInt(whole || '0') * E18 + BigInt((frac + '0'.repeat(18)).slice(0, 18) || '0');
}

/** A view call's one word, as a bigint. */
async function read(rpc, to, signature, words = []) {
  return BigInt(await rpc('eth_call', [{ to, data: `0x${await selector(rpc, signature)}${words.join('')}` }, 'latest']));
}

/** The EntryPoint an account implementation (the framework's EIP7702StatelessDeleGator) was built with. */
export async function entryPointOf(rpc, implementation) {
  return `0x${(await read(rpc, implementation, 'entryPoint()')).toString(16).padStart(40, '0')}`;
}

/**
 * Deploys `SingletonPaymaster(entryPoint, owner, manager, signers = [])` with owner and manager the node's first dev
 * account; answers its address.
 */
export async function deployPaymaster(rpc, entryPoint) {
  const { SingletonPaymasterV7: code } = JSON.parse(
    execFileSync('node', [join(tools, 'paymaster-bytecode.mjs')], { maxBuffer: 16 * 1024 * 1024 }).toString(),
  );
  const [dev] = await rpc('eth_accounts');
  // (address, address, address, address[]): three words, the array's offset (4 words), then its length 0.
  return deploy(rpc, code + word(entryPoint) + word(dev) + word(dev) + uint(4 * 32) + uint(0));
}

/** The operator's steps for agentd's sponsor key, each from the paymaster's owner (the first dev account). */
export const operatorSteps = {
  trust: (rpc, paymaster, sponsor) => call(rpc, paymaster, 'addSigner(address)', [word(sponsor)]),
  // updateBundlerAllowlist(address[] bundlers, bool allowed): the array's offset, true, then [sponsor].
  allowlist: (rpc, paymaster, sponsor) =>
    call(rpc, paymaster, 'updateBundlerAllowlist(address[],bool)', [uint(2 * 32), uint(1), uint(1), word(sponsor)]),
  deposit: (rpc, paymaster, eth) => call(rpc, paymaster, 'deposit()', [], wei(eth)),
  fundSponsor: (rpc, sponsor, eth) => send(rpc, { to: sponsor, value: `0x${wei(eth).toString(16)}` }),
};

/** The paymaster's deposit at the EntryPoint, in wei. */
export async function depositOf(rpc, entryPoint, paymaster) {
  return read(rpc, entryPoint, 'balanceOf(address)', [word(paymaster)]);
}

/** Run as a command (not imported by a test). */
async function main([command, url, ...args]) {
  const rpc = url ? client(url) : null;
  if (command === 'deploy' && rpc && args.length === 1) {
    const entryPoint = await entryPointOf(rpc, args[0]);
    console.log(JSON.stringify({ entry_point: entryPoint, paymaster: await deployPaymaster(rpc, entryPoint) }));
  } else if (command === 'sponsor' && rpc && args.length === 4) {
    const [paymaster, sponsor, deposit, gas] = args;
    console.log(`    addSigner(${sponsor}): the paymaster trusts the sponsor's approvals`);
    await operatorSteps.trust(rpc, paymaster, sponsor);
    console.log(`    updateBundlerAllowlist([${sponsor}], true): the sponsor may send the bundles`);
    await operatorSteps.allowlist(rpc, paymaster, sponsor);
    console.log(`    deposit() with ${deposit} ETH: the paymaster's deposit at the EntryPoint pays the operations`);
    await operatorSteps.deposit(rpc, paymaster, deposit);
    console.log(`    ${gas} ETH to the sponsor: it pays each bundle's gas, which the EntryPoint pays back`);
    await operatorSteps.fundSponsor(rpc, sponsor, gas);
  } else {
    console.error('usage: paymaster.mjs deploy RPC IMPLEMENTATION | sponsor RPC PAYMASTER SPONSOR DEPOSIT_ETH SPONSOR_ETH');
    process.exit(2);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await main(process.argv.slice(2)).catch((e) => {
    console.error(e.message);
    process.exit(1);
  });
}
