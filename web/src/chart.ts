// The spending chart (plain SVG): per asset, what the agent spent each day of the last two weeks, against the
// policy's daily limit (`per_day`, docs/api.md §11) and, for a chain's native coin, the spending cap (§8) with the
// running total of what was sent. Computed from the history; amounts are summed exactly (BigInt), floats only place
// pixels.
import type { HistoryEntry, HistoryStatus } from './api';
import { h } from './dom';

export const DAYS = 14;
/** Fixed point for sums: 18 decimals hold every registry asset exactly. */
const SCALE = 18;
const ONE = 10n ** BigInt(SCALE);

/** Statuses whose value left or may still leave the wallet (what the policy's windows count, §11). */
const COUNTED: ReadonlySet<HistoryStatus> = new Set<HistoryStatus>(['pending', 'confirmed', 'awaiting_approval']);

/** "0.012" -> 12 * 10^15; null when it is not a plain decimal. */
export function parseUnits(text: string): bigint | null {
  const match = /^(\d+)(?:\.(\d+))?$/.exec(text.trim());
  if (!match) return null;
  const fraction = (match[2] ?? '').slice(0, SCALE).padEnd(SCALE, '0');
  return BigInt(match[1]) * ONE + BigInt(fraction);
}

/** 12 * 10^15 -> "0.012". */
export function formatUnits(value: bigint): string {
  const whole = value / ONE;
  const fraction = (value % ONE).toString().padStart(SCALE, '0').replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : String(whole);
}

/** The local calendar day of a timestamp, `YYYY-MM-DD`. */
export function dayOf(date: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

export interface AssetSeries {
  /** `<chain>:<SYMBOL>`, the policy's asset key. */
  asset: string;
  /** The last DAYS local days, oldest first, with what was spent on each. */
  days: { day: string; amount: bigint }[];
  /** Everything counted up to the end of each of those days (all history, not only the window). */
  cumulative: bigint[];
  perDay: bigint | null;
  /** The chain's spending cap, for its native coin only. */
  cap: bigint | null;
}

export interface ChartInputs {
  entries: HistoryEntry[];
  /** Chain name -> native symbol, for the chains the agent holds. */
  natives: Record<string, string>;
  /** `<chain>:<SYMBOL>` -> per_day limit (decimal string), from the policy. */
  perDay: Record<string, string>;
  /** The cap per chain, in native units (a JSON number in the agent detail). */
  cap: string;
  now?: Date;
}

/** The series to draw: every chain's native coin (the cap applies to it), then every other asset seen or limited. */
export function spendingSeries({ entries, natives, perDay, cap, now = new Date() }: ChartInputs): AssetSeries[] {
  const days: string[] = [];
  for (let i = DAYS - 1; i >= 0; i -= 1) {
    const d = new Date(now);
    d.setHours(12, 0, 0, 0);
    d.setDate(d.getDate() - i);
    days.push(dayOf(d));
  }
  const keys = Object.entries(natives).map(([chain, symbol]) => `${chain}:${symbol}`);
  for (const e of entries) if (!keys.includes(`${e.chain}:${e.asset}`)) keys.push(`${e.chain}:${e.asset}`);
  for (const key of Object.keys(perDay)) if (!keys.includes(key)) keys.push(key);
  const capUnits = parseUnits(cap);

  return keys.map((asset) => {
    const byDay = new Map<string, bigint>();
    for (const e of entries) {
      if (`${e.chain}:${e.asset}` !== asset || !COUNTED.has(e.status)) continue;
      const day = dayOf(new Date(e.created_at));
      byDay.set(day, (byDay.get(day) ?? 0n) + (parseUnits(e.amount) ?? 0n));
    }
    let running = 0n;
    for (const [day, amount] of byDay) if (day < days[0]) running += amount;
    const cumulative = days.map((day) => (running += byDay.get(day) ?? 0n));
    const [chain] = asset.split(':');
    const isNative = natives[chain] !== undefined && asset === `${chain}:${natives[chain]}`;
    return {
      asset,
      days: days.map((day) => ({ day, amount: byDay.get(day) ?? 0n })),
      cumulative,
      perDay: perDay[asset] !== undefined ? parseUnits(perDay[asset]) : null,
      cap: isNative ? capUnits : null,
    };
  });
}

const SVG = 'http://www.w3.org/2000/svg';

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number>,
  ...children: (SVGElement | string)[]
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c);
  return el;
}

