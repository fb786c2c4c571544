-- For a call or typed data held by `approval_above` (§11, §18): the policy's key of the asset whose count was above
-- the threshold recorded in `held_above` (`base:USDC`, or `base:<token address>` for a token outside the registry),
-- and the decimals that asset's limits are written in (0, base units, for a token outside the registry). A call's
-- outflows are per asset, so the threshold needs its asset named. NULL for a transfer or an x402 payment (the asset
-- is the row's) and on rows held before it was kept.
ALTER TABLE approvals ADD COLUMN held_above_asset TEXT;
ALTER TABLE approvals ADD COLUMN held_above_decimals INTEGER;
