// The Wallet tab's key export (docs/api.md §4, §10, §20) and sweep. Export answers the agent's private key: on a
// guarded agent it needs owner authority (admin token or owner session), on an unguarded one the agent's token is
// enough; it is audited. An agent whose key is in a hardware security module (KEY_BACKEND=pkcs11) refuses with 403
// `key_not_exportable`: its owner sweeps the funds instead (`POST …/sweep`, owner authority only, to an owner
// address, or any address with the admin token).
import { api, ApiError, type AgentDetail, type ChainInfo } from './api';
import { authorityText, onAuthorityChange, ownerCredential, ownerSession } from './authority';
import { clear, copyButton, field, h, uid } from './dom';
import { errorLine, errorText, notify } from './ui';

function credentialText(agent: AgentDetail): string {
  if (!agent.guarded) {
    return 'This agent is not guarded: its own access token is enough to export its key (the console sends it). Anyone holding that token can do the same.';
  }
  const held = ownerCredential(agent.id) ? authorityText(agent.id) : 'The console holds no owner authority for this agent yet.';
  return `This agent is guarded: export needs owner authority, the admin token or an owner session (Settings → Owner authority); its own token alone is refused (owner_required). ${held}`;
}

export function keysPanel(agent: AgentDetail, token: string | null, chains: ChainInfo[], onSwept: () => void): HTMLElement {
  const chain = h('select', {}, agent.chains.map((c) => h('option', { value: c }, c)));
  const understood = h('input', { type: 'checkbox', id: uid('understood') });
  const exportButton = h('button', { type: 'submit', class: 'danger' }, 'Export private key');
  const credential = h('p', { class: 'authority-status', 'data-testid': 'export-credential' });
  const error = errorLine();
  const output = h('div', { 'data-testid': 'export-result', hidden: true });
  const hsm = h('div', { class: 'warning', 'data-testid': 'export-hsm', hidden: true, role: 'note' });
  const sweep = sweepForm(agent, token, chains, onSwept);

  const render = () => {
    credential.textContent = credentialText(agent);
  };
  render();

  const form = h(
    'form',
    { class: 'stack' },
    field('Chain of the wallet', chain, 'EVM chains share one key: the key of one is the key of all.'),
    h(
      'label',
      { class: 'check', for: understood.id },
      understood,
      h('span', {}, 'I understand that whoever holds this key can move everything in these wallets, beyond the cap and the policy.'),
    ),
    h('div', { class: 'row' }, exportButton),
    error.el,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.clear();
    hsm.hidden = true;
    if (!understood.checked) {
      error.show(new Error('Tick the box first: the key is shown once here and is then out of the service\u2019s guardrails.'));
      return;
    }
    exportButton.disabled = true;
    try {
      const key = await api.exportKey(agent.id, token, { chain: chain.value, confirm: true });
      showKey(key.chain, key.address, key.private_key);
    } catch (e) {
      if (e instanceof ApiError && e.code === 'key_not_exportable') {
        clear(hsm);
        hsm.append(
          h('strong', {}, 'This agent\u2019s key cannot be exported (key_not_exportable). '),
          'It was generated inside a hardware security module (the server runs with KEY_BACKEND=pkcs11) and never leaves it: ',
          'that is the point of such a key. To move its funds, sweep them to your owner address below ',
          '(owner authority; the whole balance of one asset, the fee taken from the native coin).',
        );
        hsm.hidden = false;
        sweep.open = true;
      } else if (e instanceof ApiError && e.code === 'export_disabled') {
        error.show(new Error(`${errorText(e)} The server sets ALLOW_KEY_EXPORT=false: sweep the funds to an owner address instead (below).`));
        sweep.open = true;
      } else error.show(e);
    } finally {
      exportButton.disabled = false;
    }
  });

  function showKey(c: string, address: string, privateKey: string): void {
    clear(output);
    output.hidden = false;
    const input = h('input', { type: 'password', readonly: true, value: privateKey, class: 'mono', spellcheck: 'false', autocomplete: 'off' });
    const show = h('button', { type: 'button', class: 'secondary small' }, 'Show');
    show.addEventListener('click', () => {
      input.type = input.type === 'password' ? 'text' : 'password';
      show.textContent = input.type === 'password' ? 'Show' : 'Hide';
    });
    const done = h('button', { type: 'button', class: 'secondary' }, 'Done: remove it from the page');
    done.addEventListener('click', () => {
      clear(output);
      output.hidden = true;
      understood.checked = false;
      notify('The key was removed from the page.');
    });
    output.append(
      h(
        'p',
        { class: 'warning', role: 'alert' },
        h('strong', {}, `The private key of ${address} (${c}). `),
        'The export is recorded in the audit log. Keep it in a password manager or import it into a wallet you control; ',
        'never paste it into a chat, an agent or a ticket. Anyone who has it can move these funds on every EVM chain, ',
        'whatever the cap and the policy say.',
      ),
      field('Private key', input),
      h('div', { class: 'row' }, show, copyButton(privateKey, 'Copy private key'), done),
    );
  }

  const heading = uid('keys');
  const el = h(
    'section',
    { class: 'card keys', 'aria-labelledby': heading, 'data-testid': 'keys-card' },
    h('h2', { id: heading }, 'Keys and recovery'),
    h(
      'p',
      { class: 'muted' },
      'Export the wallet\u2019s private key to move its funds with a wallet of your own, or to sign a token reissue with the agent\u2019s own address. ',
      'Once exported, the key is outside the service: its spending cap, policy and approvals no longer bind whoever holds it.',
    ),
    credential,
    form,
    hsm,
    output,
    sweep,
  );
  onAuthorityChange(el, render);
  return el;
}

