#!/usr/bin/env bash
# Generates the typed client package `agentd_client/` from the repository's OpenAPI document (web/openapi.json) with
# the pinned openapi-python-client (and ruff, which formats its output). The package is not committed: it is
# generated from the committed document, so it never lags behind it.
#
#   clients/python/generate.sh            (uses the venv of PYTHON_CLIENT_VENV, default ~/.cache/agentd-python-client)
set -euo pipefail
cd "$(dirname "$0")"
VENV="${PYTHON_CLIENT_VENV:-$HOME/.cache/agentd-python-client}"
PYTHON_CLIENT_VENV="$VENV" ../../scripts/install.sh clients
rm -rf agentd_client
PATH="$VENV/bin:$PATH" openapi-python-client generate --path ../../web/openapi.json --meta none \
  --output-path agentd_client --config generator.yml
rm -rf agentd_client/.ruff_cache
