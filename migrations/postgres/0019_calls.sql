-- Contract calls (§18). A call is a transaction of the agent's wallet like a transfer (`kind` 'transfer': a nonce and a
-- hash of its own); its `call_record` column (JSON) holds the calldata as signed, the function and arguments it was decoded
-- as, and what the simulation showed (balance changes, allowances granted, gas). A call held for approval keeps the
-- same in `approvals.call_record`.
ALTER TABLE transactions ADD COLUMN call_record TEXT;
ALTER TABLE approvals ADD COLUMN call_record TEXT;
-- What a call counts against an asset's windows besides its native value (which its row's `value_wei` counts):
-- each token outflow and each allowance it grants, in base units, under the asset's `asset` spelling (a registry
-- symbol, or a token's lower-case 0x address). Rows of a call that never left (refused, discarded) are removed with
-- it; a waiting call's rows count while it waits, as a waiting transfer's value does.
CREATE TABLE call_outflows (
    transfer_id  UUID NOT NULL,
    agent_id     UUID NOT NULL REFERENCES agents (id),
    chain        TEXT NOT NULL,
    asset        TEXT NOT NULL,
    amount       TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX call_outflows_window ON call_outflows (agent_id, chain, asset, created_at);
CREATE INDEX call_outflows_transfer ON call_outflows (transfer_id);
-- Allowances the service counted (§18), per agent, chain, token and spender (lower-case addresses): what is left of
-- them, in base units. A call's allowance rise counts as an outflow at once and is added here; a pull through an
-- allowance counted here (the allowance falling in the call's simulation) is not counted again and is taken off.
CREATE TABLE allowance_ledger (
    agent_id   UUID NOT NULL REFERENCES agents (id),
    chain      TEXT NOT NULL,
    token      TEXT NOT NULL,
    spender    TEXT NOT NULL,
    remaining  TEXT NOT NULL,
    PRIMARY KEY (agent_id, chain, token, spender)
);
