#!/usr/bin/env bash
# Replicated Kafka, ZooKeeper and Redis on loopback, the servers idmint's failover tests and an
# operator's trial run against: three Kafka nodes (KRaft, each broker and controller: a quorum of
# three), a ZooKeeper ensemble of three, and a Redis primary with two replicas under three
# Sentinels (`redis-server --sentinel`), and a six-node Redis Cluster (three primaries, a replica
# each; `redis-cli --cluster create`). Started by `IDMINT_INFRA_HA=1 bash scripts/infra.sh up`
# (which starts Postgres beside them and writes their variables to its env file), or alone:
#
#   bash scripts/infra-ha.sh up        start every server, wait for all, print the variables
#   bash scripts/infra-ha.sh down      stop every server and delete the data (leaves no process)
#   bash scripts/infra-ha.sh status    each server and whether it answers
#   bash scripts/infra-ha.sh env       the variables idmint needs (KAFKA_BROKERS, ZK_CONNECT, REDIS_SENTINELS...)
#   bash scripts/infra-ha.sh kill|start|pause|resume <server>   e.g. kafka-2, zookeeper-1, redis-1, sentinel-3, rcluster-4
#   bash scripts/infra-ha.sh redis-master    the port of the Redis master the sentinels name now
#
# Settings (environment):
#   IDMINT_INFRA_HA_DIR    state directory (default $IDMINT_INFRA_DIR/ha, else .infra/ha)
#   IDMINT_INFRA_HA_PORT   base port (default 29000): ZooKeeper clients +1..3 (peers +11..13,
#                          elections +21..23), Kafka brokers +31..33 (controllers +41..43),
#                          Redis +51..53, Sentinels +61..63, Redis Cluster nodes +71..76
#                          (their cluster bus +81..86)
#   IDMINT_INFRA_LIB       the jar cache root (default .infra/lib, fetched by infra.sh); the jars
#                          are in its kafka-<version> folder
#   IDMINT_INFRA_KAFKA_VERSION  the Kafka version whose jars run (default 4.4.0; 3.9.1 or 3.9 for 3.9)
# Failure detection is shortened for trials (a Kafka broker fenced after 6 s, Sentinel's
# down-after 2 s, the Redis Cluster's node timeout 2 s, ZooKeeper tickTime 1 s); production keeps
# the defaults. The env has the Sentinel set as the pools' Redis; the Cluster's nodes are in
# IDMINT_INFRA_REDIS_CLUSTER_NODES (idmint takes one kind: unset REDIS_SENTINELS and
# REDIS_SENTINEL_NAME, and set REDIS_CLUSTER_NODES to it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${IDMINT_INFRA_HA_DIR:-${IDMINT_INFRA_DIR:-$ROOT/.infra}/ha}"
BASE="${IDMINT_INFRA_HA_PORT:-29000}"
# The same version and cache as infra.sh, which fetches the jars.
KAFKA_VERSION="${IDMINT_INFRA_KAFKA_VERSION:-4.4.0}"
[[ "$KAFKA_VERSION" == 3.9 ]] && KAFKA_VERSION=3.9.1
LIB="${IDMINT_INFRA_LIB:-$ROOT/.infra/lib}/kafka-$KAFKA_VERSION"
HOST=127.0.0.1
NAME=idmint-pools
N=(1 2 3)

say() { printf '[infra-ha] %s\n' "$*" >&2; }
die() { printf '[infra-ha] error: %s\n' "$*" >&2; exit 1; }

zk_port() { echo $((BASE + $1)); }
kafka_port() { echo $((BASE + 30 + $1)); }
redis_port() { echo $((BASE + 50 + $1)); }
sentinel_port() { echo $((BASE + 60 + $1)); }
rcluster_port() { echo $((BASE + 70 + $1)); }
# The Cluster's bus: Redis's default (port + 10000) lands in the ephemeral range (32768+), where an
# outgoing connection can hold it ("bind: Address already in use" failed a start so).
rcluster_bus_port() { echo $((BASE + 80 + $1)); }
RC=(1 2 3 4 5 6)
joined() { local f="$1" out="" i; for i in "${N[@]}"; do out+="${out:+,}$HOST:$("$f" "$i")"; done; echo "$out"; }

