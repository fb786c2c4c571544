// agentd web console: agents, their tokens, wallets, chat, approvals, policy, webhooks, audit log and settings, on the
// service's own API.
import './style.css';
import { api, ApiError, adminToken, checkAdminToken, setAdminToken, type AgentDetail, type AgentSummary, type Capability, type ChainInfo } from './api';
import { approvalsPanel, keepWaitingOf, noteWaiting, onWaitingTotal } from './approvals';
import { auditPanel } from './audit';
import { onAuthorityChange, ownerCredential, ownerSession, setOwnerSession } from './authority';
import { chatPanel, type ChatPanel } from './chat';
import { clear, copyButton, field, h, uid } from './dom';
import { historyPanel } from './history';
import { overviewPage } from './overview';
import { sponsorshipPage } from './sponsorship-page';
import { inboxView, knownAgents } from './inbox';
import { policyPanel } from './policy';
import {
  adminRefusal,
  deleteSection,
  editForm,
  guardedNote,
  ownerSection,
  reissueSection,
  unguardedWarning,
  walletReissue,
  type SettingsHooks,
} from './settings';
import { forgetToken, getToken, isRemembered, setToken } from './tokens';
import {
  agentTokenPrompt,
  capabilityPicker,
  fold,
  chainPicker,
  errorLine,
  errorText,
  fieldProblem,
  noteLocalChains,
  notify,
  setToastRegion,
  tokenReveal,
} from './ui';
import { walletPanel } from './wallet';
import { webhooksPanel } from './webhooks';
import { delegationsPanel } from './delegations';
import { offersPanel } from './offers';

type Tab = 'chat' | 'wallet' | 'offers' | 'delegations' | 'history' | 'approvals' | 'policy' | 'webhooks' | 'audit' | 'settings';
// History first: opening an agent answers "what did it do" (its activity), not an empty chat.
const TABS: { id: Tab; label: string }[] = [
  { id: 'history', label: 'History' },
  { id: 'approvals', label: 'Approvals' },
  { id: 'wallet', label: 'Wallet' },
  { id: 'offers', label: 'Offers' },
  { id: 'delegations', label: 'Delegations' },
  { id: 'chat', label: 'Chat' },
  { id: 'policy', label: 'Policy' },
  { id: 'webhooks', label: 'Webhooks' },
  { id: 'audit', label: 'Audit' },
  { id: 'settings', label: 'Settings' },
];

const state = {
  chains: [] as ChainInfo[],
  agents: [] as AgentSummary[],
  selected: null as string | null,
  tab: 'history' as Tab,
  /** Whether the agent list was read (false: the server wants the admin token, or it failed). */
  listed: false,
  /** The server refused the list without the admin token (401): the console asks for it. */
  needsAdmin: false,
  /** Why the list could not be read otherwise. */
  listProblem: null as unknown,
};

let activeChat: ChatPanel | null = null;
/** The agent on screen and how to show another of its tabs (Back and Forward between its tabs re-read nothing). */
let agentView: { id: string; show(tab: Tab): void } | null = null;

const agentList = h('ul', { class: 'agent-list', 'aria-label': 'Agent list' });
const listError = errorLine();
const main = h('main', { id: 'main', tabindex: -1 });

function route(): { agent: string | null; tab: Tab } {
  const match = /^#\/agents\/([0-9a-fA-F-]{36})(?:\/(chat|wallet|offers|delegations|history|approvals|policy|webhooks|audit|settings))?/.exec(location.hash);
  return { agent: match?.[1] ?? null, tab: (match?.[2] as Tab | undefined) ?? 'history' };
}

/** An agent's address with one of its tabs, in full (`#/agents/<id>/<tab>`). */
const AGENT_ADDRESS = new RegExp(`^#/agents/([0-9a-fA-F-]{36})(?:/(${TABS.map((t) => t.id).join('|')}))?$`);

/** The address of the screen shown (what Back, Forward and an edited address are compared with). */
let shownHash = location.hash;
/** True while the console follows the address (a load, Back, Forward, an edit): it then writes no history entry. */
let following = false;

/**
 * Gives the screen shown its address. A move to another screen or tab is a new history entry, so Back and Forward
 * walk the screens; while following the address, or when the address only said the same screen another way (an
 * agent without its tab), it is corrected in place, so Back never lands on a copy of the same screen.
 */
function go(hash: string): void {
  if (location.hash !== hash) {
    const url = hash || location.pathname + location.search;
    const current = AGENT_ADDRESS.exec(location.hash);
    const sameAgentUntabbed = !!current && !current[2] && current[1].toLowerCase() === AGENT_ADDRESS.exec(hash)?.[1].toLowerCase();
    if (following || !location.hash || sameAgentUntabbed) history.replaceState(null, '', url);
    else history.pushState(null, '', url);
  }
  shownHash = location.hash;
}

