-- Idempotency keys per agent (docs/api.md §12): a request claims its key in its own transaction before doing the
-- work (`status_code` NULL while it runs) and stores its answer after. The fingerprint is a hash of the method, the
-- path and the canonical JSON body; `claim_id` tells a claim's owner from whoever took over a stale claim.
CREATE TABLE idempotency_keys (
    agent_id    UUID NOT NULL REFERENCES agents (id),
    idem_key    TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    claim_id    UUID NOT NULL,
    status_code INTEGER,
    body        TEXT,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (agent_id, idem_key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (agent_id, created_at);
