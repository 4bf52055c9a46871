#!/usr/bin/env bash
# A private PostgreSQL cluster for tests and benchmarks: scripts/postgres.sh start|stop|url|status
#
# The cluster lives in .pg/ under the repository (git-ignored; elsewhere under /tmp when the
# server's user cannot reach the repository; $AGENTFSM_PG_DIR names another folder), listens
# on 127.0.0.1 on a free port (kept across restarts, a crash included) and on a Unix socket
# in that folder, and trusts local connections (it holds test data only).
# PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user
# (created by Debian's package) and the package is installed with apt-get when missing.
# `start` prints the URL to connect with; so does `url` while the cluster runs.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
command=${1:-}
db=agentfsm

bindir() {
  if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
  local found
  found=$(compgen -G '/usr/lib/postgresql/*/bin' | sort -V | tail -n 1 || true)
  if [ -z "$found" ] && command -v pg_ctl >/dev/null 2>&1; then found=$(dirname "$(command -v pg_ctl)"); fi
  echo "$found"
}

install_server() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "postgres.sh: no PostgreSQL server found; install it (Debian: apt-get install postgresql)" >&2
    exit 1
  fi
  echo "postgres.sh: installing PostgreSQL from the system's packages" >&2
  (apt-get install -y -qq postgresql >/dev/null 2>&1) || {
    apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq postgresql >/dev/null 2>&1
  } || { echo "postgres.sh: could not install postgresql" >&2; exit 1; }
}

# As root, run the server's tools as the postgres user; otherwise as ourselves. (The server
# must not inherit the start lock's descriptor 9, or it would hold the lock while it runs.)
as_owner() {
  # (from /, which the postgres user can always enter, whatever the caller's directory)
  if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

cluster_dir() {
  if [ -n "${AGENTFSM_PG_DIR:-}" ]; then echo "$AGENTFSM_PG_DIR"; return; fi
  local dir=$repo/.pg
  if [ "$(id -u)" = 0 ] && ! (cd / && runuser -u postgres -- test -x "$repo"); then
    dir=${TMPDIR:-/tmp}/agentfsm-pg-$(echo "$repo" | sha1sum | cut -c1-12)
  fi
  echo "$dir"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Whether PORT can be listened on again (as the server binds it: SO_REUSEADDR), waiting a few
# seconds for the processes of a killed server to let go of it.
port_free() {
  python3 - "$1" <<'PY'
import socket, sys, time
for _ in range(50):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", int(sys.argv[1])))
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
    finally:
        s.close()
sys.exit(1)
PY
}

# A killed server can linger as a zombie (its parent a subreaper that has not reaped it yet):
# pg_ctl would call it running and the server would refuse its lock file.
dead_postmaster() {
  local pid
  pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
  [ -n "$pid" ] && { [ ! -e "/proc/$pid" ] || [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ]; }
}

running() {
  [ -f "$dir/port" ] && [ -f "$dir/data/postmaster.pid" ] && ! dead_postmaster &&
    as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1
}

url() {
  echo "postgresql://$db@127.0.0.1:$(cat "$dir/port")/$db"
}

start() {
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    install_server
    bin=$(bindir)
  fi
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir /var/lib/postgresql --shell /bin/false postgres
  fi
  if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
  if running; then url; return; fi
  # (its socket's lock file names the dead server too, and the new one would refuse it)
  if dead_postmaster; then rm -f "$dir/data/postmaster.pid" "$dir"/.s.PGSQL.*; fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$dir/data" -U "$db" --auth=trust --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1 || {
      cat "$dir/initdb.log" >&2; exit 1; }
  fi
  # The same port as before when it is free (a server restarted after a crash keeps its URL,
  # so clients holding it reconnect); a new one only when another program took it.
  local port
  port=$(cat "$dir/port" 2>/dev/null || true)
  if [ -n "$port" ] && ! port_free "$port"; then
    echo "postgres.sh: port $port is taken by another program; the server moves to a new port" >&2
    port=
  fi
  if [ -z "$port" ]; then port=$(free_port); fi
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c max_connections=200" \
    start >/dev/null 9>&- || { tail -n 20 "$dir/server.log" >&2; exit 1; }
  as_owner sh -c "echo $port > '$dir/port'"
  if ! as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U "$db" -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U "$db" "$db"
  fi
  url
}

stop() {
  if [ -n "$bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
  fi
}

bin=$(bindir)
dir=$(cluster_dir)
case "$command" in
  start) mkdir -p "$dir"; exec 9>>"$dir/lock"; flock 9; start ;;
  stop) stop ;;
  url) if running; then url; else echo "postgres.sh: the cluster is not running (scripts/postgres.sh start)" >&2; exit 1; fi ;;
  status) if running; then echo "running: $(url)"; else echo "stopped"; exit 1; fi ;;
  *) echo "usage: scripts/postgres.sh start|stop|url|status" >&2; exit 2 ;;
esac
