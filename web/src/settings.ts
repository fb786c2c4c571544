// The settings tab: edit (PUT), reissue the token (current token or wallet signature), soft delete.
import { api, ApiError, checkAdminToken, type AgentDetail, type Capability, type ChainInfo, type UpdateAgentBody } from './api';
import {
  adminToken,
  authorityText,
  clearOwnerSession,
  isAdminRemembered,
  onAuthorityChange,
  ownerSession,
  setAdminToken,
  setOwnerSession,
} from './authority';
import { field, h, uid } from './dom';
import { getToken } from './tokens';
import { capabilityPicker, chainPicker, errorLine, notify } from './ui';
import { injectedWallet, personalSign, signWithWallet, walletAccount } from './wallet-provider';

export interface SettingsHooks {
  onUpdated(agent: AgentDetail): void;
  onReissued(token: string, owners?: Record<string, string>): void;
  onDeleted(): void;
}

export function editForm(agent: AgentDetail, token: string | null, chains: ChainInfo[], hooks: SettingsHooks): HTMLElement {
  const name = h('input', { type: 'text', required: true, maxlength: 100, value: agent.name, autocomplete: 'off' });
  const description = h('textarea', { rows: 2, maxlength: 1000 }, agent.description ?? '');
  const chainBoxes = chainPicker(chains, agent.chains, 'Chains');
  const caps = capabilityPicker(agent.capabilities);
  const cap = h('input', { type: 'number', min: 0, step: 'any', required: true, value: String(agent.spending_cap) });
  const owners = Object.values(agent.owner_addresses ?? {});
  const owner = h('input', {
    type: 'text',
    class: 'mono',
    placeholder: '0x…',
    value: owners[0] ?? '',
    autocomplete: 'off',
    spellcheck: 'false',
  });
  const error = errorLine();
  const save = h('button', { type: 'submit' }, 'Save changes');
  const heading = uid('edit');
  const form = h(
    'form',
    { class: 'card', 'aria-labelledby': heading },
    h('h2', { id: heading }, 'Agent settings'),
    field('Name', name),
    field('Description', description),
    chainBoxes.el,
    caps.el,
    field('Spending cap (per chain, native units such as ETH)', cap, '0 means the agent cannot spend anything.'),
    field(
      'Owner wallet address (optional)',
      owner,
      'Your own wallet on every chain of the agent: it can sign a challenge to reissue the token. Empty removes it.',
    ),
    error.el,
    h('div', { class: 'row' }, save),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.clear();
    const selectedChains = chainBoxes.value();
    const ownerAddress = owner.value.trim();
    const body: UpdateAgentBody = {
      name: name.value.trim(),
      description: description.value.trim() || null,
      chains: selectedChains,
      // The boxes are the capability names, so their values are capabilities.
      capabilities: caps.value() as Capability[],
      spending_cap: Number(cap.value),
      owner_addresses: ownerAddress ? Object.fromEntries(selectedChains.map((c) => [c, ownerAddress])) : null,
    };
    save.disabled = true;
    try {
      const updated = await api.updateAgent(agent.id, token, body);
      notify('Saved.');
      hooks.onUpdated(updated);
    } catch (e) {
      error.show(e);
    } finally {
      save.disabled = false;
    }
  });
  return form;
}

/** Reissue with a wallet signature: usable without a token (the lost-token case). */
export function walletReissue(
  agent: AgentDetail | { id: string; chains: string[] },
  onReissued: (token: string, owners?: Record<string, string>) => void,
): HTMLElement {
  const error = errorLine();
  const chain = h(
    'select',
    {},
    agent.chains.map((c) => h('option', { value: c }, c)),
  );
  const button = h('button', { type: 'button', class: 'secondary' }, 'Sign with browser wallet');
  const wallet = injectedWallet();
  button.disabled = !wallet;
  button.addEventListener('click', async () => {
    error.clear();
    button.disabled = true;
    let signer = '';
    try {
      const challenge = await api.challenge(agent.id);
      const { address, signature } = await signWithWallet(challenge.message);
      signer = address;
      const result = await api.reissue(agent.id, {
        type: 'wallet_signature',
        chain: chain.value,
        message: challenge.message,
        signature,
        public_key: '',
      });
      onReissued(result.access_token, result.agent.owner_addresses);
    } catch (e) {
      if (e instanceof ApiError && e.code === 'invalid_proof' && signer) {
        error.show(
          new Error(
            `${signer} is neither this agent's wallet nor its owner address on ${chain.value}, or the challenge expired (${e.code}).`,
          ),
        );
      } else error.show(e);
    } finally {
      button.disabled = !wallet;
    }
  });
  return h(
    'div',
    { class: 'wallet-reissue' },
    h(
      'p',
      { class: 'muted small' },
      wallet
        ? 'Your browser wallet signs a one-time challenge (personal_sign). The signing address must be the agent\u2019s wallet or its owner address on the chosen chain.'
        : 'No browser wallet (window.ethereum) was found. Install one, or import the agent\u2019s exported key into it, to reissue with a signature.',
    ),
    h('div', { class: 'inline-form' }, field('Chain of the signing address', chain), button),
    error.el,
  );
}