function setRoute(agent: string, tab: Tab = 'history'): void {
  go(`#/agents/${agent}/${tab}`);
}

// ---------------------------------------------------------------- sidebar

async function loadAgents(): Promise<void> {
  listError.clear();
  try {
    state.agents = await api.listAgents();
    state.listed = true;
    state.needsAdmin = false;
    state.listProblem = null;
  } catch (e) {
    state.agents = [];
    state.listed = false;
    state.needsAdmin = e instanceof ApiError && e.status === 401;
    state.listProblem = state.needsAdmin ? null : e;
    if (e instanceof ApiError && e.status === 401) {
      listError.show(new Error('This server needs the admin token to list and create agents: enter it below.'));
      adminDetails.open = true;
    } else listError.show(e);
  }
  renderAgentList();
  void countWaiting();
}

/**
 * The inbox badge from the start: what waits for every agent the console can read (its token, its owner session or
 * the admin token). Later reads anywhere in the console (the agent's Approvals tab, the inbox, the overview, the
 * history) and the open conversation's approval events keep it current (./approvals `noteWaiting`).
 */
async function countWaiting(): Promise<void> {
  const agents = knownAgents(state.agents).filter((a) => a.active && (getToken(a.id) || ownerCredential(a.id)));
  keepWaitingOf(new Set(agents.map((a) => a.id)));
  await Promise.all(
    agents.map((a) =>
      api.approvalsAny(a.id, getToken(a.id)).then(
        (waiting) => noteWaiting(a.id, waiting.length),
        () => {},
      ),
    ),
  );
}

function renderAgentList(): void {
  clear(agentList);
  if (state.agents.length === 0) {
    // "No agents yet" only when the server said so: a list it refused says why above (listError).
    if (state.listed) agentList.append(h('li', { class: 'muted small' }, 'No agents yet.'));
    return;
  }
  for (const agent of state.agents) {
    agentList.append(
      h(
        'li',
        {},
        h(
          'button',
          {
            type: 'button',
            class: 'agent-item',
            'aria-current': agent.id === state.selected ? 'true' : null,
            onclick: () => selectAgent(agent.id),
          },
          h('span', { class: 'agent-name' }, agent.name),
          h(
            'small',
            { class: 'muted' },
            agent.chains.join(', '),
            agent.is_active ? '' : ' · deleted',
            getToken(agent.id) ? ' · token saved' : '',
          ),
        ),
      ),
    );
  }
}

const adminError = errorLine();
const adminInput = h('input', { type: 'password', autocomplete: 'off', value: adminToken() ?? '' });
adminInput.addEventListener('input', () => adminError.clear());
// The same token can be entered in an agent's settings (Owner authority): keep this field and the list in step.
let listedWith = adminToken();
onAuthorityChange(adminInput, () => {
  adminInput.value = adminToken() ?? '';
  if (adminToken() !== listedWith) {
    listedWith = adminToken();
    void loadAgents();
  }
});
/**
 * Checks an admin token with the server, then uses it and moves on: from the sign-in screen or an empty page to the
 * overview (or, when the server has no agent yet, the New agent form). False, with the reason shown, when refused.
 */
async function acceptAdminToken(value: string | null, error: ReturnType<typeof errorLine>): Promise<boolean> {
  error.clear();
  if (value) {
    // Checked with the server before the console says it uses it.
    try {
      const verdict = await checkAdminToken(value);
      if (verdict !== 'valid') {
        error.show(new Error(adminRefusal(verdict)));
        return false;
      }
    } catch (e) {
      error.show(e);
      return false;
    }
  }
  listedWith = value;
  setAdminToken(listedWith);
  notify(listedWith ? 'Admin token checked with the server and saved in this browser.' : 'Admin token removed.');
  await loadAgents();
  // An open agent or the inbox stays where it is (they follow the new authority); anything else moves on.
  if (value && state.selected === null && location.hash !== '#/approvals') landing();
  return true;
}

const adminDetails = h(
  'details',
  { class: 'admin' },
  h('summary', {}, 'Admin token'),
  h(
    'form',
    {
      onsubmit: async (event: Event) => {
        event.preventDefault();
        await acceptAdminToken(adminInput.value.trim() || null, adminError);
      },
    },
    field('Admin token (only when the server sets ADMIN_TOKEN)', adminInput),
    h('button', { type: 'submit', class: 'secondary small' }, 'Save'),
    adminError.el,
  ),
);

// ---------------------------------------------------------------- create

// ---------------------------------------------------------------- approvals inbox (every agent)

