//! [`AnyBackend`]: the backend a [`StoreUrl`] names, chosen at run time
//! among the backends this build has (a Cargo feature each).

use rudder_core::watch::FeedSource;
use rudder_core::{
    Backend, ChangeLog, Connect, Location, Settings, StoreError, StoreUrl, Transaction, UrlError,
};
#[cfg(all(feature = "file", feature = "sqlite", feature = "postgres"))]
use rudder_core::{CopyCounts, NewerInStore};
#[cfg(all(feature = "file", feature = "sqlite", feature = "postgres"))]
use rudder_model::task::Task;

#[cfg(feature = "file")]
use rudder_file::{FileBackend, FileRows, FileSource};
#[cfg(feature = "postgres")]
use rudder_postgres::PostgresBackend;
#[cfg(feature = "sqlite")]
use rudder_sqlite::SqliteBackend;

/// The backend a [`StoreUrl`] names, chosen at run time: only a URL this
/// build can open makes one ([`crate::Store::connect`]).
#[derive(Debug)]
pub enum AnyBackend {
    #[cfg(feature = "file")]
    File(FileBackend),
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteBackend),
    #[cfg(feature = "postgres")]
    Postgres(PostgresBackend),
    /// A store in this process's memory (`memory:NAME`, feature `memory`).
    #[cfg(feature = "memory")]
    Memory(rudder_core::memory::MemoryBackend),
}

/// What `rudder migrate` did to a PostgreSQL store ([`AnyBackend::migrate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// The schema version found before, `None` when there were no tables.
    pub found: Option<i32>,
    /// The schema version the store is at now.
    pub version: i32,
    /// Why the text filter is not indexed, `None` when it is.
    pub text_index_missing: Option<String>,
}

impl Connect for AnyBackend {
    /// The backend of `url` among those this build has; a URL of another
    /// (a feature left out) or a PostgreSQL URL whose parameters are not
    /// valid is refused (password redacted).
    fn connect(url: &StoreUrl, settings: &Settings) -> Result<Self, UrlError> {
        #[allow(unused_variables)]
        let s = settings;
        match url {
            #[cfg(feature = "file")]
            StoreUrl::File(p) => Ok(AnyBackend::File(FileBackend::new(p).with_settings(s))),
            #[cfg(feature = "sqlite")]
            StoreUrl::Sqlite(p) => Ok(AnyBackend::Sqlite(SqliteBackend::new(p).with_settings(s))),
            #[cfg(feature = "postgres")]
            StoreUrl::Postgres(u) => {
                rudder_postgres::config::check(u)?;
                Ok(AnyBackend::Postgres(
                    PostgresBackend::new(u.clone()).with_settings(s),
                ))
            }
            #[cfg(feature = "memory")]
            StoreUrl::Memory(name) => Ok(AnyBackend::Memory(
                rudder_core::memory::MemoryBackend::named(name),
            )),
            #[allow(unreachable_patterns)]
            other => Err(UrlError::NotBuilt {
                url: other.to_string(),
                scheme: other.scheme(),
            }),
        }
    }
}

