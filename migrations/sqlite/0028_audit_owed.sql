-- A transfer's `transfer_accepted` entry, kept with its reservation in the same transaction (JSON: the actor and what
-- was asked) until the entry written after the node answered takes its place; NULL once written, and on rows stored
-- before it was kept. A process that died between the two leaves it here, and the confirmation watcher writes it.
ALTER TABLE transactions ADD COLUMN audit_owed TEXT;
CREATE INDEX transactions_audit_owed ON transactions (created_at) WHERE audit_owed IS NOT NULL;
