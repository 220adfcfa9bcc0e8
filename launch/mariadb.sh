#!/usr/bin/env bash
# Private MariaDB instance for DBBench: start | stop | status | dir (all idempotent).
#
# The server runs as root from its own folder ($HR1_MARIADB_DIR: socket, pid file, logs, the users'
# records of envs/dbbench/server.py), listening on that unix socket and on 127.0.0.1:$HR1_MARIADB_PORT
# (default 3307, so a system MariaDB on 3306 is never touched). root has an empty password (loopback
# only). The folder defaults to one per user and port on the machine (/tmp/hr1-mariadb-<uid>-<port>),
# not per checkout: a second checkout then finds the server the first started on that port and shares
# it, where a server of its own could not bind the port.
# Every episode creates and drops a database, which on a shared disk costs ~50 ms of fsync per DDL;
# so the datadir ($HR1_MARIADB_DATADIR) defaults to a tmpfs folder under /dev/shm when there is one
# (removed again by `stop`; re-initialising takes ~1 s), else $DIR/data. Durability is off too
# (no binlog, no doublewrite, no fsync): all data here is throwaway.
#   start   initialise the datadir on first use, start mariadbd, wait until it answers (timeout
#           $HR1_MARIADB_START_TIMEOUT, default 60 s); exit 0 when already running
#   stop    shut it down cleanly (SIGTERM, wait, then report); exit 0 when not running
#   status  exit 0 and print "running ..." when it answers, else exit 1
#   dir     print the server's folder
# start and stop hold a lock on the folder, so concurrent starts make one server.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${HR1_MARIADB_PORT:-3307}"
DIR="${HR1_MARIADB_DIR:-/tmp/hr1-mariadb-$(id -u)-$PORT}"
TIMEOUT="${HR1_MARIADB_START_TIMEOUT:-60}"
if [ -n "${HR1_MARIADB_DATADIR:-}" ]; then
  DATA="$HR1_MARIADB_DATADIR"
elif [ -d /dev/shm ] && [ -w /dev/shm ]; then
  DATA="/dev/shm/hr1-mariadb-$(echo "$DIR" | sha1sum | cut -c1-10)/data"   # per checkout
else
  DATA="$DIR/data"
fi
SOCK="$DIR/mariadb.sock"
PIDF="$DIR/mariadb.pid"
LOG="$DIR/mariadb.err"

find_bin() {  # first of the names found on PATH or in /usr/sbin
  for name in "$@"; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
    if [ -x "/usr/sbin/$name" ]; then echo "/usr/sbin/$name"; return 0; fi
  done
  return 1
}

drop_tmpfs_data() {  # give the RAM back (only our own /dev/shm datadir)
  case "$DATA" in /dev/shm/hr1-mariadb-*) rm -rf "$(dirname "$DATA")" ;; esac
}

pid_alive() { [ -f "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null; }

answers() {  # the server accepts a query on our socket
  local client
  client="$(find_bin mariadb mysql)" || return 1
  "$client" --no-defaults --protocol=socket --socket="$SOCK" -uroot -e "SELECT 1" >/dev/null 2>&1
}

cmd_status() {
  if pid_alive && answers; then
    echo "running pid=$(cat "$PIDF") socket=$SOCK port=$PORT datadir=$DATA"
    return 0
  fi
  echo "not running (datadir=$DATA)"
  return 1
}

cmd_start() {
  if pid_alive && answers; then
    echo "[mariadb] already running (pid $(cat "$PIDF"), port $PORT)"
    return 0
  fi
  local server installer
  server="$(find_bin mariadbd mysqld)" || { echo "[mariadb] ERROR: mariadbd not installed (apt-get install -y mariadb-server)" >&2; return 2; }
  installer="$(find_bin mariadb-install-db mysql_install_db)" || { echo "[mariadb] ERROR: mariadb-install-db not found" >&2; return 2; }
  if [ ! -d "$DATA/mysql" ]; then
    echo "[mariadb] initialising datadir $DATA"
    rm -rf "$DATA"
    mkdir -p "$DATA"
    "$installer" --no-defaults --user=root --datadir="$DATA" --auth-root-authentication-method=normal \
      --skip-test-db >"$DIR/install.log" 2>&1 || { echo "[mariadb] ERROR: datadir init failed, see $DIR/install.log" >&2; tail -5 "$DIR/install.log" >&2; return 2; }
  fi
  rm -f "$SOCK" "$PIDF"
  # --no-defaults: ignore /etc/mysql config (its socket/port/user would collide with a system server).
  nohup "$server" --no-defaults --user=root --datadir="$DATA" --socket="$SOCK" --port="$PORT" \
    --bind-address=127.0.0.1 --skip-log-bin --pid-file="$PIDF" --log-error="$LOG" \
    --skip-name-resolve --max-connections=500 --innodb-buffer-pool-size=128M \
    --innodb-flush-log-at-trx-commit=0 --innodb-flush-method=nosync --innodb-doublewrite=0 \
    --innodb-log-file-size=16M \
    --character-set-server=utf8mb4 \
    --collation-server=utf8mb4_general_ci >/dev/null 2>&1 9>&- &   # 9>&-: the server must not hold the lock
  local server_pid=$! waited=0
  until answers; do
    if ! kill -0 "$server_pid" 2>/dev/null; then   # e.g. port taken: fail fast, not after TIMEOUT
      echo "[mariadb] ERROR: mariadbd exited during start-up, see $LOG" >&2
      tail -5 "$LOG" >&2 2>/dev/null || true
      if grep -q "Address already in use" "$LOG" 2>/dev/null; then
        echo "[mariadb] ERROR: port $PORT is taken by another server (one a checkout started from its own" \
          "folder, e.g. .cache/mariadb before servers were shared: HR1_MARIADB_DIR=<that folder> bash" \
          "launch/mariadb.sh stop); or choose another port: HR1_MARIADB_PORT and dbbench.port" >&2
      fi
      drop_tmpfs_data
      return 3
    fi
    if [ "$waited" -ge "$((TIMEOUT * 10))" ]; then
      echo "[mariadb] ERROR: not ready after ${TIMEOUT}s, see $LOG" >&2
      tail -5 "$LOG" >&2 2>/dev/null || true
      return 3
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  echo "[mariadb] started (pid $(cat "$PIDF"), socket $SOCK, port $PORT)"
}

cmd_stop() {
  if ! pid_alive; then
    echo "[mariadb] not running"
    rm -f "$PIDF"
    return 0
  fi
  local pid waited=0
  pid="$(cat "$PIDF")"
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge "$((TIMEOUT * 10))" ]; then
      echo "[mariadb] ERROR: pid $pid still alive after ${TIMEOUT}s" >&2
      return 3
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  rm -f "$PIDF"
  drop_tmpfs_data
  echo "[mariadb] stopped"
}

locked() {  # run "$@" holding the folder's lock (fd 9)
  mkdir -p "$DIR"
  exec 9>>"$DIR/.server.lock"
  flock 9
  "$@"
}

case "${1:-}" in
  start) locked cmd_start ;;
  stop) locked cmd_stop ;;
  status) cmd_status ;;
  dir) echo "$DIR" ;;
  *) echo "usage: $0 start|stop|status|dir" >&2; exit 64 ;;
esac
