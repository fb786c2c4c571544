#!/usr/bin/env bash
# Runs every test: unit tests and the API suite on SQLite, the money-path suites again with keys in a SoftHSM2
# token (KEY_BACKEND=pkcs11), then the API suite on PostgreSQL, the typed clients and the
# MCP examples (clients/test.sh), schemathesis, the console's browser tests. Installs what the tests need first (the
# anvil EVM node and the MCP client from npm, the x402 Python SDK in a virtual environment, Debian's chromium for the
# browser tests; clients/test.sh its generators and SDKs from npm and PyPI; starts the local PostgreSQL if it is down).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/agentd-target}"
. scripts/steps.sh
trap 'steps_report scripts/test.sh' EXIT
PG_URL="${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
# The in-process apps of the API suite log their warnings and errors into the test's captured output, which a
# failing test prints (tests/api/helpers.rs): a failure under load shows what the service saw.
export TEST_LOG="${TEST_LOG:-warn}"
# The API tests mostly wait (on anvil, the database, the watcher's rounds), so more run at once than there are cores
# (cargo's default): on this 2-core machine the SQLite suite took 85 s with 2 at once and 52 s with 4, the
# PostgreSQL suite 213 s with 2 and 83-92 s with 8 (docs/benchmarks.md, "CI time").
SQLITE_TEST_THREADS="${SQLITE_TEST_THREADS:-4}"
POSTGRES_TEST_THREADS="${POSTGRES_TEST_THREADS:-8}"

step "installing what the tests need beside Rust, where missing (scripts/install.sh)"
./scripts/install.sh

pg_up() { (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
if ! pg_up && command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
  step "starting the local PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
  for _ in $(seq 1 50); do pg_up && break; sleep 0.2; done
fi

step "building the tests and the binary (cargo test --no-run; cargo build)"
env -u TEST_POSTGRES_URL cargo test --no-run --lib --bins --tests
cargo build

step "tests on SQLite"
env -u TEST_POSTGRES_URL cargo test --lib --bins --tests -- --test-threads="$SQLITE_TEST_THREADS"

step "money-path API tests with KEY_BACKEND=pkcs11: every agent's key in a SoftHSM2 token (§20)"
HSM_DIR="$(mktemp -d)"
mkdir -p "$HSM_DIR/tokens"
printf 'directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n' "$HSM_DIR/tokens" >"$HSM_DIR/softhsm2.conf"
HSM_MODULE="$(ls /usr/lib/*/softhsm/libsofthsm2.so /usr/lib/softhsm/libsofthsm2.so 2>/dev/null | head -n 1)"
SOFTHSM2_CONF="$HSM_DIR/softhsm2.conf" softhsm2-util --init-token --free --label agentd-money --pin 1234 --so-pin 12345678 >/dev/null
SOFTHSM2_CONF="$HSM_DIR/softhsm2.conf" TEST_KEY_BACKEND=pkcs11 TEST_PKCS11_MODULE="$HSM_MODULE" \
  TEST_PKCS11_TOKEN=agentd-money TEST_PKCS11_PIN=1234 env -u TEST_POSTGRES_URL cargo test --test api -- \
  money::transfers:: money::transfers_api:: money::tokens:: money::stuck_transfers:: money::nonce_gaps:: \
  money::transfer_concurrency:: x402::pay:: calls::contract:: calls::typed_data:: calls::hostile:: \
  delegations:: sponsored::transfers:: x402::sell:: --test-threads="$SQLITE_TEST_THREADS"
rm -rf "$HSM_DIR"

if ! pg_up; then
  echo "PostgreSQL is not reachable at 127.0.0.1:5432; the PostgreSQL run cannot be done" >&2
  exit 1
fi
# The typed clients and the MCP examples (clients/test.sh: their own anvil and agentd, mostly waiting on npm, Python
# and the node) and schemathesis (its own anvil and agentd on fixed ports, for a fixed time) run beside the
# PostgreSQL run, which mostly waits on the database; their output follows it.
CLIENTS_LOG="$(mktemp)"
AGENTD_BIN="$CARGO_TARGET_DIR/debug/agentd" ./clients/test.sh >"$CLIENTS_LOG" 2>&1 &
CLIENTS_PID=$!
# A fixed seed and a fixed number of cases per operation in the test command, so a run is repeatable on any
# machine (scripts/fuzz.sh alone draws a new seed each time and runs until its time is up).
FUZZ_LOG="$(mktemp)"
AGENTD_BIN="$CARGO_TARGET_DIR/debug/agentd" FUZZ_SEED="${FUZZ_SEED:-20261124}" \
  FUZZ_MAX_EXAMPLES="${FUZZ_MAX_EXAMPLES:-60}" ./scripts/fuzz.sh "${FUZZ_SECONDS:-90}" >"$FUZZ_LOG" 2>&1 &
FUZZ_PID=$!
step "API tests on PostgreSQL (with clients/test.sh and schemathesis in the background)"
TEST_POSTGRES_URL="$PG_URL" cargo test --test api -- --test-threads="$POSTGRES_TEST_THREADS"

step "typed clients and MCP examples against a real agentd (clients/test.sh, started with the PostgreSQL run)"
if ! wait "$CLIENTS_PID"; then
  cat "$CLIENTS_LOG" >&2
  echo "clients/test.sh failed" >&2
  exit 1
fi
cat "$CLIENTS_LOG"

step "schemathesis against the OpenAPI document (all checks, stateful phase included; started with the PostgreSQL run)"
if ! wait "$FUZZ_PID"; then
  cat "$FUZZ_LOG" >&2
  echo "scripts/fuzz.sh failed" >&2
  exit 1
fi
cat "$FUZZ_LOG"

step "the Dockerfile, linted (hadolint)"
./scripts/lint-container.sh

step "browser tests of the web console (headless Chromium)"
./web/tests/run.sh
