-- Named locks shared by instances (sends of one agent and chain, one watcher per chain) as leases: taken, renewed
-- and released in single short statements, so a holder waiting on a node pins no database connection. A lease whose
-- holder died lapses at `expires_at`.
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     UUID NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
