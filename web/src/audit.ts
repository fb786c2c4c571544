// The audit tab (docs/api.md §10): the agent's entries of the hash-chained audit log, newest first, a page at a
// time ("Older entries" asks for the ones before the last shown).
import { api, type AgentDetail, type AuditEntry } from './api';
import { clear, formatTime, h, shortHex, uid } from './dom';
import { errorLine } from './ui';

export interface AuditPanel {
  el: HTMLElement;
  load(): void;
  refresh(): Promise<void>;
}

const PAGE = 50;

/** The detail object in a line: `key: value` pairs, nested values as JSON. */
function detailText(detail: unknown): string {
  if (!detail || typeof detail !== 'object') return detail == null ? '' : String(detail);
  return Object.entries(detail as Record<string, unknown>)
    .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' · ');
}

export function auditPanel(agent: AgentDetail, token: string): AuditPanel {
  const heading = uid('audit');
  const error = errorLine();
  const rows = h('tbody', {});
  const table = h(
    'table',
    { class: 'audit', 'aria-labelledby': heading, 'data-testid': 'audit' },
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

  function row(entry: AuditEntry): HTMLElement {
    const detail = detailText(entry.detail);
    // The owner's reason for a rejection, when one was given, is part of the entry (`detail.reason`).
    const given = (entry.detail as Record<string, unknown> | null)?.reason;
    const note = entry.action === 'transfer_rejected' && typeof given === 'string' ? { reason: given } : null;
    return h(
      'tr',
      { 'data-testid': 'audit-entry', 'data-action': entry.action, 'data-id': String(entry.id) },
      h('td', { class: 'nowrap' }, formatTime(entry.at)),
      h('td', {}, entry.actor),
      h('td', { class: 'mono' }, entry.action),
      h(
        'td',
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
      h('td', { class: 'mono small', title: entry.hash }, shortHex(entry.hash, 8, 4)),
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
      empty.hidden = rows.childElementCount > 0;
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
