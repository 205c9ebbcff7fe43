//! The PostgreSQL backend (docs/architecture.md "Stores and backends"): one store for
//! many machines.
//!
//! One connection per backend, opened on first use and opened anew after
//! it broke. Reads run in `REPEATABLE READ READ ONLY` transactions (one
//! consistent snapshot, never waiting for writers). Writes run in `READ
//! COMMITTED` transactions: a task to be changed is locked (`FOR UPDATE`)
//! when the operation first takes it for changing, a claim skips the tasks
//! other workers hold (`FOR UPDATE SKIP LOCKED`), and every write is
//! conditional on the revision it read (and its claim). A write that finds
//! the task moved, a serialization failure, a deadlock, a duplicate
//! idempotency key or a connection lost before the commit was sent rolls
//! back whole and runs the operation again on fresh data, a bounded number
//! of times; a connection lost *during* the commit is reported (the
//! change may or may not be in), never run again, so nothing is done twice.
//!
//! Timeouts: connecting, every statement and every lock wait are bounded by
//! the lock timeout (`$RUDDER_LOCK_TIMEOUT`, 30 s by default).
//!
//! The schema is created by the first write (see `schema.rs`); a reader of
//! a database without it sees an empty store, and a database of a newer
//! schema is refused, untouched.

mod bulk;
pub mod config;
pub mod libpq;
mod listen;
mod retention;
mod schema;
mod tls;
mod txn;
mod watch;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postgres::config::Host;
use postgres::error::SqlState;
use postgres::{Client, IsolationLevel};

use rudder_core::url::PgUrl;
use rudder_core::{Backend, ChangeLog, Location, StoreError, Transaction};
use rudder_sql::retention::Retention;

use config::{Connect, SslMode};
use rudder_model::task::TaskMap;
pub use schema::{CHANNEL, KIND_VERSION, VERSION as SCHEMA_VERSION};
use txn::PgTxn;
pub use watch::PostgresSource;

/// How many times a write is run in all before a transient failure is
/// reported.
const ATTEMPTS: u32 = 10;

/// A store kept in a PostgreSQL database.
pub struct PostgresBackend {
    url: PgUrl,
    lock_timeout: Duration,
    /// How much of the change log writers keep.
    retention: Retention,
    /// Boxed: a client is large, and the backend sits in enums.
    conn: Mutex<Option<Box<Conn>>>,
    /// How many connections this backend has made: a waiting notice
    /// armed before one was made stays silent once one is.
    connects: Arc<AtomicU64>,
}

impl std::fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBackend")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Drop for PostgresBackend {
    fn drop(&mut self) {
        // Closing a connection blocks on the crate's runtime too.
        let conn = self
            .conn
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(conn) = conn {
            off_runtime(move || drop(conn));
        }
    }
}

/// An open connection and what is known about it.
pub(crate) struct Conn {
    client: Client,
    /// Prepared statements, by their text.
    statements: txn::Statements,
    /// The schema version seen on this connection (`None`: no tables yet).
    version: Option<i32>,
}

/// A transaction [`PostgresBackend::begin`] started, with the rest of its
/// connection.
struct Begun<'c> {
    tx: postgres::Transaction<'c>,
    statements: &'c mut txn::Statements,
    /// What the connection knows of the schema version (a write that
    /// migrated sets it once committed).
    known: &'c mut Option<i32>,
    /// The schema version found (`None`: no tables yet).
    version: Option<i32>,
}

/// Whether a failed attempt may be run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Nothing was written; running the operation again is safe.
    Safe,
    /// Do not run it again.
    No,
}

/// How long a read tries again while the server cannot be reached.
const READ_PATIENCE: Duration = Duration::from_secs(2);

/// How long one attempt to connect may take unless the URL's
/// `connect_timeout` (or `$PGCONNECT_TIMEOUT`) says otherwise: a server
/// that does not answer (a wrong host, a firewall that drops) fails a read
/// this soon, not after the lock timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an operation waits for a connection before the user is told
/// what it waits for (where a notice hook is set: a terminal).
const NOTICE_AFTER: Duration = Duration::from_millis(700);

