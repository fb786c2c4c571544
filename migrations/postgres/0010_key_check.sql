-- The master-key check: a short ciphertext under the key the wallet keys are written with (one row). A start with
-- another ENCRYPTION_KEY is refused; `agentd rotate-key` moves it and every wallet key to the next key version.
CREATE TABLE key_check (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    key_version INTEGER NOT NULL,
    ciphertext  BYTEA NOT NULL,
    nonce       BYTEA NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);
