-- Gas the operator sponsors (§22). A sponsored outflow is a `transactions` row of kind `user_op`: `nonce` is its
-- place in the agent's EntryPoint sequence (key 0), `tx_hash` the transaction its `UserOperationEvent` appeared in
-- (NULL until then; several operations share one bundle), `raw_tx` the signed packed operation. Its sponsorship
-- part is in `user_operations`; the bundles the sponsor key signs are in `bundles`; each chain's sponsor key in
-- `sponsor_keys` (sealed like a wallet key, or in the PKCS#11 token); each agent's daily budget in `sponsorships`.
-- SQLite cannot change a CHECK: the table is rebuilt as in 0021, with `replaced_attempts` saved and restored.
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
    delegation       TEXT,
    delegation_id    BLOB,
    audit_owed       TEXT,
    CHECK (kind IN ('transfer', 'x402', 'typed_data', 'user_op')),
    CHECK (kind <> 'transfer' OR (nonce IS NOT NULL AND nonce >= 0 AND tx_hash IS NOT NULL AND x402 IS NULL)),
    CHECK (kind <> 'x402' OR (nonce IS NULL AND tx_hash IS NULL AND x402 IS NOT NULL)),
    CHECK (kind <> 'typed_data' OR (nonce IS NULL AND tx_hash IS NULL AND x402 IS NULL AND call_record IS NOT NULL)),
    CHECK (kind <> 'user_op' OR (nonce IS NOT NULL AND nonce >= 0 AND x402 IS NULL AND fills IS NULL))
);
INSERT INTO transactions_rebuilt (id, agent_id, chain, conversation_id, nonce, from_address, to_address, value_wei,
    gas_limit, max_fee_per_gas, reserved_wei, actual_cost_wei, raw_tx, tx_hash, status, block_number, gas_used,
    created_at, updated_at, asset, fills, attempt_kind, token_address, asset_decimals, kind, x402, call_record,
    delegation, delegation_id, audit_owed)
SELECT id, agent_id, chain, conversation_id, nonce, from_address, to_address, value_wei, gas_limit, max_fee_per_gas,
    reserved_wei, actual_cost_wei, raw_tx, tx_hash, status, block_number, gas_used, created_at, updated_at, asset,
    fills, attempt_kind, token_address, asset_decimals, kind, x402, call_record, delegation, delegation_id, audit_owed
FROM transactions;
DROP TABLE transactions;
ALTER TABLE transactions_rebuilt RENAME TO transactions;
CREATE INDEX transactions_agent_id ON transactions (agent_id, created_at DESC);
CREATE INDEX transactions_status ON transactions (status);
CREATE UNIQUE INDEX transactions_tx_hash ON transactions (chain, tx_hash) WHERE kind = 'transfer';
CREATE INDEX transactions_agent_asset ON transactions (agent_id, chain, asset, created_at);
CREATE UNIQUE INDEX transactions_nonce ON transactions (agent_id, chain, nonce) WHERE fills IS NULL AND kind = 'transfer';
CREATE UNIQUE INDEX transactions_op_nonce ON transactions (agent_id, chain, nonce) WHERE kind = 'user_op';
CREATE INDEX transactions_fills ON transactions (fills) WHERE fills IS NOT NULL;
CREATE INDEX transactions_open_x402 ON transactions (agent_id, chain, kind, status);
CREATE INDEX transactions_delegation ON transactions (delegation_id, status) WHERE delegation_id IS NOT NULL;
CREATE INDEX transactions_audit_owed ON transactions (created_at) WHERE audit_owed IS NOT NULL;
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

-- One key per chain, made at the first start where the chain is sponsorable; `key_id` is what seals it (the vault's
-- associated data, the token's label), a UUID derived from the chain's name.
CREATE TABLE sponsor_keys (
    chain       TEXT PRIMARY KEY NOT NULL,
    key_id      BLOB NOT NULL,
    scheme      TEXT NOT NULL,
    address     TEXT NOT NULL,
    ciphertext  BLOB NOT NULL,
    nonce       BLOB NOT NULL,
    key_version INTEGER NOT NULL,
    created_at  TEXT NOT NULL
);

-- The operator's daily gas budget for an agent on a chain, in wei (decimal text); "0" ends it.
CREATE TABLE sponsorships (
    agent_id   BLOB NOT NULL REFERENCES agents (id),
    chain      TEXT NOT NULL,
    per_day    TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (agent_id, chain)
);

-- What a user operation holds of its sponsorship: its maximum cost from the moment it is signed, its
-- `actualGasCost` once its `UserOperationEvent` is mined; the bundle that carries it; the EIP-7702 authorization
-- (RLP of the signed authorization) its first bundle carries when the agent's address had no code, and the wallet
-- nonce it took. `valid_until` is the paymaster approval's end (unix seconds).
CREATE TABLE user_operations (
    transfer_id         BLOB PRIMARY KEY NOT NULL REFERENCES transactions (id),
    agent_id            BLOB NOT NULL REFERENCES agents (id),
    chain               TEXT NOT NULL,
    user_op_hash        TEXT NOT NULL,
    max_cost            TEXT NOT NULL,
    gas_cost            TEXT,
    valid_until         INTEGER NOT NULL,
    authorization_rlp   BLOB,
    authorization_nonce INTEGER,
    bundle_id           BLOB,
    created_at          TEXT NOT NULL
);
CREATE UNIQUE INDEX user_operations_hash ON user_operations (chain, user_op_hash);
CREATE INDEX user_operations_agent ON user_operations (agent_id, chain, created_at);
CREATE INDEX user_operations_bundle ON user_operations (bundle_id);

-- The `handleOps` transactions the sponsor key signs, at its own nonces (one sequence per chain across instances).
CREATE TABLE bundles (
    id              BLOB PRIMARY KEY NOT NULL,
    chain           TEXT NOT NULL,
    nonce           INTEGER NOT NULL,
    tx_hash         TEXT NOT NULL,
    raw_tx          BLOB NOT NULL,
    gas_limit       INTEGER NOT NULL,
    max_fee_per_gas TEXT NOT NULL,
    status          TEXT NOT NULL,
    gas_cost        TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE UNIQUE INDEX bundles_nonce ON bundles (chain, nonce) WHERE status <> 'replaced';
CREATE INDEX bundles_open ON bundles (chain, status);
