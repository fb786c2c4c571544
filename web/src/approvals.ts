// The approvals tab: transfers waiting for the owner's decision (docs/api.md §11), each with what asked for it (the
// rule of the policy, worked out by ./explain), what is left of its asset's daily and weekly limits, the fee and the
// cap; Approve asks for a confirmation, Reject for an optional reason (kept in this browser: the reject endpoint takes
// no body). The list is read again every few seconds while the page is open and visible, so requests made anywhere
// (chat, the API, MCP, another tab) appear and decisions taken elsewhere disappear; the conversation stream's
// approval events refresh it at once. A held contract call or typed-data signature (§18) shows what it would do, as
// its simulation showed it. An offer the agent's `create_offer` tool made on a guarded agent (§23, `kind: "offer"`)
// waits here too, said in words ("Sell … for 0.05 USDC at …"); approving it makes it sell and signs nothing.
// `approvalList` is shared with the inbox across agents (./inbox).
import { api, type AgentDetail, type ChainInfo, type Transfer } from './api';
import { authorityText, onAuthorityChange } from './authority';
import { callDetails, callLabel, type Abis, type CallFields } from './calls';
import { clear, h, readableTime, uid } from './dom';
import {
  capLine,
  feeText,
  holdReasons,
  limitsFor,
  loadFacts,
  outflows,
  windows,
  windowSentence,
  type AgentFacts,
} from './explain';
import { hostAndPath } from './history';
import { paidAnswerView } from './paid';
import { errorLine, notify } from './ui';

export interface ApprovalsPanel {
  el: HTMLElement;
  load(): void;
  refresh(): Promise<void>;
  /** Reads the list and brings one transfer's card into view (a link from History, a send, a chat card). */
  reveal(transferId: string): Promise<void>;
}

/** How often the waiting list is read again while it is shown (and the page visible). */
export const POLL_MS = 4000;
/** How often the facts behind the explanations (policy, history, cap) are read again when nothing else changed. */
const FACTS_MS = 30000;

/**
 * What the console last read as waiting, per agent: every read of an agent's approvals (its tab, the inbox, the
 * overview, the history) reports here, and the sidebar's inbox badge shows the total. The API has no stream across
 * agents (§7's stream is one conversation's), so the badge moves with what the console reads and with the open
 * conversation's `approval_required` / `approval_resolved` events, which make the agent's list read again.
 */
const waitingByAgent = new Map<string, number>();
const waitingListeners = new Set<(total: number) => void>();

function emitWaiting(): void {
  const total = [...waitingByAgent.values()].reduce((a, b) => a + b, 0);
  for (const listen of waitingListeners) listen(total);
}

export function noteWaiting(agentId: string, count: number): void {
  waitingByAgent.set(agentId, count);
  emitWaiting();
}

export function onWaitingTotal(listen: (total: number) => void): void {
  waitingListeners.add(listen);
}

/** Forgets the counts of agents no longer known (another admin token, a forgotten token). */
export function keepWaitingOf(agentIds: Set<string>): void {
  for (const id of [...waitingByAgent.keys()]) if (!agentIds.has(id)) waitingByAgent.delete(id);
  emitWaiting();
}

export interface ApprovalListOptions {
  agentId: string;
  token: string | null;
  chains: ChainInfo[];
  /** Every decision taken here (the chat updates its card for the transfer). */
  onDecided?: (transfer: Transfer) => void;
  /** The number waiting, after every read. */
  onCount?: (count: number) => void;
  /** Text of the empty list; null hides it. */
  emptyText?: string | null;
}

export interface ApprovalList {
  el: HTMLUListElement;
  error: ReturnType<typeof errorLine>;
  /** Reads the waiting list (and, when it changed or `force`, the facts); resolves with the count, or null on error. */
  refresh(force?: boolean): Promise<number | null>;
}

/** A held offer (§23) in words: what the agent would sell, for how much, and where it is fetched from. */
function offerLabel(t: Transfer): string | null {
  const o = t.kind === 'offer' ? t.offer : undefined;
  if (!o) return null;
  const where =
    o.resource.kind === 'url' && o.resource.url ? ` at ${o.resource.url}` : ` (a stored ${o.resource.mime_type} body)`;
  return `Sell “${o.description}” for ${o.price} ${o.asset}${where}`;
}

