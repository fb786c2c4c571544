-- A waiting x402 payment's request (the caller's URL query and headers, which may hold API keys) is now kept
-- encrypted under the master key and dropped once the payment is decided (§15). Requests stored in plain text by
-- earlier versions are removed, those of resolved payments and of waiting ones alike: a payment waiting across this
-- upgrade can no longer be made on approval (it is refused as unpayable and expires; the agent asks again).
UPDATE approvals SET x402 = json_remove(x402, '$.pending_request') WHERE x402 IS NOT NULL;
