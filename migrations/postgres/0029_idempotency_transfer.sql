-- The transfer an Idempotency-Key claim moved money with: the id of its first reservation (a transfer, or a transfer
-- held for approval), set with `acted_at` in that reservation's transaction. A repeat that finds the claim's request
-- stopped (its lease ran out, no answer stored) answers that transfer instead of 409 (docs/api.md §12). NULL on claims
-- that moved no money and on claims marked before it was kept: a repeat of those stays 409 until they expire.
ALTER TABLE idempotency_keys ADD COLUMN transfer_id UUID;