const inboxCount = h('span', { class: 'count', 'data-testid': 'inbox-count' });
onWaitingTotal((n) => {
  inboxCount.textContent = n ? String(n) : '';
  if (n) inboxCount.setAttribute('aria-label', `${n} waiting`);
  else inboxCount.removeAttribute('aria-label');
});

function showInbox(): void {
  closeAgent();
  state.selected = null;
  go('#/approvals');
  renderAgentList();
  clear(main);
  main.append(
    inboxView(
      state.agents,
      state.chains,
      () => {},
      (id) => selectAgent(id, 'approvals'),
    ),
  );
}

/** The first screen of a server that lists its agents to the admin token only: the token, up front. */
function showSignIn(): void {
  closeAgent();
  state.selected = null;
  // Not a screen of its own: whatever address was asked for opens once the token is taken.
  history.replaceState(null, '', location.pathname + location.search);
  shownHash = location.hash;
  renderAgentList();
  listError.clear();
  adminDetails.hidden = true;
  clear(main);
  const input = h('input', { type: 'password', autocomplete: 'off', spellcheck: 'false', placeholder: 'The server\u2019s ADMIN_TOKEN' });
  const error = errorLine();
  // A token kept from before that the server no longer takes (ADMIN_TOKEN changed): said, and asked again.
  if (adminToken()) error.show(new Error('The admin token saved in this browser was refused: the server\u2019s ADMIN_TOKEN has changed. Enter the current one.'));
  const heading = uid('sign-in');
  const form = h(
    'form',
    { class: 'card sign-in', 'aria-labelledby': heading, 'data-testid': 'sign-in' },
    h('h2', { id: heading }, 'Enter the admin token'),
    h(
      'p',
      {},
      'This agentd keeps its list of agents behind an admin token: the ADMIN_TOKEN it was started with (the demo ',
      'prints it). With it you see every agent, their balances and what waits for your approval.',
    ),
    field('Admin token', input),
    error.el,
    h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Continue')),
    h(
      'p',
      { class: 'muted small' },
      'The token is checked with the server, then kept in this browser (remove it in the sidebar\u2019s Admin token). ',
      'An agent\u2019s own access token opens only that agent: use the link the agent was created with, or ask the operator.',
    ),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const value = input.value.trim();
    if (!value) {
      error.show(new Error('Paste the admin token first.'));
      return;
    }
    await acceptAdminToken(value, error);
  });
  main.append(form);
  input.focus();
}

/** Where the console opens when no agent or screen is asked for. */
function landing(): void {
  if (state.needsAdmin) showSignIn();
  else if (state.listProblem) {
    closeAgent();
    state.selected = null;
    clear(main);
    main.append(
      h(
        'section',
        { class: 'card', role: 'alert' },
        h('h2', {}, 'The agent list could not be read'),
        h('p', {}, errorText(state.listProblem)),
        h('div', { class: 'row' }, h('button', { type: 'button', onclick: () => void loadAgents().then(landing) }, 'Try again')),
      ),
    );
  } else if (state.agents.length === 0) showCreate();
  else showOverview();
}

