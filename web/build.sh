#!/usr/bin/env bash
# Rebuilds the web console into web/dist/ (committed: the binary embeds it, so `cargo build` needs no Node).
# Reproducible: pinned dependencies (package-lock.json, npm ci), fixed file names, no timestamps or source maps.
# The API's TypeScript types are generated from openapi.json, the committed copy of the server's OpenAPI document
# (`agentd openapi > web/openapi.json`; a Rust test fails when it is stale).
# CI runs this, then `git diff --exit-code web/dist` to check that the committed build is current.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
npm run generate
npm run build
