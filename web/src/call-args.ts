// What the call composer offers and how it reads what is typed (docs/api.md §18 `function` + `args`): the functions
// the console knows for ERC-20 tokens, WETH and the Uniswap V2 router, and each argument field's text read as the API
// takes it — addresses as 0x-hex ("$agent", a registry token's symbol and the name of a contract the deployment
// names are accepted and replaced), integers as decimal strings in base units (an amount with its unit, "2.5 USDC"
// or "0.1 ETH", is converted with that token's decimals), booleans, arrays as comma-separated lists, tuples as JSON.
import { paramTypes } from './calls';

/** A function the console knows, offered under the name of the contract kind it belongs to. */
export interface KnownFunction {
  group: string;
  signature: string;
  payable: boolean;
  /** One line on what it does, shown under the function. */
  note: string;
}

export const KNOWN_FUNCTIONS: KnownFunction[] = [
  { group: 'ERC-20 token', signature: 'approve(address,uint256)', payable: false, note: 'Allows the spender to take up to the amount (in the token\u2019s base units) from the wallet.' },
  { group: 'ERC-20 token', signature: 'transfer(address,uint256)', payable: false, note: 'Sends the amount (in the token\u2019s base units) to the address.' },
  { group: 'WETH', signature: 'deposit()', payable: true, note: 'Wraps the value sent with the call into WETH.' },
  { group: 'WETH', signature: 'withdraw(uint256)', payable: false, note: 'Unwraps the amount of WETH (in wei) into ETH.' },
  {
    group: 'Uniswap V2 router',
    signature: 'swapExactETHForTokens(uint256,address[],address,uint256)',
    payable: true,
    note: 'Swaps the value sent for at least amountOutMin of the last token of the path (path: WETH first).',
  },
  {
    group: 'Uniswap V2 router',
    signature: 'swapExactTokensForETH(uint256,uint256,address[],address,uint256)',
    payable: false,
    note: 'Swaps amountIn of the first token of the path for ETH (the router needs an allowance first: approve it on the token).',
  },
  {
    group: 'Uniswap V2 router',
    signature: 'swapExactTokensForTokens(uint256,uint256,address[],address,uint256)',
    payable: false,
    note: 'Swaps amountIn of the first token of the path for the last (the router needs an allowance first).',
  },
];

