-- A transfer that can no longer land would leave its nonce unused and every later transfer of the wallet waiting
-- behind it. Its nonce is then filled by a zero-value send to the wallet itself, stored as a transfer of its own that
-- names the one it fills (`fills`). Both are open at the same nonce until one of them lands, so the nonce stays unique
-- among transfers that fill nothing.
ALTER TABLE transactions ADD COLUMN fills UUID;
ALTER TABLE transactions DROP CONSTRAINT transactions_agent_id_chain_nonce_key;
CREATE UNIQUE INDEX transactions_nonce ON transactions (agent_id, chain, nonce) WHERE fills IS NULL;
CREATE INDEX transactions_fills ON transactions (fills) WHERE fills IS NOT NULL;
