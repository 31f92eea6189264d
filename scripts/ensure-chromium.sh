#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard e2e test when it is missing; prints its path.
# The browser test drives it with playwright-core, so no Playwright browser download is needed.
set -euo pipefail

BIN="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "ensure-chromium: $BIN is missing and this user cannot install it (run as root: apt-get install -y chromium)" >&2
    exit 1
  fi
fi

# Another process may be installing at the same time: wait on dpkg's lock rather than failing.
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update >&2
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends chromium >&2

if [ ! -x "$BIN" ]; then
  echo "ensure-chromium: installed chromium but $BIN is not executable" >&2
  exit 1
fi
echo "$BIN"
