-- The user operations that may still land, by chain: what every sponsored reservation adds up of the paymaster's
-- deposit (§22) and what the bundler carries and follows. Without it each of those reads went through every
-- operation the chain ever had.
CREATE INDEX transactions_open_operations ON transactions (chain) WHERE kind = 'user_op' AND status IN ('signed', 'pending');