# ---------------------------------------------------------------- processes

pidfile() { echo "$DIR/pids/$1.pid"; }
# A pid is ours only if its command line names our state dir (java) or port (redis): pids get reused.
own_pid() {
  local f pid; f="$(pidfile "$1")"
  [[ -f "$f" ]] || return 1
  pid="$(cat "$f")"
  [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
  local st; st="$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)"
  [[ -n "$st" && "$st" != Z ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$(tag_of "$1")" || return 1
  echo "$pid"
}
tag_of() {
  case "$1" in
    kafka-* | zookeeper-*) echo "-Didmint.infra.ha=$DIR/$1" ;;
    redis-*) echo ":$(redis_port "${1#redis-}")" ;;
    sentinel-*) echo ":$(sentinel_port "${1#sentinel-}")" ;;
    rcluster-*) echo ":$(rcluster_port "${1#rcluster-}")" ;;
  esac
}

java_start() { # java_start <server> <heap> <main class> <args...>
  local s="$1" heap="$2"; shift 2
  setsid java "-Xmx$heap" -Xms32m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    "$(tag_of "$s")" "${LOG_FLAGS[@]}" -Dlog.file="$DIR/logs/$s.log" \
    -cp "$LIB/*" "$@" </dev/null >"$DIR/logs/$s.out" 2>&1 &
  echo $! >"$(pidfile "$s")"
}

# ---------------------------------------------------------------- servers

setup() {
  [[ -f "$LIB/.complete" ]] || die "Kafka $KAFKA_VERSION and ZooKeeper jars missing in $LIB: run 'npm run infra:up' once with the same IDMINT_INFRA_KAFKA_VERSION (it fetches them)"
  command -v redis-server >/dev/null || die "'redis-server' not found: apt-get install -y redis-server"
  mkdir -p "$DIR/logs" "$DIR/pids"
  cat >"$DIR/log4j.properties" <<'EOF'
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${log.file}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
EOF
  # Kafka 4 and its own ZooKeeper log through log4j2; the jar set decides which file is read.
  cat >"$DIR/log4j2.properties" <<'EOF'
appender.file.type=File
appender.file.name=file
appender.file.fileName=${sys:log.file}
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=WARN
rootLogger.appenderRef.file.ref=file
EOF
}

LOG_FLAGS=("-Dlog4j.configuration=file:$DIR/log4j.properties" "-Dlog4j2.configurationFile=file:$DIR/log4j2.properties")

start_zookeeper() { # start_zookeeper <n>
  local n="$1" d="$DIR/zookeeper-$1" i
  if [[ ! -f "$d/zoo.cfg" ]]; then
    mkdir -p "$d/data"
    echo "$n" >"$d/data/myid"
    {
      printf '%s\n' tickTime=1000 initLimit=10 syncLimit=5 "dataDir=$d/data" "clientPort=$(zk_port "$n")" \
        "clientPortAddress=$HOST" maxClientCnxns=0 '4lw.commands.whitelist=*' admin.enableServer=false
      for i in "${N[@]}"; do echo "server.$i=$HOST:$((BASE + 10 + i)):$((BASE + 20 + i))"; done
    } >"$d/zoo.cfg"
  fi
  java_start "zookeeper-$n" 128m org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg"
}

start_kafka() { # start_kafka <n>
  local n="$1" d="$DIR/kafka-$1" i voters=""
  for i in "${N[@]}"; do voters+="${voters:+,}$i@$HOST:$((BASE + 40 + i))"; done
  if [[ ! -f "$d/server.properties" ]]; then
    mkdir -p "$d/data"
    cat >"$d/server.properties" <<EOF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://$HOST:$(kafka_port "$n"),CONTROLLER://$HOST:$((BASE + 40 + n))
advertised.listeners=PLAINTEXT://$HOST:$(kafka_port "$n")
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$d/data
num.network.threads=2
num.io.threads=2
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
auto.create.topics.enable=false
delete.topic.enable=true
group.initial.rebalance.delay.ms=0
offsets.topic.replication.factor=3
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=4
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=6000
replica.lag.time.max.ms=8000
log.segment.bytes=16777216
EOF
    java -cp "$LIB/*" "${LOG_FLAGS[@]}" -Dlog.file="$DIR/logs/kafka-format.log" \
      kafka.tools.StorageTool format -t "$(cluster_id)" -c "$d/server.properties" >"$DIR/logs/kafka-$n-format.out" 2>&1 \
      || { cat "$DIR/logs/kafka-$n-format.out" >&2; die "formatting kafka-$n's storage failed"; }
  fi
  java_start "kafka-$n" 256m kafka.Kafka "$d/server.properties"
}

cluster_id() { # one id for the three nodes, made once
  # URL-safe base64 of 16 random bytes, like Kafka's own ids. Like Kafka's Uuid.randomUuid, an id
  # starting with '-' is drawn again: StorageTool's argument parser takes "-t -x..." for an option
  # (one start in 64 failed with "argument --cluster-id/-t: expected one argument").
  local id
  if [[ ! -f "$DIR/cluster-id" ]]; then
    id="-"
    while [[ "$id" == -* ]]; do
      id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    done
    printf '%s' "$id" >"$DIR/cluster-id"
  fi
  cat "$DIR/cluster-id"
}

start_redis() { # start_redis <n>: 1 starts as the primary, 2 and 3 as its replicas
  local n="$1" port; port="$(redis_port "$1")"
  local d="$DIR/redis-$n" replica=()
  mkdir -p "$d"
  # A replica that is restarted follows whoever is primary now.
  if [[ "$n" != 1 || -f "$d/started" ]]; then
    local master; master="$(redis_master 2>/dev/null || echo "$(redis_port 1)")"
    [[ "$master" != "$port" ]] && replica=(--replicaof "$HOST" "$master")
  fi
  redis-server --bind "$HOST" --port "$port" --save '' --appendonly no --dir "$d" --daemonize yes \
    --pidfile "$(pidfile "redis-$n")" --logfile "$DIR/logs/redis-$n.log" "${replica[@]}" >/dev/null
  touch "$d/started"
}

start_sentinel() { # start_sentinel <n>
  local n="$1" port; port="$(sentinel_port "$1")"
  local conf="$DIR/sentinel-$n.conf"
  if [[ ! -f "$conf" ]]; then
    printf '%s\n' "port $port" "bind $HOST" "dir $DIR" \
      "sentinel monitor $NAME $HOST $(redis_port 1) 2" "sentinel down-after-milliseconds $NAME 2000" \
      "sentinel failover-timeout $NAME 10000" "sentinel parallel-syncs $NAME 1" >"$conf"
  fi
  redis-server "$conf" --sentinel --daemonize yes --pidfile "$(pidfile "sentinel-$n")" --logfile "$DIR/logs/sentinel-$n.log" >/dev/null
}

start_rcluster() { # start_rcluster <n>: a node keeps its identity and role in nodes.conf across restarts
  local n="$1" port; port="$(rcluster_port "$1")"
  local d="$DIR/rcluster-$n"
  mkdir -p "$d"
  redis-server --bind "$HOST" --port "$port" --save '' --appendonly no --dir "$d" --daemonize yes \
    --cluster-enabled yes --cluster-port "$(rcluster_bus_port "$n")" --cluster-config-file "$d/nodes.conf" --cluster-node-timeout 2000 \
    --pidfile "$(pidfile "rcluster-$n")" --logfile "$DIR/logs/rcluster-$n.log" >/dev/null
}

rcluster_nodes() { local out="" i; for i in "${RC[@]}"; do out+="${out:+,}$HOST:$(rcluster_port "$i")"; done; echo "$out"; }

rcluster_form() { # joins the six nodes once; later starts find the cluster in their nodes.conf
  local i nodes
  for i in "${RC[@]}"; do
    timeout 3 redis-cli -h "$HOST" -p "$(rcluster_port "$i")" cluster info 2>/dev/null | grep -q 'cluster_known_nodes:1\b' || return 0
  done
  read -r -a nodes <<<"$(rcluster_nodes | tr ',' ' ')"
  timeout 60 redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$DIR/logs/rcluster-create.log" 2>&1 ||
    die "redis-cli --cluster create failed (log: $DIR/logs/rcluster-create.log)"
}

start_server() { # start_server <kind-n>
  local s="$1"
  own_pid "$s" >/dev/null && return
  case "$s" in
    zookeeper-[123]) start_zookeeper "${s#zookeeper-}" ;;
    kafka-[123]) start_kafka "${s#kafka-}" ;;
    redis-[123]) start_redis "${s#redis-}" ;;
    sentinel-[123]) start_sentinel "${s#sentinel-}" ;;
    rcluster-[1-6]) start_rcluster "${s#rcluster-}" ;;
    *) die "unknown server '$s': expected kafka-N, zookeeper-N, redis-N or sentinel-N (N = 1, 2, 3), or rcluster-N (1 to 6)" ;;
  esac
}

