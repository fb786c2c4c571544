-- Gas the operator sponsors (§22). A sponsored outflow is a `transactions` row of kind `user_op`: `nonce` is its
-- place in the agent's EntryPoint sequence (key 0), `tx_hash` the transaction its `UserOperationEvent` appeared in
-- (NULL until then; several operations share one bundle), `raw_tx` the signed packed operation. Its sponsorship
-- part is in `user_operations`; the bundles the sponsor key signs are in `bundles`; each chain's sponsor key in
-- `sponsor_keys` (sealed like a wallet key, or in the PKCS#11 token); each agent's daily budget in `sponsorships`.
ALTER TABLE transactions DROP CONSTRAINT transactions_kind;
ALTER TABLE transactions ADD CONSTRAINT transactions_kind CHECK (kind IN ('transfer', 'x402', 'typed_data', 'user_op'));
ALTER TABLE transactions ADD CONSTRAINT transactions_user_op_keys
    CHECK (kind <> 'user_op' OR (nonce IS NOT NULL AND nonce >= 0 AND x402 IS NULL AND fills IS NULL));
CREATE UNIQUE INDEX transactions_op_nonce ON transactions (agent_id, chain, nonce) WHERE kind = 'user_op';

CREATE TABLE sponsor_keys (
    chain       TEXT PRIMARY KEY NOT NULL,
    key_id      UUID NOT NULL,
    scheme      TEXT NOT NULL,
    address     TEXT NOT NULL,
    ciphertext  BYTEA NOT NULL,
    nonce       BYTEA NOT NULL,
    key_version INTEGER NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE sponsorships (
    agent_id   UUID NOT NULL REFERENCES agents (id),
    chain      TEXT NOT NULL,
    per_day    TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (agent_id, chain)
);

CREATE TABLE user_operations (
    transfer_id         UUID PRIMARY KEY NOT NULL REFERENCES transactions (id),
    agent_id            UUID NOT NULL REFERENCES agents (id),
    chain               TEXT NOT NULL,
    user_op_hash        TEXT NOT NULL,
    max_cost            TEXT NOT NULL,
    gas_cost            TEXT,
    valid_until         BIGINT NOT NULL,
    authorization_rlp   BYTEA,
    authorization_nonce BIGINT,
    bundle_id           UUID,
    created_at          TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX user_operations_hash ON user_operations (chain, user_op_hash);
CREATE INDEX user_operations_agent ON user_operations (agent_id, chain, created_at);
CREATE INDEX user_operations_bundle ON user_operations (bundle_id);

CREATE TABLE bundles (
    id              UUID PRIMARY KEY NOT NULL,
    chain           TEXT NOT NULL,
    nonce           BIGINT NOT NULL,
    tx_hash         TEXT NOT NULL,
    raw_tx          BYTEA NOT NULL,
    gas_limit       BIGINT NOT NULL,
    max_fee_per_gas TEXT NOT NULL,
    status          TEXT NOT NULL,
    gas_cost        TEXT,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX bundles_nonce ON bundles (chain, nonce) WHERE status <> 'replaced';
CREATE INDEX bundles_open ON bundles (chain, status);
