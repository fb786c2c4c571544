// Why a request waits or was refused, in the policy's own terms (docs/api.md §8, §11, §16, §18): the rule that
// holds or refuses it, the limits of its asset with what the rolling windows have counted and what is left, the
// spending cap with what it has counted, and what is known of the network fee. The service names the rules that
// held a transfer (`held_by`, with `max_fee`); the console words them with the figures of the current policy. What
// the windows and the cap have counted and have left is only what the service states (`GET …/budget`: the figures
// its next decision uses, allowances, pending and held transfers included); a refusal over a limit is worded by the
// service with the figures of its decision. For a transfer held before the service kept its rules (no `held_by`),
// the rules are worked out from the current policy.
import { api, type AgentDetail, type Budget, type BudgetWindow, type HistoryEntry, type Policy, type Transfer } from './api';
import { simulationOf, type CallFields } from './calls';
import { parseUnits } from './chart';
import { shortHex } from './dom';

/** Pages of 500 read to know the history (the chart reads as many). */
const PAGES = 10;

/** What an agent's explanations are computed from, read once per change of what waits. */
export interface AgentFacts {
  policy: Policy | null;
  detail: AgentDetail | null;
  /** What the windows and the caps have counted and have left, as the service states it. */
  budget: Budget | null;
  /** The history, newest first (at most PAGES × 500). */
  entries: HistoryEntry[];
  /** Whether `entries` is the whole history. */
  complete: boolean;
  /** Transfers awaiting approval now. */
  waiting: Transfer[];
}

/** Reads the policy, the detail (cap and spent) and the history of an agent; each part may fail on its own. */
export async function loadFacts(agentId: string, token: string | null, waiting: Transfer[]): Promise<AgentFacts> {
  const [policy, detail, budget, history] = await Promise.all([
    api.policy(agentId, token).catch(() => null),
    api.agent(agentId, token).catch(() => null),
    api.budget(agentId, token).catch(() => null),
    readHistory(agentId, token).catch(() => ({ entries: [] as HistoryEntry[], complete: false })),
  ]);
  return { policy, detail, budget, entries: history.entries, complete: history.complete, waiting };
}

export async function readHistory(agentId: string, token: string | null): Promise<{ entries: HistoryEntry[]; complete: boolean }> {
  const entries: HistoryEntry[] = [];
  let before: string | null = null;
  for (let i = 0; i < PAGES; i += 1) {
    const batch = await api.transactions(agentId, token, 500, before);
    entries.push(...batch);
    if (batch.length < 500) return { entries, complete: true };
    before = batch[batch.length - 1].id;
  }
  return { entries, complete: false };
}

/** The policy's entry for an asset key (`base:ETH`), matched without regard to case as a fallback. */
export function limitsFor(policy: Policy | null, key: string): Record<string, string | undefined> | null {
  const limits = (policy?.limits ?? {}) as Record<string, Record<string, string | undefined> | undefined>;
  if (limits[key]) return limits[key] ?? null;
  const found = Object.keys(limits).find((k) => k.toLowerCase() === key.toLowerCase());
  return found ? (limits[found] ?? null) : null;
}

export interface WindowLine {
  rule: 'per_day' | 'per_week';
  limit: string;
  used: string;
  left: string;
  /** Whether the window has counted more than its limit (the policy was lowered since). */
  over: boolean;
}

/** The service's entry of `key` in a map keyed by asset or chain, matched without regard to case as a fallback. */
function entryOf<T>(map: Record<string, T> | undefined, key: string): T | null {
  if (!map) return null;
  if (map[key]) return map[key];
  const found = Object.keys(map).find((k) => k.toLowerCase() === key.toLowerCase());
  return found ? map[found] : null;
}

/** The daily and weekly windows of an asset as the service states them now: the limit, what they counted (sent,
 *  pending, waiting, and what calls and allowances counted) and what is left. Empty when the service said nothing. */
