#!/usr/bin/env bash
# Runs the console's browser tests in headless Chromium against the real agentd debug binary and anvil.
# Needs: the binary (the caller builds it: cargo build), anvil (npm ci --prefix test-tools), /usr/bin/chromium
# (web/tests/setup.sh); first-hour-demo.test.mjs runs scripts/demo.sh with that binary (bash, curl, python3).
# Screenshots go to target/browser-artifacts/ in the checkout (BROWSER_ARTIFACTS overrides); target/ is git-ignored,
# so CI keeps them as artifacts without committing them.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/agentd-target}"
AGENTD_BIN="${AGENTD_BIN:-$CARGO_TARGET_DIR/debug/agentd}"
export AGENTD_BIN

if [ ! -x "$AGENTD_BIN" ]; then
  echo "error: the agentd binary is missing at $AGENTD_BIN: build it first (cargo build), or set AGENTD_BIN" >&2
  exit 1
fi
if [ ! -x ../test-tools/node_modules/.bin/anvil ]; then
  echo "error: anvil is missing: npm ci --prefix test-tools" >&2
  exit 1
fi
if [ ! -x /usr/bin/chromium ]; then
  echo "error: /usr/bin/chromium is missing: run web/tests/setup.sh" >&2
  exit 1
fi
if [ ! -d node_modules/playwright-core ]; then
  npm ci --no-audit --no-fund
fi
export BROWSER_ARTIFACTS="${BROWSER_ARTIFACTS:-$(cd .. && pwd)/target/browser-artifacts}"
echo "==> browser tests (screenshots in $BROWSER_ARTIFACTS)"
# Two files at a time: each starts its own agentd, anvil and browser on ports of its own, and mostly waits on them
# (73 tests in 197 s one file at a time, 93 s two at a time on this 2-core machine).
exec node --test --test-concurrency="${BROWSER_TEST_CONCURRENCY:-2}" tests/console.test.mjs tests/navigation.test.mjs tests/delegations.test.mjs tests/guardrails.test.mjs tests/history.test.mjs tests/x402.test.mjs tests/calls.test.mjs tests/webhooks.test.mjs tests/first-hour-console.test.mjs tests/first-hour-approvals.test.mjs tests/first-hour-demo.test.mjs tests/sponsorship.test.mjs tests/offers.test.mjs tests/layout.test.mjs
