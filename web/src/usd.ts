// A dollar value beside a balance, for stablecoins only: the console has no price source, so it values a registry
// token whose symbol is a US-dollar stablecoin at 1 unit = 1 USD ("≈ $", the peg assumed and said so) and nothing
// else (ETH, WETH, any other token: no value shown rather than a guessed one).
import { h } from './dom';

/** Registry symbols of US-dollar stablecoins (upper case). */
const STABLE = new Set(['USDC', 'USDT', 'DAI', 'USDC.E', 'USDBC', 'USDS', 'PYUSD', 'TUSD', 'USDP', 'GUSD', 'LUSD', 'FRAX', 'USDT0']);

export function isUsdStable(symbol: string): boolean {
  return STABLE.has(symbol.toUpperCase());
}

/** "1234.5678" → "1,234.57" (half up, exact on the decimal string); null for what is not a plain decimal. */
export function dollars(value: string): string | null {
  const m = /^(\d+)(?:\.(\d*))?$/.exec(value.trim());
  if (!m) return null;
  const frac = (m[2] ?? '').padEnd(3, '0');
  let cents = BigInt(m[1]) * 100n + BigInt(frac.slice(0, 2));
  if (Number(frac[2]) >= 5) cents += 1n;
  const whole = (cents / 100n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${whole}.${(cents % 100n).toString().padStart(2, '0')}`;
}

/** " ≈ $1,000.00" for a stablecoin amount (its title says the peg is assumed); null for any other asset. */
export function usdValue(formatted: string, symbol: string): HTMLElement | null {
  if (!isUsdStable(symbol)) return null;
  const d = dollars(formatted);
  if (d === null) return null;
  const small = d === '0.00' && /[1-9]/.test(formatted);
  return h(
    'span',
    {
      class: 'usd muted small',
      'data-testid': 'usd',
      title: `Assumes ${symbol} holds its peg: 1 ${symbol} = 1 US dollar. No market price is read.`,
    },
    small ? '\u2248 <$0.01' : `\u2248 $${d}`,
    h('span', { class: 'peg' }, ' (at the peg)'),
  );
}
