// The Delegations tab (docs/api.md §21): what the owner granted the agent's wallet on chain (ERC-7710, the MetaMask
// Delegation Framework v1.3) — each limit with what is left this period, the contracts it may call, its window and
// status — and a form with which an owner holding a browser wallet grants one: the console builds the delegation
// (root authority, the caveats the owner picks, from the enforcers `GET /api/chains` names), the wallet signs it
// (`eth_signTypedData_v4`, EIP-712 under the chain's DelegationManager), the console posts it, then shows the call
// that revokes it on chain (`disableDelegation`, the delegator's own act) and offers to send it with the wallet. An
// account with no code cannot delegate: the form says so before any signature and, where the wallet offers Advanced
// Permissions (ERC-7715), asks it for the budget instead — the wallet upgrades the account and returns the delegation,
// which the console checks and registers.
import { api, call, type AgentDetail, type Budget, type ChainInfo } from './api';
import type { components } from './api-types';
import { compareDecimal, roundAmount } from './amount';
import { clear, copyButton, field, h, shortHex, uid } from './dom';
import { accountCode, ensureChain, injectedWallet, walletAccount } from './wallet-provider';
import { errorLine, notify } from './ui';

export type Delegation = components['schemas']['DelegationView'];
type Limit = components['schemas']['LimitView'];

export interface DelegationsPanel {
  el: HTMLElement;
  load(): void;
}

/** A delegation granted directly by its delegator (no chain of redelegation): `authority` all ones. */
export const ROOT_AUTHORITY = `0x${'f'.repeat(64)}`;

/** A delegation as the framework's JSON form spells it (what `POST …/delegations` takes and the wallet signs). */
export interface SignedDelegation {
  delegate: string;
  delegator: string;
  authority: string;
  caveats: { enforcer: string; terms: string; args: string }[];
  /** Decimal string. */
  salt: string;
  signature: string;
}

const enc = encodeURIComponent;
/** The agent's delegations (agent token or owner authority): also what the send form offers to pay from. */
export const listDelegations = (id: string, token: string | null) =>
  call<Delegation[]>('GET', `/api/agents/${enc(id)}/delegations`, { token, owner: id });
const addDelegation = (id: string, token: string | null, chain: string, delegation: SignedDelegation) =>
  call<Delegation>('POST', `/api/agents/${enc(id)}/delegations`, { token, owner: id, body: { chain, delegation } });
const removeDelegation = (id: string, token: string | null, did: string) =>
  call<void>('DELETE', `/api/agents/${enc(id)}/delegations/${enc(did)}`, { token, owner: id });

// ------------------------------------------------------------------ encodings (the enforcers' terms, the ABI)

const hex = (s: string) => s.replace(/^0x/i, '').toLowerCase();
/** A 32-byte big-endian word of a non-negative integer. */
const word = (n: bigint) => n.toString(16).padStart(64, '0');
/** Bytes right-padded to whole words, after their length. */
const tail = (bytes: string) => word(BigInt(bytes.length / 2)) + bytes.padEnd(Math.ceil(bytes.length / 64) * 64, '0');

/** `ERC20PeriodTransferEnforcer` terms: `token(20) ‖ periodAmount(32) ‖ periodDuration(32) ‖ startDate(32)`. */
export function erc20PeriodTerms(token: string, amount: bigint, period: number, start: number): string {
  return `0x${hex(token)}${word(amount)}${word(BigInt(period))}${word(BigInt(start))}`;
}

/** `NativeTokenPeriodTransferEnforcer` terms: `periodAmount(32) ‖ periodDuration(32) ‖ startDate(32)`. */
export function nativePeriodTerms(amount: bigint, period: number, start: number): string {
  return `0x${word(amount)}${word(BigInt(period))}${word(BigInt(start))}`;
}

/** `AllowedTargetsEnforcer` terms: the addresses, 20 bytes each. */
export const allowedTargetsTerms = (targets: string[]) => `0x${targets.map(hex).join('')}`;

/** `TimestampEnforcer` terms: `after(16) ‖ before(16)` (uint128 each, 0 = none, both exclusive). */
export const timestampTerms = (after: number, before: number) =>
  `0x${BigInt(after).toString(16).padStart(32, '0')}${BigInt(before).toString(16).padStart(32, '0')}`;

/** `disableDelegation((address,address,bytes32,(address,bytes,bytes)[],uint256,bytes))`'s selector (`cast sig`). */
const DISABLE_DELEGATION = '49934047';

/** The ABI encoding of the framework's `Delegation` tuple (a dynamic tuple: its head, then its tails). */
function delegationTuple(d: SignedDelegation): string {
  const caveats = d.caveats.map((c) => {
    const terms = tail(hex(c.terms));
    const args = tail(hex(c.args));
    return word(BigInt(`0x${hex(c.enforcer)}`)) + word(96n) + word(BigInt(96 + terms.length / 2)) + terms + args;
  });
  let offset = 32 * caveats.length;
  const heads = caveats.map((c) => {
    const head = word(BigInt(offset));
    offset += c.length / 2;
    return head;
  });
  const caveatArray = word(BigInt(caveats.length)) + heads.join('') + caveats.join('');
  const signature = tail(hex(d.signature));
  const headSize = 6 * 32;
  return (
    word(BigInt(`0x${hex(d.delegate)}`)) +
    word(BigInt(`0x${hex(d.delegator)}`)) +
    hex(d.authority).padStart(64, '0') +
    word(BigInt(headSize)) +
    word(BigInt(d.salt)) +
    word(BigInt(headSize + caveatArray.length / 2)) +
    caveatArray +
    signature
  );
}

