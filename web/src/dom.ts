// A tiny DOM builder: text always goes in as text nodes, never as HTML.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === 'class') {
      el.className = String(value);
    } else if (key === 'value' && 'value' in el) {
      (el as HTMLInputElement).value = String(value);
    } else if (key === 'checked' && 'checked' in el) {
      (el as HTMLInputElement).checked = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, ...children);
  return el;
}

export function append(parent: Node, ...children: (Child | Child[])[]): void {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

export function clear(el: Element): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

let nextId = 0;
/** A unique element id, for label/for pairs. */
export function uid(prefix: string): string {
  nextId += 1;
  return `${prefix}-${nextId}`;
}

/** A table cell with its column's name, which a narrow page shows beside the value (tables with class `cards`). */
export function cell(label: string, attrs: Record<string, string>, ...children: (Child | Child[])[]): HTMLElement {
  return h('td', { 'data-label': label, ...attrs }, h('div', { class: 'cell-value' }, ...children));
}

/** A labelled form field. */
export function field(label: string, control: HTMLElement, hint?: string): HTMLElement {
  const id = control.id || uid('f');
  control.id = id;
  const hintEl = hint ? h('small', { class: 'hint', id: `${id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute('aria-describedby', hintEl.id);
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hintEl);
}

/** Copies text to the clipboard; falls back to a selection copy where the Clipboard API is missing (plain http). */
export async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the selection copy
  }
  const area = h('textarea', { class: 'offscreen', readonly: true }, text);
  document.body.appendChild(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

/** A "Copy" button for a value; it says "Copied" for a moment. */
export function copyButton(text: string, label: string): HTMLButtonElement {
  const button = h('button', { type: 'button', class: 'secondary small', 'aria-label': label }, 'Copy');
  button.addEventListener('click', async () => {
    const ok = await copyText(text);
    button.textContent = ok ? 'Copied' : 'Copy failed';
    setTimeout(() => (button.textContent = 'Copy'), 1500);
  });
  return button;
}

export function formatTime(iso: string): string {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

const sameDay = (a: Date, b: Date) => a.toDateString() === b.toDateString();

/** A time in the reader's zone and words: "18:32" today, else "12 Mar 2026, 18:32". */
export function readableTime(iso: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return sameDay(date, new Date())
    ? date.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' })
    : date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

/**
 * A time for a list, in the reader's time zone and words: "14:03" today, "12 Mar, 14:03" this year, "12 Mar 2025,
 * 14:03" before; the full local date and time in its title.
 */
export function whenEl(iso: string): HTMLElement {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return h('span', {}, iso);
  const now = new Date();
  const time = date.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  const day = sameDay(date, now)
    ? 'Today'
    : date.toLocaleDateString(undefined, { day: 'numeric', month: 'short', ...(date.getFullYear() === now.getFullYear() ? {} : { year: 'numeric' }) });
  return h('time', { datetime: date.toISOString(), title: date.toLocaleString() }, h('span', { class: 'when-day' }, day), ' ', h('span', { class: 'when-time' }, time));
}

export function shortHex(value: string, head = 6, tail = 4): string {
  return value.length > head + tail + 2 ? `${value.slice(0, head)}…${value.slice(-tail)}` : value;
}
