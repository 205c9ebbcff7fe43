//! rudder: watch and steer long-running tasks kept in a durable store.
//!
//! This is the `rudder` binary's library: the CLI ([`cli`]) and the demo
//! ([`demo`]). The rest lives in the crates of the workspace (see
//! `docs/architecture.md`), re-exported here under the names the binary and
//! its tests use:
//!
//! - [`task`], [`schema`], [`json`], [`duration`], [`text`]: the task model
//!   and its state machine (`rudder-model`);
//! - [`store`]: the store URL, the one policy and every backend
//!   (`rudder-store`, over `rudder-core` and the backend crates);
//! - [`watch`]: the change feed;
//! - [`worker`]: the worker API (claim, renew, report, ask, finish), in
//!   `rudder-store`;
//! - [`tui`]: the live terminal UI (`rudder-tui`);
//! - [`mcp`]: `rudder mcp`, the MCP face (`rudder-mcp`).
//! - [`gateway`]: `rudder gateway`, calls to upstream MCP servers (`rudder-gateway`).
//!
//! Output goes through fallible writes ([`cli::output::emit`],
//! [`cli::output::note`]), never `print!`, which panics when stdout cannot
//! be written (`rudder list >/dev/full`).

#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub use rudder_model::{duration, json, schema, task, text};
pub use rudder_store as store;
pub use rudder_store::watch;
pub use rudder_tui as tui;

pub use store::{NewTask, Outcome, Store, StoreError};
pub use task::{Actor, Change, Status, Task};
pub mod cli;
pub mod demo;
pub use rudder_gateway as gateway;
pub use rudder_mcp as mcp;
pub use rudder_store::worker;
