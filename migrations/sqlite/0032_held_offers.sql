-- Offers held for the owner's approval (§23 Tools, §11): the `create_offer` tool of a guarded agent stores its offer
-- `awaiting_approval` until `expires_at` (the policy's `approval_ttl_secs`); the owner's decision makes it `active`
-- or `rejected`, and one left past `expires_at` becomes `expired`. `conversation_id` is the chat turn that asked
-- (its stream carries the approval events), `decided_at` when it was decided. `expires_at` is NULL for an offer that
-- never waited (created by the owner or on an unguarded agent).
-- SQLite cannot change a CHECK: the table is rebuilt (nothing refers to it).
CREATE TABLE offers_rebuilt (
    id                  BLOB PRIMARY KEY NOT NULL,
    agent_id            BLOB NOT NULL REFERENCES agents (id),
    chain               TEXT NOT NULL,
    asset               TEXT NOT NULL,
    token_address       TEXT NOT NULL,
    decimals            INTEGER NOT NULL,
    token_name          TEXT NOT NULL,
    token_version       TEXT NOT NULL,
    price               TEXT NOT NULL,
    description         TEXT NOT NULL,
    resource_url        TEXT,
    resource_method     TEXT,
    mime_type           TEXT,
    resource_headers    BLOB,
    content             BLOB,
    content_type        TEXT,
    settle              TEXT NOT NULL,
    forward             TEXT NOT NULL,
    gas_per_day         TEXT NOT NULL,
    max_timeout_seconds INTEGER NOT NULL,
    status              TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    closed_at           TEXT,
    expires_at          TEXT,
    conversation_id     BLOB,
    decided_at          TEXT,
    CHECK (status IN ('active', 'closed', 'awaiting_approval', 'rejected', 'expired')),
    CHECK (status <> 'awaiting_approval' OR expires_at IS NOT NULL),
    CHECK (settle IN ('on_success', 'before_serving')),
    CHECK ((resource_url IS NULL) <> (content IS NULL))
);
INSERT INTO offers_rebuilt (id, agent_id, chain, asset, token_address, decimals, token_name, token_version, price,
    description, resource_url, resource_method, mime_type, resource_headers, content, content_type, settle, forward,
    gas_per_day, max_timeout_seconds, status, created_at, closed_at)
SELECT id, agent_id, chain, asset, token_address, decimals, token_name, token_version, price, description,
    resource_url, resource_method, mime_type, resource_headers, content, content_type, settle, forward, gas_per_day,
    max_timeout_seconds, status, created_at, closed_at
FROM offers;
DROP TABLE offers;
ALTER TABLE offers_rebuilt RENAME TO offers;
CREATE INDEX offers_agent ON offers (agent_id, created_at);
CREATE INDEX offers_waiting ON offers (chain, expires_at) WHERE status = 'awaiting_approval';
