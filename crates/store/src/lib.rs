//! rudder's task store, as a worker or a tool uses it: open a store URL
//! (`tasks.json`, `sqlite:tasks.db`, `postgres://…`) and get the one policy
//! over the backend it names.
//!
//! ```no_run
//! use rudder_store::{NewTask, Store};
//!
//! let store = Store::connect("sqlite:tasks.db")?;
//! let made = store.create(NewTask { title: Some("INC-1042".into()), ..NewTask::default() })?;
//! println!("{}", made.task.task_id);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Each backend is a Cargo feature (`file`, `sqlite`, `postgres`; all on by
//! default), so a worker that needs SQLite alone pulls in no PostgreSQL
//! client or TLS. The policy and the seam are `rudder-core`, the model
//! `rudder-model`; this crate re-exports both. The architecture is in
//! `docs/architecture.md`.

mod any;
pub mod author;

/// What a process of rudder's environment may hold that a program it
/// starts (a notifier's program, a gateway's stdio upstream) must not see:
/// the store URL (a PostgreSQL password travels there, off argv), libpq's
/// password and the MCP face's token.
pub const WITHHELD_FROM_CHILDREN: [&str; 3] = ["RUDDER_STORE", "PGPASSWORD", "RUDDER_MCP_TOKEN"];
#[cfg(all(feature = "file", feature = "sqlite", feature = "postgres"))]
pub mod copy;
pub mod watch;
pub mod worker;

pub use any::{AnyBackend, Migrated, reopen};
pub use rudder_core::*;
pub use rudder_model::{duration, json, schema, task, text};
pub use worker::{Until, Work};

/// The task store over the backend a store URL names (the policy of
/// `rudder_core::Store` over [`AnyBackend`]); `Store::connect` opens one,
/// and `store.feed(options)` is its change feed.
pub type Store = rudder_core::Store<AnyBackend>;

/// The policy over any backend `B` (tests, a backend of one's own).
pub type StoreOf<B> = rudder_core::Store<B>;

#[cfg(feature = "file")]
pub use rudder_file::{
    self as file, FileBackend, FileRows, RowChange, TaskDigest, decode, encode, fs,
};
#[cfg(feature = "postgres")]
pub use rudder_postgres::{self as postgres, PostgresBackend};
#[cfg(feature = "sqlite")]
pub use rudder_sqlite::{self as sqlite, SqliteBackend};

/// What a program that opens stores needs in scope.
pub mod prelude {
    pub use crate::worker::{Job, Stop, WorkError, Worker};
    pub use crate::{NewTask, Store, StoreError, Until, Work};
}