/** The calldata of `disableDelegation(delegation)` on the DelegationManager: what the delegator sends to revoke it. */
export function disableDelegationCalldata(d: SignedDelegation): string {
  return `0x${DISABLE_DELEGATION}${word(32n)}${delegationTuple(d)}`;
}

/**
 * The delegations of an ERC-7715 permission's `context`: `abi.encode(Delegation[])`, the chain from the leaf (the one
 * naming the agent) to the root, as a wallet's `wallet_requestExecutionPermissions` returns it. Throws on anything else.
 */
export function decodePermissionContext(context: string): SignedDelegation[] {
  const data = hex(context);
  if (!/^[0-9a-f]*$/.test(data) || data.length % 64 !== 0) throw new Error('the permission\u2019s context is no ABI encoding');
  const at = (byte: number) => {
    if (byte + 32 > data.length / 2) throw new Error('the permission\u2019s context ends early');
    return BigInt(`0x${data.slice(byte * 2, byte * 2 + 64)}`);
  };
  const num = (byte: number) => Number(at(byte));
  const address = (byte: number) => `0x${data.slice(byte * 2 + 24, byte * 2 + 64)}`;
  const bytes = (byte: number) => {
    const length = num(byte);
    if (byte + 32 + length > data.length / 2) throw new Error('the permission\u2019s context ends early');
    return `0x${data.slice((byte + 32) * 2, (byte + 32 + length) * 2)}`;
  };
  const array = num(0);
  const count = num(array);
  const base = array + 32;
  const out: SignedDelegation[] = [];
  for (let i = 0; i < count; i++) {
    const d = base + num(base + 32 * i);
    const caveatsAt = d + num(d + 96);
    const caveatCount = num(caveatsAt);
    const caveats = [];
    for (let j = 0; j < caveatCount; j++) {
      const c = caveatsAt + 32 + num(caveatsAt + 32 + 32 * j);
      caveats.push({ enforcer: address(c), terms: bytes(c + num(c + 32)), args: bytes(c + num(c + 64)) });
    }
    out.push({
      delegate: address(d),
      delegator: address(d + 32),
      authority: `0x${data.slice((d + 64) * 2, (d + 96) * 2)}`,
      caveats,
      salt: at(d + 128).toString(),
      signature: bytes(d + num(d + 160)),
    });
  }
  return out;
}

/** The EIP-712 typed data of a delegation under the manager's domain (what `eth_signTypedData_v4` signs). */
export function delegationTypedData(d: Omit<SignedDelegation, 'signature'>, chainId: number, manager: string): unknown {
  return {
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
    domain: { name: 'DelegationManager', version: '1', chainId, verifyingContract: manager },
    message: {
      delegate: d.delegate,
      delegator: d.delegator,
      authority: d.authority,
      caveats: d.caveats.map((c) => ({ enforcer: c.enforcer, terms: c.terms })),
      salt: d.salt,
    },
  };
}

/** A decimal amount in whole units as base units (`decimals` places), or null when it is not a positive decimal. */
export function toBaseUnits(amount: string, decimals: number): bigint | null {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(amount.trim());
  if (!m) return null;
  const fraction = m[2] ?? '';
  if (fraction.length > decimals) return null;
  const units = BigInt(m[1] + fraction.padEnd(decimals, '0'));
  return units > 0n ? units : null;
}

// ------------------------------------------------------------------ words

const PERIODS: [number, string, string][] = [
  [3600, 'hour', 'an hour'],
  [86400, 'day', 'a day'],
  [604800, 'week', 'a week'],
];

/** "day", "week", or "3 days", "90 minutes" … for a period in seconds. */
export function periodWords(seconds: number): { noun: string; per: string } {
  const known = PERIODS.find(([s]) => s === seconds);
  if (known) return { noun: known[1], per: known[2] };
  const units: [number, string][] = [
    [604800, 'week'],
    [86400, 'day'],
    [3600, 'hour'],
    [60, 'minute'],
  ];
  for (const [size, name] of units) {
    if (seconds % size === 0) {
      const n = seconds / size;
      const noun = `${n} ${name}${n === 1 ? '' : 's'}`;
      return { noun, per: `every ${noun}` };
    }
  }
  return { noun: `${seconds} seconds`, per: `every ${seconds} seconds` };
}

const localTime = (unix: number) =>
  new Date(unix * 1000).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** The symbol of a limit's asset (`base:USDC` → `USDC`; an unknown token's address shortened). */
function symbolOf(limit: Limit): string {
  const after = limit.asset.slice(limit.asset.indexOf(':') + 1);
  return after.startsWith('0x') ? `units of ${shortHex(after)}` : after;
}

