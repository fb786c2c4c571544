// The agent's income in the History tab (docs/api.md §23), beside what it spent: per asset, what buyers paid it
// (settled, and still settling) against what it sent or paid from the same history the table below shows, and the
// gas its settlements cost; then each payment taken, newest first, a page at a time: when, status, amount, payer, the
// offer it bought (or the agent's facilitator), the settlement transaction and its fee.
import type { ChainInfo, HistoryEntry, Transfer } from './api';
import { addDecimal, roundAmount } from './amount';
import { cell, clear, h, shortHex, uid, whenEl } from './dom';
import { simulationOf, type CallFields } from './calls';
import { offersApi, readIncome, type Income, type Offer } from './offers-api';
import { errorLine, txHashLink } from './ui';

const PAGE = 25;
/** Calls read in full for what they spent (the newest first). */
const CALLS_READ = 100;
/** Statuses of the history whose amount left or is leaving the wallet. */
const SPENT = new Set(['pending', 'confirmed']);

const STATUS_TEXT: Record<string, string> = {
  settling: 'settling',
  settled: 'settled',
  failed: 'failed',
  released: 'released (not charged)',
};

export interface Totals {
  /** `<chain>:<ASSET>` → sums, exact decimal strings. */
  assets: Map<string, { earned: string; settling: string; spent: string }>;
  /** Chain → what the settlements' gas cost the agent, in its native coin. */
  fees: Map<string, string>;
}

/**
 * What left the agent's wallet with one entry of its history: a transfer's or payment's amount; a call's simulated
 * outflows (not the allowances it grants, which move nothing yet); nothing for a signature, or for a send through an
 * owner's delegation (§21: the owner's money, not the agent's).
 */
function spentBy(e: HistoryEntry): { key: string; amount: string }[] {
  const fields = e as HistoryEntry & Partial<CallFields> & { delegation?: unknown };
  if (fields.delegation || e.kind === 'typed_data') return [];
  if (e.kind === 'call') {
    const changes = simulationOf(fields as CallFields).changes ?? [];
    return changes.filter((c) => c.direction === 'out' && !c.token).map((c) => ({ key: c.asset, amount: c.amount }));
  }
  return [{ key: `${e.chain}:${e.asset}`, amount: e.amount }];
}

/** Earned (settled), still settling, and spent, per asset; settlement fees per chain. Pure: unit-testable. */
export function totals(income: Income[], spentEntries: HistoryEntry[]): Totals {
  const assets: Totals['assets'] = new Map();
  const fees = new Map<string, string>();
  const slot = (key: string) => {
    let s = assets.get(key);
    if (!s) assets.set(key, (s = { earned: '0', settling: '0', spent: '0' }));
    return s;
  };
  for (const i of income) {
    const key = `${i.chain}:${i.asset}`;
    if (i.status === 'settled') slot(key).earned = addDecimal(slot(key).earned, i.amount) ?? slot(key).earned;
    if (i.status === 'settling') slot(key).settling = addDecimal(slot(key).settling, i.amount) ?? slot(key).settling;
    if (i.fee && i.fee !== '0') fees.set(i.chain, addDecimal(fees.get(i.chain) ?? '0', i.fee) ?? fees.get(i.chain) ?? '0');
  }
  // Only the assets the agent earns in: what it spent in them is what the income is set against.
  for (const e of spentEntries) {
    if (!SPENT.has(e.status)) continue;
    for (const out of spentBy(e)) {
      const s = assets.get(out.key);
      if (s) s.spent = addDecimal(s.spent, out.amount) ?? s.spent;
    }
  }
  return { assets, fees };
}

