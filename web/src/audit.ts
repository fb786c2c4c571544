// The audit tab (docs/api.md §10): the agent's entries of the hash-chained audit log, newest first, a page at a
// time ("Older entries" asks for the ones before the last shown). A filter narrows what is shown to a kind of
// entry, an actor or a word; the API filters nothing, so it applies to the entries read so far.
import { api, type AgentDetail, type AuditEntry } from './api';
import { cell, clear, h, shortHex, uid, whenEl } from './dom';
import { errorLine } from './ui';

export interface AuditPanel {
  el: HTMLElement;
  load(): void;
  refresh(): Promise<void>;
}

const PAGE = 50;

/** The detail object in a line: `key: value` pairs, nested values as JSON; fields without a value are left out. */
export function detailText(detail: unknown): string {
  if (!detail || typeof detail !== 'object') return detail == null ? '' : String(detail);
  return Object.entries(detail as Record<string, unknown>)
    .filter(([, v]) => v !== null && v !== undefined && v !== '')
    .map(([k, v]) => `${k.replace(/_/g, ' ')}: ${typeof v === 'string' ? v : JSON.stringify(v, (_, x: unknown) => (x === null ? undefined : x))}`)
    .join(' · ');
}

/** The kinds of entry the filter offers, by the actions they group. */
const KINDS: { id: string; label: string; match: (action: string) => boolean }[] = [
  { id: '', label: 'Every entry', match: () => true },
  { id: 'money', label: 'Transfers and payments', match: (a) => /^(transfer|x402|typed_data|funds|sweep|fetch|nonce)/.test(a) },
  { id: 'refused', label: 'Refused, rejected, expired', match: (a) => /(refused|rejected|expired|failed)$/.test(a) },
  { id: 'approvals', label: 'Approvals and rejections', match: (a) => a === 'transfer_approved' || a === 'transfer_rejected' },
  { id: 'policy', label: 'Policy changes', match: (a) => a.startsWith('policy') },
  { id: 'agent', label: 'Agent and owner changes', match: (a) => /^(agent_|owner_|token_|key_|webhook|export)/.test(a) },
];

/** An action's name in words: `transfer_refused` → "transfer refused". */
const actionWords = (action: string) => action.replace(/_/g, ' ');

export function auditPanel(agent: AgentDetail, token: string | null): AuditPanel {
  const heading = uid('audit');
  const error = errorLine();
  const rows = h('tbody', {});
  const table = h(
    'table',
    { class: 'audit cards', 'aria-labelledby': heading, 'data-testid': 'audit' },
    h(
      'thead',
      {},
      h('tr', {}, ['When', 'Who', 'Action', 'Detail', 'Hash'].map((t) => h('th', { scope: 'col' }, t))),
    ),
    rows,
  );
  const empty = h('p', { class: 'muted', hidden: true }, 'No entries yet.');
  const older = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Older entries');
  const refreshButton = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
  let last: number | null = null;
  const kind = h('select', { id: uid('audit-kind'), 'data-testid': 'audit-kind' }, KINDS.map((k) => h('option', { value: k.id }, k.label)));
  const actor = h(
    'select',
    { id: uid('audit-actor'), 'data-testid': 'audit-actor' },
    h('option', { value: '' }, 'Anyone'),
    ['owner', 'admin', 'agent', 'mcp', 'system'].map((a) => h('option', { value: a }, a)),
  );
  const words = h('input', { type: 'search', id: uid('audit-words'), placeholder: 'an address, an amount, a word…', 'data-testid': 'audit-words' });
  const filterCount = h('span', { class: 'muted small', 'data-testid': 'audit-shown', role: 'status' });

  /** Hides the rows the filter leaves out; says how many of those read are shown. */
  function applyFilter(): void {
    const k = KINDS.find((x) => x.id === kind.value) ?? KINDS[0];
    const needle = words.value.trim().toLowerCase();
    let shown = 0;
    const all = [...rows.children] as HTMLElement[];
    for (const tr of all) {
      const ok =
        k.match(tr.dataset.action ?? '') &&
        (!actor.value || tr.dataset.actor === actor.value) &&
        (!needle || (tr.textContent ?? '').toLowerCase().includes(needle) || (tr.dataset.search ?? '').includes(needle));
      tr.hidden = !ok;
      if (ok) shown += 1;
    }
    const filtering = Boolean(k.id || actor.value || needle);
    filterCount.textContent = filtering ? `${shown} of the ${all.length} entries read match${older.hidden ? '' : ' (older entries are not read yet)'}` : `${all.length} entries read`;
    empty.hidden = all.length > 0;
  }
  for (const control of [kind, actor]) control.addEventListener('change', applyFilter);
  words.addEventListener('input', applyFilter);

  function row(entry: AuditEntry): HTMLElement {
    const detail = detailText(entry.detail);
    // The owner's reason for a rejection, when one was given, is part of the entry (`detail.reason`).
    const given = (entry.detail as Record<string, unknown> | null)?.reason;
    const note = entry.action === 'transfer_rejected' && typeof given === 'string' ? { reason: given } : null;
    return h(
      'tr',
      {
        'data-testid': 'audit-entry',
        'data-action': entry.action,
        'data-actor': entry.actor,
        'data-id': String(entry.id),
        // The filter's words also find what the line shortens (full addresses, nested values).
        'data-search': JSON.stringify(entry.detail ?? {}).toLowerCase(),
      },
      cell('When', { class: 'when' }, whenEl(entry.at)),
      cell('Who', {}, entry.actor),
      cell('Action', { class: 'action', title: entry.action }, actionWords(entry.action)),
      cell(
        'Detail',
        { class: 'detail small' },
        h('span', { title: JSON.stringify(entry.detail, null, 2) }, detail),
        note
          ? h(
              'div',
              { 'data-testid': 'reject-reason' },
              'Reason given: ',
              h('q', {}, note.reason),
            )
          : null,
      ),
      cell('Hash', { class: 'mono small', title: entry.hash }, shortHex(entry.hash, 8, 4)),
    );
  }

  async function page(before: number | null): Promise<void> {
    error.clear();
    older.disabled = true;
    refreshButton.disabled = true;
    try {
      const entries = await api.audit(agent.id, token, PAGE, before);
      if (before === null) clear(rows);
      for (const entry of entries) rows.append(row(entry));
      if (entries.length) last = entries[entries.length - 1].id;
      // A full page may have more behind it; a short one is the end.
      older.hidden = entries.length < PAGE;
      applyFilter();
    } catch (e) {
      error.show(e);
    } finally {
      older.disabled = false;
      refreshButton.disabled = false;
    }
  }

  const refresh = () => {
    last = null;
    return page(null);
  };
  older.addEventListener('click', () => void page(last));
  refreshButton.addEventListener('click', () => void refresh());

  const el = h(
    'section',
    { class: 'audit-panel' },
    h('div', { class: 'section-head' }, h('h2', { id: heading }, 'Audit log'), refreshButton),
    h(
      'p',
      { class: 'muted' },
      'Every change to this agent, with who made it: its own token (agent), its owner, the operator (admin), an MCP ',
      'client or the service (system). Entries are hash-chained; `agentd audit verify` checks the chain.',
    ),
    h(
      'div',
      { class: 'row audit-filter', role: 'search', 'aria-label': 'Filter the audit log' },
      h('label', { for: kind.id }, 'Show'),
      kind,
      h('label', { for: actor.id }, 'by'),
      actor,
      h('label', { for: words.id, class: 'visually-hidden' }, 'Containing'),
      words,
      filterCount,
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
