//! [`AnyBackend`]: the backend a [`StoreUrl`] names, chosen at run time
//! among the backends this build has (a Cargo feature each).

use std::ffi::OsStr;
use std::path::Path;

use rudder_core::{
    Backend, Location, Settings, Store, StoreError, StoreUrl, Transaction, UrlError,
};
use rudder_model::task::TaskMap;

#[cfg(feature = "file")]
use rudder_file::FileBackend;
#[cfg(feature = "postgres")]
use rudder_postgres::PostgresBackend;
#[cfg(feature = "sqlite")]
use rudder_sqlite::SqliteBackend;

/// The backend a [`StoreUrl`] names, chosen at run time.
#[derive(Debug)]
pub enum AnyBackend {
    #[cfg(feature = "file")]
    File(FileBackend),
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteBackend),
    #[cfg(feature = "postgres")]
    Postgres(PostgresBackend),
    /// A URL this build cannot open: every operation is refused with why.
    Unsupported(UrlError),
}

/// Parse a store URL and check it as far as can be done without opening
/// the store: the scheme, and for PostgreSQL every connection parameter.
/// Errors show the URL with its password redacted.
pub fn parse_url(url: impl AsRef<OsStr>) -> Result<StoreUrl, UrlError> {
    let url = StoreUrl::parse(url)?;
    #[cfg(feature = "postgres")]
    if let StoreUrl::Postgres(u) = &url {
        rudder_postgres::config::check(u)?;
    }
    Ok(url)
}

impl AnyBackend {
    /// [`FileBackend::last_run_trusted`]; false for other backends (tests).
    #[doc(hidden)]
    pub fn last_run_trusted(&self) -> bool {
        #[cfg(feature = "file")]
        if let AnyBackend::File(b) = self {
            return b.last_run_trusted();
        }
        false
    }

    /// The backend for `url`, with the process's settings
    /// ([`Settings::of_process`]). Nothing is opened or created yet.
    pub fn open(url: &StoreUrl) -> Self {
        Self::open_with(url, &Settings::of_process())
    }

    /// The backend for `url`, with `settings`. Nothing is opened or
    /// created yet.
    pub fn open_with(url: &StoreUrl, settings: &Settings) -> Self {
        #[allow(unused_variables)]
        let s = settings;
        match url {
            #[cfg(feature = "file")]
            StoreUrl::File(p) => AnyBackend::File(FileBackend::new(p).with_settings(s)),
            #[cfg(feature = "sqlite")]
            StoreUrl::Sqlite(p) => AnyBackend::Sqlite(SqliteBackend::new(p).with_settings(s)),
            #[cfg(feature = "postgres")]
            StoreUrl::Postgres(u) => match rudder_postgres::config::check(u) {
                Ok(()) => AnyBackend::Postgres(PostgresBackend::new(u.clone()).with_settings(s)),
                Err(e) => AnyBackend::Unsupported(e),
            },
            #[allow(unreachable_patterns)]
            other => AnyBackend::Unsupported(UrlError::NotBuilt {
                url: other.to_string(),
                scheme: other.scheme(),
            }),
        }
    }

    /// The URL this backend was opened from (to open the same store
    /// again), or why there is none.
    pub fn url(&self) -> Result<StoreUrl, UrlError> {
        match self {
            #[cfg(feature = "file")]
            AnyBackend::File(b) => Ok(StoreUrl::File(b.path().to_path_buf())),
            #[cfg(feature = "sqlite")]
            AnyBackend::Sqlite(b) => Ok(StoreUrl::Sqlite(b.path().to_path_buf())),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => Ok(StoreUrl::Postgres(b.url().clone())),
            AnyBackend::Unsupported(e) => Err(e.clone()),
        }
    }

    /// The store as its errors name it (for a URL this build cannot open,
    /// the URL as given, password redacted).
    pub fn store_location(&self) -> Location {
        match self {
            #[cfg(feature = "file")]
            AnyBackend::File(b) => b.location(),
            #[cfg(feature = "sqlite")]
            AnyBackend::Sqlite(b) => b.location(),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => b.location(),
            AnyBackend::Unsupported(
                UrlError::Postgres { url, .. }
                | UrlError::Empty { url }
                | UrlError::UnknownScheme { url, .. }
                | UrlError::NotBuilt { url, .. },
            ) => Location::remote(url.clone()),
        }
    }