export function reissueSection(agent: AgentDetail, hooks: SettingsHooks): HTMLElement {
  const error = errorLine();
  const button = h('button', { type: 'button', class: 'secondary' }, 'Reissue with the current token');
  button.addEventListener('click', async () => {
    error.clear();
    const token = getToken(agent.id);
    if (!token) return;
    button.disabled = true;
    try {
      const result = await api.reissue(agent.id, { type: 'current_token', token });
      hooks.onReissued(result.access_token, result.agent.owner_addresses);
    } catch (e) {
      error.show(e);
    } finally {
      button.disabled = false;
    }
  });
  const heading = uid('reissue');
  const held = getToken(agent.id) !== null;
  return h(
    'section',
    { class: 'card', 'aria-labelledby': heading },
    h('h2', { id: heading }, 'Reissue the access token'),
    h('p', { class: 'muted' }, 'A new token replaces the current one at once: the old one stops working everywhere.'),
    held
      ? h('div', { class: 'row' }, button)
      : h('p', { class: 'muted small' }, 'This browser holds no token of this agent (it is opened as its owner): reissue with a wallet signature below.'),
    error.el,
    h('h3', {}, 'With a wallet signature'),
    walletReissue(agent, hooks.onReissued),
  );
}

export function deleteSection(agent: AgentDetail, token: string | null, hooks: SettingsHooks): HTMLElement {
  const error = errorLine();
  const confirmRow = h('div', { class: 'row', hidden: true });
  const start = h('button', { type: 'button', class: 'danger' }, 'Delete agent…');
  const yes = h('button', { type: 'button', class: 'danger' }, `Yes, delete ${agent.name}`);
  const no = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
  confirmRow.append(yes, no);
  start.addEventListener('click', () => {
    confirmRow.hidden = false;
    start.hidden = true;
    yes.focus();
  });
  no.addEventListener('click', () => {
    confirmRow.hidden = true;
    start.hidden = false;
  });
  yes.addEventListener('click', async () => {
    error.clear();
    yes.disabled = true;
    try {
      await api.deleteAgent(agent.id, token);
      notify(`${agent.name} was deleted.`);
      hooks.onDeleted();
    } catch (e) {
      error.show(e);
      yes.disabled = false;
    }
  });
  const heading = uid('delete');
  return h(
    'section',
    { class: 'card danger-zone', 'aria-labelledby': heading },
    h('h2', { id: heading }, 'Delete'),
    h(
      'p',
      { class: 'muted' },
      'Deleting deactivates the agent: its access token stops working, so it can no longer chat, send or pay. Nothing ',
      'is erased: its history, audit log and addresses are kept. Funds stay at its addresses: move them first (Wallet ',
      '\u2192 Send, or Keys and recovery). Afterwards the owner (or the operator) can still, through the API, export its ',
      'key (POST /api/agents/{id}/export-key) or reactivate it (POST /api/agents/{id}/reactivate).',
    ),
    h('div', { class: 'row' }, start),
    confirmRow,
    error.el,
  );
}


/** What to say when the server does not take an admin token. */
export function adminRefusal(verdict: 'wrong' | 'not_configured'): string {
  return verdict === 'wrong'
    ? 'The server refused this admin token (401 unauthorized): it is not the server\u2019s ADMIN_TOKEN. Nothing was saved.'
    : 'This server sets no ADMIN_TOKEN, so there is no admin token to use: every agent without an owner address is open to its own token. Set ADMIN_TOKEN when starting agentd, or give the agent an owner address. Nothing was saved.';
}

