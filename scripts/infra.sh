#!/usr/bin/env bash
# Local infrastructure for idmint: Kafka 4.4 (KRaft, one node) and ZooKeeper 3.9 from Maven
# Central jars, a private redis-server, and a throwaway Postgres cluster. Everything lives
# under .infra/ (jars, data, logs, pid files, env). IDMINT_INFRA_KAFKA_VERSION=3.9.1 (or 3.9)
# runs Kafka 3.9.1 with the ZooKeeper 3.8 its jars carry instead; each version has its own data
# directory, so use a fresh IDMINT_INFRA_DIR (or down first) when switching.
#
#   bash scripts/infra.sh up|down|status
#   bash scripts/infra.sh start|stop|restart|kill|pid <redis|kafka|zookeeper|postgres>
#   bash scripts/infra.sh pause|resume <redis|kafka|zookeeper>   (SIGSTOP/SIGCONT: a hung server)
#
# up is idempotent: a server that already answers on its port (ours, or another checkout's)
# is reused, never started twice. down stops only what this checkout started.
# A server named by the environment (DATABASE_URL, REDIS_URL, KAFKA_BROKERS, ZK_CONNECT,
# pointing somewhere other than our own port) is used as is and never started or stopped.
# Ports: IDMINT_INFRA_{KAFKA,CONTROLLER,ZK,REDIS,PG}_PORT, defaults below. IDMINT_INFRA_DIR moves
# the state (a private instance for a fault test); the jars stay in the checkout's .infra/lib
# (one folder per Kafka version, .infra/lib/kafka-<version>), shared by every instance, unless
# IDMINT_INFRA_LIB names another cache root.
#
# IDMINT_INFRA_SECURE=1 starts the secured profile (use it with its own IDMINT_INFRA_DIR and
# ports): a throwaway CA and a server certificate for 127.0.0.1 made with openssl under
# $IDMINT_INFRA_DIR/tls; Kafka on SASL_SSL with SCRAM-SHA-512; Redis on TLS only with an ACL
# user (the default user off); Postgres accepting only TLS with scram passwords. ZooKeeper
# needs nothing on the server for digest ACLs. The user is `idmint` (Postgres: `postgres`), the
# password IDMINT_INFRA_PASSWORD (default `idmint-local-secret`); env lists the client variables.
#
# IDMINT_INFRA_PG_HA=1 also starts three Postgres nodes under Patroni on this ZooKeeper
# (scripts/pg-ha.sh, state in $IDMINT_INFRA_DIR/pg-ha) and writes their multi-host URL as
# DATABASE_URL; down stops them too.
#
# IDMINT_INFRA_HA=1 starts, in place of the single Kafka, ZooKeeper and Redis, replicated ones
# (scripts/infra-ha.sh, state in $IDMINT_INFRA_DIR/ha, ports from IDMINT_INFRA_HA_PORT): three
# Kafka brokers, a ZooKeeper ensemble of three, a Redis primary with two replicas under three
# Sentinels; env gets KAFKA_BROKERS and ZK_CONNECT with three servers each, REDIS_SENTINELS and
# REDIS_SENTINEL_NAME. Postgres stays one server (or Patroni, with IDMINT_INFRA_PG_HA=1 as well).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
INFRA="${IDMINT_INFRA_DIR:-$ROOT/.infra}"
KAFKA_VERSION="${IDMINT_INFRA_KAFKA_VERSION:-4.4.0}"
[[ "$KAFKA_VERSION" == 3.9 ]] && KAFKA_VERSION=3.9.1
[[ "$KAFKA_VERSION" =~ ^(3\.9|4\.[0-9]+)\.[0-9]+$ ]] || { echo "[infra] error: IDMINT_INFRA_KAFKA_VERSION=$KAFKA_VERSION: expected 3.9.x or 4.x.y" >&2; exit 1; }
# One jar cache per checkout, whatever IDMINT_INFRA_DIR says: a private instance never downloads again.
LIB="${IDMINT_INFRA_LIB:-$ROOT/.infra/lib}/kafka-$KAFKA_VERSION"
LOGS="$INFRA/logs"
PIDS="$INFRA/pids"
HOST=127.0.0.1

