// What an agent sells over x402 and what it earned (docs/api.md §23): offers, income and the agent's facilitator
// tokens, with the calls that read and change them. Typed here by hand, every field of the service's answers
// optional where the contract leaves room, until the server's OpenAPI document (web/openapi.json → api-types.ts)
// carries these bodies; then these types can point at the generated schemas.
import { call } from './api';

/** When the payment is settled: after the resource answered 2xx (`GET`/`HEAD` only), or first (`upfront`). */
export type SettleMode = 'on_success' | 'before_serving';
/** What of the buyer's request reaches the upstream (none by default). */
export type ForwardPart = 'query' | 'body';

/** An upstream the agent fronts: fetched by agentd's guarded client (§16's rules; `OFFER_ALLOW_PRIVATE`). */
export interface UrlResource {
  url: string;
  method?: 'GET' | 'HEAD' | 'POST';
  /** Sent to the upstream, kept encrypted, never shown again (an API key, say). */
  headers?: Record<string, string>;
  /** What the 402 advertises (`application/json` by default). */
  mime_type?: string;
}

/** A body agentd stores and serves itself. */
export interface ContentResource {
  content: string;
  content_type: string;
}

/** `POST /api/agents/{id}/offers`. */
export interface NewOfferBody {
  chain: string;
  asset: string;
  /** Whole units, decimal string, > 0. */
  price: string;
  description: string;
  resource: UrlResource | ContentResource;
  settle?: SettleMode;
  forward?: ForwardPart[];
  /** Whole native units a rolling 24 h of the offer's settlements may cost the agent's gas. */
  gas_per_day: string;
  max_timeout_seconds?: number;
}

/** An offer as the service shows it: its `url` is where buyers pay (`<PUBLIC_URL>/x402/<id>`). */
export interface Offer {
  id: string;
  url: string;
  chain: string;
  asset: string;
  price: string;
  /** The agent's wallet on `chain`: where the payments go. */
  pay_to: string;
  description: string;
  settle: SettleMode;
  forward: ForwardPart[] | string | null;
  gas_per_day: string;
  max_timeout_seconds: number;
  status: 'active' | 'closed' | string;
  created_at: string;
  /** What it sells: an upstream shown as origin and path only (whether it is sent headers, never their values), or a
   * stored body. */
  resource?: { kind: 'url' | 'content' | string; url?: string | null; method?: string | null; mime_type?: string | null; headers?: boolean } | null;
}

export type IncomeStatus = 'settling' | 'settled' | 'failed' | 'released';

/** One payment taken (§23): by an offer, or through the agent's facilitator (`offer_id` null). */
export interface Income {
  id: string;
  offer_id: string | null;
  chain: string;
  asset: string;
  amount: string;
  payer: string;
  nonce: string;
  status: IncomeStatus | string;
  /** `agentd`, or `external` when someone else's transaction used the authorization. */
  settled_by: 'agentd' | 'external' | string | null;
  tx_hash: string | null;
  /** What the settlement's gas cost the agent, in the chain's native coin (`"0"` when sponsored). */
  fee: string | null;
  created_at: string;
  settled_at: string | null;
}

/** `POST …/facilitator-tokens`: the token, shown in this answer only. */
export interface CreatedFacilitatorToken {
  id: string;
  token: string;
  created_at: string;
}

export interface FacilitatorToken {
  id: string;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
}

const enc = encodeURIComponent;
/** `GET …/offers` may answer a list or `{offers: [...]}`; `GET …/income` answers `{income: [...]}`. */
const listOf = <T>(body: unknown, key: string): T[] =>
  Array.isArray(body) ? (body as T[]) : (((body as Record<string, unknown> | null)?.[key] as T[] | undefined) ?? []);

export const offersApi = {
  // Offers and facilitator tokens need owner authority (on an unguarded agent its token is enough): both are sent.
  offers: (id: string, token: string | null) =>
    call<unknown>('GET', `/api/agents/${enc(id)}/offers`, { token, owner: id }).then((b) => listOf<Offer>(b, 'offers')),
  createOffer: (id: string, token: string | null, body: NewOfferBody) =>
    call<Offer>('POST', `/api/agents/${enc(id)}/offers`, { token, owner: id, body }),
  closeOffer: (id: string, token: string | null, oid: string) =>
    call<void>('DELETE', `/api/agents/${enc(id)}/offers/${enc(oid)}`, { token, owner: id }),
  /** One page of the income, newest first; `before` is the id of the last record of the previous page. */
  income: (id: string, token: string | null, limit: number, before: string | null, offer?: string) => {
    const params = new URLSearchParams({ limit: String(limit) });
    if (before !== null) params.set('before', before);
    if (offer) params.set('offer', offer);
    return call<unknown>('GET', `/api/agents/${enc(id)}/income?${params}`, token ? { token } : { owner: id }).then((b) =>
      listOf<Income>(b, 'income'),
    );
  },
  facilitatorTokens: (id: string, token: string | null) =>
    call<unknown>('GET', `/api/agents/${enc(id)}/facilitator-tokens`, { token, owner: id }).then((b) =>
      listOf<FacilitatorToken>(b, 'facilitator_tokens'),
    ),
  createFacilitatorToken: (id: string, token: string | null) =>
    call<CreatedFacilitatorToken>('POST', `/api/agents/${enc(id)}/facilitator-tokens`, { token, owner: id, body: {} }),
  deleteFacilitatorToken: (id: string, token: string | null, tid: string) =>
    call<void>('DELETE', `/api/agents/${enc(id)}/facilitator-tokens/${enc(tid)}`, { token, owner: id }),
};

/** Reads up to `pages` pages of 500 of the income (the totals beside what was spent). */
export async function readIncome(id: string, token: string | null, pages = 10): Promise<{ income: Income[]; complete: boolean }> {
  const income: Income[] = [];
  let before: string | null = null;
  for (let i = 0; i < pages; i += 1) {
    const batch = await offersApi.income(id, token, 500, before);
    income.push(...batch);
    if (batch.length < 500) return { income, complete: true };
    before = batch[batch.length - 1].id;
  }
  return { income, complete: false };
}
