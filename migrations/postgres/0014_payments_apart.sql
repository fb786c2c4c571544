-- x402 payments (§16) are authorizations, not transactions of the agent's: they have no nonce and no transaction
-- hash of their own (the settlement, once known, is in `x402`). `nonce` and `tx_hash` become NULL for them instead of
-- a negative placeholder and an `x402:<id>` text, the checks below keep it so, and the nonce and hash keys cover
-- transactions only.
ALTER TABLE transactions ALTER COLUMN nonce DROP NOT NULL;
ALTER TABLE transactions ALTER COLUMN tx_hash DROP NOT NULL;
UPDATE transactions SET nonce = NULL, tx_hash = NULL WHERE kind = 'x402';
ALTER TABLE transactions ADD CONSTRAINT transactions_kind CHECK (kind IN ('transfer', 'x402'));
ALTER TABLE transactions ADD CONSTRAINT transactions_transfer_keys
    CHECK (kind <> 'transfer' OR (nonce IS NOT NULL AND nonce >= 0 AND tx_hash IS NOT NULL AND x402 IS NULL));
ALTER TABLE transactions ADD CONSTRAINT transactions_payment_keys
    CHECK (kind <> 'x402' OR (nonce IS NULL AND tx_hash IS NULL AND x402 IS NOT NULL));
DROP INDEX transactions_tx_hash;
CREATE UNIQUE INDEX transactions_tx_hash ON transactions (chain, tx_hash) WHERE kind = 'transfer';
DROP INDEX transactions_nonce;
CREATE UNIQUE INDEX transactions_nonce ON transactions (agent_id, chain, nonce) WHERE fills IS NULL AND kind = 'transfer';