KAFKA_PORT="${IDMINT_INFRA_KAFKA_PORT:-19092}"
CONTROLLER_PORT="${IDMINT_INFRA_CONTROLLER_PORT:-19093}"
ZK_PORT="${IDMINT_INFRA_ZK_PORT:-12181}"
REDIS_PORT="${IDMINT_INFRA_REDIS_PORT:-16379}"
PG_PORT="${IDMINT_INFRA_PG_PORT:-15432}"

OWN_KAFKA="$HOST:$KAFKA_PORT"
OWN_ZK="$HOST:$ZK_PORT"
OWN_REDIS="redis://$HOST:$REDIS_PORT"
OWN_PG="postgres://postgres@$HOST:$PG_PORT/postgres"

SECURE="${IDMINT_INFRA_SECURE:-0}"
PG_HA_DIR="$INFRA/pg-ha"
PG_HA_URL=""
PASSWORD="${IDMINT_INFRA_PASSWORD:-idmint-local-secret}"
TLS="$INFRA/tls"
if [[ "$SECURE" == 1 ]]; then
  OWN_REDIS="rediss://idmint:$PASSWORD@$HOST:$REDIS_PORT"
  OWN_PG="postgres://postgres:$PASSWORD@$HOST:$PG_PORT/postgres?sslmode=verify-full&sslrootcert=$TLS/ca.pem"
  # The Kafka probe reads the same variables as every idmint process.
  export IDMINT_KAFKA_TLS_CA="$TLS/ca.pem" IDMINT_KAFKA_SASL_MECHANISM=scram-sha-512 \
    IDMINT_KAFKA_SASL_USERNAME=idmint IDMINT_KAFKA_SASL_PASSWORD="$PASSWORD"
fi

SERVERS=(zookeeper kafka redis postgres)
HA="${IDMINT_INFRA_HA:-0}"
HA_DIR="$INFRA/ha"
HA_ENV="" # the replicated servers' variables, one NAME=value a line
declare -A STARTED_AT=() # server -> epoch ms when this invocation started it

log() { printf '[infra] %s\n' "$*" >&2; }
die() { printf '[infra] error: %s\n' "$*" >&2; exit 1; }
now_ms() { date +%s%3N; }

# ---------------------------------------------------------------- prerequisites

need() { # need <binary> <install command>
  command -v "$1" >/dev/null 2>&1 || die "'$1' not found. Install it with: $2"
}

pg_bin() { # pg_bin <tool>: PATH first, then the Debian layout
  if command -v "$1" >/dev/null 2>&1; then command -v "$1"; return; fi
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [[ -x "$d/$1" ]] && { echo "$d/$1"; return; }
  done
  die "'$1' not found. Install it with: apt-get install -y postgresql"
}

ensure_jars() {
  need java "apt-get install -y openjdk-17-jre-headless"
  [[ -f "$LIB/.complete" ]] && return
  need mvn "apt-get install -y maven"
  # The jar cache may be shared by several instances: one download at a time.
  mkdir -p "$(dirname "$LIB")"
  exec 8>"$LIB.lock"
  flock 8
  if [[ -f "$LIB/.complete" ]]; then exec 8>&-; return; fi
  log "downloading Kafka $KAFKA_VERSION and ZooKeeper jars from Maven Central into $LIB"
  local t0; t0="$(now_ms)"
  rm -rf "$LIB" && mkdir -p "$LIB"
  # Kafka 3 carries ZooKeeper and logs through log4j 1; Kafka 4 needs both added (scripts/pom.xml).
  mvn -B -q -f "$ROOT/scripts/pom.xml" dependency:copy-dependencies "-Dkafka.version=$KAFKA_VERSION" \
    "-Pkafka${KAFKA_VERSION%%.*}" -DoutputDirectory="$LIB" -DincludeScope=runtime >"$LOGS/maven.log" 2>&1 \
    || { tail -n 30 "$LOGS/maven.log" >&2; die "maven download failed (log: $LOGS/maven.log)"; }
  touch "$LIB/.complete"
  log "jars ready in $(($(now_ms) - t0)) ms"
  exec 8>&-
}

# ---------------------------------------------------------------- pid files

# Alive means running or sleeping, not a zombie: our init may reap orphans late.
alive() {
  local st
  st="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)"
  [[ -n "$st" && "$st" != Z ]]
}

