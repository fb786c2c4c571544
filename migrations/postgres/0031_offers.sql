-- Agents that earn (§23). `offers`: what an agent sells at `/x402/{id}` (the upstream's headers sealed like a wallet
-- key; a stored body in `content`). `x402_income`: one row per payment taken, the hold first: a payment is taken
-- once by the unique (chain, token, payer, nonce), and one payment per payer and offer is in flight (`settling`) at a
-- time. `transfer_id` is the settlement's transaction (the agent's wallet calling the token's
-- `transferWithAuthorization`). `facilitator_tokens`: the credentials of an agent's own facilitator endpoints,
-- stored as hashes.
CREATE TABLE offers (
    id                  UUID PRIMARY KEY NOT NULL,
    agent_id            UUID NOT NULL REFERENCES agents (id),
    chain               TEXT NOT NULL,
    asset               TEXT NOT NULL,
    token_address       TEXT NOT NULL,
    decimals            BIGINT NOT NULL,
    token_name          TEXT NOT NULL,
    token_version       TEXT NOT NULL,
    price               TEXT NOT NULL,
    description         TEXT NOT NULL,
    resource_url        TEXT,
    resource_method     TEXT,
    mime_type           TEXT,
    resource_headers    BYTEA,
    content             BYTEA,
    content_type        TEXT,
    settle              TEXT NOT NULL,
    forward             TEXT NOT NULL,
    gas_per_day         TEXT NOT NULL,
    max_timeout_seconds BIGINT NOT NULL,
    status              TEXT NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL,
    closed_at           TIMESTAMPTZ,
    CHECK (status IN ('active', 'closed')),
    CHECK (settle IN ('on_success', 'before_serving')),
    CHECK ((resource_url IS NULL) <> (content IS NULL))
);
CREATE INDEX offers_agent ON offers (agent_id, created_at);

CREATE TABLE x402_income (
    id            UUID PRIMARY KEY NOT NULL,
    agent_id      UUID NOT NULL REFERENCES agents (id),
    offer_id      UUID,
    chain         TEXT NOT NULL,
    asset         TEXT NOT NULL,
    token_address TEXT NOT NULL,
    decimals      BIGINT NOT NULL,
    amount        TEXT NOT NULL,
    payer         TEXT NOT NULL,
    nonce         TEXT NOT NULL,
    valid_before  BIGINT NOT NULL,
    signature_key TEXT NOT NULL,
    status        TEXT NOT NULL,
    settled_by    TEXT,
    gas_held      TEXT NOT NULL,
    transfer_id   UUID,
    tx_hash       TEXT,
    fee           TEXT,
    outcome       TEXT,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    settled_at    TIMESTAMPTZ,
    CHECK (status IN ('settling', 'settled', 'failed', 'released'))
);
CREATE UNIQUE INDEX x402_income_taken ON x402_income (chain, token_address, payer, nonce);
CREATE UNIQUE INDEX x402_income_in_flight ON x402_income (offer_id, payer) WHERE status = 'settling';
CREATE INDEX x402_income_agent ON x402_income (agent_id, created_at);
CREATE INDEX x402_income_payer ON x402_income (payer, status, updated_at);
CREATE INDEX x402_income_transfer ON x402_income (transfer_id);

CREATE TABLE facilitator_tokens (
    id           UUID PRIMARY KEY NOT NULL,
    agent_id     UUID NOT NULL REFERENCES agents (id),
    token_hash   TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    last_used_at TIMESTAMPTZ,
    deleted_at   TIMESTAMPTZ
);
CREATE INDEX facilitator_tokens_agent ON facilitator_tokens (agent_id, created_at);
