#!/bin/bash
# Used by docs/performance.md (issue 20, MCP): two rudder builds through
# the same MCP bench, in turns (A, B, A, B, ...), each against the same
# rmcp baseline (benches/scripts/build_rmcp_baseline.sh makes it).
# usage: mcp_ab.sh BASELINE ROUNDS RUDDER_A RUDDER_B
#   RUDDER_A/B: `rudder` binaries (say, target/release/rudder copied aside
#   at two commits). Knobs as for mcp_vs_rmcp.sh; defaults here OPS=160,
#   ROUNDS=3, NOTIFY=10 per run. Prints each run's table rows.
set -e
B=${1:?usage: mcp_ab.sh BASELINE ROUNDS RUDDER_A RUDDER_B}
N=${2:?usage}; A=${3:?usage}; Z=${4:?usage}
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
B=$(abs "$B"); A=$(abs "$A"); Z=$(abs "$Z")
cd "$(dirname "$0")/../.."
cargo bench --bench mcp --no-run
BENCH=$(ls -t target/release/deps/mcp-* | grep -v '\.d$' | head -1)
for i in $(seq "$N"); do
  for bin in "$A" "$Z"; do
    echo "== $bin (round $i of $N): $(uptime)"
    RUDDER_MCP_BENCH_RUDDER="$bin" RUDDER_MCP_BASELINE="$B" \
      RUDDER_MCP_BENCH_OPS=${RUDDER_MCP_BENCH_OPS:-160} \
      RUDDER_MCP_BENCH_ROUNDS=${RUDDER_MCP_BENCH_ROUNDS:-3} \
      RUDDER_MCP_BENCH_NOTIFY=${RUDDER_MCP_BENCH_NOTIFY:-10} \
      "$BENCH" --bench | grep -E '^(create|tasks|notify)'
  done
done