export function windows(facts: AgentFacts, key: string): WindowLine[] {
  const entry = entryOf(facts.budget?.limits, key);
  const lines: WindowLine[] = [];
  for (const rule of ['per_day', 'per_week'] as const) {
    const w: BudgetWindow | undefined | null = entry?.[rule];
    if (!w) continue;
    const limit = parseUnits(w.limit);
    const counted = parseUnits(w.counted);
    const over = limit !== null && counted !== null && counted > limit;
    lines.push({ rule, limit: w.limit, used: w.counted, left: w.left, over });
  }
  return lines;
}

export const WINDOW_NAME: Record<string, string> = { per_day: 'Daily limit', per_week: 'Weekly limit' };
const WINDOW_SPAN: Record<string, string> = { per_day: 'the last 24 h', per_week: 'the last 7 days' };

/** "Daily limit 0.5 ETH: 0.07 counted in the last 24 h, 0.43 left." */
export function windowSentence(w: WindowLine, asset: string, note = ''): string {
  return `${WINDOW_NAME[w.rule]} ${w.limit} ${asset}: ${w.used} counted in ${WINDOW_SPAN[w.rule]}${note}, ${w.left} left${w.over ? ' (over the limit)' : ''}.`;
}

/** Whether a pending or confirmed transfer already went to `to`, on any chain (§11's "never paid before"). */
export function paidBefore(facts: AgentFacts, to: string, except: string | null = null): boolean | null {
  const hit = facts.entries.some(
    (e) => e.id !== except && (e.status === 'pending' || e.status === 'confirmed') && e.to.toLowerCase() === to.toLowerCase(),
  );
  return hit ? true : facts.complete ? false : null;
}

export interface Reason {
  /** The policy's name for it: `approval_above`, `approve_new_recipients`, `calls.rules[2]`, `calls.default`. */
  rule: string;
  text: string;
}

interface CallRule {
  chain?: string;
  to?: string;
  function?: string;
  args?: unknown;
  value?: unknown;
  typed_data?: { primary_type?: string; domain?: unknown; message?: unknown };
  action?: string;
}

/** "approve(address spender, uint256 amount)" → "approve(address,uint256)". */
function canonical(signature: string): string {
  const match = /^\s*([A-Za-z_$][\w$]*)\s*\((.*)\)\s*$/.exec(signature);
  if (!match) return signature.replace(/\s+/g, '');
  const types = match[2]
    .split(',')
    .map((p) => p.trim().split(/\s+/)[0])
    .filter(Boolean);
  return `${match[1]}(${types.join(',')})`;
}

const star = (pattern: string | undefined, value: string | null | undefined) =>
  pattern === undefined || pattern === '*' || (value != null && pattern.toLowerCase() === value.toLowerCase());

/** The rule of `calls` that holds a call or a signature, read as the service reads them (§18). */
function callReason(t: Transfer & CallFields, policy: Policy | null): Reason | null {
  const calls = (policy?.calls ?? null) as { default?: string; rules?: CallRule[] } | null;
  if (!calls) return null;
  const rules = calls.rules ?? [];
  for (let i = 0; i < rules.length; i += 1) {
    const r = rules[i];
    if (t.kind === 'typed_data') {
      if (!r.typed_data || r.typed_data.primary_type !== t.primary_type) continue;
    } else {
      if (r.typed_data) continue;
      const fn = t.call?.function ?? null;
      if (!star(r.chain, t.chain) || !star(r.to, t.call?.to ?? t.to)) continue;
      if (r.function !== undefined && r.function !== '*' && (fn === null || canonical(r.function) !== fn)) continue;
    }
    const conditional = r.args !== undefined || r.value !== undefined || (r.typed_data && (r.typed_data.domain || r.typed_data.message));
    if (r.action === 'approve') {
      const what = t.kind === 'typed_data' ? `signatures of ${t.primary_type}` : `${r.function ?? '*'} on ${r.to === '*' || !r.to ? 'any contract' : shortHex(r.to, 6, 4)}`;
      return {
        rule: `calls.rules[${i}]`,
        text: `Rule ${i + 1} of the policy's calls (${what}${conditional ? ', its conditions held' : ''}) asks for approval.`,
      };
    }
    // A rule with conditions may not have matched: the next one may have decided.
    if (!conditional) return null;
  }
  if (calls.default === 'approve') return { rule: 'calls.default', text: 'No rule of the policy\'s calls matches it, and their default is "approve".' };
  return null;
}