/** What an argument's text may name besides a 0x address. */
export interface ArgContext {
  /** The agent's address on the call's chain ("$agent"). */
  agent: string;
  /** The chain's registry tokens: symbol → address, and their decimals (for amounts typed in token units). */
  tokens: { symbol: string; address: string; decimals?: number }[];
  /** The chain's native coin (an amount typed as "0.1 ETH": 18 decimals). */
  native?: { symbol: string; decimals: number };
  /** Contracts known by name on the chain (those the deployment names, such as its router or pool). */
  contracts?: { name: string; address: string }[];
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/** Whether a parameter is a point in time (a swap's `deadline`, a permit's `expiry`): Unix seconds, not an amount. */
export function isTime(name: string | null, type: string): boolean {
  return /^uint/.test(type) && !!name && /^(deadline|expiry|expiration|validUntil|validAfter|validBefore)$/i.test(name);
}

/** Whether a parameter is the least a swap must return (`amountOutMin`, `minAmountOut`, …). */
export function isMinimumOut(name: string | null, type: string): boolean {
  return /^uint/.test(type) && !!name && /^(amountOutMin|amountOutMinimum|minAmountOut|minReturn|amountMin)$/i.test(name);
}

/** A field's hint for a parameter (its type, and its name when that says more: a deadline is a time). */
export function typeHint(type: string, name: string | null = null): string {
  if (isTime(name, type)) return 'A Unix time in seconds (20 minutes from now is filled in): after it the contract refuses the call.';
  if (type === 'address') return 'A 0x address, $agent (this agent), a token symbol or a known contract: pick one below.';
  if (/^address\[\d*\]$/.test(type)) return 'Addresses separated by commas (0x…, $agent, token symbols or known contracts).';
  if (/^uint\d*$/.test(type)) return 'An amount with its token, such as 2.5 USDC or 0.1 ETH, or an integer in base units (1 USDC = 1000000).';
  if (/^int\d*$/.test(type)) return 'An integer.';
  if (/^u?int\d*\[\d*\]$/.test(type)) return 'Integers in base units, separated by commas.';
  if (type === 'bool') return 'true or false.';
  if (type.startsWith('(')) return 'A JSON array of the tuple\u2019s fields.';
  if (type.startsWith('bytes')) return '0x-hex bytes.';
  return '';
}

/** The address a name stands for ("$agent", a token symbol, a known contract's name), or null. */
export function knownAddress(text: string, ctx: ArgContext): string | null {
  const name = text.trim().toLowerCase();
  if (name === '$agent') return ctx.agent;
  const token = ctx.tokens.find((t) => t.symbol.toLowerCase() === name);
  if (token) return token.address;
  const contract = (ctx.contracts ?? []).find((c) => c.name.toLowerCase() === name);
  return contract ? contract.address : null;
}

function readAddress(text: string, ctx: ArgContext): string {
  if (ADDRESS.test(text)) return text;
  const known = knownAddress(text, ctx);
  if (known) return known;
  throw new Error('must be a 0x address of 40 hex digits, $agent, a token symbol or a known contract\u2019s name');
}

/**
 * An amount typed with its unit ("2.5 USDC", "0.1 ETH") in base units, with the unit's symbol and decimals; null when
 * the text has no unit. Throws when the unit is unknown or the amount has more decimals than the token.
 */
export function unitAmount(text: string, ctx: ArgContext): { base: string; symbol: string; decimals: number } | null {
  const m = /^(\d+(?:\.\d+)?|\.\d+)\s*([A-Za-z][A-Za-z0-9.]*)$/.exec(text.trim());
  if (!m) return null;
  const unit = m[2].toLowerCase();
  const native = ctx.native && ctx.native.symbol.toLowerCase() === unit ? ctx.native : null;
  const token = ctx.tokens.find((t) => t.symbol.toLowerCase() === unit && t.decimals !== undefined);
  const found = native ?? (token ? { symbol: token.symbol, decimals: token.decimals as number } : null);
  if (!found) {
    const known = [ctx.native?.symbol, ...ctx.tokens.filter((t) => t.decimals !== undefined).map((t) => t.symbol)].filter(Boolean).join(', ');
    throw new Error(`names ${m[2]}, which is not a token the console knows the decimals of (${known}): give it in base units`);
  }
  const [whole, fraction = ''] = (m[1].startsWith('.') ? `0${m[1]}` : m[1]).split('.');
  if (fraction.length > found.decimals) throw new Error(`has more decimals than ${found.symbol}\u2019s ${found.decimals}`);
  const base = BigInt(whole + fraction.padEnd(found.decimals, '0')).toString();
  return { base, symbol: found.symbol, decimals: found.decimals };
}

/** One value of `type` from its text, as the API takes it; throws with what is wrong. */
function readOne(type: string, text: string, ctx: ArgContext): unknown {
  const array = /^(.+)\[(\d*)\]$/.exec(type);
  if (array && !type.startsWith('(')) {
    const items = text.split(',').map((t) => t.trim()).filter((t) => t !== '');
    if (array[2] && items.length !== Number(array[2])) throw new Error(`must list ${array[2]} values`);
    return items.map((t) => readOne(array[1], t, ctx));
  }
  if (type === 'address') return readAddress(text, ctx);
  if (/^uint\d*$/.test(type)) {
    const typed = unitAmount(text, ctx);
    if (typed) return typed.base;
    if (!/^\d+$/.test(text)) throw new Error('must be an amount with its token (2.5 USDC) or a whole number in base units');
    return text;
  }
  if (/^int\d*$/.test(type)) {
    if (!/^-?\d+$/.test(text)) throw new Error('must be a whole number');
    return text;
  }
  if (type === 'bool') {
    if (text !== 'true' && text !== 'false') throw new Error('must be true or false');
    return text === 'true';
  }
  if (type.startsWith('(')) {
    try {
      return JSON.parse(text);
    } catch {
      throw new Error('must be a JSON array of the tuple\u2019s fields');
    }
  }
  if (type.startsWith('bytes') && !/^0x([0-9a-fA-F]{2})*$/.test(text)) throw new Error('must be 0x-hex bytes');
  return text;
}

/** The `args` of a signature from one text per parameter; the error names the argument. */
export function readArgs(signature: string, texts: string[], names: (string | null)[], ctx: ArgContext): unknown[] {
  return paramTypes(signature).map((type, i) => {
    const text = (texts[i] ?? '').trim();
    const label = `Argument ${i}${names[i] ? ` (${names[i]})` : ''}`;
    if (!text && !/\[\d*\]$/.test(type)) throw new Error(`${label} is empty.`);
    try {
      return readOne(type, text, ctx);
    } catch (e) {
      throw new Error(`${label} ${(e as Error).message}.`);
    }
  });
}

/** A typed signature without the spaces around its commas and parentheses. */
export function tidySignature(text: string): string {
  return text.trim().replace(/\s*([,()])\s*/g, '$1');
}

/** Whether `text` reads as a signature `name(type,…)`: types only, no parameter names (no space left inside). */
export function looksLikeSignature(text: string): boolean {
  return /^[A-Za-z_$][A-Za-z0-9_$]*\(\S*\)$/.test(text);
}

/** A sensible default for a parameter: a deadline twenty minutes from now. */
export function defaultFor(name: string | null, type: string): string {
  if (isTime(name, type) && /^deadline$/i.test(name ?? '')) return String(Math.floor(Date.now() / 1000) + 20 * 60);
  if (name === 'to' && type === 'address') return '$agent';
  return '';
}

/** Base units as whole units of a token with `decimals` (exact, trailing zeros dropped); null when not digits. */
export function wholeUnits(base: string, decimals: number): string | null {
  const text = base.trim();
  if (!/^\d+$/.test(text)) return null;
  const digits = BigInt(text).toString().padStart(decimals + 1, '0');
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : whole;
}
