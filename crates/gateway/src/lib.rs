//! rudder in front of any MCP server (docs/gateway.md): the upstream side
//! of a tools catalogue, and gateway workers that make each durable task's
//! call upstream under a lease.
//!
//! - [`catalogue`]: the `[[upstream]]` tables of a catalogue file;
//! - [`upstream`]: a session with an upstream (a child over stdio, or
//!   Streamable HTTP), as rmcp's client;
//! - [`directory`]: the tools every upstream lists, kept current;
//! - [`worker`]: gateway workers, one tokio task per call.
//!
//! It depends on `rudder-store` (the store and its worker API) and
//! `rudder-model`; `rudder-mcp` lists the upstreams' tools through a
//! [`Directory`], and the binary runs [`worker::run`] inside `rudder mcp`
//! or as `rudder gateway`.

pub mod call;
pub mod catalogue;
pub mod directory;
pub mod upstream;
pub mod worker;

use std::sync::Arc;

pub use catalogue::{CatalogueError, Upstream};
pub use directory::{Directory, UpstreamTool};
pub use worker::{GatewayOptions, Handoff, Offer, run};

/// Where the gateway tells its operator what happened (an upstream that
/// does not answer, one that answers again): `rudder mcp` and `rudder
/// gateway` write it to stderr.
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

/// The exit code of a usage error (a catalogue or store that cannot be
/// used).
pub const EXIT_USAGE: i32 = 2;

/// Resolves on SIGINT or SIGTERM (a person's Ctrl-C, a deploy's stop):
/// when a process running gateway workers stops them, so that they give
/// their calls' leases back before it exits.
pub async fn interrupted() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// `rudder gateway --tools FILE`: gateway workers for the catalogue's
/// upstreams on the opened `store`, without an MCP face, until SIGINT or
/// SIGTERM; the exit code. Messages go to stderr.
pub fn standalone(
    store: rudder_store::Store,
    tools: &std::path::Path,
    options: GatewayOptions,
) -> i32 {
    let say: Say = Arc::new(|s: &str| {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "rudder gateway: {}",
            rudder_model::text::sanitize(s)
        );
    });
    let upstreams = match catalogue::load(tools) {
        Ok(u) if u.is_empty() => {
            say(&format!(
                "{}: the catalogue names no [[upstream]]",
                tools.display()
            ));
            return EXIT_USAGE;
        }
        Ok(u) => Arc::new(u),
        Err(e) => {
            say(&e.to_string());
            return EXIT_USAGE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            say(&format!("cannot start: {e}"));
            return 1;
        }
    };
    runtime.block_on(async move {
        let directory = Directory::start(Arc::clone(&upstreams), Arc::clone(&say));
        let stop = tokio_util::sync::CancellationToken::new();
        let stopping = stop.clone();
        tokio::spawn(async move {
            interrupted().await;
            stopping.cancel();
        });
        match run(
            &store,
            upstreams,
            directory,
            options,
            Arc::clone(&say),
            stop,
        )
        .await
        {
            Ok(()) => 0,
            Err(e) => {
                say(&e.to_string());
                1
            }
        }
    })
}
