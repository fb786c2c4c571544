-- An Idempotency-Key claim is a lease its request renews while it runs (`held_until`): only a claim whose lease ran
-- out may be taken over, and only if it moved no money (`acted_at` NULL). A reservation made under a claim checks that
-- the claim is still its own and sets `acted_at` in its transaction (docs/api.md §12). Claims left unanswered by an
-- earlier version count as having moved money: they are never taken over, and expire with their 24 h.
ALTER TABLE idempotency_keys ADD COLUMN held_until TEXT;
ALTER TABLE idempotency_keys ADD COLUMN acted_at TEXT;
UPDATE idempotency_keys SET held_until = created_at, acted_at = created_at WHERE status_code IS NULL;
