-- A transfer that can no longer land would leave its nonce unused and every later transfer of the wallet waiting
-- behind it. Its nonce is then filled by a zero-value send to the wallet itself, stored as a transfer of its own that
-- names the one it fills (`fills`). Both are open at the same nonce until one of them lands, so the nonce stays unique
-- among transfers that fill nothing. SQLite cannot drop a table constraint: the table is rebuilt (no table refers to it).
CREATE TABLE transactions_rebuilt (
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
    asset            TEXT NOT NULL DEFAULT '',
    fills            BLOB
);
INSERT INTO transactions_rebuilt (id, agent_id, chain, conversation_id, nonce, from_address, to_address, value_wei,
    gas_limit, max_fee_per_gas, reserved_wei, actual_cost_wei, raw_tx, tx_hash, status, block_number, gas_used,
    created_at, updated_at, asset)
SELECT id, agent_id, chain, conversation_id, nonce, from_address, to_address, value_wei, gas_limit, max_fee_per_gas,
    reserved_wei, actual_cost_wei, raw_tx, tx_hash, status, block_number, gas_used, created_at, updated_at, asset
FROM transactions;
DROP TABLE transactions;
ALTER TABLE transactions_rebuilt RENAME TO transactions;
CREATE INDEX transactions_agent_id ON transactions (agent_id, created_at DESC);
CREATE INDEX transactions_status ON transactions (status);
CREATE UNIQUE INDEX transactions_tx_hash ON transactions (chain, tx_hash);
CREATE INDEX transactions_agent_asset ON transactions (agent_id, chain, asset, created_at);
CREATE UNIQUE INDEX transactions_nonce ON transactions (agent_id, chain, nonce) WHERE fills IS NULL;
CREATE INDEX transactions_fills ON transactions (fills) WHERE fills IS NOT NULL;
