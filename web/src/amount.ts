// Amounts as the API gives them (decimal strings in whole units, exact): rounded for reading, compared exactly.
// No floating point: a balance of 10^18 wei plus one must not print as a round number nor compare equal to one.

/** `[integer digits, fraction digits]` of a non-negative decimal string, or null when it is not one. */
function parts(value: string): [string, string] | null {
  const match = /^\s*(\d*)(?:\.(\d*))?\s*$/.exec(value);
  if (!match || (match[1] === '' && (match[2] ?? '') === '')) return null;
  return [match[1].replace(/^0+(?=\d)/, '') || '0', match[2] ?? ''];
}

/** The value as a BigInt scaled by 10^scale (digits past `scale` are dropped). */
function scaled(value: string, scale: number): bigint | null {
  const p = parts(value);
  if (!p) return null;
  return BigInt(p[0] + p[1].slice(0, scale).padEnd(scale, '0'));
}

/** -1, 0 or 1 as `a` is below, equal to or above `b`; null when either is not a decimal string. */
export function compareDecimal(a: string, b: string): number | null {
  const pa = parts(a);
  const pb = parts(b);
  if (!pa || !pb) return null;
  const scale = Math.max(pa[1].length, pb[1].length);
  const x = scaled(a, scale)!;
  const y = scaled(b, scale)!;
  return x < y ? -1 : x > y ? 1 : 0;
}

/** `a - b`, exactly, as a decimal string (may be negative); null when either is not a decimal string. */
export function subtractDecimal(a: string, b: string): string | null {
  const pa = parts(a);
  const pb = parts(b);
  if (!pa || !pb) return null;
  const scale = Math.max(pa[1].length, pb[1].length);
  const diff = scaled(a, scale)! - scaled(b, scale)!;
  return fromScaled(diff, scale);
}

/** `a + b`, exactly, as a decimal string; null when either is not a decimal string. */
export function addDecimal(a: string, b: string): string | null {
  const pa = parts(a);
  const pb = parts(b);
  if (!pa || !pb) return null;
  const scale = Math.max(pa[1].length, pb[1].length);
  return fromScaled(scaled(a, scale)! + scaled(b, scale)!, scale);
}

function fromScaled(value: bigint, scale: number): string {
  const negative = value < 0n;
  const digits = (negative ? -value : value).toString().padStart(scale + 1, '0');
  const int = digits.slice(0, digits.length - scale);
  const frac = digits.slice(digits.length - scale).replace(/0+$/, '');
  return `${negative ? '-' : ''}${int}${frac ? `.${frac}` : ''}`;
}

/**
 * A decimal string rounded for reading: at most 4 decimals at or above 1, else 4 significant digits (at most 8
 * decimals), half up, trailing zeros dropped; a non-zero amount too small to show reads `<0.00000001`. Anything
 * that is not a plain decimal string is returned as it is.
 */
export function roundAmount(value: string | number): string {
  const text = String(value).trim();
  const negative = text.startsWith('-');
  const body = negative ? text.slice(1) : text;
  const p = parts(body);
  if (!p) return text;
  const [int, frac] = p;
  let decimals: number;
  if (int !== '0') decimals = 4;
  else {
    const firstDigit = frac.search(/[1-9]/);
    if (firstDigit < 0) return '0';
    decimals = Math.min(firstDigit + 4, 8);
  }
  if (frac.length <= decimals) return `${negative ? '-' : ''}${fromScaled(BigInt(int + frac.padEnd(decimals, '0')), decimals)}`;
  let rounded = BigInt(int + frac.slice(0, decimals));
  if (Number(frac[decimals]) >= 5) rounded += 1n;
  if (rounded === 0n) return negative ? '>-0.00000001' : '<0.00000001';
  return `${negative ? '-' : ''}${fromScaled(rounded, decimals)}`;
}

/** Whether `roundAmount` changed the value (the exact one then goes in a title). */
export function isRounded(value: string | number): boolean {
  const text = String(value).trim();
  const negative = text.startsWith('-');
  const p = parts(negative ? text.slice(1) : text);
  if (!p) return false;
  const exact = `${negative ? '-' : ''}${fromScaled(BigInt(p[0] + p[1]), p[1].length)}`;
  return roundAmount(text) !== exact;
}
