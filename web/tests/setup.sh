#!/usr/bin/env bash
# Installs headless Chromium from Debian for the browser tests (never a downloaded browser). Idempotent.
set -euo pipefail
exec "$(dirname "$0")/../../scripts/install.sh" chromium