function labelOf(t: Transfer): string {
  const sold = offerLabel(t);
  if (sold) return sold;
  const paid = t.kind === 'x402' && t.x402 ? hostAndPath(t.x402.url) : null;
  const called = t.kind === 'call' || t.kind === 'typed_data' ? (t as CallFields) : null;
  return paid
    ? `${t.amount} ${t.asset} for ${paid}`
    : called
      ? callLabel({ ...called, amount: t.amount, asset: t.asset, to: t.to })
      : `${t.amount} ${t.asset} to ${t.to}`;
}

interface Card {
  el: HTMLElement;
  /** Whether a confirmation or a reason is being entered (the list keeps the row as it is). */
  busy(): boolean;
  explain(facts: AgentFacts | null): void;
}

function approvalCard(
  t: Transfer,
  opts: ApprovalListOptions,
  abis: Abis | null,
  decided: (t: Transfer) => Promise<void>,
): Card {
  const rowError = errorLine();
  const label = labelOf(t);
  const paid = t.kind === 'x402' && t.x402 ? hostAndPath(t.x402.url) : null;
  const called = t.kind === 'call' || t.kind === 'typed_data' ? (t as Transfer & CallFields) : null;
  const sold = t.kind === 'offer' ? (t.offer ?? null) : null;
  const native = opts.chains.find((c) => c.name === t.chain)?.native_symbol ?? 'ETH';

  const approve = h('button', { type: 'button', 'aria-label': `Approve ${label}` }, 'Approve…');
  const reject = h('button', { type: 'button', class: 'secondary', 'aria-label': `Reject ${label}` }, 'Reject…');
  const actions = h('div', { class: 'row' }, approve, reject);

  // Approve → a confirmation that says what happens; Reject → a reason (optional) and a confirmation.
  const confirmApprove = h(
    'button',
    { type: 'button', 'aria-label': `Confirm: approve ${label}` },
    sold ? 'Yes, approve: start selling' : 'Yes, approve and send',
  );
  const backApprove = h('button', { type: 'button', class: 'secondary' }, 'Back');
  const approveBox = h(
    'div',
    { class: 'confirm-box', role: 'group', 'aria-label': 'Confirm the approval', 'data-testid': 'approve-confirm', hidden: true },
    h(
      'p',
      {},
      h('strong', {}, `Approve ${label}?`),
      ' ',
      sold
        ? `It starts selling at once: anyone may pay ${sold.price} ${sold.asset} at its URL, and agentd settles each payment from the agent's wallet (its gas counted against the cap and ${sold.gas_per_day} ${native} a day). Nothing is signed now; Close it on the Offers tab to stop.`
        : t.kind === 'typed_data'
        ? 'The service signs it now; a signature cannot be taken back.'
        : t.kind === 'x402'
          ? 'The service signs the payment now and makes the paid request; the payee can settle it at once.'
          : `The service signs it now at the current fees and broadcasts it on ${t.chain}; once sent it can only be cancelled while pending.`,
    ),
    h('div', { class: 'row' }, confirmApprove, backApprove),
  );
  const reasonInput = h('textarea', { rows: 2, maxlength: 500, placeholder: 'e.g. unknown recipient, amount too high…' });
  const confirmReject = h('button', { type: 'button', class: 'danger', 'aria-label': `Confirm: reject ${label}` }, 'Reject');
  const backReject = h('button', { type: 'button', class: 'secondary' }, 'Back');
  const reasonId = uid('reason');
  reasonInput.id = reasonId;
  const rejectBox = h(
    'div',
    { class: 'confirm-box', role: 'group', 'aria-label': 'Reject with a reason', 'data-testid': 'reject-form', hidden: true },
    h('label', { for: reasonId }, 'Reason for rejecting (optional)'),
    reasonInput,
    h(
      'small',
      { class: 'hint' },
      'The reason is kept in the audit log with the rejection (who, when and why) and shown beside it in History and ',
      'Audit.',
    ),
    h('div', { class: 'row' }, confirmReject, backReject),
  );

  const show = (box: HTMLElement | null) => {
    actions.hidden = box !== null;
    approveBox.hidden = box !== approveBox;
    rejectBox.hidden = box !== rejectBox;
  };
  approve.addEventListener('click', () => {
    rowError.clear();
    show(approveBox);
    confirmApprove.focus();
  });
  reject.addEventListener('click', () => {
    rowError.clear();
    show(rejectBox);
    reasonInput.focus();
  });
  backApprove.addEventListener('click', () => {
    show(null);
    approve.focus();
  });
  backReject.addEventListener('click', () => {
    show(null);
    reject.focus();
  });

  async function decide(kind: 'approve' | 'reject'): Promise<void> {
    rowError.clear();
    for (const b of [confirmApprove, backApprove, confirmReject, backReject]) b.disabled = true;
    try {
      const reason = kind === 'reject' ? reasonInput.value.trim() : '';
      const result =
        kind === 'approve'
          ? await api.approve(opts.agentId, opts.token, t.id)
          : await api.reject(opts.agentId, opts.token, t.id, reason || undefined);
      notify(
        kind === 'approve'
          ? sold
            ? `Approved: ${label}. It sells now at ${result.offer?.url ?? sold.url}.`
            : `Approved: ${label} is being sent.`
          : `Rejected: ${label}${reason ? ` (${reason})` : ''}.`,
      );
      show(null);
      await decided(result);
    } catch (e) {
      rowError.show(e);
    } finally {
      for (const b of [confirmApprove, backApprove, confirmReject, backReject]) b.disabled = false;
    }
  }
  confirmApprove.addEventListener('click', () => void decide('approve'));
  confirmReject.addEventListener('click', () => void decide('reject'));

  const expires = t.expires_at ? Date.parse(t.expires_at) : NaN;
  const expiry = Number.isNaN(expires) ? '' : expires <= Date.now() ? 'expired' : `expires ${readableTime(t.expires_at as string)}`;
  const why = h('div', { class: 'approval-why small', 'data-testid': 'approval-why' }, h('p', { class: 'muted' }, 'Reading the policy…'));

  const el = h(
    'li',
    { class: 'card approval', 'data-testid': 'approval', 'data-transfer-id': t.id, 'data-agent-id': opts.agentId },
    h(
      'div',
      { class: 'approval-main' },
      called || sold ? null : h('p', { class: 'approval-amount' }, h('strong', {}, `${t.amount} ${t.asset}`), ` on ${t.chain}`),
      // An offer (§23): what it sells, in words, and the terms buyers would get.
      sold
        ? h(
            'div',
            { 'data-testid': 'approval-offer', 'data-offer-id': sold.id },
            h('p', { class: 'approval-amount' }, h('span', { class: 'badge kind' }, 'offer'), ' ', h('strong', {}, label)),
            h(
              'p',
              { class: 'small' },
              `On ${t.chain}, paid to the agent's wallet `,
              h('code', { class: 'mono' }, sold.pay_to),
              sold.settle === 'on_success'
                ? ' · each payment settled only once the resource answered'
                : ' · each payment settled before serving (a failed answer is still charged)',
              ` · its settlements may spend up to ${sold.gas_per_day} ${native} of gas a day`,
            ),
          )
        : null,
      // A contract call or a signature (§18): what it calls, with which arguments, and what it would do.
      called ? callDetails(called, opts.chains, abis) : null,
      called && t.kind === 'call' && t.amount !== '0'
        ? h('p', { class: 'small' }, 'Value sent with the call: ', h('strong', {}, `${t.amount} ${t.asset}`))
        : null,
      // An x402 payment (§16): the resource it pays for (host and path; the service keeps no query) and its payee.
      paid
        ? h(
            'p',
            { class: 'small', 'data-testid': 'approval-x402' },
            h('span', { class: 'badge kind' }, 'x402'),
            ' Pays for ',
            h('code', { class: 'mono', title: t.x402?.url ?? '' }, paid),
            ` · price ${t.amount} ${t.asset}`,
          )
        : null,
      called || sold ? null : h('p', { class: 'small' }, paid ? 'payTo ' : 'To ', h('code', { class: 'mono' }, t.to)),
      h(
        'p',
        { class: 'muted small' },
        `Requested ${readableTime(t.created_at)}`,
        expiry ? ` · ${expiry}` : '',
        t.conversation_id ? ' · from a chat' : ' · through the API',
      ),
      why,
    ),
    actions,
    approveBox,
    rejectBox,
    rowError.el,
  );

  function explain(facts: AgentFacts | null): void {
    clear(why);
    if (sold) {
      // No rule of the policy holds an offer: a guarded agent's offers are its owner's to make (§23).
      why.append(
        h(
          'div',
          { 'data-testid': 'approval-rule', 'data-rules': 'guarded' },
          h('strong', {}, 'Why it waits: '),
          "the agent is guarded, so an offer its tool makes is its owner's to approve; its URL sells nothing until then.",
        ),
      );
      return;
    }
    if (!facts || !facts.policy) {
      why.append(h('p', { class: 'muted' }, 'The policy could not be read: the rule that asked for approval is not shown.'));
      return;
    }
    const reasons = holdReasons(t, facts);
    why.append(
      h(
        'div',
        { 'data-testid': 'approval-rule', 'data-rules': reasons.map((r) => r.rule).join(' ') },
        h('strong', {}, 'Why it waits: '),
        reasons.length
          ? reasons.map((r, i) => h('span', { 'data-rule': r.rule }, i ? ' ' : '', r.text))
          : 'no rule of the current policy would hold it now — the policy may have changed since it was asked.',
      ),
    );
    // The windows of each asset it moves, as the service states them now: what waits (this one included), is pending
    // or confirmed, and what calls and allowances counted.
    const lines: HTMLElement[] = [];
    for (const o of outflows(t as Transfer & CallFields)) {
      const limits = limitsFor(facts.policy, o.key);
      for (const w of windows(facts, o.key)) {
        lines.push(
          h(
            'div',
            { 'data-testid': w.rule === 'per_day' ? 'approval-daily' : 'approval-weekly', 'data-left': w.left, 'data-limit': w.limit },
            windowSentence(w, o.asset, ', this one included'),
          ),
        );
      }
      if (limits?.per_transfer) lines.push(h('div', {}, `Per-transfer limit ${limits.per_transfer} ${o.asset}.`));
      if (!limits?.per_day && !limits?.per_week) {
        lines.push(h('div', { 'data-testid': 'approval-daily', 'data-left': '' }, `No daily or weekly limit on ${o.key}.`));
      }
    }
    if (lines.length) why.append(h('div', { class: 'limits' }, lines));
    why.append(h('div', { 'data-testid': 'approval-fee' }, feeText(t as Transfer & CallFields, native)));
    const cap = t.kind === 'x402' || t.kind === 'typed_data' ? null : capLine(facts.budget, t.chain, native);
    if (cap) why.append(h('div', { 'data-testid': 'approval-cap' }, cap));
  }

  return { el, busy: () => !approveBox.hidden || !rejectBox.hidden, explain };
}

