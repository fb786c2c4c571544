-- Agents, their custodial keys and addresses, access tokens (hashes only), reissue challenges, audit events.
CREATE TABLE agents (
    id               BLOB PRIMARY KEY NOT NULL,
    name             TEXT NOT NULL,
    description      TEXT,
    chains           TEXT NOT NULL,
    capabilities     TEXT NOT NULL,
    spending_cap_wei TEXT NOT NULL,
    is_active        BOOLEAN NOT NULL DEFAULT 1,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE INDEX agents_created_at ON agents (created_at DESC, id DESC);

CREATE TABLE wallet_keys (
    agent_id    BLOB PRIMARY KEY NOT NULL REFERENCES agents (id),
    scheme      TEXT NOT NULL,
    address     TEXT NOT NULL,
    ciphertext  BLOB NOT NULL,
    nonce       BLOB NOT NULL,
    key_version INTEGER NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE TABLE wallet_addresses (
    agent_id BLOB NOT NULL REFERENCES agents (id),
    chain    TEXT NOT NULL,
    address  TEXT NOT NULL,
    PRIMARY KEY (agent_id, chain)
);

CREATE TABLE owner_addresses (
    agent_id BLOB NOT NULL REFERENCES agents (id),
    chain    TEXT NOT NULL,
    address  TEXT NOT NULL,
    PRIMARY KEY (agent_id, chain)
);

CREATE TABLE access_tokens (
    token_hash TEXT PRIMARY KEY NOT NULL,
    agent_id   BLOB NOT NULL REFERENCES agents (id),
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE INDEX access_tokens_agent_id ON access_tokens (agent_id);

CREATE TABLE reissue_challenges (
    nonce      TEXT PRIMARY KEY NOT NULL,
    agent_id   BLOB NOT NULL REFERENCES agents (id),
    message    TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at    TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX reissue_challenges_agent_id ON reissue_challenges (agent_id);

CREATE TABLE audit_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id   BLOB NOT NULL REFERENCES agents (id),
    action     TEXT NOT NULL,
    actor      TEXT NOT NULL,
    detail     TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX audit_events_agent_id ON audit_events (agent_id);
