// Gas the agent does not pay (docs/api.md §22): who pays an agent's gas on each chain (the operator's sponsorship,
// with what it has left of its rolling day, or the agent's wallet), what its address holds as code (`account`: eoa,
// smart, foreign), what a sponsored outflow's record shows (its user operation, the bundle that carried it, what the
// gas cost), the operator's form that sets a sponsorship (the admin token only), and the state of a sponsorable
// chain with what the operator must still do (trust and allowlist the sponsor, fund the deposit and the sponsor).
import { api, type ChainInfo, type ChainSponsorship, type GasPayer, type Sponsorship, type Transfer } from './api';
import { addDecimal, compareDecimal, roundAmount } from './amount';
import { copyButton, h, shortHex, uid } from './dom';
import { errorLine, txHashLink } from './ui';

/**
 * Below this (in the chain's native units) the sponsor's balance is called low: it pays each bundle's gas before the
 * EntryPoint pays it back, so it needs a bundle's gas limit times the fee at hand (about 0.003 ETH for 16 operations
 * at 1 gwei), with room for fee spikes and several bundles on their way.
 */
export const LOW_SPONSOR_BALANCE = '0.01';

/** The agent's sponsorship on `chain`, if the operator ever set one (an ended one has `per_day` "0"). */
export function sponsorshipOn(list: Sponsorship[] | null, chain: string): Sponsorship | null {
  return list?.find((s) => s.chain === chain) ?? null;
}

/** A sponsorship that pays by default: `per_day` above 0. */
export const isActive = (s: Sponsorship | null): s is Sponsorship => !!s && compareDecimal(s.per_day, '0') === 1;

/** Who pays by default, as the service decides it: `sponsored` where the agent has a sponsorship above 0. */
export function defaultGas(list: Sponsorship[] | null, chain: string): GasPayer {
  return isActive(sponsorshipOn(list, chain)) ? 'sponsored' : 'wallet';
}

/** "0.0488 of 0.05 ETH left today", rounded (exact figures in the title). */
export function leftWords(s: Sponsorship, symbol: string): HTMLElement {
  return h(
    'span',
    { title: `${s.left} of ${s.per_day} ${symbol} left; ${s.counted} ${symbol} counted over the last 24 hours` },
    `${roundAmount(s.left)} of ${roundAmount(s.per_day)} ${symbol} left today`,
  );
}

/**
 * A wallet's "Gas" line: who pays the gas of what it sends on `chain` by default, and what the sponsorship has left.
 * `data-payer` is the default payer (`sponsored` or `wallet`).
 */
export function gasPayerLine(chain: ChainInfo, list: Sponsorship[] | null): HTMLElement {
  const s = sponsorshipOn(list, chain.name);
  const sym = chain.native_symbol;
  const line = h('p', { class: 'small gas-payer', 'data-testid': `gas-payer-${chain.name}`, 'data-payer': defaultGas(list, chain.name) });
  line.append(h('span', { class: 'muted' }, 'Gas: '));
  if (isActive(s)) {
    const spent = compareDecimal(s.left, '0') !== 1;
    line.append(
      h('strong', {}, 'sponsored by the operator'),
      ' \u2014 ',
      leftWords(s, sym),
      spent ? h('span', { class: 'bad' }, `: a sponsored send waits for the rolling day to free some (or pay from the wallet)`) : '',
      '. The agent needs no ',
      sym,
      ' for fees here.',
    );
  } else {
    line.append(
      h('strong', {}, 'paid by this wallet'),
      ' in ',
      sym,
      s ? ' (the operator ended its sponsorship here)' : chain.sponsorship ? ' (the operator can sponsor it here)' : '',
      '.',
    );
  }
  return line;
}

const ACCOUNT_WORDS: Record<string, string> = {
  eoa: 'a plain address (EOA): its first sponsored operation or batch makes it a smart account, by an EIP-7702 authorization agentd signs for the configured implementation only',
  smart: 'a smart account: the address designates the configured account implementation (EIP-7702), so it can run batches and sponsored operations',
  foreign:
    'other code: the address designates, or holds, code agentd did not choose, so nothing sponsored or batched is signed for it (account_foreign)',
};

/** What the agent's address holds as code on a chain (`GET …/balances` `account`), or nothing when not given. */
export function accountLine(chain: string, account: string | null | undefined): HTMLElement | null {
  if (!account) return null;
  return h(
    'p',
    { class: `small account${account === 'foreign' ? ' bad' : ''}`, 'data-testid': `account-${chain}`, 'data-account': account },
    h('span', { class: 'muted' }, 'Account: '),
    ACCOUNT_WORDS[account] ?? account,
    '.',
  );
}

/** A transfer's `gas` and `sponsorship` (§22), read defensively: absent on servers before them. */
type GasFields = Pick<Transfer, 'chain' | 'status'> & { gas?: string | null; sponsorship?: Transfer['sponsorship'] | null };

