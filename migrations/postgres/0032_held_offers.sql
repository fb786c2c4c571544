-- Offers held for the owner's approval (§23 Tools, §11): the `create_offer` tool of a guarded agent stores its offer
-- `awaiting_approval` until `expires_at` (the policy's `approval_ttl_secs`); the owner's decision makes it `active`
-- or `rejected`, and one left past `expires_at` becomes `expired`. `conversation_id` is the chat turn that asked
-- (its stream carries the approval events), `decided_at` when it was decided. `expires_at` is NULL for an offer that
-- never waited (created by the owner or on an unguarded agent).
ALTER TABLE offers DROP CONSTRAINT offers_status_check;
ALTER TABLE offers ADD COLUMN expires_at TIMESTAMPTZ;
ALTER TABLE offers ADD COLUMN conversation_id UUID;
ALTER TABLE offers ADD COLUMN decided_at TIMESTAMPTZ;
ALTER TABLE offers ADD CONSTRAINT offers_status_check
    CHECK (status IN ('active', 'closed', 'awaiting_approval', 'rejected', 'expired'));
ALTER TABLE offers ADD CONSTRAINT offers_waiting_expires CHECK (status <> 'awaiting_approval' OR expires_at IS NOT NULL);
CREATE INDEX offers_waiting ON offers (chain, expires_at) WHERE status = 'awaiting_approval';