/** The outflows a request counts against its assets' limits: its amount, or a call's simulated outflows. */
export function outflows(t: { kind?: string | null; chain: string; asset: string; amount: string } & Partial<CallFields>): { key: string; asset: string; amount: string }[] {
  if (t.kind === 'call' || t.kind === 'typed_data') {
    const sim = simulationOf(t as CallFields);
    const out = (sim.changes ?? []).filter((c) => c.direction === 'out' && !c.token);
    const grants = (sim.approvals ?? []).filter((a) => !a.unlimited);
    const list = out.map((c) => ({ key: c.asset, asset: c.asset.split(':')[1] ?? c.asset, amount: c.amount }));
    // An allowance counts as an outflow of its amount at once (§18); registry tokens only (whole units).
    for (const g of grants) {
      const key = g.token.includes(':') ? g.token : null;
      if (key) list.push({ key, asset: key.split(':')[1] ?? key, amount: g.amount });
    }
    if (list.length === 0 && t.amount && t.amount !== '0') list.push({ key: `${t.chain}:${t.asset}`, asset: t.asset, amount: t.amount });
    return list;
  }
  return [{ key: `${t.chain}:${t.asset}`, asset: t.asset, amount: t.amount }];
}

/** What a rule the service named says when the current policy no longer shows it (the policy changed since). */
const NAMED: Record<string, string> = {
  approval_above: 'Its amount was above the approval threshold of the policy when it was asked.',
  approve_new_recipients: 'Its recipient had never been paid when it was asked, and the policy asked the owner to approve new recipients.',
  'calls.default': 'No rule of the policy\'s calls matched it when it was asked, and their default was "approve".',
};

/**
 * The rules that ask for the owner's approval of this waiting request: those the service named (`held_by`), with the
 * threshold it recorded when it held it (`held_above`), the others worded with the current policy's figures; for a
 * request held before the service named them, those of the current policy.
 */
export function holdReasons(t: Transfer, facts: AgentFacts): Reason[] {
  const inferred = policyHoldReasons(t, facts);
  const named = t.held_by;
  if (!named?.length) return inferred;
  return named.flatMap((rule) => {
    // The threshold that held it, as the service recorded it when it was held (`held_above`), of the asset the
    // service names (`held_above_asset`: for a call, the asset whose count was above it).
    const list = outflows(t as Transfer & CallFields);
    const key = t.held_above_asset ?? list[0]?.key;
    const o = list.find((x) => x.key === key);
    if (rule === 'approval_above' && t.held_above && key) {
      const asset = o?.asset ?? key.split(':')[1] ?? key;
      const moves = o ? `it moves ${o.amount} ${asset}, ` : 'it counts ';
      return [
        {
          rule,
          text: `Approval threshold of ${key}: ${moves}more than the ${t.held_above} ${asset} the policy let pass without the owner when it was asked.`,
        },
      ];
    }
    const worded = inferred.filter((r) => r.rule === rule);
    if (worded.length) return worded;
    const call = /^calls\.rules\[(\d+)\]$/.exec(rule);
    const text = call ? `Rule ${Number(call[1]) + 1} of the policy's calls asked for approval when it was asked.` : NAMED[rule] ?? `The policy's ${rule} asked for approval.`;
    return [{ rule, text: `${text} (The policy has changed since.)` }];
  });
}

