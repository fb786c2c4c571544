-- Outgoing transfers: stored signed before broadcast; one nonce per (agent, chain).
CREATE TABLE transactions (
    id               UUID PRIMARY KEY,
    agent_id         UUID NOT NULL REFERENCES agents (id),
    chain            TEXT NOT NULL,
    conversation_id  UUID,
    nonce            BIGINT NOT NULL,
    from_address     TEXT NOT NULL,
    to_address       TEXT NOT NULL,
    value_wei        TEXT NOT NULL,
    gas_limit        BIGINT NOT NULL,
    max_fee_per_gas  TEXT NOT NULL,
    reserved_wei     TEXT NOT NULL,
    actual_cost_wei  TEXT,
    raw_tx           BYTEA NOT NULL,
    tx_hash          TEXT NOT NULL,
    status           TEXT NOT NULL,
    block_number     BIGINT,
    gas_used         BIGINT,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    UNIQUE (agent_id, chain, nonce)
);
CREATE INDEX transactions_agent_id ON transactions (agent_id, created_at DESC);
CREATE INDEX transactions_status ON transactions (status);
CREATE UNIQUE INDEX transactions_tx_hash ON transactions (chain, tx_hash);
