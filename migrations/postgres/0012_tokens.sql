-- ERC-20 transfers: the token contract and its decimals stored with the transfer (NULL for the native coin), so
-- views, events and the watcher know what moved without the registry as it is today. `value_wei` holds the amount
-- in the asset's base units; `to_address` the recipient (the transaction itself goes to the token contract).
ALTER TABLE transactions ADD COLUMN token_address TEXT;
ALTER TABLE transactions ADD COLUMN asset_decimals BIGINT;
ALTER TABLE approvals ADD COLUMN token_address TEXT;
ALTER TABLE approvals ADD COLUMN asset_decimals BIGINT;