/// A waiting notice armed: dropped (the operation ended) before it fires,
/// it says nothing.
struct Patience {
    _cancel: std::sync::mpsc::Sender<()>,
}

impl PostgresBackend {
    /// The database at `url`. Nothing is connected yet. The lock timeout is
    /// the default (30 s; see [`PostgresBackend::with_settings`]).
    pub fn new(url: PgUrl) -> Self {
        PostgresBackend {
            url,
            lock_timeout: rudder_core::DEFAULT_LOCK_TIMEOUT,
            retention: Retention::DEFAULT,
            conn: Mutex::new(None),
            connects: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Keep `retention` of the change log instead of
    /// [`Retention::DEFAULT`] (tests use a small one).
    pub fn with_retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// How much of the change log writers keep.
    pub(crate) fn retention(&self) -> Retention {
        self.retention
    }

    /// The lock timeout of `settings`.
    pub fn with_settings(self, settings: &rudder_core::Settings) -> Self {
        self.with_lock_timeout(settings.lock_timeout)
    }

    /// Wait at most `timeout` to connect, for a statement or for a lock.
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = rudder_core::lock_timeout::bounded(timeout);
        self
    }

    /// The URL, password redacted, as messages name the store.
    pub fn location(&self) -> Location {
        Location::remote(self.url.shown())
    }

    pub fn url(&self) -> &PgUrl {
        &self.url
    }

    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// "host H, database D", for messages about reaching the server.
    fn target(&self) -> String {
        let Ok(c) = self.url.connect_config() else {
            return String::new();
        };
        let hosts: Vec<String> = c
            .config
            .get_hosts()
            .iter()
            .map(|h| match h {
                Host::Tcp(name) => name.clone(),
                Host::Unix(dir) => dir.display().to_string(),
            })
            .collect();
        let host = if hosts.is_empty() {
            "localhost".to_string()
        } else {
            hosts.join(",")
        };
        let port = c
            .config
            .get_ports()
            .first()
            .map_or(String::new(), |p| format!(" port {p}"));
        let user = c.config.get_user().map(str::to_string).unwrap_or_default();
        let db = c
            .config
            .get_dbname()
            .map(str::to_string)
            .unwrap_or_else(|| user.clone());
        format!("host {host}{port}, database {db:?}")
    }

    /// A driver error as a store error naming the database.
    pub(crate) fn error(&self, action: &'static str, e: &postgres::Error) -> StoreError {
        // Waiting past $RUDDER_LOCK_TIMEOUT (on a row lock, or a statement
        // bounded by it) is the same kind as on the file and SQLite.
        if let Some(db) = e.as_db_error() {
            // QUERY_CANCELED is the statement timeout rudder sets: rudder
            // cancels no statement of its own otherwise.
            let timed_out = *db.code() == SqlState::LOCK_NOT_AVAILABLE
                || *db.code() == SqlState::QUERY_CANCELED;
            if timed_out {
                return StoreError::LockTimeout {
                    location: self.location(),
                    waited: self.lock_timeout,
                    holder: None,
                };
            }
        }
        let message = match e.as_db_error() {
            Some(db) => {
                let mut m = format!("{} ({})", db.message(), db.code().code());
                if let Some(d) = db.detail() {
                    m.push_str(": ");
                    m.push_str(d);
                }
                // Who is refused where: the URL may not say (a socket
                // directory, the PG* variables), and the user must know
                // which server and database to fix.
                let code = db.code().code();
                if action == "connect"
                    || code.starts_with("28")
                    || *db.code() == SqlState::INVALID_CATALOG_NAME
                    || *db.code() == SqlState::INSUFFICIENT_PRIVILEGE
                {
                    m = format!("{m} ({})", self.target());
                }
                match *db.code() {
                    SqlState::INSUFFICIENT_PRIVILEGE => {
                        format!(
                            "{m} (see docs/stores.md \"Many machines\" for the grants rudder needs)"
                        )
                    }
                    _ => m,
                }
            }
            None => {
                let mut m = e.to_string();
                let mut source = std::error::Error::source(e);
                while let Some(cause) = source {
                    m.push_str(": ");
                    m.push_str(&cause.to_string());
                    source = cause.source();
                }
                format!("{m} ({})", self.target())
            }
        };
        if unreachable(e) {
            StoreError::Unreachable {
                location: self.location(),
                action,
                message,
            }
        } else {
            StoreError::Database {
                location: self.location(),
                action,
                message,
            }
        }
    }

    /// Connect and set the session up; the error says whether trying
    /// again may help (a server restarting may; a wrong password, an
    /// unknown role or database will not).
    fn connect(&self) -> Result<Conn, (StoreError, Retry)> {
        Ok(Conn {
            client: self.connect_as("rudder")?,
            statements: HashMap::new(),
            version: None,
        })
    }

    /// A new connection named `name` (`application_name`, unless the URL
    /// names one), its timeouts set.
    fn connect_as(&self, name: &str) -> Result<Client, (StoreError, Retry)> {
        let settings = self.url.connect_config().map_err(|e| {
            let e = StoreError::NotAStore {
                location: self.location(),
                message: e.to_string(),
            };
            (e, Retry::No)
        })?;
        let mut config = settings.config.clone();
        let bound = self.lock_timeout.max(Duration::from_secs(1));
        config.connect_timeout(self.connect_timeout_in(&config));
        config
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30))
            .tcp_user_timeout(bound);
        if config.get_application_name().is_none() {
            config.application_name(name);
        }
        // The session's timeouts go with the start-up packet (as libpq's
        // `options`), not as a statement after it: one round trip less
        // for every process.
        let ms = self.lock_timeout.as_millis().clamp(1, i32::MAX as u128);
        let settings_options = format!(
            "-c statement_timeout={ms} -c lock_timeout={ms} \
             -c idle_in_transaction_session_timeout={}",
            (ms * 2).min(i32::MAX as u128)
        );
        let options = match config.get_options() {
            Some(o) if !o.trim().is_empty() => format!("{o} {settings_options}"),
            _ => settings_options,
        };
        config.options(&options);
        let unix_only = !config.get_hosts().is_empty()
            && config
                .get_hosts()
                .iter()
                .all(|h| matches!(h, Host::Unix(_)));
        // The server offers no TLS over a unix socket; libpq does not ask.
        let mode = if unix_only {
            SslMode::Disable
        } else {
            settings.ssl_mode
        };
        config.ssl_mode(match mode {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            _ => postgres::config::SslMode::Require,
        });
        let client_cert = settings
            .client_cert
            .as_ref()
            .map(|(c, k)| (c.as_path(), k.as_path()));
        let connector = tls::connector(mode, settings.root_cert.as_deref(), client_cert).map_err(
            |message| {
                let e = StoreError::Database {
                    location: self.location(),
                    action: "connect",
                    message,
                };
                (e, Retry::No)
            },
        )?;
        let classified = |action, e: postgres::Error| {
            let retry = if tls::refused(&e) {
                Retry::No
            } else {
                transient(&e).0
            };
            let error = match (self.error(action, &e), retry) {
                // A connection that failed in a way worth trying again (no
                // server at the address yet, a name that does not resolve
                // now) is the server out of reach, not a wrong store.
                (
                    StoreError::Database {
                        location,
                        action,
                        message,
                    },
                    Retry::Safe,
                ) => StoreError::Unreachable {
                    location,
                    action,
                    message,
                },
                (error, _) => error,
            };
            (error, retry)
        };
        let client = config
            .connect(connector)
            .map_err(|e| classified("connect", e))?;
        self.connects.fetch_add(1, Ordering::SeqCst);
        Ok(client)
    }

    /// How long one attempt to connect may take: the URL's (or the
    /// environment's) `connect_timeout`, else [`DEFAULT_CONNECT_TIMEOUT`],
    /// never more than the lock timeout.
    fn connect_timeout_in(&self, config: &postgres::Config) -> Duration {
        let bound = self.lock_timeout.max(Duration::from_secs(1));
        config
            .get_connect_timeout()
            .copied()
            // libpq's 0 is "for ever": the lock timeout bounds it.
            .map(|t| if t.is_zero() { bound } else { t })
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT)
            .min(bound)
    }

    /// How long one attempt to connect may take (see
    /// [`PostgresBackend::connect_timeout_in`]).
    pub fn connect_timeout(&self) -> Duration {
        match self.url.connect_config() {
            Ok(c) => self.connect_timeout_in(&c.config),
            Err(_) => DEFAULT_CONNECT_TIMEOUT.min(self.lock_timeout.max(Duration::from_secs(1))),
        }
    }

    /// Arm a waiting notice for an operation that needs a connection and
    /// has none: if none is made within [`NOTICE_AFTER`], the user hears
    /// which server it waits for and until when (`until`), never the
    /// password (the target names host, port and database only). Nothing
    /// where nobody listens (no terminal) or a connection is open.
    /// `until` is computed only when a notice is armed: it may read the
    /// URL's settings, which a read on a live connection need not.
    fn patience(&self, until: impl FnOnce() -> Instant) -> Option<Patience> {
        if !rudder_core::notice::listening() {
            return None;
        }
        {
            let slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            if slot.as_ref().is_some_and(|c| !c.client.is_closed()) {
                return None;
            }
        }
        let until = until();
        let connects = Arc::clone(&self.connects);
        let seen = connects.load(Ordering::SeqCst);
        let target = self.target();
        let attempt = self.connect_timeout();
        let (cancel, cancelled) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("rudder-pg-notice".into())
            .spawn(move || {
                let timed_out = matches!(
                    cancelled.recv_timeout(NOTICE_AFTER),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                );
                if !timed_out || connects.load(Ordering::SeqCst) != seen {
                    return;
                }
                let left = until.saturating_duration_since(Instant::now());
                rudder_core::notice::waiting(&format!(
                    "waiting for the PostgreSQL server at {target} to accept a connection, \
                     for up to {:.0}s more (a write waits up to $RUDDER_LOCK_TIMEOUT, a read \
                     a few seconds; each attempt at most {:.0}s: connect_timeout)",
                    left.as_secs_f64().ceil(),
                    attempt.as_secs_f64()
                ));
            });
        spawned.ok().map(|_| Patience { _cancel: cancel })
    }

    /// Run `f` on the connection, connecting first if needed; a broken
    /// connection is dropped so that the next call connects anew. The
    /// error says whether the server could not be reached or the
    /// connection was lost (`true`): that is worth waiting out, a restart
    /// of the server, where another failure is tried again a few times.
    fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut Box<Conn>) -> Result<T, (StoreError, Retry, bool)>,
    ) -> Result<T, (StoreError, Retry, bool)> {
        let mut slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_some_and(|c| c.client.is_closed()) {
            *slot = None;
        }
        if slot.is_none() {
            // Nothing was sent: a failed connect may be tried again, if
            // trying again can help.
            *slot = Some(Box::new(self.connect().map_err(|(e, r)| (e, r, true))?));
        }
        let conn = slot.as_mut().expect("connected above");
        match f(conn) {
            Ok(v) => Ok(v),
            Err((e, retry, broken)) => {
                let lost = broken || conn.client.is_closed();
                if lost {
                    *slot = None;
                }
                Err((e, retry, lost))
            }
        }
    }

    /// Pause before attempt `attempt + 1`, never past `deadline`: a short,
    /// growing, jittered pause, so that two machines that collided do not
    /// collide again in step, and a restarting server is asked again every
    /// few hundred milliseconds. `false` once the deadline has passed.
    fn pause(attempt: u32, deadline: Instant) -> bool {
        let base = 2u64 << attempt.min(7);
        let jitter = u64::from(std::process::id() ^ attempt) % base.max(1);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(base + jitter).min(left));
        true
    }

    /// Check the schema version once per connection; `Ok(None)` when rudder's
    /// tables do not exist yet.
    fn check_version(
        &self,
        known: &mut Option<i32>,
        tx: &mut postgres::Transaction<'_>,
    ) -> Result<Option<i32>, (StoreError, Retry, bool)> {
        if *known == Some(schema::VERSION) {
            return Ok(*known);
        }
        let v = schema::version(tx)
            .map_err(|e| classify(self.error("read the schema version", &e), &e))?;
        if let Some(v) = v
            && v > schema::VERSION
        {
            return Err((self.newer(v), Retry::No, false));
        }
        *known = v;
        Ok(v)
    }

    fn newer(&self, v: i32) -> StoreError {
        StoreError::NotAStore {
            location: self.location(),
            message: format!(
                "the store was written by a newer rudder (schema version {v}; this rudder \
                 knows up to {}): upgrade rudder to use it",
                schema::VERSION
            ),
        }
    }

    /// Begin a transaction on `conn` (read only for a read) and check the
    /// schema version once per connection.
    fn begin<'c>(
        &self,
        conn: &'c mut Conn,
        isolation: IsolationLevel,
        read_only: bool,
    ) -> Result<Begun<'c>, (StoreError, Retry, bool)> {
        let Conn {
            client,
            statements,
            version: known,
        } = conn;
        let mut begin = client.build_transaction().isolation_level(isolation);
        if read_only {
            begin = begin.read_only(true);
        }
        let action = if read_only {
            "begin a read"
        } else {
            "begin a write"
        };
        let mut tx = begin
            .start()
            .map_err(|e| classify(self.error(action, &e), &e))?;
        let version = self.check_version(known, &mut tx)?;
        Ok(Begun {
            tx,
            statements,
            known,
            version,
        })
    }

    /// Run a read on a consistent snapshot: `None` when the schema does not
    /// exist yet. A connection found broken is replaced once.
    fn read<T>(
        &self,
        f: &mut dyn FnMut(&PgTxn<'_>) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        // A read waits for a restarting server only briefly: the change
        // feed and the TUI must say "unreachable" soon, and a reader can
        // always read again (writes wait out the whole lock timeout).
        let start = Instant::now();
        let deadline = start + self.lock_timeout.min(READ_PATIENCE);
        let mut patience = self.patience(|| deadline.max(start + self.connect_timeout()));
        let mut tries = 0;
        loop {
            tries += 1;
            let result = self.with_conn(|conn| {
                let Begun {
                    tx,
                    statements,
                    version,
                    ..
                } = self.begin(conn, IsolationLevel::RepeatableRead, true)?;
                if version.is_none() {
                    return Ok(None);
                }
                let mut txn = PgTxn::new(tx, statements, self, false);
                txn.set_schema(version.unwrap_or(schema::VERSION));
                let out = f(&txn);
                let failure = txn.failure();
                match out {
                    Ok(v) => {
                        txn.finish_read()
                            .map_err(|e| classify(self.error("end a read", &e), &e))?;
                        Ok(Some(v))
                    }
                    Err(e) => {
                        let (retry, broken) = failure.unwrap_or((Retry::No, false));
                        Err((e, retry, broken))
                    }
                }
            });
            match result {
                Ok(v) => return Ok(v),
                // A server restarting is waited for, within the lock
                // timeout; a connection found broken is replaced at once.
                Err((_, Retry::Safe, lost))
                    if (lost || tries < 3)
                        && Instant::now() < deadline
                        && (tries < 2 || Self::pause(tries, deadline)) =>
                {
                    if lost && patience.is_none() {
                        patience = self.patience(|| deadline);
                    }
                }
                Err((e, _, _)) => return Err(e),
            }
        }
    }

    /// The sequence number of the last recorded change (0 for none), the
    /// change feed's cursor; `None` while there is no store yet.
    pub fn last_change(&self) -> Result<Option<i64>, StoreError> {
        off_runtime(|| self.read(&mut |txn| txn.last_change()))
    }

    /// Forget what this connection knows of the schema (its version, its
    /// prepared statements): the next read checks the tables afresh. The
    /// change feed does this before each look, so that a store dropped
    /// under it is seen as gone, not as an error of a stale statement.
    pub fn forget_schema(&self) {
        let mut slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(conn) = slot.as_mut() {
            conn.version = None;
            let statements = std::mem::take(&mut conn.statements);
            off_runtime(move || drop(statements));
        }
    }

    /// The changes table's identity and last `seq` (the feed's safety
    /// net); `None` while there is no store yet.
    pub fn last_change_at(&self) -> Result<Option<(i64, i64)>, StoreError> {
        off_runtime(|| self.read(&mut |txn| txn.changes_head()))
    }

    /// The recorded changes after `after` (at most `limit`, of `task` only
    /// if given), with the changes table's identity; `None` while there is
    /// no store yet.
    pub fn changes_after(
        &self,
        after: i64,
        task: Option<&str>,
        limit: usize,
    ) -> Result<Option<(i64, ChangeLog)>, StoreError> {
        off_runtime(|| self.read(&mut |txn| txn.read_changes(after, task, limit)))
    }

    /// Create or migrate the schema now (`rudder migrate`), as the role in
    /// the URL; returns the version found before.
    pub fn migrate(&self) -> Result<Option<i32>, StoreError> {
        let mut found = None;
        off_runtime(|| {
            self.write(&mut |txn| {
                found = Some(txn.found_version());
                Ok(true)
            })
        })?;
        Ok(found.flatten())
    }

    /// Make the text filter's trigram index if it is missing (`rudder
    /// migrate`, after [`PostgresBackend::migrate`]): `None` once it is
    /// there, else why it could not be made (see `schema.rs`).
    pub fn ensure_text_index(&self) -> Result<Option<String>, StoreError> {
        off_runtime(|| {
            self.with_conn(|conn| {
                let fail =
                    |e: postgres::Error| classify(self.error("create the text index", &e), &e);
                let mut tx = conn.client.transaction().map_err(fail)?;
                let why = schema::ensure_text_index(&mut tx).map_err(fail)?;
                tx.commit().map_err(fail)?;
                Ok(why)
            })
            .map_err(|(e, _, _)| e)
        })
    }

    /// Whether the store's tables are there, in one round trip (no
    /// transaction, no prepared statement: a short-lived process such as
    /// `rudder heartbeat` asks this before its write). The version table
    /// counts only in the connection's first schema, where a writer would
    /// make it; the version is kept for the write that follows.
    /// A read waits for the server [`READ_PATIENCE`], a write (`write`)
    /// the lock timeout.
    fn probe(&self, write: bool) -> Result<bool, StoreError> {
        let start = Instant::now();
        let deadline = start
            + if write {
                self.lock_timeout
            } else {
                self.lock_timeout.min(READ_PATIENCE)
            };
        let mut patience = self.patience(|| deadline.max(start + self.connect_timeout()));
        let mut tries = 0;
        loop {
            tries += 1;
            let result = self.with_conn(|conn| {
                let fail =
                    |e: postgres::Error| classify(self.error("read the schema version", &e), &e);
                let version = schema::probe(&mut conn.client).map_err(fail)?;
                let Some(v) = version else {
                    conn.version = None;
                    return Ok(false);
                };
                if v > schema::VERSION {
                    return Err((self.newer(v), Retry::No, false));
                }
                conn.version = Some(v);
                Ok(true)
            });
            match result {
                Ok(v) => return Ok(v),
                Err((_, Retry::Safe, lost))
                    if (lost || tries < 3)
                        && Instant::now() < deadline
                        && (tries < 2 || Self::pause(tries, deadline)) =>
                {
                    if lost && patience.is_none() {
                        patience = self.patience(|| deadline);
                    }
                }
                Err((e, _, _)) => return Err(e),
            }
        }
    }

    fn write(
        &self,
        f: &mut dyn FnMut(&mut PgTxn<'_>) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let deadline = Instant::now() + self.lock_timeout;
        let mut patience = self.patience(|| deadline);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self.with_conn(|conn| {
                let Begun {
                    mut tx,
                    statements,
                    known: version,
                    version: v,
                } = self.begin(conn, IsolationLevel::ReadCommitted, false)?;
                let found = if v == Some(schema::VERSION) {
                    v
                } else {
                    let from = schema::migrate(&mut tx)
                        .map_err(|e| classify(self.error("create the tables", &e), &e))?;
                    if from > schema::VERSION {
                        return Err((self.newer(from), Retry::No, false));
                    }
                    (from > 0).then_some(from).or(v)
                };
                let migrated = v != Some(schema::VERSION);
                let mut txn = PgTxn::new(tx, &mut *statements, self, true);
                txn.set_found_version(found);
                if migrated {
                    txn.trim_at_commit();
                }
                let out = f(&mut txn);
                let failure = txn.failure();
                let result = match out {
                    Ok(write) => txn.finish_write(write),
                    Err(e) => {
                        drop(txn); // rolls back
                        let (retry, broken) = failure.unwrap_or((Retry::No, false));
                        Err((e, retry, broken))
                    }
                };
                let committed = matches!(result, Ok(true));
                if migrated && !committed {
                    // Statements prepared on tables this transaction made
                    // and rolled back name tables that do not exist.
                    statements.clear();
                }
                result?;
                // The schema is in the database once the commit is.
                if committed || !migrated {
                    *version = Some(schema::VERSION);
                }
                Ok(())
            });
            match result {
                Ok(()) => return Ok(()),
                // A conflict is run again a bounded number of times; a
                // server that cannot be reached (or a connection lost
                // before the commit was sent: nothing was written) is
                // waited for until the lock timeout, as a held lock is.
                Err((_, Retry::Safe, lost))
                    if (lost || attempt < ATTEMPTS) && Self::pause(attempt, deadline) =>
                {
                    if lost && patience.is_none() {
                        patience = self.patience(|| deadline);
                    }
                }
                Err((e, _, _)) => return Err(e),
            }
        }
    }
}