function showCreate(): void {
  closeAgent();
  state.selected = null;
  go('#/new');
  renderAgentList();
  clear(main);
  const name = h('input', { type: 'text', required: true, maxlength: 100, autocomplete: 'off' });
  const description = h('textarea', { rows: 2, maxlength: 1000 });
  const defaults = state.chains.filter((c) => c.configured).map((c) => c.name);
  const chains = chainPicker(state.chains, defaults.length ? defaults.slice(0, 2) : ['ethereum', 'base'], 'Chains');
  const caps = capabilityPicker(['read']);
  const cap = h('input', { type: 'number', min: 0, step: 'any', value: '0', required: true });
  // The owner's wallet (owner_addresses, docs/api.md §4, §10): guards the agent, signs owner sessions and reissues.
  const owner = h('input', { type: 'text', class: 'mono', placeholder: '0x…', autocomplete: 'off', spellcheck: 'false' });
  const ownerProblem = fieldProblem(owner);
  const perChain = new Map<string, HTMLInputElement>();
  const perChainList = h('div', { class: 'per-chain' });
  const perChainBox = h(
    'details',
    { class: 'per-chain-owners' },
    h('summary', {}, 'A different owner address on some chains'),
    h('p', { class: 'muted small' }, 'Left empty, a chain takes the address above. EVM chains share one address, so most owners need only one.'),
    perChainList,
  );
  function renderPerChain(): void {
    const chosen = chains.value();
    for (const name of [...perChain.keys()]) if (!chosen.includes(name)) perChain.delete(name);
    clear(perChainList);
    for (const name of chosen) {
      const input = perChain.get(name) ?? h('input', { type: 'text', class: 'mono', placeholder: '0x…', autocomplete: 'off', spellcheck: 'false' });
      perChain.set(name, input);
      perChainList.append(field(`Owner address on ${name}`, input));
    }
  }
  chains.el.addEventListener('change', renderPerChain);
  renderPerChain();
  const error = errorLine();
  const submit = h('button', { type: 'submit' }, 'Create agent');
  const heading = uid('create');
  const form = h(
    'form',
    { class: 'card', 'aria-labelledby': heading },
    h('h2', { id: heading }, 'New agent'),
    h(
      'p',
      { class: 'muted' },
      state.listed && state.agents.length === 0 ? 'This server has no agent yet. ' : '',
      'The agent gets its own wallet on each chain and a one-time access token.',
    ),
    field('Name', name),
    field('Description (optional)', description),
    chains.el,
    caps.el,
    field('Spending cap (per chain, native units such as ETH)', cap, '0 means the agent cannot spend anything.'),
    field(
      'Owner wallet address (recommended)',
      owner,
      'Your own wallet, for every chain chosen above. It guards the agent (its own token can then no longer raise its cap, change its policy or export its key), lets you sign in as owner to approve its transfers, and can reissue a lost token.',
    ),
    ownerProblem.el,
    perChainBox,
    error.el,
    h('div', { class: 'row' }, submit),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.clear();
    ownerProblem.clear();
    const chosen = chains.value();
    const owners: Record<string, string> = {};
    const shared = owner.value.trim();
    for (const chain of chosen) {
      const address = perChain.get(chain)?.value.trim() || shared;
      if (address) owners[chain] = address;
    }
    const malformed = Object.entries(owners).filter(([, a]) => !/^0x[0-9a-fA-F]{40}$/.test(a));
    if (malformed.length) {
      ownerProblem.show(`Not a 0x address of 40 hex digits: ${malformed.map(([c, a]) => `${a} (${c})`).join(', ')}.`);
      owner.focus();
      return;
    }
    submit.disabled = true;
    try {
      const created = await api.createAgent({
        name: name.value.trim(),
        description: description.value.trim() || null,
        chains: chosen,
        // The boxes are the capability names, so their values are capabilities.
        capabilities: caps.value() as Capability[],
        spending_cap: Number(cap.value),
        ...(Object.keys(owners).length ? { owner_addresses: owners } : {}),
      });
      await loadAgents();
      state.selected = created.id;
      setRoute(created.id, 'wallet');
      renderAgentList();
      clear(main);
      main.append(
        tokenReveal(
          created.id,
          created.access_token,
          `${created.name} is ready: save its access token`,
          () => selectAgent(created.id, 'wallet'),
          owners,
        ),
      );
      main.focus();
    } catch (e) {
      error.show(e);
    } finally {
      submit.disabled = false;
    }
  });
  main.append(form);
  name.focus();
}

// ---------------------------------------------------------------- gas sponsorship (the operator's)

function showSponsorship(): void {
  closeAgent();
  state.selected = null;
  go('#/sponsorship');
  renderAgentList();
  clear(main);
  main.append(sponsorshipPage(state.agents, state.chains, { open: (id, tab) => selectAgent(id, tab ?? 'wallet') }));
}

// ---------------------------------------------------------------- overview

function showOverview(): void {
  closeAgent();
  state.selected = null;
  go('#/overview');
  renderAgentList();
  clear(main);
  main.append(
    overviewPage(state.agents, state.chains, {
      open: (id, tab) => selectAgent(id, tab ?? 'history'),
      create: () => showCreate(),
    }),
  );
}

// ---------------------------------------------------------------- one agent

function closeAgent(): void {
  activeChat?.close();
  activeChat = null;
  agentView = null;
  // The sign-in screen hides the sidebar's admin token form (one form at a time); every other screen shows it.
  adminDetails.hidden = false;
}

function selectAgent(id: string, tab: Tab = state.tab): void {
  closeAgent();
  state.selected = id;
  state.tab = tab;
  setRoute(id, tab);
  renderAgentList();
  void renderAgent(id);
}

function agentHeader(title: string, agent: AgentDetail | AgentSummary | null, id: string, extra?: HTMLElement): HTMLElement {
  return h(
    'div',
    { class: 'agent-head' },
    h(
      'div',
      {},
      h('h2', { class: 'agent-title' }, title, agent && !agent.is_active ? h('span', { class: 'badge bad' }, 'deleted') : null),
      h('p', { class: 'muted small mono' }, id, ' ', copyButton(id, 'Copy agent id')),
    ),
    extra ?? null,
  );
}

