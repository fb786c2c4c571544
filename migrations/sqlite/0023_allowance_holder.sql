-- An allowance is kept by the token itself (ERC-20's `allowance(owner, spender)`) or by Permit2 for a token
-- (`allowance(owner, token, spender)`, §18): the ledger keys what it counted by the contract that keeps it (`holder`,
-- lower-case; the token for ERC-20). Rows counted before were all ERC-20 allowances. `transfer_id` names the call or
-- signature whose reservation wrote the row last: a row whose writer never landed (reverted, dropped, cancelled,
-- discarded) counts nothing, so a stale remainder never covers a pull.
CREATE TABLE allowance_ledger_by_holder (
    agent_id   BLOB NOT NULL REFERENCES agents (id),
    chain      TEXT NOT NULL,
    holder     TEXT NOT NULL,
    token      TEXT NOT NULL,
    spender    TEXT NOT NULL,
    remaining  TEXT NOT NULL,
    transfer_id BLOB,
    PRIMARY KEY (agent_id, chain, holder, token, spender)
);
INSERT INTO allowance_ledger_by_holder (agent_id, chain, holder, token, spender, remaining)
    SELECT agent_id, chain, token, token, spender, remaining FROM allowance_ledger;
DROP TABLE allowance_ledger;
ALTER TABLE allowance_ledger_by_holder RENAME TO allowance_ledger;
