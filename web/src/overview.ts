// The overview (landing page): every agent with its balances, what its spending cap has counted against the cap,
// and how many transfers wait for the owner's approval, amounts rounded (exact values in titles). Read with what
// the console holds for each agent: its saved token, else owner authority (the admin token or an owner session,
// which alone opens these reads, docs/api.md §10). An agent the console holds nothing for says how to open it.
import { api, type AgentDetail, type AgentSummary, type Balances, type ChainInfo, type Transfer } from './api';
import { compareDecimal, roundAmount } from './amount';
import { noteWaiting } from './approvals';
import { ownerCredential } from './authority';
import { clear, h, uid } from './dom';
import { getToken } from './tokens';
import { usdValue } from './usd';
import { errorText } from './ui';

export interface OverviewHooks {
  open(agentId: string, tab?: 'history' | 'wallet' | 'approvals' | 'chat'): void;
  create(): void;
}

const PARALLEL = 4;

function amount(value: string, unit: string): HTMLElement {
  return h('span', { class: 'amount', title: `${value} ${unit}` }, `${roundAmount(value)} ${unit}`);
}

/** Spent against the cap, with a bar; exact figures in the title. */
function capMeter(spent: string, cap: number, symbol: string): HTMLElement {
  const capText = String(cap);
  const ratio = cap > 0 ? Math.min(1, Number(spent) / cap) : compareDecimal(spent, '0') === 1 ? 1 : 0;
  const bar = h('span', { class: 'meter-fill' });
  bar.style.width = `${Math.round(ratio * 100)}%`;
  if (ratio >= 0.9) bar.classList.add('high');
  return h(
    'span',
    { class: 'cap', title: `${spent} of ${capText} ${symbol} counted against the cap` },
    h('span', { class: 'meter', 'aria-hidden': 'true' }, bar),
    ` ${roundAmount(spent)} of ${roundAmount(capText)} ${symbol}`,
  );
}