function tokenForm(id: string, summary: AgentSummary | undefined, message?: string): void {
  clear(main);
  const input = h('input', { type: 'password', autocomplete: 'off', spellcheck: 'false', placeholder: 'agt_…' });
  const remember = h('input', { type: 'checkbox', id: uid('remember'), checked: true });
  const error = errorLine();
  const heading = uid('unlock');
  const form = h(
    'form',
    { class: 'card', 'aria-labelledby': heading },
    h('h3', { id: heading }, 'Access token'),
    h('p', { class: 'muted' }, 'Paste the token shown when the agent was created or last reissued.'),
    field('Access token', input),
    h('label', { class: 'check', for: remember.id }, remember, h('span', {}, 'Remember it in this browser')),
    error.el,
    h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Use token')),
  );
  if (message) error.show(new Error(message));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    error.clear();
    try {
      await api.agent(id, token);
      setToken(id, token, remember.checked);
      selectAgent(id);
    } catch (e) {
      error.show(e);
    }
  });
  const chains = summary?.chains ?? [];
  const lost = h('section', { class: 'card' }, h('h3', {}, 'Lost the token?'), walletReissue({ id, chains }, (token, owners) => revealReissued(id, token, owners)));
  main.append(agentHeader(summary?.name ?? 'Agent', summary ?? null, id), form, ownerOpenForm(id), chains.length ? lost : '');
  input.focus();
}

/**
 * Opening an agent as its owner, without its token (§10: owner authority alone reads and governs every agent-scoped
 * resource but chat, sending and the conversations): the admin token (the sidebar's, or Settings), or an owner
 * session token (`own_…`) got elsewhere, pasted here.
 */
function ownerOpenForm(id: string): HTMLElement {
  const pasted = h('input', { type: 'password', autocomplete: 'off', spellcheck: 'false', placeholder: 'own_…' });
  const error = errorLine();
  const heading = uid('open-owner');
  const form = h(
    'form',
    { class: 'card', 'aria-labelledby': heading, 'data-testid': 'open-as-owner' },
    h('h3', { id: heading }, 'Open it as its owner'),
    h(
      'p',
      { class: 'muted' },
      'The owner does not need the agent\u2019s token to see its history, approve its transfers, set its policy, webhooks ',
      'and settings or read its audit log: enter the server\u2019s admin token in the sidebar (Admin token), or paste an ',
      'owner session token (own_\u2026, from POST \u2026/owner-session, 15 minutes). Chat and sending still take the agent\u2019s own token.',
    ),
    field('Owner session token', pasted),
    error.el,
    h('div', { class: 'row' }, h('button', { type: 'submit', class: 'secondary' }, 'Open as owner')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.clear();
    const value = pasted.value.trim();
    if (!value.startsWith('own_')) {
      error.show(new Error('An owner session token starts with own_. The admin token goes in the sidebar\u2019s Admin token.'));
      return;
    }
    try {
      await api.checkOwnerToken(id, value);
    } catch (e) {
      error.show(
        e instanceof ApiError && e.code === 'invalid_owner_token'
          ? new Error('The server does not know this owner token, or it has expired (invalid_owner_token): open a new session and paste it.')
          : e instanceof ApiError && e.status === 403
            ? new Error(`This owner token is another agent's session (${e.code}).`)
            : e,
      );
      return;
    }
    setOwnerSession(id, { token: value, expires_at: new Date(Date.now() + 15 * 60_000).toISOString(), address: null });
    notify('Owner session checked with the server: the agent opens as its owner.');
    selectAgent(id);
  });
  return form;
}

/** The owner authority the console holds for an agent, for a summary line. */
function ownerShort(id: string): string {
  const session = ownerSession(id);
  if (session) return session.address ? `signed in as owner ${session.address.slice(0, 6)}\u2026${session.address.slice(-4)}` : 'a pasted owner session in use';
  return adminToken() ? 'the admin token in use' : 'no owner authority in this browser';
}

/** What owner authority the console opens an agent with, in a few words. */
function ownerWords(id: string): string {
  const session = ownerSession(id);
  if (session) return session.address ? `your owner session (${session.address})` : 'a pasted owner session';
  return 'the admin token';
}

function revealReissued(id: string, token: string, owners?: Record<string, string>): void {
  closeAgent();
  clear(main);
  main.append(tokenReveal(id, token, 'New access token: save it', () => selectAgent(id), owners));
  renderAgentList();
}

/** The header's line for an agent opened with its own token: where it is kept, and "Forget token". */
function agentTokenInfo(id: string): HTMLElement {
  return h(
    'div',
    { class: 'token-info' },
    h('span', { class: 'muted small' }, isRemembered(id) ? 'Token remembered in this browser' : 'Token kept for this tab only'),
    h(
      'button',
      {
        type: 'button',
        class: 'secondary small',
        onclick: () => {
          forgetToken(id);
          notify('The token was removed from this browser.');
          selectAgent(id);
        },
      },
      'Forget token',
    ),
  );
}

