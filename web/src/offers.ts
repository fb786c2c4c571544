// The Offers tab (docs/api.md §23): what the agent sells over x402 and agentd settles. Each offer with its price,
// where buyers pay (its `url`, with a link to try it: without a payment it answers 402 and what to pay), how it is
// settled, what its settlements may cost in gas a day, what it has earned, and Close; a form to offer a resource (an
// upstream URL the agent fronts, or a body agentd stores); and the agent's facilitator tokens, for an x402 server of
// the user's own that settles through agentd (created with the token shown once, listed, deleted). Offers and tokens
// need owner authority (the agent token alone on an unguarded agent), like the policy.
import type { AgentDetail, ChainInfo } from './api';
import { addDecimal, roundAmount } from './amount';
import { authorityText, onAuthorityChange } from './authority';
import { clear, copyButton, field, formatTime, h, shortHex, uid } from './dom';
import { facilitatorSection } from './facilitator';
import { offersApi, readIncome, type ForwardPart, type Income, type NewOfferBody, type Offer } from './offers-api';
import { errorLine, notify } from './ui';

export interface OffersPanel {
  el: HTMLElement;
  load(): void;
}

const SETTLE_WORDS: Record<string, string> = {
  on_success: 'settled only once the resource answered 2xx (nothing charged for a failed fetch)',
  before_serving: 'settled first, then served (the buyer pays for the attempt: paymentFlow "upfront")',
};

function forwardText(forward: Offer['forward']): string {
  const parts = Array.isArray(forward) ? forward : forward ? [forward] : [];
  return parts.length ? `the buyer\u2019s ${parts.join(' and ')} reach the upstream` : 'nothing of the buyer\u2019s request reaches the upstream';
}

function resourceText(offer: Offer): string | null {
  const r = offer.resource;
  if (!r) return null;
  if (r.kind === 'content') return `a stored body (${r.mime_type ?? 'text/plain'})`;
  if (r.url) return `fronts ${r.method ?? 'GET'} ${r.url}${r.mime_type ? ` (${r.mime_type})` : ''}${r.headers ? ', with headers of its own' : ''}`;
  return null;
}

/**
 * What a buyer without a payment gets from the offer's URL (asked on this console's own origin, the same service):
 * the status and the decoded `PAYMENT-REQUIRED` terms, in words and as sent.
 */
async function buyerView(offer: Offer): Promise<HTMLElement> {
  let path = offer.url;
  try {
    path = new URL(offer.url).pathname;
  } catch {
    // keep the URL as it is
  }
  const answer = await fetch(path, { headers: { Accept: 'application/json' }, cache: 'no-store' });
  const header = answer.headers.get('PAYMENT-REQUIRED');
  let terms: { x402Version?: number; resource?: { description?: string; mimeType?: string }; accepts?: Record<string, unknown>[] } | null = null;
  try {
    terms = header ? JSON.parse(atob(header)) : null;
  } catch {
    terms = null;
  }
  const entry = terms?.accepts?.[0] ?? null;
  const extra = (entry?.extra ?? {}) as Record<string, unknown>;
  return h(
    'div',
    { class: 'offer-probe', 'data-testid': 'offer-probe', 'data-status': String(answer.status) },
    h('p', { 'data-testid': 'offer-probe-status' }, `HTTP ${answer.status}${answer.status === 402 ? ' Payment Required: nothing is served without a payment' : ''}`),
    entry
      ? h(
          'p',
          { class: 'small', 'data-testid': 'offer-probe-terms' },
          `x402 v${terms?.x402Version ?? '?'}, scheme ${String(entry.scheme)} on ${String(entry.network)}: pay ${String(entry.amount)} base units `,
          `(${offer.price} ${offer.asset}) of the token `,
          h('code', { class: 'mono' }, String(entry.asset)),
          ` (EIP-712 domain ${String(extra.name ?? '?')} version ${String(extra.version ?? '?')}) to `,
          h('code', { class: 'mono' }, String(entry.payTo)),
          `, with an authorization valid for at most ${String(entry.maxTimeoutSeconds)} s`,
          extra.paymentFlow ? ` (payment flow: ${String(extra.paymentFlow)})` : '',
          terms?.resource?.mimeType ? `; it serves ${terms.resource.mimeType}` : '',
          '.',
        )
      : h('p', { class: 'small' }, 'No PAYMENT-REQUIRED header in the answer.'),
    header ? h('details', {}, h('summary', { class: 'small' }, 'PAYMENT-REQUIRED as sent (decoded)'), h('pre', { class: 'mono small' }, JSON.stringify(terms, null, 2))) : null,
  );
}

