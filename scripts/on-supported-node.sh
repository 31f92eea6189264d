#!/usr/bin/env bash
# on-supported-node.sh <command...>: runs the command on a Node that package.json's engines accept.
# The machine's own when it is one (22.22+ on the 22 line, or 24+); else the pinned Node 24 from
# the npm registry, installed once into .tools/ (scripts/node-runtime.sh). `npm test` and the
# other test scripts run through it, so a machine whose Node is older (Node 20, past its end of
# life) still runs the tests on a supported one.
set -euo pipefail
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a >= 24 || (a === 22 && b >= 22) ? 0 : 1)' 2>/dev/null; then
  # shellcheck source=node-runtime.sh
  source "$(dirname "${BASH_SOURCE[0]}")/node-runtime.sh" 24
fi
exec "$@"