async function renderAgent(id: string): Promise<void> {
  const summary = state.agents.find((a) => a.id === id);
  // The agent's own token when the console holds one; else owner authority alone (§10: the admin token or an owner
  // session opens every view an owner needs; chat and sending then ask for the agent's token in place).
  const token = getToken(id);
  if (!token && !ownerCredential(id)) {
    tokenForm(id, summary);
    return;
  }
  clear(main);
  main.append(h('p', { class: 'muted' }, 'Loading…'));
  let agent: AgentDetail;
  try {
    agent = await api.agent(id, token);
  } catch (e) {
    if (e instanceof ApiError && (e.status === 401 || e.status === 403)) {
      if (token) {
        forgetToken(id);
        if (ownerCredential(id)) {
          notify(`The saved token of this agent no longer works (${e.code}): it was probably reissued. Opened as its owner.`, 'error');
          if (state.selected === id) void renderAgent(id);
          return;
        }
        tokenForm(id, summary, `The saved token no longer works (${e.code}): it was probably reissued. Paste the current one.`);
      } else {
        tokenForm(id, summary, `The server refused ${ownerWords(id)} for this agent (${e.code}). Paste the agent\u2019s token, or check the owner authority.`);
      }
    } else {
      clear(main);
      main.append(h('p', { class: 'form-error', role: 'alert' }, errorText(e)));
    }
    return;
  }
  if (state.selected !== id) return;

  // Opened as the owner: a slot under the header for the agent's token, for chat and sending.
  const tokenSlot = h('div', { class: 'token-slot', hidden: true });
  const tokenInfo = token
    ? agentTokenInfo(id)
    : h(
        'div',
        { class: 'token-info', 'data-testid': 'opened-as-owner' },
        h('span', { class: 'muted small' }, `Opened as owner with ${ownerWords(id)}: no agent token here`),
        h(
          'button',
          {
            type: 'button',
            class: 'secondary small',
            'aria-expanded': 'false',
            onclick: (event: Event) => {
              tokenSlot.hidden = !tokenSlot.hidden;
              (event.currentTarget as HTMLElement).setAttribute('aria-expanded', String(!tokenSlot.hidden));
              if (!tokenSlot.hidden) tokenSlot.querySelector('input')?.focus();
            },
          },
          'Add the agent token',
        ),
      );
  if (!token) {
    tokenSlot.append(
      agentTokenPrompt(id, {
        title: 'The agent\u2019s access token',
        why: 'Chat and sending act as the agent and take only its own token. History, Approvals, Policy, Webhooks, Audit and Settings work as its owner without it.',
        testid: 'header-agent-token',
      }),
    );
    // Owner authority that goes away (the admin token forgotten, the session ended) leaves nothing to read with.
    onAuthorityChange(tokenInfo, () => {
      if (!ownerCredential(id) && state.selected === id && !getToken(id)) selectAgent(id, state.tab);
    });
  }

  clear(main);
  main.append(agentHeader(agent.name, agent, id, tokenInfo), tokenSlot);
  if (agent.description) main.append(h('p', { class: 'description' }, agent.description));
  main.append(
    h(
      'p',
      { class: 'facts muted small' },
      `Chains: ${agent.chains.join(', ')} · Capabilities: ${agent.capabilities.join(', ')} · Spending cap: ${agent.spending_cap} per chain`,
    ),
  );
  if (agent.is_active && !agent.guarded) main.append(unguardedWarning());
  else if (agent.is_active) main.append(guardedNote());
  if (!agent.is_active) {
    main.append(
      h(
        'p',
        { class: 'warning', role: 'status' },
        'This agent is deleted: its token, chat and transfers no longer work. Its record and addresses are kept.',
      ),
    );
    for (const chain of agent.chains) {
      main.append(
        h('p', { class: 'address-row' }, h('span', {}, `${chain}: `), h('code', { class: 'mono' }, agent.wallet_addresses[chain] ?? '')),
      );
    }
    return;
  }

  const hooks: SettingsHooks = {
    onUpdated: () => {
      void loadAgents();
      selectAgent(id, 'settings');
    },
    onReissued: (newToken, owners) => revealReissued(id, newToken, owners),
    // The token still opens the (read-only) detail of a deleted agent; "Forget token" removes it.
    onDeleted: () => {
      void loadAgents().then(() => selectAgent(id));
    },
  };
  // A held transfer (History, the send's answer, a chat card) links to its card in the Approvals tab.
  const openApproval = (transferId: string) => {
    show('approvals');
    void approvals.reveal(transferId);
  };
  const policy = policyPanel(agent, token, state.chains);
  // A refused call names its rule: the link opens the Policy tab at that rule.
  const openPolicyRule = (rule: string) => {
    show('policy');
    policy.reveal(rule);
  };
  const wallet = walletPanel(agent, token, state.chains, () => void approvals.refresh(), openApproval, openPolicyRule);
  const approvalCount = h('span', { class: 'count', 'data-testid': 'approval-count' });
  const approvals = approvalsPanel(
    agent,
    token,
    (transfer) => chat.transferUpdated(transfer),
    (count) => {
      approvalCount.textContent = count ? String(count) : '';
      if (count) approvalCount.setAttribute('aria-label', `${count} waiting`);
      else approvalCount.removeAttribute('aria-label');
    },
    state.chains,
  );
  const chat: ChatPanel = token
    ? chatPanel(
        agent,
        token,
        () => void wallet.refreshBalances(),
        () => void approvals.refresh(),
        openApproval,
      )
    : {
        // §10: chat and the conversations act as the agent and refuse owner authority alone.
        el: h(
          'section',
          { class: 'chat-locked' },
          agentTokenPrompt(id, {
            title: 'Chat needs the agent\u2019s own token',
            why: 'Chat talks as the agent (its conversations, its tools, its sends), so the service takes only the agent\u2019s access token for it, not the admin token or an owner session. Give the token to chat here; the other tabs work without it.',
          }),
        ),
        load() {},
        close() {},
        transferUpdated() {},
      };
  activeChat = chat;
  // Settings: each block folded behind a one-line summary (the agent's own settings open), not one long page.
  const ownerFold = fold(ownerSection(agent), {
    testid: 'settings-owner',
    summary: () => `${agent.guarded ? 'Guarded' : 'Not guarded: its own token can lift its limits'} \u00b7 ${ownerShort(id)}`,
  });
  onAuthorityChange(ownerFold.el, ownerFold.refresh);
  const settings = h(
    'div',
    { class: 'stack' },
    fold(editForm(agent, token, state.chains, hooks), {
      testid: 'settings-agent',
      open: true,
      summary: () =>
        `Name, chains, capabilities, cap (${agent.spending_cap} per chain), owner address${agent.owner_addresses && Object.keys(agent.owner_addresses).length ? '' : ' (none)'}`,
    }).el,
    ownerFold.el,
    fold(reissueSection(agent, hooks), {
      testid: 'settings-reissue',
      summary: () =>
        token ? 'A new token for the agent: with the current one, or a wallet signature' : 'A new token for the agent, with a wallet signature',
    }).el,
    fold(deleteSection(agent, token, hooks), {
      testid: 'settings-delete',
      summary: () => 'Deactivate the agent: its token stops working, nothing is erased',
    }).el,
  );
  const panels: Record<Tab, { el: HTMLElement; load(): void }> = {
    chat,
    wallet,
    history: historyPanel(agent, token, state.chains, { openApproval }),
    approvals,
    policy,
    offers: offersPanel(agent, token, state.chains),
    delegations: delegationsPanel(agent, token, state.chains),
    webhooks: webhooksPanel(agent, token),
    audit: auditPanel(agent, token),
    settings: { el: settings, load() {} },
  };
  const tabButtons = new Map<Tab, HTMLButtonElement>();
  const tablist = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Agent sections' });
  const tabsWrap = scrollCue(tablist);
  const panelEls = new Map<Tab, HTMLElement>();
  for (const t of TABS) {
    const tabId = uid('tab');
    const panelId = uid('panel');
    const button = h(
      'button',
      { type: 'button', role: 'tab', id: tabId, 'aria-controls': panelId },
      t.label,
      t.id === 'approvals' ? approvalCount : null,
    );
    button.addEventListener('click', () => show(t.id));
    button.addEventListener('keydown', (event) => {
      const i = TABS.findIndex((x) => x.id === t.id);
      const next = event.key === 'ArrowRight' ? i + 1 : event.key === 'ArrowLeft' ? i - 1 : null;
      if (next === null) return;
      const target = TABS[(next + TABS.length) % TABS.length].id;
      show(target);
      tabButtons.get(target)?.focus();
    });
    tabButtons.set(t.id, button);
    tablist.append(button);
    panelEls.set(t.id, h('div', { role: 'tabpanel', id: panelId, 'aria-labelledby': tabId, class: 'panel' }, panels[t.id].el));
  }
  function show(tab: Tab): void {
    state.tab = tab;
    setRoute(id, tab);
    for (const t of TABS) {
      const selected = t.id === tab;
      const button = tabButtons.get(t.id)!;
      button.setAttribute('aria-selected', String(selected));
      button.tabIndex = selected ? 0 : -1;
      panelEls.get(t.id)!.hidden = !selected;
    }
    tabButtons.get(tab)?.scrollIntoView({ block: 'nearest', inline: 'nearest' });
    panels[tab].load();
  }
  main.append(tabsWrap.el, ...panelEls.values());
  tabsWrap.update();
  agentView = { id, show };
  show(state.tab);
  // The count of waiting transfers shows on the tab from the start.
  approvals.load();
}

