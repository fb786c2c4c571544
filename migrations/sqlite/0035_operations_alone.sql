-- What the bundler asks of each open user operation's agent every round (§22): whether its key was ever exported
-- and whether one of its operations ever failed validation on chain (such an agent's operations go in bundles of
-- their own). Both are rare; without these the first read went through every audit entry of the agent and the
-- second through every operation it ever had, for each open operation.
CREATE INDEX audit_events_key_exported ON audit_events (agent_id) WHERE action = 'key_exported';
CREATE INDEX user_operations_failed ON user_operations (agent_id, chain) WHERE failed_in IS NOT NULL;
-- The bundler's next nonce (the highest a bundle of the chain took): without it, every bundle the chain ever had.
CREATE INDEX bundles_chain_nonce ON bundles (chain, nonce);
