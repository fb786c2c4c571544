#!/usr/bin/env bash
# A one-command demo: a local anvil node as "base" (chain id 8453) with a test USDC at USDC's base address, WETH,
# a Uniswap V2 USDC/WETH pool and a sample x402 paywall (scripts/demo-chain.mjs); agentd against it (release build,
# SQLite in a temporary directory, the builtin chat engine, an admin token) with gas sponsorship on (§22): the
# operator's paymaster (Pimlico's SingletonPaymaster v0.7 from npm @pimlico/mock-paymaster 0.0.7, scripts/
# paymaster.mjs) against the delegation framework's EntryPoint, trusting and allowlisting agentd's sponsor key, with
# a deposit and ETH for the bundles; an agent owned by anvil's dev account #1, holding 1000 test USDC and no ETH at
# all, whose gas the operator sponsors (0.05 ETH a day): one real USDC transfer through the API and one swap on the
# demo pool as an approve-and-swap batch, both confirmed on chain without a wei of the agent's; then the owner's
# account upgraded by EIP-7702 to the MetaMask Delegation Framework's delegator (deployed on the node from its npm
# bytecode), holding 100 test USDC, and a delegation granting the agent 10 of them a day, signed by the owner and
# registered with agentd (§21); then the agent sells a report over x402 at its own URL (§23) and a second agent,
# holding 10 test USDC and no ETH either, buys it with pay_http from chat, agentd settling the payment itself as a
# user operation of the seller's account, its gas sponsored too. It prints each step, the console URL, the admin and agent tokens, and the shell
# variables that make every call of docs/guide.md run as written. Ctrl-C (or SIGTERM) stops everything and removes
# the temporary directory.
#
#   scripts/demo.sh                           (DEMO_PORT=8080 by default)
#   DEMO_EXIT_AFTER_SETUP=1 scripts/demo.sh   (stops once set up: the transfer and the swap confirmed, the delegation
#                                             registered, the sale settled)
#   AGENTD_BIN=path/to/agentd scripts/demo.sh (skips the release build)
#
# Once ready it prints `DEMO_READY` alone on a line, after the `export NAME=value` lines of the guide's variables
# (tests/api/service/guide.rs reads them, runs the guide, then stops the demo with SIGTERM).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
PORT="${DEMO_PORT:-8080}"
# anvil's dev account #1 and its key: public test values that every anvil node has; never use them elsewhere.
OWNER="0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
OWNER_KEY="0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
# The guide's recipient and the paywall's payee: addresses nobody holds a key to on the demo chain.
RECIPIENT="0x000000000000000000000000000000000000dEaD"
PAY_TO="0x52908400098527886E0F7030069857D2E4169EE7"

. scripts/stack.sh
json_field() { python3 -c "import json, sys; v = json.load(sys.stdin); print(v$1)"; }
# Waits until the demo agent's transfer $1 is confirmed (a minute at most); prints its final status.
await_confirmed() {
  local status=""
  for _ in $(seq 1 300); do
    status="$(curl -sf "$BASE/api/agents/$AGENT_ID/transfers/$1" -H "X-Agent-Access-Token: $TOKEN" | json_field '["status"]')"
    case "$status" in confirmed | reverted | dropped | cancelled) break ;; esac
    sleep 0.2
  done
  printf '%s' "$status"
}
# Stops the demo when a step did not come out as expected, with agentd's log.
fail() {
  echo "$1" >&2
  cat "$WORK/agentd.log" >&2
  exit 1
}

# anvil, cast and solc from npm (test-tools), unless already current.
scripts/install.sh test-tools
if [ -z "${AGENTD_BIN:-}" ]; then
  if [ -x "$CARGO_TARGET_DIR/release/agentd" ]; then
    echo "==> building agentd (release): only what changed since the last build, usually seconds"
  else
    echo "==> building agentd (release) for the first time: about 15 minutes on a 2-core machine, a few on a laptop."
    echo "    Cargo shows its progress below. AGENTD_BIN=path/to/agentd scripts/demo.sh skips the build."
  fi
  cargo build --release
  AGENTD_BIN="$CARGO_TARGET_DIR/release/agentd"
