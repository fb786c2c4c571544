-- EIP-712 signatures (§18 `sign-typed-data`) are outflows of kind `typed_data`: like an x402 authorization they have
-- no nonce and no transaction hash of the agent's, and are complete once signed (the signature is `raw_tx`, the typed
-- data and its digest are in `call_record`). SQLite cannot change a CHECK: the table is rebuilt as in 0014, with
-- `replaced_attempts`, which refers to it, saved and restored around the rebuild.
CREATE TABLE replaced_attempts_saved AS SELECT * FROM replaced_attempts;
DROP TABLE replaced_attempts;
CREATE TABLE transactions_rebuilt (
    id               BLOB PRIMARY KEY NOT NULL,
    agent_id         BLOB NOT NULL REFERENCES agents (id),
    chain            TEXT NOT NULL,
    conversation_id  BLOB,
    nonce            INTEGER,
    from_address     TEXT NOT NULL,
    to_address       TEXT NOT NULL,
    value_wei        TEXT NOT NULL,
    gas_limit        INTEGER NOT NULL,
    max_fee_per_gas  TEXT NOT NULL,
    reserved_wei     TEXT NOT NULL,
    actual_cost_wei  TEXT,
    raw_tx           BLOB NOT NULL,
    tx_hash          TEXT,
    status           TEXT NOT NULL,
    block_number     INTEGER,
    gas_used         INTEGER,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    asset            TEXT NOT NULL DEFAULT '',
    fills            BLOB,
    attempt_kind     TEXT NOT NULL DEFAULT 'send',
    token_address    TEXT,
    asset_decimals   INTEGER,
    kind             TEXT NOT NULL DEFAULT 'transfer',
    x402             TEXT,
    call_record      TEXT,
    CHECK (kind IN ('transfer', 'x402', 'typed_data')),
    CHECK (kind <> 'transfer' OR (nonce IS NOT NULL AND nonce >= 0 AND tx_hash IS NOT NULL AND x402 IS NULL)),
    CHECK (kind <> 'x402' OR (nonce IS NULL AND tx_hash IS NULL AND x402 IS NOT NULL)),
    CHECK (kind <> 'typed_data' OR (nonce IS NULL AND tx_hash IS NULL AND x402 IS NULL AND call_record IS NOT NULL))
);
INSERT INTO transactions_rebuilt (id, agent_id, chain, conversation_id, nonce, from_address, to_address, value_wei,
    gas_limit, max_fee_per_gas, reserved_wei, actual_cost_wei, raw_tx, tx_hash, status, block_number, gas_used,
    created_at, updated_at, asset, fills, attempt_kind, token_address, asset_decimals, kind, x402, call_record)
SELECT id, agent_id, chain, conversation_id, nonce, from_address, to_address, value_wei, gas_limit, max_fee_per_gas,
    reserved_wei, actual_cost_wei, raw_tx, tx_hash, status, block_number, gas_used, created_at, updated_at, asset,
    fills, attempt_kind, token_address, asset_decimals, kind, x402, call_record
FROM transactions;
DROP TABLE transactions;
ALTER TABLE transactions_rebuilt RENAME TO transactions;
CREATE INDEX transactions_agent_id ON transactions (agent_id, created_at DESC);
CREATE INDEX transactions_status ON transactions (status);
CREATE UNIQUE INDEX transactions_tx_hash ON transactions (chain, tx_hash) WHERE kind = 'transfer';
CREATE INDEX transactions_agent_asset ON transactions (agent_id, chain, asset, created_at);
CREATE UNIQUE INDEX transactions_nonce ON transactions (agent_id, chain, nonce) WHERE fills IS NULL AND kind = 'transfer';
CREATE INDEX transactions_fills ON transactions (fills) WHERE fills IS NOT NULL;
CREATE INDEX transactions_open_x402 ON transactions (agent_id, chain, kind, status);
CREATE TABLE replaced_attempts (
    transfer_id      BLOB NOT NULL REFERENCES transactions (id),
    seq              INTEGER NOT NULL,
    tx_hash          TEXT NOT NULL,
    raw_tx           BLOB NOT NULL,
    max_fee_per_gas  TEXT NOT NULL,
    attempt_kind     TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    PRIMARY KEY (transfer_id, seq)
);
INSERT INTO replaced_attempts (transfer_id, seq, tx_hash, raw_tx, max_fee_per_gas, attempt_kind, created_at)
SELECT transfer_id, seq, tx_hash, raw_tx, max_fee_per_gas, attempt_kind, created_at FROM replaced_attempts_saved;
DROP TABLE replaced_attempts_saved;
CREATE UNIQUE INDEX replaced_attempts_hash ON replaced_attempts (tx_hash);
