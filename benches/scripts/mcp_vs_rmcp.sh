#!/bin/bash
# Used by docs/performance.md (issue 20, MCP).
# usage: mcp_vs_rmcp.sh BASELINE [RUNS]
#   BASELINE: the binary of rmcp's conformance server (modelcontextprotocol/
#   rust-sdk, conformance/src/bin/server.rs, built against the rmcp version
#   of Cargo.lock; you build it, this script does not).
# Runs `cargo bench --bench mcp` RUNS times (default 1): each run starts
# `rudder mcp --http` on a 1M-task SQLite store (built once under
# target/tmp) and the baseline, and times both in turn; prints medians,
# p99, req/s and the ratios. Knobs: RUDDER_MCP_BENCH_{TASKS,OPS,ROUNDS,NOTIFY}.
set -e
B=${1:?usage: mcp_vs_rmcp.sh BASELINE [RUNS]}
RUNS=${2:-1}
[ -x "$B" ] || { echo "not an executable: $B" >&2; exit 2; }
B=$(cd "$(dirname "$B")" && pwd)/$(basename "$B")
cd "$(dirname "$0")/../.."
for i in $(seq "$RUNS"); do
  echo "== run $i of $RUNS: $(uptime)"
  RUDDER_MCP_BASELINE="$B" cargo bench --bench mcp
done
