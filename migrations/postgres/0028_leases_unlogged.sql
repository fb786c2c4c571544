-- The leases are not written to the WAL (issue 36, point 1): a statement that touches only an unlogged table commits
-- without waiting for a WAL flush, where each lease taken or given back cost one. A lease matters only while its
-- holder lives, and no money rests on it: every decision, nonce and signature is taken again in the reserving
-- transaction under the agent's row lock, which is logged and synced. A database crash empties the table (as a
-- failover to a standby does), which is every lease lapsing at once: what a holder paused past `expires_at` already
-- meets (src/store/postgres/lease.rs).
ALTER TABLE leases SET UNLOGGED;
