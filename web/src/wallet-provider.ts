// An injected EIP-1193 wallet (window.ethereum), used to sign reissue challenges with personal_sign.

interface Eip1193 {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}

export function injectedWallet(): Eip1193 | null {
  const candidate = (window as unknown as { ethereum?: Eip1193 }).ethereum;
  return candidate && typeof candidate.request === 'function' ? candidate : null;
}

function utf8Hex(text: string): string {
  let hex = '0x';
  for (const byte of new TextEncoder().encode(text)) hex += byte.toString(16).padStart(2, '0');
  return hex;
}

/** Asks the wallet for its (first) account. */
export async function walletAccount(): Promise<string> {
  const wallet = injectedWallet();
  if (!wallet) throw new Error('No browser wallet was found.');
  const accounts = (await wallet.request({ method: 'eth_requestAccounts' })) as string[];
  const address = accounts?.[0];
  if (!address) throw new Error('The wallet shared no account.');
  return address;
}

/** An EIP-191 personal_sign signature of `message` by `address`. */
export async function personalSign(message: string, address: string): Promise<string> {
  const wallet = injectedWallet();
  if (!wallet) throw new Error('No browser wallet was found.');
  const signature = (await wallet.request({ method: 'personal_sign', params: [utf8Hex(message), address] })) as string;
  if (typeof signature !== 'string' || !signature.startsWith('0x')) throw new Error('The wallet returned no signature.');
  return signature;
}

/** Asks the wallet for an account and an EIP-191 personal_sign signature of `message`. */
export async function signWithWallet(message: string): Promise<{ address: string; signature: string }> {
  const address = await walletAccount();
  return { address, signature: await personalSign(message, address) };
}