# ---------------------------------------------------------------- probes

answers() { # answers <kind-n>
  case "$1" in
    zookeeper-*) timeout 3 bash -c "exec 3<>/dev/tcp/$HOST/$(zk_port "${1#zookeeper-}") && printf srvr >&3 && cat <&3" 2>/dev/null | grep -q '^Mode:' ;;
    kafka-*) node "$ROOT/scripts/kafka-probe.mjs" "$HOST:$(kafka_port "${1#kafka-}")" 3000 >/dev/null 2>&1 ;;
    redis-*) [[ "$(timeout 3 redis-cli -h "$HOST" -p "$(redis_port "${1#redis-}")" ping 2>/dev/null)" == PONG ]] ;;
    sentinel-*) [[ "$(timeout 3 redis-cli -h "$HOST" -p "$(sentinel_port "${1#sentinel-}")" ping 2>/dev/null)" == PONG ]] ;;
    rcluster-*) [[ "$(timeout 3 redis-cli -h "$HOST" -p "$(rcluster_port "${1#rcluster-}")" ping 2>/dev/null)" == PONG ]] ;;
  esac
}

redis_master() { # the master's port, as the first sentinel that answers names it
  local i out
  for i in "${N[@]}"; do
    out="$(timeout 3 redis-cli -h "$HOST" -p "$(sentinel_port "$i")" sentinel get-master-addr-by-name "$NAME" 2>/dev/null | sed -n 2p)"
    [[ -n "$out" ]] && { echo "$out"; return; }
  done
  return 1
}