export function incomeSection(
  agentId: string,
  token: string | null,
  chains: ChainInfo[],
  history: () => Promise<HistoryEntry[]>,
  /** Whether the console holds the authority that reads offers (owner authority, or the token of an unguarded agent):
   * without it the rows name offers by id rather than provoke a 403. */
  offersReadable: () => boolean,
  /** One transfer read in full (the history's list does not carry a call's simulated changes): the history's cache. */
  detail: (id: string) => Promise<Transfer>,
): { el: HTMLElement; refresh(): Promise<void> } {
  const heading = uid('income');
  const error = errorLine();
  const summary = h('div', { 'data-testid': 'income-summary' });
  const rows = h('tbody', {});
  const table = h(
    'table',
    { class: 'history cards income', 'aria-labelledby': heading, 'data-testid': 'income' },
    h('thead', {}, h('tr', {}, ['When', 'Status', 'Amount', 'From', 'For', 'Transaction', 'Gas'].map((t) => h('th', { scope: 'col', class: `col-${t.toLowerCase()}` }, t)))),
    rows,
  );
  const empty = h('p', { class: 'muted', hidden: true, 'data-testid': 'income-empty' }, 'No income yet: nobody has paid this agent.');
  const older = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Older income');
  let last: string | null = null;
  let offers = new Map<string, Offer>();
  const nativeOf = (chain: string) => chains.find((c) => c.name === chain)?.native_symbol ?? '';
  const explorerOf = (chain: string, hash: string) => {
    const base = chains.find((c) => c.name === chain)?.explorer_url;
    return base ? `${base}/tx/${hash}` : null;
  };

  function row(i: Income): HTMLElement {
    const offer = i.offer_id ? offers.get(i.offer_id) : undefined;
    return h(
      'tr',
      { 'data-testid': 'income-row', 'data-income-id': i.id, 'data-status': i.status, 'data-offer-id': i.offer_id ?? '' },
      cell('When', {}, whenEl(i.created_at)),
      cell('Status', {}, h('span', { class: `status status-${i.status === 'settled' ? 'confirmed' : i.status === 'settling' ? 'pending' : i.status === 'failed' ? 'reverted' : 'cancelled'}` }, STATUS_TEXT[i.status] ?? i.status)),
      cell('Amount', { 'data-testid': 'income-amount' }, h('strong', { title: `${i.amount} ${i.asset}` }, `+${roundAmount(i.amount)} ${i.asset}`)),
      cell('From', {}, h('code', { class: 'mono', title: i.payer }, shortHex(i.payer, 6, 4))),
      cell(
        'For',
        { 'data-testid': 'income-for' },
        i.offer_id ? (offer?.description ?? `offer ${shortHex(i.offer_id, 8, 4)}`) : 'the agent\u2019s facilitator (your own x402 server)',
      ),
      cell(
        'Transaction',
        { 'data-testid': 'income-tx' },
        i.tx_hash ? txHashLink(i.chain, i.tx_hash, explorerOf(i.chain, i.tx_hash)) : '—',
        i.settled_by === 'external' ? h('div', { class: 'muted small' }, 'settled by someone else\u2019s transaction') : null,
      ),
      cell(
        'Gas',
        { 'data-testid': 'income-fee' },
        !i.fee || i.fee === '0'
          ? i.settled_by === 'external'
            ? 'none (someone else\u2019s transaction)'
            : i.status === 'settled'
              ? 'none: the operator\u2019s sponsorship paid'
              : '—'
          : h('span', { title: `${i.fee} ${nativeOf(i.chain)}` }, `${roundAmount(i.fee)} ${nativeOf(i.chain)}`),
      ),
    );
  }

  async function page(before: string | null): Promise<void> {
    older.disabled = true;
    try {
      const batch = await offersApi.income(agentId, token, PAGE, before);
      if (before === null) clear(rows);
      for (const i of batch) rows.append(row(i));
      if (batch.length) last = batch[batch.length - 1].id;
      older.hidden = batch.length < PAGE;
      empty.hidden = rows.childElementCount > 0;
    } finally {
      older.disabled = false;
    }
  }

  async function drawSummary(): Promise<void> {
    const [{ income, complete }, listed] = await Promise.all([readIncome(agentId, token), history()]);
    // Only where the agent earns: a call's outflows in those assets are read from its record (at most CALLS_READ).
    const earning = new Set(income.map((i) => i.chain));
    let reads = 0;
    const entries = await Promise.all(
      listed.map((e) =>
        e.kind === 'call' && SPENT.has(e.status) && earning.has(e.chain) && reads++ < CALLS_READ
          ? detail(e.id).then(
              (full) => ({ ...e, ...(full as unknown as Partial<HistoryEntry>), status: e.status }) as HistoryEntry,
              () => e,
            )
          : Promise.resolve(e),
      ),
    );
    const t = totals(income, entries);
    clear(summary);
    if (t.assets.size === 0) return;
    const lines = h('tbody', {});
    for (const [key, s] of t.assets) {
      const [chain, asset] = key.split(':');
      lines.append(
        h(
          'tr',
          { 'data-testid': 'earned-spent', 'data-asset': key, 'data-earned': s.earned, 'data-spent': s.spent },
          cell('Asset', {}, `${asset} on ${chain}`),
          cell('Earned', { 'data-testid': 'earned' }, h('strong', { title: s.earned }, `+${roundAmount(s.earned)} ${asset}`), s.settling !== '0' ? h('div', { class: 'muted small' }, `${roundAmount(s.settling)} settling`) : null),
          cell('Spent', { 'data-testid': 'spent' }, h('span', { title: s.spent }, s.spent === '0' ? `0 ${asset}` : `\u2212${roundAmount(s.spent)} ${asset}`)),
        ),
      );
    }
    const feeLines = [...t.fees].map(([chain, fee]) => `${roundAmount(fee)} ${nativeOf(chain)} on ${chain}`);
    summary.append(
      h(
        'table',
        { class: 'history cards earned-spent', 'aria-label': 'Earned and spent per asset' },
        h('thead', {}, h('tr', {}, ['Asset', 'Earned', 'Spent'].map((x) => h('th', { scope: 'col' }, x)))),
        lines,
      ),
      h(
        'p',
        { class: 'muted small', 'data-testid': 'settlement-fees' },
        feeLines.length
          ? `The settlements\u2019 gas cost the agent ${feeLines.join(', ')} (counted in the spending cap like any fee).`
          : 'The settlements cost the agent no gas so far.',
        complete ? '' : ' Totals of the most recent 5,000 payments.',
      ),
    );
  }

  async function refresh(): Promise<void> {
    error.clear();
    last = null;
    try {
      const known = offersReadable() ? await offersApi.offers(agentId, token).catch(() => [] as Offer[]) : [];
      offers = new Map(known.map((o) => [o.id, o]));
      await Promise.all([page(null), drawSummary()]);
    } catch (e) {
      clear(rows);
      clear(summary);
      empty.hidden = true;
      error.show(e);
    }
  }

  older.addEventListener('click', () => void page(last).catch((e) => error.show(e)));
  const el = h(
    'section',
    { class: 'income-panel', 'data-testid': 'income-section' },
    h('h3', { id: heading }, 'Income, beside what it spent'),
    h(
      'p',
      { class: 'muted' },
      'What buyers paid the agent for its offers (the Offers tab) and through its facilitator, settled on chain by agentd ',
      'from the agent\u2019s wallet; set against what it sent and paid in the same assets.',
    ),
    error.el,
    summary,
    h('div', { class: 'table-wrap' }, table),
    empty,
    h('div', { class: 'row' }, older),
  );
  return { el, refresh };
}