const STATUS_WORDS: Record<string, string> = {
  active: 'Active',
  revoked: 'Revoked on chain',
  expired: 'Expired',
  removed: 'Removed from agentd',
};

/** What `GET …/budget` says a send through one delegation may take now (§21), beside the policy's windows. */
export type DelegationBudget = NonNullable<Budget['delegations']>[number];

/** The budget's entry of a delegation's limit on `asset`, if the service stated one. */
export function budgetOf(budget: Budget | null | undefined, delegationId: string, asset: string): DelegationBudget | null {
  return budget?.delegations?.find((d) => d.delegation_id === delegationId && d.asset.toLowerCase() === asset.toLowerCase()) ?? null;
}

const RULE_WORDS: Record<string, string> = { per_day: 'daily limit', per_week: 'weekly limit', per_transfer: 'per-transfer limit' };

/** A delegation's one "can spend now" figure, in short (for a choice): "0.5 USDC can be spent now (daily limit)". */
export function spendableShort(entry: DelegationBudget, symbol: string): string | null {
  if (entry.spendable == null) return null;
  const why = entry.bound_by && entry.bound_by !== 'delegation' ? RULE_WORDS[entry.bound_by] ?? entry.bound_by : 'what the delegation leaves';
  return `${roundAmount(entry.spendable)} ${symbol} can be spent now (${why})`;
}

/**
 * Why a delegation's "can spend now" is what it is: the agent's own limit that is smaller (its figures from the
 * budget's windows), or the delegation itself. "the agent's own daily limit of 4 USDC has 0.5 left (the delegation
 * leaves 1)".
 */
export function spendableReason(entry: DelegationBudget, budget: Budget | null | undefined, symbol: string): string {
  const available = entry.available == null ? '' : ` (the delegation leaves ${roundAmount(entry.available)})`;
  const key = Object.keys(budget?.limits ?? {}).find((k) => k.toLowerCase() === entry.asset.toLowerCase());
  const windows = key ? budget?.limits?.[key] : undefined;
  switch (entry.bound_by) {
    case 'per_day':
    case 'per_week': {
      const w = windows?.[entry.bound_by];
      const name = entry.bound_by === 'per_day' ? 'daily' : 'weekly';
      return w
        ? `the agent\u2019s own ${name} limit of ${roundAmount(w.limit)} ${symbol} has ${roundAmount(w.left)} left, delegated sends counted${available}`
        : `the agent\u2019s own ${name} limit${available}`;
    }
    case 'per_transfer':
      return `the agent\u2019s own per-transfer limit${available}`;
    default:
      return 'what the delegation leaves this period; the agent\u2019s own limits leave more';
  }
}

/** One limit in words: "5 USDC a day — left this day: 3.5 of 5 USDC". */
function limitEl(limit: Limit, active: boolean, spend: DelegationBudget | null = null, budget: Budget | null = null): HTMLElement {
  const unit = symbolOf(limit);
  const amount = `${roundAmount(limit.amount)} ${unit}`;
  const period = limit.period_seconds ? periodWords(limit.period_seconds) : null;
  const what = period ? `${amount} ${period.per}` : `${amount} in all`;
  const left = !active
    ? 'nothing can be spent through it now'
    : limit.available === null || limit.available === undefined
      ? 'what is left cannot be read now'
      : `left ${period ? `this ${period.noun}` : 'in all'}: ${roundAmount(limit.available)} of ${amount}`;
  const full = limit.available !== null && limit.available !== undefined && compareDecimal(limit.available, limit.amount) === 0;
  return h(
    'li',
    {
      'data-testid': 'delegation-limit',
      'data-asset': limit.asset,
      'data-amount': limit.amount,
      'data-available': limit.available ?? '',
      title: `${limit.asset}: ${limit.amount} per period, ${limit.available ?? 'unknown'} available`,
    },
    h('strong', {}, what),
    ' \u2014 ',
    h('span', { class: full ? '' : 'emphasis', 'data-testid': 'delegation-available' }, left),
    limit.start && period ? h('span', { class: 'muted small' }, ` (periods counted from ${localTime(limit.start)})`) : null,
    // One figure for what a send through it may take now, and why (the agent's own limits count delegated sends).
    active && spend?.spendable != null
      ? h(
          'div',
          { class: 'small', 'data-testid': 'delegation-spendable', 'data-spendable': spend.spendable, 'data-bound-by': spend.bound_by ?? '' },
          h('strong', {}, `Can spend now: ${roundAmount(spend.spendable)} ${unit}`),
          ` \u2014 ${spendableReason(spend, budget, unit)}.`,
        )
      : null,
  );
}

// ------------------------------------------------------------------ what the console granted (for the revoke call)

const GRANTED_KEY = (hash: string) => `agentd.delegation.${hash.toLowerCase()}`;

interface Granted {
  chain: string;
  manager: string;
  delegation: SignedDelegation;
}

function remember(hash: string, granted: Granted): void {
  try {
    localStorage.setItem(GRANTED_KEY(hash), JSON.stringify(granted));
  } catch {
    // storage full or denied: the revoke call is still shown now
  }
}

function recalled(hash: string): Granted | null {
  try {
    const text = localStorage.getItem(GRANTED_KEY(hash));
    return text ? (JSON.parse(text) as Granted) : null;
  } catch {
    return null;
  }
}