impl AnyBackend {
    /// [`FileBackend::last_run_trusted`]; false for other backends (tests).
    #[doc(hidden)]
    pub fn last_run_trusted(&self) -> bool {
        match self {
            #[cfg(feature = "file")]
            AnyBackend::File(b) => b.last_run_trusted(),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The URL this backend was opened from (to open the same store
    /// again).
    pub fn url(&self) -> StoreUrl {
        match self {
            #[cfg(feature = "file")]
            AnyBackend::File(b) => StoreUrl::File(b.path().to_path_buf()),
            #[cfg(feature = "sqlite")]
            AnyBackend::Sqlite(b) => StoreUrl::Sqlite(b.path().to_path_buf()),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => StoreUrl::Postgres(b.url().clone()),
            #[cfg(feature = "memory")]
            AnyBackend::Memory(b) => StoreUrl::Memory(b.name().to_string()),
        }
    }

    /// The store as its errors name it.
    pub fn store_location(&self) -> Location {
        self.inner().location()
    }

    fn inner(&self) -> &dyn Backend {
        match self {
            #[cfg(feature = "file")]
            AnyBackend::File(b) => b,
            #[cfg(feature = "sqlite")]
            AnyBackend::Sqlite(b) => b,
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => b,
            #[cfg(feature = "memory")]
            AnyBackend::Memory(b) => b,
        }
    }

    /// The changes recorded after the change `after` (at most `limit`, of
    /// `task` only if given), from the change log of a database store;
    /// `None` from a store that keeps none (a JSON file) or has none yet.
    pub fn change_log(
        &self,
        after: i64,
        task: Option<&str>,
        limit: usize,
    ) -> Result<Option<ChangeLog>, StoreError> {
        #[allow(unused_variables)]
        let (after, task, limit) = (after, task, limit);
        match self {
            #[cfg(feature = "file")]
            AnyBackend::File(_) => Ok(None),
            #[cfg(feature = "sqlite")]
            AnyBackend::Sqlite(db) => Ok(db.changes_after(after, task, limit)?.map(|(_, l)| l)),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(db) => Ok(db.changes_after(after, task, limit)?.map(|(_, l)| l)),
            #[cfg(feature = "memory")]
            AnyBackend::Memory(_) => Ok(None),
        }
    }

    /// Create or bring up to date the store's tables now, and index its
    /// text filter if the database allows (`rudder migrate`); `None` from a
    /// store that its first write sets up (a JSON file, SQLite).
    pub fn migrate(&self) -> Option<Result<Migrated, StoreError>> {
        match self {
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(pg) => Some((|| {
                let found = pg.migrate()?;
                // Tried again at every `migrate`: an administrator may
                // have installed pg_trgm since.
                let text_index_missing = pg.ensure_text_index()?;
                Ok(Migrated {
                    found,
                    version: rudder_postgres::SCHEMA_VERSION,
                    text_index_missing,
                })
            })()),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Rows a reader pages through that the store's own feed keeps up to
    /// date, with that feed's source, for a store whose every query reads
    /// it whole (a JSON file: one read of it serves both); `None` where a
    /// query reads only what it needs (a database), to be asked directly.
    #[cfg(feature = "file")]
    pub fn kept_rows(&self) -> Option<(std::sync::Arc<FileRows>, Box<dyn FeedSource>)> {
        match self {
            AnyBackend::File(backend) => {
                let rows = std::sync::Arc::new(FileRows::new(backend.clone()));
                let source = FileSource::with_rows(backend.path(), std::sync::Arc::clone(&rows));
                Some((rows, Box::new(source)))
            }
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

/// What `copy` asks of each backend: how FROM is read and how TO takes
/// tasks in bulk, answered here so that `copy` never names a backend.
#[cfg(all(feature = "file", feature = "sqlite", feature = "postgres"))]
impl AnyBackend {
    /// A JSON file store's stream for a copy (one descriptor: one version
    /// of the file), `None` inside when there is no file; `None` for a
    /// database, which is read a page at a time.
    pub(crate) fn file_stream(
        &self,
    ) -> Option<Result<Option<rudder_file::FileStream>, StoreError>> {
        match self {
            AnyBackend::File(b) => Some(rudder_file::FileStream::open(b)),
            _ => None,
        }
    }

    /// Into a store that holds no task, everything `feed` gives in one
    /// transaction (PostgreSQL's bulk load, indexes built at the end):
    /// the counts, or `None` inside when the store held tasks; `None` from
    /// a backend without a bulk load.
    #[allow(clippy::type_complexity)]
    pub(crate) fn load_into_empty(
        &self,
        feed: &mut dyn FnMut(
            &mut dyn FnMut(&[Task]) -> Result<(), StoreError>,
        ) -> Result<(), StoreError>,
    ) -> Option<Result<Option<CopyCounts>, StoreError>> {
        match self {
            AnyBackend::Postgres(db) => Some(db.load_into_empty(feed)),
            _ => None,
        }
    }

    /// A batch written by the database's own bulk copy, or the task of it
    /// the store holds newer; `None` from a store written through its
    /// transaction (a JSON file, rewritten whole).
    pub(crate) fn copy_batch(
        &self,
        batch: &[Task],
    ) -> Option<Result<Result<CopyCounts, NewerInStore>, StoreError>> {
        match self {
            AnyBackend::Sqlite(db) => Some(db.copy_batch(batch)),
            AnyBackend::Postgres(db) => Some(db.copy_batch(batch)),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

impl Backend for AnyBackend {
    fn location(&self) -> Location {
        self.inner().location()
    }
    fn shown_location(&self) -> String {
        self.inner().shown_location()
    }
    fn snapshot(
        &self,
        f: &mut dyn FnMut(&dyn Transaction) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.inner().snapshot(f)
    }
    fn exists(&self) -> Result<bool, StoreError> {
        self.inner().exists()
    }
    fn cannot_write(&self) -> Option<String> {
        self.inner().cannot_write()
    }
    fn exists_to_write(&self) -> Result<bool, StoreError> {
        self.inner().exists_to_write()
    }
    fn batch_size(&self) -> Option<usize> {
        self.inner().batch_size()
    }
    fn quick_reads(&self) -> bool {
        self.inner().quick_reads()
    }
    fn transaction(
        &self,
        f: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        self.inner().transaction(f)
    }
    fn feed_source(&self, task: Option<String>) -> Box<dyn FeedSource> {
        self.inner().feed_source(task)
    }

    fn delivery(
        &self,
        name: &str,
        key: &rudder_core::delivery::EventKey,
        f: &mut rudder_core::delivery::Update<'_>,
    ) -> Result<(), StoreError> {
        self.inner().delivery(name, key, f)
    }
}

/// A second store over what `store` opened, with the settings it was
/// connected with (the process's, for a store made over a backend by
/// hand): for a worker or a notifier whose threads share a store of their
/// own. The URL is already typed: nothing is parsed again.
pub fn reopen(store: &crate::Store) -> Result<crate::Store, UrlError> {
    let settings = store
        .settings()
        .copied()
        .unwrap_or_else(Settings::of_process);
    let again = crate::Store::connect_with(store.backend().url(), &settings)?;
    // It writes as the original did (a gateway's workers sign as the gateway).
    Ok(match store.author() {
        Some(author) => again.by(author.clone()),
        None => again,
    })
}

#[cfg(all(test, feature = "file", feature = "sqlite", feature = "postgres"))]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A reopened store keeps the settings its original was connected
    /// with, not the process's.
    #[test]
    fn a_reopened_store_keeps_its_settings() {
        let settings = Settings {
            lock_timeout: Duration::from_millis(1234),
            max_store_bytes: Some(4096),
        };
        let store = crate::Store::connect_with("tasks.json", &settings).unwrap();
        let again = reopen(&store).unwrap();
        assert_eq!(again.settings(), Some(&settings));
        match again.backend() {
            AnyBackend::File(b) => {
                assert_eq!(b.lock_timeout(), settings.lock_timeout);
                assert_eq!(b.max_bytes(), 4096);
            }
            other => panic!("{other:?}"),
        }
    }

    /// What a caller passes is what each backend gets: no backend reads
    /// the environment itself.
    #[test]
    fn each_backend_gets_the_settings_it_is_opened_with() {
        let settings = Settings {
            lock_timeout: Duration::from_millis(1234),
            max_store_bytes: Some(4096),
        };
        let open =
            |url: &str| AnyBackend::connect(&StoreUrl::parse(url).unwrap(), &settings).unwrap();
        match open("tasks.json") {
            AnyBackend::File(b) => {
                assert_eq!(b.lock_timeout(), settings.lock_timeout);
                assert_eq!(b.max_bytes(), 4096);
            }
            other => panic!("{other:?}"),
        }
        match open("sqlite:tasks.db") {
            AnyBackend::Sqlite(b) => assert_eq!(b.lock_timeout(), settings.lock_timeout),
            other => panic!("{other:?}"),
        }
        match open("postgres://localhost/rudder") {
            AnyBackend::Postgres(b) => assert_eq!(b.lock_timeout(), settings.lock_timeout),
            other => panic!("{other:?}"),
        }
        // The defaults, without settings.
        assert_eq!(
            FileBackend::new("tasks.json").lock_timeout(),
            rudder_core::DEFAULT_LOCK_TIMEOUT
        );
    }
}
