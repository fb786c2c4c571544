#!/usr/bin/env bash
# Fuzzes the HTTP API with schemathesis (all checks; examples, coverage, fuzzing and stateful phases) against the
# real binary: a fresh SQLite file, the builtin chat engine, a local anvil as "base", ADMIN_TOKEN set. It creates
# an agent with read and transact, funds it, and gives schemathesis the agent token and the admin token.
#
#   scripts/fuzz.sh [seconds]       (default 300; the report is written to target/fuzz/)
#
# Installs schemathesis into a virtualenv under ~/.cache (PyPI) and anvil with the test tools (npm) when missing.
# Exit status: schemathesis's (0 when it found nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_BUDGET="${1:-300}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/agentd-target}"
VENV="${SCHEMATHESIS_VENV:-$HOME/.cache/agentd-schemathesis}"
OUT="target/fuzz"
PORT="${FUZZ_PORT:-18081}"
ANVIL_PORT="${FUZZ_ANVIL_PORT:-18545}"

SCHEMATHESIS_VENV="$VENV" scripts/install.sh schemathesis test-tools
# AGENTD_BIN (a binary already built, as scripts/test.sh passes it) skips the build.
[ -n "${AGENTD_BIN:-}" ] || cargo build --quiet
AGENTD_BIN="${AGENTD_BIN:-$CARGO_TARGET_DIR/debug/agentd}"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
cleanup() {
  kill "${AGENTD_PID:-}" "${ANVIL_PID:-}" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

test-tools/node_modules/.bin/anvil --port "$ANVIL_PORT" --chain-id 8453 --silent &
ANVIL_PID=$!
ADMIN_TOKEN="fuzz-admin-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
BIND_ADDR="127.0.0.1:$PORT" \
  DATABASE_URL="sqlite://$WORK/fuzz.db" \
  ENCRYPTION_KEY="$(head -c 32 /dev/urandom | base64)" \
  ADMIN_TOKEN="$ADMIN_TOKEN" \
  RPC_URL_BASE="http://127.0.0.1:$ANVIL_PORT" \
  RUST_LOG=warn \
  "$AGENTD_BIN" serve > "$OUT/server.log" 2>&1 &
AGENTD_PID=$!
BASE="http://127.0.0.1:$PORT"
for _ in $(seq 1 100); do curl -sf "$BASE/health" >/dev/null && break; sleep 0.1; done

created="$(curl -sf -X POST "$BASE/api/agents" -H 'content-type: application/json' \
  -H "authorization: Bearer $ADMIN_TOKEN" \
  -d '{"name": "fuzz", "chains": ["base"], "capabilities": ["read", "transact"], "spending_cap": 1}')"
TOKEN="$(printf '%s' "$created" | python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])')"
ADDRESS="$(printf '%s' "$created" | python3 -c 'import json, sys; print(json.load(sys.stdin)["wallet_addresses"]["base"])')"
curl -sf -X POST "http://127.0.0.1:$ANVIL_PORT" -H 'content-type: application/json' \
  -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"anvil_setBalance\",\"params\":[\"$ADDRESS\",\"0x56BC75E2D63100000\"]}" >/dev/null

echo "==> schemathesis for ${SECONDS_BUDGET}s against $BASE (report in $OUT)"
set +e
"$VENV/bin/schemathesis" run "$BASE/api/openapi.json" \
  --checks all \
  --max-time "$SECONDS_BUDGET" \
  ${FUZZ_SEED:+--seed "$FUZZ_SEED"} \
  ${FUZZ_MAX_EXAMPLES:+--max-examples "$FUZZ_MAX_EXAMPLES"} \
  --workers 1 \
  --exclude-path-regex 'stream' \
  -H "X-Agent-Access-Token: $TOKEN" \
  -H "Authorization: Bearer $ADMIN_TOKEN" \
  --report junit --report-dir "$OUT" \
  | tee "$OUT/schemathesis.log"
status=${PIPESTATUS[0]}
set -e
# An upstream failure (502/503/504: the fuzz node has no internet and no tokens) is logged as an error by the HTTP
# trace layer; anything else logged at ERROR, or a panic, fails the run.
if grep -E 'panicked|ERROR' "$OUT/server.log" | grep -Evq 'classification=Status code: 50[234] '; then
  echo "the server logged an error or a panic: see $OUT/server.log" >&2
  status=1
fi
exit "$status"
