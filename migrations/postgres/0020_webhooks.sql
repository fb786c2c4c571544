-- Webhooks (§19). `webhooks`: the endpoints, each with its secret sealed under the master key as wallet keys are
-- (AES-256-GCM, the webhook id as associated data). `webhook_events`: the outbox, one row per event, written in the
-- transaction of the change it reports, with the exact body every attempt sends; `dedup` keeps an event that may be
-- recorded twice (a transfer marked pending again after a fee bump) to one row. The delivery worker fans each event
-- out to the matching endpoints (`fanned_at`), as `webhook_jobs` rows: one per (endpoint, event), due at `next_at`,
-- leased by the instance attempting it. `webhook_deliveries`: one entry per attempt made.
CREATE TABLE webhooks (
    id                UUID PRIMARY KEY,
    agent_id          UUID REFERENCES agents (id),
    url               TEXT NOT NULL,
    events            TEXT NOT NULL,
    description       TEXT,
    enabled           BOOLEAN NOT NULL,
    secret_version    INTEGER NOT NULL,
    secret_ciphertext BYTEA NOT NULL,
    secret_nonce      BYTEA NOT NULL,
    failing_since     TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhooks_agent ON webhooks (agent_id);

CREATE TABLE webhook_events (
    id         UUID PRIMARY KEY,
    type       TEXT NOT NULL,
    agent_id   UUID,
    body       TEXT NOT NULL,
    dedup      TEXT UNIQUE,
    fanned_at  TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_events_unfanned ON webhook_events (created_at) WHERE fanned_at IS NULL;

CREATE TABLE webhook_jobs (
    webhook_id  UUID NOT NULL,
    event_id    UUID NOT NULL,
    state       TEXT NOT NULL,
    attempts    BIGINT NOT NULL,
    round       BIGINT NOT NULL,
    next_at     TIMESTAMPTZ NOT NULL,
    lease_until TIMESTAMPTZ,
    PRIMARY KEY (webhook_id, event_id)
);
CREATE INDEX webhook_jobs_due ON webhook_jobs (next_at) WHERE state = 'pending';

CREATE TABLE webhook_deliveries (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id      UUID NOT NULL,
    event_id        UUID NOT NULL,
    type            TEXT NOT NULL,
    attempt         BIGINT NOT NULL,
    status_code     BIGINT,
    error           TEXT,
    response        TEXT,
    duration_ms     BIGINT NOT NULL,
    at              TIMESTAMPTZ NOT NULL,
    next_attempt_at TIMESTAMPTZ
);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, id);
