-- Outgoing transfers: stored signed before broadcast; one nonce per (agent, chain).
CREATE TABLE transactions (
    id               BLOB PRIMARY KEY NOT NULL,
    agent_id         BLOB NOT NULL REFERENCES agents (id),
    chain            TEXT NOT NULL,
    conversation_id  BLOB,
    nonce            INTEGER NOT NULL,
    from_address     TEXT NOT NULL,
    to_address       TEXT NOT NULL,
    value_wei        TEXT NOT NULL,
    gas_limit        INTEGER NOT NULL,
    max_fee_per_gas  TEXT NOT NULL,
    reserved_wei     TEXT NOT NULL,
    actual_cost_wei  TEXT,
    raw_tx           BLOB NOT NULL,
    tx_hash          TEXT NOT NULL,
    status           TEXT NOT NULL,
    block_number     INTEGER,
    gas_used         INTEGER,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    UNIQUE (agent_id, chain, nonce)
);
CREATE INDEX transactions_agent_id ON transactions (agent_id, created_at DESC);
CREATE INDEX transactions_status ON transactions (status);
CREATE UNIQUE INDEX transactions_tx_hash ON transactions (chain, tx_hash);
