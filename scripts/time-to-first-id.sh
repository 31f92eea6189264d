#!/usr/bin/env bash
# Time from starting `idmint serve` (embedded, fresh data directory) to the first served ID, and
# the server's RSS once idle. Usage: scripts/time-to-first-id.sh [compiled|sources] [runs]
#   compiled: the compiled dist/ (what npm start runs once built); sources: TypeScript through tsx.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode="${1:-compiled}"; runs="${2:-5}"
[ "$mode" = sources ] && export IDMINT_RUN_SOURCES=1
[ "$mode" = compiled ] && node scripts/build.mjs --if-stale
port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
for i in $(seq "$runs"); do
  dir=$(mktemp -d)
  t0=$(date +%s%N)
  IDMINT_DATA_DIR="$dir" IDMINT_PORT="$port" LOG_LEVEL=warn node bin/idmint.js serve >/dev/null 2>&1 &
  pid=$!
  until curl -sf "http://127.0.0.1:$port/v1/ids/demo" >/dev/null 2>&1; do sleep 0.01; done
  t1=$(date +%s%N)
  sleep 2
  rss=$(awk '/VmRSS/ {print int($2/1024)}' "/proc/$pid/status")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
  echo "$mode run $i: first ID after $(( (t1 - t0) / 1000000 )) ms; idle RSS ${rss} MB"
done