export function approvalList(opts: ApprovalListOptions): ApprovalList {
  const el = h('ul', { class: 'approvals', 'aria-label': 'Transfers awaiting approval', 'data-testid': 'approvals', 'data-agent-id': opts.agentId });
  const error = errorLine();
  const cards = new Map<string, Card>();
  let facts: AgentFacts | null = null;
  let factsAt = 0;
  let known = '';
  let abis: Abis | null = null;
  const empty = opts.emptyText === null ? null : h('li', { class: 'muted', 'data-testid': 'approvals-empty' }, opts.emptyText ?? 'Nothing is waiting for approval.');

  async function decided(t: Transfer): Promise<void> {
    opts.onDecided?.(t);
    // An approved x402 payment: the service made the paid request at once and answers what it bought (§16).
    const answer = t.kind === 'x402' ? t.x402?.response : null;
    if (answer) {
      const item = h(
        'li',
        { class: 'approval-result', 'data-testid': 'approval-bought', 'data-transfer-id': t.id },
        paidAnswerView(answer, `Paid ${t.amount} ${t.asset} for ${t.x402 ? hostAndPath(t.x402.url) : 'the resource'}: what it bought`),
      );
      const dismiss = h('button', { type: 'button', class: 'secondary small', onclick: () => item.remove() }, 'Dismiss');
      const row = item.querySelector('.paid-answer .row');
      if (row) row.append(dismiss);
      else item.querySelector('.paid-answer')?.append(h('div', { class: 'row' }, dismiss));
      el.prepend(item);
    }
    await refresh(true);
  }

  async function refresh(force = false): Promise<number | null> {
    let waiting: Transfer[];
    try {
      waiting = await api.approvals(opts.agentId, opts.token);
      error.clear();
    } catch (e) {
      error.show(e);
      return null;
    }
    const ids = waiting.map((t) => t.id).join(',');
    // The facts (policy, cap, up to 5,000 transfers) are read again when what waits changed, or now and then while
    // the list is on screen.
    const shown = el.offsetParent !== null;
    if (force || ids !== known || (shown && Date.now() - factsAt > FACTS_MS)) {
      facts = await loadFacts(opts.agentId, opts.token, waiting);
      factsAt = Date.now();
      abis = ((facts.policy?.calls as { abis?: Abis } | undefined)?.abis ?? null) as Abis | null;
    } else if (facts) facts.waiting = waiting;
    known = ids;
    // Keyed: rows being confirmed or given a reason stay as they are; gone ones go, new ones come in order.
    const present = new Set(waiting.map((t) => t.id));
    for (const [id, card] of cards) {
      if (present.has(id)) continue;
      if (card.busy()) notify('A transfer you were deciding on was decided elsewhere (or expired).');
      card.el.remove();
      cards.delete(id);
    }
    empty?.remove();
    for (const t of waiting) {
      let card = cards.get(t.id);
      if (!card) {
        card = approvalCard(t, opts, abis, decided);
        cards.set(t.id, card);
        // Oldest first, as the API lists them: a new request comes last. Rows already shown are not moved (moving
        // a row would take the focus from a reason being typed).
        el.append(card.el);
      }
      card.explain(facts);
    }
    if (waiting.length === 0 && empty) el.append(empty);
    noteWaiting(opts.agentId, waiting.length);
    opts.onCount?.(waiting.length);
    return waiting.length;
  }

  return { el, error, refresh };
}

