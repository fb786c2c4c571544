// The history tab: the agent's transfers (docs/api.md §12, §14, §16), newest first, a page at a time, with their
// status, asset, amount, recipient, explorer link and replaced attempts; x402 payments with the host and path they
// paid for; contract calls with their function and balance changes, typed-data signatures with their primary type
// (§18). A pending transfer can be cancelled here. Transfers held for the owner's approval are not in that list
// (§11 keeps them with the approvals): they are read from `GET …/approvals` and shown first, each linked to its
// approval. Above the table, the spending chart per asset. The table is a card per row on a narrow screen. A send
// through an on-chain delegation (§21) is marked with the owner's account it left, and a refused one says why in
// the delegation's terms (what it left, revoked, removed, expired). On a chain where the operator sponsors (or
// sponsored) the agent's gas (§22), a row paid by the sponsorship says so, with its user operation, the bundle that
// carried it and what the gas cost (read from the transfer: the history's list does not carry them).
import { api, type AgentDetail, type AuditEntry, type ChainInfo, type HistoryEntry, type Transfer } from './api';
import { noteWaiting } from './approvals';
import { compactEffects, functionName, simulationOf, typedLabel, type CallFields } from './calls';
import { DAYS, spendingChart, spendingSeries } from './chart';
import { cell, clear, formatTime, h, readableTime, shortHex, uid, whenEl } from './dom';
import { capText, loadFacts, refusalText, type AgentFacts } from './explain';
import { errorLine, errorText, notify, txHashLink } from './ui';
import { paidAnswerView } from './paid';
import { listDelegations, type Delegation } from './delegations';
import { gasInfo } from './sponsorship';
import { incomeSection } from './income';
import { ownerCredential } from './authority';

export interface HistoryHooks {
  /** Opens the Approvals tab at the card of a held transfer. */
  openApproval(transferId: string): void;
}

export interface HistoryPanel {
  el: HTMLElement;
  load(): void;
  refresh(): Promise<void>;
}

const PAGE_SIZES = [10, 25, 50, 100];
const POLL_MS = 3000;

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

/**
 * Audit actions shown in the history beside the transfers: requests the service refused (they made no transfer),
 * and requests held for approval that were rejected or expired (they never reach `GET …/transactions`).
 */
const ACTIVITY: Record<string, 'refused' | 'rejected' | 'expired'> = {
  transfer_refused: 'refused',
  x402_payment_refused: 'refused',
  transfer_rejected: 'rejected',
  transfer_expired: 'expired',
};
/** Audit pages (of 500, the API's largest) read at most per history page. */
const AUDIT_PAGES = 10;

/** The mark of money that left the owner's account through a delegation (§21), not the agent's wallet. */
function delegatedMark(delegator: string | null): HTMLElement {
  return h(
    'div',
    { class: 'small delegated', 'data-testid': 'delegated-from' },
    h('span', { class: 'badge kind' }, 'delegated'),
    ' from the owner\u2019s account ',
    delegator ? h('code', { class: 'mono', title: delegator }, shortHex(delegator, 6, 4)) : null,
    delegator ? ' ' : '',
    'through a delegation, not the agent\u2019s wallet',
  );
}

/** A held transfer (`GET …/approvals`) as a row of the history: no hash, no nonce yet. */
function heldEntry(t: Transfer): HistoryEntry & { expires_at?: string | null } {
  return {
    ...(t as unknown as HistoryEntry),
    status: 'awaiting_approval',
    tx_hash: '',
    replaced_hashes: [],
    expires_at: t.expires_at,
  };
}

