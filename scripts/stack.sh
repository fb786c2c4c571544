# Sourced by scripts/demo.sh and clients/test.sh: starts a local anvil node as "base" (chain id 8453) and agentd
# against it (SQLite in a directory of the caller's, the builtin chat engine). Needs test-tools installed.
#
#   stack_start_anvil                    sets STACK_RPC, STACK_ANVIL_PID
#   stack_start_agentd BIN PORT DIR [VAR=VALUE...]
#                                        sets STACK_URL, STACK_AGENTD_PID, STACK_DATABASE_URL, STACK_ENCRYPTION_KEY
#                                        (its log: DIR/agentd.log)
#   stack_stop                           stops both

stack_free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

stack_rpc() {
  curl -sf -X POST "$STACK_RPC" -H 'content-type: application/json' \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$1\",\"params\":$2}"
}

stack_start_anvil() {
  local port
  port="$(stack_free_port)"
  test-tools/node_modules/.bin/anvil --port "$port" --chain-id 8453 --silent &
  STACK_ANVIL_PID=$!
  STACK_RPC="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do stack_rpc eth_chainId '[]' >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "anvil did not start on $STACK_RPC" >&2
  return 1
}

stack_start_agentd() {
  local bin="$1" port="$2" dir="$3"
  shift 3
  STACK_DATABASE_URL="sqlite://$dir/agentd.db"
  STACK_ENCRYPTION_KEY="$(head -c 32 /dev/urandom | base64)"
  # Exported in a subshell, not passed as `env` arguments: secrets stay off every command line.
  (
    export BIND_ADDR="127.0.0.1:$port" DATABASE_URL="$STACK_DATABASE_URL" ENCRYPTION_KEY="$STACK_ENCRYPTION_KEY" \
      RPC_URL_BASE="$STACK_RPC" LLM_PROVIDER=builtin RUST_LOG="${RUST_LOG:-warn}"
    for assignment in "$@"; do export "$assignment"; done
    exec "$bin" serve > "$dir/agentd.log" 2>&1
  ) &
  STACK_AGENTD_PID=$!
  STACK_URL="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do curl -sf "$STACK_URL/health" >/dev/null && return 0; sleep 0.1; done
  echo "agentd did not start:" >&2
  cat "$dir/agentd.log" >&2
  return 1
}

stack_stop() {
  kill ${STACK_AGENTD_PID:-} ${STACK_ANVIL_PID:-} 2>/dev/null || true
  wait ${STACK_AGENTD_PID:-} ${STACK_ANVIL_PID:-} 2>/dev/null || true
}