export function overviewPage(agents: AgentSummary[], chains: ChainInfo[], hooks: OverviewHooks): HTMLElement {
  const bySymbol = new Map(chains.map((c) => [c.name, c.native_symbol]));
  const heading = uid('overview');
  const summary = h('p', { class: 'muted', 'data-testid': 'overview-summary', role: 'status' }, 'Reading every agent…');
  const body = h('tbody', {});
  const table = h(
    'table',
    { class: 'overview cards', 'aria-labelledby': heading },
    h(
      'thead',
      {},
      h('tr', {}, h('th', {}, 'Agent'), h('th', {}, 'Balances'), h('th', {}, 'Spent against the cap'), h('th', {}, 'Waiting for approval')),
    ),
    body,
  );
  let waiting = 0;
  let unread = 0;

  const rows = agents.map((agent) => {
    const name = h('button', { type: 'button', class: 'link', onclick: () => hooks.open(agent.id) }, agent.name);
    const flags = h('span', { class: 'muted small' });
    // Each cell names its column, which a narrow screen shows beside it (a card per agent).
    const balances = h('td', { 'data-testid': 'overview-balances', 'data-label': 'Balances' }, h('span', { class: 'muted' }, '…'));
    const cap = h('td', { 'data-testid': 'overview-cap', 'data-label': 'Spent / cap' }, h('span', { class: 'muted' }, '…'));
    const approvals = h('td', { 'data-testid': 'overview-approvals', 'data-label': 'Waiting' }, h('span', { class: 'muted' }, '…'));
    const row = h(
      'tr',
      { 'data-testid': 'overview-row', 'data-agent-id': agent.id },
      h('td', { 'data-label': '', class: 'agent-cell' }, name, h('br', {}), h('span', { class: 'muted small' }, agent.chains.join(', ')), ' ', flags),
      balances,
      cap,
      approvals,
    );
    body.append(row);
    return { agent, flags, balances, cap, approvals };
  });

  function done(): void {
    const parts = [`${agents.length} agent${agents.length === 1 ? '' : 's'}`];
    parts.push(waiting ? `${waiting} transfer${waiting === 1 ? '' : 's'} waiting for approval` : 'nothing waiting for approval');
    if (unread) parts.push(`${unread} not readable without its token or owner authority`);
    summary.textContent = `${parts.join(' · ')}.`;
  }

  async function fill(row: (typeof rows)[number]): Promise<void> {
    const { agent } = row;
    const token = getToken(agent.id);
    if (!token && !ownerCredential(agent.id)) {
      unread += 1;
      for (const cell of [row.balances, row.cap, row.approvals]) clear(cell);
      row.balances.append(
        h('span', { class: 'muted small' }, 'No saved token and no owner authority: ', h('button', { type: 'button', class: 'link', onclick: () => hooks.open(agent.id) }, 'open it'), ' to paste its token, or enter the admin token.'),
      );
      return;
    }
    let detail: AgentDetail;
    try {
      detail = await api.agentAny(agent.id, token);
    } catch (e) {
      unread += 1;
      clear(row.balances);
      row.balances.append(h('span', { class: 'form-error small' }, errorText(e)));
      clear(row.cap);
      clear(row.approvals);
      return;
    }
    row.flags.textContent = !detail.is_active ? 'deleted' : detail.guarded ? 'guarded' : 'not guarded';
    row.flags.title = !detail.is_active ? '' : detail.guarded ? 'Only its owner can lift its limits' : 'Its own token can lift its limits';
    row.flags.className = `badge ${!detail.is_active || !detail.guarded ? 'bad' : 'good'}`;
    clear(row.cap);
    for (const chain of detail.chains) {
      row.cap.append(
        h('div', { 'data-chain': chain }, h('span', { class: 'muted small' }, `${chain}: `), capMeter(detail.spent?.[chain] ?? '0', detail.spending_cap, bySymbol.get(chain) ?? '')),
      );
    }
    if (!detail.is_active) {
      clear(row.balances);
      row.balances.append(h('span', { class: 'muted small' }, 'deleted: funds stay at its addresses'));
      clear(row.approvals);
      row.approvals.append('—');
      return;
    }
    const [balances, pending] = await Promise.allSettled([api.balancesAny(agent.id, token), api.approvalsAny(agent.id, token)]);
    showBalances(row.balances, balances);
    showApprovals(row.approvals, pending, agent.id);
  }

  function showBalances(cell: HTMLElement, result: PromiseSettledResult<Balances>): void {
    clear(cell);
    if (result.status === 'rejected') {
      cell.append(h('span', { class: 'form-error small' }, errorText(result.reason)));
      return;
    }
    for (const [chain, entry] of Object.entries(result.value.balances)) {
      const line = h('div', { 'data-chain': chain }, h('span', { class: 'muted small' }, `${chain}: `));
      if ('error' in entry) line.append(h('span', { class: 'form-error small' }, `unavailable (${entry.error.code})`));
      else {
        line.append(h('span', { 'data-testid': `overview-balance-${chain}` }, amount(entry.formatted, entry.symbol)));
        // Tokens are listed when the wallet holds some.
        for (const [symbol, t] of Object.entries(entry.tokens ?? {})) {
          if (!('error' in t) && compareDecimal(t.formatted, '0') === 1) line.append(' · ', amount(t.formatted, symbol), usdValue(t.formatted, symbol) ?? '');
        }
      }
      cell.append(line);
    }
  }

  function showApprovals(cell: HTMLElement, result: PromiseSettledResult<Transfer[]>, agentId: string): void {
    clear(cell);
    if (result.status === 'rejected') {
      cell.append(h('span', { class: 'form-error small' }, errorText(result.reason)));
      return;
    }
    const count = result.value.length;
    waiting += count;
    noteWaiting(agentId, count);
    if (!count) {
      cell.append(h('span', { class: 'muted' }, 'none'));
      return;
    }
    cell.append(
      h('button', { type: 'button', class: 'link waiting', onclick: () => hooks.open(agentId, 'approvals') }, `${count} waiting`),
      h(
        'ul',
        { class: 'small plain' },
        result.value.slice(0, 3).map((t) => h('li', {}, amount(t.amount, t.asset), ` to ${t.to.slice(0, 8)}… on ${t.chain}`)),
      ),
    );
  }

  // A few agents at a time, so that a long list does not flood the server.
  const queue = [...rows];
  const workers = Array.from({ length: Math.min(PARALLEL, queue.length) }, async () => {
    for (let next = queue.shift(); next; next = queue.shift()) await fill(next);
  });
  void Promise.all(workers).then(done);
  if (!rows.length) summary.textContent = 'No agents yet.';

  return h(
    'section',
    { class: 'overview-page', 'aria-labelledby': heading, 'data-testid': 'overview' },
    h(
      'div',
      { class: 'section-head' },
      h('h2', { id: heading }, 'Overview'),
      h('button', { type: 'button', class: 'secondary small', onclick: () => hooks.create() }, 'New agent'),
    ),
    summary,
    h('div', { class: 'table-wrap' }, table),
    h(
      'p',
      { class: 'muted small' },
      'Balances are rounded (hover for the exact amount). The cap counts, per chain, what was sent plus fees and the reservations of transfers on their way or waiting for approval.',
    ),
    h(
      'p',
      { class: 'muted small', 'data-testid': 'guarded-meaning' },
      'Guarded: the agent has an owner address (or the server an admin token), so its own token cannot raise its cap, change its policy or export its key; only the owner can. ',
      'Not guarded: anything holding the agent\u2019s token, such as the model running it, can lift its limits.',
    ),
  );
}