/** The signed delegation as the service states it (any registered one, not only those this browser granted). */
function fromView(d: Delegation, manager: string | null | undefined): Granted | null {
  if (!manager) return null;
  const delegation: SignedDelegation = {
    delegate: d.delegate,
    delegator: d.delegator,
    authority: d.authority,
    // The redeemer's `args` are not part of what is signed or hashed.
    caveats: d.caveats.map((c) => ({ enforcer: c.enforcer, terms: c.terms, args: '0x' })),
    salt: d.salt,
    signature: d.signature,
  };
  return { chain: d.chain, manager, delegation };
}

/**
 * The call that revokes a delegation on chain, to copy or to send with the connected wallet (on the delegation's
 * chain only: the wallet is asked to switch to it first, and nothing is sent while it is elsewhere).
 */
function revokeCall(granted: Granted, chain: ChainInfo | undefined): HTMLElement {
  const data = disableDelegationCalldata(granted.delegation);
  const status = h('p', { class: 'muted small', role: 'status', 'data-testid': 'revoke-status' });
  const send = h('button', { type: 'button', class: 'secondary' }, 'Revoke it now with my wallet');
  send.addEventListener('click', async () => {
    const wallet = injectedWallet();
    if (!wallet) {
      status.textContent = 'No browser wallet was found: send the call above from the delegator account yourself.';
      return;
    }
    if (!chain) {
      status.textContent = `Not sent: this server names no chain ${granted.chain}, so the console cannot tell which network to send it on.`;
      return;
    }
    send.disabled = true;
    status.textContent = '';
    try {
      const account = await walletAccount();
      if (account.toLowerCase() !== granted.delegation.delegator.toLowerCase()) {
        throw new Error(`The wallet's account is ${account}; the revocation must come from the delegator ${granted.delegation.delegator}.`);
      }
      await ensureChain(chain, 'Nothing was sent.');
      const hash = (await wallet.request({
        method: 'eth_sendTransaction',
        // The chain id too: a wallet that moved to another network meanwhile refuses it rather than send it there.
        params: [{ from: account, to: granted.manager, data, value: '0x0', chainId: `0x${chain.chain_id.toString(16)}` }],
      })) as string;
      // The list is not read again here: that would replace this card, and this line, before it is read.
      status.textContent = `Sent: transaction ${hash}. agentd notices the revocation within a minute, or at the next read (Refresh).`;
    } catch (e) {
      status.textContent = `Not sent: ${(e as Error).message}`;
      send.disabled = false;
    }
  });
  return h(
    'details',
    { class: 'revoke-call', 'data-testid': 'revoke-call' },
    h('summary', {}, 'How to revoke it on chain'),
    h(
      'p',
      { class: 'small' },
      'Removing it here only stops agentd from using it. To end it for good, the delegator account ',
      h('code', { class: 'mono' }, granted.delegation.delegator),
      ' calls disableDelegation on the DelegationManager with this delegation: send a transaction from that account, ',
      'with no value, to:',
    ),
    h('div', { class: 'row' }, h('code', { class: 'mono wrap', 'data-testid': 'revoke-to' }, granted.manager), copyButton(granted.manager, 'Copy the manager address')),
    h('p', { class: 'small' }, 'with this data:'),
    h('div', { class: 'row' }, h('code', { class: 'mono wrap calldata', 'data-testid': 'revoke-data' }, data), copyButton(data, 'Copy the calldata')),
    h('div', { class: 'row' }, send),
    status,
  );
}

// ------------------------------------------------------------------ the panel

