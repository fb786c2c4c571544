-- The `approval_above` threshold in force when a transfer or an x402 payment was held by that rule (§11), in base
-- units of its asset as a decimal string, so that the approval shows the figure that held it whatever the policy
-- says since. NULL when approval_above did not hold it, for a held call, and on rows held before it was kept.
ALTER TABLE approvals ADD COLUMN held_above TEXT;
