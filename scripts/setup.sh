#!/usr/bin/env bash
# Create .venv and install agentfsm (editable, strict mode, so mypy follows the
# package-dir mapping) with its development tools; install system tools when root.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: agentfsm needs Python 3.11 or newer ($python is older)" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev,postgres]' --config-settings editable_mode=strict
# System tools: Graphviz's dot renders diagrams; spin cross-checks the verifier.
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
command -v spin >/dev/null 2>&1 || missing+=(spin)
# PostgreSQL's server: the store for several workers; its tests start a private cluster.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${missing[*]} from the system's packages"
    (apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1) || {
      apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1
    } || echo "setup: could not install ${missing[*]}; install them by hand" >&2
  else
    echo "setup: please install ${missing[*]} (not root, so not installing them)" >&2
  fi
fi
# Mermaid's own parser checks the generated Mermaid diagrams (tests skip without npm).
if command -v npm >/dev/null 2>&1; then
  lock=tests/mermaid/package-lock.json
  if [ ! tests/mermaid/node_modules/.package-lock.json -nt "$lock" ]; then
    (cd tests/mermaid && npm ci --no-audit --no-fund --loglevel=error >/dev/null) \
      || echo "setup: npm ci in tests/mermaid failed; the Mermaid grammar test will fail" >&2
  fi
else
  echo "setup: npm not found; the Mermaid grammar test will be skipped" >&2
fi