export function delegationsPanel(agent: AgentDetail, token: string | null, chains: ChainInfo[]): DelegationsPanel {
  const heading = uid('delegations');
  const error = errorLine();
  const list = h('ul', { class: 'delegations', 'aria-label': 'Delegations', 'data-testid': 'delegations' });
  const empty = h('p', { class: 'muted', hidden: true }, 'No delegations yet: nothing of an owner\u2019s account is granted to this agent.');
  const refresh = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
  const usable = chains.filter((c) => agent.chains.includes(c.name) && c.delegations);
  const byName = new Map(chains.map((c) => [c.name, c]));

  function card(d: Delegation): HTMLElement {
    const chain = byName.get(d.chain);
    const removeButton =
      d.status === 'removed'
        ? null
        : h('button', { type: 'button', class: 'secondary danger', 'data-testid': 'delegation-remove' }, 'Remove from agentd');
    const removeError = errorLine();
    removeButton?.addEventListener('click', async () => {
      if (!confirm('Stop agentd from using this delegation? Revoking it on chain is a separate step, from the delegator account.')) return;
      removeButton.disabled = true;
      removeError.clear();
      try {
        await removeDelegation(agent.id, token, d.id);
        notify('The delegation is removed: agentd no longer uses it.');
        load();
      } catch (e) {
        removeError.show(e);
        removeButton.disabled = false;
      }
    });
    const granted = recalled(d.hash) ?? fromView(d, chain?.delegations?.manager);
    const span: string[] = [];
    if (d.not_before) span.push(`usable after ${localTime(d.not_before)}`);
    if (d.expires_at) span.push(`usable until ${localTime(d.expires_at)}`);
    return h(
      'li',
      { class: 'card delegation', 'data-testid': 'delegation', 'data-delegation-id': d.id, 'data-status': d.status, 'data-hash': d.hash },
      h(
        'div',
        { class: 'row spread' },
        h('strong', {}, `From ${shortHex(d.delegator)} on ${d.chain}`),
        h('span', { class: `badge status-${d.status}`, 'data-testid': 'delegation-status' }, STATUS_WORDS[d.status] ?? d.status),
      ),
      h(
        'p',
        { class: 'small muted' },
        'The owner\u2019s account ',
        h('code', { class: 'mono wrap', title: d.delegator }, d.delegator),
        ' lets this agent\u2019s wallet ',
        h('code', { class: 'mono wrap', title: d.delegate }, d.delegate),
        ` spend from it${chain ? ` on ${d.chain}` : ''}, within these limits the chain enforces:`,
      ),
      h('ul', { class: 'limits' }, d.limits.map((l) => limitEl(l, d.status === 'active', budgetOf(budget, d.id, l.asset), budget))),
      d.targets ? h('p', { class: 'small' }, 'Only to these contracts or addresses: ', d.targets.flatMap((t, i) => [i ? ', ' : '', h('code', { class: 'mono wrap' }, t)])) : null,
      span.length ? h('p', { class: 'small' }, `${span.join(', ')}.`) : null,
      d.revoked_at ? h('p', { class: 'small' }, `Revoked on chain; agentd noticed it ${new Date(d.revoked_at).toLocaleString()}.`) : null,
      h('p', { class: 'muted small' }, `Registered ${new Date(d.created_at).toLocaleString()} \u00b7 id `, h('code', { class: 'mono' }, d.id)),
      granted && d.status === 'active' ? revokeCall(granted, chain) : null,
      removeError.el,
      removeButton ? h('div', { class: 'row' }, removeButton) : null,
    );
  }

  // What the service says each delegation lets a send take now (`GET …/budget`), read with the list.
  let budget: Budget | null = null;
  async function load(): Promise<void> {
    error.clear();
    try {
      const [all, stated] = await Promise.all([listDelegations(agent.id, token), api.budget(agent.id, token).catch(() => null)]);
      budget = stated;
      clear(list);
      list.append(...all.map(card));
      empty.hidden = all.length > 0;
    } catch (e) {
      error.show(e);
    }
  }
  refresh.addEventListener('click', () => void load());

  const el = h(
    'section',
    { class: 'stack', 'aria-labelledby': heading, 'data-testid': 'delegations-panel' },
    h(
      'div',
      { class: 'card' },
      h('div', { class: 'row spread' }, h('h2', { id: heading }, 'Delegations'), refresh),
      h(
        'p',
        { class: 'muted small' },
        'Money an owner keeps in their own account (an EOA upgraded by EIP-7702, or a smart account) and lets this agent ',
        'spend under limits the chain itself enforces (ERC-7710): a stolen agent key can take no more than what is left.',
      ),
      error.el,
      empty,
      list,
    ),
    grantForm(agent, token, usable, load),
  );
  return { el, load: () => void load() };
}

// ------------------------------------------------------------------ the grant form