/// Whether a driver error is worth running the operation again (nothing
/// was committed: a serialization failure, a deadlock, a duplicate key,
/// a connection lost before the commit was sent), and whether the
/// connection is broken.
pub(crate) fn transient(e: &postgres::Error) -> (Retry, bool) {
    if e.is_closed() || io_failure(e) {
        // The connection is gone, or could not be made.
        return (Retry::Safe, true);
    }
    match e.code() {
        Some(c)
            if *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED
                || *c == SqlState::UNIQUE_VIOLATION =>
        {
            (Retry::Safe, false)
        }
        // The tables were dropped under this connection (which had seen
        // them and prepared statements on them): start from a new one,
        // which finds no store (a reader) or creates it (a writer).
        Some(c) if *c == SqlState::UNDEFINED_TABLE => (Retry::Safe, true),
        Some(c)
            if *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW
                || *c == SqlState::TOO_MANY_CONNECTIONS
                || c.code().starts_with("08") =>
        {
            (Retry::Safe, true)
        }
        _ => (Retry::No, false),
    }
}

/// Whether `e` says the server is out of reach now, by its typed codes: the
/// connection closed, a socket error (`io::ErrorKind`), SQLSTATE class 08
/// (connection exception) or a server shutting down or starting up.
fn unreachable(e: &postgres::Error) -> bool {
    if e.is_closed() || io_failure(e) {
        return true;
    }
    e.code().is_some_and(|c| {
        *c == SqlState::ADMIN_SHUTDOWN
            || *c == SqlState::CRASH_SHUTDOWN
            || *c == SqlState::CANNOT_CONNECT_NOW
            || c.code().starts_with("08")
    })
}

