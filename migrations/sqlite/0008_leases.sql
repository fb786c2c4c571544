-- Named locks shared by instances as leases (see the PostgreSQL migration). SQLite serves one instance per file and
-- locks in process, so it never writes this table; it exists to keep the two schemas the same.
CREATE TABLE leases (
    name       TEXT PRIMARY KEY NOT NULL,
    holder     BLOB NOT NULL,
    expires_at TEXT NOT NULL
);