function grantForm(agent: AgentDetail, token: string | null, usable: ChainInfo[], onGranted: () => void): HTMLElement {
  const heading = uid('grant');
  if (!usable.length) {
    return h(
      'section',
      { class: 'card', 'aria-labelledby': heading },
      h('h3', { id: heading }, 'Grant a delegation'),
      h('p', { class: 'muted' }, 'None of this agent\u2019s chains has a DelegationManager configured on this server (DELEGATION_MANAGER_<CHAIN>).'),
    );
  }
  const chain = h('select', {}, usable.map((c) => h('option', { value: c.name }, c.name)));
  const asset = h('select', {});
  const amount = h('input', { type: 'text', inputmode: 'decimal', autocomplete: 'off', placeholder: '5', required: true });
  const period = h(
    'select',
    {},
    h('option', { value: '86400' }, 'a day'),
    h('option', { value: '604800' }, 'a week'),
    h('option', { value: 'custom' }, 'another period (seconds)'),
  );
  const seconds = h('input', { type: 'number', min: 60, step: 1, value: 3600, hidden: true });
  const secondsField = field('Period in seconds', seconds);
  secondsField.hidden = true;
  period.addEventListener('change', () => {
    secondsField.hidden = period.value !== 'custom';
    seconds.hidden = period.value !== 'custom';
  });
  const targets = h('textarea', { rows: 2, spellcheck: 'false', placeholder: '0x… one address a line (optional)' });
  const until = h('input', { type: 'datetime-local' });
  const error = errorLine();
  const submit = h('button', { type: 'submit' }, 'Sign with my wallet and grant');
  const result = h('div', { 'data-testid': 'grant-result' });

  const chainInfo = () => usable.find((c) => c.name === chain.value)!;
  function fillAssets(): void {
    const c = chainInfo();
    clear(asset);
    const enforcers = c.delegations?.enforcers ?? {};
    if (enforcers.erc20_period_transfer) for (const t of c.tokens) asset.append(h('option', { value: t.symbol }, `${t.symbol} (token)`));
    if (enforcers.native_token_period_transfer && enforcers.exact_calldata) asset.append(h('option', { value: c.native_symbol }, `${c.native_symbol} (native coin)`));
  }
  // On chain, a token amount caveat already pins the call to the token's `transfer`, so addresses restrict only a
  // native coin's recipients (the execution's target); for a token, the policy's allowed recipients do that.
  const targetsField = field('Only to these recipients (optional)', targets, 'The native coin may then be sent to these addresses only, whatever agentd is told.');
  const syncTargets = () => {
    targetsField.hidden = asset.value !== chainInfo().native_symbol;
  };
  chain.addEventListener('change', () => {
    fillAssets();
    syncTargets();
  });
  asset.addEventListener('change', syncTargets);
  fillAssets();
  syncTargets();

  const form = h(
    'form',
    { class: 'card grant', 'aria-labelledby': heading, 'data-testid': 'grant-form' },
    h('h3', { id: heading }, 'Grant a delegation'),
    h(
      'p',
      { class: 'muted small' },
      'Your browser wallet signs a delegation from its account to this agent\u2019s wallet: at most the amount each ',
      'period, in one asset. The account must be an EOA upgraded by EIP-7702 to the framework\u2019s delegator, or a ',
      'smart account. No key leaves your wallet.',
    ),
    field('Chain', chain),
    field('Asset', asset),
    field('Amount per period', amount, 'In whole units, e.g. 5 or 0.25'),
    field('Period', period),
    secondsField,
    targetsField,
    field('Usable until (optional, your local time)', until),
    error.el,
    h('div', { class: 'row' }, submit),
    result,
  );

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.clear();
    clear(result);
    const c = chainInfo();
    const config = c.delegations;
    if (!config) return;
    const native = asset.value === c.native_symbol;
    const tokenInfo = c.tokens.find((t) => t.symbol === asset.value);
    const decimals = native ? c.decimals : (tokenInfo?.decimals ?? 18);
    const units = toBaseUnits(amount.value, decimals);
    if (units === null) {
      error.show(new Error(`The amount must be a positive number with at most ${decimals} decimals.`));
      return;
    }
    const periodSeconds = period.value === 'custom' ? Number(seconds.value) : Number(period.value);
    if (!Number.isInteger(periodSeconds) || periodSeconds < 1) {
      error.show(new Error('The period must be a whole number of seconds.'));
      return;
    }
    const addresses = (targetsField.hidden ? '' : targets.value)
      .split(/[\s,]+/)
      .map((t) => t.trim())
      .filter(Boolean);
    const bad = addresses.find((a) => !/^0x[0-9a-fA-F]{40}$/.test(a));
    if (bad) {
      error.show(new Error(`${bad} is not an address (0x and 40 hex digits).`));
      return;
    }
    let before = 0;
    if (until.value) {
      before = Math.floor(new Date(until.value).getTime() / 1000);
      if (!Number.isFinite(before) || before <= Date.now() / 1000) {
        error.show(new Error('"Usable until" must be in the future.'));
        return;
      }
    }
    const delegate = agent.wallet_addresses[c.name];
    if (!delegate) {
      error.show(new Error(`The agent has no wallet on ${c.name}.`));
      return;
    }
    // The first period starts an hour back on this computer's clock, so that a chain whose latest block is a little
    // behind it already counts the period as started.
    const start = Math.floor(Date.now() / 1000) - 3600;
    const e = config.enforcers;
    const caveats: { enforcer: string; terms: string; args: string }[] = [];
    if (native) {
      caveats.push({ enforcer: e.native_token_period_transfer, terms: nativePeriodTerms(units, periodSeconds, start), args: '0x' });
      caveats.push({ enforcer: e.exact_calldata, terms: '0x', args: '0x' });
    } else if (tokenInfo) {
      caveats.push({ enforcer: e.erc20_period_transfer, terms: erc20PeriodTerms(tokenInfo.address, units, periodSeconds, start), args: '0x' });
    }
    if (addresses.length) {
      if (!e.allowed_targets) {
        error.show(new Error('This server reads no allowed_targets enforcer on this chain.'));
        return;
      }
      caveats.push({ enforcer: e.allowed_targets, terms: allowedTargetsTerms(addresses), args: '0x' });
    }
    if (before) {
      if (!e.timestamp) {
        error.show(new Error('This server reads no timestamp enforcer on this chain.'));
        return;
      }
      caveats.push({ enforcer: e.timestamp, terms: timestampTerms(0, before), args: '0x' });
    }
    // §21 `caveat_conflict`: a stateful enforcer keeps one state per delegation, so it may appear once. The form
    // builds one amount caveat; this holds the line if it ever grows another, before the wallet is asked to sign.
    const conflict = statefulConflict(caveats, e);
    if (conflict) {
      error.show(new Error(`Two ${conflict} limits cannot share one delegation: the chain would keep only one of them.`));
      return;
    }
    const wallet = injectedWallet();
    if (!wallet) {
      error.show(new Error('No browser wallet was found: granting needs one to sign the delegation.'));
      return;
    }
    submit.disabled = true;
    try {
      const delegator = await walletAccount();
      // EIP-712 binds the signature to the chain id in its domain; a wallet on another network would sign for that
      // one (or refuse): it is asked to switch first, and nothing is signed while it is elsewhere.
      await ensureChain(c, 'Nothing was signed.');
      // Only an account with code (a smart account, or an EOA upgraded by EIP-7702) can be a delegator: a plain one
      // is refused before the wallet is asked to sign (the service would refuse it after, delegator_not_smart).
      if ((await accountCode(delegator)).replace(/^0x/i, '') === '') {
        // A wallet with Advanced Permissions (ERC-7715, as MetaMask's) makes the account a delegating one itself
        // and returns the permission's delegation: offered where the wallet says it grants this kind.
        const kind = native ? 'native-token-periodic' : 'erc20-token-periodic';
        const offer = addresses.length ? null : await supportedPermission(c.chain_id, kind);
        const steps = plainAccountSteps(delegator, c);
        if (offer) {
          steps.append(
            permissionOffer(async () => {
              const data: Record<string, unknown> = {
                periodAmount: `0x${units.toString(16)}`,
                periodDuration: periodSeconds,
                startTime: start,
                justification: `agentd: ${amount.value.trim()} ${asset.value} ${periodWords(periodSeconds).per} for agent ${agent.name}`,
              };
              if (!native && tokenInfo) data.tokenAddress = tokenInfo.address;
              const permission: PermissionRequest = {
                chainId: `0x${c.chain_id.toString(16)}`,
                from: delegator,
                to: delegate,
                permission: { type: kind, data },
                rules: before ? [{ type: 'expiry', data: { timestamp: before } }] : [],
                isAdjustmentAllowed: false,
              };
              const delegation = await requestPermission(permission, c, config.manager, delegator, delegate);
              const added = await addDelegation(agent.id, token, c.name, delegation);
              const granted = { chain: c.name, manager: config.manager, delegation };
              remember(added.hash, granted);
              clear(result);
              result.append(
                h(
                  'p',
                  { class: 'success', role: 'status', 'data-testid': 'grant-done' },
                  `Granted through your wallet\u2019s permission request: ${roundAmount(amount.value.trim())} ${asset.value} ${periodWords(periodSeconds).per} from ${delegator} to this agent. Your wallet made the account a delegating account.`,
                ),
                revokeCall(granted, c),
              );
              (result.querySelector('details') as HTMLDetailsElement | null)?.setAttribute('open', '');
              amount.value = '';
              onGranted();
            }),
          );
        }
        result.append(steps);
        return;
      }
      const salt = BigInt(`0x${Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('')}`).toString();
      const unsigned = { delegate, delegator, authority: ROOT_AUTHORITY, caveats, salt };
      const typed = delegationTypedData(unsigned, c.chain_id, config.manager);
      const signature = (await wallet.request({ method: 'eth_signTypedData_v4', params: [delegator, JSON.stringify(typed)] })) as string;
      if (typeof signature !== 'string' || !signature.startsWith('0x')) throw new Error('The wallet returned no signature.');
      const delegation: SignedDelegation = { ...unsigned, signature };
      const added = await addDelegation(agent.id, token, c.name, delegation);
      const granted = { chain: c.name, manager: config.manager, delegation };
      remember(added.hash, granted);
      const words = `${roundAmount(amount.value.trim())} ${asset.value} ${periodWords(periodSeconds).per}`;
      result.append(
        h('p', { class: 'success', role: 'status', 'data-testid': 'grant-done' }, `Granted: ${words} from ${delegator} to this agent.`),
        revokeCall(granted, c),
      );
      (result.querySelector('details') as HTMLDetailsElement | null)?.setAttribute('open', '');
      amount.value = '';
      onGranted();
    } catch (err) {
      error.show(err);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

/** An ERC-7715 permission request, as `wallet_requestExecutionPermissions` takes it (MetaMask's Advanced Permissions). */
interface PermissionRequest {
  chainId: string;
  from: string;
  /** Who may redeem it: the agent's wallet. */
  to: string;
  permission: { type: string; data: Record<string, unknown> };
  rules: { type: string; data: Record<string, unknown> }[];
  isAdjustmentAllowed: boolean;
}

/** Whether the wallet grants permissions of `kind` on the chain (`wallet_getSupportedExecutionPermissions`). */
async function supportedPermission(chainId: number, kind: string): Promise<boolean> {
  const wallet = injectedWallet();
  if (!wallet) return false;
  try {
    const answer = (await wallet.request({ method: 'wallet_getSupportedExecutionPermissions', params: [] })) as Record<string, { chainIds?: unknown[] }> | null;
    const entry = answer?.[kind];
    if (!entry) return false;
    return !Array.isArray(entry.chainIds) || entry.chainIds.some((id) => Number(id) === chainId);
  } catch {
    // A wallet without ERC-7715 answers "method not found".
    return false;
  }
}

/**
 * Asks the wallet for `permission` (ERC-7715) and returns the delegation to register: the one its `context` holds,
 * checked before anything is posted — on this server's DelegationManager, granted directly (root authority, one
 * delegation: a chain of redelegations is not registered here), from `delegator` to `delegate`.
 */
async function requestPermission(
  permission: PermissionRequest,
  chain: ChainInfo,
  manager: string,
  delegator: string,
  delegate: string,
): Promise<SignedDelegation> {
  const wallet = injectedWallet();
  if (!wallet) throw new Error('No browser wallet was found.');
  await ensureChain(chain, 'Nothing was asked of the wallet.');
  const answer = (await wallet.request({ method: 'wallet_requestExecutionPermissions', params: [permission] })) as
    | { context?: string; delegationManager?: string; signerMeta?: { delegationManager?: string } }[]
    | null;
  const granted = answer?.[0];
  if (!granted?.context) throw new Error('The wallet granted no permission (its answer carries no context).');
  const theirs = granted.delegationManager ?? granted.signerMeta?.delegationManager;
  if (theirs && theirs.toLowerCase() !== manager.toLowerCase()) {
    throw new Error(`The wallet\u2019s permission is for the DelegationManager ${theirs}, not this server\u2019s ${manager} on ${chain.name}: agentd cannot redeem it.`);
  }
  const chainOf = decodePermissionContext(granted.context);
  if (chainOf.length !== 1 || chainOf[0].authority.toLowerCase() !== ROOT_AUTHORITY) {
    throw new Error('The wallet returned a chain of delegations (a redelegation): agentd registers only a delegation its delegator granted directly.');
  }
  const d = chainOf[0];
  if (d.delegate.toLowerCase() !== delegate.toLowerCase() || d.delegator.toLowerCase() !== delegator.toLowerCase()) {
    throw new Error(`The wallet\u2019s delegation is from ${d.delegator} to ${d.delegate}, not from ${delegator} to this agent\u2019s wallet ${delegate}.`);
  }
  return d;
}

/** The button that asks the wallet for the permission instead (ERC-7715), with what it will do. */
function permissionOffer(run: () => Promise<void>): HTMLElement {
  const error = errorLine();
  const button = h('button', { type: 'button', 'data-testid': 'grant-permission' }, 'Ask my wallet for this permission instead');
  button.addEventListener('click', async () => {
    error.clear();
    button.disabled = true;
    try {
      await run();
    } catch (err) {
      error.show(err);
      button.disabled = false;
    }
  });
  return h(
    'div',
    { class: 'permission-offer', 'data-testid': 'permission-offer' },
    h(
      'p',
      {},
      h('strong', {}, 'Your wallet can do both in one step. '),
      'It offers Advanced Permissions (ERC-7715): asked for this budget, it upgrades your account to the framework\u2019s delegator (EIP-7702) and signs the delegation to this agent\u2019s wallet, which the console then registers. Your wallet shows what it grants before you approve.',
    ),
    h('div', { class: 'row' }, button),
    error.el,
  );
}

/**
 * Why a plain account cannot grant, and how to get a delegating account: an EIP-7702 upgrade to the framework's
 * delegator (or a smart account of the framework), then grant again; on the demo's node, its owner account.
 */
function plainAccountSteps(account: string, chain: ChainInfo): HTMLElement {
  return h(
    'div',
    { class: 'form-error plain-account', role: 'alert', 'data-testid': 'grant-plain-account' },
    h(
      'p',
      {},
      h('strong', {}, `Your account ${account} is a plain account on ${chain.name}: it has no code`),
      ', so the DelegationManager cannot spend from it and agentd would refuse its delegation (delegator_not_smart). Nothing was signed.',
    ),
    h('p', {}, 'To grant from your own account, make it a delegating account first, then grant here again:'),
    h(
      'ol',
      { class: 'small' },
      h(
        'li',
        {},
        'Upgrade it by EIP-7702 to the Delegation Framework\u2019s EIP7702StatelessDeleGator: one type-4 transaction the account signs itself, ',
        'from a wallet that offers the smart-account upgrade, or with Foundry: ',
        h('code', { class: 'mono wrap' }, `cast send --auth <EIP7702StatelessDeleGator address> ${account} --private-key <your key> --rpc-url <node>`),
        '. A smart account of the framework works as it is.',
      ),
      h(
        'li',
        {},
        'On the demo\u2019s node, its owner account is upgraded already: import the key it prints (',
        h('code', { class: 'mono' }, 'OWNER_KEY'),
        ') into your browser wallet, or upgrade yours with ',
        h('code', { class: 'mono wrap' }, 'node scripts/demo-chain.mjs upgrade <node URL> <your key> <EIP7702StatelessDeleGator address>'),
        '.',
      ),
    ),
  );
}

/** The name of a stateful enforcer (§21) that two of `caveats` name, or null: such a pair is refused by the server. */
export function statefulConflict(caveats: { enforcer: string }[], enforcers: Record<string, string | undefined>): string | null {
  const stateful = ['erc20_period_transfer', 'native_token_period_transfer', 'erc20_transfer_amount', 'native_token_transfer_amount', 'limited_calls'];
  for (const name of stateful) {
    const address = enforcers[name]?.toLowerCase();
    if (address && caveats.filter((c) => c.enforcer.toLowerCase() === address).length > 1) return name;
  }
  return null;
}
