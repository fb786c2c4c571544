-- The audit chain's key (one row): a random HMAC key, encrypted under ENCRYPTION_KEY of `key_version` (re-encrypted
-- by `agentd rotate-key`), holding inside its ciphertext the first entry id it keys.
CREATE TABLE audit_key (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    key_version INTEGER NOT NULL,
    ciphertext  BYTEA NOT NULL,
    nonce       BYTEA NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);
