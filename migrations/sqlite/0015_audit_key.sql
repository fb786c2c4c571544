-- The audit chain's key (one row): a random HMAC key, encrypted under ENCRYPTION_KEY of `key_version` (re-encrypted
-- by `agentd rotate-key`), holding inside its ciphertext the first entry id it keys.
CREATE TABLE audit_key (
    id          INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    key_version INTEGER NOT NULL,
    ciphertext  BLOB NOT NULL,
    nonce       BLOB NOT NULL,
    created_at  TEXT NOT NULL
);