/// Whether `e` comes from the socket (by its `io::ErrorKind`): the server
/// refused the connection, closed it, or went away mid-answer.
fn io_failure(e: &postgres::Error) -> bool {
    use std::io::ErrorKind as K;
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                K::ConnectionRefused
                    | K::ConnectionReset
                    | K::ConnectionAborted
                    | K::NotConnected
                    | K::BrokenPipe
                    | K::UnexpectedEof
                    | K::AddrNotAvailable
                    | K::NotFound
                    | K::TimedOut
                    | K::Interrupted
                    | K::WouldBlock
            );
        }
        source = cause.source();
    }
    false
}

fn classify(se: StoreError, e: &postgres::Error) -> (StoreError, Retry, bool) {
    let (retry, broken) = transient(e);
    (se, retry, broken)
}

/// Run `op` where the `postgres` crate may block. The crate drives its own
/// tokio runtime, which cannot start on a thread already inside one (an
/// async caller: `rudder wait`, a test, a TUI loop); there `op` runs on a
/// scoped thread while the caller's thread waits for it.
fn off_runtime<T>(op: impl FnOnce() -> T) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return op();
    }
    struct AssertSend<V>(V);
    #[allow(unsafe_code)] // the SAFETY comment says why
    // SAFETY: the calling thread is blocked in `join` for as long as the
    // scoped thread runs, so whatever `op` captures (and the answer it
    // hands back) is only ever used by one thread at a time, and nothing
    // outlives the scope.
    unsafe impl<V> Send for AssertSend<V> {}
    impl<V> AssertSend<V> {
        fn into_inner(self) -> V {
            self.0
        }
    }
    let op = AssertSend(op);
    let answer = std::thread::scope(|s| {
        s.spawn(move || AssertSend(op.into_inner()()))
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    });
    answer.into_inner()
}