/** Sweep: the whole balance of one asset to an owner address (owner authority). */
function sweepForm(agent: AgentDetail, token: string | null, chains: ChainInfo[], onSwept: () => void): HTMLDetailsElement {
  const known = chains.filter((c) => agent.chains.includes(c.name));
  const chain = h('select', {}, known.map((c) => h('option', { value: c.name }, c.name)));
  const asset = h('select', {});
  const owners = agent.owner_addresses ?? {};
  const to = h('input', { type: 'text', class: 'mono', placeholder: '0x…', autocomplete: 'off', spellcheck: 'false' });
  const fill = () => {
    const info = known.find((c) => c.name === chain.value);
    clear(asset);
    if (info) {
      asset.append(h('option', { value: info.native_symbol }, `${info.native_symbol} (native coin, less the fee)`));
      for (const t of info.tokens ?? []) asset.append(h('option', { value: t.symbol }, t.symbol));
    }
    if (!to.value || Object.values(owners).includes(to.value)) to.value = owners[chain.value] ?? '';
  };
  chain.addEventListener('change', fill);
  fill();
  const error = errorLine();
  const outcome = h('p', { role: 'status', 'data-testid': 'sweep-result' });
  const start = h('button', { type: 'submit', class: 'secondary' }, 'Sweep…');
  const confirmRow = h('div', { class: 'row', hidden: true });
  const form = h(
    'form',
    { class: 'stack' },
    h('div', { class: 'inline-form' }, field('Chain', chain), field('Asset', asset)),
    field(
      'To',
      to,
      'One of the agent\u2019s owner addresses with an owner session; any address with the admin token.',
    ),
    h('div', { class: 'row' }, start),
    confirmRow,
    error.el,
    outcome,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    error.clear();
    outcome.textContent = '';
    const recipient = to.value.trim();
    if (!/^0x[0-9a-fA-F]{40}$/.test(recipient)) {
      error.show(new Error('The recipient must be a 0x address of 40 hex digits.'));
      return;
    }
    if (!ownerCredential(agent.id)) {
      error.show(new Error('Sweeping needs owner authority: enter the admin token or sign in as owner (Settings → Owner authority).'));
      return;
    }
    clear(confirmRow);
    const yes = h('button', { type: 'button', class: 'danger' }, `Yes, sweep all ${asset.value} on ${chain.value} to ${recipient.slice(0, 8)}…`);
    const no = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
    no.addEventListener('click', () => {
      confirmRow.hidden = true;
      start.hidden = false;
    });
    yes.addEventListener('click', async () => {
      yes.disabled = true;
      try {
        const transfer = await api.sweep(agent.id, token, { chain: chain.value, to: recipient, asset: asset.value });
        outcome.textContent = `Swept ${transfer.amount} ${transfer.asset} to ${transfer.to}: ${transfer.status}${transfer.tx_hash ? `, transaction ${transfer.tx_hash}` : ''}.`;
        onSwept();
      } catch (e) {
        error.show(e);
      } finally {
        confirmRow.hidden = true;
        start.hidden = false;
      }
    });
    confirmRow.append(yes, no);
    confirmRow.hidden = false;
    start.hidden = true;
    yes.focus();
  });
  const session = ownerSession(agent.id);
  return h(
    'details',
    { class: 'sweep', 'data-testid': 'sweep' },
    h('summary', {}, 'Sweep the whole balance to the owner'),
    h(
      'p',
      { class: 'muted small' },
      'Works with any key backend, also on a deleted agent, and is exempt from the cap and the policy (they guard the agent, not its owner). ',
      session ? `Owner session: ${session.address ?? 'pasted token'}.` : '',
    ),
    form,
  );
}