/** Every rule of the current policy that would ask for the owner's approval of this waiting request. */
function policyHoldReasons(t: Transfer, facts: AgentFacts): Reason[] {
  const reasons: Reason[] = [];
  for (const o of outflows(t as Transfer & CallFields)) {
    const above = limitsFor(facts.policy, o.key)?.approval_above;
    const amount = parseUnits(o.amount);
    const threshold = above ? parseUnits(above) : null;
    if (amount !== null && threshold !== null && amount > threshold) {
      reasons.push({
        rule: 'approval_above',
        text: `Approval threshold of ${o.key}: it moves ${o.amount} ${o.asset}, more than the ${above} ${o.asset} the policy lets pass without the owner.`,
      });
    }
  }
  if (t.kind === 'call' || t.kind === 'typed_data') {
    const r = callReason(t as Transfer & CallFields, facts.policy);
    if (r) reasons.push(r);
  } else if (facts.policy?.approve_new_recipients) {
    const paid = paidBefore(facts, t.to, t.id);
    if (paid === false) {
      reasons.push({
        rule: 'approve_new_recipients',
        text: `New recipient: nothing was ever paid to ${shortHex(t.to, 8, 6)}, and the policy asks the owner to approve new recipients.`,
      });
    } else if (paid === null) {
      reasons.push({
        rule: 'approve_new_recipients',
        text: `Probably a new recipient: no payment to ${shortHex(t.to, 8, 6)} in the history read, and the policy asks the owner to approve new recipients.`,
      });
    }
  }
  return reasons;
}

/** A decimal string cut to `places` decimals (the figures of fees run to 18): "0.020037084556901" → "0.020037". */
export function shortUnits(text: string, places = 6): string {
  const [whole, fraction = ''] = text.split('.');
  const cut = fraction.slice(0, places).replace(/0+$/, '');
  return cut ? `${whole}.${cut}` : whole;
}

/** The cap of a chain (native units) as the service states it: what it allows, what it counted (fees and held
 *  reservations included), what is left. */
export function capLine(budget: Budget | null, chain: string, symbol: string): string | null {
  const w = entryOf(budget?.caps, chain);
  if (!w) return null;
  return `Spending cap on ${chain}: ${w.limit} ${symbol}; ${shortUnits(w.counted)} counted so far (fees and held reservations included), ${shortUnits(w.left)} left.`;
}

/** The agent detail's cap (a JSON number) as a decimal string. */
export function capText(cap: unknown): string {
  const text = String(cap);
  return /e/i.test(text) ? Number(cap).toFixed(20).replace(/\.?0+$/, '') : text;
}

/** What is known of the network fee of a waiting request before it is approved. */
export function feeText(t: Transfer & CallFields, nativeSymbol: string): string {
  if (t.kind === 'x402') return 'Network fee: none for the agent — the resource\'s facilitator settles the payment and pays the gas.';
  if (t.kind === 'typed_data') return 'Network fee: none — this is a signature; whoever uses it pays the gas.';
  if ((t as { gas?: string | null }).gas === 'sponsored') {
    // §22: held, it holds nothing of the sponsorship; approved, it is signed as a user operation the operator pays.
    return (
      'Network fee: paid by the operator\u2019s gas sponsorship, not the agent: approved, it goes out as a user operation of ' +
      'the agent\u2019s account, and its gas counts in the sponsorship (nothing is held there until you approve), not against the spending cap.'
    );
  }
  const gas = simulationOf(t).gas_used;
  const simulated = t.kind === 'call' && gas ? ` The simulation used ${gas} gas.` : '';
  const maxFee = t.max_fee;
  const shown = maxFee && shortUnits(maxFee, 8) !== '0' ? shortUnits(maxFee, 8) : maxFee;
  const figure = shown ? `at most ${shown} ${nativeSymbol} at the fees of the request; ` : '';
  return (
    `Network fee: ${figure}paid in ${nativeSymbol} at the fees of the moment you approve (the service signs then), ` +
    `counted against the spending cap, not the asset's limits; until then the request holds a reservation of twice ${maxFee ? 'that' : "the request's maximum"} fee.` +
    simulated
  );
}