fi

WORK="$(mktemp -d)"
PAYWALL_PID=""
cleanup() {
  [ -n "$PAYWALL_PID" ] && kill "$PAYWALL_PID" 2>/dev/null && wait "$PAYWALL_PID" 2>/dev/null
  stack_stop
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

stack_start_anvil
RPC="$STACK_RPC"

echo "==> deploying the demo contracts: test USDC, WETH, Uniswap V2 with a USDC/WETH pool, the delegation framework"
contracts="$(node scripts/demo-chain.mjs setup "$RPC")"
ROUTER="$(printf '%s' "$contracts" | json_field '["router"]')"
USDC="$(printf '%s' "$contracts" | json_field '["usdc"]')"
WETH="$(printf '%s' "$contracts" | json_field '["weth"]')"
PERMIT_TOKEN="$(printf '%s' "$contracts" | json_field '["permit_token"]')"
DELEGATION_MANAGER="$(printf '%s' "$contracts" | json_field '["delegation_manager"]')"
DELEGATOR_IMPLEMENTATION="$(printf '%s' "$contracts" | json_field '["delegator_implementation"]')"
DELEGATION_ENFORCERS="$(printf '%s' "$contracts" | json_field '["delegation_enforcers"]')"
PERIOD_ENFORCER="$(printf '%s' "$DELEGATION_ENFORCERS" | tr ',' '\n' | sed -n 's/^erc20_period_transfer=//p')"

# Gas the agent does not pay (docs/api.md §22): the operator deploys a paymaster of its own against the EntryPoint
# the framework's EIP7702StatelessDeleGator names; agentd checks both at start and then bundles the agent's user
# operations itself (no bundler or paymaster service).
echo "==> deploying the operator's paymaster: Pimlico's SingletonPaymaster v0.7, from npm @pimlico/mock-paymaster 0.0.7"
sponsoring="$(node scripts/paymaster.mjs deploy "$RPC" "$DELEGATOR_IMPLEMENTATION")"
ENTRY_POINT="$(printf '%s' "$sponsoring" | json_field '["entry_point"]')"
PAYMASTER="$(printf '%s' "$sponsoring" | json_field '["paymaster"]')"

PAYWALL_PORT="$(stack_free_port)"
node scripts/demo-chain.mjs paywall "$RPC" "$PAYWALL_PORT" "$PAY_TO" > "$WORK/paywall.log" 2>&1 &
PAYWALL_PID=$!
PAYWALL_URL="http://127.0.0.1:$PAYWALL_PORT/report"

# A random admin token: owner authority for the console's admin-token field and the guide's operator calls.
ADMIN_TOKEN="adm_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
METRICS_TOKEN="met_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# X402_ALLOW_PRIVATE and WEBHOOK_ALLOW_PRIVATE: the sample paywall (and any webhook receiver you try) is on 127.0.0.1.
# The delegation framework is at the node's own addresses, not at its published ones (agentd's default on base); the
# same goes for the EntryPoint and the account implementation sponsored operations use, and the paymaster is the
# operator's own.
# CONTRACTS_BASE names the demo's router and its permit token, so that the console's call composer offers them from
# the start (USDC and WETH are registry tokens, offered as such).
stack_start_agentd "$AGENTD_BIN" "$PORT" "$WORK" "ADMIN_TOKEN=$ADMIN_TOKEN" "METRICS_TOKEN=$METRICS_TOKEN" \
  X402_ALLOW_PRIVATE=true WEBHOOK_ALLOW_PRIVATE=true \
  "DELEGATION_MANAGER_BASE=$DELEGATION_MANAGER" "DELEGATION_ENFORCERS_BASE=$DELEGATION_ENFORCERS" \
  "CONTRACTS_BASE=Uniswap V2 router=$ROUTER,Permit test token=$PERMIT_TOKEN" \
  "ENTRY_POINT_BASE=$ENTRY_POINT" "ACCOUNT_IMPLEMENTATION_BASE=$DELEGATOR_IMPLEMENTATION" "PAYMASTER_BASE=$PAYMASTER"
AGENTD_PID="$STACK_AGENTD_PID"
BASE="$STACK_URL"
for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$PAYWALL_PORT/free" && break; sleep 0.1; done

# agentd made a sponsor key for base at its first start: the operator trusts and allowlists it on the paymaster, and
# funds the deposit (it pays the operations) and the sponsor (it pays each bundle's gas, which the EntryPoint repays).
SPONSOR="$(curl -sf "$BASE/api/chains" \
  | python3 -c 'import json, sys; print(next(c for c in json.load(sys.stdin) if c["name"] == "base")["sponsorship"]["sponsor"])' \
  2>/dev/null)" || fail "agentd did not find base sponsorable (its log says why):"
echo "==> the operator's part for agentd's sponsor key $SPONSOR, on the paymaster $PAYMASTER:"
node scripts/paymaster.mjs sponsor "$RPC" "$PAYMASTER" "$SPONSOR" 1 1

echo "==> creating an agent owned by $OWNER"
created="$(curl -sf -X POST "$BASE/api/agents" -H 'content-type: application/json' \
  -H "Authorization: Bearer $ADMIN_TOKEN" \
  -d "{\"name\": \"Demo agent\", \"description\": \"Created by scripts/demo.sh\", \"chains\": [\"base\"],
       \"capabilities\": [\"read\", \"compare\", \"transact\", \"analytics\"], \"spending_cap\": 1,
       \"owner_addresses\": {\"base\": \"$OWNER\"}}")"
AGENT_ID="$(printf '%s' "$created" | json_field '["id"]')"
TOKEN="$(printf '%s' "$created" | json_field '["access_token"]')"
WALLET="$(printf '%s' "$created" | json_field '["wallet_addresses"]["base"]')"

echo "==> funding its wallet $WALLET with 1000 test USDC from the local node, and no ETH at all"
node scripts/demo-chain.mjs fund "$RPC" "$WALLET" 0 1000 >/dev/null

echo "==> sponsoring its gas on base, 0.05 ETH a day: PUT /api/agents/$AGENT_ID/sponsorship with the admin token"
curl -sf -X PUT "$BASE/api/agents/$AGENT_ID/sponsorship" -H 'content-type: application/json' \
  -H "Authorization: Bearer $ADMIN_TOKEN" -d '{"chain": "base", "per_day": "0.05"}' >/dev/null

echo "==> sending 1 test USDC to the owner through the API: a user operation of the agent's own address, gas sponsored"
sent="$(curl -sf -X POST "$BASE/api/agents/$AGENT_ID/transfers" -H 'content-type: application/json' \
  -H "X-Agent-Access-Token: $TOKEN" -H "Idempotency-Key: demo-first-transfer" \
  -d "{\"chain\": \"base\", \"to\": \"$OWNER\", \"amount\": \"1\", \"asset\": \"USDC\"}")"
TRANSFER_ID="$(printf '%s' "$sent" | json_field '["id"]')"
status="$(await_confirmed "$TRANSFER_ID")"
[ "$status" = "confirmed" ] || fail "the transfer is $status, not confirmed; agentd's log:"
transfer="$(curl -sf "$BASE/api/agents/$AGENT_ID/transfers/$TRANSFER_ID" -H "X-Agent-Access-Token: $TOKEN")"
TX_HASH="$(printf '%s' "$transfer" | json_field '["tx_hash"]')"
GAS_COST="$(printf '%s' "$transfer" | json_field '["sponsorship"]["gas_cost"]')"
echo "    confirmed in $TX_HASH; its gas, $GAS_COST ETH, came from the paymaster's deposit"

# Calls are the policy's to allow (§18): approving the demo's router on USDC, and swapping there for the agent itself.
echo "==> swapping 10 test USDC for WETH on the demo pool: an approve and the swap as one batch, gas sponsored"
SWAP='swapExactTokensForTokens(uint256,uint256,address[],address,uint256)'
curl -sf -X PUT "$BASE/api/agents/$AGENT_ID/policy" -H 'content-type: application/json' \
  -H "Authorization: Bearer $ADMIN_TOKEN" \
  -d "{\"calls\": {\"default\": \"deny\", \"rules\": [
        {\"chain\": \"base\", \"to\": \"$USDC\", \"function\": \"approve(address,uint256)\",
         \"args\": {\"0\": {\"eq\": \"$ROUTER\"}}, \"action\": \"allow\"},
        {\"chain\": \"base\", \"to\": \"$ROUTER\", \"function\": \"$SWAP\",
         \"args\": {\"3\": {\"eq\": \"\$agent\"}}, \"action\": \"allow\"}]}}" >/dev/null
swapped="$(curl -sf -X POST "$BASE/api/agents/$AGENT_ID/calls" -H 'content-type: application/json' \
  -H "X-Agent-Access-Token: $TOKEN" -H "Idempotency-Key: demo-first-swap" \
  -d "{\"chain\": \"base\", \"calls\": [
        {\"to\": \"$USDC\", \"function\": \"approve(address,uint256)\", \"args\": [\"$ROUTER\", \"10000000\"]},
        {\"to\": \"$ROUTER\", \"function\": \"$SWAP\",
         \"args\": [\"10000000\", \"1\", [\"$USDC\", \"$WETH\"], \"$WALLET\", \"$(($(date +%s) + 1200))\"]}]}")" \
  || fail "agentd refused the approve-and-swap batch; its log:"
SWAP_ID="$(printf '%s' "$swapped" | json_field '["id"]')"
swap_status="$(await_confirmed "$SWAP_ID")"
[ "$swap_status" = "confirmed" ] || fail "the swap is $swap_status, not confirmed; agentd's log:"
AGENT_WEI="$(curl -sf "$BASE/api/agents/$AGENT_ID/balances" -H "X-Agent-Access-Token: $TOKEN" | json_field '["balances"]["base"]["wei"]')"
[ "$AGENT_WEI" = "0" ] || fail "the agent holds $AGENT_WEI wei: it should hold none"
echo "    confirmed as one operation; the agent holds WETH now, and still $AGENT_WEI wei of ETH"

# The owner keeps money in its own account, whose key agentd never sees, and grants the agent a budget the chain
# enforces (docs/api.md §21): the account designates the framework's delegator (EIP-7702), then signs a delegation.
echo "==> upgrading the owner's account $OWNER by EIP-7702 and granting the agent 10 of its 100 test USDC a day"
node scripts/demo-chain.mjs upgrade "$RPC" "$OWNER_KEY" "$DELEGATOR_IMPLEMENTATION" >/dev/null
node scripts/demo-chain.mjs fund "$RPC" "$OWNER" 0 100 >/dev/null
DELEGATION_FILE="$WORK/delegation.json"
node scripts/demo-chain.mjs grant "$RPC" "$OWNER_KEY" "$DELEGATION_MANAGER" "$PERIOD_ENFORCER" "$WALLET" "$USDC" \
  10000000 86400 > "$DELEGATION_FILE"
registered="$(curl -s -X POST "$BASE/api/agents/$AGENT_ID/delegations" -H 'content-type: application/json' \
  -H "X-Agent-Access-Token: $TOKEN" \
  -d "{\"chain\": \"base\", \"delegation\": $(cat "$DELEGATION_FILE")}")"
DELEGATION_ID="$(printf '%s' "$registered" | json_field '.get("id", "")')"
if [ -z "$DELEGATION_ID" ]; then
  echo "agentd did not register the owner's delegation: $registered" >&2
  exit 1
fi

# Agents that earn (docs/api.md §23): the demo agent sells a report at its own x402 URL, agentd being the seller's
# server and its facilitator at once (no hosted facilitator). The settlement (the token's transferWithAuthorization)
# is the seller's outflow of gas: the operator sponsors the demo agent's gas and its address is a smart account
# already, so it goes as a sponsored user operation and the agent still holds no ETH.
echo "==> the demo agent sells a report over x402: an offer of 0.05 test USDC, settled on chain by agentd itself"
offer_body="$(python3 -c 'import json; print(json.dumps({
  "chain": "base", "asset": "USDC", "price": "0.05", "description": "The demo agent\u2019s market report",
  "resource": {"content": json.dumps({"report": "USDC/WETH on the demo pool", "sold_by": "the demo agent, over x402"}),
               "content_type": "application/json"},
  "gas_per_day": "0.005"}))')"
offered="$(curl -sf -X POST "$BASE/api/agents/$AGENT_ID/offers" -H 'content-type: application/json' \
  -H "Authorization: Bearer $ADMIN_TOKEN" -d "$offer_body")" || fail "agentd refused the demo agent's offer; its log:"
OFFER_ID="$(printf '%s' "$offered" | json_field '["id"]')"
OFFER_URL="$(printf '%s' "$offered" | json_field '["url"]')"

echo "==> a second agent buys it with pay_http, from chat: \"pay up to 0.05 USDC for $OFFER_URL\""
buyer="$(curl -sf -X POST "$BASE/api/agents" -H 'content-type: application/json' \
  -H "Authorization: Bearer $ADMIN_TOKEN" \
  -d '{"name": "Buyer agent", "description": "Buys the demo agent'"'"'s report (scripts/demo.sh)", "chains": ["base"],
       "capabilities": ["read", "transact"], "spending_cap": 0.01}')"
BUYER_ID="$(printf '%s' "$buyer" | json_field '["id"]')"
BUYER_TOKEN="$(printf '%s' "$buyer" | json_field '["access_token"]')"
BUYER_WALLET="$(printf '%s' "$buyer" | json_field '["wallet_addresses"]["base"]')"
# An x402 payment is a signature: the buyer needs the price in USDC and no ETH.
node scripts/demo-chain.mjs fund "$RPC" "$BUYER_WALLET" 0 10 >/dev/null
turn="$(curl -sf -X POST "$BASE/api/chat" -H 'content-type: application/json' -H "X-Agent-Access-Token: $BUYER_TOKEN" \
  -d "{\"agent_id\": \"$BUYER_ID\", \"message\": \"pay up to 0.05 USDC for $OFFER_URL\"}")" \
  || fail "the buyer's chat turn failed; agentd's log:"
bought="$(printf '%s' "$turn" | json_field '["chain_calls"][0]["result"]["status"]' 2>/dev/null || true)"
[ "$bought" = "200" ] || fail "the buyer's pay_http did not buy the report: $turn; agentd's log:"
# The seller's income: settled once its settlement is included (the watcher sees the token's AuthorizationUsed).
sale=""
for _ in $(seq 1 300); do
  sale="$(curl -sf "$BASE/api/agents/$AGENT_ID/income?offer=$OFFER_ID" -H "X-Agent-Access-Token: $TOKEN" \
    | json_field '["income"][0]["status"]' 2>/dev/null || true)"
  [ "$sale" = "settled" ] && break
  sleep 0.2
done
[ "$sale" = "settled" ] || fail "the sale is '$sale', not settled; agentd's log:"
SALE_TX="$(curl -sf "$BASE/api/agents/$AGENT_ID/income?offer=$OFFER_ID" -H "X-Agent-Access-Token: $TOKEN" | json_field '["income"][0]["tx_hash"]')"
AGENT_WEI="$(curl -sf "$BASE/api/agents/$AGENT_ID/balances" -H "X-Agent-Access-Token: $TOKEN" | json_field '["balances"]["base"]["wei"]')"
[ "$AGENT_WEI" = "0" ] || fail "the demo agent holds $AGENT_WEI wei after its sale: it should hold none"
echo "    bought: 0.05 test USDC from the buyer's wallet to the demo agent's, settled by agentd in $SALE_TX (gas sponsored)"

cat <<MSG

  agentd is running at $BASE against a LOCAL node: anvil as "base" (chain id 8453) at $RPC.
  Its transactions exist on that node only: block explorers (basescan) do not know them.

  Console:       $BASE/
  API reference: $BASE/docs
  Admin token:   $ADMIN_TOKEN
                 (owner authority over every agent: paste it into the console's admin-token field)
  Agent:         $AGENT_ID
  Access token:  $TOKEN
  Transfer:      $TRANSFER_ID, 1 test USDC to $OWNER: $status ($TX_HASH)
  Swap:          $SWAP_ID, 10 test USDC for WETH as one approve-and-swap batch: $swap_status
  Gas:           the agent holds no ETH at all: the operator sponsors its gas, 0.05 ETH a day (the console's
                 Gas sponsorship page), the settlement of what it sells included. Paymaster $PAYMASTER (1 ETH deposited),
                 agentd's sponsor key $SPONSOR (trusted, allowlisted, 1 ETH for the bundles)
  Paywall:       $PAYWALL_URL (x402, 0.01 test USDC a request)
  Offer:         $OFFER_URL
                 the demo agent's report, 0.05 test USDC over x402 (agentd verifies and settles the payment itself).
                 The Buyer agent bought it with pay_http: the demo agent's History shows its income beside what it
                 spent, its Offers tab the offer and a link to try it (docs/guide.md §15)
  Delegation:    $DELEGATION_ID: the owner's account (EIP-7702) grants the agent 10 test USDC a day
                 (signed delegation: $DELEGATION_FILE; docs/guide.md §14 spends and revokes it)
  Owner wallet:  to grant from the console's Delegations tab, import OWNER_KEY (below) into a browser wallet on
                 this node ($RPC, chain id 8453): its account $OWNER is a delegating account already.
                 Another account becomes one by EIP-7702 to DELEGATOR_IMPLEMENTATION:
        node scripts/demo-chain.mjs upgrade $RPC 0xYOUR_KEY $DELEGATOR_IMPLEMENTATION

  Fund any agent from the local node (test ETH and test USDC, e.g. one made in the console):
        node scripts/demo-chain.mjs fund $RPC 0xAGENT_ADDRESS 1 100

  Try:  curl -s $BASE/api/agents/$AGENT_ID/balances -H 'X-Agent-Access-Token: $TOKEN'
        curl -s $BASE/api/chat -H 'content-type: application/json' -H 'X-Agent-Access-Token: $TOKEN' \\
          -d '{"agent_id": "$AGENT_ID", "message": "what is my balance on base"}'

  docs/guide.md runs as written in a shell (from this directory) with these variables:

export API=$BASE
export ADMIN_TOKEN=$ADMIN_TOKEN
export METRICS_TOKEN=$METRICS_TOKEN
export OWNER_ADDRESS=$OWNER
export OWNER_KEY=$OWNER_KEY
export DELEGATOR_IMPLEMENTATION=$DELEGATOR_IMPLEMENTATION
export RECIPIENT=$RECIPIENT
export DEMO_RPC=$RPC
export PAYWALL_URL=$PAYWALL_URL
export USDC=$USDC
export WETH=$WETH
export ROUTER=$ROUTER
export PERMIT_TOKEN=$PERMIT_TOKEN
export DEMO_AGENT=$AGENT_ID
export DEMO_TOKEN=$TOKEN
export DELEGATION=$DELEGATION_ID
export DELEGATION_FILE=$DELEGATION_FILE
export DELEGATION_MANAGER=$DELEGATION_MANAGER
export PAYMASTER=$PAYMASTER
export ENTRY_POINT=$ENTRY_POINT
export OFFER=$OFFER_ID
export OFFER_URL=$OFFER_URL
export BUYER_AGENT=$BUYER_ID
export BUYER_TOKEN=$BUYER_TOKEN

MSG
if [ "${DEMO_EXIT_AFTER_SETUP:-0}" = "1" ]; then
  echo "DEMO_OK transfer=$TRANSFER_ID status=$status swap=$SWAP_ID delegation=$DELEGATION_ID offer=$OFFER_ID sale=$sale"
  exit 0
fi
echo "Press Ctrl-C to stop (the demo's data is removed)."
echo "DEMO_READY"
wait "$AGENTD_PID"
