#!/bin/bash
# Used by docs/performance.md (issue 20, MCP): builds the baseline of
# benches/scripts/mcp_vs_rmcp.sh, rmcp's own conformance server (its
# in-memory TaskManager), against the rmcp version of this repository's
# Cargo.lock, with TCP_NODELAY on its accepted connections as rudder has
# (without it its answers wait for the client's delayed ACK, ~40 ms, often
# enough to move even one client's median).
# usage: build_rmcp_baseline.sh DIR [RUST_SDK]
#   DIR: where the crate is made and built; prints the binary's path.
#   RUST_SDK: a git repository of modelcontextprotocol/rust-sdk (a URL or a
#   local clone; default the GitHub one), whose tag rmcp-v3.1.4 holds
#   conformance/src/bin/server.rs (it compiles unchanged against 3.11.0).
set -euo pipefail
DIR=${1:?usage: build_rmcp_baseline.sh DIR [RUST_SDK]}
SDK=${2:-https://github.com/modelcontextprotocol/rust-sdk}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RMCP=$(awk '/^name = "rmcp"$/ {getline; gsub(/version = |"/, ""); print; exit}' "$ROOT/Cargo.lock")
[ -n "$RMCP" ] || { echo "no rmcp in $ROOT/Cargo.lock" >&2; exit 2; }
mkdir -p "$DIR/src"
cd "$DIR"
if [ ! -d rust-sdk ]; then
    git clone --quiet --depth 1 --branch rmcp-v3.1.4 "$SDK" rust-sdk
fi
SERVER=rust-sdk/conformance/src/bin/server.rs
grep -q 'axum::serve(listener, router).await?;' "$SERVER" || {
    echo "$SERVER: its axum::serve line is not the expected one" >&2
    exit 2
}
sed 's/axum::serve(listener, router).await?;/use axum::serve::ListenerExt as _;\n    let listener = listener.tap_io(|tcp| { let _ = tcp.set_nodelay(true); });\n    axum::serve(listener, router).await?;/' \
    "$SERVER" > src/main.rs
cat > Cargo.toml <<EOF
[package]
name = "rmcp-conformance-server-baseline"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
rmcp = { version = "=$RMCP", features = ["server", "elicitation", "request-state", "transport-streamable-http-server"] }
tokio = { version = "1", features = ["full"] }
tokio-util = { version = "0.7" }
serde = { version = "1", features = ["derive"] }
serde_json = "1"
tracing = "0.1"
tracing-subscriber = { version = "0.3", features = ["env-filter"] }
axum = { version = "0.8", features = ["macros"] }
anyhow = "1"

[workspace]
EOF
# The versions rudder itself builds with, where they are shared.
cp "$ROOT/Cargo.lock" .
cargo build --release --quiet
echo "$DIR/target/release/rmcp-conformance-server-baseline"