/**
 * Who paid an outflow's gas, and for a sponsored one its user operation, the bundle that carries it and what the gas
 * cost (`data-gas`, `data-gas-cost`); `compact` for a history row. Null for one the wallet paid on a server that does
 * not say.
 */
export function gasInfo(t: GasFields, chains: ChainInfo[], compact = false): HTMLElement | null {
  if (t.gas !== 'sponsored') {
    return t.gas === 'wallet' && !compact
      ? h('div', { class: 'small muted', 'data-testid': 'gas-info', 'data-gas': 'wallet' }, 'Gas: paid by the agent\u2019s wallet')
      : null;
  }
  const info = chains.find((c) => c.name === t.chain);
  const sym = info?.native_symbol ?? '';
  const op = t.sponsorship ?? null;
  const cost = op?.gas_cost ?? null;
  const explorer = info?.explorer_url || null;
  const opHash = op ? h('code', { class: 'mono', title: op.user_op_hash, 'data-testid': 'user-op-hash' }, shortHex(op.user_op_hash, 10, 8)) : '\u2014';
  const bundle = op?.bundle_hash
    ? h('span', { 'data-testid': 'bundle-hash', 'data-hash': op.bundle_hash }, txHashLink(t.chain, op.bundle_hash, explorer ? `${explorer}/tx/${op.bundle_hash}` : null, 8, 6))
    : h('span', { class: 'muted', 'data-testid': 'bundle-hash' }, 'not in a bundle yet');
  const costEl =
    cost !== null
      ? h('span', { title: `${cost} ${sym}`, 'data-testid': 'gas-cost' }, `${roundAmount(cost)} ${sym}`)
      : h('span', { class: 'muted', 'data-testid': 'gas-cost' }, t.status === 'reverted' || t.status === 'dropped' ? 'none recorded' : 'known once mined');
  const attrs = { 'data-testid': 'gas-info', 'data-gas': 'sponsored', 'data-gas-cost': cost ?? '' };
  if (compact) {
    return h(
      'div',
      { ...attrs, class: 'gas-info compact small' },
      h('span', { class: 'badge good', title: 'The operator\u2019s sponsorship paid the gas: a user operation of the agent\u2019s account' }, 'gas sponsored'),
      ' ',
      h('span', { class: 'muted' }, 'op '),
      opHash,
      h('div', {}, h('span', { class: 'muted' }, 'bundle '), bundle),
      h('div', {}, h('span', { class: 'muted' }, 'gas '), costEl),
    );
  }
  return h(
    'dl',
    { ...attrs, class: 'gas-info facts-list small' },
    h('dt', {}, 'Gas'),
    h('dd', {}, h('span', { class: 'badge good' }, 'sponsored'), ' by the operator: not the agent\u2019s money'),
    h('dt', {}, 'User operation'),
    h('dd', {}, opHash),
    h('dt', {}, 'Bundle'),
    h('dd', {}, bundle),
    h('dt', {}, 'Gas cost'),
    h('dd', {}, costEl, cost !== null ? h('span', { class: 'muted' }, ' (from the paymaster\u2019s deposit, counted in the sponsorship)') : ''),
  );
}

/** One thing the operator should know about a sponsorable chain: `kind` names it (`data-warning`). */
export interface ChainWarning {
  kind: 'untrusted' | 'not_allowlisted' | 'no_deposit' | 'over_committed' | 'shared' | 'sponsor_low';
  el: HTMLElement;
}

/** `cast send` of one owner's call on the paymaster, to copy. */
function ownerCall(paymaster: string, signature: string, args: string, value?: string): HTMLElement {
  const text = `cast send ${paymaster} '${signature}' ${args}${value ? ` --value ${value}` : ''} --private-key $PAYMASTER_OWNER_KEY --rpc-url $RPC`.replace(/ {2,}/g, ' ');
  return h('div', { class: 'row tight owner-call' }, h('code', { class: 'mono wrap small' }, text), copyButton(text, 'Copy the command'));
}

/**
 * What the operator must do or watch on a sponsorable chain: the sponsor not trusted or not allowlisted (every
 * sponsored send answers 503 sponsor_unfunded), no deposit, a sponsor balance that is low, sponsorships that add up
 * to more than the deposit (`committed`: the sum of `per_day` over the agents listed), a paymaster shared with other
 * signers.
 */
