-- Policies (one JSON document per agent), transfers waiting for an owner's approval, and the asset of each transfer.
CREATE TABLE policies (
    agent_id   UUID PRIMARY KEY REFERENCES agents (id),
    policy     TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- A transfer the policy held back: no nonce and no signature until it is approved, when it moves to `transactions`
-- under the same id. Its reservation counts in `spending` while it waits.
CREATE TABLE approvals (
    id              UUID PRIMARY KEY,
    agent_id        UUID NOT NULL REFERENCES agents (id),
    chain           TEXT NOT NULL,
    asset           TEXT NOT NULL,
    conversation_id UUID,
    from_address    TEXT NOT NULL,
    to_address      TEXT NOT NULL,
    value_wei       TEXT NOT NULL,
    gas_limit       BIGINT NOT NULL,
    max_fee_per_gas TEXT NOT NULL,
    reserved_wei    TEXT NOT NULL,
    status          TEXT NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX approvals_agent_status ON approvals (agent_id, status);
CREATE INDEX approvals_status ON approvals (status, chain);

-- The asset symbol of each transfer (native transfers so far: the chain's native symbol).
ALTER TABLE transactions ADD COLUMN asset TEXT NOT NULL DEFAULT '';
UPDATE transactions SET asset = CASE chain WHEN 'polygon' THEN 'POL' ELSE 'ETH' END;
CREATE INDEX transactions_agent_asset ON transactions (agent_id, chain, asset, created_at);
