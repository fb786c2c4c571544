-- The next nonce per (agent, chain), kept by the service; and stored events (confirmations) with increasing ids.
CREATE TABLE nonces (
    agent_id   UUID NOT NULL REFERENCES agents (id),
    chain      TEXT NOT NULL,
    next_nonce BIGINT NOT NULL,
    PRIMARY KEY (agent_id, chain)
);

CREATE TABLE events (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation_id UUID,
    agent_id        UUID NOT NULL REFERENCES agents (id),
    kind            TEXT NOT NULL,
    payload         TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX events_conversation_id ON events (conversation_id, id);

-- What counts against the cap per (agent, chain), kept in step with transactions in the same database transactions
-- (reservations of open transfers plus actual costs of settled ones), so that cap checks read one row.
CREATE TABLE spending (
    agent_id  UUID NOT NULL REFERENCES agents (id),
    chain     TEXT NOT NULL,
    spent_wei TEXT NOT NULL,
    PRIMARY KEY (agent_id, chain)
);