/** What a refusal's code means, for the codes whose words need no figures (never the bare code: issue 54). */
const CODE_WORDS: Record<string, string> = {
  invalid_arguments: 'Its amount or arguments were not valid: nothing was reserved or signed.',
  broadcast_rejected: 'The node refused the signed transaction: nothing was sent, its reservation was released.',
  signer_unavailable: 'The key that signs for the agent could not be reached: nothing was signed.',
  agent_inactive: 'The agent was deactivated: it can no longer send.',
  call_reverted: 'The call reverted in its simulation: nothing was signed.',
  simulation_unavailable: 'The call could not be simulated, so nothing was signed.',
  simulation_changed: 'What the call does changed between its simulation and its approval: nothing was signed.',
  nothing_to_sweep: 'There was nothing to sweep.',
  owner_address_required: 'An owner session sweeps only to one of the agent\'s owner addresses.',
  internal_error: 'The service failed on its side: nothing was signed.',
  upstream_timeout: 'The chain\'s node did not answer in time: nothing was signed.',
  upstream_unavailable: 'The chain\'s node could not be reached: nothing was signed.',
  rpc_error: 'The chain\'s node refused a request of the service: nothing was signed.',
  chain_not_configured: 'This server has no node for that chain.',
  // Gas the agent does not pay (§22).
  sponsorship_unavailable: 'The operator does not sponsor this agent\u2019s gas on that chain: nothing was signed. Let the wallet pay, or ask the operator.',
  account_foreign: 'The agent\u2019s address designates code agentd did not choose: nothing sponsored or batched is signed for it.',
  sponsor_unfunded: 'The operator\u2019s paymaster could not pay for it now (its sponsor is not trusted or allowlisted, or its deposit or the sponsor\u2019s balance is too low): nothing was signed. Try again once the operator has acted.',
  batch_unavailable: 'This chain has no account implementation to run batches with: nothing was signed.',
  simulation_reverted: 'A call of the batch reverted in its simulation: nothing was signed.',
};

/** Who an on-chain delegation (§21) comes from, and what became of it, when a refusal names it. */
export interface DelegationFacts {
  delegator: string;
  status: string;
  revoked_at?: string | null;
  expires_at?: number | null;
}

/** Why a send through a delegation was refused, in words; null when the refusal is not the delegation's. */
function delegationRefusal(detail: Record<string, unknown>, delegation: DelegationFacts | null | undefined): string | null {
  const code = String(detail.code ?? '');
  const rule = typeof detail.rule === 'string' ? detail.rule : null;
  const chain = typeof detail.chain === 'string' ? detail.chain : '';
  if (rule === 'delegation_limit') {
    // The service words it with the figure of its decision (the audit entry's `limit`, the answer's `available`).
    const said = typeof detail.limit === 'string' ? detail.limit : typeof detail.available === 'string' ? `the delegation leaves ${detail.available} this period` : null;
    return `More than the delegation leaves this period, as the chain counts it on the owner\u2019s account${said ? `: ${said}` : ''}${said?.includes('nothing was signed') ? '.' : '. Nothing was signed.'}`;
  }
  if (rule === 'delegation_caveat') {
    const reason = typeof detail.reason === 'string' ? ` (${detail.reason})` : '';
    return `A condition of the delegation refuses it${reason}: the chain would not let it through, so nothing was signed.`;
  }
  if (code === 'delegation_revoked') return 'The delegation had just been revoked on chain by its delegator: agentd noticed it then, and nothing was signed.';
  if (code === 'delegations_unavailable') return `Delegations are not set up on ${chain || 'this chain'} on this server (no DelegationManager): nothing was signed.`;
  if (code === 'delegation_not_active') {
    const status = delegation?.status;
    if (status === 'revoked') {
      const when = delegation?.revoked_at ? ` (agentd noticed it ${new Date(delegation.revoked_at).toLocaleString()})` : '';
      return `The delegation was revoked on chain by its delegator${when}: it can no longer be used, and nothing was signed.`;
    }
    if (status === 'removed') return 'The delegation had been removed from agentd by the owner: nothing was signed.';
    if (status === 'expired') return 'The delegation had expired (past its "usable until"): nothing was signed.';
    const said = typeof detail.message === 'string' ? /active for this agent on this chain: (.*)$/.exec(detail.message)?.[1] : undefined;
    if (said) return `The delegation could not be used: ${said}. Nothing was signed.`;
    return `The delegation named is not one of this agent\u2019s active delegations on ${chain || 'this chain'}: nothing was signed.`;
  }
  if (code === 'insufficient_funds' && detail.delegation_id) return 'The owner\u2019s account did not hold enough of the asset (or the agent\u2019s wallet not enough for the fee): nothing was signed.';
  return null;
}

