// The webhooks tab (docs/api.md §19): the agent's endpoints, a form to add one (its signing secret shown once), and
// per endpoint a test event, its delivery attempts with redelivery, enable/disable, secret rotation and deletion.
// Every call, reading included, needs owner authority on a guarded agent (the same authority as the policy editor).
import { api, type AgentDetail, type Delivery, type Webhook, type WebhookWithSecret } from './api';
import { webhookEventTypeValues } from './api-types';
import { authorityText, onAuthorityChange } from './authority';
import { clear, copyButton, field, formatTime, h, shortHex, uid } from './dom';
import { errorLine, notify } from './ui';

export interface WebhooksPanel {
  el: HTMLElement;
  load(): void;
}

/**
 * The event types of §19 an endpoint may subscribe to: the service's own list (its OpenAPI document's
 * `WebhookEventType`, generated into api-types.ts from openapi.json, which a Rust test keeps equal to the server's),
 * so a new event is offered as soon as the server has it; `*` has its own box, and `webhook.test` reaches an endpoint
 * whatever it lists.
 */
export const EVENT_TYPES: EventType[] = webhookEventTypeValues.filter((type) => type !== '*' && type !== 'webhook.test');
type EventType = (typeof webhookEventTypeValues)[number];

const DELIVERY_PAGE = 20;
/** After a test or a redelivery, the attempts are read again this often until the event's attempt shows. */
const POLL_MS = 1000;
const POLL_TRIES = 20;

/** The one-time secret panel: the secret, a copy button, and a clear note that it is never shown again. */
function secretReveal(hook: WebhookWithSecret, title: string, onDone: () => void): HTMLElement {
  const input = h('input', { type: 'text', readonly: true, value: hook.secret, class: 'mono token', spellcheck: 'false' });
  input.addEventListener('focus', () => input.select());
  const headingId = uid('secret-heading');
  const el = h(
    'section',
    { class: 'card token-reveal', 'aria-labelledby': headingId, 'data-testid': 'webhook-secret' },
    h('h3', { id: headingId }, title),
    h(
      'p',
      { class: 'warning', role: 'alert' },
      h('strong', {}, 'This signing secret is shown only once. '),
      'Copy it now into your receiver’s configuration: it verifies each delivery’s webhook-signature header with it ',
      '(any Standard Webhooks library). The service keeps it encrypted and cannot show it again; if it is lost, ',
      'rotate it to get a new one.',
    ),
    field(`Signing secret of ${hook.url}`, input),
    h('div', { class: 'row' }, copyButton(hook.secret, 'Copy signing secret')),
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
        'I have saved the secret',
      ),
    ),
  );
  return el;
}

function eventsText(events: string[]): string {
  return events.includes('*') ? 'all events' : events.join(', ');
}

