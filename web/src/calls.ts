// Contract calls and typed-data signatures (docs/api.md §18) as a person reads them: the function and contract, the
// arguments with their names where known, and what the simulation showed ("You send / You receive / You allow").
// Used by the approvals inbox (a full card) and the history (a compact line).
import type { ChainInfo } from './api';
import { h, shortHex } from './dom';

/** `call` of a transfer of kind `call`. */
export interface CallInfo {
  to: string;
  selector: string | null;
  function: string | null;
  args: unknown[] | null;
}

/** One balance change of the agent's wallet: whole units for registry assets, base units with `token` otherwise. */
export interface BalanceChange {
  asset: string;
  token?: string | null;
  amount: string;
  direction: string;
}

/** An allowance the call or signature grants. */
export interface Allowance {
  token: string;
  spender: string;
  amount: string;
  unlimited: boolean;
}

export interface Simulation {
  changes?: BalanceChange[];
  approvals?: Allowance[];
  gas_used?: number;
}

/** What §18 adds to a transfer (typed loosely in the committed document: read defensively). */
export interface CallFields {
  kind?: string | null;
  chain: string;
  call?: CallInfo | null;
  /** A batch (§22): each call in order (`call` is then null). */
  calls?: CallInfo[] | null;
  simulation?: unknown;
  primary_type?: string | null;
  typed_data?: { signature: string; digest: string } | null;
}

/** One entry of a JSON ABI (only what naming arguments needs). */
interface AbiParam {
  name?: string;
  type: string;
  components?: AbiParam[];
}
interface AbiEntry {
  type?: string;
  name?: string;
  inputs?: AbiParam[];
  stateMutability?: string;
}
/** `calls.abis` of a policy: `"<chain>:<address>"` → ABI. */
export type Abis = Record<string, AbiEntry[]>;

/** Parameter names of common functions whose canonical signature carries none. */
const KNOWN_NAMES: Record<string, string[]> = {
  'approve(address,uint256)': ['spender', 'amount'],
  'transfer(address,uint256)': ['to', 'amount'],
  'transferFrom(address,address,uint256)': ['from', 'to', 'amount'],
  'increaseAllowance(address,uint256)': ['spender', 'addedValue'],
  'decreaseAllowance(address,uint256)': ['spender', 'subtractedValue'],
  'setApprovalForAll(address,bool)': ['operator', 'approved'],
  'safeTransferFrom(address,address,uint256)': ['from', 'to', 'tokenId'],
  'withdraw(uint256)': ['amount'],
  'deposit()': [],
  'swapExactTokensForETH(uint256,uint256,address[],address,uint256)': ['amountIn', 'amountOutMin', 'path', 'to', 'deadline'],
  'swapExactTokensForTokens(uint256,uint256,address[],address,uint256)': ['amountIn', 'amountOutMin', 'path', 'to', 'deadline'],
  'swapTokensForExactETH(uint256,uint256,address[],address,uint256)': ['amountOut', 'amountInMax', 'path', 'to', 'deadline'],
  'swapTokensForExactTokens(uint256,uint256,address[],address,uint256)': ['amountOut', 'amountInMax', 'path', 'to', 'deadline'],
  'swapExactETHForTokens(uint256,address[],address,uint256)': ['amountOutMin', 'path', 'to', 'deadline'],
  'swapETHForExactTokens(uint256,address[],address,uint256)': ['amountOut', 'path', 'to', 'deadline'],
  'addLiquidityETH(address,uint256,uint256,uint256,address,uint256)': [
    'token',
    'amountTokenDesired',
    'amountTokenMin',
    'amountETHMin',
    'to',
    'deadline',
  ],
};

export function simulationOf(t: CallFields): Simulation {
  const s = t.simulation;
  return s && typeof s === 'object' ? (s as Simulation) : {};
}

/** `swapExactTokensForETH(uint256,…)` → `swapExactTokensForETH`. */
export function functionName(signature: string): string {
  const open = signature.indexOf('(');
  return open < 0 ? signature : signature.slice(0, open);
}

/** The top-level parameter types of a signature (tuples kept whole). */
export function paramTypes(signature: string): string[] {
  const open = signature.indexOf('(');
  if (open < 0 || !signature.endsWith(')')) return [];
  const inner = signature.slice(open + 1, -1);
  const types: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < inner.length; i += 1) {
    if (inner[i] === '(') depth += 1;
    else if (inner[i] === ')') depth -= 1;
    else if (inner[i] === ',' && depth === 0) {
      types.push(inner.slice(start, i).trim());
      start = i + 1;
    }
  }
  if (inner.trim()) types.push(inner.slice(start).trim());
  return types;
}

function canonicalType(p: AbiParam): string {
  if (p.type.startsWith('tuple')) return `(${(p.components ?? []).map(canonicalType).join(',')})${p.type.slice(5)}`;
  return p.type;
}

/** A function an ABI of the policy names for one contract: its canonical signature and parameter names. */
export interface AbiFunction {
  signature: string;
  names: (string | null)[];
  payable: boolean;
}

