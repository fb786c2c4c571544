-- An allowance is kept by the token itself (ERC-20's `allowance(owner, spender)`) or by Permit2 for a token
-- (`allowance(owner, token, spender)`, §18): the ledger keys what it counted by the contract that keeps it (`holder`,
-- lower-case; the token for ERC-20). Rows counted before were all ERC-20 allowances. `transfer_id` names the call or
-- signature whose reservation wrote the row last: a row whose writer never landed (reverted, dropped, cancelled,
-- discarded) counts nothing, so a stale remainder never covers a pull.
ALTER TABLE allowance_ledger ADD COLUMN holder TEXT;
UPDATE allowance_ledger SET holder = token;
ALTER TABLE allowance_ledger ALTER COLUMN holder SET NOT NULL;
ALTER TABLE allowance_ledger DROP CONSTRAINT allowance_ledger_pkey;
ALTER TABLE allowance_ledger ADD PRIMARY KEY (agent_id, chain, holder, token, spender);
ALTER TABLE allowance_ledger ADD COLUMN transfer_id UUID;
