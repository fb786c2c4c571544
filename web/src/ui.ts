// Shared pieces: notifications, error text, the one-time token panel, chain and capability pickers.
import { api, ApiError, type ChainInfo } from './api';
import { copyButton, field, h, shortHex, uid } from './dom';
import { hasToken, isRemembered, setToken } from './tokens';

const localChains = new Set<string>();

/** Remembers which chains run on a node on the server's own machine (`local_node`, e.g. the demo's anvil): their
 * transactions exist nowhere else, so no public explorer link is shown for them. */
export function noteLocalChains(chains: ChainInfo[]): void {
  for (const chain of chains) if (chain.local_node) localChains.add(chain.name);
}

export function isLocalChain(chain: string): boolean {
  return localChains.has(chain);
}

/** A transaction hash: linked to `url` (the chain's explorer), or plain with a "local node" mark when the chain runs
 * on a local node (an explorer would not know the transaction). */
export function txHashLink(chain: string, hash: string, url: string | null | undefined, head = 10, tail = 8): HTMLElement {
  const short = shortHex(hash, head, tail);
  if (isLocalChain(chain)) {
    return h(
      'span',
      { class: 'local-tx' },
      h('code', { class: 'mono', title: hash }, short),
      ' ',
      h('span', { class: 'badge local', title: 'This chain runs on a local node: the transaction exists only there' }, 'local node'),
    );
  }
  return url
    ? h('a', { href: url, target: '_blank', rel: 'noopener noreferrer', class: 'mono', title: hash }, short)
    : h('code', { class: 'mono', title: hash }, short);
}

export const CAPABILITIES: { name: string; label: string }[] = [
  { name: 'read', label: 'read: balances, gas, blocks, transactions' },
  { name: 'compare', label: 'compare: gas and balances across chains' },
  { name: 'transact', label: 'transact: send native tokens (within the cap)' },
  { name: 'analytics', label: 'analytics: spending and history' },
];

/** What to do about errors of owner authority, in the console's words. */
const ADVICE: Record<string, string> = {
  owner_required: 'Sign in as owner or enter the admin token (Settings → Owner authority).',
  invalid_owner_token: 'The owner session has expired: sign in as owner again (Settings → Owner authority).',
  unauthorized: 'The admin token is missing or wrong: check it in Settings → Owner authority.',
  transfer_expired: 'It waited past its expiry and can no longer be approved.',
  transfer_not_pending: 'It was already decided: refresh the list.',
};

export function errorText(e: unknown): string {
  if (e instanceof ApiError) {
    const retry = e.retryAfter ? ` Try again in ${e.retryAfter} s.` : '';
    const advice = ADVICE[e.code] ? ` — ${ADVICE[e.code]}` : '';
    const rule = e.details?.rule ? `, rule ${e.details.rule}` : '';
    return `${e.message} (${e.code}${rule})${advice}${retry}`;
  }
  return e instanceof Error ? e.message : String(e);
}

let toastRegion: HTMLElement | null = null;

export function setToastRegion(el: HTMLElement): void {
  toastRegion = el;
}

export function notify(message: string, kind: 'info' | 'error' = 'info'): void {
  if (!toastRegion) return;
  const toast = h(
    'div',
    { class: `toast ${kind}`, role: kind === 'error' ? 'alert' : 'status' },
    h('span', {}, message),
    h('button', { type: 'button', class: 'icon', 'aria-label': 'Dismiss', onclick: () => toast.remove() }, '×'),
  );
  toastRegion.appendChild(toast);
  setTimeout(() => toast.remove(), kind === 'error' ? 12000 : 5000);
}

/** An inline error line inside a form, replaced on each call. */
export function errorLine(): { el: HTMLElement; show(e: unknown): void; clear(): void } {
  const el = h('p', { class: 'form-error', role: 'alert', hidden: true });
  return {
    el,
    show(e) {
      el.textContent = errorText(e);
      el.hidden = false;
    },
    clear() {
      el.textContent = '';
      el.hidden = true;
    },
  };
}