/**
 * Meaning of a refusal's rule, naming the limit and what was left when it was refused; `delegation`, for a send
 * through an on-chain delegation (the audit entry's `delegation_id`), what the console knows of it.
 */
export function refusalText(
  detail: Record<string, unknown>,
  _at: string,
  facts: AgentFacts | null,
  nativeSymbol = '',
  delegation: DelegationFacts | null = null,
): string {
  return knownRefusal(detail, facts, nativeSymbol, delegation) ?? genericRefusal(detail);
}

/** A refusal the console has no words of its own for: the service's message, else what kind of refusal it was. */
function genericRefusal(detail: Record<string, unknown>): string {
  const code = String(detail.code ?? '');
  const message = typeof detail.message === 'string' ? detail.message.trim() : '';
  if (message) return `${message.charAt(0).toUpperCase()}${message.slice(1)}${/[.!?]$/.test(message) ? '' : '.'}`;
  const rule = typeof detail.rule === 'string' ? detail.rule : null;
  if (code === 'policy_denied') return rule ? `Refused by the policy\u2019s ${rule.replace(/_/g, ' ')} rule: nothing was signed.` : 'Refused by the policy: nothing was signed.';
  return code ? `The service refused it (${code.replace(/_/g, ' ')}): nothing was signed.` : 'The service refused it: nothing was signed.';
}

/**
 * A refusal of the API (a send's, a call's) in words: the console's own for the rules and codes it knows, else the
 * service's message; the code and rule are for a line apart, never the sentence.
 */
export function errorRefusal(
  e: { code: string; message: string; details?: Record<string, unknown> | null },
  asked: { chain?: string; asset?: string; amount?: string; delegation_id?: string | null },
  nativeSymbol = '',
): string {
  const detail: Record<string, unknown> = { ...asked, ...(e.details ?? {}), code: e.code, message: e.message };
  return refusalText(detail, '', null, nativeSymbol);
}

