-- Webhooks (§19). `webhooks`: the endpoints, each with its secret sealed under the master key as wallet keys are
-- (AES-256-GCM, the webhook id as associated data). `webhook_events`: the outbox, one row per event, written in the
-- transaction of the change it reports, with the exact body every attempt sends; `dedup` keeps an event that may be
-- recorded twice (a transfer marked pending again after a fee bump) to one row. The delivery worker fans each event
-- out to the matching endpoints (`fanned_at`), as `webhook_jobs` rows: one per (endpoint, event), due at `next_at`,
-- leased by the instance attempting it. `webhook_deliveries`: one entry per attempt made.
CREATE TABLE webhooks (
    id                BLOB PRIMARY KEY,
    agent_id          BLOB REFERENCES agents (id),
    url               TEXT NOT NULL,
    events            TEXT NOT NULL,
    description       TEXT,
    enabled           BOOLEAN NOT NULL,
    secret_version    INTEGER NOT NULL,
    secret_ciphertext BLOB NOT NULL,
    secret_nonce      BLOB NOT NULL,
    failing_since     TEXT,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);
CREATE INDEX webhooks_agent ON webhooks (agent_id);

CREATE TABLE webhook_events (
    id         BLOB PRIMARY KEY,
    type       TEXT NOT NULL,
    agent_id   BLOB,
    body       TEXT NOT NULL,
    dedup      TEXT UNIQUE,
    fanned_at  TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX webhook_events_unfanned ON webhook_events (created_at) WHERE fanned_at IS NULL;

CREATE TABLE webhook_jobs (
    webhook_id  BLOB NOT NULL,
    event_id    BLOB NOT NULL,
    state       TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    round       INTEGER NOT NULL,
    next_at     TEXT NOT NULL,
    lease_until TEXT,
    PRIMARY KEY (webhook_id, event_id)
);
CREATE INDEX webhook_jobs_due ON webhook_jobs (next_at) WHERE state = 'pending';

CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id      BLOB NOT NULL,
    event_id        BLOB NOT NULL,
    type            TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    status_code     INTEGER,
    error           TEXT,
    response        TEXT,
    duration_ms     INTEGER NOT NULL,
    at              TEXT NOT NULL,
    next_attempt_at TEXT
);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, id);
