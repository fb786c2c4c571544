#!/usr/bin/env bash
# A one-command demo: a local anvil node as "base" (chain id 8453), agentd against it (release build, SQLite in a
# temporary directory, the builtin chat engine), an agent owned by anvil's dev account #1, funded with 10 ETH,
# and one real transfer through the API, confirmed on chain. It prints the console URL and the agent's token;
# Ctrl-C stops everything and removes the temporary directory.
#
#   scripts/demo.sh                      (DEMO_PORT=8080 by default)
#   DEMO_EXIT_AFTER_SETUP=1 scripts/demo.sh   (stops after the transfer is confirmed; used by the tests)
#   AGENTD_BIN=path/to/agentd scripts/demo.sh (skips the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
PORT="${DEMO_PORT:-8080}"
OWNER="0x70997970C51812dc3A010C7d01b50e0d17dc79C8" # anvil's dev account #1 (a public test key)

. scripts/stack.sh
json_field() { python3 -c "import json, sys; v = json.load(sys.stdin); print(v$1)"; }

if [ ! -x test-tools/node_modules/.bin/anvil ]; then
  echo "==> installing anvil (npm ci in test-tools)"
  npm ci --prefix test-tools --no-audit --no-fund
fi
if [ -z "${AGENTD_BIN:-}" ]; then
  echo "==> building agentd (release)"
  cargo build --release --quiet
  AGENTD_BIN="$CARGO_TARGET_DIR/release/agentd"
fi

WORK="$(mktemp -d)"
cleanup() {
  stack_stop
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

stack_start_anvil
RPC="$STACK_RPC"
rpc() { stack_rpc "$@"; }
stack_start_agentd "$AGENTD_BIN" "$PORT" "$WORK"
AGENTD_PID="$STACK_AGENTD_PID"
BASE="$STACK_URL"

echo "==> creating an agent owned by $OWNER"
created="$(curl -sf -X POST "$BASE/api/agents" -H 'content-type: application/json' \
  -d "{\"name\": \"Demo agent\", \"description\": \"Created by scripts/demo.sh\", \"chains\": [\"base\"],
       \"capabilities\": [\"read\", \"compare\", \"transact\", \"analytics\"], \"spending_cap\": 1,
       \"owner_addresses\": {\"base\": \"$OWNER\"}}")"
AGENT_ID="$(printf '%s' "$created" | json_field '["id"]')"
TOKEN="$(printf '%s' "$created" | json_field '["access_token"]')"
WALLET="$(printf '%s' "$created" | json_field '["wallet_addresses"]["base"]')"

echo "==> funding its wallet $WALLET with 10 ETH (anvil_setBalance)"
rpc anvil_setBalance "[\"$WALLET\", \"0x8AC7230489E80000\"]" >/dev/null

echo "==> sending 0.01 ETH to the owner through the API"
sent="$(curl -sf -X POST "$BASE/api/agents/$AGENT_ID/transfers" -H 'content-type: application/json' \
  -H "X-Agent-Access-Token: $TOKEN" -H "Idempotency-Key: demo-first-transfer" \
  -d "{\"chain\": \"base\", \"to\": \"$OWNER\", \"amount\": \"0.01\"}")"
TRANSFER_ID="$(printf '%s' "$sent" | json_field '["id"]')"
status=""
for _ in $(seq 1 150); do
  status="$(curl -sf "$BASE/api/agents/$AGENT_ID/transfers/$TRANSFER_ID" -H "X-Agent-Access-Token: $TOKEN" \
    | json_field '["status"]')"
  [ "$status" = "confirmed" ] && break
  sleep 0.2
done
TX_HASH="$(curl -sf "$BASE/api/agents/$AGENT_ID/transfers/$TRANSFER_ID" -H "X-Agent-Access-Token: $TOKEN" \
  | json_field '["tx_hash"]')"
if [ "$status" != "confirmed" ]; then
  echo "the transfer is $status, not confirmed; agentd's log:" >&2
  cat "$WORK/agentd.log" >&2
  exit 1
fi

cat <<MSG

  agentd is running at $BASE (anvil as "base" at $RPC)

  Console:       $BASE/
  API reference: $BASE/docs
  Agent:         $AGENT_ID
  Access token:  $TOKEN
  Transfer:      $TRANSFER_ID, 0.01 ETH to $OWNER: $status ($TX_HASH)

  Try:  curl -s $BASE/api/agents/$AGENT_ID/balances -H 'X-Agent-Access-Token: $TOKEN'
        curl -s $BASE/api/chat -H 'content-type: application/json' -H 'X-Agent-Access-Token: $TOKEN' \\
          -d '{"agent_id": "$AGENT_ID", "message": "what is my balance on base"}'

MSG
if [ "${DEMO_EXIT_AFTER_SETUP:-0}" = "1" ]; then
  echo "DEMO_OK transfer=$TRANSFER_ID status=$status"
  exit 0
fi
echo "Press Ctrl-C to stop (the demo's data is removed)."
wait "$AGENTD_PID"