/** Calls `tick` every POLL_MS while `el` stays in the page, skipping the ticks when the page is hidden. */
export function poll(el: HTMLElement, tick: () => Promise<unknown>): void {
  const step = () =>
    setTimeout(async () => {
      if (!el.isConnected) return;
      if (document.visibilityState === 'visible') await tick().catch(() => {});
      step();
    }, POLL_MS);
  step();
}

export function approvalsPanel(
  agent: AgentDetail,
  token: string | null,
  onDecided: (transfer: Transfer) => void,
  onCount: (count: number) => void,
  chains: ChainInfo[] = [],
): ApprovalsPanel {
  const list = approvalList({ agentId: agent.id, token, chains, onDecided, onCount });
  const authority = h('p', { class: 'muted small', 'data-testid': 'approvals-authority' });
  const refreshButton = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
  const updated = h('span', { class: 'muted small', 'data-testid': 'approvals-updated' });
  const heading = uid('approvals');
  let refreshing: Promise<void> | null = null;
  let again = false;
  let force = false;

  async function load(): Promise<void> {
    authority.textContent = authorityText(agent.id);
    refreshButton.disabled = true;
    const wanted = force;
    force = false;
    const count = await list.refresh(wanted);
    if (count !== null) updated.textContent = `Updated ${new Date().toLocaleTimeString()}`;
    refreshButton.disabled = false;
  }

  /** Reloads the list; calls made while one runs are folded into one more run after it. */
  function refresh(full = true): Promise<void> {
    if (full) force = true;
    if (refreshing) {
      again = true;
      return refreshing;
    }
    refreshing = (async () => {
      do {
        again = false;
        await load();
      } while (again);
      refreshing = null;
    })();
    return refreshing;
  }

  refreshButton.addEventListener('click', () => void refresh());
  const el = h(
    'section',
    { 'aria-labelledby': heading },
    h('div', { class: 'section-head' }, h('h2', { id: heading }, 'Approvals'), h('div', { class: 'row' }, updated, refreshButton)),
    h(
      'p',
      { class: 'muted' },
      'Transfers above an approval threshold of the policy, or to new recipients when the policy asks, wait here, ',
      'as do contract calls and signatures the policy holds, wherever they were asked (chat, the API, MCP). Each says ',
      'which rule held it and what is left of its limits. Approving signs and sends it at the fees of that moment (a ',
      'call is simulated again first, and stays waiting if it would now take more); deciding needs owner authority. ',
      'The list follows new requests and decisions by itself while this page is open.',
    ),
    authority,
    list.error.el,
    list.el,
  );
  onAuthorityChange(el, () => (authority.textContent = authorityText(agent.id)));

  let loaded = false;
  return {
    el,
    load() {
      if (loaded) return;
      loaded = true;
      void refresh();
      poll(el, () => refresh(false));
    },
    refresh: () => refresh(true),
    async reveal(transferId: string) {
      await refresh(true);
      const card = list.el.querySelector<HTMLElement>(`[data-transfer-id="${CSS.escape(transferId)}"]`);
      for (const other of list.el.querySelectorAll('.highlight')) other.classList.remove('highlight');
      if (!card) {
        notify('That transfer no longer waits for approval: it was decided or it expired (History shows what became of it).');
        return;
      }
      card.classList.add('highlight');
      card.tabIndex = -1;
      card.scrollIntoView({ block: 'center' });
      card.focus({ preventScroll: true });
    },
  };
}
