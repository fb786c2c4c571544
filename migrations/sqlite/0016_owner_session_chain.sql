-- An owner session holds while its address is the agent's owner address on this chain (§15); sessions opened before
-- it was recorded (NULL) hold while the address is an owner on any chain, for the 15 minutes they have left.
ALTER TABLE owner_sessions ADD COLUMN chain TEXT;