export function chainWarnings(info: ChainSponsorship, committed: string | null, symbol: string): ChainWarning[] {
  const out: ChainWarning[] = [];
  const li = (kind: ChainWarning['kind'], ...children: (Node | string)[]) =>
    out.push({ kind, el: h('li', { class: 'warning', 'data-warning': kind }, ...children) });
  const sponsor = info.sponsor;
  if (!info.trusted) {
    li(
      'untrusted',
      h('strong', {}, 'The paymaster does not trust the sponsor. '),
      'It refuses the sponsor\u2019s approvals, so every sponsored send is refused (sponsor_unfunded). From the paymaster\u2019s owner, call ',
      h('code', { class: 'mono' }, `addSigner(${sponsor})`),
      ':',
      ownerCall(info.paymaster, 'addSigner(address)', sponsor),
    );
  }
  if (!info.bundler_allowed) {
    li(
      'not_allowlisted',
      h('strong', {}, 'The sponsor is not on the paymaster\u2019s bundler allowlist. '),
      'agentd keeps the allowlist on, so that no one else can bundle its approvals; until then every sponsored send is refused (sponsor_unfunded). From the owner, call ',
      h('code', { class: 'mono' }, `updateBundlerAllowlist([${sponsor}], true)`),
      ':',
      ownerCall(info.paymaster, 'updateBundlerAllowlist(address[],bool)', `[${sponsor}] true`),
    );
  }
  if (compareDecimal(info.deposit, '0') !== 1) {
    li(
      'no_deposit',
      h('strong', {}, 'The paymaster has no deposit at the EntryPoint. '),
      `The deposit pays every sponsored operation: put ${symbol} in with `,
      h('code', { class: 'mono' }, 'deposit()'),
      ' (anyone may call it):',
      ownerCall(info.paymaster, 'deposit()', '', `0.1ether`),
    );
  } else if (committed !== null && compareDecimal(committed, info.deposit) === 1) {
    li(
      'over_committed',
      h('strong', {}, `The sponsorships add up to ${roundAmount(committed)} ${symbol} a day, more than the deposit of ${roundAmount(info.deposit)} ${symbol}. `),
      'If the agents use them, the deposit runs out and sponsored sends are refused (sponsor_unfunded) until it is topped up with ',
      h('code', { class: 'mono' }, 'deposit()'),
      ', or the sponsorships are lowered.',
    );
  }
  if (compareDecimal(info.sponsor_balance, LOW_SPONSOR_BALANCE) === -1) {
    li(
      'sponsor_low',
      h('strong', {}, `The sponsor holds ${roundAmount(info.sponsor_balance)} ${symbol}, which is low. `),
      `It pays each bundle\u2019s gas before the EntryPoint pays it back; without enough for a bundle, sponsored sends are refused (sponsor_unfunded). Send a little ${symbol} (0.05 or more) to `,
      h('code', { class: 'mono' }, sponsor),
      '.',
    );
  }
  if (info.shared) {
    const others = info.signers.filter((s) => s.toLowerCase() !== sponsor.toLowerCase());
    li(
      'shared',
      h('strong', {}, 'The paymaster is shared: '),
      `it also trusts ${others.length === 1 ? 'another signer' : `${others.length} other signers`} (`,
      ...others.flatMap((a, i) => [i ? ', ' : '', h('code', { class: 'mono', title: a }, shortHex(a, 6, 4))]),
      '). Their approvals draw on the same deposit, so it is not agentd\u2019s alone and may run out at any time. Remove them (',
      h('code', { class: 'mono' }, 'removeSigner'),
      ') or give agentd a paymaster of its own.',
    );
  }
  return out;
}

/** The sum of `per_day` over sponsorships (exact). */
export function committedPerDay(list: Sponsorship[]): string {
  return list.reduce((sum, s) => addDecimal(sum, s.per_day) ?? sum, '0');
}

/**
 * The operator's form for one agent's sponsorship on one chain: a daily budget in the chain's native units ("0"
 * ends it), sent with the admin token (`PUT …/sponsorship`); `onSaved` gets the answer.
 */
export function sponsorshipEditor(
  agentId: string,
  chain: ChainInfo,
  current: Sponsorship | null,
  onSaved: (s: Sponsorship) => void,
): HTMLElement {
  const sym = chain.native_symbol;
  const input = h('input', {
    type: 'text',
    inputmode: 'decimal',
    autocomplete: 'off',
    class: 'per-day',
    id: uid('per-day'),
    value: current?.per_day ?? '',
    placeholder: `e.g. 0.05`,
    'data-testid': 'sponsorship-per-day',
    'aria-label': `Sponsorship per day on ${chain.name}, in ${sym}`,
  });
  const save = h('button', { type: 'submit', class: 'secondary small' }, current && isActive(current) ? 'Change' : 'Sponsor');
  const error = errorLine();
  const form = h(
    'form',
    { class: 'sponsorship-form', 'data-testid': 'sponsorship-form', 'data-chain': chain.name, 'data-agent-id': agentId },
    h('label', { for: input.id, class: 'small' }, `Gas budget a day on ${chain.name} (${sym}; 0 ends it)`),
    h('div', { class: 'row tight' }, input, save),
    error.el,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.clear();
    const perDay = input.value.trim();
    if (!/^\d+(\.\d+)?$/.test(perDay)) {
      error.show(new Error(`Give a daily budget in ${sym}, such as 0.05 (0 ends the sponsorship).`));
      return;
    }
    save.disabled = true;
    try {
      const saved = await api.setSponsorship(agentId, { chain: chain.name, per_day: perDay });
      input.value = saved.per_day;
      save.textContent = isActive(saved) ? 'Change' : 'Sponsor';
      onSaved(saved);
    } catch (e) {
      error.show(e);
    } finally {
      save.disabled = false;
    }
  });
  return form;
}
