// What an agent sells over x402 and what it earned (docs/api.md §23): offers, income and the agent's facilitator
// tokens, with the calls that read and change them. The bodies are the server's own (its OpenAPI document,
// web/openapi.json → api-types.ts).
import { call } from './api';
import type { components } from './api-types';

type Schemas = components['schemas'];

/** When the payment is settled: after the resource answered 2xx (`GET`/`HEAD` only), or first (`upfront`). */
export type SettleMode = Schemas['SettleView'];
/** What of the buyer's request reaches the upstream (none by default). */
export type ForwardPart = 'query' | 'body';
/** An upstream the agent fronts: fetched by agentd's guarded client (§16's rules; `OFFER_ALLOW_PRIVATE`). */
export type UrlResource = Schemas['NewUpstream'];
/** A body agentd stores and serves itself. */
export type ContentResource = Schemas['NewContent'];
/** `POST /api/agents/{id}/offers`. */
export type NewOfferBody = Schemas['NewOffer'];
/** An offer as the service shows it: its `url` is where buyers pay (`<PUBLIC_URL>/x402/<id>`). */
export type Offer = Schemas['OfferView'];
export type IncomeStatus = Schemas['IncomeStatus'];
/** One payment taken (§23): by an offer, or through the agent's facilitator (`offer_id` null). */
export type Income = Schemas['IncomeView'];
/** `POST …/facilitator-tokens`: the token, shown in this answer only. */
export type CreatedFacilitatorToken = Schemas['FacilitatorTokenCreatedView'];
export type FacilitatorToken = Schemas['FacilitatorTokenView'];

const enc = encodeURIComponent;

export const offersApi = {
  // Offers and facilitator tokens need owner authority (on an unguarded agent its token is enough): both are sent.
  offers: (id: string, token: string | null) =>
    call<Schemas['OffersView']>('GET', `/api/agents/${enc(id)}/offers`, { token, owner: id }).then((b) => b.offers),
  createOffer: (id: string, token: string | null, body: NewOfferBody) =>
    call<Offer>('POST', `/api/agents/${enc(id)}/offers`, { token, owner: id, body }),
  closeOffer: (id: string, token: string | null, oid: string) =>
    call<void>('DELETE', `/api/agents/${enc(id)}/offers/${enc(oid)}`, { token, owner: id }),
  /** One page of the income, newest first; `before` is the id of the last record of the previous page. */
  income: (id: string, token: string | null, limit: number, before: string | null, offer?: string) => {
    const params = new URLSearchParams({ limit: String(limit) });
    if (before !== null) params.set('before', before);
    if (offer) params.set('offer', offer);
    return call<Schemas['IncomeListView']>('GET', `/api/agents/${enc(id)}/income?${params}`, token ? { token } : { owner: id }).then(
      (b) => b.income,
    );
  },
  facilitatorTokens: (id: string, token: string | null) =>
    call<Schemas['FacilitatorTokensView']>('GET', `/api/agents/${enc(id)}/facilitator-tokens`, { token, owner: id }).then(
      (b) => b.facilitator_tokens,
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