/** A decimal string cut to 6 decimals, for figures that carry fees (18 decimals). */
function shortDecimal(text: string): string {
  const [whole, fraction = ''] = text.split('.');
  const cut = fraction.slice(0, 6).replace(/0+$/, '');
  return cut ? `${whole}.${cut}` : whole;
}

const W = 640;
const H = 240;
/** The band above the plot where limits far above the bars are marked (off the scale). */
const BAND = 34;
const PAD = { left: 56, right: 150, top: 14 + BAND, bottom: 28 };
/** A line more than this many times the tallest bar is marked above the plot instead of flattening the bars. */
const SCALE_ROOM = 3n;

/**
 * One asset's chart: bars per day against the daily limit and, for a chain's native coin, the cap. The scale fits the
 * bars: a limit or a cap far above them (more than three times the tallest bar) is marked in a band above the plot,
 * labelled "off scale", so that days of small spending still show as bars. The cap, a total over the agent's life
 * rather than a daily amount, is also shown as a gauge under the chart.
 */
export function spendingChart(series: AssetSeries, spent: string | null): HTMLElement {
  const tallest = series.days.map((d) => d.amount).reduce((a, b) => (b > a ? b : a), 0n);
  const base = tallest > 0n ? tallest : (series.perDay ?? series.cap ?? ONE);
  const fits = (v: bigint) => v <= base * SCALE_ROOM;
  const capFits = series.cap !== null && fits(series.cap) && series.cumulative.every(fits);
  const top = [
    tallest,
    series.perDay !== null && fits(series.perDay) ? series.perDay : 0n,
    capFits ? (series.cap as bigint) : 0n,
    ...(capFits ? series.cumulative : []),
  ].reduce((a, b) => (b > a ? b : a), 0n);
  const max = top === 0n ? ONE : top + top / 10n;
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  // Ratios of exact sums; the division loses nothing a pixel can show.
  const y = (v: bigint) => PAD.top + plotH - Number((v * 1_000_000n) / max) / 1_000_000 * plotH;
  const slot = plotW / series.days.length;

  const chart = svg('svg', {
    viewBox: `0 0 ${W} ${H}`,
    class: 'chart',
    role: 'img',
    'data-testid': 'spending-chart',
    'data-asset': series.asset,
    'data-scale-top': formatUnits(max),
  });
  const today = series.days[series.days.length - 1];
  const label = [
    `${series.asset}: ${formatUnits(today.amount)} today`,
    series.perDay !== null ? `daily limit ${formatUnits(series.perDay)}` : 'no daily limit',
    series.cap !== null ? `cap ${formatUnits(series.cap)}` : '',
  ]
    .filter(Boolean)
    .join(', ');
  chart.setAttribute('aria-label', label);
  chart.append(svg('title', {}, label));

  // Axis: zero and the top of the scale.
  chart.append(
    svg('line', { x1: PAD.left, x2: PAD.left + plotW, y1: y(0n), y2: y(0n), class: 'axis' }),
    svg('text', { x: PAD.left - 6, y: y(0n) + 4, class: 'tick', 'text-anchor': 'end' }, '0'),
    svg('text', { x: PAD.left - 6, y: y(max) + 4, class: 'tick', 'text-anchor': 'end' }, formatUnits(max)),
  );
  series.days.forEach((d, i) => {
    const x = PAD.left + i * slot;
    const bar = svg(
      'rect',
      {
        x: x + slot * 0.15,
        y: y(d.amount),
        width: slot * 0.7,
        height: Math.max(0, y(0n) - y(d.amount)),
        class: 'bar',
        'data-testid': 'day-bar',
        'data-day': d.day,
        'data-amount': formatUnits(d.amount),
      },
      svg('title', {}, `${d.day}: ${formatUnits(d.amount)}`),
    );
    chart.append(bar);
    if ((series.days.length - 1 - i) % 2 === 0) {
      chart.append(svg('text', { x: x + slot / 2, y: H - 8, class: 'tick', 'text-anchor': 'middle' }, d.day.slice(5)));
    }
  });
  // The largest day is labelled.
  const peak = series.days.reduce((best, d, i) => (d.amount > series.days[best].amount ? i : best), 0);
  if (series.days[peak].amount > 0n) {
    chart.append(
      svg(
        'text',
        { x: PAD.left + (peak + 0.5) * slot, y: y(series.days[peak].amount) - 5, class: 'tick peak', 'text-anchor': 'middle' },
        formatUnits(series.days[peak].amount),
      ),
    );
  }
  if (series.cap !== null && capFits) {
    const points = series.cumulative.map((v, i) => `${PAD.left + (i + 0.5) * slot},${y(v)}`).join(' ');
    chart.append(svg('polyline', { points, class: 'cumulative', 'data-testid': 'cumulative-line' }));
  }
  // Lines on the scale; the others in the band above it, the larger higher.
  const lines: { value: bigint; cls: string; testid: string; text: string }[] = [];
  if (series.perDay !== null) lines.push({ value: series.perDay, cls: 'limit', testid: 'daily-limit-line', text: `daily limit ${formatUnits(series.perDay)}` });
  if (series.cap !== null) lines.push({ value: series.cap, cls: 'cap', testid: 'cap-line', text: `cap ${formatUnits(series.cap)}` });
  const off = lines.filter((l) => !(l.cls === 'cap' ? capFits : fits(l.value))).sort((a, b) => (b.value > a.value ? 1 : b.value < a.value ? -1 : 0));
  if (off.length) {
    chart.append(
      svg('line', { x1: PAD.left, x2: PAD.left + plotW, y1: PAD.top - 4, y2: PAD.top - 4, class: 'scale-break' }),
    );
  }
  for (const l of lines) {
    const index = off.indexOf(l);
    const at = index >= 0 ? 8 + index * 12 : y(l.value);
    chart.append(
      svg('line', {
        x1: PAD.left,
        x2: PAD.left + plotW,
        y1: at,
        y2: at,
        class: index >= 0 ? `${l.cls} off-scale` : l.cls,
        'data-testid': l.testid,
        'data-value': formatUnits(l.value),
        'data-off-scale': index >= 0 ? 'true' : 'false',
      }),
      svg('text', { x: PAD.left + plotW + 6, y: at + 4, class: `${l.cls}-label` }, index >= 0 ? `${l.text} ↑ off scale` : l.text),
    );
  }

  // The cap as a gauge: what it has counted (fees included, from the agent detail) against what it allows.
  let gauge: HTMLElement | null = null;
  if (series.cap !== null) {
    const counted = spent !== null ? parseUnits(spent) : null;
    const used = counted ?? series.cumulative[series.cumulative.length - 1] ?? 0n;
    const share = series.cap > 0n ? Number((used * 10000n) / series.cap) / 100 : used > 0n ? 100 : 0;
    // Width through the CSSOM: the Content-Security-Policy (style-src 'self') refuses style attributes.
    const fill = h('span', { class: 'gauge-fill' });
    fill.style.width = `${Math.min(100, share)}%`;
    gauge = h(
      'div',
      { class: 'cap-gauge small', 'data-testid': 'cap-gauge', 'data-used': formatUnits(used), 'data-cap': formatUnits(series.cap) },
      h(
        'span',
        { title: formatUnits(used) },
        `Cap: ${shortDecimal(formatUnits(used))} of ${formatUnits(series.cap)} counted${counted !== null ? ' (fees included)' : ''} · ${share.toFixed(share < 1 ? 2 : 1)}%`,
      ),
      h('span', { class: 'gauge', 'aria-hidden': 'true' }, fill),
    );
  }

  return h(
    'figure',
    { class: 'spending', 'data-testid': 'spending', 'data-asset': series.asset },
    chart,
    gauge,
    h(
      'figcaption',
      { class: 'muted small' },
      h('strong', {}, series.asset),
      `: sent per day (bars, pending and confirmed, by local day; the policy's window is the last 24 hours)`,
      series.cap !== null && capFits ? ', the running total (line) against the cap' : '',
      off.length ? '; limits far above the bars are marked above the chart, off its scale' : '',
      '.',
    ),
  );
}