kafka_cluster_whole() { node "$ROOT/scripts/kafka-probe.mjs" "$(joined kafka_port)" 5000 3 >/dev/null 2>&1; }

servers() {
  local k i
  for k in zookeeper kafka redis sentinel; do for i in "${N[@]}"; do echo "$k-$i"; done; done
  for i in "${RC[@]}"; do echo "rcluster-$i"; done
}

wait_all() { # every server answers, the Kafka cluster counts three brokers, the replicas are in sync
  local deadline=$(($(date +%s) + ${1:-180})) s
  for s in $(servers); do
    until answers "$s"; do
      if ! own_pid "$s" >/dev/null; then tail -n 30 "$DIR/logs/$s".* >&2 2>/dev/null || true; die "$s exited during start-up (logs: $DIR/logs/$s.*)"; fi
      (($(date +%s) < deadline)) || die "$s did not answer in time (logs: $DIR/logs/$s.*)"
      sleep 0.3
    done
  done
  until kafka_cluster_whole; do
    (($(date +%s) < deadline)) || die "the Kafka cluster did not count three brokers in time (logs: $DIR/logs/kafka-*)"
    sleep 0.5
  done
  local i
  for i in 2 3; do
    until timeout 3 redis-cli -h "$HOST" -p "$(redis_port "$i")" info replication 2>/dev/null | grep -q 'master_link_status:up'; do
      (($(date +%s) < deadline)) || die "redis-$i did not sync with the primary in time"
      sleep 0.3
    done
  done
  until redis_master >/dev/null; do
    (($(date +%s) < deadline)) || die "the sentinels name no master"
    sleep 0.3
  done
  rcluster_form
  until timeout 3 redis-cli -h "$HOST" -p "$(rcluster_port 1)" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; do
    (($(date +%s) < deadline)) || die "the Redis Cluster did not reach cluster_state:ok in time (logs: $DIR/logs/rcluster-*)"
    sleep 0.3
  done
}

