-- EIP-712 signatures (§18 `sign-typed-data`) are outflows of kind `typed_data`: like an x402 authorization they have
-- no nonce and no transaction hash of the agent's, and are complete once signed (the signature is `raw_tx`, the typed
-- data and its digest are in `call_record`).
ALTER TABLE transactions DROP CONSTRAINT transactions_kind;
ALTER TABLE transactions ADD CONSTRAINT transactions_kind CHECK (kind IN ('transfer', 'x402', 'typed_data'));
ALTER TABLE transactions ADD CONSTRAINT transactions_signature_keys
    CHECK (kind <> 'typed_data' OR (nonce IS NULL AND tx_hash IS NULL AND x402 IS NULL AND call_record IS NOT NULL));
