// The history tab: the agent's transfers (docs/api.md §12, §14, §16), newest first, a page at a time, with their
// status, asset, amount, recipient, explorer link and replaced attempts; x402 payments with the host and path they
// paid for; contract calls with their function and balance changes, typed-data signatures with their primary type
// (§18). A pending transfer can be cancelled here. Above the table, the spending chart per asset.
import { api, type AgentDetail, type ChainInfo, type HistoryEntry, type Policy, type Transfer } from './api';
import { compactEffects, functionName, simulationOf, typedLabel, type CallFields } from './calls';
import { DAYS, spendingChart, spendingSeries } from './chart';
import { clear, formatTime, h, shortHex, uid } from './dom';
import { errorLine, notify } from './ui';

export interface HistoryPanel {
  el: HTMLElement;
  load(): void;
  refresh(): Promise<void>;
}

const PAGE_SIZES = [10, 25, 50, 100];
const POLL_MS = 3000;
/** The chart reads at most this many pages of 500 (the API's largest page). */
const CHART_PAGES = 10;

const STATUS_TEXT: Record<string, string> = {
  awaiting_approval: 'awaiting approval',
  pending: 'pending',
  confirmed: 'confirmed',
  reverted: 'reverted',
  dropped: 'dropped',
  cancelled: 'cancelled',
  rejected: 'rejected',
  expired: 'expired',
};

/** "https://api.example.com/data/1" -> "api.example.com/data/1" (the service keeps no query, §16). */
export function hostAndPath(url: string): string {
  try {
    const u = new URL(url);
    return `${u.host}${u.pathname}`;
  } catch {
    return url;
  }
}

/** The number of the agent detail's cap as a decimal string (a JSON number there). */
function capText(cap: unknown): string {
  const text = String(cap);
  return /e/i.test(text) ? Number(cap).toFixed(20).replace(/\.?0+$/, '') : text;
}

