// The approvals tab: transfers waiting for the owner's decision (docs/api.md §11), with Approve and Reject (owner
// authority). It refreshes on demand and when the open conversation's stream announces an approval event. A held
// contract call or typed-data signature (§18) shows what it would do, as its simulation showed it.
import { api, type AgentDetail, type ChainInfo, type Transfer } from './api';
import { authorityText, onAuthorityChange } from './authority';
import { callDetails, callLabel, type Abis, type CallFields } from './calls';
import { clear, formatTime, h, uid } from './dom';
import { hostAndPath } from './history';
import { errorLine, notify } from './ui';

export interface ApprovalsPanel {
  el: HTMLElement;
  load(): void;
  refresh(): Promise<void>;
}

/** `onDecided` hears every decision taken here (the chat updates its card for the transfer). */
export function approvalsPanel(
  agent: AgentDetail,
  token: string,
  onDecided: (transfer: Transfer) => void,
  onCount: (count: number) => void,
  chains: ChainInfo[] = [],
): ApprovalsPanel {
  const list = h('ul', { class: 'approvals', 'aria-label': 'Transfers awaiting approval', 'data-testid': 'approvals' });
  const error = errorLine();
  const authority = h('p', { class: 'muted small', 'data-testid': 'approvals-authority' });
  const refreshButton = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
  const updated = h('span', { class: 'muted small' });
  const heading = uid('approvals');
  let refreshing: Promise<void> | null = null;
  let again = false;
  // The ABIs the policy names (`calls.abis`) give held calls' arguments their names.
  let abis: Abis | null = null;

  function row(t: Transfer): HTMLElement {
    const rowError = errorLine();
    const approve = h('button', { type: 'button' }, 'Approve');
    const reject = h('button', { type: 'button', class: 'secondary' }, 'Reject');
    const paid = t.kind === 'x402' && t.x402 ? hostAndPath(t.x402.url) : null;
    const called = t.kind === 'call' || t.kind === 'typed_data' ? (t as CallFields) : null;
    const label = paid
      ? `${t.amount} ${t.asset} for ${paid}`
      : called
        ? callLabel({ ...called, amount: t.amount, asset: t.asset, to: t.to })
        : `${t.amount} ${t.asset} to ${t.to}`;
    approve.setAttribute('aria-label', `Approve ${label}`);
    reject.setAttribute('aria-label', `Reject ${label}`);
    async function decide(kind: 'approve' | 'reject'): Promise<void> {
      rowError.clear();
      approve.disabled = true;
      reject.disabled = true;
      try {
        const result = kind === 'approve' ? await api.approve(agent.id, token, t.id) : await api.reject(agent.id, token, t.id);
        notify(kind === 'approve' ? `Approved: ${label} is being sent.` : `Rejected: ${label}.`);
        onDecided(result);
        await refresh();
      } catch (e) {
        rowError.show(e);
        approve.disabled = false;
        reject.disabled = false;
      }
    }
    approve.addEventListener('click', () => void decide('approve'));
    reject.addEventListener('click', () => void decide('reject'));
    const expires = t.expires_at ? Date.parse(t.expires_at) : NaN;
    const expiry = Number.isNaN(expires)
      ? ''
      : expires <= Date.now()
        ? 'expired'
        : `expires ${formatTime(t.expires_at as string)}`;
    return h(
      'li',
      { class: 'card approval', 'data-testid': 'approval', 'data-transfer-id': t.id },
      h(
        'div',
        { class: 'approval-main' },
        called
          ? null
          : h('p', { class: 'approval-amount' }, h('strong', {}, `${t.amount} ${t.asset}`), ` on ${t.chain}`),
        // A contract call or a signature (§18): what it calls, with which arguments, and what it would do.
        called ? callDetails(called, chains, abis) : null,
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
        called ? null : h('p', { class: 'small' }, paid ? 'payTo ' : 'To ', h('code', { class: 'mono' }, t.to)),
        h(
          'p',
          { class: 'muted small' },
          `Requested ${formatTime(t.created_at)}`,
          expiry ? ` · ${expiry}` : '',
          t.conversation_id ? ' · from a chat' : '',
        ),
      ),
      h('div', { class: 'row' }, approve, reject),
      rowError.el,
    );
  }

  async function load(): Promise<void> {
    error.clear();
    authority.textContent = authorityText(agent.id);
    refreshButton.disabled = true;
    try {
      const waiting = await api.approvals(agent.id, token);
      if (waiting.some((t) => t.kind === 'call')) {
        const policy = await api.policy(agent.id, token).catch(() => null);
        abis = ((policy?.calls as { abis?: Abis } | undefined)?.abis ?? null) as Abis | null;
      }
      clear(list);
      if (waiting.length === 0) list.append(h('li', { class: 'muted' }, 'Nothing is waiting for approval.'));
      for (const t of waiting) list.append(row(t));
      updated.textContent = `Updated ${new Date().toLocaleTimeString()}`;
      onCount(waiting.length);
    } catch (e) {
      error.show(e);
    } finally {
      refreshButton.disabled = false;
    }
  }

  /** Reloads the list; calls made while one runs are folded into one more run after it. */
  function refresh(): Promise<void> {
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
      'as do contract calls and signatures the policy holds. Approving signs and sends them at the fees of that ',
      'moment (a call is simulated again first, and stays waiting if it would now take more); deciding needs owner authority.',
    ),
    authority,
    error.el,
    list,
  );
  onAuthorityChange(el, () => (authority.textContent = authorityText(agent.id)));

  let loaded = false;
  return {
    el,
    load() {
      if (loaded) return;
      loaded = true;
      void refresh();
    },
    refresh,
  };
}