/**
 * A row that scrolls sideways (the tab bar on a narrow screen) with a visible cue: a fade and an arrow button on
 * each side that has more, which scrolls by most of a screen.
 */
function scrollCue(row: HTMLElement): { el: HTMLElement; update(): void } {
  const left = h('button', { type: 'button', class: 'scroll-cue left', 'aria-label': 'Scroll the sections left', tabindex: -1 }, '\u2039');
  const right = h('button', { type: 'button', class: 'scroll-cue right', 'aria-label': 'Scroll the sections right', tabindex: -1 }, '\u203a');
  const el = h('div', { class: 'tabs-wrap', 'data-testid': 'tabs-wrap' }, row, left, right);
  const update = () => {
    const more = row.scrollWidth - row.clientWidth;
    el.dataset.moreLeft = String(row.scrollLeft > 2);
    el.dataset.moreRight = String(more - row.scrollLeft > 2);
  };
  left.addEventListener('click', () => row.scrollBy({ left: -row.clientWidth * 0.7, behavior: 'smooth' }));
  right.addEventListener('click', () => row.scrollBy({ left: row.clientWidth * 0.7, behavior: 'smooth' }));
  row.addEventListener('scroll', update, { passive: true });
  new ResizeObserver(update).observe(row);
  return { el, update };
}