export function historyPanel(
  agent: AgentDetail,
  token: string | null,
  chains: ChainInfo[],
  hooks: HistoryHooks = { openApproval: () => {} },
): HistoryPanel {
  const heading = uid('history');
  const error = errorLine();
  const chartError = errorLine();
  const charts = h('div', { class: 'charts', 'data-testid': 'spending-charts' });
  const rows = h('tbody', {});
  const table = h(
    'table',
    { class: 'history feed cards', 'aria-labelledby': heading, 'data-testid': 'history' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ['When', 'Status', 'What', 'Amount', 'To', 'Transaction', ''].map((t) => h('th', { scope: 'col', class: `col-${t.toLowerCase() || 'actions'}` }, t)),
      ),
    ),
    rows,
  );
  const empty = h('p', { class: 'muted', hidden: true }, 'No transfers yet.');
  const shown = h('span', { class: 'muted small', 'data-testid': 'history-count' });
  const activityCount = h('span', { class: 'muted small', 'data-testid': 'activity-count' });
  const heldCount = h('span', { class: 'small', 'data-testid': 'held-count' });
  const activityToggle = h('input', { type: 'checkbox', id: uid('activity'), checked: true });
  // The audit log read so far (newest first), for the refused, rejected and expired requests shown between transfers.
  let auditBefore: number | null = null;
  let auditOldest: number | null = null;
  let auditDone = false;
  const auditWaiting: AuditEntry[] = [];
  // Policy, cap and the whole history, for the refusals' explanations and the chart: read once per refresh.
  let facts: Promise<AgentFacts> | null = null;
  const factsOf = (): Promise<AgentFacts> =>
    (facts ??= api
      .approvals(agent.id, token)
      .catch(() => [] as Transfer[])
      .then((waiting) => loadFacts(agent.id, token, waiting)));
  // The agent's delegations, for the refusals of delegated sends (revoked, removed, expired): read once per refresh.
  let delegations: Promise<Map<string, Delegation> | null> | null = null;
  const delegationsOf = () =>
    (delegations ??= listDelegations(agent.id, token).then(
      (all) => new Map(all.map((d) => [d.id, d])),
      () => null,
    ));
  // The chains the operator ever sponsored this agent on: their rows are read for who paid the gas (once per refresh).
  let sponsored: Promise<Set<string>> | null = null;
  const sponsoredChains = () =>
    (sponsored ??= api.sponsorships(agent.id, token).then(
      (list) => new Set(list.map((s) => s.chain)),
      () => new Set<string>(),
    ));
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
        else if (c.calls?.length) {
          // A batch (§22): its calls in order, run as one operation.
          el.firstElementChild!.textContent = 'batch';
          el.append(
            h(
              'strong',
              { class: 'mono', 'data-testid': 'call-function', 'data-batch': String(c.calls.length) },
              c.calls.map((x) => (x.function ? functionName(x.function) : (x.selector ?? '?'))).join(' + '),
            ),
          );
        } else if (c.call?.function === 'transferWithAuthorization' && !c.call?.args) {
          // The settlement of a payment to the agent (§23): agentd sent the buyer's authorization from the agent's
          // wallet; it moved the buyer's tokens in and cost the agent only this transaction's gas.
          el.firstElementChild!.textContent = 'settlement';
          el.dataset.testid = 'settlement';
          el.append(
            h('strong', {}, 'Settled a payment to the agent'),
            ' ',
            h('span', { class: 'muted small' }, '(the buyer\u2019s transferWithAuthorization on ', h('code', { class: 'mono small', title: c.call.to ?? e.to }, shortHex(c.call.to ?? e.to, 6, 4)), '; only its gas is the agent\u2019s: see the income above)'),
          );
          return;
        } else {
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
    return txHashLink(chain, hash, base ? `${base}/tx/${hash}` : null, head, tail);
  };

  function what(e: HistoryEntry | Transfer): HTMLElement {
    if (e.kind === 'x402') {
      return h(
        'div',
        { 'data-testid': 'x402' },
        h('span', { class: 'badge kind' }, 'x402'),
        ' ',
        e.x402 ? h('span', { class: 'mono small', title: e.x402.url }, hostAndPath(e.x402.url)) : 'paid request',
        e.status === 'awaiting_approval' ? null : boughtButton(e.id),
      );
    }
    if (e.kind === 'call' || e.kind === 'typed_data') return callCell(e);
    return h('span', {}, `transfer on ${e.chain}`);
  }

  /**
   * "What it bought": the paid request's answer, kept by the service and returned on single-transfer reads only
   * (`x402.response`, §16), read when asked and shown under the row's description.
   */
  function boughtButton(transferId: string): HTMLElement {
    const slot = h('div', { class: 'bought' });
    const button = h('button', { type: 'button', class: 'link small', 'data-testid': 'x402-bought', 'aria-expanded': 'false' }, 'What it bought');
    button.addEventListener('click', async () => {
      if (slot.firstChild) {
        slot.replaceChildren();
        button.setAttribute('aria-expanded', 'false');
        return;
      }
      button.disabled = true;
      try {
        const t = await api.transfer(agent.id, token, transferId);
        const answer = t.x402?.response;
        slot.replaceChildren(
          answer ? paidAnswerView(answer) : h('p', { class: 'muted small' }, 'The service kept no answer for this payment (the paid request was not made, or failed before an answer).'),
        );
        button.setAttribute('aria-expanded', 'true');
      } catch (err) {
        slot.replaceChildren(h('p', { class: 'form-error small' }, errorText(err)));
      } finally {
        button.disabled = false;
      }
    });
    return h('div', {}, button, slot);
  }

  /**
   * A row's gas, for an outflow on a chain the agent was sponsored on: the sponsorship's mark with its user operation,
   * bundle and gas cost (`latest`: the transfer as just read). A sponsored operation cannot be cancelled (§22), so its
   * Cancel button goes.
   */
  async function showGas(e: HistoryEntry, slot: HTMLElement, cancel: HTMLElement | null, latest?: Transfer): Promise<void> {
    if (e.status === 'awaiting_approval' || e.kind === 'typed_data' || e.kind === 'x402') return;
    if (!(await sponsoredChains()).has(e.chain)) return;
    try {
      const t = latest ?? (e.status === 'pending' ? await api.transfer(agent.id, token, e.id) : await detailOf(e.id));
      const paid = gasInfo(t, chains, true);
      if (!paid) return;
      slot.replaceChildren(paid);
      cancel?.remove();
    } catch {
      // The row stays as the list gave it; the next refresh tries again.
    }
  }

  function row(e: HistoryEntry & { expires_at?: string | null }, latest?: Transfer): HTMLElement {
    const status = e.status;
    const held = status === 'awaiting_approval';
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
    const gasSlot = h('div', { class: 'gas-slot' });
    const validBefore =
      e.kind === 'x402' && e.x402 && status === 'pending'
        ? h('div', { class: 'small muted' }, `usable until ${formatTime(new Date(e.x402.valid_before * 1000).toISOString())}`)
        : null;
    // A held transfer: until when it waits, and the way to its approval.
    const heldNote = held
      ? h(
          'div',
          { class: 'small held-note', 'data-testid': 'held-note' },
          'Waits for the owner\u2019s approval',
          e.expires_at ? ` until ${readableTime(e.expires_at)}` : '',
          ': nothing is signed yet. ',
          h(
            'a',
            {
              href: `#/agents/${agent.id}/approvals`,
              'data-testid': 'approval-link',
              onclick: (event: Event) => {
                event.preventDefault();
                hooks.openApproval(e.id);
              },
            },
            'Review it in Approvals',
          ),
        )
      : null;
    const el = h(
      'tr',
      {
        'data-testid': 'history-row',
        'data-transfer-id': e.id,
        'data-status': status,
        'data-kind': e.kind ?? 'transfer',
        'data-at': String(Date.parse(e.created_at)),
        'data-delegation': e.delegation?.id ?? null,
        class: held ? 'held' : null,
      },
      cell('When', { class: 'when' }, whenEl(e.created_at)),
      cell('Status', {}, h('span', { class: `status status-${status}` }, STATUS_TEXT[status] ?? status)),
      cell('What', { class: 'what' }, what(e), e.delegation ? delegatedMark(e.delegation.delegator) : null, heldNote),
      cell('Amount', { class: 'amount' }, h('strong', {}, e.amount), ` ${e.asset}`, e.kind === 'x402' ? h('div', { class: 'small muted' }, 'price') : null),
      cell('To', {}, h('code', { class: 'mono small', title: e.to }, shortHex(e.to, 8, 6)), e.kind === 'x402' ? h('div', { class: 'small muted' }, 'payTo') : null),
      cell(
        'Transaction',
        { 'data-testid': 'tx' },
        e.tx_hash ? [settlement, txLink(e.chain, e.tx_hash, 8, 6)] : held ? h('span', { class: 'muted small' }, 'not signed yet') : '—',
        replaced,
        validBefore,
        gasSlot,
      ),
      cell('', { class: 'actions' }, cancel, rowError.el),
    );
    void showGas(e, gasSlot, cancel, latest);
    return el;
  }

  /** Replaces an entry's row in place (after a cancel, or when a pending one moved on). */
  function update(entry: HistoryEntry, note?: string, latest?: Transfer): void {
    const old = byId.get(entry.id);
    const el = row(entry, latest);
    if (note) el.children[1].querySelector('.cell-value')?.append(h('div', { class: 'small muted' }, note));
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
            update({ ...entry, status: t.status, tx_hash: t.tx_hash ?? entry.tx_hash, replaced_hashes: t.replaced_hashes, block_number: t.block_number }, undefined, t);
          }
        } catch {
          // Shown again on the next refresh; the poll keeps going.
        }
      }
      if (moved) {
        facts = null;
        void drawCharts();
      }
      if ([...byId.values()].some((r) => r.entry.status === 'pending' || r.entry.status === 'awaiting_approval')) schedulePoll();
    }, POLL_MS);
  }

  async function page(before: string | null): Promise<void> {
    error.clear();
    older.disabled = true;
    refreshButton.disabled = true;
    const size = Number(sizeSelect.value);
    try {
      const [entries, held] = await Promise.all([
        api.transactions(agent.id, token, size, before),
        before === null ? api.approvals(agent.id, token).catch(() => null) : Promise.resolve(null),
      ]);
      if (before === null) {
        clear(rows);
        byId.clear();
        auditBefore = null;
        auditOldest = null;
        auditDone = false;
        auditWaiting.length = 0;
      }
      for (const entry of entries) {
        const el = row(entry);
        byId.set(entry.id, { entry, el });
        rows.append(el);
      }
      if (entries.length) last = entries[entries.length - 1].id;
      // Held transfers are not in the history's list: they come from the approvals, once, on the newest page.
      for (const t of held ?? []) {
        // A held offer (§23) is no outflow: it waits in Approvals and, approved, on the Offers tab.
        if (byId.has(t.id) || t.kind === 'offer') continue;
        const entry = heldEntry(t);
        const el = row(entry);
        byId.set(entry.id, { entry, el });
        rows.append(el);
      }
      if (held) noteWaiting(agent.id, held.length);
      sortRows();
      // A full page may have more behind it; a short one is the end.
      older.hidden = entries.length < size;
      empty.hidden = rows.childElementCount > 0;
      const waiting = [...byId.values()].filter((r) => r.entry.status === 'awaiting_approval').length;
      shown.textContent = `${byId.size - waiting} transfer${byId.size - waiting === 1 ? '' : 's'} shown`;
      heldCount.textContent = waiting ? `· ${waiting} waiting for approval` : '';
      if (entries.some((e) => e.status === 'pending') || waiting) schedulePoll();
      // The refused, rejected and expired requests as far back as the transfers shown (all of them at the end).
      const oldest = entries.length && !older.hidden ? Date.parse(entries[entries.length - 1].created_at) : -Infinity;
      await showActivity(oldest);
      empty.hidden = rows.childElementCount > 0;
    } catch (e) {
      error.show(e);
    } finally {
      older.disabled = false;
      refreshButton.disabled = false;
    }
  }

  const actorName = (actor: string) =>
    actor === 'admin' ? 'operator (admin token)' : actor === 'owner' ? 'owner' : actor === 'agent' ? "agent's own token" : actor;

  /** One refused, rejected or expired request, from its audit entry. */
  function activityRow(a: AuditEntry, f: AgentFacts | null, known: Map<string, Delegation> | null): HTMLElement {
    const kind = ACTIVITY[a.action];
    const d = (a.detail ?? {}) as Record<string, unknown>;
    const str = (k: string) => (typeof d[k] === 'string' ? (d[k] as string) : null);
    const delegationId = str('delegation_id');
    const delegation = delegationId ? (known?.get(delegationId) ?? null) : null;
    const chain = str('chain') ?? '';
    const asset = str('asset');
    const native = chains.find((c) => c.name === chain)?.native_symbol ?? '';
    const transferId = str('transfer_id');
    const x402 = a.action === 'x402_payment_refused' || str('kind') === 'x402';
    const paidFor = str('url') ? hostAndPath(str('url') as string) : str('host') ? `${str('host')}${str('path') ?? ''}` : null;

    let reason: HTMLElement;
    if (kind === 'refused') {
      reason = h(
        'div',
        { class: 'small', 'data-testid': 'activity-reason', 'data-rule': str('rule') ?? '', 'data-code': str('code') ?? '' },
        refusalText(d, a.at, f, native, delegation),
        h('div', { class: 'muted mono' }, [str('code'), str('rule')].filter(Boolean).join(' · ')),
      );
    } else if (kind === 'rejected') {
      const note = str('reason') ? { reason: str('reason') as string } : null;
      reason = h(
        'div',
        { class: 'small', 'data-testid': 'activity-reason' },
        str('kind') === 'offer'
          ? `Rejected by the ${actorName(a.actor)}: the offer never sold.`
          : `Rejected by the ${actorName(a.actor)}: nothing was signed, its reservation was released.`,
        note
          ? h(
              'div',
              { 'data-testid': 'reject-reason' },
              'Reason: ',
              h('q', {}, note.reason),
            )
          : null,
      );
    } else {
      reason = h(
        'div',
        { class: 'small', 'data-testid': 'activity-reason' },
        str('kind') === 'offer'
          ? 'Nobody decided before it expired: the offer never sold.'
          : 'Nobody decided before it expired: nothing was signed, its reservation was released.',
      );
    }
    let what: HTMLElement;
    if (x402) {
      what = h('div', {}, h('span', { class: 'badge kind' }, 'x402'), ' ', paidFor ? h('span', { class: 'mono small' }, paidFor) : 'paid request');
    } else if (str('kind') === 'call') {
      const fn = str('function');
      what = h('div', {}, h('span', { class: 'badge kind' }, 'call'), ' ', h('strong', { class: 'mono', title: fn ?? '' }, fn ? functionName(fn) : (str('selector') ?? 'unknown function')));
    } else if (str('kind') === 'offer') {
      what = h('div', {}, h('span', { class: 'badge kind' }, 'offer'), ' ', paidFor ? h('span', { class: 'mono small' }, paidFor) : 'a stored body');
    } else if (str('kind') === 'typed_data') {
      what = h('div', {}, h('span', { class: 'badge kind' }, 'signature'), ' ', str('primary_type') ?? '');
    } else {
      what = h('span', {}, chain ? `transfer on ${chain}` : 'transfer');
    }
    const amount = str('amount');
    const to = str('to');
    return h(
      'tr',
      {
        class: 'activity',
        'data-testid': 'activity-row',
        'data-activity': kind,
        'data-audit-id': String(a.id),
        'data-transfer-id': transferId,
        'data-at': String(Date.parse(a.at)),
        'data-delegation': delegationId,
      },
      cell('When', { class: 'when' }, whenEl(a.at)),
      cell('Status', {}, h('span', { class: `status status-${kind}` }, kind)),
      cell('What', { class: 'what' }, what, delegationId ? delegatedMark(delegation?.delegator ?? null) : null, reason),
      cell(
        'Amount',
        { class: 'amount' },
        amount ? [h('strong', {}, amount), ` ${asset ?? (str('kind') === 'call' ? native : '')}`] : str('max_amount') ? `up to ${str('max_amount')}` : '—',
      ),
      cell('To', {}, to ? h('code', { class: 'mono small', title: to }, shortHex(to, 8, 6)) : '—'),
      cell('Transaction', { class: 'no-tx' }, h('span', { class: 'muted small' }, 'nothing sent')),
      cell('', { class: 'actions' }),
    );
  }

  /** Reads the audit log back to `floor` (ms) and shows its refused, rejected and expired requests in time order. */
  async function showActivity(floor: number): Promise<void> {
    try {
      let pages = 0;
      while (!auditDone && pages < AUDIT_PAGES && (auditOldest === null || auditOldest >= floor)) {
        const batch = await api.audit(agent.id, token, 500, auditBefore);
        pages += 1;
        if (batch.length < 500) auditDone = true;
        if (batch.length) {
          auditBefore = batch[batch.length - 1].id;
          auditOldest = Date.parse(batch[batch.length - 1].at);
        }
        auditWaiting.push(...batch.filter((a) => ACTIVITY[a.action]));
      }
      const due = auditWaiting.filter((a) => Date.parse(a.at) >= floor);
      if (due.length === 0) return;
      auditWaiting.splice(0, auditWaiting.length, ...auditWaiting.filter((a) => Date.parse(a.at) < floor));
      const [f, known] = await Promise.all([
        factsOf().catch(() => null),
        due.some((a) => (a.detail as Record<string, unknown> | null)?.delegation_id) ? delegationsOf() : Promise.resolve(null),
      ]);
      for (const a of due) rows.append(activityRow(a, f, known));
      sortRows();
    } catch (e) {
      error.show(e);
    } finally {
      const n = rows.querySelectorAll('[data-testid="activity-row"]').length;
      activityCount.textContent = n ? `· ${n} refused, rejected or expired` : '';
      applyToggle();
    }
  }

  /** Newest first, transfers and the other requests together. */
  function sortRows(): void {
    const all = [...rows.children] as HTMLElement[];
    const at = (el: HTMLElement) => Number(el.dataset.at ?? 0);
    const sorted = all.map((el, i) => ({ el, i })).sort((a, b) => at(b.el) - at(a.el) || a.i - b.i);
    if (sorted.some((x, i) => x.i !== i)) for (const { el } of sorted) rows.append(el);
  }

  function applyToggle(): void {
    for (const el of rows.querySelectorAll<HTMLElement>('[data-testid="activity-row"]')) el.hidden = !activityToggle.checked;
  }
  activityToggle.addEventListener('change', applyToggle);

  /** The chart reads the whole history (up to CHART_PAGES pages) with the current policy and cap. */
  async function drawCharts(): Promise<void> {
    chartError.clear();
    try {
      const f = await factsOf();
      const detail = f.detail ?? (await api.agent(agent.id, token));
      const policy = f.policy;
      const entries = f.entries;
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

  // What buyers paid the agent (§23), set against what this history says it spent.
  const income = incomeSection(
    agent.id,
    token,
    chains,
    () => factsOf().then((f) => f.entries),
    () => !!ownerCredential(agent.id) || (!!token && !agent.guarded),
    (id) => detailOf(id),
  );

  const refresh = async () => {
    last = null;
    facts = null;
    delegations = null;
    sponsored = null;
    await Promise.all([page(null), drawCharts(), income.refresh()]);
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
    income.el,
    h('h3', {}, 'History'),
    h(
      'p',
      { class: 'muted' },
      'Newest first: what the agent sent or paid, what waits for the owner\u2019s approval (with a link to decide), ',
      'and the requests that never became a transfer — refused by the policy or the cap (with the limit that refused ',
      'them and what was left), rejected by the owner, or expired unapproved. A pending transfer can be cancelled: a ',
      'zero-value send to the agent itself takes its place, and only its fee is spent.',
    ),
    h(
      'div',
      { class: 'row' },
      h('label', { for: sizeSelect.id }, 'Per page'),
      sizeSelect,
      shown,
      heldCount,
      activityCount,
      h('label', { class: 'check', for: activityToggle.id }, activityToggle, h('span', {}, 'Show refused, rejected and expired requests')),
    ),
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
