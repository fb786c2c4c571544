-- On-chain delegations the owner grants an agent's wallet (§21). A delegation is known by its chain and hash (the
-- manager's EIP-712 struct hash, 0x lower-case); the row stays after a `DELETE` (`removed`) so the same hash cannot
-- come back with the agent token. `delegation` is the framework's JSON form as registered (signature included);
-- `status` is `active`, `revoked` (disabled on chain, noticed once) or `removed`; `expired` is read from the
-- timestamp caveat, never stored.
CREATE TABLE delegations (
    id         BLOB PRIMARY KEY,
    agent_id   BLOB NOT NULL REFERENCES agents (id),
    chain      TEXT NOT NULL,
    hash       TEXT NOT NULL,
    delegator  TEXT NOT NULL,
    delegation TEXT NOT NULL,
    status     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    removed_at TEXT,
    UNIQUE (chain, hash)
);
CREATE INDEX delegations_agent ON delegations (agent_id, created_at);
CREATE INDEX delegations_active ON delegations (chain) WHERE status = 'active';