// ---------------------------------------------------------------- start

// The agent's token given in place (chat, send, the header of an agent opened as its owner): the agent re-opens with
// it, on the same tab.
window.addEventListener('agentd:agent-token', (event) => {
  const id = (event as CustomEvent<string>).detail;
  if (state.selected === id) selectAgent(id, state.tab);
  else renderAgentList();
});

async function start(): Promise<void> {
  const app = document.getElementById('app')!;
  const toasts = h('div', { class: 'toasts', 'aria-live': 'polite' });
  setToastRegion(toasts);
  const newButton = h('button', { type: 'button', onclick: () => showCreate() }, 'New agent');
  const inboxButton = h('button', { type: 'button', class: 'secondary', onclick: () => showInbox() }, 'Approvals inbox', ' ', inboxCount);
  const refresh = h('button', { type: 'button', class: 'secondary small', onclick: () => void loadAgents() }, 'Refresh');
  app.append(
    h(
      'header',
      { class: 'topbar' },
      h('h1', {}, 'agentd ', h('span', { class: 'muted' }, 'console')),
      h(
        'nav',
        { 'aria-label': 'Links' },
        h(
          'a',
          {
            href: '#/overview',
            onclick: (event: Event) => {
              event.preventDefault();
              void loadAgents().then(showOverview);
            },
          },
          'Overview',
        ),
        h(
          'a',
          {
            href: '#/sponsorship',
            onclick: (event: Event) => {
              event.preventDefault();
              void loadAgents().then(showSponsorship);
            },
          },
          'Gas sponsorship',
        ),
        h('a', { href: '/docs' }, 'API reference'),
      ),
    ),
    h(
      'div',
      { class: 'layout' },
      h(
        'aside',
        { class: 'sidebar', 'aria-label': 'Agents' },
        h('div', { class: 'section-head' }, h('h2', {}, 'Agents'), refresh),
        newButton,
        inboxButton,
        listError.el,
        agentList,
        adminDetails,
      ),
      main,
    ),
    toasts,
  );
  try {
    state.chains = await api.chains();
    noteLocalChains(state.chains);
  } catch (e) {
    notify(`Cannot load the chain registry: ${errorText(e)}`, 'error');
  }
  await loadAgents();
  follow(true);
  // Back, Forward and an address edited by hand: the console shows the screen the address names.
  window.addEventListener('popstate', () => follow(false));
  window.addEventListener('hashchange', () => follow(false));
}

/** Shows the screen the address names (on load, `first`; else after Back, Forward or an edit). */
function follow(first: boolean): void {
  // An address the console gave itself, or the second of the two events one change of address fires.
  if (!first && location.hash === shownHash) return;
  following = true;
  try {
    const r = route();
    if (location.hash === '#/new') showCreate();
    else if (location.hash === '#/approvals') showInbox();
    else if (r.agent && agentView?.id === r.agent && state.selected === r.agent) agentView.show(r.tab);
    else if (r.agent) selectAgent(r.agent, r.tab);
    // A list the console may show is shown as asked; one it cannot (no agent yet on load, the token needed) opens
    // where a first visit does.
    else if (location.hash === '#/overview' && !first && !state.needsAdmin) showOverview();
    else if (location.hash === '#/sponsorship' && !state.needsAdmin) showSponsorship();
    else landing();
  } finally {
    following = false;
  }
  shownHash = location.hash;
}

void start();
