#!/usr/bin/env bash
# Three Postgres 15 nodes under Patroni on loopback, with ZooKeeper as Patroni's DCS: the
# replicated Postgres that idmint's failover tests and operators' trials run against.
#
#   bash scripts/pg-ha.sh up       start the nodes, wait for a leader, print the env to use
#   bash scripts/pg-ha.sh down     stop every node and delete the data (leaves no process)
#   bash scripts/pg-ha.sh status   patronictl list
#   bash scripts/pg-ha.sh leader   the leader's member name (n1, n2 or n3)
#   bash scripts/pg-ha.sh kill N   SIGKILL member N's Patroni and Postgres (a crashed primary)
#   bash scripts/pg-ha.sh start N  start member N's Patroni again: it rejoins as a replica
#                                  (re-cloned from the leader if its timeline diverged)
#   bash scripts/pg-ha.sh freeze N SIGSTOP member N's WAL senders: what it commits from now on
#                                  reaches no replica (an asynchronous promotion then loses it)
#   bash scripts/pg-ha.sh switchover N  a planned switchover away from leader N (patronictl)
#   bash scripts/pg-ha.sh wait     until there is a leader and all three members run or stream
#
# Settings (environment):
#   ZK_CONNECT              the ZooKeeper Patroni uses (default: the one in $IDMINT_INFRA_DIR/env)
#   IDMINT_INFRA_DIR        infra.sh's state directory (default .infra), where its env and pg-ha/ are
#   IDMINT_PG_HA_DIR        state directory (default $IDMINT_INFRA_DIR/pg-ha, as infra.sh starts it)
#   IDMINT_PG_HA_PORT       first Postgres port; REST ports follow at +100 (default 15441)
#   IDMINT_PG_HA_SCOPE      Patroni's cluster name, unique per cluster on one ZooKeeper (default idmint)
#   IDMINT_PG_HA_SYNC=1     synchronous_mode: a commit waits for a replica (no lost commits)
#   IDMINT_PG_HA_TTL        Patroni's leader-key ttl in seconds, about how long a crashed leader
#                           leaves the cluster without a primary (default 20)
# Asynchronous by default, with Patroni's maximum_lag_on_failover of 1 MB: a promotion may lose the
# last commits, which is what the segment fence is for (docs/reliability.md, "Postgres failover").
# Needs `patroni` and `python3-kazoo` (apt-get install -y patroni python3-kazoo; scripts/ensure-tools.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

INFRA="${IDMINT_INFRA_DIR:-$PWD/.infra}"
# infra.sh (IDMINT_INFRA_PG_HA=1) keeps the cluster under its own state directory: find it there.
DIR="${IDMINT_PG_HA_DIR:-$INFRA/pg-ha}"
PORT="${IDMINT_PG_HA_PORT:-15441}"
SCOPE="${IDMINT_PG_HA_SCOPE:-idmint}"
NODES=(1 2 3)

die() { echo "[pg-ha] $*" >&2; exit 1; }
say() { echo "[pg-ha] $*" >&2; }

zk() {
  if [[ -n "${ZK_CONNECT:-}" ]]; then echo "$ZK_CONNECT"; return; fi
  [[ -f "$INFRA/env" ]] && (. "$INFRA/env" && echo "${ZK_CONNECT:-}") | grep . && return
  die "no ZooKeeper: set ZK_CONNECT or run npm run infra:up first (no env in $INFRA)"
}

bin_dir() {
  local d
  d="$(dirname "$(readlink -f "$(command -v pg_ctl || echo /usr/lib/postgresql/15/bin/pg_ctl)")")"
  [[ -x "$d/postgres" ]] || die "Postgres binaries not found: apt-get install -y postgresql"
  echo "$d"
}