impl PostgresBackend {
    /// Whether this backend's connection has seen the tables: then
    /// [`Backend::exists`] needs no question (the operation that follows
    /// finds out if they went since).
    fn knows_the_tables(&self) -> bool {
        let slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .is_some_and(|c| c.version == Some(schema::VERSION) && !c.client.is_closed())
    }
}

impl Backend for PostgresBackend {
    fn location(&self) -> Location {
        PostgresBackend::location(self)
    }
    /// The feed reads (and listens) on a connection of its own, with this
    /// lock timeout.
    fn feed_source(&self, task: Option<String>) -> Box<dyn rudder_core::watch::FeedSource> {
        let backend = PostgresBackend::new(self.url.clone()).with_lock_timeout(self.lock_timeout);
        Box::new(crate::PostgresSource::of(backend, task))
    }

    fn snapshot(
        &self,
        f: &mut dyn FnMut(&dyn Transaction) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        off_runtime(|| match self.read(&mut |txn| f(txn))? {
            Some(()) => Ok(()),
            None => f(&TaskMap::new()),
        })
    }

    fn exists(&self) -> Result<bool, StoreError> {
        if self.knows_the_tables() {
            return Ok(true);
        }
        off_runtime(|| self.probe(false))
    }

    fn exists_to_write(&self) -> Result<bool, StoreError> {
        if self.knows_the_tables() {
            return Ok(true);
        }
        off_runtime(|| self.probe(true))
    }

    fn transaction(
        &self,
        f: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        off_runtime(|| self.write(&mut |txn| f(txn)))
    }

    /// In `rudder_deliveries` (schema version 6). The row is read `FOR
    /// UPDATE`; a missing one is inserted without `ON CONFLICT`, so that of
    /// two notifiers inserting the same event at once the second fails on
    /// the primary key and runs again, finding the first one's claim.
    fn delivery(
        &self,
        name: &str,
        key: &rudder_core::delivery::EventKey,
        f: &mut rudder_core::delivery::Update<'_>,
    ) -> Result<(), StoreError> {
        off_runtime(|| self.write(&mut |txn| txn.delivery(name, key, f)))
    }
}
