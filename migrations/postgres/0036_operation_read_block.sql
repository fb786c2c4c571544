-- The block a user operation's reads were made at (§22): it was signed after that block was mined, so its event
-- can only be in a later one, and the bundler looks for the events of its open operations from there (less a
-- margin for reorganisations), not through the last 5,000 blocks at every round. Operations stored before it have
-- none and are looked for as before.
ALTER TABLE user_operations ADD COLUMN read_block BIGINT;