/** What "guarded" means (docs/api.md §10), said wherever an agent is called guarded. */
export const GUARDED_MEANING =
  'Guarded: its own token cannot raise its cap, change its policy or export its key; only its owner can (an owner session signed with the owner address, or the admin token).';

/** The note shown on a guarded agent, saying what that means. */
export function guardedNote(): HTMLElement {
  return h('p', { class: 'muted small', role: 'note', 'data-testid': 'guarded-note' }, GUARDED_MEANING);
}

/** The warning shown on an agent whose own token can lift its limits (docs/api.md §10). */
export function unguardedWarning(): HTMLElement {
  return h(
    'p',
    { class: 'warning', role: 'note', 'data-testid': 'unguarded-warning' },
    h('strong', {}, 'This agent is not guarded: '),
    'its own access token can lift its limits (raise the spending cap, add capabilities, change its policy). ',
    'Anyone or anything holding the token, such as the LLM loop that runs the agent, can loosen its guardrails. ',
    'Set ADMIN_TOKEN on the server, or give the agent an owner address in Settings, so that such changes need the owner.',
  );
}

/**
 * Owner authority over the agent: the admin token (Authorization: Bearer), or an owner session opened by signing a
 * Sign-In with Ethereum message with an owner wallet (X-Owner-Token, 15 minutes).
 */