export function webhooksPanel(agent: AgentDetail, token: string | null): WebhooksPanel {
  const heading = uid('webhooks');
  const error = errorLine();
  const authority = h('p', { class: 'muted small', 'data-testid': 'webhooks-authority' });
  const refreshButton = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
  const list = h('ul', { class: 'webhooks', 'aria-label': 'Webhooks', 'data-testid': 'webhooks' });
  const empty = h('p', { class: 'muted', hidden: true }, 'No webhooks yet.');
  const reveal = h('div', {});

  // ------------------------------------------------------------ add

  const url = h('input', { type: 'url', required: true, autocomplete: 'off', spellcheck: 'false', placeholder: 'https://hooks.example.com/agentd' });
  const description = h('input', { type: 'text', maxlength: 1000, autocomplete: 'off' });
  const allId = uid('all-events');
  const all = h('input', { type: 'checkbox', id: allId, value: '*', checked: true });
  const boxes = EVENT_TYPES.map((type) => h('input', { type: 'checkbox', id: uid('event'), value: type }));
  const syncBoxes = () => boxes.forEach((b) => (b.disabled = all.checked));
  all.addEventListener('change', syncBoxes);
  syncBoxes();
  const events = h(
    'fieldset',
    { class: 'checks' },
    h('legend', {}, 'Events'),
    h('label', { for: allId, class: 'check' }, all, h('span', {}, 'All events (*), those added later included')),
    boxes.map((box) => h('label', { for: box.id, class: 'check' }, box, h('span', { class: 'mono' }, box.value))),
  );
  const addError = errorLine();
  const add = h('button', { type: 'submit' }, 'Add webhook');
  const addHeading = uid('add-webhook');
  const form = h(
    'form',
    { class: 'card', 'aria-labelledby': addHeading, 'data-testid': 'webhook-form' },
    h('h3', { id: addHeading }, 'Add a webhook'),
    h(
      'p',
      { class: 'muted small' },
      'Each event is POSTed to the URL, signed the Standard Webhooks way; anything but a 2xx answer within 10 s is ',
      'retried (5 s, 30 s, 2 min … 12 h). Private and local addresses are refused unless the server allows them.',
    ),
    field('URL', url),
    field('Description (optional)', description),
    events,
    addError.el,
    h('div', { class: 'row' }, add),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    addError.clear();
    const chosen = all.checked ? ['*'] : boxes.filter((b) => b.checked).map((b) => b.value);
    if (!chosen.length) {
      addError.show(new Error('Choose at least one event, or all events.'));
      return;
    }
    add.disabled = true;
    try {
      const created = await api.createWebhook(agent.id, token, {
        url: url.value.trim(),
        // The boxes' values are the service's event types (or `*`).
        events: chosen as EventType[],
        description: description.value.trim() || null,
      });
      notify(`Webhook added: ${created.url}.`);
      url.value = '';
      description.value = '';
      showSecret(created, 'Webhook added: save its signing secret');
      await refresh();
    } catch (e) {
      addError.show(e);
    } finally {
      add.disabled = false;
    }
  });

  function showSecret(hook: WebhookWithSecret, title: string): void {
    clear(reveal);
    const panel = secretReveal(hook, title, () => refreshButton.focus());
    reveal.append(panel);
    panel.querySelector('input')?.focus();
  }

  // ------------------------------------------------------------ one endpoint

  function deliveriesView(hook: Webhook): { el: HTMLElement; show(): Promise<void>; waitFor(eventId: string): void } {
    const rows = h('tbody', {});
    const table = h(
      'table',
      { class: 'history deliveries', 'aria-label': `Deliveries to ${hook.url}`, 'data-testid': 'deliveries' },
      h(
        'thead',
        {},
        h('tr', {}, ['When', 'Event', 'Attempt', 'Status', 'Error', 'Duration', 'Next attempt', ''].map((t) => h('th', { scope: 'col' }, t))),
      ),
      rows,
    );
    const none = h('p', { class: 'muted small', hidden: true }, 'No deliveries yet.');
    const listError = errorLine();
    const reload = h('button', { type: 'button', class: 'secondary small' }, 'Refresh deliveries');
    const older = h('button', { type: 'button', class: 'secondary small', hidden: true }, 'Older deliveries');
    const details = h(
      'details',
      { class: 'deliveries' },
      h('summary', {}, 'Deliveries'),
      h('div', { class: 'row' }, reload),
      listError.el,
      h('div', { class: 'table-wrap' }, table),
      none,
      h('div', { class: 'row' }, older),
    );
    let last: number | null = null;
    let poll: ReturnType<typeof setTimeout> | null = null;

    function row(d: Delivery): HTMLElement {
      const ok = d.status_code != null && d.status_code >= 200 && d.status_code < 300;
      const rowError = errorLine();
      const again = h(
        'button',
        { type: 'button', class: 'secondary small', 'aria-label': `Redeliver ${d.type} ${d.event_id}` },
        'Redeliver',
      );
      again.addEventListener('click', async () => {
        rowError.clear();
        again.disabled = true;
        try {
          await api.redeliver(agent.id, token, hook.id, d.event_id);
          notify(`${d.type} is being delivered again.`);
          waitFor(d.event_id, d.id);
        } catch (e) {
          rowError.show(e);
        } finally {
          again.disabled = false;
        }
      });
      return h(
        'tr',
        {
          'data-testid': 'delivery',
          'data-delivery-id': String(d.id),
          'data-event-id': d.event_id,
          'data-event-type': d.type,
          'data-status-code': d.status_code == null ? '' : String(d.status_code),
        },
        h('td', { class: 'nowrap' }, formatTime(d.at)),
        h('td', {}, h('span', { class: 'mono small' }, d.type), h('div', { class: 'mono small muted', title: d.event_id }, shortHex(d.event_id, 8, 4))),
        h('td', {}, String(d.attempt)),
        h(
          'td',
          {},
          h('span', { class: `status ${ok ? 'status-confirmed' : 'status-reverted'}` }, d.status_code == null ? 'no answer' : String(d.status_code)),
        ),
        h('td', { class: 'small' }, d.error ?? '—'),
        h('td', { class: 'nowrap' }, `${d.duration_ms} ms`),
        h('td', { class: 'nowrap small' }, d.next_attempt_at ? formatTime(d.next_attempt_at) : '—'),
        h('td', {}, again, rowError.el),
      );
    }

    async function page(before: number | null): Promise<Delivery[]> {
      listError.clear();
      reload.disabled = true;
      older.disabled = true;
      try {
        const entries = await api.deliveries(agent.id, token, hook.id, DELIVERY_PAGE, before);
        if (before === null) clear(rows);
        for (const d of entries) rows.append(row(d));
        if (entries.length) last = entries[entries.length - 1].id;
        older.hidden = entries.length < DELIVERY_PAGE;
        none.hidden = rows.childElementCount > 0;
        return entries;
      } catch (e) {
        listError.show(e);
        return [];
      } finally {
        reload.disabled = false;
        older.disabled = false;
      }
    }

    /** Reads the first page again until an attempt of `eventId` newer than `after` shows (or the tries run out). */
    function waitFor(eventId: string, after = 0): void {
      details.open = true;
      if (poll !== null) clearTimeout(poll);
      let tries = 0;
      const tick = async () => {
        poll = null;
        if (!details.isConnected) return;
        const entries = await page(null);
        tries += 1;
        if (entries.some((d) => d.event_id === eventId && d.id > after) || tries >= POLL_TRIES) return;
        poll = setTimeout(() => void tick(), POLL_MS);
      };
      void tick();
    }

    details.addEventListener('toggle', () => {
      if (details.open) void page(null);
    });
    reload.addEventListener('click', () => void page(null));
    older.addEventListener('click', () => void page(last));
    return {
      el: details,
      show: async () => {
        details.open = true;
        await page(null);
      },
      waitFor,
    };
  }

  function item(hook: Webhook): HTMLElement {
    const itemError = errorLine();
    const deliveries = deliveriesView(hook);
    const test = h('button', { type: 'button', class: 'secondary small' }, 'Send test event');
    const toggle = h('button', { type: 'button', class: 'secondary small' }, hook.enabled ? 'Disable' : 'Enable');
    const rotate = h('button', { type: 'button', class: 'secondary small' }, 'Rotate secret');
    const remove = h('button', { type: 'button', class: 'secondary small danger' }, 'Delete');
    for (const [button, verb] of [
      [test, 'Send a test event to'],
      [toggle, hook.enabled ? 'Disable' : 'Enable'],
      [rotate, 'Rotate the secret of'],
      [remove, 'Delete'],
    ] as const) {
      button.setAttribute('aria-label', `${verb} ${hook.url}`);
    }
    let confirming = false;

    async function act(button: HTMLButtonElement, fn: () => Promise<void>): Promise<void> {
      itemError.clear();
      button.disabled = true;
      try {
        await fn();
      } catch (e) {
        itemError.show(e);
      } finally {
        button.disabled = false;
      }
    }

    test.addEventListener('click', () =>
      void act(test, async () => {
        const queued = await api.testWebhook(agent.id, token, hook.id);
        notify(`A webhook.test event is on its way to ${hook.url}.`);
        deliveries.waitFor(queued.event_id);
      }),
    );
    toggle.addEventListener('click', () =>
      void act(toggle, async () => {
        const changed = await api.updateWebhook(agent.id, token, hook.id, { enabled: !hook.enabled });
        notify(changed.enabled ? `Enabled: ${hook.url}.` : `Disabled: ${hook.url} gets no events until it is enabled again.`);
        await refresh();
      }),
    );
    rotate.addEventListener('click', () =>
      void act(rotate, async () => {
        const rotated = await api.rotateWebhookSecret(agent.id, token, hook.id);
        showSecret(rotated, 'New signing secret: save it (the old one no longer signs)');
      }),
    );
    remove.addEventListener('click', () => {
      if (!confirming) {
        confirming = true;
        remove.textContent = 'Confirm delete';
        remove.setAttribute('aria-label', `Confirm: delete ${hook.url} and its delivery log`);
        return;
      }
      void act(remove, async () => {
        await api.deleteWebhook(agent.id, token, hook.id);
        notify(`Deleted: ${hook.url}.`);
        await refresh();
      });
    });

    return h(
      'li',
      { class: 'card webhook', 'data-testid': 'webhook', 'data-webhook-id': hook.id, 'data-enabled': String(hook.enabled) },
      h(
        'div',
        { class: 'section-head' },
        h('code', { class: 'mono', 'data-testid': 'webhook-url' }, hook.url),
        h('span', { class: `status ${hook.enabled ? 'status-confirmed' : 'status-cancelled'}`, 'data-testid': 'webhook-state' }, hook.enabled ? 'enabled' : 'disabled'),
      ),
      hook.description ? h('p', { class: 'description' }, hook.description) : null,
      h('p', { class: 'muted small' }, `Events: ${eventsText(hook.events)} · added ${formatTime(hook.created_at)}`),
      h('div', { class: 'row' }, test, toggle, rotate, remove),
      itemError.el,
      deliveries.el,
    );
  }

  // ------------------------------------------------------------ list

  async function refresh(): Promise<void> {
    error.clear();
    refreshButton.disabled = true;
    try {
      const hooks = await api.webhooks(agent.id, token);
      clear(list);
      for (const hook of hooks) list.append(item(hook));
      empty.hidden = hooks.length > 0;
    } catch (e) {
      clear(list);
      empty.hidden = true;
      error.show(e);
    } finally {
      refreshButton.disabled = false;
    }
  }

  refreshButton.addEventListener('click', () => void refresh());
  const el = h(
    'section',
    { class: 'webhooks-panel', 'aria-labelledby': heading },
    h('div', { class: 'section-head' }, h('h2', { id: heading }, 'Webhooks'), refreshButton),
    h(
      'p',
      { class: 'muted' },
      'Events of this agent (transfers, approvals, policy changes) pushed to your own HTTP endpoints. Reading and ',
      'changing them needs owner authority (Settings → Owner authority).',
    ),
    authority,
    reveal,
    error.el,
    list,
    empty,
    form,
  );
  const showAuthority = () => (authority.textContent = authorityText(agent.id));
  showAuthority();
  // New authority may open what was refused: the list is read again while the tab shows.
  onAuthorityChange(el, () => {
    showAuthority();
    if (!el.closest('[hidden]')) void refresh();
  });

  return {
    el,
    // Each visit of the tab shows what changed since.
    load: () => void refresh(),
  };
}