/** Settled income per offer: amount summed and how many payments. */
function earnedByOffer(income: Income[]): Map<string, { amount: string; count: number }> {
  const earned = new Map<string, { amount: string; count: number }>();
  for (const i of income) {
    if (i.status !== 'settled' || !i.offer_id) continue;
    const e = earned.get(i.offer_id) ?? { amount: '0', count: 0 };
    earned.set(i.offer_id, { amount: addDecimal(e.amount, i.amount) ?? e.amount, count: e.count + 1 });
  }
  return earned;
}

export function offersPanel(agent: AgentDetail, token: string | null, chains: ChainInfo[]): OffersPanel {
  const heading = uid('offers');
  const error = errorLine();
  const authority = h('p', { class: 'muted small', 'data-testid': 'offers-authority' });
  const refreshButton = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
  const list = h('ul', { class: 'offers', 'aria-label': 'Offers', 'data-testid': 'offers' });
  const empty = h('p', { class: 'muted', hidden: true, 'data-testid': 'offers-empty' }, 'No offers yet: the agent sells nothing.');
  const created = h('div', {});
  const nativeOf = (chain: string) => chains.find((c) => c.name === chain)?.native_symbol ?? '';

  // ------------------------------------------------------------ one offer

  function item(offer: Offer, earned: { amount: string; count: number } | undefined): HTMLElement {
    const itemError = errorLine();
    const active = offer.status === 'active';
    const close = h(
      'button',
      { type: 'button', class: 'secondary small danger', 'aria-label': `Close the offer ${offer.description}` },
      'Close',
    );
    let confirming = false;
    close.addEventListener('click', async () => {
      if (!confirming) {
        confirming = true;
        close.textContent = 'Confirm close';
        close.setAttribute('aria-label', `Confirm: close the offer ${offer.description}; its URL then answers 404`);
        return;
      }
      itemError.clear();
      close.disabled = true;
      try {
        await offersApi.closeOffer(agent.id, token, offer.id);
        notify(`Closed: ${offer.description}. Its URL now answers 404.`);
        await refresh();
      } catch (e) {
        itemError.show(e);
        close.disabled = false;
      }
    });
    const resource = resourceText(offer);
    const probeSlot = h('div', {});
    const probeButton = h('button', { type: 'button', class: 'secondary small', 'aria-expanded': 'false' }, 'What a buyer sees');
    probeButton.addEventListener('click', async () => {
      if (probeSlot.childElementCount) {
        clear(probeSlot);
        probeButton.setAttribute('aria-expanded', 'false');
        return;
      }
      itemError.clear();
      probeButton.disabled = true;
      try {
        probeSlot.append(await buyerView(offer));
        probeButton.setAttribute('aria-expanded', 'true');
      } catch (e) {
        itemError.show(e);
      } finally {
        probeButton.disabled = false;
      }
    });
    return h(
      'li',
      { class: 'card offer', 'data-testid': 'offer', 'data-offer-id': offer.id, 'data-status': offer.status },
      h(
        'div',
        { class: 'section-head' },
        h('strong', { 'data-testid': 'offer-description' }, offer.description),
        h(
          'span',
          {
            class: `status ${active ? 'status-confirmed' : offer.status === 'closed' ? 'status-cancelled' : `status-${offer.status}`}`,
            'data-testid': 'offer-status',
            title:
              offer.status === 'awaiting_approval'
                ? "Made by the agent's tool: it sells nothing until its owner approves it in Approvals."
                : '',
          },
          offer.status.replace('_', ' '),
        ),
      ),
      h(
        'p',
        { 'data-testid': 'offer-price' },
        h('strong', {}, `${offer.price} ${offer.asset}`),
        ` a request on ${offer.chain}, paid to the agent\u2019s wallet `,
        h('code', { class: 'mono', title: offer.pay_to }, shortHex(offer.pay_to, 6, 4)),
      ),
      active
        ? h(
            'p',
            { class: 'offer-url' },
            'Buyers pay at ',
            h('code', { class: 'mono', 'data-testid': 'offer-url' }, offer.url),
            ' ',
            copyButton(offer.url, `Copy the URL of ${offer.description}`),
            ' ',
            h(
              'a',
              { href: offer.url, target: '_blank', rel: 'noopener noreferrer', class: 'button-link', 'data-testid': 'offer-try' },
              'Try it',
            ),
            ' ',
            probeButton,
          )
        : null,
      probeSlot,
      active
        ? h(
            'p',
            { class: 'muted small' },
            'Try it opens the URL as a browser does, without a payment: it answers 402, the terms in its PAYMENT-REQUIRED header, which What a buyer sees decodes. Any x402 v2 client pays it, another agent with pay_http too.',
          )
        : null,
      h(
        'p',
        { class: 'muted small', 'data-testid': 'offer-facts' },
        resource ? `${resource} · ` : '',
        `${SETTLE_WORDS[offer.settle] ?? offer.settle} · ${forwardText(offer.forward)} · settlements may cost up to ${offer.gas_per_day} ${nativeOf(offer.chain)} of gas a day · authorizations valid up to ${offer.max_timeout_seconds} s · created ${formatTime(offer.created_at)}`,
      ),
      h(
        'p',
        { class: 'small', 'data-testid': 'offer-earned' },
        earned ? `Earned ${roundAmount(earned.amount)} ${offer.asset} from ${earned.count} payment${earned.count === 1 ? '' : 's'}` : 'Nothing earned yet',
      ),
      active ? h('div', { class: 'row' }, close) : null,
      itemError.el,
    );
  }

  // ------------------------------------------------------------ new offer

  const chain = h('select', { required: true }, agent.chains.map((c) => h('option', { value: c }, c)));
  const asset = h('select', { required: true });
  const gasUnit = h('span', {});
  const fillAssets = () => {
    clear(asset);
    const info = chains.find((c) => c.name === chain.value);
    for (const t of info?.tokens ?? []) asset.append(h('option', { value: t.symbol, selected: t.symbol === 'USDC' ? true : null }, t.symbol));
    gasUnit.textContent = info?.native_symbol ?? '';
  };
  chain.addEventListener('change', fillAssets);
  fillAssets();
  const price = h('input', { type: 'text', inputmode: 'decimal', required: true, placeholder: '0.01', autocomplete: 'off', pattern: '\\d+(\\.\\d+)?' });
  const description = h('input', { type: 'text', required: true, maxlength: 1000, autocomplete: 'off', placeholder: 'A daily market report' });
  const kindUrl = h('input', { type: 'radio', name: uid('kind'), id: uid('kind-url'), value: 'url' });
  const kindContent = h('input', { type: 'radio', name: kindUrl.name, id: uid('kind-content'), value: 'content', checked: true });
  const url = h('input', { type: 'url', autocomplete: 'off', spellcheck: 'false', placeholder: 'https://api.example.com/report' });
  const method = h('select', {}, ['GET', 'HEAD', 'POST'].map((m) => h('option', { value: m }, m)));
  const mime = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'application/json' });
  const upstreamHeaders = h('textarea', { rows: 2, spellcheck: 'false', class: 'mono', placeholder: 'Authorization: Bearer …' });
  const content = h('textarea', { rows: 4, spellcheck: 'false' });
  const contentType = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', value: 'text/plain' });
  const urlFields = h(
    'div',
    { class: 'stack', 'data-testid': 'offer-url-fields' },
    field('Upstream URL', url, 'Fetched by agentd with the address checked (private and local addresses only with OFFER_ALLOW_PRIVATE, in development); no redirect followed.'),
    field('Method', method),
    field('Content type advertised (optional)', mime),
    field('Headers sent to the upstream (optional, one "Name: value" a line)', upstreamHeaders, 'Kept encrypted and never shown again: the upstream\u2019s API key goes here.'),
  );
  const contentFields = h(
    'div',
    { class: 'stack', 'data-testid': 'offer-content-fields' },
    field('Content', content, 'Stored by agentd and served to each buyer who paid.'),
    field('Content type', contentType),
  );
  const settle = h(
    'select',
    {},
    h('option', { value: 'on_success' }, 'On success: settle once the resource answered 2xx'),
    h('option', { value: 'before_serving' }, 'Before serving: settle first, the buyer pays for the attempt'),
  );
  const forwardQuery = h('input', { type: 'checkbox', id: uid('fwd-query'), value: 'query' });
  const forwardBody = h('input', { type: 'checkbox', id: uid('fwd-body'), value: 'body' });
  const forward = h(
    'fieldset',
    { class: 'checks' },
    h('legend', {}, 'What of the buyer\u2019s request reaches the upstream'),
    h('label', { class: 'check', for: forwardQuery.id }, forwardQuery, h('span', {}, 'its query')),
    h('label', { class: 'check', for: forwardBody.id }, forwardBody, h('span', {}, 'its body')),
  );
  const gasPerDay = h('input', { type: 'text', inputmode: 'decimal', required: true, value: '0.01', autocomplete: 'off', pattern: '\\d+(\\.\\d+)?' });
  const timeout = h('input', { type: 'number', min: 60, max: 3600, step: 1, value: '300' });
  const showKind = () => {
    const isUrl = kindUrl.checked;
    urlFields.hidden = !isUrl;
    contentFields.hidden = isUrl;
    forward.hidden = !isUrl;
    url.required = isUrl;
    content.required = !isUrl;
  };
  // The service's rules (§23): `on_success` only for GET and HEAD, and the buyer's body only to a POST upstream.
  const fitMethod = () => {
    const post = method.value === 'POST';
    if (post) settle.value = 'before_serving';
    (settle.querySelector('option[value="on_success"]') as HTMLOptionElement).disabled = post;
    forwardBody.disabled = !post;
    if (!post) forwardBody.checked = false;
  };
  method.addEventListener('change', fitMethod);
  fitMethod();
  kindUrl.addEventListener('change', showKind);
  kindContent.addEventListener('change', showKind);
  showKind();
  const formError = errorLine();
  const submit = h('button', { type: 'submit' }, 'Create offer');
  const formHeading = uid('new-offer');
  const form = h(
    'form',
    { class: 'card', 'aria-labelledby': formHeading, 'data-testid': 'offer-form' },
    h('h3', { id: formHeading }, 'Sell something'),
    h(
      'p',
      { class: 'muted small' },
      'Buyers pay the agent\u2019s wallet with an EIP-3009 authorization (the token must support it, as USDC does); agentd checks it, ',
      'settles it on chain from the agent\u2019s wallet, serves the resource and records the income. The settlement\u2019s gas is ',
      'the agent\u2019s wallet\u2019s (it counts against the spending cap), or, where the operator sponsors the agent\u2019s gas and its ',
      'address is a smart account already, the sponsorship\u2019s; the offer\u2019s gas a day bounds it either way.',
    ),
    h('div', { class: 'row' }, field('Chain', chain), field('Asset', asset), field('Price (whole units)', price)),
    field('Description (shown to buyers in the 402)', description),
    h(
      'fieldset',
      { class: 'checks' },
      h('legend', {}, 'What it sells'),
      h('label', { class: 'check', for: kindContent.id }, kindContent, h('span', {}, 'A body agentd stores')),
      h('label', { class: 'check', for: kindUrl.id }, kindUrl, h('span', {}, 'An upstream URL the agent fronts')),
    ),
    contentFields,
    urlFields,
    forward,
    field('Settlement', settle),
    h(
      'div',
      { class: 'row' },
      field('Gas a day for its settlements', gasPerDay, 'In the chain\u2019s native coin, over a rolling 24 h; beyond it the offer answers offer_paused.'),
      gasUnit,
      field('Authorization valid for (seconds)', timeout, '60 to 3600.'),
    ),
    formError.el,
    h('div', { class: 'row' }, submit),
  );

  function headersOf(text: string): Record<string, string> | null {
    const result: Record<string, string> = {};
    for (const line of text.split('\n').map((l) => l.trim()).filter(Boolean)) {
      const at = line.indexOf(':');
      if (at <= 0) return null;
      result[line.slice(0, at).trim()] = line.slice(at + 1).trim();
    }
    return result;
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    formError.clear();
    let resource: NewOfferBody['resource'];
    const forwarded: ForwardPart[] = [];
    if (kindUrl.checked) {
      const headers = headersOf(upstreamHeaders.value);
      if (headers === null) {
        formError.show(new Error('Write each upstream header as "Name: value", one a line.'));
        return;
      }
      resource = {
        url: url.value.trim(),
        method: method.value as 'GET' | 'HEAD' | 'POST',
        ...(Object.keys(headers).length ? { headers } : {}),
        ...(mime.value.trim() ? { mime_type: mime.value.trim() } : {}),
      };
      if (forwardQuery.checked) forwarded.push('query');
      if (forwardBody.checked) forwarded.push('body');
    } else {
      resource = { content: content.value, content_type: contentType.value.trim() || 'text/plain' };
    }
    const body: NewOfferBody = {
      chain: chain.value,
      asset: asset.value,
      price: price.value.trim(),
      description: description.value.trim(),
      resource,
      settle: settle.value as NewOfferBody['settle'],
      forward: forwarded,
      gas_per_day: gasPerDay.value.trim(),
      max_timeout_seconds: Number(timeout.value) || 300,
    };
    submit.disabled = true;
    try {
      const offer = await offersApi.createOffer(agent.id, token, body);
      notify(`Offered: ${offer.description}, ${offer.price} ${offer.asset}.`);
      price.value = '';
      description.value = '';
      content.value = '';
      upstreamHeaders.value = '';
      clear(created);
      created.append(
        h(
          'p',
          { class: 'notice', role: 'status', 'data-testid': 'offer-created' },
          `On sale: ${offer.description}. Buyers pay ${offer.price} ${offer.asset} at `,
          h('code', { class: 'mono' }, offer.url),
          '.',
        ),
      );
      await refresh();
    } catch (e) {
      formError.show(e);
    } finally {
      submit.disabled = false;
    }
  });

  // ------------------------------------------------------------ list

  async function refresh(): Promise<void> {
    error.clear();
    refreshButton.disabled = true;
    try {
      const [offers, income] = await Promise.all([
        offersApi.offers(agent.id, token),
        readIncome(agent.id, token, 2).catch(() => ({ income: [] as Income[], complete: false })),
      ]);
      const earned = earnedByOffer(income.income);
      clear(list);
      // Active offers first, newest first within each.
      const sorted = [...offers].sort((a, b) => (a.status === 'active' ? 0 : 1) - (b.status === 'active' ? 0 : 1) || b.created_at.localeCompare(a.created_at));
      for (const offer of sorted) list.append(item(offer, earned.get(offer.id)));
      empty.hidden = offers.length > 0;
    } catch (e) {
      clear(list);
      empty.hidden = true;
      error.show(e);
    } finally {
      refreshButton.disabled = false;
    }
  }

  const facilitator = facilitatorSection(agent, token);
  refreshButton.addEventListener('click', () => {
    void refresh();
    void facilitator.refresh();
  });
  const el = h(
    'section',
    { class: 'offers-panel', 'aria-labelledby': heading },
    h('div', { class: 'section-head' }, h('h2', { id: heading }, 'Offers'), refreshButton),
    h(
      'p',
      { class: 'muted' },
      'What this agent sells over x402: each offer has a URL any x402 client pays, in the agent\u2019s wallet. ',
      'What it earned is in History, beside what it spent.',
    ),
    authority,
    error.el,
    created,
    list,
    empty,
    form,
    facilitator.el,
  );
  const showAuthority = () => (authority.textContent = authorityText(agent.id));
  showAuthority();
  onAuthorityChange(el, () => {
    showAuthority();
    if (!el.closest('[hidden]')) {
      void refresh();
      void facilitator.refresh();
    }
  });
  return {
    el,
    load: () => {
      void refresh();
      void facilitator.refresh();
    },
  };
}
