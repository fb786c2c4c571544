-- x402 payments (§16): a transfer of kind `x402` is an off-chain EIP-3009 authorization, not a transaction of the
-- agent's. It has no on-chain nonce of the agent (its `nonce` column holds a negative number unique to the row, so
-- the (agent, chain, nonce) key of real transactions is untouched), `tx_hash` a placeholder until the settlement
-- is known, `raw_tx` the signed payment document, and `x402` (JSON) its url without query, network, EIP-3009 nonce,
-- validBefore, settlement transaction and the paid answer. A payment that waits for approval keeps in `approvals.x402`
-- the exchange to make once approved.
ALTER TABLE transactions ADD COLUMN kind TEXT NOT NULL DEFAULT 'transfer';
ALTER TABLE transactions ADD COLUMN x402 TEXT;
ALTER TABLE approvals ADD COLUMN kind TEXT NOT NULL DEFAULT 'transfer';
ALTER TABLE approvals ADD COLUMN x402 TEXT;
CREATE INDEX transactions_open_x402 ON transactions (agent_id, chain, kind, status);
