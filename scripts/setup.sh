#!/usr/bin/env bash
# Sets up a fresh checkout: a .venv with Python >= 3.11 and orchestrator installed
# (editable) with its dev extra. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "error: orchestrator needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
    exit 1
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
echo "ready: run .venv/bin/orchestrator chat (tests: .venv/bin/pytest)"
