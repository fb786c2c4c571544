-- The rules that asked for an owner's approval of a waiting transfer (§11, §18), as the policy names them: a JSON
-- array such as ["approval_above", "calls.rules[1]"]. NULL on rows held before it was kept.
ALTER TABLE approvals ADD COLUMN held_by TEXT;
