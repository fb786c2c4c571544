-- x402 payments (§16) are authorizations, not transactions of the agent's: they have no nonce and no transaction
-- hash of their own (the settlement, once known, is in `x402`). `nonce` and `tx_hash` become NULL for them instead of
-- a negative placeholder and an `x402:<id>` text, the checks below keep it so, and the nonce and hash keys cover
-- transactions only. SQLite cannot drop NOT NULL: the table is rebuilt, and `replaced_attempts`, which refers to it,
-- is saved and restored around the rebuild (foreign keys stay on inside the migration's transaction).
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
    CHECK (kind IN ('transfer', 'x402')),
    CHECK (kind <> 'transfer' OR (nonce IS NOT NULL AND nonce >= 0 AND tx_hash IS NOT NULL AND x402 IS NULL)),
    CHECK (kind <> 'x402' OR (nonce IS NULL AND tx_hash IS NULL AND x402 IS NOT NULL))
);
INSERT INTO transactions_rebuilt (id, agent_id, chain, conversation_id, nonce, from_address, to_address, value_wei,
    gas_limit, max_fee_per_gas, reserved_wei, actual_cost_wei, raw_tx, tx_hash, status, block_number, gas_used,
    created_at, updated_at, asset, fills, attempt_kind, token_address, asset_decimals, kind, x402)
SELECT id, agent_id, chain, conversation_id, CASE kind WHEN 'x402' THEN NULL ELSE nonce END, from_address, to_address,
    value_wei, gas_limit, max_fee_per_gas, reserved_wei, actual_cost_wei, raw_tx,
    CASE kind WHEN 'x402' THEN NULL ELSE tx_hash END, status, block_number, gas_used, created_at, updated_at, asset,
    fills, attempt_kind, token_address, asset_decimals, kind, x402
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