# A pid counts as ours only if its command line carries our marker: pids get reused.
marker() { echo "-Didmint.infra=$INFRA/$1"; }

own_pid() { # own_pid <server>: prints the live pid this checkout started, if any
  local f="$PIDS/$1.pid" pid
  [[ -f "$f" ]] || return 1
  pid="$(cat "$f")"
  [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
  case "$1" in
    kafka | zookeeper) tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$(marker "$1")" || return 1 ;;
    redis) tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "redis-server" || return 1 ;;
    postgres) tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "postgres" || return 1 ;;
  esac
  echo "$pid"
}

# ---------------------------------------------------------------- probes

probe_zookeeper() { # srvr answers with "Mode:" only when the server is serving
  local hp="${1:-$OWN_ZK}" h p
  h="${hp%%,*}"; p="${h##*:}"; h="${h%:*}"
  timeout 3 bash -c "exec 3<>/dev/tcp/$h/$p && printf srvr >&3 && cat <&3" 2>/dev/null | grep -q '^Mode:'
}
probe_kafka() {
  [[ -d "$ROOT/node_modules/kafkajs" ]] || die "node_modules missing: run 'npm ci' first (the Kafka probe uses kafkajs)"
  node "$ROOT/scripts/kafka-probe.mjs" "${1:-$OWN_KAFKA}" 3000 >/dev/null 2>&1
}
probe_redis() {
  local tls=()
  [[ "$SECURE" == 1 ]] && tls=(--tls --cacert "$TLS/ca.pem")
  [[ "$(timeout 3 redis-cli "${tls[@]}" -u "${1:-$OWN_REDIS}" --no-auth-warning ping 2>/dev/null)" == PONG ]]
}
probe_postgres() { timeout 5 "$(pg_bin psql)" "${1:-$OWN_PG}" -qAtc 'select 1' 2>/dev/null | grep -q '^1$'; }

# The URL a server is reached at, and whether the environment chose it for us.
env_var() { case "$1" in kafka) echo KAFKA_BROKERS ;; zookeeper) echo ZK_CONNECT ;; redis) echo REDIS_URL ;; postgres) echo DATABASE_URL ;; esac; }
own_url() { case "$1" in kafka) echo "$OWN_KAFKA" ;; zookeeper) echo "$OWN_ZK" ;; redis) echo "$OWN_REDIS" ;; postgres) echo "$OWN_PG" ;; esac; }
url_of() {
  local v; v="$(env_var "$1")"
  echo "${!v:-$(own_url "$1")}"
}
external() { [[ "$(url_of "$1")" != "$(own_url "$1")" ]]; }

wait_for() { # wait_for <server> <seconds>
  local s="$1" deadline=$(($(date +%s) + $2)) t0; t0="${STARTED_AT[$1]:-$(now_ms)}"
  until "probe_$s" "$(url_of "$s")"; do
    if ! external "$s" && [[ -f "$PIDS/$s.pid" ]] && ! own_pid "$s" >/dev/null; then
      tail -n 40 "$LOGS/$s.log" "$LOGS/$s.out" 2>/dev/null >&2 || true
      die "$s exited during start-up (logs: $LOGS/$s.*)"
    fi
    if (($(date +%s) >= deadline)); then
      tail -n 40 "$LOGS/$s.log" "$LOGS/$s.out" 2>/dev/null >&2 || true
      die "$s did not answer within $2 s (logs: $LOGS/$s.*)"
    fi
    sleep 0.3
  done
  if [[ -n "${STARTED_AT[$s]:-}" ]]; then
    log "$s ready at $(url_of "$s"), $(($(now_ms) - t0)) ms after its start"
  else
    log "$s answers at $(url_of "$s") (already running)"
  fi
}

# ---------------------------------------------------------------- secured profile

