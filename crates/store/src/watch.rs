//! The change feed of the store a URL names: `rudder_core::watch` with the
//! source of each backend this build has.

use std::path::PathBuf;

pub use rudder_core::watch::*;
use rudder_core::{Settings, StoreUrl};

#[cfg(feature = "file")]
pub use rudder_file::FileSource;
#[cfg(feature = "postgres")]
pub use rudder_postgres::PostgresSource;
#[cfg(feature = "sqlite")]
pub use rudder_sqlite::SqliteSource;

/// The feed source of the store `url` names, with the process's settings
/// ([`Settings::of_process`]), or why there is none.
pub fn source(url: &StoreUrl, task: Option<String>) -> Result<Box<dyn FeedSource>, String> {
    source_with(url, task, &Settings::of_process())
}

/// [`source`] with `settings`.
pub fn source_with(
    url: &StoreUrl,
    task: Option<String>,
    settings: &Settings,
) -> Result<Box<dyn FeedSource>, String> {
    #[allow(unused_variables)]
    let s = settings;
    match url {
        #[cfg(feature = "file")]
        StoreUrl::File(p) => Ok(Box::new(FileSource::new(p.clone(), task).with_settings(s))),
        #[cfg(feature = "sqlite")]
        StoreUrl::Sqlite(p) => Ok(Box::new(
            SqliteSource::new(p.clone(), task).with_settings(s),
        )),
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(u) => Ok(Box::new(
            PostgresSource::new(u.clone(), task).with_settings(s),
        )),
        #[allow(unreachable_patterns)]
        other => Err(format!(
            "{other}: this build has no {} backend",
            other.scheme()
        )),
    }
}

/// Starting a [`ChangeFeed`] on a store URL.
pub trait Start {
    /// Start watching the store `url` names (a store URL or path, see
    /// [`StoreUrl`]); the first event describes the current state.
    /// Must be called from within a tokio runtime.
    fn start(url: impl Into<PathBuf>, options: FeedOptions) -> ChangeFeed;
}

impl Start for ChangeFeed {
    fn start(url: impl Into<PathBuf>, options: FeedOptions) -> ChangeFeed {
        let url = url.into();
        let source = StoreUrl::parse(url.as_os_str())
            .map_err(|e| e.to_string())
            .and_then(|u| source(&u, options.task.clone()));
        match source {
            Ok(source) => ChangeFeed::with_source(source, options),
            Err(message) => ChangeFeed::unavailable(message),
        }
    }
}