export function chainPicker(
  chains: ChainInfo[],
  selected: string[],
  legend: string,
): { el: HTMLElement; value(): string[] } {
  const boxes: HTMLInputElement[] = [];
  const known = new Set(chains.map((c) => c.name));
  const all = [...chains];
  for (const name of selected) {
    if (!known.has(name)) all.push({ name, chain_id: 0, native_symbol: '', decimals: 18, explorer_url: '', configured: false, tokens: [] });
  }
  const el = h(
    'fieldset',
    { class: 'checks' },
    h('legend', {}, legend),
    all.map((chain) => {
      const id = uid('chain');
      const box = h('input', { type: 'checkbox', id, value: chain.name, checked: selected.includes(chain.name) });
      boxes.push(box);
      return h(
        'label',
        { for: id, class: 'check' },
        box,
        h('span', {}, chain.name),
        chain.chain_id ? h('small', {}, ` ${chain.chain_id}${chain.configured ? '' : ' · no RPC configured'}`) : null,
      );
    }),
  );
  // Keep the order the user ticked them in? The registry order is clear enough and stable.
  return { el, value: () => boxes.filter((b) => b.checked).map((b) => b.value) };
}

export function capabilityPicker(selected: string[]): { el: HTMLElement; value(): string[] } {
  const boxes: HTMLInputElement[] = [];
  const el = h(
    'fieldset',
    { class: 'checks' },
    h('legend', {}, 'Capabilities'),
    CAPABILITIES.map((cap) => {
      const id = uid('cap');
      const box = h('input', { type: 'checkbox', id, value: cap.name, checked: selected.includes(cap.name) });
      boxes.push(box);
      return h('label', { for: id, class: 'check' }, box, h('span', {}, cap.label));
    }),
  );
  return { el, value: () => boxes.filter((b) => b.checked).map((b) => b.value) };
}

/**
 * The one-time token panel: the token, a copy button and a clear warning. The token is kept for this tab at once;
 * "remember" stores it in localStorage too.
 */
export function tokenReveal(
  agentId: string,
  token: string,
  title: string,
  onDone: () => void,
  owners?: Record<string, string> | null,
): HTMLElement {
  // A new agent's token is remembered by default; a reissued one keeps the choice made for the old one.
  const remember = hasToken(agentId) ? isRemembered(agentId) : true;
  setToken(agentId, token, remember);
  const input = h('input', { type: 'text', readonly: true, value: token, class: 'mono token', spellcheck: 'false' });
  input.addEventListener('focus', () => input.select());
  const rememberBox = h('input', { type: 'checkbox', id: uid('remember'), checked: remember });
  rememberBox.addEventListener('change', () => setToken(agentId, token, rememberBox.checked));
  const headingId = uid('token-heading');
  return h(
    'section',
    { class: 'card token-reveal', 'aria-labelledby': headingId, 'data-testid': 'token-reveal' },
    h('h2', { id: headingId }, title),
    h(
      'p',
      { class: 'warning', role: 'alert' },
      h('strong', {}, 'This access token is shown only once. '),
      'Copy it now and keep it somewhere safe, such as a password manager. The service stores only a hash of it and ',
      'cannot show it again. Anyone who has it can use this agent and spend from its wallets up to the spending cap. ',
      lostTokenAdvice(owners),
    ),
    field('Access token', input),
    h('div', { class: 'row' }, copyButton(token, 'Copy access token')),
    h(
      'label',
      { class: 'check', for: rememberBox.id },
      rememberBox,
      h('span', {}, 'Remember this token in this browser (local storage). Untick on a shared computer.'),
    ),
    h('div', { class: 'row' }, h('button', { type: 'button', onclick: onDone }, 'I have saved the token')),
  );
}

/**
 * What to do if the token is lost, for what the agent can really do: a wallet-signature reissue needs an owner
 * address (or the agent's own key, which stays in the service unless exported).
 */
function lostTokenAdvice(owners: Record<string, string> | null | undefined): string {
  const addresses = [...new Set(Object.values(owners ?? {}))];
  if (owners === undefined) {
    return 'If it is lost, an owner wallet of the agent (if it has one) can sign a challenge to reissue one; otherwise reissue it with the current token while you have it.';
  }
  if (addresses.length) {
    return `If it is lost, the owner wallet ${addresses.join(', ')} can sign a challenge to reissue one ("Lost the token?" on the agent's page).`;
  }
  return 'This agent has no owner address, so no wallet of yours can reissue its token: if it is lost, only its own key (kept by the service) could sign for it. Give it an owner address in Settings, or keep this token safe and reissue with it while you have it.';
}