export function ownerSection(agent: AgentDetail): HTMLElement {
  const status = h('p', { class: 'authority-status', 'data-testid': 'authority-status', role: 'status' });
  const owners = agent.owner_addresses ?? {};

  // ----- the admin token
  const adminInput = h('input', {
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    value: adminToken() ?? '',
  });
  const remember = h('input', { type: 'checkbox', id: uid('remember-admin'), checked: adminToken() ? isAdminRemembered() : true });
  const adminForm = h(
    'form',
    { class: 'stack' },
    field('Admin token', adminInput, 'The server\u2019s ADMIN_TOKEN: owner authority over every agent.'),
    h('label', { class: 'check', for: remember.id }, remember, h('span', {}, 'Remember it in this browser (local storage)')),
    h(
      'div',
      { class: 'row' },
      h('button', { type: 'submit', class: 'secondary' }, 'Use admin token'),
      h(
        'button',
        {
          type: 'button',
          class: 'secondary',
          onclick: () => {
            adminInput.value = '';
            setAdminToken(null);
            notify('The admin token was removed from this browser.');
          },
        },
        'Forget admin token',
      ),
    ),
  );
  const adminError = errorLine();
  adminForm.append(adminError.el);
  adminInput.addEventListener('input', () => adminError.clear());
  const adminButton = adminForm.querySelector<HTMLButtonElement>('button[type="submit"]')!;
  adminForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    adminError.clear();
    const value = adminInput.value.trim();
    if (!value) {
      setAdminToken(null);
      notify('Admin token removed.');
      return;
    }
    adminButton.disabled = true;
    try {
      // Checked with the server before the console says it uses it.
      const verdict = await checkAdminToken(value);
      if (verdict === 'valid') {
        setAdminToken(value, remember.checked);
        notify('Admin token checked with the server and saved.');
      } else {
        adminError.show(new Error(adminRefusal(verdict)));
      }
    } catch (e) {
      adminError.show(e);
    } finally {
      adminButton.disabled = false;
    }
  });

  // ----- an owner session token got elsewhere (curl: POST …/owner-session), pasted
  const pasted = h('input', { type: 'password', autocomplete: 'off', spellcheck: 'false', placeholder: 'own_…' });
  const pasteError = errorLine();
  const pasteButton = h('button', { type: 'submit', class: 'secondary' }, 'Use owner token');
  const pasteForm = h(
    'form',
    { class: 'stack', 'data-testid': 'owner-token-form' },
    field(
      'Owner session token',
      pasted,
      'An own_… token answered by POST /api/agents/{id}/owner-session (docs/guide.md): sent as X-Owner-Token, kept for this tab only, good for 15 minutes from when it was opened.',
    ),
    h('div', { class: 'row' }, pasteButton),
    pasteError.el,
  );
  pasteForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    pasteError.clear();
    const value = pasted.value.trim();
    if (!value) return;
    if (!value.startsWith('own_')) {
      pasteError.show(new Error('An owner session token starts with own_. An agent token (agt_…) or the admin token goes elsewhere.'));
      return;
    }
    pasteButton.disabled = true;
    try {
      await api.checkOwnerToken(agent.id, value);
      setOwnerSession(agent.id, {
        token: value,
        expires_at: new Date(Date.now() + 15 * 60_000).toISOString(),
        address: null,
      });
      pasted.value = '';
      notify('Owner session checked with the server: in use for this agent.');
    } catch (e) {
      if (e instanceof ApiError && e.code === 'invalid_owner_token') {
        pasteError.show(new Error('The server does not know this owner token, or it has expired (invalid_owner_token): open a new session and paste it.'));
      } else if (e instanceof ApiError && e.status === 403) {
        pasteError.show(new Error(`This owner token is another agent's session (${e.code}).`));
      } else pasteError.show(e);
    } finally {
      pasteButton.disabled = false;
    }
  });

  // ----- an owner session signed with a wallet
  const ownerChains = agent.chains.filter((c) => owners[c]);
  const chain = h(
    'select',
    {},
    (ownerChains.length ? ownerChains : agent.chains).map((c) => h('option', { value: c }, c)),
  );
  const signIn = h('button', { type: 'button', class: 'secondary' }, 'Sign in with browser wallet');
  const signOut = h('button', { type: 'button', class: 'secondary' }, 'Sign out');
  const error = errorLine();
  const wallet = injectedWallet();
  signIn.disabled = !wallet;
  signIn.addEventListener('click', async () => {
    error.clear();
    signIn.disabled = true;
    let signer = '';
    try {
      signer = await walletAccount();
      const challenge = await api.ownerChallenge(agent.id, chain.value, signer);
      const signature = await personalSign(challenge.message, signer);
      const session = await api.ownerSession(agent.id, { chain: chain.value, message: challenge.message, signature });
      setOwnerSession(agent.id, { token: session.owner_token, expires_at: session.expires_at, address: signer });
      notify('Signed in as owner for 15 minutes.');
    } catch (e) {
      if (e instanceof ApiError && e.code === 'invalid_proof' && signer) {
        error.show(new Error(`${signer} is not an owner address of this agent on ${chain.value} (${e.code}).`));
      } else error.show(e);
    } finally {
      signIn.disabled = !wallet;
    }
  });
  signOut.addEventListener('click', () => {
    clearOwnerSession(agent.id);
    notify('Signed out: the owner session is no longer used by this tab.');
  });

  function render(): void {
    status.textContent = authorityText(agent.id);
    signOut.hidden = ownerSession(agent.id) === null;
  }
  render();
  const heading = uid('owner');
  const el = h(
    'section',
    { class: 'card', 'aria-labelledby': heading, 'data-testid': 'owner-authority' },
    h('h2', { id: heading }, 'Owner authority'),
    agent.guarded
      ? h(
          'p',
          { class: 'muted' },
          'This agent is guarded: with its own token alone it cannot raise its cap, add capabilities or chains, ',
          'change owners or its policy, export its key or approve transfers. Those need the admin token or an owner session.',
        )
      : h(
          'p',
          { class: 'warning' },
          'This agent is not guarded: its own token may change everything here, including its limits. Enter an ',
          'admin token only if the server sets ADMIN_TOKEN; set an owner address above to guard the agent.',
        ),
    status,
    h('h3', {}, 'Admin token'),
    adminForm,
    h('h3', {}, 'Sign in as owner'),
    h(
      'p',
      { class: 'muted small' },
      ownerChains.length
        ? `Your wallet signs a Sign-In with Ethereum message (personal_sign); the session lasts 15 minutes and is kept for this tab only. Owner: ${Object.values(owners)[0]}.`
        : 'This agent has no owner address yet: set one in the agent settings above, then sign in with that wallet.',
      wallet ? '' : ' No browser wallet (window.ethereum) was found.',
    ),
    h('div', { class: 'inline-form' }, field('Chain of the owner address', chain), signIn, signOut),
    error.el,
    h('h3', {}, 'Paste an owner session token'),
    h(
      'p',
      { class: 'muted small' },
      'Without a browser wallet: sign the challenge of GET /api/agents/',
      agent.id,
      '/owner-challenge with the owner key elsewhere (cast wallet sign, a hardware wallet), open the session with POST …/owner-session, and paste its owner_token here.',
    ),
    pasteForm,
  );
  onAuthorityChange(el, render);
  return el;
}
