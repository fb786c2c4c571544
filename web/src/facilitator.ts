// The agent's own x402 facilitator (docs/api.md §23), in the Offers tab: an x402 resource server of the user's own,
// built with the official SDKs, points its facilitator client at `<agentd>/api/agents/{id}/x402` with a facilitator
// token in its auth headers, and agentd verifies and settles its payments to this agent's wallet (and no other).
// Tokens are created with the token shown once (the service keeps a hash), listed by prefix with their last use,
// and deleted. Owner authority, like the offers.
import type { AgentDetail } from './api';
import { clear, copyButton, field, h, uid, whenEl } from './dom';
import { offersApi, type CreatedFacilitatorToken, type FacilitatorToken } from './offers-api';
import { errorLine, notify } from './ui';

function tokenShownOnce(created: CreatedFacilitatorToken, onDone: () => void): HTMLElement {
  const input = h('input', { type: 'text', readonly: true, value: created.token, class: 'mono token', spellcheck: 'false' });
  input.addEventListener('focus', () => input.select());
  const headingId = uid('fac-heading');
  const el = h(
    'section',
    { class: 'card token-reveal', 'aria-labelledby': headingId, 'data-testid': 'facilitator-token-reveal' },
    h('h4', { id: headingId }, 'Facilitator token created: save it'),
    h(
      'p',
      { class: 'warning', role: 'alert' },
      h('strong', {}, 'This token is shown only once. '),
      'Put it in your x402 server\u2019s facilitator configuration (its auth headers: Authorization: Bearer <token>). ',
      'The service keeps only a hash of it. It verifies and settles payments to this agent\u2019s wallet only, and opens ',
      'nothing else of the agent; if it is lost, delete it and create another.',
    ),
    field('Facilitator token', input),
    h('div', { class: 'row' }, copyButton(created.token, 'Copy facilitator token')),
    h(
      'div',
      { class: 'row' },
      h(
        'button',
        {
          type: 'button',
          onclick: () => {
            el.remove();
            onDone();
          },
        },
        'I have saved the token',
      ),
    ),
  );
  return el;
}

export function facilitatorSection(agent: AgentDetail, token: string | null): { el: HTMLElement; refresh(): Promise<void> } {
  const heading = uid('facilitator');
  const error = errorLine();
  const reveal = h('div', {});
  const rows = h('tbody', {});
  const table = h(
    'table',
    { class: 'history cards', 'aria-labelledby': heading, 'data-testid': 'facilitator-tokens' },
    h('thead', {}, h('tr', {}, ['Token', 'Created', 'Last used', ''].map((t) => h('th', { scope: 'col' }, t)))),
    rows,
  );
  const none = h('p', { class: 'muted small', hidden: true, 'data-testid': 'facilitator-tokens-empty' }, 'No facilitator token.');
  const create = h('button', { type: 'button', class: 'secondary' }, 'Create a facilitator token');
  const endpoint = `${location.origin}/api/agents/${agent.id}/x402`;

  function row(t: FacilitatorToken): HTMLElement {
    const rowError = errorLine();
    const remove = h('button', { type: 'button', class: 'secondary small danger', 'aria-label': `Delete the facilitator token ${t.prefix}…` }, 'Delete');
    let confirming = false;
    remove.addEventListener('click', async () => {
      if (!confirming) {
        confirming = true;
        remove.textContent = 'Confirm delete';
        remove.setAttribute('aria-label', `Confirm: delete the facilitator token ${t.prefix}…; servers using it can no longer settle`);
        return;
      }
      rowError.clear();
      remove.disabled = true;
      try {
        await offersApi.deleteFacilitatorToken(agent.id, token, t.id);
        notify(`Deleted the facilitator token ${t.prefix}…`);
        await refresh();
      } catch (e) {
        rowError.show(e);
        remove.disabled = false;
      }
    });
    return h(
      'tr',
      { 'data-testid': 'facilitator-token', 'data-token-id': t.id },
      h('td', { 'data-label': 'Token' }, h('code', { class: 'mono' }, `${t.prefix}\u2026`)),
      h('td', { 'data-label': 'Created' }, whenEl(t.created_at)),
      h('td', { 'data-label': 'Last used', 'data-testid': 'facilitator-last-used' }, t.last_used_at ? whenEl(t.last_used_at) : 'never'),
      h('td', {}, remove, rowError.el),
    );
  }

  async function refresh(): Promise<void> {
    error.clear();
    try {
      const tokens = await offersApi.facilitatorTokens(agent.id, token);
      clear(rows);
      for (const t of tokens) rows.append(row(t));
      none.hidden = tokens.length > 0;
      table.hidden = tokens.length === 0;
    } catch (e) {
      clear(rows);
      error.show(e);
    }
  }

  create.addEventListener('click', async () => {
    error.clear();
    create.disabled = true;
    try {
      const created = await offersApi.createFacilitatorToken(agent.id, token);
      clear(reveal);
      const panel = tokenShownOnce(created, () => create.focus());
      reveal.append(panel);
      panel.querySelector('input')?.focus();
      await refresh();
    } catch (e) {
      error.show(e);
    } finally {
      create.disabled = false;
    }
  });

  const el = h(
    'section',
    { class: 'card', 'aria-labelledby': heading, 'data-testid': 'facilitator' },
    h('h3', { id: heading }, 'Your own x402 server: agentd as its facilitator'),
    h(
      'p',
      { class: 'muted small' },
      'An x402 resource server built with the official SDKs sells through this agent when its facilitator URL is ',
      h('code', { class: 'mono', 'data-testid': 'facilitator-url' }, endpoint),
      ' ',
      copyButton(endpoint, 'Copy the facilitator URL'),
      ' and it sends a facilitator token. agentd then verifies and settles payments to this agent\u2019s wallet only ',
      '(any other payTo is refused: agentd is no public facilitator); they appear in History\u2019s income without an offer.',
    ),
    reveal,
    error.el,
    h('div', { class: 'table-wrap' }, table),
    none,
    h('div', { class: 'row' }, create),
  );
  return { el, refresh };
}
