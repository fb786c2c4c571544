// The real, unmodified MetaMask Delegation Framework v1.3 on the browser tests' anvil (as tests/api/helpers/
// delegation_framework.rs deploys it for the Rust tests): the creation bytecode npm `@metamask/delegation-abis` 2.0.0
// ships (read by test-tools/delegation-bytecode.mjs), deployed from anvil's dev account — an EntryPoint, the
// DelegationManager, the EIP7702StatelessDeleGator and the ten enforcers agentd reads — and an owner EOA, whose key
// only the test holds, upgraded to the delegator by an EIP-7702 transaction (`cast send --auth`).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { deploy, word } from '../../scripts/evm.mjs';
import { repoRoot } from './harness.mjs';

const tools = join(repoRoot, 'test-tools');
export const castBin = join(tools, 'node_modules', '.bin', 'cast');

/** agentd's enforcer names (DELEGATION_ENFORCERS_<CHAIN>) and the framework's contracts (src/domain/delegation.rs). */
export const ENFORCERS = [
  ['erc20_period_transfer', 'ERC20PeriodTransferEnforcer'],
  ['native_token_period_transfer', 'NativeTokenPeriodTransferEnforcer'],
  ['erc20_transfer_amount', 'ERC20TransferAmountEnforcer'],
  ['native_token_transfer_amount', 'NativeTokenTransferAmountEnforcer'],
  ['exact_calldata', 'ExactCalldataEnforcer'],
  ['allowed_targets', 'AllowedTargetsEnforcer'],
  ['allowed_methods', 'AllowedMethodsEnforcer'],
  ['value_lte', 'ValueLteEnforcer'],
  ['timestamp', 'TimestampEnforcer'],
  ['limited_calls', 'LimitedCallsEnforcer'],
];

/** Deploys the framework; answers its addresses and the agentd configuration naming them (chain "base"). */
export async function deployFramework(rpc) {
  const names = ['EntryPoint', 'DelegationManager', 'EIP7702StatelessDeleGator', ...ENFORCERS.map(([, c]) => c)];
  const code = JSON.parse(
    execFileSync('node', [join(tools, 'delegation-bytecode.mjs'), ...names], { maxBuffer: 64 * 1024 * 1024 }).toString(),
  );
  const strip = (hex) => hex.replace(/^0x/, '');
  const dev = (await rpc('eth_accounts'))[0];
  const entryPoint = await deploy(rpc, strip(code.EntryPoint));
  const manager = await deploy(rpc, strip(code.DelegationManager) + word(dev));
  const delegator = await deploy(rpc, strip(code.EIP7702StatelessDeleGator) + word(manager) + word(entryPoint));
  const enforcers = {};
  for (const [name, contract] of ENFORCERS) enforcers[name] = await deploy(rpc, strip(code[contract]));
  return {
    entryPoint,
    manager,
    delegator,
    enforcers,
    env: {
      DELEGATION_MANAGER_BASE: manager,
      DELEGATION_ENFORCERS_BASE: Object.entries(enforcers)
        .map(([name, address]) => `${name}=${address}`)
        .join(','),
    },
  };
}

/** A fresh key pair made by cast: `{ address, privateKey }`. */
export function newKey() {
  const [made] = JSON.parse(execFileSync(castBin, ['wallet', 'new', '--json']).toString());
  return { address: made.address, privateKey: made.private_key };
}

/**
 * Upgrades the EOA of `owner` to `implementation` with an EIP-7702 (type 4) transaction the owner signs and sends
 * itself (it must hold ETH for the gas); answers the account's code (`0xef0100 ‖ implementation`).
 */
export async function upgradeToDelegator(rpc, rpcUrl, owner, implementation) {
  execFileSync(castBin, ['send', '--rpc-url', rpcUrl, '--private-key', owner.privateKey, '--auth', implementation, owner.address], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return rpc('eth_getCode', [owner.address, 'latest']);
}

/** An EIP-712 signature of `typedData` (the JSON text `eth_signTypedData_v4` takes) with the owner's key. */
export function signTypedData(owner, typedDataJson) {
  return execFileSync(castBin, ['wallet', 'sign', '--private-key', owner.privateKey, '--data', typedDataJson]).toString().trim();
}
