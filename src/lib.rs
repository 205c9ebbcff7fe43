//! rudder: watch and steer long-running tasks kept in a durable JSON store.
//!
//! - [`task`]: the task record and its state machine;
//! - [`store`]: the store API and its JSON file backend (locking, atomic writes);
//! - [`watch`]: the change feed that turns file changes into transitions;
//! - [`schema`]: input validation and typing by JSON Schema;
//! - [`duration`]: durations as people write them (`90s`, `15m`, `2h`);
//! - [`json`]: JSON that people give, read strictly.
//!
//! Output goes through fallible writes ([`cli::output::emit`],
//! [`cli::output::note`]), never `print!`, which panics when stdout cannot
//! be written (`rudder list >/dev/full`).

#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod duration;
pub mod json;
pub mod schema;
pub mod store;
pub mod task;

pub use store::{NewTask, Outcome, Store, StoreError};
pub use task::{Actor, Change, Status, Task};
pub mod cli;
pub mod demo;
pub mod fuzzing;
pub mod mcp;
pub mod text;
pub mod tui;
pub mod watch;
