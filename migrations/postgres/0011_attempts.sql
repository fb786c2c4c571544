-- Stuck transfers (§14): a transfer pending too long is sent again at the same nonce with higher fees, and a cancel
-- replaces it with a zero-value send to the wallet itself. `transactions` keeps the latest attempt (`tx_hash`,
-- `raw_tx`, `max_fee_per_gas`, and `attempt_kind`: `send` or `cancel`); the earlier ones move here, signed bytes
-- included, since any of them may still land. Whichever lands becomes the transfer's `tx_hash` again.
ALTER TABLE transactions ADD COLUMN attempt_kind TEXT NOT NULL DEFAULT 'send';
CREATE TABLE replaced_attempts (
    transfer_id      UUID NOT NULL REFERENCES transactions (id),
    seq              BIGINT NOT NULL,
    tx_hash          TEXT NOT NULL,
    raw_tx           BYTEA NOT NULL,
    max_fee_per_gas  TEXT NOT NULL,
    attempt_kind     TEXT NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (transfer_id, seq)
);
CREATE UNIQUE INDEX replaced_attempts_hash ON replaced_attempts (tx_hash);
