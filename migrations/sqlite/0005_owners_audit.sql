-- Owner authority (Sign-In with Ethereum challenges, owner sessions by token hash) and the hash-chained audit log.
CREATE TABLE owner_challenges (
    nonce      TEXT PRIMARY KEY NOT NULL,
    agent_id   BLOB NOT NULL REFERENCES agents (id),
    chain      TEXT NOT NULL,
    address    TEXT NOT NULL,
    message    TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at    TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX owner_challenges_agent_id ON owner_challenges (agent_id);

CREATE TABLE owner_sessions (
    token_hash TEXT PRIMARY KEY NOT NULL,
    agent_id   BLOB NOT NULL REFERENCES agents (id),
    address    TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX owner_sessions_agent_id ON owner_sessions (agent_id);

-- Each entry's hash covers the entry and the previous entry's hash (prev_hash); rows written before this
-- migration have none and precede the chain.
ALTER TABLE audit_events ADD COLUMN prev_hash TEXT;
ALTER TABLE audit_events ADD COLUMN hash TEXT;

-- The chain's head: the newest entry's id and hash, updated in the same transaction as each append, so that
-- removing the newest entries is detected too.
CREATE TABLE audit_head (
    id       INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    entry_id INTEGER NOT NULL,
    hash     TEXT NOT NULL
);
INSERT INTO audit_head (id, entry_id, hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
