// The chat tab: conversations, history, a composer; answers stream from POST /api/chat/stream; confirmations of
// transfers, and the approvals of transfers that wait for the owner, arrive live from the conversation's event
// stream and update the chain-call card of their transfer.
import {
  api,
  errorOf,
  headers,
  type AgentDetail,
  type ApprovalResolved,
  type ChainCall,
  type ChatRequest,
  type ChatResponse,
  type Conversation,
  type Message,
  type Transfer,
  type TxConfirmation,
} from './api';
import { clear, h, readableTime, shortHex, uid } from './dom';
import { loadFacts, refusalText } from './explain';
import { isPaidAnswer, paidAnswerView } from './paid';
import { readSse } from './sse';
import { lastEventId, setLastEventId } from './tokens';
import { errorText, notify, txHashLink } from './ui';
import { injectedWallet, walletAccount } from './wallet-provider';

const CONNECTED_KEY = 'agentd.connectedWallet';

/**
 * "Connect your wallet" (the builtin engine says it when a send names no recipient): the browser wallet's account,
 * or an address typed in when there is no browser wallet, sent as `connected_wallet_address` with each message so
 * that "send 0.01 ETH to my wallet" and "what is my wallet's balance" work. Kept for this tab.
 */
function walletConnector(): { el: HTMLElement; address(): string | null; connect(): void } {
  let address: string | null = sessionStorage.getItem(CONNECTED_KEY);
  const status = h('span', { class: 'small', 'data-testid': 'connected-wallet' });
  const connect = h('button', { type: 'button', class: 'secondary small' }, 'Connect wallet');
  const disconnect = h('button', { type: 'button', class: 'secondary small' }, 'Disconnect');
  const typed = h('input', {
    type: 'text',
    class: 'mono small',
    placeholder: '0x… your wallet address',
    'aria-label': 'Your wallet address',
    autocomplete: 'off',
    spellcheck: 'false',
  });
  const useTyped = h('button', { type: 'button', class: 'secondary small' }, 'Use this address');
  const manual = h('span', { class: 'manual-wallet', hidden: true }, typed, useTyped);
  const problem = h('span', { class: 'form-error small', role: 'alert', hidden: true });
  const render = () => {
    status.textContent = address ? `Your wallet: ${address}` : 'No wallet connected';
    status.title = address ? 'Sent with each message as connected_wallet_address: say "to my wallet".' : '';
    disconnect.hidden = !address;
    connect.hidden = Boolean(address);
    if (address) manual.hidden = true;
  };
  const set = (value: string | null) => {
    address = value;
    if (value) sessionStorage.setItem(CONNECTED_KEY, value);
    else sessionStorage.removeItem(CONNECTED_KEY);
    problem.hidden = true;
    render();
  };
  connect.addEventListener('click', async () => {
    problem.hidden = true;
    if (!injectedWallet()) {
      // No browser wallet (headless, or none installed): the address can be typed in instead.
      manual.hidden = false;
      typed.focus();
      return;
    }
    try {
      set(await walletAccount());
    } catch (e) {
      problem.textContent = errorText(e);
      problem.hidden = false;
    }
  });
  useTyped.addEventListener('click', () => {
    const value = typed.value.trim();
    if (!/^0x[0-9a-fA-F]{40}$/.test(value)) {
      problem.textContent = 'A 0x address of 40 hex digits.';
      problem.hidden = false;
      return;
    }
    set(value);
  });
  disconnect.addEventListener('click', () => set(null));
  render();
  return {
    el: h('div', { class: 'wallet-connect small', 'aria-label': 'Your wallet' }, status, connect, disconnect, manual, problem),
    address: () => address,
    connect: () => connect.click(),
  };
}

export interface ChatPanel {
  el: HTMLElement;
  load(): void;
  close(): void;
  /** A transfer's new state learnt elsewhere (the approvals tab): its card follows. */
  transferUpdated(transfer: Transfer): void;
}

/** Where a transfer of a chain-call card stands, as the card shows it. */
type TransferState =
  | 'awaiting_approval'
  | 'approved'
  | 'pending'
  | 'confirmed'
  | 'reverted'
  | 'dropped'
  | 'cancelled'
  | 'rejected'
  | 'expired';

const FINAL = new Set<TransferState>(['confirmed', 'reverted', 'dropped', 'cancelled', 'rejected', 'expired']);
const STATE_LABEL: Record<TransferState, string> = {
  awaiting_approval: 'awaiting approval',
  approved: 'approved · sending',
  pending: 'sent · pending',
  confirmed: 'confirmed',
  reverted: 'reverted',
  dropped: 'dropped',
  cancelled: 'cancelled',
  rejected: 'rejected',
  expired: 'expired',
};
const STATE_CLASS: Record<TransferState, string> = {
  awaiting_approval: 'waiting',
  approved: 'pending',
  pending: 'pending',
  confirmed: 'good',
  reverted: 'bad',
  dropped: 'bad',
  cancelled: 'bad',
  rejected: 'bad',
  expired: 'bad',
};

