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
pub use worker::{GatewayOptions, run};

/// Where the gateway tells its operator what happened (an upstream that
/// does not answer, one that answers again): `rudder mcp` and `rudder
/// gateway` write it to stderr.
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;
