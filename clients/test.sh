#!/usr/bin/env bash
# Tests the typed clients and the MCP examples against a real agentd: a local anvil as "base", agentd (debug build,
# SQLite in a temporary directory, ADMIN_TOKEN set, the builtin chat engine), then
#   clients/typescript   npm test (generates src/schema.ts from web/openapi.json, type-checks, node:test)
#   clients/python       generate.sh (openapi-python-client) and pytest
#   examples/            the TypeScript agent over Streamable HTTP, the Python agent over stdio (`agentd mcp`)
# Installs what it needs (npm ci, a venv in ~/.cache/agentd-python-client); needs network to npm and PyPI once.
#
#   clients/test.sh                       (AGENTD_BIN=path/to/agentd skips the cargo build)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
STARTED=$SECONDS
. scripts/stack.sh

scripts/install.sh test-tools clients
echo "==> generating the Python client (clients/python/generate.sh)"
clients/python/generate.sh >/dev/null
PY="${PYTHON_CLIENT_VENV:-$HOME/.cache/agentd-python-client}/bin/python"
if [ -z "${AGENTD_BIN:-}" ]; then
  echo "==> building agentd (debug)"
  cargo build --quiet
  AGENTD_BIN="$CARGO_TARGET_DIR/debug/agentd"
fi

WORK="$(mktemp -d)"
trap 'stack_stop; rm -rf "$WORK"' EXIT
ADMIN_TOKEN="adm_$(head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
stack_start_anvil
stack_start_agentd "$AGENTD_BIN" "$(stack_free_port)" "$WORK" ADMIN_TOKEN="$ADMIN_TOKEN"
export AGENTD_URL="$STACK_URL" AGENTD_RPC_URL="$STACK_RPC" AGENTD_ADMIN_TOKEN="$ADMIN_TOKEN"

echo "==> TypeScript client (clients/typescript: npm test)"
npm test --prefix clients/typescript --silent

echo "==> Python client (clients/python: pytest)"
(cd clients/python && "$PY" -m pytest -q -p no:cacheprovider)

echo "==> MCP examples"
OWNER="0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
created="$(curl -sf -X POST "$AGENTD_URL/api/agents" -H "Authorization: Bearer $ADMIN_TOKEN" \
  -H 'content-type: application/json' \
  -d "{\"name\": \"MCP example\", \"chains\": [\"base\"], \"capabilities\": [\"read\", \"transact\"],
       \"spending_cap\": 1, \"owner_addresses\": {\"base\": \"$OWNER\"}}")"
field() { printf '%s' "$created" | python3 -c "import json, sys; print(json.load(sys.stdin)$1)"; }
stack_rpc anvil_setBalance "[\"$(field '["wallet_addresses"]["base"]')\", \"0x8AC7230489E80000\"]" >/dev/null
# The token travels in the environment only, never on a command line.
export AGENTD_ACCESS_TOKEN
AGENTD_ACCESS_TOKEN="$(field '["access_token"]')"

expect_sent() { # $1: the example's output
  printf '%s\n' "$1" | sed 's/^/    /'
  grep -q '^tools: .*get_balance' <<<"$1" && grep -Eq '^send_native: (pending|confirmed) 0x[0-9a-f]{64}$' <<<"$1"
}
out="$(node examples/mcp-typescript/agent.mjs "$OWNER" 0.001)"
expect_sent "$out" || { echo "the TypeScript MCP example did not send" >&2; exit 1; }
out="$(AGENTD_BIN="$AGENTD_BIN" DATABASE_URL="$STACK_DATABASE_URL" ENCRYPTION_KEY="$STACK_ENCRYPTION_KEY" \
  RPC_URL_BASE="$STACK_RPC" RUST_LOG=warn "$PY" examples/mcp-python/agent.py "$OWNER" 0.001)"
expect_sent "$out" || { echo "the Python MCP example did not send" >&2; exit 1; }

echo "==> clients and examples passed in $((SECONDS - STARTED)) s"
