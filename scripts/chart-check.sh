#!/usr/bin/env bash
# The chart's first rungs, as CI's own step: helm lint --strict and helm template of every values
# file in deploy/helm/idmint (helm from scripts/k8s-tools.mjs). The schema checks and contract
# tests on the rendered objects are test/integration/deploy/chart.test.ts, in npm test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
node scripts/k8s-tools.mjs --quiet
export HELM_CONFIG_HOME="$PWD/.tools/helm/config" HELM_CACHE_HOME="$PWD/.tools/helm/cache" HELM_DATA_HOME="$PWD/.tools/helm/data"
chart=deploy/helm/idmint
for values in "$chart"/values*.yaml; do
  .tools/bin/helm lint --strict "$chart" -f "$values" --quiet
  objects=$(.tools/bin/helm template idmint "$chart" -f "$values" | grep -c '^kind:')
  echo "chart: $(basename "$values"): lint --strict clean, $objects objects rendered"
done
