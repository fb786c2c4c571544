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

/** The chain the wallet is on now (`eth_chainId`), as a number. */
async function walletChainId(wallet: Eip1193): Promise<number> {
  const answer = await wallet.request({ method: 'eth_chainId' });
  const id = typeof answer === 'string' ? Number.parseInt(answer, 16) : Number(answer);
  if (!Number.isSafeInteger(id) || id <= 0) throw new Error(`The wallet gave no chain id (eth_chainId answered ${String(answer)}).`);
  return id;
}

/**
 * Puts the wallet on `chain` before it signs or sends anything meant for that chain: reads `eth_chainId`, asks
 * `wallet_switchEthereumChain` when the wallet is on another network, and reads again (a wallet may answer the switch
 * without switching). Throws, in words and before anything is signed or sent, when the wallet stays elsewhere: a
 * revocation sent on another chain would revoke nothing, and a delegation signed for another chain is no grant here.
 * `nothing` says what did not happen ("Nothing was signed.").
 */
export async function ensureChain(chain: { name: string; chain_id: number }, nothing: string): Promise<void> {
  const wallet = injectedWallet();
  if (!wallet) throw new Error('No browser wallet was found.');
  const first = await walletChainId(wallet);
  if (first === chain.chain_id) return;
  let why = '';
  try {
    await wallet.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: `0x${chain.chain_id.toString(16)}` }] });
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    const message = (e as { message?: unknown }).message;
    why =
      code === 4902
        ? ` The wallet does not know that network: add ${chain.name} (chain id ${chain.chain_id}) to it first.`
        : ` It did not switch networks when asked${typeof message === 'string' && message ? `: ${message.replace(/\.?$/, '.')}` : '.'}`;
  }
  const now = await walletChainId(wallet);
  if (now === chain.chain_id) return;
  throw new Error(
    `Your wallet is on chain ${now}, not on ${chain.name} (chain ${chain.chain_id}).${why || ' It did not switch networks when asked.'} ` +
      `${nothing} Switch the wallet to ${chain.name} and try again.`,
  );
}

/** The code at `address` on the chain the wallet is on now (`eth_getCode`): `0x` for a plain account. */
export async function accountCode(address: string): Promise<string> {
  const wallet = injectedWallet();
  if (!wallet) throw new Error('No browser wallet was found.');
  const code = await wallet.request({ method: 'eth_getCode', params: [address, 'latest'] });
  if (typeof code !== 'string' || !code.startsWith('0x')) throw new Error('The wallet could not read the account\u2019s code.');
  return code;
}
