#!/usr/bin/env bash
# Prints the path of the chromium the browser tests drive (playwright-core, no Playwright browser
# download), installing Debian's chromium first when it is missing: ensure-tools.sh does that,
# with the other test tools it finds missing.
set -euo pipefail

BIN="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ ! -x "$BIN" ]; then
  bash "$(dirname "$0")/ensure-tools.sh" >&2
fi
if [ ! -x "$BIN" ]; then
  echo "ensure-chromium: $BIN is still missing after scripts/ensure-tools.sh (set CHROMIUM_PATH to a chromium binary)" >&2
  exit 1
fi
echo "$BIN"