cmd_env() {
  echo "KAFKA_BROKERS=$(joined kafka_port)"
  echo "ZK_CONNECT=$(joined zk_port)"
  echo "REDIS_SENTINELS=$(joined sentinel_port)"
  echo "REDIS_SENTINEL_NAME=$NAME"
  echo "IDMINT_INFRA_REDIS_CLUSTER_NODES=$(rcluster_nodes)"
}

cmd_up() {
  setup
  local t0 s; t0="$(date +%s%3N)"
  # Redis first: the sentinels need its primary; the JVMs warm up meanwhile.
  for s in redis-1 redis-2 redis-3 sentinel-1 sentinel-2 sentinel-3 rcluster-{1..6} zookeeper-1 zookeeper-2 zookeeper-3 kafka-1 kafka-2 kafka-3; do start_server "$s"; done
  wait_all 240
  say "three Kafka brokers, three ZooKeeper servers, Redis with two replicas and three Sentinels, a Redis Cluster of six answer ($(($(date +%s%3N) - t0)) ms)"
  cmd_env
}

cmd_down() {
  local s pid i
  # Kafka first (it needs its quorum to stop cleanly), sentinels before Redis (no failover on the way down).
  for s in kafka-1 kafka-2 kafka-3 sentinel-1 sentinel-2 sentinel-3 redis-1 redis-2 redis-3 rcluster-{1..6} zookeeper-1 zookeeper-2 zookeeper-3; do
    pid="$(own_pid "$s")" || continue
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
  for s in $(servers); do
    pid="$(own_pid "$s")" || continue
    for ((i = 0; i < 200; i++)); do own_pid "$s" >/dev/null || break; sleep 0.1; done
    own_pid "$s" >/dev/null && { say "$s did not stop in 20 s, killing it"; kill -KILL "$pid" 2>/dev/null || true; }
  done
  rm -rf "$DIR"
}

cmd_status() {
  local s rc=0 pid
  for s in $(servers); do
    pid="$(own_pid "$s" || echo -)"
    if answers "$s"; then printf '%-12s answers  pid %s\n' "$s" "$pid"; else printf '%-12s DOWN     pid %s\n' "$s" "$pid"; rc=1; fi
  done
  echo "redis master: port $(redis_master || echo none)"
  return "$rc"
}

signal() { # signal <server> <KILL|STOP|CONT>
  local pid; pid="$(own_pid "$1")" || die "$1 is not running from $DIR"
  kill "-$2" "$pid"
  if [[ "$2" == KILL ]]; then while own_pid "$1" >/dev/null; do sleep 0.1; done; fi
  say "$1: SIG$2 (pid $pid)"
}

main() {
  local cmd="${1:-}"
  case "$cmd" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    env) cmd_env ;;
    redis-master) redis_master || die "the sentinels name no master" ;;
    kill) signal "${2:?kill <server>}" KILL ;;
    pause) signal "${2:?pause <server>}" STOP ;;
    resume) signal "${2:?resume <server>}" CONT ;;
    start) setup; start_server "${2:?start <server>}"; until answers "$2"; do own_pid "$2" >/dev/null || die "$2 exited during start-up (logs: $DIR/logs/$2.*)"; sleep 0.3; done; say "$2 answers" ;;
    *) echo "usage: $0 up|down|status|env|redis-master | kill|start|pause|resume <kafka-N|zookeeper-N|redis-N|sentinel-N|rcluster-N>" >&2; exit 2 ;;
  esac
}

main "$@"
