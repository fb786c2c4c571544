-- Gas the agent does not pay (§22): an operation that failed validation on chain. `failed_in` is the bundle that
-- reverted on it (its agent's operations are carried in bundles of their own from then on); `failed_gas` what such
-- bundles cost the sponsor, counted in that agent's sponsorship.
ALTER TABLE user_operations ADD COLUMN failed_in TEXT;
ALTER TABLE user_operations ADD COLUMN failed_gas TEXT;