make_tls() { # a throwaway CA and a server certificate for 127.0.0.1 and localhost, once
  [[ -f "$TLS/server.pem" ]] && return
  need openssl "apt-get install -y openssl"
  mkdir -p "$TLS"
  (
    cd "$TLS"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=idmint local CA" \
      -keyout ca.key -out ca.pem
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
      -extfile server.ext -out server.pem
    # Kafka's PEM keystore: the PKCS#8 key and the certificate in one file.
    cat server.key server.pem >server-bundle.pem
  ) >"$LOGS/tls.log" 2>&1 || { cat "$LOGS/tls.log" >&2; die "openssl failed (log: $LOGS/tls.log)"; }
  chmod 644 "$TLS"/*.pem
}

# ---------------------------------------------------------------- starters

log4j_config() { # log4j_config <server>: Kafka and ZooKeeper log into .infra/logs
  # Both files: the jar set decides which one is read (Kafka 3.9: log4j 1 through reload4j;
  # Kafka 4 and its own ZooKeeper: log4j2).
  cat >"$INFRA/$1/log4j.properties" <<EOF
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File=$LOGS/$1.log
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.zookeeper=INFO
EOF
  cat >"$INFRA/$1/log4j2.properties" <<EOF
appender.file.type=RollingFile
appender.file.name=file
appender.file.fileName=$LOGS/$1.log
appender.file.filePattern=$LOGS/$1.log.%i
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
appender.file.policies.type=Policies
appender.file.policies.size.type=SizeBasedTriggeringPolicy
appender.file.policies.size.size=20MB
appender.file.strategy.type=DefaultRolloverStrategy
appender.file.strategy.max=2
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=file
logger.request.name=kafka.request.logger
logger.request.level=WARN
logger.state.name=state.change.logger
logger.state.level=WARN
EOF
}

log_flags() { # log_flags <dir>: LOG_FLAGS, the JVM flags that point both logging backends at <dir>'s files
  LOG_FLAGS=("-Dlog4j.configuration=file:$1/log4j.properties" "-Dlog4j2.configurationFile=file:$1/log4j2.properties")
}

java_start() { # java_start <server> <heap> <main class> <args...>
  local s="$1" heap="$2"; shift 2
  log_flags "$INFRA/$s"
  # C1 only starts ZooKeeper faster; Kafka keeps the full JIT so benchmarks see its real speed.
  local JIT="-XX:TieredStopAtLevel=1"
  [[ "$s" == kafka ]] && JIT="-XX:+TieredCompilation"
  # setsid: the JVM must outlive the shell, terminal or test runner that started it.
  setsid java "-Xmx$heap" "-Xms64m" -XX:+UseSerialGC $JIT \
    -Djava.awt.headless=true "$(marker "$s")" \
    "${LOG_FLAGS[@]}" -cp "$LIB/*" "$@" </dev/null >"$LOGS/$s.out" 2>&1 &
  echo $! >"$PIDS/$s.pid"
}

start_zookeeper() {
  ensure_jars
  mkdir -p "$INFRA/zookeeper/data"
  log4j_config zookeeper
  cat >"$INFRA/zookeeper/zoo.cfg" <<EOF
tickTime=2000
dataDir=$INFRA/zookeeper/data
clientPort=$ZK_PORT
clientPortAddress=$HOST
maxClientCnxns=0
4lw.commands.whitelist=*
admin.enableServer=false
autopurge.purgeInterval=1
EOF
  java_start zookeeper 128m -Dzookeeper.admin.enableServer=false -Dzookeeper.4lw.commands.whitelist='*' \
    org.apache.zookeeper.server.ZooKeeperServerMain "$INFRA/zookeeper/zoo.cfg"
}

start_kafka() {
  ensure_jars
  local dir="$INFRA/kafka"
  mkdir -p "$dir/data"
  log4j_config kafka
  local listener=PLAINTEXT scram=()
  [[ "$SECURE" == 1 ]] && { make_tls; listener=SASL_SSL; }
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CONTROLLER_PORT
listeners=$listener://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=$listener://$HOST:$KAFKA_PORT
inter.broker.listener.name=$listener
controller.listener.names=CONTROLLER
listener.security.protocol.map=$listener:$listener,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.network.threads=2
num.io.threads=4
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=false
delete.topic.enable=true
# Test settings: groups join at once, internal topics fit one broker and are small.
group.initial.rebalance.delay.ms=0
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
log.retention.hours=24
log.segment.bytes=67108864
EOF
  if [[ "$SECURE" == 1 ]]; then
    cat >>"$dir/server.properties" <<EOF
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="idmint" password="$PASSWORD";
ssl.keystore.type=PEM
ssl.keystore.location=$TLS/server-bundle.pem
ssl.truststore.type=PEM
ssl.truststore.location=$TLS/ca.pem
# ACLs: idmint (the refill, responders, admin) is a super user; any other principal gets only what
# an ACL grants (docs/client.md: a pool topic is writable by the refill's principal alone). The
# controller listener is internal (plaintext on loopback, principal ANONYMOUS).
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:idmint;User:ANONYMOUS
allow.everyone.if.no.acl.found=false
EOF
    # A KRaft cluster's SCRAM credentials are written when its storage is formatted: idmint's, and
    # idmint-client's (an SDK principal, only what ACLs grant it).
    scram=(--add-scram "SCRAM-SHA-512=[name=idmint,password=$PASSWORD]" --add-scram "SCRAM-SHA-512=[name=idmint-client,password=$PASSWORD]")
  fi
  if [[ ! -f "$dir/data/meta.properties" ]]; then
    local id
    log_flags "$dir"
    # The cluster id made here, as `kafka-storage random-uuid` makes it (URL-safe base64 of 16
    # random bytes, drawn again when it starts with '-', which StorageTool's parser takes for an
    # option): one JVM start fewer, and Kafka 4's take 5-10 s each on a loaded 2-core machine.
    id="-"
    while [[ "$id" == -* ]]; do id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"; done
    java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -cp "$LIB/*" "${LOG_FLAGS[@]}" \
      kafka.tools.StorageTool format -t "$id" -c "$dir/server.properties" "${scram[@]}" >"$LOGS/kafka-format.log" 2>&1 \
      || { cat "$LOGS/kafka-format.log" >&2; die "kafka storage format failed"; }
  fi
  java_start kafka 512m kafka.Kafka "$dir/server.properties"
}

start_redis() {
  need redis-server "apt-get install -y redis-server"
  need redis-cli "apt-get install -y redis-tools"
  mkdir -p "$INFRA/redis"
  local net=(--port "$REDIS_PORT")
  if [[ "$SECURE" == 1 ]]; then
    make_tls
    # TLS only (no plaintext port); one ACL user, the password-less default user off.
    printf 'user idmint on >%s ~* &* +@all\nuser default off\n' "$PASSWORD" >"$INFRA/redis/users.acl"
    net=(--port 0 --tls-port "$REDIS_PORT" --tls-cert-file "$TLS/server.pem" --tls-key-file "$TLS/server.key"
      --tls-ca-cert-file "$TLS/ca.pem" --tls-auth-clients no --aclfile "$INFRA/redis/users.acl")
  fi
  # No persistence: a restart is a clean Redis, which is what data-loss tests want.
  redis-server --bind "$HOST" "${net[@]}" --save '' --appendonly no \
    --maxmemory-policy noeviction --dir "$INFRA/redis" --daemonize yes \
    --pidfile "$PIDS/redis.pid" --logfile "$LOGS/redis.log" >/dev/null
  local i
  for i in $(seq 1 50); do [[ -s "$PIDS/redis.pid" ]] && break; sleep 0.1; done
}

# initdb and postgres refuse to run as root; run them as the postgres user then.
as_pg() {
  if [[ "$(id -u)" == 0 ]]; then
    id postgres >/dev/null 2>&1 || die "running as root needs a 'postgres' user: apt-get install -y postgresql"
    local ru; ru="$(command -v runuser || echo /usr/sbin/runuser)"
    [[ -x "$ru" ]] || die "'runuser' not found. Install it with: apt-get install -y util-linux"
    (cd / && "$ru" -u postgres -- "$@")
  else
    "$@"
  fi
}

secure_postgres() { # secure_postgres <data dir>: TLS and scram passwords on TCP, once after initdb
  make_tls
  # TCP only over TLS with a scram password; the local socket stays trusted for the admin.
  printf 'local all all trust\nhostssl all all %s/32 scram-sha-256\n' "$HOST" >"$1/pg_hba.conf"
  install -m 600 "$TLS/server.key" "$1/server.key"
  install -m 644 "$TLS/server.pem" "$1/server.crt"
  printf "ssl = on\npassword_encryption = 'scram-sha-256'\n" >>"$1/postgresql.conf"
  [[ "$(id -u)" == 0 ]] && chown postgres: "$1/pg_hba.conf" "$1/server.key" "$1/server.crt"
  as_pg "$(pg_bin postgres)" --single -D "$1" postgres <<<"ALTER ROLE postgres PASSWORD '$PASSWORD'" \
    >"$LOGS/postgres-password.log" 2>&1 || { cat "$LOGS/postgres-password.log" >&2; die "setting the postgres password failed"; }
}

start_postgres() {
  local initdb pgctl dir="$INFRA/postgres"
  initdb="$(pg_bin initdb)"; pgctl="$(pg_bin pg_ctl)"
  pg_bin psql >/dev/null
  mkdir -p "$dir"
  [[ "$(id -u)" == 0 ]] && chown postgres: "$dir"
  if [[ ! -f "$dir/data/PG_VERSION" ]]; then
    as_pg "$initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 --no-sync \
      >"$LOGS/postgres-initdb.log" 2>&1 || { cat "$LOGS/postgres-initdb.log" >&2; die "initdb failed"; }
    [[ "$SECURE" == 1 ]] && secure_postgres "$dir/data"
  fi
  touch "$LOGS/postgres.log"
  [[ "$(id -u)" == 0 ]] && chown postgres: "$LOGS/postgres.log"
  # Throwaway cluster: no fsync (only a machine crash could lose data), but commits are written
  # before they return (synchronous_commit on), so a killed Postgres keeps every segment it
  # allocated, as a real one does: fault tests that kill it must not lose committed counters.
  as_pg "$pgctl" -D "$dir/data" -l "$LOGS/postgres.log" -W start \
    -o "-h $HOST -p $PG_PORT -k $dir -c fsync=off -c full_page_writes=off -c max_connections=200" \
    >/dev/null
  local i
  for i in $(seq 1 50); do [[ -s "$dir/data/postmaster.pid" ]] && break; sleep 0.1; done
  head -n 1 "$dir/data/postmaster.pid" >"$PIDS/postgres.pid"
}

# ---------------------------------------------------------------- stoppers

stop_pid() { # stop_pid <server> <signal> <seconds>: signal, wait, then SIGKILL
  local s="$1" sig="$2" pid i
  pid="$(own_pid "$s")" || { rm -f "$PIDS/$s.pid"; return 0; }
  kill "-$sig" "$pid" 2>/dev/null || true
  # A paused (SIGSTOP) server only acts on SIGTERM once it runs again.
  kill -CONT "$pid" 2>/dev/null || true
  for ((i = 0; i < $3 * 10; i++)); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    log "$s did not stop in $3 s, killing it"
    kill -KILL "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.1; done
  fi
  rm -f "$PIDS/$s.pid"
}

# Returns 3 when a server answers but is not ours to stop (external, or another checkout's):
# down tolerates that, while stop/kill/restart fail so a fault test never passes without its fault.
stop_server() { # stop_server <server> [crash]
  local s="$1" mode="${2:-}"
  if external "$s"; then log "$s is external ($(url_of "$s")): not stopping it"; return 3; fi
  if ! own_pid "$s" >/dev/null; then
    rm -f "$PIDS/$s.pid"
    if probe_quiet "$s"; then
      log "$s at $(url_of "$s") was not started by this checkout: leaving it"
      return 3
    fi
    return 0
  fi
  if [[ "$mode" == crash ]]; then
    if [[ "$s" == postgres ]]; then
      as_pg "$(pg_bin pg_ctl)" -D "$INFRA/postgres/data" stop -m immediate >/dev/null 2>&1 || true
    fi
    stop_pid "$s" KILL 10
  elif [[ "$s" == postgres ]]; then
    as_pg "$(pg_bin pg_ctl)" -D "$INFRA/postgres/data" stop -m fast -w -t 30 >/dev/null 2>&1 || true
    stop_pid postgres TERM 10
  else
    stop_pid "$s" TERM 30
  fi
  log "$s ${mode:-stopped}${mode:+ed}"
}

# Whether something accepts connections on a server's host:port (its first one, for a list).
port_taken() {
  local hp; hp="$(url_of "$1")"
  hp="${hp#*://}"; hp="${hp#*@}"; hp="${hp%%/*}"; hp="${hp%%,*}"
  timeout 1 bash -c "exec 3<>/dev/tcp/${hp%:*}/${hp##*:}" 2>/dev/null
}

# A probe that never dies, for status and decisions (probe_kafka dies without node_modules).
probe_quiet() { ( "probe_$1" "$(url_of "$1")" ) 2>/dev/null; }

# ---------------------------------------------------------------- commands

ensure_started() { # start <server> unless something answers for it already; no wait
  local s="$1"
  if external "$s"; then return; fi
  if own_pid "$s" >/dev/null; then return; fi
  if probe_quiet "$s"; then
    log "$s: reusing the server already answering at $(url_of "$s")"
    return
  fi
  # Its port taken but no answer in time: a busy server (a machine under load answers a probe
  # late), or one starting. A second on that port could only fail; wait for the first instead.
  if port_taken "$s"; then
    log "$s: $(url_of "$s") is taken but did not answer yet; waiting for that server rather than starting another"
    return
  fi
  rm -f "$PIDS/$s.pid"
  log "starting $s"
  # 9>&-: servers must not inherit the lock fd, or they would hold the lock for their lifetime.
  "start_$s" 9>&-
  STARTED_AT[$s]="$(now_ms)"
}

ready_timeout() { case "$1" in kafka) echo 120 ;; zookeeper) echo 60 ;; redis) echo 15 ;; postgres) echo 60 ;; esac; }

write_env() {
  local tmp="$INFRA/env.tmp"
  {
    echo "# Written by scripts/infra.sh up: source it (. .infra/env) to reach the local servers."
    if [[ -n "$HA_ENV" ]]; then
      sed 's/^/export /' <<<"$HA_ENV"
    else
      echo "export KAFKA_BROKERS=$(url_of kafka)"
      echo "export ZK_CONNECT=$(url_of zookeeper)"
      echo "export REDIS_URL=$(url_of redis)"
    fi
    # One variable a line, unquoted: scripts read this file as well as shells (quote it if you copy).
    echo "export DATABASE_URL=${PG_HA_URL:-$(url_of postgres)}"
    if [[ "$SECURE" == 1 ]]; then
      echo "export IDMINT_REDIS_TLS_CA=$TLS/ca.pem"
      echo "export IDMINT_ZK_AUTH=idmint:$PASSWORD"
      echo "export IDMINT_KAFKA_TLS_CA=$TLS/ca.pem"
      echo "export IDMINT_KAFKA_SASL_MECHANISM=scram-sha-512"
      echo "export IDMINT_KAFKA_SASL_USERNAME=idmint"
      echo "export IDMINT_KAFKA_SASL_PASSWORD=$PASSWORD"
    fi
  } >"$tmp"
  mv "$tmp" "$INFRA/env"
}

check_server_name() {
  local s
  for s in "${SERVERS[@]}"; do [[ "$s" == "${1:-}" ]] && return; done
  die "unknown server '${1:-}': expected one of ${SERVERS[*]}"
}

cmd_up() {
  local s t0; t0="$(now_ms)"
  if [[ "$HA" == 1 ]]; then
    ensure_jars
    ensure_started postgres
    HA_ENV="$(infra_ha up 9>&-)" || die "the replicated servers did not start (logs in $HA_DIR/logs)"
    wait_for postgres "$(ready_timeout postgres)"
  else
    # Start everything first, then wait: the JVMs warm up in parallel.
    for s in "${SERVERS[@]}"; do ensure_started "$s"; done
    # Fastest first, so each "ready after its start" time is its own and not its neighbour's.
    for s in redis postgres zookeeper kafka; do wait_for "$s" "$(ready_timeout "$s")"; done
  fi
  if [[ "${IDMINT_INFRA_PG_HA:-0}" == 1 ]]; then
    PG_HA_URL="$(pg_ha up 9>&- | sed -n 's/^DATABASE_URL=//p')"
    [[ -n "$PG_HA_URL" ]] || die "the Patroni cluster did not start (logs in $PG_HA_DIR)"
  fi
  write_env
  log "all servers answer ($(($(now_ms) - t0)) ms); env written to $INFRA/env"
}

cmd_down() {
  local s
  # Kafka first: it should not see its controller or clients vanish mid-shutdown for long.
  # The Patroni nodes first: they need ZooKeeper to step down cleanly.
  local list=(kafka zookeeper redis postgres)
  # Patroni's ZooKeeper is the ensemble when the replicated profile runs.
  [[ -d "$HA_DIR" ]] && HA_ENV="$(infra_ha env)"
  [[ -d "$PG_HA_DIR" ]] && { pg_ha down || true; }
  # The replicated profile ran Postgres alone from this directory.
  [[ -d "$HA_DIR" ]] && { list=(postgres); infra_ha down || true; }
  for s in "${list[@]}"; do
    # What this checkout started stops even when the environment names another server: a shell
    # that sourced the env of IDMINT_INFRA_PG_HA=1 has DATABASE_URL on Patroni's nodes.
    if own_pid "$s" >/dev/null; then (unset "$(env_var "$s")"; stop_server "$s") || true
    else stop_server "$s" || true; fi
  done
}

pg_ha() { ZK_CONNECT="$(ha_var ZK_CONNECT || url_of zookeeper)" IDMINT_PG_HA_DIR="$PG_HA_DIR" bash "$ROOT/scripts/pg-ha.sh" "$@"; }
infra_ha() { IDMINT_INFRA_HA_DIR="$HA_DIR" IDMINT_INFRA_LIB="$(dirname "$LIB")" IDMINT_INFRA_KAFKA_VERSION="$KAFKA_VERSION" bash "$ROOT/scripts/infra-ha.sh" "$@"; }
ha_var() { [[ -n "$HA_ENV" ]] && sed -n "s/^$1=//p" <<<"$HA_ENV" | grep .; }

cmd_status() {
  local s pid owner rc=0 list=("${SERVERS[@]}")
  # The replicated profile runs Postgres alone here; infra-ha.sh reports the rest.
  [[ -d "$HA_DIR" ]] && { list=(postgres); HA_ENV="$(infra_ha env)"; }
  for s in "${list[@]}"; do
    if external "$s"; then owner="external"
    elif pid="$(own_pid "$s")"; then owner="pid $pid"
    else owner="not started here"; fi
    if probe_quiet "$s"; then
      # The state before the URL: a long URL (TLS, credentials) never shifts the columns.
      printf '%-10s %-8s %-18s %s\n' "$s" answers "($owner)" "$(url_of "$s")"
    else
      printf '%-10s %-8s %-18s %s\n' "$s" DOWN "($owner)" "$(url_of "$s")"
      rc=1
    fi
  done
  [[ -d "$PG_HA_DIR" ]] && { pg_ha status || rc=1; }
  [[ -d "$HA_DIR" ]] && { infra_ha status || rc=1; }
  return "$rc"
}

main() {
  local cmd="${1:-}"
  mkdir -p "$INFRA" "$LOGS" "$PIDS"
  # One infra.sh at a time per checkout: parallel test projects may call up together.
  exec 9>"$INFRA/.lock"
  flock 9
  case "$cmd" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    start) check_server_name "${2:-}"; ensure_started "$2"; wait_for "$2" "$(ready_timeout "$2")" ;;
    stop) check_server_name "${2:-}"; stop_server "$2" ;;
    kill) check_server_name "${2:-}"; stop_server "$2" crash ;;
    restart)
      check_server_name "${2:-}"
      stop_server "$2"; ensure_started "$2"; wait_for "$2" "$(ready_timeout "$2")" ;;
    pid) check_server_name "${2:-}"; own_pid "$2" || die "$2 is not running from this checkout" ;;
    pause | resume)
      check_server_name "${2:-}"
      [[ "$2" != postgres ]] || die "pause/resume supports redis, kafka, zookeeper (Postgres is many processes)"
      local pid; pid="$(own_pid "$2")" || die "$2 is not running from this checkout"
      # SIGSTOP: the port stays open but nothing answers, like a hung server.
      kill "-$([[ "$cmd" == pause ]] && echo STOP || echo CONT)" "$pid"
      log "$2 ${cmd}d (pid $pid)" ;;
    *)
      echo "usage: $0 up|down|status | start|stop|restart|kill|pause|resume|pid <${SERVERS[*]}>" >&2
      exit 2 ;;
  esac
}

main "$@"