const SUGGESTIONS: Record<string, string[]> = {
  read: ['What is my balance on {chain}', 'Gas price on {chain}', 'Latest block on {chain}'],
  compare: ['Compare gas', 'How much would it cost to send 0.01 ETH on {chain}'],
  transact: [],
  analytics: ['How much have I spent', 'Show my transactions'],
};

function json(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

/** A collapsible card for one chain call: tool, arguments, result (or error), duration. */
interface CallCard {
  el: HTMLDetailsElement;
  finish(result: { result?: unknown; error?: unknown; duration_ms?: number }): void;
  /** Shows where the card's transfer stands (`data-transfer-status`), with an optional note. */
  transfer(state: TransferState, note?: string): void;
}

function callCard(call: Partial<ChainCall> & { tool: string }): CallCard {
  const status = h('span', { class: 'call-status' });
  const note = h('span', { class: 'muted small transfer-note', 'data-testid': 'transfer-note' });
  const duration = h('span', { class: 'muted small' });
  const resultBlock = h('pre', { class: 'mono small', 'data-testid': 'chain-call-result' });
  const resultLabel = h('h4', {}, 'Result');
  let paid: HTMLElement | null = null;
  const el = h(
    'details',
    { class: 'call', 'data-testid': 'chain-call', 'data-tool': call.tool },
    h('summary', {}, h('span', { class: 'call-tool mono' }, call.tool), status, note, duration),
    h('h4', {}, 'Arguments'),
    h('pre', { class: 'mono small', 'data-testid': 'chain-call-args' }, json(call.args ?? {})),
    resultLabel,
    resultBlock,
  );
  function finish(r: { result?: unknown; error?: unknown; duration_ms?: number }): void {
    const failed = r.error !== undefined && r.error !== null;
    status.textContent = failed ? 'error' : 'ok';
    status.className = `call-status ${failed ? 'bad' : 'good'}`;
    el.dataset.state = failed ? 'error' : 'done';
    resultLabel.textContent = failed ? 'Error' : 'Result';
    resultBlock.textContent = json(failed ? r.error : (r.result ?? null));
    duration.textContent = r.duration_ms !== undefined ? `${r.duration_ms} ms` : '';
    // A paid request (pay_http, §16): what it bought, readable under the card rather than inside its JSON.
    if (!failed && call.tool === 'pay_http' && isPaidAnswer(r.result) && !paid) {
      const answer = r.result;
      paid = paidAnswerView(answer, answer.status === 402 ? 'The resource\u2019s answer' : 'What the payment bought');
      const place = () => el.after(paid!);
      if (el.parentNode) place();
      else queueMicrotask(() => el.parentNode && place());
    }
    // An offer made from chat (create_offer, §23): where buyers pay, as a link, under the card; on a guarded agent,
    // held for the owner's approval: it sells nothing until then.
    const made = (r.result as { offer?: { url?: unknown; description?: unknown; price?: unknown; asset?: unknown } } | null | undefined)?.offer;
    const held = (r.result as { status?: unknown } | null | undefined)?.status === 'awaiting_approval';
    if (!failed && call.tool === 'create_offer' && made && held && !paid) {
      paid = h(
        'p',
        { class: 'small', 'data-testid': 'offer-held' },
        `Waiting for the owner's approval: ${String(made.description ?? 'the offer')}, ${String(made.price ?? '')} ${String(made.asset ?? '')}. `,
        'It sells nothing until an owner approves it in Approvals.',
      );
      const place = () => el.after(paid!);
      if (el.parentNode) place();
      else queueMicrotask(() => el.parentNode && place());
    }
    if (!failed && call.tool === 'create_offer' && made && !held && typeof made.url === 'string' && !paid) {
      paid = h(
        'p',
        { class: 'small', 'data-testid': 'offer-made' },
        `On sale: ${String(made.description ?? 'the offer')}, ${String(made.price ?? '')} ${String(made.asset ?? '')}, at `,
        h('a', { href: made.url, target: '_blank', rel: 'noopener noreferrer', class: 'mono' }, made.url),
        ' (the Offers tab lists it).',
      );
      const place = () => el.after(paid!);
      if (el.parentNode) place();
      else queueMicrotask(() => el.parentNode && place());
    }
  }
  function transfer(state: TransferState, text?: string): void {
    status.textContent = STATE_LABEL[state];
    status.className = `call-status ${STATE_CLASS[state]}`;
    el.dataset.transferStatus = state;
    note.textContent = text ?? '';
  }
  if (call.result !== undefined || call.error !== undefined) finish(call);
  else {
    status.textContent = 'running…';
    status.className = 'call-status pending';
    el.dataset.state = 'running';
    resultBlock.textContent = '…';
  }
  return { el, finish, transfer };
}

/** A transfer a card follows: by its id while it waits for approval, by its hash once sent. */
interface Tracked {
  card: CallCard;
  transferId: string | null;
  txHash: string | null;
  state: TransferState;
  /** The card's note for the state (a block number, a hash, an expiry). */
  note?: string;
  /** The prose of the message that made it, following its state. */
  listeners: ((t: Tracked) => void)[];
}

/** The word a sent transfer's prose shows for its state ("Transaction 0x… is confirmed (block 12)."). */
function stateWord(t: Tracked): string {
  if (t.state === 'confirmed' || t.state === 'reverted') return t.note ? `${t.state} (${t.note})` : t.state;
  return t.state === 'approved' ? 'being sent' : STATE_LABEL[t.state];
}

/** The sentence a held transfer's prose shows for its state, replacing "… waits for an owner's approval …". */
function heldSentence(t: Tracked, original: string, what: string): string {
  switch (t.state) {
    case 'awaiting_approval':
      return original;
    case 'approved':
      return `${what} was approved by the owner and is being sent`;
    case 'pending':
      return `${what} was approved and sent; transaction ${t.txHash ? shortHex(t.txHash, 10, 8) : ''} is pending`;
    case 'confirmed':
      return `${what} was approved and is confirmed${t.note ? ` (${t.note})` : ''}`;
    case 'rejected':
      return `${what} was rejected by the owner; nothing was signed or sent`;
    case 'expired':
      return `${what} expired before anyone approved it; nothing was signed or sent`;
    default:
      return `${what} was approved and sent, then ${STATE_LABEL[t.state]}`;
  }
}

/**
 * Makes the prose of an answer follow the transfers it made (the answer was written when they were sent or held):
 * the builtin engine's sentences ("Transaction 0x… is pending.", "Transfer … waits for an owner's approval …",
 * "… the payment awaits an owner's approval (transfer …)") get their state word or sentence replaced live; for
 * any other prose (an LLM's), a status line under it says where each transfer stands now.
 */
function followProse(body: HTMLElement, status: HTMLElement, tracked: Tracked[], text: string): void {
  const pieces: { start: number; end: number; render: (t: Tracked) => string; t: Tracked }[] = [];
  const unmatched: Tracked[] = [];
  const escape = (v: string) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  for (const t of tracked) {
    let matched = false;
    if (t.transferId) {
      const held = new RegExp(
        `Transfer ${escape(t.transferId)} waits for an owner's approval; nothing is signed or sent until then(?: \\(it expires at [^)]*\\))?`,
      ).exec(text);
      const paid = new RegExp(`the payment awaits an owner's approval \\(transfer ${escape(t.transferId)}\\)\\. Nothing is signed yet`).exec(text);
      if (held) {
        const original = held[0];
        pieces.push({ start: held.index, end: held.index + original.length, t, render: (x) => heldSentence(x, original, `Transfer ${t.transferId}`) });
        matched = true;
      } else if (paid) {
        const original = paid[0];
        pieces.push({ start: paid.index, end: paid.index + original.length, t, render: (x) => heldSentence(x, original, `the payment (transfer ${t.transferId})`) });
        matched = true;
      }
    }
    if (!matched && t.txHash) {
      const sent = new RegExp(`Transaction ${escape(t.txHash)} is (pending|confirmed|reverted|dropped|cancelled)`, 'i').exec(text);
      if (sent) {
        const start = sent.index + sent[0].length - sent[1].length;
        pieces.push({ start, end: start + sent[1].length, t, render: stateWord });
        matched = true;
      }
    }
    if (!matched) unmatched.push(t);
  }
  if (pieces.length) {
    pieces.sort((a, b) => a.start - b.start);
    clear(body);
    let at = 0;
    for (const p of pieces) {
      if (p.start < at) continue;
      body.append(readable(text.slice(at, p.start)));
      const span = h('span', { class: 'prose-status', 'data-testid': 'prose-status', 'data-transfer-status': p.t.state }, readable(p.render(p.t)));
      p.t.listeners.push((x) => {
        span.textContent = readable(p.render(x));
        span.dataset.transferStatus = x.state;
      });
      body.append(span);
      at = p.end;
    }
    body.append(readable(text.slice(at)));
  }
  if (unmatched.length) {
    const line = () => {
      clear(status);
      status.append(
        'Now: ',
        unmatched
          .map((x) => `${x.txHash ? `transaction ${shortHex(x.txHash, 10, 8)}` : 'the transfer'} ${STATE_LABEL[x.state]}${x.note && FINAL.has(x.state) ? ` (${x.note})` : ''}`)
          .join(' · '),
      );
      status.dataset.transferStatus = unmatched.map((x) => x.state).join(' ');
    };
    for (const t of unmatched) t.listeners.push(line);
    line();
  }
}

const UUID = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';
const ISO_TIME = /\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})\b/g;

