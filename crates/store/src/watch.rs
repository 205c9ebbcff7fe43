//! The change feed: `rudder_core::watch`, and the source of each backend
//! this build has. A store hands out its own feed (`store.feed(options)`),
//! from its backend's source.

pub use rudder_core::watch::*;

#[cfg(feature = "file")]
pub use rudder_file::FileSource;
#[cfg(feature = "postgres")]
pub use rudder_postgres::PostgresSource;
#[cfg(feature = "sqlite")]
pub use rudder_sqlite::SqliteSource;
