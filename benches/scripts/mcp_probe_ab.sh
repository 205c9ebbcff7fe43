#!/bin/bash
# Used by docs/performance.md (issue 20, MCP, 2026-12-03): two `rudder`
# builds in turns (A, B, A, B, ...), each serving `rudder mcp --http` on the
# same SQLite store with the bench's catalogue, timed by mcp_probe.py.
# usage: mcp_probe_ab.sh STORE.db RUDDER_A RUDDER_B ROUNDS N [create|get]
#   STORE.db: a copy of the bench's store (target/tmp/mcp-1000000.db, which
#   `cargo bench --bench mcp` builds); creates are added to it.
set -e
DB=${1:?usage}; A=${2:?usage}; B=${3:?usage}; N=${4:?usage}; OPS=${5:?usage}; WHAT=${6:-create}
cd "$(dirname "$0")/../.."
TOOLS=target/tmp/mcp-bench-tools.toml
[ -f "$TOOLS" ] || { echo "no $TOOLS: run cargo bench --bench mcp once" >&2; exit 2; }
ERR=$(mktemp)
trap 'rm -f "$ERR"' EXIT
for r in $(seq "$N"); do for bin in "$A" "$B"; do
  : > "$ERR"
  "$bin" --store "sqlite:$DB" mcp --tools "$TOOLS" --http 127.0.0.1:0 2> "$ERR" &
  pid=$!
  until grep -q listening "$ERR"; do kill -0 $pid || exit 1; sleep 0.05; done
  port=$(grep -o '127.0.0.1:[0-9]*' "$ERR" | head -1 | cut -d: -f2)
  echo "$bin: $(python3 benches/scripts/mcp_probe.py 127.0.0.1 "$port" "$OPS" "$WHAT")"
  kill $pid; wait $pid 2>/dev/null || true
done; done