export function historyPanel(agent: AgentDetail, token: string, chains: ChainInfo[]): HistoryPanel {
  const heading = uid('history');
  const error = errorLine();
  const chartError = errorLine();
  const charts = h('div', { class: 'charts', 'data-testid': 'spending-charts' });
  const rows = h('tbody', {});
  const table = h(
    'table',
    { class: 'history', 'aria-labelledby': heading, 'data-testid': 'history' },
    h(
      'thead',
      {},
      h('tr', {}, ['When', 'Status', 'What', 'Amount', 'To', 'Transaction', ''].map((t) => h('th', { scope: 'col' }, t))),
    ),
    rows,
  );
  const empty = h('p', { class: 'muted', hidden: true }, 'No transfers yet.');
  const shown = h('span', { class: 'muted small', 'data-testid': 'history-count' });
  const older = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Older transfers');
  const refreshButton = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
  const sizeSelect = h(
    'select',
    { id: uid('page-size') },
    PAGE_SIZES.map((n) => h('option', { value: String(n), selected: n === 25 ? true : null }, String(n))),
  );
  sizeSelect.value = '25';
  let last: string | null = null;
  let poll: ReturnType<typeof setTimeout> | null = null;
  const byId = new Map<string, { entry: HistoryEntry; el: HTMLElement }>();
  // The history's entries do not carry a call's details: each call's transfer is read once (what it called and
  // what its simulation showed never change).
  const callDetails = new Map<string, Promise<Transfer>>();
  const detailOf = (id: string): Promise<Transfer> => {
    let found = callDetails.get(id);
    if (!found) {
      found = api.transfer(agent.id, token, id);
      found.catch(() => callDetails.delete(id));
      callDetails.set(id, found);
    }
    return found;
  };

  /** A call's or signature's cell: its kind at once, then the function or primary type and the changes. */
  function callCell(e: { id: string; kind?: string | null; to: string; chain: string }): HTMLElement {
    const typed = e.kind === 'typed_data';
    const el = h(
      'div',
      { 'data-testid': typed ? 'typed-data' : 'call' },
      h('span', { class: 'badge kind' }, typed ? 'signature' : 'call'),
      ' ',
      h('span', { class: 'muted small' }, '…'),
    );
    detailOf(e.id).then(
      (t) => {
        const c = t as Transfer & CallFields;
        clear(el);
        el.append(h('span', { class: 'badge kind' }, typed ? 'signature' : 'call'), ' ');
        if (typed) el.append(h('strong', { 'data-testid': 'primary-type' }, typedLabel(c)));
        else {
          const fn = c.call?.function ?? null;
          el.append(
            h('strong', { class: 'mono', title: fn ?? '', 'data-testid': 'call-function' }, fn ? functionName(fn) : 'unknown function'),
            ' on ',
            h('code', { class: 'mono small', title: c.call?.to ?? e.to }, shortHex(c.call?.to ?? e.to, 6, 4)),
          );
        }
        el.append(compactEffects(e.chain, simulationOf(c), chains));
      },
      () => {
        clear(el);
        el.append(h('span', { class: 'badge kind' }, typed ? 'signature' : 'call'), ` on ${e.chain}`);
      },
    );
    return el;
  }

  const explorerOf = (chain: string) => chains.find((c) => c.name === chain)?.explorer_url || null;
  const txLink = (chain: string, hash: string, head = 10, tail = 8) => {
    const base = explorerOf(chain);
    return base
      ? h('a', { href: `${base}/tx/${hash}`, target: '_blank', rel: 'noopener noreferrer', class: 'mono', title: hash }, shortHex(hash, head, tail))
      : h('code', { class: 'mono', title: hash }, shortHex(hash, head, tail));
  };

  function what(e: HistoryEntry | Transfer): HTMLElement {
    if (e.kind === 'x402') {
      return h(
        'div',
        { 'data-testid': 'x402' },
        h('span', { class: 'badge kind' }, 'x402'),
        ' ',
        e.x402 ? h('span', { class: 'mono small', title: e.x402.url }, hostAndPath(e.x402.url)) : 'paid request',
      );
    }
    if (e.kind === 'call' || e.kind === 'typed_data') return callCell(e);
    return h('span', {}, `transfer on ${e.chain}`);
  }

  function row(e: HistoryEntry): HTMLElement {
    const status = e.status;
    const cancel =
      status === 'pending' && e.kind !== 'x402'
        ? h('button', { type: 'button', class: 'secondary small', 'aria-label': `Cancel the transfer of ${e.amount} ${e.asset} to ${e.to}` }, 'Cancel')
        : null;
    const rowError = errorLine();
    cancel?.addEventListener('click', async () => {
      rowError.clear();
      cancel.disabled = true;
      try {
        const t = await api.cancel(agent.id, token, e.id);
        notify(`Cancelling: a zero-value send to the agent itself replaces the transfer of ${e.amount} ${e.asset}.`);
        update({ ...e, status: t.status, tx_hash: t.tx_hash ?? e.tx_hash, replaced_hashes: t.replaced_hashes }, 'cancel sent');
      } catch (err) {
        rowError.show(err);
        cancel.disabled = false;
      }
    });
    const replaced = e.replaced_hashes.length
      ? h(
          'div',
          { class: 'small muted', 'data-testid': 'replaced' },
          'replaces ',
          e.replaced_hashes.flatMap((hash, i) => [i ? ', ' : '', txLink(e.chain, hash, 6, 4)]),
        )
      : null;
    const settlement = e.kind === 'x402' ? h('div', { class: 'small muted' }, 'settlement') : null;
    const validBefore =
      e.kind === 'x402' && e.x402 && status === 'pending'
        ? h('div', { class: 'small muted' }, `usable until ${formatTime(new Date(e.x402.valid_before * 1000).toISOString())}`)
        : null;
    const el = h(
      'tr',
      { 'data-testid': 'history-row', 'data-transfer-id': e.id, 'data-status': status, 'data-kind': e.kind ?? 'transfer' },
      h('td', { class: 'nowrap' }, formatTime(e.created_at)),
      h('td', {}, h('span', { class: `status status-${status}` }, STATUS_TEXT[status] ?? status)),
      h('td', {}, what(e)),
      h('td', { class: 'nowrap' }, h('strong', {}, e.amount), ` ${e.asset}`, e.kind === 'x402' ? h('div', { class: 'small muted' }, 'price') : null),
      h('td', {}, h('code', { class: 'mono small', title: e.to }, shortHex(e.to, 8, 6)), e.kind === 'x402' ? h('div', { class: 'small muted' }, 'payTo') : null),
      h('td', { 'data-testid': 'tx' }, e.tx_hash ? [settlement, txLink(e.chain, e.tx_hash)] : '—', replaced, validBefore),
      h('td', {}, cancel, rowError.el),
    );
    return el;
  }

  /** Replaces an entry's row in place (after a cancel, or when a pending one moved on). */
  function update(entry: HistoryEntry, note?: string): void {
    const old = byId.get(entry.id);
    const el = row(entry);
    if (note) el.children[1].append(h('div', { class: 'small muted' }, note));
    old?.el.replaceWith(el);
    byId.set(entry.id, { entry, el });
    schedulePoll();
  }

  /** While transfers shown are pending, their status is read again every few seconds (while the tab is open). */
  function schedulePoll(): void {
    if (poll !== null) return;
    poll = setTimeout(async () => {
      poll = null;
      if (!el.isConnected || el.closest('[hidden]')) return;
      const pending = [...byId.values()].filter((r) => r.entry.status === 'pending' || r.entry.status === 'awaiting_approval');
      let moved = false;
      for (const { entry } of pending) {
        try {
          const t = await api.transfer(agent.id, token, entry.id);
          if (t.status !== entry.status || (t.tx_hash ?? null) !== entry.tx_hash || t.replaced_hashes.length !== entry.replaced_hashes.length) {
            moved = true;
            update({ ...entry, status: t.status, tx_hash: t.tx_hash ?? entry.tx_hash, replaced_hashes: t.replaced_hashes, block_number: t.block_number });
          }
        } catch {
          // Shown again on the next refresh; the poll keeps going.
        }
      }
      if (moved) void drawCharts();
      if ([...byId.values()].some((r) => r.entry.status === 'pending' || r.entry.status === 'awaiting_approval')) schedulePoll();
    }, POLL_MS);
  }

  async function page(before: string | null): Promise<void> {
    error.clear();
    older.disabled = true;
    refreshButton.disabled = true;
    const size = Number(sizeSelect.value);
    try {
      const entries = await api.transactions(agent.id, token, size, before);
      if (before === null) {
        clear(rows);
        byId.clear();
      }
      for (const entry of entries) {
        const el = row(entry);
        byId.set(entry.id, { entry, el });
        rows.append(el);
      }
      if (entries.length) last = entries[entries.length - 1].id;
      // A full page may have more behind it; a short one is the end.
      older.hidden = entries.length < size;
      empty.hidden = rows.childElementCount > 0;
      shown.textContent = `${rows.childElementCount} shown`;
      if (entries.some((e) => e.status === 'pending')) schedulePoll();
    } catch (e) {
      error.show(e);
    } finally {
      older.disabled = false;
      refreshButton.disabled = false;
    }
  }

  /** The chart reads the whole history (up to CHART_PAGES pages) with the current policy and cap. */
  async function drawCharts(): Promise<void> {
    chartError.clear();
    try {
      const [detail, policy] = await Promise.all([api.agent(agent.id, token), api.policy(agent.id, token).catch(() => null as Policy | null)]);
      const entries: HistoryEntry[] = [];
      let before: string | null = null;
      for (let i = 0; i < CHART_PAGES; i += 1) {
        const batch = await api.transactions(agent.id, token, 500, before);
        entries.push(...batch);
        if (batch.length < 500) break;
        before = batch[batch.length - 1].id;
      }
      const natives: Record<string, string> = {};
      for (const chain of detail.chains) {
        const info = chains.find((c) => c.name === chain);
        if (info?.native_symbol) natives[chain] = info.native_symbol;
      }
      const perDay: Record<string, string> = {};
      for (const [key, limits] of Object.entries(policy?.limits ?? {})) if (limits?.per_day) perDay[key] = limits.per_day;
      const series = spendingSeries({ entries, natives, perDay, cap: capText(detail.spending_cap) });
      clear(charts);
      for (const s of series) {
        const [chain] = s.asset.split(':');
        charts.append(spendingChart(s, s.cap !== null ? (detail.spent[chain] ?? null) : null));
      }
    } catch (e) {
      chartError.show(e);
    }
  }

  const refresh = async () => {
    last = null;
    await Promise.all([page(null), drawCharts()]);
  };
  older.addEventListener('click', () => void page(last));
  refreshButton.addEventListener('click', () => void refresh());
  sizeSelect.addEventListener('change', () => void page(null));

  const el = h(
    'section',
    { class: 'history-panel' },
    h('div', { class: 'section-head' }, h('h2', { id: heading }, 'Transfers'), refreshButton),
    h('h3', {}, `Spending, last ${DAYS} days`),
    chartError.el,
    charts,
    h('h3', {}, 'History'),
    h(
      'p',
      { class: 'muted' },
      'Newest first. A pending transfer can be cancelled: a zero-value send to the agent itself takes its nonce, and ',
      'only its fee is spent. Fee bumps of a stuck transfer list the hashes they replaced.',
    ),
    h('div', { class: 'row' }, h('label', { for: sizeSelect.id }, 'Per page'), sizeSelect, shown),
    error.el,
    h('div', { class: 'table-wrap' }, table),
    empty,
    h('div', { class: 'row' }, older),
  );

  return {
    el,
    // Each visit of the tab shows what happened since.
    load: () => void refresh(),
    refresh,
  };
}