    fn refused(&self) -> Result<&dyn Backend, StoreError> {
        match self {
            #[cfg(feature = "file")]
            AnyBackend::File(b) => Ok(b),
            #[cfg(feature = "sqlite")]
            AnyBackend::Sqlite(b) => Ok(b),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => Ok(b),
            AnyBackend::Unsupported(e) => Err(StoreError::NotAStore {
                location: self.store_location(),
                message: e.to_string(),
            }),
        }
    }
}

impl Backend for AnyBackend {
    fn location(&self) -> Location {
        self.store_location()
    }
    fn shown_location(&self) -> String {
        match self {
            AnyBackend::Unsupported(e) => e.to_string(),
            _ => self.store_location().to_string(),
        }
    }
    fn path(&self) -> &Path {
        match self.refused() {
            Ok(b) => b.path(),
            Err(_) => Path::new(""),
        }
    }
    fn load(&self) -> Result<TaskMap, StoreError> {
        self.refused()?.load()
    }
    fn snapshot(
        &self,
        f: &mut dyn FnMut(&dyn Transaction) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.refused()?.snapshot(f)
    }
    fn exists(&self) -> Result<bool, StoreError> {
        self.refused()?.exists()
    }
    fn cannot_write(&self) -> Option<String> {
        self.refused().ok().and_then(|b| b.cannot_write())
    }
    fn exists_to_write(&self) -> Result<bool, StoreError> {
        self.refused()?.exists_to_write()
    }
    fn batch_size(&self) -> Option<usize> {
        self.refused().ok().and_then(|b| b.batch_size())
    }
    fn quick_reads(&self) -> bool {
        self.refused().is_ok_and(|b| b.quick_reads())
    }
    fn transaction(
        &self,
        f: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        self.refused()?.transaction(f)
    }
    fn delivery(
        &self,
        name: &str,
        key: &rudder_core::delivery::EventKey,
        f: &mut rudder_core::delivery::Update<'_>,
    ) -> Result<(), StoreError> {
        self.refused()?.delivery(name, key, f)
    }
}

/// Opening a [`Store`] by URL.
pub trait Open: Sized {
    /// Open the store that `url` names: a store URL or a path (see
    /// [`StoreUrl`]; `tasks.json` is the JSON file, `tasks.db` or
    /// `sqlite:tasks` SQLite). Nothing is read or created yet: a missing
    /// store is empty, created (0600, with its directory) on the first
    /// write. A URL that cannot be opened makes every operation fail with
    /// why; [`Open::connect`] says so at once instead.
    fn open(url: impl AsRef<OsStr>) -> Self;

    /// Open the store at `url`.
    fn open_url(url: &StoreUrl) -> Self;

    /// Open the store at `url` with `settings` instead of the process's
    /// ([`Settings::of_process`], which the others use: the environment's
    /// `$RUDDER_LOCK_TIMEOUT` and `$RUDDER_MAX_STORE_BYTES`, read once).
    fn open_with(url: &StoreUrl, settings: &Settings) -> Self;

    /// [`Open::open`], failing at once on a URL that cannot be opened
    /// (password redacted in the error).
    fn connect(url: impl AsRef<OsStr>) -> Result<Self, UrlError> {
        parse_url(url).map(|u| Self::open_url(&u))
    }
}

impl Open for Store<AnyBackend> {
    fn open(url: impl AsRef<OsStr>) -> Self {
        let backend = match StoreUrl::parse(url.as_ref()) {
            Ok(url) => AnyBackend::open(&url),
            Err(e) => AnyBackend::Unsupported(e),
        };
        Store::with_backend(backend)
    }

    fn open_url(url: &StoreUrl) -> Self {
        Store::with_backend(AnyBackend::open(url))
    }

    fn open_with(url: &StoreUrl, settings: &Settings) -> Self {
        Store::with_backend(AnyBackend::open_with(url, settings))
    }
}

#[cfg(all(test, feature = "file", feature = "sqlite", feature = "postgres"))]
mod tests {
    use std::time::Duration;

    use super::*;

    /// What a caller passes is what each backend gets: no backend reads
    /// the environment itself.
    #[test]
    fn each_backend_gets_the_settings_it_is_opened_with() {
        let settings = Settings {
            lock_timeout: Duration::from_millis(1234),
            max_store_bytes: Some(4096),
        };
        let open = |url: &str| AnyBackend::open_with(&StoreUrl::parse(url).unwrap(), &settings);
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