export interface FieldProblem {
  el: HTMLElement;
  show(text: string): void;
  clear(): void;
}

/** One problem line under a control; `aria-invalid` on the control while it shows. */
export function fieldProblem(control: HTMLElement): FieldProblem {
  const el = h('small', { class: 'field-error', id: uid('problem'), hidden: true });
  return {
    el,
    show(text) {
      el.textContent = el.hidden ? text : `${el.textContent} ${text}`;
      el.hidden = false;
      control.setAttribute('aria-invalid', 'true');
      const described = (control.getAttribute('aria-describedby') ?? '').split(' ').filter(Boolean);
      if (!described.includes(el.id)) control.setAttribute('aria-describedby', [...described, el.id].join(' '));
    },
    clear() {
      el.textContent = '';
      el.hidden = true;
      control.removeAttribute('aria-invalid');
    },
  };
}

/**
 * Asks for the agent's own access token where only it will do (docs/api.md §10: chat, sending, the conversations act
 * as the agent and refuse owner authority alone), without closing the rest of the agent: the token is checked by
 * reading the agent with it alone, kept (in this browser when asked), then `onToken` runs (by default the event
 * `agentd:agent-token`, on which the console re-opens the agent with its token, on the same tab).
 */
export function agentTokenPrompt(
  agentId: string,
  opts: { title: string; why: string; onToken?: () => void; testid?: string },
): HTMLElement {
  const input = h('input', { type: 'password', autocomplete: 'off', spellcheck: 'false', placeholder: 'agt_…' });
  const remember = h('input', { type: 'checkbox', id: uid('remember'), checked: true });
  const error = errorLine();
  const heading = uid('needs-token');
  const form = h(
    'form',
    { class: 'card needs-token', 'aria-labelledby': heading, 'data-testid': opts.testid ?? 'needs-agent-token' },
    h('h3', { id: heading }, opts.title),
    h('p', { class: 'muted' }, opts.why),
    field('Access token', input, 'The agt_… token shown when the agent was created or last reissued.'),
    h('label', { class: 'check', for: remember.id }, remember, h('span', {}, 'Remember it in this browser')),
    error.el,
    h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Use token')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    error.clear();
    if (!token) {
      error.show(new Error('Paste the agent\u2019s access token first.'));
      return;
    }
    if (!token.startsWith('agt_')) {
      error.show(new Error('An agent access token starts with agt_. The admin token and owner sessions (own_…) go in Settings \u2192 Owner authority.'));
      return;
    }
    try {
      await api.agent(agentId, token);
    } catch (e) {
      error.show(
        e instanceof ApiError && (e.status === 401 || e.status === 403)
          ? new Error(`The server refused this token for this agent (${e.code}): it may have been reissued, or belong to another agent.`)
          : e,
      );
      return;
    }
    setToken(agentId, token, remember.checked);
    notify('The agent\u2019s token was checked with the server and kept.');
    if (opts.onToken) opts.onToken();
    else window.dispatchEvent(new CustomEvent('agentd:agent-token', { detail: agentId }));
  });
  return form;
}

/**
 * A block folded behind a one-line summary (Settings' expert blocks): the section's own heading becomes the
 * summary's title, with `summary()` beside it (called again by `refresh`).
 */
export function fold(
  section: HTMLElement,
  opts: { testid: string; summary: () => string; open?: boolean },
): { el: HTMLDetailsElement; refresh(): void } {
  const heading = section.querySelector(':scope > h2');
  const title = heading?.textContent ?? '';
  const id = heading?.id || uid('fold');
  heading?.remove();
  const danger = section.classList.contains('danger-zone');
  section.classList.remove('card', 'danger-zone');
  section.classList.add('fold-body');
  const line = h('span', { class: 'fold-summary muted small', 'data-testid': `${opts.testid}-summary` }, opts.summary());
  const el = h(
    'details',
    { class: `card fold${danger ? ' danger-zone' : ''}`, 'data-testid': opts.testid, open: opts.open ? true : null },
    h('summary', {}, h('span', { class: 'fold-head' }, h('h2', { id }, title), line)),
    section,
  );
  return {
    el,
    refresh() {
      line.textContent = opts.summary();
    },
  };
}
