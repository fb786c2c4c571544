// What an x402 payment bought (docs/api.md §16): the resource's answer — its HTTP status, content type and body —
// shown as plain text (never as HTML: the page sets textContent only), pretty-printed when it is JSON, and cut for
// reading with the full text behind a copy button. The chat's pay_http result carries it; History and Approvals
// read it from `GET …/transfers/{id}` (`x402.response`), the only place the service returns it after the fact.
import { copyButton, h } from './dom';

export interface PaidAnswer {
  status?: number | null;
  headers?: Record<string, string> | null;
  body?: string | null;
  /** The service cut the body at X402_MAX_RESPONSE_BYTES. */
  truncated?: boolean | null;
}

/** Characters of the body shown on the page; the rest is copied, not rendered. */
const SHOWN = 2000;

function readable(body: string, type: string): string {
  if (/json/i.test(type) || /^\s*[[{]/.test(body)) {
    try {
      return JSON.stringify(JSON.parse(body), null, 2);
    } catch {
      // not JSON after all: as it came
    }
  }
  return body;
}

/** Whether a tool result or a transfer's `x402.response` looks like a paid answer. */
export function isPaidAnswer(value: unknown): value is PaidAnswer {
  return typeof value === 'object' && value !== null && typeof (value as PaidAnswer).status === 'number' && 'body' in value;
}

export function paidAnswerView(answer: PaidAnswer, title = 'What the payment bought'): HTMLElement {
  const status = answer.status ?? 0;
  const type = answer.headers?.['content-type'] ?? '';
  const body = answer.body ?? '';
  const text = readable(body, type);
  const cut = text.length > SHOWN;
  const ok = status >= 200 && status < 300;
  const facts = [`HTTP ${status}`, type.split(';')[0], `${body.length.toLocaleString()} characters`].filter(Boolean).join(' \u00b7 ');
  return h(
    'section',
    { class: `paid-answer${ok ? '' : ' not-ok'}`, 'data-testid': 'paid-answer', 'data-status': String(status) },
    h('h4', {}, title),
    h('p', { class: 'muted small facts', 'data-testid': 'paid-answer-facts' }, facts),
    ok
      ? null
      : h(
          'p',
          { class: 'warning small' },
          status === 402
            ? 'The resource still asks for payment (402): nothing was bought yet.'
            : `The resource answered HTTP ${status}, not a success: what it sent is below.`,
        ),
    body
      ? h('pre', { class: 'mono small paid-body', 'data-testid': 'paid-answer-body' }, cut ? `${text.slice(0, SHOWN)}\u2026` : text)
      : h('p', { class: 'muted small' }, 'The answer has no body.'),
    cut || answer.truncated
      ? h(
          'p',
          { class: 'muted small' },
          cut ? `The first ${SHOWN.toLocaleString()} of ${text.length.toLocaleString()} characters are shown; Copy takes all of them. ` : '',
          answer.truncated ? 'The service cut the answer at its size limit (X402_MAX_RESPONSE_BYTES), so the end is missing.' : '',
        )
      : null,
    body ? h('div', { class: 'row' }, copyButton(body, 'Copy the answer')) : null,
  );
}