/** The functions of the ABI the policy names for `to` on `chain` (`calls.abis["<chain>:<address>"]`). */
export function abiFunctions(chain: string, to: string, abis: Abis | null): AbiFunction[] {
  const key = `${chain}:${to}`.toLowerCase();
  const out: AbiFunction[] = [];
  for (const [where, abi] of Object.entries(abis ?? {})) {
    if (where.toLowerCase() !== key || !Array.isArray(abi)) continue;
    for (const e of abi) {
      if ((e.type ?? 'function') !== 'function' || !e.name) continue;
      out.push({
        signature: `${e.name}(${(e.inputs ?? []).map(canonicalType).join(',')})`,
        names: (e.inputs ?? []).map((p) => p.name || null),
        payable: e.stateMutability === 'payable',
      });
    }
  }
  return out;
}

/** The names of a call's arguments: from an ABI the policy names for its contract, else a known function's. */
export function argNames(chain: string, call: CallInfo, abis: Abis | null): (string | null)[] {
  const fn = call.function;
  if (!fn) return [];
  const key = `${chain}:${call.to}`.toLowerCase();
  for (const [where, abi] of Object.entries(abis ?? {})) {
    if (where.toLowerCase() !== key || !Array.isArray(abi)) continue;
    const entry = abi.find((e) => (e.type ?? 'function') === 'function' && `${e.name}(${(e.inputs ?? []).map(canonicalType).join(',')})` === fn);
    if (entry) return (entry.inputs ?? []).map((p) => p.name || null);
  }
  return KNOWN_NAMES[fn] ?? [];
}

function isAddress(v: unknown): v is string {
  return typeof v === 'string' && /^0x[0-9a-fA-F]{40}$/.test(v);
}

/** An argument as text: addresses shortened (full on hover), arrays and tuples bracketed. */
export function argNode(value: unknown): Node {
  if (isAddress(value)) return h('code', { class: 'mono', title: value }, shortHex(value, 6, 4));
  if (Array.isArray(value)) {
    const span = h('span', {}, '[');
    value.forEach((v, i) => {
      if (i) span.append(', ');
      span.append(argNode(v));
    });
    span.append(']');
    return span;
  }
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return h('code', { class: 'mono', title: text.length > 24 ? text : null }, text.length > 42 ? `${text.slice(0, 20)}…${text.slice(-8)}` : text);
}

/** A token address as a person reads it: the registry's symbol when it is one, else the short address. */
function tokenLabel(chain: string, address: string, chains: ChainInfo[]): { label: Node; whole: boolean } {
  const info = chains.find((c) => c.name === chain);
  const known = info?.tokens.find((t) => t.address.toLowerCase() === address.toLowerCase());
  if (known) return { label: document.createTextNode(known.symbol), whole: true };
  return { label: h('span', {}, 'token ', h('code', { class: 'mono', title: address }, shortHex(address, 6, 4))), whole: false };
}

/** "0.0099 ETH" or "1000 (base units) of token 0x5FbD…0aa3". */
function changeAmount(chain: string, c: BalanceChange, chains: ChainInfo[]): (Node | string)[] {
  if (c.token) {
    const { label, whole } = tokenLabel(chain, c.token, chains);
    return whole ? [h('strong', {}, c.amount), ' ', label] : [h('strong', {}, c.amount), ' (base units) of ', label];
  }
  const symbol = c.asset.includes(':') ? c.asset.slice(c.asset.indexOf(':') + 1) : c.asset;
  return [h('strong', {}, c.amount), ` ${symbol}`];
}

/** The effect lines of a simulation: "You send …", "You receive …", "You allow …". */
export function effectLines(chain: string, sim: Simulation, chains: ChainInfo[]): HTMLElement[] {
  const out: HTMLElement[] = [];
  for (const c of sim.changes ?? []) {
    const send = c.direction === 'out';
    out.push(
      h(
        'li',
        { class: send ? 'effect effect-out' : 'effect effect-in', 'data-testid': send ? 'effect-send' : 'effect-receive' },
        send ? 'You send ' : 'You receive ',
        ...changeAmount(chain, c, chains),
      ),
    );
  }
  for (const a of sim.approvals ?? []) {
    const { label, whole } = tokenLabel(chain, a.token, chains);
    out.push(
      h(
        'li',
        { class: a.unlimited ? 'effect effect-allow unlimited' : 'effect effect-allow', 'data-testid': 'effect-allow' },
        'You allow ',
        h('code', { class: 'mono', title: a.spender }, shortHex(a.spender, 6, 4)),
        ' to spend ',
        a.unlimited ? h('strong', { class: 'badge bad' }, 'unlimited') : h('strong', {}, a.amount),
        a.unlimited ? ' ' : whole ? ' ' : ' (base units) of ',
        label,
        a.unlimited ? ' — it may take all of it, at any time' : '',
      ),
    );
  }
  return out;
}

/** Signed or held EIP-712 data: "Permit" (or a plain word when the service did not say). */
export function typedLabel(t: CallFields): string {
  return t.primary_type ? `${t.primary_type}` : 'typed data';
}

