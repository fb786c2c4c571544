-- Conversations and their messages (user and assistant turns with the chain calls of each turn).
CREATE TABLE conversations (
    id         BLOB PRIMARY KEY NOT NULL,
    agent_id   BLOB NOT NULL REFERENCES agents (id),
    title      TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX conversations_agent_id ON conversations (agent_id, created_at DESC);

CREATE TABLE messages (
    id              BLOB PRIMARY KEY NOT NULL,
    conversation_id BLOB NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role            TEXT NOT NULL,
    content         TEXT NOT NULL,
    chain_calls     TEXT NOT NULL,
    tokens_used     INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL
);
CREATE INDEX messages_conversation_id ON messages (conversation_id, created_at DESC);