# Patroni starts Postgres, which refuses to run as root: run it as the postgres user then.
as_pg() {
  if [[ "$(id -u)" == 0 ]]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

pg_port() { echo $((PORT + $1 - 1)); }
rest_port() { echo $((PORT + 100 + $1 - 1)); }

write_config() { # write_config <n>
  local n="$1" hosts
  hosts="$(zk | tr ',' '\n' | sed "s/.*/'&'/" | paste -sd, -)"
  cat >"$DIR/n$n.yml" <<EOF
scope: $SCOPE
name: n$n
log:
  level: WARNING
restapi:
  listen: 127.0.0.1:$(rest_port "$n")
  connect_address: 127.0.0.1:$(rest_port "$n")
zookeeper:
  hosts: [$hosts]
bootstrap:
  dcs:
    ttl: ${IDMINT_PG_HA_TTL:-20}
    loop_wait: 1
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    synchronous_mode: $([[ "${IDMINT_PG_HA_SYNC:-0}" == 1 ]] && echo true || echo false)
    postgresql:
      use_pg_rewind: false
      # A crashed leader whose last commits the new leader lacks cannot follow it: re-clone it.
      remove_data_directory_on_diverged_timelines: true
      remove_data_directory_on_rewind_failure: true
      parameters:
        fsync: 'off'
        shared_buffers: 16MB
        max_connections: 40
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$(pg_port "$n")
  connect_address: 127.0.0.1:$(pg_port "$n")
  data_dir: $DIR/data$n
  bin_dir: $(bin_dir)
  pgpass: $DIR/pgpass$n
  authentication:
    replication: {username: replicator, password: replicator}
    superuser: {username: postgres, password: postgres}
  parameters:
    unix_socket_directories: '$DIR'
EOF
}

leader() {
  local n
  for n in "${NODES[@]}"; do
    if curl -fsS -o /dev/null "http://127.0.0.1:$(rest_port "$n")/primary" 2>/dev/null; then echo "n$n"; return 0; fi
  done
  return 1
}

url() {
  local hosts=() n
  for n in "${NODES[@]}"; do hosts+=("127.0.0.1:$(pg_port "$n")"); done
  echo "postgres://postgres:postgres@$(IFS=,; echo "${hosts[*]}")/postgres?target_session_attrs=read-write"
}

kill_member() { # kill_member <n> [quiet]: SIGKILL its Patroni, then its Postgres and every child
  local n="$1" i pids found=0
  # A kill that finds nothing must say so: a fault test would otherwise pass without its fault.
  if [[ ! -f "$DIR/n$n.yml" ]]; then
    [[ "${2:-}" == quiet ]] && return 0
    die "kill n$n: no cluster in $DIR (started with another IDMINT_INFRA_DIR or IDMINT_PG_HA_DIR?)"
  fi
  pgrep -f "patroni $DIR/n$n.yml" >/dev/null && found=1
  pgrep -f -- "-D $DIR/data$n( |\$)" >/dev/null && found=1
  if [[ "$found" == 0 ]]; then
    [[ "${2:-}" == quiet ]] && return 0
    die "kill n$n: member n$n runs neither Patroni nor Postgres (already killed? state in $DIR)"
  fi
  pkill -9 -f "patroni $DIR/n$n.yml" 2>/dev/null || true
  # Patroni may have been starting Postgres (no postmaster.pid yet): find it by its data dir, and
  # kill the whole family (a frozen WAL sender would keep the socket open), until none is left.
  for i in $(seq 1 50); do
    pids="$(pgrep -f -- "-D $DIR/data$n( |\$)" || true)"
    [[ -z "$pids" ]] && return 0
    # shellcheck disable=SC2046,SC2086
    kill -9 $pids $(for p in $pids; do ps -o pid= --ppid "$p"; done) 2>/dev/null || true
    sleep 0.1
  done
  die "member n$n's Postgres survived SIGKILL"
}

up() {
  command -v patroni >/dev/null || die "'patroni' not found. Install it with: apt-get install -y patroni python3-kazoo"
  command -v curl >/dev/null || die "'curl' not found. Install it with: apt-get install -y curl"
  mkdir -p "$DIR"
  [[ "$(id -u)" == 0 ]] && chown postgres: "$DIR"
  local n
  for n in "${NODES[@]}"; do
    write_config "$n"
    [[ "$(id -u)" == 0 ]] && chown postgres: "$DIR/n$n.yml"
    touch "$DIR/n$n.log"
    [[ "$(id -u)" == 0 ]] && chown postgres: "$DIR/n$n.log"
    start_member "$n"
    sleep 0.5 # the first node bootstraps; the others clone it
  done
  wait_whole 60
  echo "DATABASE_URL=$(url)"
}

start_member() { # start_member <n>
  local n="$1"
  as_pg patroni "$DIR/n$n.yml" >>"$DIR/n$n.log" 2>&1 &
  disown
}

wait_whole() { # wait_whole <seconds>: a leader, and all three members running or streaming
  local i n up
  for i in $(seq 1 $(($1 * 2))); do
    if leader >/dev/null; then
      up=0
      for n in "${NODES[@]}"; do
        if curl -fsS "http://127.0.0.1:$(rest_port "$n")/cluster" 2>/dev/null | grep -q .; then
          up="$(curl -fsS "http://127.0.0.1:$(rest_port "$n")/cluster" | grep -o '"state": *"\(running\|streaming\)"' | wc -l)"
          break
        fi
      done
      if ((up >= 3)); then say "leader $(leader); all three members running"; return 0; fi
    fi
    sleep 0.5
  done
  tail -n 20 "$DIR"/n*.log >&2 || true
  die "the Patroni cluster was not whole within $1 s (logs in $DIR)"
}

freeze_senders() { # freeze_senders <n>: SIGSTOP the WAL senders of member n's Postgres
  local n="$1" pid senders
  [[ -f "$DIR/data$n/postmaster.pid" ]] || die "member n$n runs no Postgres"
  pid="$(head -n 1 "$DIR/data$n/postmaster.pid")"
  senders="$(ps -o pid=,args= --ppid "$pid" | awk '/walsender/ {print $1}')"
  [[ -n "$senders" ]] || die "member n$n has no WAL sender (is it the leader, with replicas attached?)"
  # shellcheck disable=SC2086
  kill -STOP $senders
  say "n$n: WAL senders $(echo $senders | tr '\n' ' ')stopped"
}

down() {
  local n
  for n in "${NODES[@]}"; do kill_member "$n" quiet; done
  rm -rf "$DIR"
  say "stopped; $DIR removed"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) patronictl -c "$DIR/n1.yml" list ;;
  leader) leader ;;
  kill | start | freeze)
    [[ "${2:-}" =~ ^n?[123]$ ]] || die "$1 needs a member: n1, n2 or n3"
    case "$1" in kill) kill_member "${2#n}" && say "n${2#n} killed" ;; start) start_member "${2#n}" ;; freeze) freeze_senders "${2#n}" ;; esac ;;
  switchover)
    [[ "${2:-}" =~ ^n?[123]$ ]] || die "switchover needs the leader: n1, n2 or n3"
    patronictl -c "$DIR/n1.yml" switchover --leader "n${2#n}" --force ;;
  wait) wait_whole "${2:-120}" ;;
  url) url ;;
  *) die "usage: pg-ha.sh up|down|status|leader|kill N|start N|freeze N|switchover N|wait [S]|url" ;;
esac