/** The full card body of a held call or signature (the approvals inbox). */
export function callDetails(t: CallFields, chains: ChainInfo[], abis: Abis | null): HTMLElement {
  const sim = simulationOf(t);
  const effects = effectLines(t.chain, sim, chains);
  const effectList = h(
    'ul',
    { class: 'effects', 'data-testid': 'call-effects', 'aria-label': 'What it would do' },
    effects.length ? effects : h('li', { class: 'muted' }, 'No balance change and no allowance in the simulation.'),
  );
  if (t.kind === 'typed_data') {
    return h(
      'div',
      { class: 'call-details', 'data-testid': 'approval-typed-data' },
      h(
        'p',
        {},
        h('span', { class: 'badge kind' }, 'signature'),
        ' Sign ',
        h('strong', { 'data-testid': 'primary-type' }, typedLabel(t)),
        ` (EIP-712) for ${t.chain}`,
      ),
      h('p', { class: 'muted small' }, 'No transaction is sent: whoever holds the signature can use what it allows.'),
      effectList,
    );
  }
  if (t.calls?.length) {
    return h(
      'div',
      { class: 'call-details', 'data-testid': 'approval-call', 'data-batch': String(t.calls.length) },
      h(
        'p',
        {},
        h('span', { class: 'badge kind' }, 'batch'),
        ` ${t.calls.length} calls on ${t.chain}, run in order as one operation: all of them, or none`,
      ),
      h(
        'ol',
        { class: 'batch-calls', 'data-testid': 'batch-calls' },
        t.calls.map((c) => h('li', { 'data-testid': 'batch-call' }, ...callLines(t.chain, c, abis))),
      ),
      effectList,
      sim.gas_used ? h('p', { class: 'muted small' }, `Simulated gas: ${sim.gas_used}`) : null,
    );
  }
  return h(
    'div',
    { class: 'call-details', 'data-testid': 'approval-call' },
    ...callLines(t.chain, t.call ?? null, abis),
    effectList,
    sim.gas_used ? h('p', { class: 'muted small' }, `Simulated gas: ${sim.gas_used}`) : null,
  );
}

/** One call as read: its function on its contract, then its arguments with their names where known. */
function callLines(chain: string, call: CallInfo | null, abis: Abis | null): (HTMLElement | null)[] {
  const fn = call?.function ?? null;
  const names = call ? argNames(chain, call, abis) : [];
  const types = fn ? paramTypes(fn) : [];
  const args = call?.args ?? null;
  const argList = args?.length
    ? h(
        'ol',
        { class: 'call-args', start: 0, 'data-testid': 'call-args', 'aria-label': 'Arguments' },
        args.map((value, i) =>
          h(
            'li',
            { 'data-arg': names[i] ?? String(i) },
            h('span', { class: 'arg-name' }, names[i] ?? `#${i}`),
            types[i] ? h('span', { class: 'muted small' }, ` ${types[i]}`) : null,
            ' = ',
            argNode(value),
          ),
        ),
      )
    : null;
  return [
    h(
      'p',
      {},
      h('span', { class: 'badge kind' }, 'call'),
      ' ',
      h('strong', { class: 'mono', 'data-testid': 'call-function', title: fn ?? '' }, fn ? functionName(fn) : 'unknown function'),
      ' on ',
      call ? h('code', { class: 'mono', title: call.to, 'data-testid': 'call-contract' }, shortHex(call.to, 6, 4)) : 'a contract',
      ` on ${chain}`,
      fn ? null : h('span', { class: 'muted small' }, ` (selector ${call?.selector ?? 'none'})`),
    ),
    argList,
  ];
}

/** A short label for buttons and notices: "swapExactTokensForETH on 0x1234…abcd". */
export function callLabel(t: CallFields & { amount: string; asset: string; to: string }): string {
  if (t.kind === 'typed_data') return `the ${typedLabel(t)} signature`;
  if (t.calls?.length) return `the batch of ${t.calls.length} calls`;
  const fn = t.call?.function;
  return `${fn ? functionName(fn) : 'the call'} on ${shortHex(t.call?.to ?? t.to, 6, 4)}`;
}

/** One compact line of changes: "−1000 token 0x5FbD…, +0.0099 ETH, allows 0x…". */
export function compactEffects(chain: string, sim: Simulation, chains: ChainInfo[]): HTMLElement {
  const parts: (Node | string)[] = [];
  const sep = () => parts.length && parts.push(', ');
  for (const c of sim.changes ?? []) {
    sep();
    const sign = c.direction === 'out' ? '−' : '+';
    if (c.token) {
      const { label } = tokenLabel(chain, c.token, chains);
      parts.push(`${sign}${c.amount} `, label);
    } else parts.push(`${sign}${c.amount} ${c.asset.slice(c.asset.indexOf(':') + 1)}`);
  }
  for (const a of sim.approvals ?? []) {
    sep();
    parts.push('allows ', h('code', { class: 'mono', title: a.spender }, shortHex(a.spender, 6, 4)), ` ${a.unlimited ? 'unlimited' : a.amount}`);
  }
  return h('div', { class: 'small muted', 'data-testid': 'call-changes' }, parts.length ? parts : 'no balance change');
}
