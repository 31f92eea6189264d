# Sourced, not run: puts a Node of the wanted major first on PATH for the rest of the shell.
#
#   source scripts/node-runtime.sh        # Node 24, the baseline (the Dockerfile's, CI's)
#   source scripts/node-runtime.sh 22     # Node 22, the oldest line the unit tier runs on
#
# The machine's own `node` is used when it is of that major (24: 24 or newer). Otherwise a pinned
# build comes from the npm registry's node-linux-<arch> package (the official binary; no install
# script), installed once into .tools/node-<version> (git-ignored) with the machine's npm, which
# then runs on the new Node too (npm is a script under `#!/usr/bin/env node`). Needs any Node
# with npm to start from.

# The exact builds, pinned like every other dependency: change them here.
IDMINT_NODE_24=24.21.0
IDMINT_NODE_22=22.23.3

idmint_use_node() { # idmint_use_node <major>
  local major="$1" root version have arch dir
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  case "$major" in
    24) version="$IDMINT_NODE_24" ;;
    22) version="$IDMINT_NODE_22" ;;
    *) echo "node-runtime: no pinned Node $major (24 or 22)" >&2; return 1 ;;
  esac
  have="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
  if [[ "$have" == "$major" ]] || { [[ "$major" == 24 ]] && ((have > 24)); }; then
    echo "node-runtime: the machine's Node $(node --version) serves" >&2
    return 0
  fi
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64) arch=arm64 ;;
    *) echo "node-runtime: no node-linux package for $(uname -m); install Node $major by hand" >&2; return 1 ;;
  esac
  dir="$root/.tools/node-$version"
  if [[ ! -x "$dir/node_modules/node-linux-$arch/bin/node" ]]; then
    command -v npm >/dev/null 2>&1 || { echo "node-runtime: npm not found: install Node and npm first" >&2; return 1; }
    echo "node-runtime: installing Node $version (node-linux-$arch) into $dir" >&2
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    # Into a temporary folder, renamed when whole: an interrupted install is never taken for one.
    npm install --prefix "$dir.tmp" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
      "node-linux-$arch@$version" >&2 || { rm -rf "$dir.tmp"; echo "node-runtime: installing Node $version failed" >&2; return 1; }
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  export PATH="$dir/node_modules/node-linux-$arch/bin:$PATH"
  hash -r
  echo "node-runtime: Node $(node --version) from $dir (npm $(npm --version))" >&2
}

idmint_use_node "${1:-24}"