function knownRefusal(
  detail: Record<string, unknown>,
  facts: AgentFacts | null,
  nativeSymbol: string,
  delegation: DelegationFacts | null,
): string | null {
  const delegated = delegationRefusal(detail, delegation);
  if (delegated) return delegated;
  const code = String(detail.code ?? '');
  const rule = typeof detail.rule === 'string' ? detail.rule : null;
  const chain = typeof detail.chain === 'string' ? detail.chain : '';
  const asset = typeof detail.asset === 'string' ? detail.asset : null;
  const amount = typeof detail.amount === 'string' ? detail.amount : null;
  const policy = facts?.policy ?? null;
  const candidates = facts
    ? outflows({ kind: (detail.kind as string) ?? null, chain, asset: asset ?? '', amount: amount ?? '0', simulation: detail.simulation })
    : [];
  const keyed = candidates.filter((c) => c.asset);

  const limitOf = (r: string) => keyed.map((c) => ({ ...c, limit: limitsFor(policy, c.key)?.[r] })).find((c) => c.limit);
  switch (rule) {
    case 'per_transfer':
    case 'per_day':
    case 'per_week': {
      // The service says it with the figures of its decision (an audit entry's `limit`, an error's message); an older
      // refusal kept only the rule.
      const said =
        typeof detail.limit === 'string'
          ? detail.limit
          : typeof detail.message === 'string'
            ? /: (over the .*)$/.exec(detail.message)?.[1]
            : undefined;
      if (said) return `${said.charAt(0).toUpperCase()}${said.slice(1)}${said.endsWith('.') ? '' : '.'}`;
      const name = rule === 'per_transfer' ? 'per-transfer' : rule === 'per_day' ? 'daily' : 'weekly';
      const c = limitOf(rule);
      return c ? `Over the ${name} limit of ${c.limit} ${c.asset} (${c.key}).` : `Over the ${name} limit of its asset.`;
    }
    case 'asset_not_allowed': {
      const named = Object.keys(policy?.limits ?? {});
      return `${asset ? `${chain}:${asset}` : 'Its asset'} is not an asset the policy allows${named.length ? ` (the policy names ${named.join(', ')})` : ''}.`;
    }
    case 'recipient_not_allowed':
      return `The recipient ${detail.to ? shortHex(String(detail.to), 8, 6) + ' ' : ''}is not on the policy's list of allowed recipients.`;
    case 'recipient_blocked':
      return `The recipient ${detail.to ? shortHex(String(detail.to), 8, 6) + ' ' : ''}is on the policy's blocked list.`;
    case 'host_not_allowed':
      return `The host ${detail.host ?? ''} is not among the policy's allowed hosts${policy?.allowed_hosts ? ` (${policy.allowed_hosts.join(', ')})` : ''}.`;
    case 'call_denied': {
      // The service names the rule and the condition (an audit entry's `denial`, an error's message); an older
      // refusal kept only the rule.
      const said =
        typeof detail.denial === 'string'
          ? detail.denial
          : typeof detail.message === 'string'
            ? /\(rule call_denied\): (.*)$/.exec(detail.message)?.[1]
            : undefined;
      if (said) return `Refused by the calls rules: ${said}${said.endsWith('.') ? '' : '.'}`;
      return `No rule of the policy's calls allows ${detail.function ? `${detail.function}` : detail.primary_type ? `signing ${detail.primary_type}` : 'this call'}${detail.to ? ` on ${shortHex(String(detail.to), 6, 4)}` : ''}.`;
    }
    case 'unlimited_approval':
      return 'It would grant an unlimited allowance, which the policy refuses (allow_unlimited_approvals is off).';
    case 'sponsorship_limit': {
      const left = typeof detail.left === 'string' ? detail.left : null;
      return `More gas than the operator\u2019s sponsorship has left today${left ? ` (${left} ${nativeSymbol})` : ''}: nothing was signed. Let the wallet pay, or wait for the rolling day to free some.`;
    }
  }
  switch (code) {
    case 'spending_cap_exceeded': {
      const now = facts?.budget && chain ? capLine(facts.budget, chain, nativeSymbol) : null;
      return `Over the spending cap on ${chain || 'its chain'}: the amount plus twice its maximum fee did not fit.${now ? ` Now: ${now}` : ''}`;
    }
    case 'insufficient_funds':
      return 'The wallet did not hold enough to cover it (and its fee).';
    case 'invalid_recipient':
      return 'The recipient was the zero address or the agent\'s own wallet.';
    case 'capability_denied':
      return 'The agent lacks the transact capability.';
    case 'price_above_max':
      return 'The price asked was above the request\'s max_amount.';
    default:
      return CODE_WORDS[code] ?? null;
  }
}
