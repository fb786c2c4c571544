// The agentd HTTP API (see CONTRACT.md): typed calls, JSON errors turned into ApiError.

export interface ChainInfo {
  name: string;
  chain_id: number;
  native_symbol: string;
  decimals: number;
  explorer_url: string | null;
  configured: boolean;
}

export interface AgentSummary {
  id: string;
  name: string;
  description: string | null;
  chains: string[];
  capabilities: string[];
  is_active: boolean;
  created_at: string;
}

export interface AgentDetail extends AgentSummary {
  spending_cap: number;
  wallet_addresses: Record<string, string>;
  owner_addresses?: Record<string, string> | null;
  spent?: Record<string, string>;
  updated_at?: string;
}

export interface CreatedAgent extends AgentDetail {
  access_token: string;
}

export type BalanceEntry =
  | { address: string; wei: string; formatted: string; symbol: string; error?: undefined }
  | { address: string; error: { code: string; message: string } };

export interface Balances {
  agent_id: string;
  balances: Record<string, BalanceEntry>;
}

export interface Deposit {
  chain: string;
  chain_id: number;
  address: string;
  symbol: string;
  payment_uri: string;
  explorer_url: string | null;
}

export interface Funding {
  agent_id: string;
  deposits: Deposit[];
  instructions: string;
}

export interface ChainCall {
  id: string;
  tool: string;
  args: unknown;
  result?: unknown;
  error?: unknown;
  duration_ms?: number;
}

export interface Conversation {
  id: string;
  agent_id: string;
  title: string;
  created_at: string;
  updated_at: string;
  message_count: number;
}

export interface Message {
  id: string;
  role: 'user' | 'assistant';
  content: string;
  chain_calls: ChainCall[] | null;
  created_at: string;
}

export interface Challenge {
  message: string;
  nonce: string;
  expires_at: string;
}

export interface TxConfirmation {
  type: 'tx_confirmation';
  conversation_id: string;
  agent_id: string;
  chain: string;
  tx_hash: string;
  status: 'confirmed' | 'reverted' | 'dropped';
  block_number: number | null;
  gas_used: number | string | null;
  confirmations: number | null;
  explorer_url: string | null;
}

export type Proof =
  | { type: 'current_token'; token: string }
  | { type: 'wallet_signature'; chain: string; message: string; signature: string; public_key: string };

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryAfter: string | null = null,
  ) {
    super(message);
  }
}

const ADMIN_KEY = 'agentd.adminToken';

export function adminToken(): string | null {
  return localStorage.getItem(ADMIN_KEY);
}

export function setAdminToken(token: string | null): void {
  if (token) localStorage.setItem(ADMIN_KEY, token);
  else localStorage.removeItem(ADMIN_KEY);
}

interface Options {
  token?: string | null;
  body?: unknown;
  admin?: boolean;
  signal?: AbortSignal;
}

export function headers(opts: Options): Headers {
  const result = new Headers({ Accept: 'application/json' });
  if (opts.body !== undefined) result.set('Content-Type', 'application/json');
  if (opts.token) result.set('X-Agent-Access-Token', opts.token);
  const admin = opts.admin ? adminToken() : null;
  if (admin) result.set('Authorization', `Bearer ${admin}`);
  return result;
}

/** Turns a non-2xx response into an ApiError carrying the contract's `{error: {code, message}}`. */
export async function errorOf(response: Response): Promise<ApiError> {
  let code = `http_${response.status}`;
  let message = response.statusText || `HTTP ${response.status}`;
  try {
    const body = await response.json();
    if (body && typeof body === 'object' && body.error) {
      code = String(body.error.code ?? code);
      message = String(body.error.message ?? message);
    }
  } catch {
    // not JSON: keep the status text
  }
  return new ApiError(response.status, code, message, response.headers.get('Retry-After'));
}

export async function call<T>(method: string, path: string, opts: Options = {}): Promise<T> {
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers: headers(opts),
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: opts.signal,
    });
  } catch (e) {
    throw new ApiError(0, 'network_error', `The service cannot be reached (${(e as Error).message}).`);
  }
  if (!response.ok) throw await errorOf(response);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

const enc = encodeURIComponent;

export const api = {
  chains: () => call<ChainInfo[]>('GET', '/api/chains'),
  listAgents: () => call<AgentSummary[]>('GET', '/api/agents?limit=500', { admin: true }),
  createAgent: (body: Record<string, unknown>) => call<CreatedAgent>('POST', '/api/agents', { body, admin: true }),
  agent: (id: string, token: string) => call<AgentDetail>('GET', `/api/agents/${enc(id)}`, { token }),
  updateAgent: (id: string, token: string, body: Record<string, unknown>) =>
    call<AgentDetail>('PUT', `/api/agents/${enc(id)}`, { token, body }),
  deleteAgent: (id: string, token: string) => call<void>('DELETE', `/api/agents/${enc(id)}`, { token }),
  balances: (id: string, token: string) => call<Balances>('GET', `/api/agents/${enc(id)}/balances`, { token }),
  fund: (id: string, token: string, body: { chain?: string; amount?: string }) =>
    call<Funding>('POST', `/api/agents/${enc(id)}/fund`, { token, body }),
  challenge: (id: string) => call<Challenge>('GET', `/api/agents/${enc(id)}/reissue-challenge`),
  reissue: (id: string, proof: Proof) =>
    call<{ access_token: string; agent: AgentDetail }>('POST', `/api/agents/${enc(id)}/reissue-token`, {
      body: { proof },
    }),
  conversations: (agentId: string, token: string) =>
    call<Conversation[]>('GET', `/api/conversations?agent_id=${enc(agentId)}`, { token }),
  messages: (conversationId: string, token: string) =>
    call<Message[]>('GET', `/api/conversations/${enc(conversationId)}/messages`, { token }),
  deleteConversation: (conversationId: string, token: string) =>
    call<void>('DELETE', `/api/conversations/${enc(conversationId)}`, { token }),
};
