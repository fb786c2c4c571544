-- Owner authority (Sign-In with Ethereum challenges, owner sessions by token hash) and the hash-chained audit log.
CREATE TABLE owner_challenges (
    nonce      TEXT PRIMARY KEY,
    agent_id   UUID NOT NULL REFERENCES agents (id),
    chain      TEXT NOT NULL,
    address    TEXT NOT NULL,
    message    TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    used_at    TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX owner_challenges_agent_id ON owner_challenges (agent_id);

CREATE TABLE owner_sessions (
    token_hash TEXT PRIMARY KEY,
    agent_id   UUID NOT NULL REFERENCES agents (id),
    address    TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX owner_sessions_agent_id ON owner_sessions (agent_id);

-- Each entry's hash covers the entry and the previous entry's hash (prev_hash); rows written before this
-- migration have none and precede the chain.
ALTER TABLE audit_events ADD COLUMN prev_hash TEXT;
ALTER TABLE audit_events ADD COLUMN hash TEXT;

-- The chain's head: the newest entry's id and hash, updated (under FOR UPDATE) in the same transaction as each
-- append, so that appends are serialised across instances and removing the newest entries is detected too.
CREATE TABLE audit_head (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    entry_id BIGINT NOT NULL,
    hash     TEXT NOT NULL
);
INSERT INTO audit_head (id, entry_id, hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