/**
 * An answer's prose as a person reads it: the engine writes transfer ids and UTC times (ISO 8601) for programs; the
 * console says "this transfer" (its card, History and Approvals carry the id) and the local time.
 */
export function readable(text: string): string {
  return text
    .replace(new RegExp(`\\bTransfer ${UUID}`, 'g'), 'This transfer')
    .replace(new RegExp(` \\(transfer ${UUID}\\)`, 'g'), '')
    .replace(new RegExp(`\\btransfer ${UUID}`, 'gi'), 'the transfer')
    .replace(new RegExp(`\\b${UUID}\\b`, 'g'), (id) => `${id.slice(0, 8)}…`)
    .replace(ISO_TIME, (iso) => readableTime(iso));
}

function record(value: unknown): Record<string, unknown> | null {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

function messageEl(role: string, time: string | null): {
  el: HTMLElement;
  calls: HTMLElement;
  body: HTMLElement;
  status: HTMLElement;
  foot: HTMLElement;
} {
  const calls = h('div', { class: 'calls' });
  const body = h('div', { class: 'content', 'data-testid': 'message-content' });
  const status = h('div', { class: 'message-status small', 'data-testid': 'message-status' });
  const foot = h('div', { class: 'foot muted small' });
  const el = h(
    'article',
    { class: `msg ${role}`, 'data-testid': 'message', 'data-role': role },
    h('header', { class: 'muted small' }, role === 'user' ? 'You' : 'Agent', time ? ` · ${readableTime(time)}` : ''),
    calls,
    body,
    status,
    foot,
  );
  return { el, calls, body, status, foot };
}

export function chatPanel(
  agent: AgentDetail,
  token: string,
  onConfirmation: () => void,
  onApprovalEvent: () => void = () => {},
  openApproval: (transferId: string) => void = () => {},
): ChatPanel {
  let conversations: Conversation[] = [];
  let current: string | null = null;
  let source: EventSource | null = null;
  let busy = false;
  const byTransfer = new Map<string, Tracked>();
  const byHashLater: Tracked[] = [];
  let registry: Promise<{ name: string; native_symbol: string }[]> | null = null;

  /**
   * Under a send the policy or the cap refused, the limit that refused it and what was left then (the refusal the
   * model was shown names the rule only): computed as the History tab does, from the policy and the history.
   */
  async function explainRefusal(card: CallCard, call: { tool: string; args?: unknown; error?: unknown }, at: string): Promise<void> {
    const e = record(call.error);
    const code = e ? String(e.code ?? '') : '';
    if (code !== 'policy_denied' && code !== 'spending_cap_exceeded') return;
    const a = record(call.args) ?? {};
    const details = record(e?.details);
    const chain = typeof a.chain === 'string' ? a.chain : '';
    registry ??= api.chains().catch(() => []);
    const native = (await registry).find((c) => c.name === chain)?.native_symbol ?? '';
    let host: string | null = null;
    try {
      host = typeof a.url === 'string' ? new URL(a.url).host : null;
    } catch {
      host = null;
    }
    const detail: Record<string, unknown> = {
      code,
      rule: details?.rule,
      // The service's own words, with the figures of its decision (over a limit).
      message: e?.message,
      chain,
      asset: call.tool === 'send_native' ? native : call.tool === 'send_token' ? a.token : undefined,
      amount: a.amount,
      to: a.to,
      host,
    };
    try {
      const waiting = await api.approvals(agent.id, token).catch(() => []);
      const facts = await loadFacts(agent.id, token, waiting);
      const line = h(
        'p',
        { class: 'small refusal', 'data-testid': 'refusal-explained', 'data-rule': String(details?.rule ?? code) },
        h('strong', {}, 'Refused: '),
        refusalText(detail, at, facts, native),
      );
      card.el.after(line);
    } catch {
      // the card's error says what the service said
    }
  }
  const byHash = new Map<string, Tracked>();
  // Confirmations seen on the stream, by hash: one may arrive before its card learns the hash of an approved transfer.
  const confirmed = new Map<string, TxConfirmation>();

  const list = h('ul', { class: 'conversations', 'aria-label': 'Conversations' });
  const thread = h('div', { class: 'thread', role: 'log', 'aria-label': 'Messages', 'aria-live': 'polite' });
  const live = h('span', { class: 'live muted small', 'data-testid': 'live-status' });
  const threadTitle = h('h3', { class: 'thread-title' }, 'New conversation');
  const input = h('textarea', {
    rows: 2,
    placeholder: 'Ask about balances, gas, or send a transfer… (Enter sends, Shift+Enter for a new line)',
    maxlength: 8000,
  });
  const inputId = uid('composer');
  input.id = inputId;
  const send = h('button', { type: 'submit' }, 'Send');
  const composer = h(
    'form',
    { class: 'composer', 'aria-label': 'Composer' },
    h('label', { for: inputId, class: 'visually-hidden' }, 'Message'),
    input,
    send,
  );
  const newButton = h('button', { type: 'button', class: 'secondary' }, 'New conversation');
  const listHeading = uid('conv');
  const connector = walletConnector();

  const el = h(
    'section',
    { class: 'chat' },
    h(
      'aside',
      { class: 'conv-pane', 'aria-labelledby': listHeading },
      h('div', { class: 'section-head' }, h('h2', { id: listHeading }, 'Conversations'), newButton),
      list,
    ),
    h('div', { class: 'thread-pane' }, h('div', { class: 'section-head' }, threadTitle, live), thread, composer, connector.el),
  );

  function suggestions(): HTMLElement | null {
    const chain = agent.chains[0] ?? 'ethereum';
    const items = agent.capabilities.flatMap((cap) => SUGGESTIONS[cap] ?? []).map((s) => s.replace('{chain}', chain));
    if (items.length === 0) return null;
    return h(
      'div',
      { class: 'suggestions' },
      h('p', { class: 'muted small' }, 'Try:'),
      items.map((text) =>
        h(
          'button',
          {
            type: 'button',
            class: 'chip',
            onclick: () => {
              input.value = text;
              input.focus();
            },
          },
          text,
        ),
      ),
    );
  }

  function emptyThread(): void {
    clear(thread);
    thread.append(h('p', { class: 'muted empty' }, `Start a conversation with ${agent.name}.`), suggestions() ?? '');
  }

  function renderList(): void {
    clear(list);
    if (conversations.length === 0) {
      list.append(h('li', { class: 'muted small' }, 'No conversations yet.'));
      return;
    }
    for (const c of conversations) {
      const open = h(
        'button',
        {
          type: 'button',
          class: 'conv',
          'aria-current': c.id === current ? 'true' : null,
          onclick: () => void openConversation(c.id),
        },
        h('span', { class: 'conv-title' }, c.title || 'Untitled'),
        h('small', { class: 'muted' }, `${c.message_count} messages · ${readableTime(c.updated_at)}`),
      );
      const remove = h(
        'button',
        {
          type: 'button',
          class: 'icon',
          'aria-label': `Delete conversation ${c.title}`,
          onclick: () => void removeConversation(c),
        },
        '×',
      );
      list.append(h('li', {}, open, remove));
    }
  }

  async function refreshList(): Promise<void> {
    try {
      conversations = await api.conversations(agent.id, token);
      renderList();
    } catch (e) {
      clear(list);
      list.append(h('li', { class: 'form-error' }, errorText(e)));
    }
  }

  async function removeConversation(c: Conversation): Promise<void> {
    if (!window.confirm(`Delete the conversation “${c.title}” and its messages?`)) return;
    try {
      await api.deleteConversation(c.id, token);
      if (current === c.id) startNew();
      await refreshList();
    } catch (e) {
      notify(errorText(e), 'error');
    }
  }

  /** Moves a card's transfer to `state` unless it is already further on (events may arrive out of order). */
  function advance(t: Tracked, state: TransferState, note?: string): void {
    if (FINAL.has(t.state) && !FINAL.has(state)) return;
    if (t.state === 'pending' && (state === 'approved' || state === 'awaiting_approval')) return;
    t.state = state;
    t.note = note;
    t.card.transfer(state, note);
    for (const listen of t.listeners) listen(t);
  }

  function learnHash(t: Tracked, hash: string | null | undefined): void {
    if (!hash || t.txHash === hash) return;
    t.txHash = hash;
    byHash.set(hash.toLowerCase(), t);
    const seen = confirmed.get(hash.toLowerCase());
    if (seen) applyConfirmation(t, seen);
  }

  function applyConfirmation(t: Tracked, tx: TxConfirmation): void {
    const facts = tx.block_number !== null && tx.block_number !== undefined ? `block ${tx.block_number}` : '';
    advance(t, tx.status, facts);
  }

  /** The API's view of a transfer (GET …/transfers/{id}, or the answer of approve/reject) onto its card. */
  function applyTransfer(t: Tracked, view: Transfer): void {
    learnHash(t, view.tx_hash);
    if (view.status === 'awaiting_approval') {
      advance(t, 'awaiting_approval', view.expires_at ? `until ${readableTime(view.expires_at)}` : undefined);
    } else if (view.status === 'pending') {
      advance(t, 'pending', view.tx_hash ? shortHex(view.tx_hash, 10, 8) : undefined);
    } else {
      advance(t, view.status, view.block_number ? `block ${view.block_number}` : undefined);
    }
  }

  /** Asks the API where the card's transfer stands; retried a few times while an approved one has no hash yet. */
  async function refreshTransfer(t: Tracked, attempts = 1): Promise<void> {
    if (!t.transferId) return;
    for (let i = 0; i < attempts; i++) {
      try {
        const view = await api.transfer(agent.id, token, t.transferId);
        applyTransfer(t, view);
        if (view.tx_hash || FINAL.has(t.state) || view.status === 'awaiting_approval') return;
      } catch {
        // keep what the card shows; a later event may still move it
      }
      await new Promise((r) => setTimeout(r, 500 * (i + 1)));
    }
  }

  /**
   * Follows the transfer of a chain call's result, if it made one: `{transfer_id, status: "awaiting_approval",
   * expires_at}` waits for the owner; `{tx_hash, status: "pending", …}` was sent. `live`: the result just arrived
   * (a result from history only shows a state the API confirms).
   */
  function track(card: CallCard, result: unknown, live: boolean): Tracked | null {
    const r = record(result);
    if (!r) return null;
    // A paid request's transfer is its `payment` (§16).
    const payment = record(r.payment);
    const source = payment && typeof payment.transfer_id === 'string' ? payment : r;
    const transferId = typeof source.transfer_id === 'string' ? source.transfer_id : null;
    const txHash = typeof source.tx_hash === 'string' && source.tx_hash ? source.tx_hash : null;
    if (!transferId && !txHash) return null;
    const t: Tracked = { card, transferId, txHash: null, state: 'pending', listeners: [] };
    if (transferId) {
      byTransfer.set(transferId, t);
      card.el.dataset.transferId = transferId;
    }
    if (source.status === 'awaiting_approval') {
      t.state = 'awaiting_approval';
      if (transferId) linkApproval(t, transferId);
      const until = typeof source.expires_at === 'string' ? `until ${readableTime(source.expires_at)}` : undefined;
      card.transfer('awaiting_approval', until);
      if (!live) void refreshTransfer(t);
    } else if (live) card.transfer('pending', txHash ? shortHex(txHash, 10, 8) : undefined);
    else if (transferId) void refreshTransfer(t);
    else if (txHash) byHashLater.push(t);
    learnHash(t, txHash);
    return t;
  }

  /** Under a held transfer's card, the way to its approval, while it waits. */
  function linkApproval(t: Tracked, transferId: string): void {
    const line = h(
      'p',
      { class: 'small held-link', 'data-testid': 'held-link' },
      'Waits for the owner\u2019s approval: ',
      h(
        'a',
        {
          href: `#/agents/${agent.id}/approvals`,
          'data-testid': 'approval-link',
          onclick: (event: Event) => {
            event.preventDefault();
            openApproval(transferId);
          },
        },
        'review it in Approvals',
      ),
    );
    t.card.el.after(line);
    t.listeners.push((x) => (line.hidden = x.state !== 'awaiting_approval'));
  }

  /** Sent transfers of reopened messages known by hash only: their state comes from the history, once. */
  async function settleByHash(): Promise<void> {
    const waiting = byHashLater.splice(0);
    if (waiting.length === 0) return;
    try {
      const entries = await api.transactions(agent.id, token, 500, null);
      for (const t of waiting) {
        const e = entries.find((x) => x.tx_hash.toLowerCase() === t.txHash?.toLowerCase());
        if (!e) continue;
        if (e.status === 'pending') advance(t, 'pending', shortHex(e.tx_hash, 10, 8));
        else advance(t, e.status as TransferState, e.block_number ? `block ${e.block_number}` : undefined);
      }
    } catch {
      // the cards keep what they show
    }
  }

  function renderMessage(m: Message): void {
    const view = messageEl(m.role, m.created_at);
    const tracked: Tracked[] = [];
    for (const call of m.chain_calls ?? []) {
      const card = callCard(call);
      view.calls.append(card.el);
      const t = call.error ? null : track(card, call.result, false);
      if (t) tracked.push(t);
      if (call.error) void explainRefusal(card, call, m.created_at);
    }
    view.body.textContent = m.role === 'assistant' ? readable(m.content) : m.content;
    if (tracked.length) followProse(view.body, view.status, tracked, m.content);
    thread.append(view.el);
  }

  async function openConversation(id: string): Promise<void> {
    if (busy) return;
    current = id;
    renderList();
    const c = conversations.find((x) => x.id === id);
    threadTitle.textContent = c?.title || 'Conversation';
    clear(thread);
    thread.append(h('p', { class: 'muted' }, 'Loading messages…'));
    try {
      const messages = await api.messages(id, token);
      clear(thread);
      messages.forEach(renderMessage);
      void settleByHash();
      if (messages.length === 0) emptyThread();
      scrollDown();
    } catch (e) {
      clear(thread);
      thread.append(h('p', { class: 'form-error', role: 'alert' }, errorText(e)));
    }
    follow(id, lastEventId(id));
  }

  function startNew(): void {
    current = null;
    stopFollowing();
    threadTitle.textContent = 'New conversation';
    emptyThread();
    renderList();
    input.focus();
  }

  function stopFollowing(): void {
    source?.close();
    source = null;
    live.textContent = '';
  }

  /** Follows the conversation's confirmation stream; `from` resumes after an event id ("0": from the start). */
  function follow(conversationId: string, from: string | null): void {
    stopFollowing();
    const params = new URLSearchParams({ access_token: token });
    if (from !== null) params.set('last_event_id', from);
    const es = new EventSource(`/api/conversations/${encodeURIComponent(conversationId)}/stream?${params}`);
    source = es;
    live.textContent = 'connecting…';
    es.addEventListener('open', () => {
      if (source === es) live.textContent = '● live';
    });
    es.addEventListener('ping', () => {
      if (source === es) live.textContent = '● live';
    });
    es.addEventListener('error', () => {
      if (source !== es) return;
      // EventSource reconnects by itself (sending Last-Event-ID); CLOSED means it gave up (e.g. a revoked token).
      live.textContent = es.readyState === EventSource.CLOSED ? 'live updates stopped' : 'reconnecting…';
    });
    es.addEventListener('tx_confirmation', (event) => {
      const message = event as MessageEvent<string>;
      if (message.lastEventId) setLastEventId(conversationId, message.lastEventId);
      if (source !== es || current !== conversationId) return;
      try {
        const tx = JSON.parse(message.data) as TxConfirmation;
        showConfirmation(tx);
        confirmed.set(tx.tx_hash.toLowerCase(), tx);
        const t = byHash.get(tx.tx_hash.toLowerCase());
        if (t) applyConfirmation(t, tx);
      } catch {
        // a malformed event is skipped
      }
      onConfirmation();
    });
    es.addEventListener('approval_required', (event) => {
      const message = event as MessageEvent<string>;
      if (message.lastEventId) setLastEventId(conversationId, message.lastEventId);
      if (source !== es || current !== conversationId) return;
      onApprovalEvent();
    });
    es.addEventListener('approval_resolved', (event) => {
      const message = event as MessageEvent<string>;
      if (message.lastEventId) setLastEventId(conversationId, message.lastEventId);
      if (source !== es || current !== conversationId) return;
      try {
        const resolved = JSON.parse(message.data) as ApprovalResolved;
        const t = byTransfer.get(resolved.transfer_id);
        if (t) {
          if (resolved.decision === 'approved') {
            advance(t, 'approved');
            // The approved transfer keeps its id and gets a hash: ask for it (its confirmation follows on this stream).
            void refreshTransfer(t, 5);
          } else if (resolved.decision === 'rejected' || resolved.decision === 'expired') {
            advance(t, resolved.decision);
          }
        }
      } catch {
        // a malformed event is skipped
      }
      onApprovalEvent();
    });
  }

  function showConfirmation(tx: TxConfirmation): void {
    const title =
      tx.status === 'confirmed'
        ? `Transaction confirmed on ${tx.chain}`
        : tx.status === 'reverted'
          ? `Transaction reverted on ${tx.chain}`
          : tx.status === 'cancelled'
            ? `Transaction cancelled on ${tx.chain}`
            : `Transaction dropped on ${tx.chain}`;
    const hash = txHashLink(tx.chain, tx.tx_hash, tx.explorer_url);
    const facts = [
      tx.block_number !== null && tx.block_number !== undefined ? `block ${tx.block_number}` : null,
      tx.gas_used !== null && tx.gas_used !== undefined ? `gas used ${tx.gas_used}` : null,
      tx.confirmations ? `${tx.confirmations} confirmation${tx.confirmations === 1 ? '' : 's'}` : null,
    ].filter(Boolean);
    thread.append(
      h(
        'article',
        {
          class: `msg confirmation ${tx.status}`,
          'data-testid': 'tx-confirmation',
          'data-status': tx.status,
          'data-tx-hash': tx.tx_hash,
        },
        h('header', {}, h('strong', {}, title)),
        h('p', {}, hash, facts.length ? ` · ${facts.join(' · ')}` : ''),
      ),
    );
    scrollDown();
  }

  function scrollDown(): void {
    thread.scrollTop = thread.scrollHeight;
  }

  async function submit(): Promise<void> {
    const text = input.value.trim();
    if (!text || busy) return;
    busy = true;
    send.disabled = true;
    input.value = '';
    thread.querySelector('.empty')?.remove();
    thread.querySelector('.suggestions')?.remove();
    const mine = messageEl('user', new Date().toISOString());
    mine.body.textContent = text;
    thread.append(mine.el);
    const reply = messageEl('assistant', null);
    reply.el.dataset.state = 'streaming';
    reply.el.setAttribute('aria-busy', 'true');
    reply.body.classList.add('streaming');
    thread.append(reply.el);
    scrollDown();
    const cards = new Map<string, CallCard>();
    const argsById = new Map<string, unknown>();
    const tracked: Tracked[] = [];
    let text_ = '';
    const isNew = current === null;
    try {
      const response = await fetch('/api/chat/stream', {
        method: 'POST',
        headers: headers({ token, body: {} }),
        body: JSON.stringify({
          agent_id: agent.id,
          message: text,
          conversation_id: current,
          ...(connector.address() ? { connected_wallet_address: connector.address() } : {}),
        } satisfies ChatRequest),
      });
      if (!response.ok) throw await errorOf(response);
      await readSse(response, (event) => {
        let data: Record<string, unknown>;
        try {
          data = JSON.parse(event.data);
        } catch {
          return;
        }
        switch (event.event) {
          case 'start': {
            const id = String(data.conversation_id);
            if (isNew) {
              current = id;
              threadTitle.textContent = text.slice(0, 80);
              // A new conversation has no earlier events: follow it from the start so nothing is missed.
              follow(id, '0');
            }
            break;
          }
          case 'text_delta':
            text_ += String(data.text ?? '');
            reply.body.textContent = readable(text_);
            break;
          case 'tool_call': {
            const card = callCard({ id: String(data.id), tool: String(data.tool), args: data.args });
            cards.set(String(data.id), card);
            argsById.set(String(data.id), data.args);
            reply.calls.append(card.el);
            break;
          }
          case 'tool_result': {
            let card = cards.get(String(data.id));
            if (!card) {
              card = callCard({ id: String(data.id), tool: String(data.tool), args: {} });
              reply.calls.append(card.el);
            }
            card.finish(data as { result?: unknown; error?: unknown; duration_ms?: number });
            if (data.error !== undefined && data.error !== null) {
              const args = argsById.get(String(data.id));
              void explainRefusal(card, { tool: String(data.tool), args, error: data.error }, new Date().toISOString());
            }
            if (data.error === undefined || data.error === null) {
              const t = track(card, data.result, true);
              if (t) tracked.push(t);
            }
            break;
          }
          case 'final': {
            // The same body as POST /api/chat answers.
            const turn = data as unknown as ChatResponse;
            const prose = typeof turn.response === 'string' ? turn.response : text_;
            if (readable(prose) !== reply.body.textContent) reply.body.textContent = readable(prose);
            if (tracked.length) followProse(reply.body, reply.status, tracked, prose);
            reply.el.dataset.state = 'done';
            // The language model's usage (prompt + completion tokens) decides nothing about money, and the builtin
            // engine only counts words: it is kept out of the answer, in the title of its header.
            clear(reply.foot);
            reply.el.querySelector('header')?.setAttribute('title', `Language model usage for this answer: ${turn.tokens_used ?? 0} (prompt and completion text units, not crypto tokens)`);
            reply.el.dataset.tokensUsed = String(turn.tokens_used ?? 0);
            // The answer asks for a connected wallet: the way to connect is right there.
            if (/connect your wallet|no wallet is connected/i.test(turn.response ?? '') && !connector.address()) {
              reply.foot.append(' · ', h('button', { type: 'button', class: 'secondary small', onclick: () => connector.connect() }, 'Connect your wallet'));
            }
            break;
          }
          case 'error':
            reply.el.dataset.state = 'error';
            reply.foot.textContent = '';
            reply.foot.append(h('span', { class: 'form-error', role: 'alert' }, `${data.message} (${data.code})`));
            break;
        }
        scrollDown();
      });
      if (reply.el.dataset.state === 'streaming') {
        reply.el.dataset.state = 'error';
        reply.foot.append(h('span', { class: 'form-error', role: 'alert' }, 'The answer stopped before it was complete.'));
      }
    } catch (e) {
      reply.el.dataset.state = 'error';
      reply.foot.append(h('span', { class: 'form-error', role: 'alert' }, errorText(e)));
    } finally {
      reply.el.removeAttribute('aria-busy');
      reply.body.classList.remove('streaming');
      busy = false;
      send.disabled = false;
      await refreshList();
    }
  }

  composer.addEventListener('submit', (event) => {
    event.preventDefault();
    void submit();
  });
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      void submit();
    }
  });
  newButton.addEventListener('click', () => startNew());

  let loaded = false;
  return {
    el,
    load() {
      if (loaded) return;
      loaded = true;
      emptyThread();
      void refreshList();
    },
    close: stopFollowing,
    transferUpdated(transfer: Transfer) {
      const t = byTransfer.get(transfer.id);
      if (t) applyTransfer(t, transfer);
    },
  };
}
