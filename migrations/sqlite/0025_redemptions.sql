-- Transfers that redeem an on-chain delegation (§21): `delegation` is what was redeemed and signed, as JSON
-- ({delegation_id, delegator, manager, data}); `delegation_id` repeats its id, so that the reserving transaction sums
-- a delegation's open redemptions by index. A held (approval) transfer keeps its JSON too: approved, it redeems the
-- same delegation, never the agent's own money.
ALTER TABLE transactions ADD COLUMN delegation TEXT;
ALTER TABLE transactions ADD COLUMN delegation_id BLOB;
CREATE INDEX transactions_delegation ON transactions (delegation_id, status) WHERE delegation_id IS NOT NULL;
ALTER TABLE approvals ADD COLUMN delegation TEXT;
