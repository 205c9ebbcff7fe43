//! The durable task store: every operation of docs/architecture.md over a [`Backend`].
//!
//! [`Store`] holds the policy (idempotency, one answer for repeats and
//! conflicts, leases, reclaim and prune reports); a backend offers
//! consistent reads and serialized read-modify-writes, handing the
//! operation a [`Transaction`] of indexed operations (by id, id prefix,
//! idempotency key, the next claimable task, stale and prunable tasks, a
//! page in an order, counts by status) and the writes (insert, change in
//! place, remove). Each backend lives in a crate of its own (`rudder-file`,
//! `rudder-sqlite`, `rudder-postgres`); `rudder-store` opens the one a
//! [`StoreUrl`] names. The architecture is in `docs/architecture.md`.

pub mod delivery;
mod error;
pub mod limits;
pub mod lock_timeout;
pub mod memory;
pub mod notice;
pub mod query;
mod report;
pub mod settings;
pub mod shared;
mod summary;
pub mod trail;
mod txn;
pub mod url;
pub mod watch;

/// The model crate, for the macros of this crate.
#[doc(hidden)]
pub use rudder_model as model;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

pub use error::{ErrorClass, ErrorKind, Location, StoreError, human_bytes};
pub use limits::{MAX_VALUE_DEPTH, RESERVED_KEY, check_value};
pub use lock_timeout::{LOCK_TIMEOUT_VAR, MAX_LOCK_TIMEOUT, parse_lock_timeout};
pub use query::{PageQuery, SortKey, StatusCounts};
pub use report::{PruneReport, Pruned, ReclaimReport, Reclaimed, Skipped, human_duration, ms};
pub use settings::{
    MAX_STORE_BYTES, MAX_STORE_BYTES_VAR, Settings, SettingsError, parse_max_bytes,
};
pub use shared::{ChangeLog, CopyCounts, NewerInStore, RecordedChange};
pub use summary::Summary;
pub use trail::{TrailEntry, TrailKey, TrailQuery};
pub use txn::{Listed, Transaction, scan};
pub use url::{StoreUrl, ToStoreUrl, UrlError};

/// How long a writer waits for the store lock before giving up by default.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(30);

use rudder_model::schema;
use rudder_model::task::machine::{self, Refusal};
use rudder_model::task::{
    Actor, Author, Change, Face, HistoryEntry, Op, OpKind, Progress, Status, Task, TaskMap,
};

/// Where tasks are kept. Implementations must make `transact` atomic and
/// isolated with respect to every other process using the same store.
pub trait Backend: Send + Sync {
    /// The store as its errors name it (passwords redacted).
    fn location(&self) -> Location;

    /// The store as messages and the TUI show it; [`Backend::location`]
    /// unless the backend knows better (a URL that could not be opened).
    fn shown_location(&self) -> String {
        self.location().to_string()
    }

    /// Call `f` on a consistent snapshot of the tasks without taking the
    /// lock (an empty store when there is none yet): every read of the
    /// policy, each asking only for the tasks it needs.
    fn snapshot(
        &self,
        f: &mut dyn FnMut(&dyn Transaction) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// Whether the store exists yet. Operations that can only change
    /// existing tasks answer from an empty store without taking the lock
    /// when it does not, so that they create nothing (no directory, no lock
    /// file).
    fn exists(&self) -> Result<bool, StoreError> {
        Ok(true)
    }

    /// Why this process certainly cannot write the store (a read-only
    /// file system, a directory of another user), for a reader to say that
    /// it only reads; `None` when it may, or when the backend cannot tell.
    fn cannot_write(&self) -> Option<String> {
        None
    }

    /// [`Backend::exists`] asked by a write that changes existing tasks
    /// only: a backend that waits longer for a write than for a read (a
    /// database server restarting) waits as long here.
    fn exists_to_write(&self) -> Result<bool, StoreError> {
        self.exists()
    }

    /// How many tasks one step of a long operation (a streamed `list`,
    /// `reclaim`, `prune`) should handle: a bound for a database, where each
    /// step is an indexed query or a short transaction, so that a million
    /// stale tasks never make one giant transaction; `None` (everything at
    /// once) for a store that is read and written whole, where every step
    /// would cost as much as the whole operation.
    fn batch_size(&self) -> Option<usize> {
        Some(DEFAULT_BATCH)
    }

    /// Whether reading a task takes about a system call's time and never
    /// waits for a writer (a local database in WAL mode), so that a caller
    /// on an async runtime may read on its own thread instead of handing
    /// the read to a blocking pool. False unless a backend knows: a
    /// database server is a round trip away, and a file read whole may be
    /// large. (Quick, not free: SQLite's reads of one backend share one
    /// connection, so a read also waits for another read of the same
    /// store in progress, say a long `page_each`; `rudder mcp` makes none.)
    fn quick_reads(&self) -> bool {
        false
    }

    /// Read the current tasks under exclusive access and call `f` on them;
    /// persist the changes durably if `f` returns `Ok(true)`, write nothing
    /// if it returns `Ok(false)` or an error. A store that is not valid is
    /// refused before `f` runs.
    fn transaction(
        &self,
        f: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError>;

    /// Where the change feed of this store reads (of the task `task` only,
    /// if given): the backend's own source, with its settings, so that no
    /// one finds the store again by its URL. See [`Store::feed`].
    fn feed_source(&self, task: Option<String>) -> Box<dyn watch::FeedSource>;

    /// Read-modify-write the delivery record of the notifier `name` for
    /// the event `key` (see [`delivery`]) under the store's exclusive
    /// access: `f` gets the record as stored (`None`: there is none) and
    /// returns the record to store instead (`None`: nothing is written).
    /// Kept beside the tasks, never in them: no task's revision moves.
    fn delivery(
        &self,
        name: &str,
        key: &delivery::EventKey,
        f: &mut delivery::Update<'_>,
    ) -> Result<(), StoreError>;

    /// [`Backend::transaction`] over all tasks read in full (for callers that
    /// look at every task; every task is written anew if `f` commits).
    fn transact(
        &self,
        f: &mut dyn FnMut(&mut TaskMap) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        self.transaction(&mut |txn| {
            let ids: Vec<String> = txn.ids()?.map(str::to_string).collect();
            let mut tasks = TaskMap::with_capacity(ids.len());
            for id in ids {
                // Gone since the listing (another machine pruned it, on a
                // database whose reads are not one snapshot): not a task
                // of this transaction any more.
                if let Some(task) = txn.get(&id)? {
                    tasks.insert(id, task);
                }
            }
            if !f(&mut tasks)? {
                return Ok(false);
            }
            txn.clear()?;
            for task in tasks.into_values() {
                txn.insert(task)?;
            }
            Ok(true)
        })
    }
}

/// Call `each` on every task of the page `q` of `tasks`, reading at most
/// `batch` tasks at once (see [`Store::page_each`]).
fn page_in_batches(
    tasks: &dyn Transaction,
    q: &PageQuery,
    batch: Option<usize>,
    each: &mut dyn FnMut(Task) -> bool,
) -> Result<(), StoreError> {
    let mut left = q.limit;
    let mut step = q.clone();
    loop {
        let want = match (batch, left) {
            (Some(b), Some(l)) => Some(b.min(l)),
            (b, l) => b.or(l),
        };
        if want == Some(0) {
            return Ok(());
        }
        step.limit = want;
        let page = tasks.page(&step)?;
        let got = page.len();
        let last = page.last().map(|t| t.task_id.clone());
        for task in page {
            if !each(task) {
                return Ok(());
            }
        }
        left = left.map(|l| l - got);
        match (want, last) {
            (Some(w), Some(last)) if got == w => step.after = Some(last),
            _ => return Ok(()),
        }
    }
}

/// [`Backend::batch_size`] of a database.
pub const DEFAULT_BATCH: usize = 1000;

/// The source of "now"; replaceable in tests.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The result of a mutation: the task as it now is, and whether it changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub change: Change,
    pub task: Task,
}

/// What `create` needs; everything is optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewTask {
    /// With a schema the task starts `input_required`, else `working`.
    pub input_schema: Option<Value>,
    pub idempotency_key: Option<String>,
    pub title: Option<String>,
    /// The task's kind ([`rudder_model::task::check_kind`] says what it may be).
    pub kind: Option<String>,
    pub request: Option<Value>,
    pub status_message: Option<String>,
    pub ttl_ms: Option<u64>,
    pub poll_interval_ms: Option<u64>,
    /// The tool and client that asked for the task (`rudder mcp`).
    pub origin: Option<rudder_model::task::Origin>,
    /// The MCP principal the task belongs to (`rudder mcp` with
    /// authorization): [`Task::owned_by`].
    pub owned_by: Option<String>,
}

/// A task created already claimed ([`Store::create_held`]): as if the
/// worker `holder` claimed it for `lease` the moment it was made, with
/// `note` in its history as that worker's (face `face`).
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub holder: String,
    pub lease: Duration,
    pub note: Option<String>,
    pub face: Face,
}

/// A backend opened from a store URL ([`Store::connect`]): the backend
/// says which URLs it takes, and refuses the others with why.
pub trait Connect: Backend + Sized {
    /// The backend for `url` with `settings`; nothing is opened or created
    /// yet. A URL it cannot open is an error (password redacted).
    fn connect(url: &StoreUrl, settings: &Settings) -> Result<Self, UrlError>;
}

/// The task store.
pub struct Store<B: Backend> {
    /// Shared by the stores [`Store::by`] makes for other authors.
    backend: Arc<B>,
    clock: Clock,
    /// Who writes through this store: recorded on every history entry it
    /// adds but a lease holder's (a worker writes as its holder). `None`:
    /// an unknown actor.
    author: Option<Author>,
    /// Overrides [`Backend::batch_size`] (tests).
    batch: Option<usize>,
    /// The settings it was connected with ([`Store::connect_with`]); `None`
    /// for a store over a backend made by hand ([`Store::with_backend`]).
    settings: Option<Settings>,
}

impl<B: Backend> Store<B> {
    /// Where the store is, as messages show it.
    pub fn location(&self) -> String {
        self.backend.shown_location()
    }

    /// The store `url` names, with the process's settings
    /// ([`Settings::of_process`]: `$RUDDER_LOCK_TIMEOUT` and
    /// `$RUDDER_MAX_STORE_BYTES`, read once). Nothing is read or created
    /// yet: a missing store is empty, created (0600, with its directory) on
    /// the first write. A URL this build cannot open (a backend left out,
    /// a PostgreSQL parameter that is not valid) is an error here, its
    /// password redacted.
    pub fn connect(url: impl url::ToStoreUrl) -> Result<Self, UrlError>
    where
        B: Connect,
    {
        Self::connect_with(url, &Settings::of_process())
    }

    /// [`Store::connect`] with `settings` instead of the process's.
    pub fn connect_with(url: impl url::ToStoreUrl, settings: &Settings) -> Result<Self, UrlError>
    where
        B: Connect,
    {
        let url = url.to_store_url()?;
        let mut store = B::connect(&url, settings).map(Store::with_backend)?;
        store.settings = Some(*settings);
        Ok(store)
    }

    /// The settings this store was connected with, if it was connected by
    /// URL: what a second store of the same process must use.
    pub fn settings(&self) -> Option<&Settings> {
        self.settings.as_ref()
    }

    /// The change feed of this store (of `options.task` only, if set),
    /// from the backend's own source: the first event describes the
    /// current state. Must be called from within a tokio runtime.
    pub fn feed(&self, options: watch::FeedOptions) -> watch::ChangeFeed {
        let source = self.backend.feed_source(options.task.clone());
        watch::ChangeFeed::with_source(source, options)
    }

    /// [`Store::feed`] of the task `task` only.
    pub fn feed_of(
        &self,
        task: impl Into<String>,
        options: watch::FeedOptions,
    ) -> watch::ChangeFeed {
        self.feed(watch::FeedOptions {
            task: Some(task.into()),
            ..options
        })
    }

    /// The store over `backend`, as it is.
    pub fn with_backend(backend: B) -> Self {
        Store {
            backend: Arc::new(backend),
            clock: Arc::new(Utc::now),
            author: None,
            batch: None,
            settings: None,
        }
    }

    /// This store writing as `author` (the CLI's `--as`, an MCP request's
    /// principal), sharing its backend, clock and settings: cheap enough
    /// to make per request.
    pub fn by(&self, author: Author) -> Self {
        Store {
            backend: Arc::clone(&self.backend),
            clock: Arc::clone(&self.clock),
            author: Some(author),
            batch: self.batch,
            settings: self.settings,
        }
    }

    /// Who writes through this store ([`Store::by`]); `None`: nobody said.
    pub fn author(&self) -> Option<&Author> {
        self.author.as_ref()
    }

    /// Handle at most `n` tasks (at least 1) per step of a long operation,
    /// whatever the backend's [`Backend::batch_size`] (tests, tuning).
    pub fn with_batch_size(mut self, n: usize) -> Self {
        self.batch = Some(n.max(1));
        self
    }

    /// The tasks one step of a long operation handles; `None`: all at once.
    pub fn batch_size(&self) -> Option<usize> {
        self.batch.or_else(|| self.backend.batch_size())
    }

    /// Whether [`Store::get`] is quick enough to call on an async runtime's
    /// own threads (see [`Backend::quick_reads`]).
    pub fn quick_reads(&self) -> bool {
        self.backend.quick_reads()
    }

    /// Replace the clock (tests, simulations).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    /// The store's clock (a worker opened on the store keeps it).
    pub fn clock(&self) -> Clock {
        Arc::clone(&self.clock)
    }

    /// All tasks, in store order, from one snapshot.
    pub fn load(&self) -> Result<TaskMap, StoreError> {
        Ok(self
            .list(&[])?
            .into_iter()
            .map(|t| (t.task_id.clone(), t))
            .collect())
    }

    /// The page of the store's trail `q` asks for, oldest first (an
    /// empty trail for a store that does not exist yet).
    pub fn trail(&self, q: &TrailQuery) -> Result<Vec<TrailEntry>, StoreError> {
        if !self.backend.exists()? {
            return Ok(Vec::new());
        }
        self.read(|tasks| tasks.trail(q))
    }

    /// One task by full id or unique prefix.
    pub fn get(&self, id: &str) -> Result<Task, StoreError> {
        self.read(|tasks| {
            // A whole id (a handle: what workers and MCP clients pass) is
            // one read; only a miss looks for the id as a prefix.
            if let Some(t) = tasks.get(id)? {
                return Ok(t);
            }
            let key = resolve_prefix(tasks, id)?;
            // Removed between the lookup and the read (see `vanished`).
            tasks.get(&key)?.ok_or_else(|| vanished(&key))
        })
    }

    /// Tasks whose status is one of `statuses` (all tasks when empty), in
    /// store order.
    pub fn list(&self, statuses: &[Status]) -> Result<Vec<Task>, StoreError> {
        self.page(&PageQuery {
            statuses: statuses.to_vec(),
            ..PageQuery::default()
        })
    }

    /// One page of tasks: a filter, an order, a start and a limit.
    pub fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
        self.read(|tasks| tasks.page(q))
    }

    /// Call `each` on every task of the page `q` asks for, in order, from
    /// one consistent snapshot, until it returns false. At most
    /// [`Store::batch_size`] tasks are in memory at once (each batch is one
    /// keyset query that starts after the last task of the one before), so
    /// a caller that writes the tasks out as they come holds no more.
    pub fn page_each(
        &self,
        q: &PageQuery,
        each: &mut dyn FnMut(Task) -> bool,
    ) -> Result<(), StoreError> {
        let batch = self.batch_size();
        self.backend
            .snapshot(&mut |tasks| page_in_batches(tasks, q, batch, each))
    }

    /// [`Store::page_each`], but each task as [`Listed`]: its JSON text
    /// where the backend holds it exactly as it would be written
    /// ([`Transaction::page_listed`]: the file store's tasks as a rudder
    /// writer vouched for them), so that `rudder list --json` writes the
    /// tasks without building them; else the task, as `page_each` reads it.
    pub fn page_listed_each(
        &self,
        q: &PageQuery,
        each: &mut dyn FnMut(Listed<'_>) -> bool,
    ) -> Result<(), StoreError> {
        let batch = self.batch_size();
        self.backend.snapshot(&mut |tasks| {
            if tasks.page_listed(q, each)? {
                return Ok(());
            }
            page_in_batches(tasks, q, batch, &mut |task| {
                each(Listed::Task(Box::new(task)))
            })
        })
    }

    /// How many tasks have each status.
    pub fn counts(&self) -> Result<StatusCounts, StoreError> {
        self.read(|tasks| tasks.counts())
    }

    /// How many tasks are stalled at `now` in the whole store: working,
    /// with a lease that lapsed ([`rudder_model::task::Task::stalled`]).
    pub fn stalled(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        self.read(|tasks| tasks.stalled(now))
    }

    /// Claim the event `key` for the notifier `name` as `holder` for
    /// `lease` (see [`delivery::claim`]).
    pub fn claim_delivery(
        &self,
        name: &str,
        key: &delivery::EventKey,
        holder: &str,
        lease: Duration,
    ) -> Result<delivery::Claimed, StoreError> {
        let now = self.now();
        let until = chrono::Duration::from_std(lease)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        let mut answer = None;
        self.backend.delivery(name, key, &mut |record| {
            let (claimed, store) = delivery::claim(record, holder, now, until);
            answer = Some(claimed);
            store
        })?;
        answer.ok_or_else(|| StoreError::Database {
            location: self.backend.location(),
            action: "claim a delivery",
            message: "the backend did not read the delivery record".into(),
        })
    }

    /// Record the event `key` delivered by the notifier `name`'s `holder`
    /// (see [`delivery::finish`]).
    pub fn finish_delivery(
        &self,
        name: &str,
        key: &delivery::EventKey,
        holder: &str,
    ) -> Result<(), StoreError> {
        let now = self.now();
        self.backend.delivery(name, key, &mut |record| {
            delivery::finish(record, holder, now)
        })
    }

    /// Give up `holder`'s claim on the event `key` without delivering it
    /// (see [`delivery::release`]).
    pub fn release_delivery(
        &self,
        name: &str,
        key: &delivery::EventKey,
        holder: &str,
    ) -> Result<(), StoreError> {
        self.backend
            .delivery(name, key, &mut |record| delivery::release(record, holder))
    }

    /// The delivery record of the notifier `name` for `key`, as stored.
    pub fn delivery_record(
        &self,
        name: &str,
        key: &delivery::EventKey,
    ) -> Result<Option<delivery::Delivery>, StoreError> {
        let mut seen = None;
        self.backend.delivery(name, key, &mut |record| {
            seen = record.cloned();
            None
        })?;
        Ok(seen)
    }

    /// Record who made the history entries `task` gained since it had
    /// `from`: a lease holder writes as itself (its holder name, through
    /// the worker face), anyone else as this store's author.
    fn sign(&self, task: &mut Task, from: usize, actor: Actor<'_>) {
        let Some(added) = task.history.get_mut(from..) else {
            return;
        };
        for entry in added {
            match actor {
                Actor::Worker { holder, .. } => {
                    entry.actor = Some(holder.to_string());
                    // A lease holder writes as itself; a gateway worker's
                    // store says it is one ([`Store::by`] with
                    // [`Face::Gateway`]).
                    let gateway = self
                        .author
                        .as_ref()
                        .is_some_and(|a| *a.face() == Face::Gateway);
                    entry.face = Some(if gateway { Face::Gateway } else { Face::Worker });
                }
                Actor::Anyone => {
                    if let Some(author) = &self.author {
                        entry.by(author);
                    }
                }
            }
        }
    }

    /// Run `f` under the backend's exclusive access with the current time.
    /// `f` returns its answer and whether to persist.
    fn transact<T>(
        &self,
        may_create: bool,
        mut f: impl FnMut(&mut dyn Transaction, DateTime<Utc>) -> Result<(T, bool), StoreError>,
    ) -> Result<T, StoreError> {
        if !may_create && !self.backend.exists_to_write()? {
            // Nothing to change in a store that does not exist: answer as
            // an empty store would, creating nothing. (An answer that asks
            // to write cannot happen for these operations.)
            let (value, write) = f(&mut TaskMap::new(), self.now())?;
            debug_assert!(!write, "an operation on an empty store wants to write");
            return Ok(value);
        }
        let mut answer = None;
        // A backend may run `f` again on fresh data (the file backend does
        // when its lock was taken from it mid-write), so `f` only reads its
        // captures and changes the store through `tasks`.
        self.backend.transaction(&mut |tasks| {
            let (value, write) = f(tasks, self.now())?;
            answer = Some(value);
            Ok(write)
        })?;
        answer.ok_or_else(|| self.skipped("run a transaction"))
    }

    /// What `f` reads from one snapshot of the store.
    fn read<T>(
        &self,
        mut f: impl FnMut(&dyn Transaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut answer = None;
        self.backend.snapshot(&mut |tasks| {
            answer = Some(f(tasks)?);
            Ok(())
        })?;
        answer.ok_or_else(|| self.skipped("read a snapshot"))
    }

    /// A backend that answered without running the policy's function (it
    /// breaks the seam's contract): an error that says so, never a panic.
    fn skipped(&self, action: &'static str) -> StoreError {
        StoreError::Database {
            location: self.backend.location(),
            action,
            message: "the backend answered without running the operation (a bug in the backend)"
                .into(),
        }
    }

    /// Create a task. With an idempotency key already in use, return that task
    /// unchanged, or refuse if it was created with another schema, request
    /// or kind.
    pub fn create(&self, new: NewTask) -> Result<Outcome, StoreError> {
        self.create_as(new, None)
    }

    /// [`Store::create`], the task made already claimed by `held`'s
    /// worker in the same write: a worker of this process that makes the
    /// task's call at once (`rudder mcp`'s gateway) neither waits for the
    /// change feed to learn of it nor writes its claim and first note
    /// apart. The claim is the state machine's (a task that starts
    /// `input_required` is refused as its claim would be). A task found
    /// by its idempotency key is returned unchanged, held by whoever
    /// holds it.
    pub fn create_held(&self, new: NewTask, held: &Held) -> Result<Outcome, StoreError> {
        self.create_as(new, Some(held))
    }

    fn create_as(&self, mut new: NewTask, held: Option<&Held>) -> Result<Outcome, StoreError> {
        // A `null` request reads back from the file as none: make it none
        // now, so that retrying the same create matches its key.
        new.request = new.request.filter(|r| !r.is_null());
        // Before the lock: a value the store cannot hold is refused at once.
        if let Some(schema) = &new.input_schema {
            check_value("input_schema", schema)?;
        }
        if let Some(request) = &new.request {
            check_value("request", request)?;
        }
        if let Some(schema) = &new.input_schema {
            schema::check_schema(schema).map_err(StoreError::InvalidSchema)?;
        }
        if let Some(kind) = &new.kind {
            rudder_model::task::check_kind(kind).map_err(|reason| StoreError::InvalidKind {
                kind: kind.clone(),
                reason,
            })?;
        }
        self.transact(true, |tasks, now| {
            // A task with the key that is removed between the lookup and
            // the read (pruned by another machine) no longer holds the key:
            // the task is made, as it would have been a moment later.
            if let Some(key) = &new.idempotency_key
                && let Some(id) = tasks.find_key(key)?
                && let Some(existing) = tasks.get(&id)?
            {
                let field = if existing.input_schema != new.input_schema {
                    Some("input_schema")
                } else if existing.request != new.request {
                    Some("request")
                } else if existing.kind != new.kind {
                    Some("kind")
                } else {
                    None
                };
                return match field {
                    Some(field) => Err(StoreError::IdempotencyConflict {
                        key: key.clone(),
                        field,
                        task: Box::new(existing),
                    }),
                    None => Ok((
                        Outcome {
                            change: Change::Unchanged,
                            task: existing,
                        },
                        false,
                    )),
                };
            }
            let status = if new.input_schema.is_some() {
                Status::InputRequired
            } else {
                Status::Working
            };
            let mut task = Task::new(uuid::Uuid::new_v4().to_string(), status);
            task.input_schema = new.input_schema.clone();
            task.idempotency_key = new.idempotency_key.clone();
            task.title = new.title.clone();
            task.kind = new.kind.clone();
            task.request = new.request.clone();
            task.status_message = new.status_message.clone();
            task.ttl_ms = new.ttl_ms;
            task.poll_interval_ms = new.poll_interval_ms;
            task.origin = new.origin.clone();
            task.owned_by = new.owned_by.clone();
            task.created_at = Some(now);
            task.updated_at = Some(now);
            task.revision = 1;
            let mut created = HistoryEntry::new(status, now, Some("created".into()));
            if let Some(author) = &self.author {
                created.by(author);
            }
            task.history.push(created);
            if let Some(held) = held {
                let op = Op::Claim {
                    holder: held.holder.clone(),
                    lease: held.lease,
                };
                machine::apply(&mut task, &op, Actor::Anyone, now)
                    .map_err(|r| refusal_error(OpKind::Claim, r, &task))?;
                // Made and claimed in one write: one revision.
                task.revision = 1;
                if let Some(note) = &held.note {
                    let mut entry = HistoryEntry::new(
                        task.status,
                        now,
                        Some(rudder_model::text::clean(note, 1000)),
                    );
                    entry.actor = Some(held.holder.clone());
                    entry.face = Some(held.face.clone());
                    task.history.push(entry);
                }
            }
            tasks.insert(task.clone())?;
            Ok((
                Outcome {
                    change: Change::Applied,
                    task,
                },
                true,
            ))
        })
    }

    /// Apply one state-machine operation to the task `id` (full id or unique prefix).
    pub fn apply(&self, id: &str, op: &Op, actor: Actor<'_>) -> Result<Outcome, StoreError> {
        // Before the lock: a value the store cannot hold is refused at once.
        let value = match op {
            Op::RequestInput { schema, .. } => Some(("input_schema", schema)),
            Op::ProvideInput { value, .. } => Some(("input_value", value)),
            Op::Complete { result } => Some(("result", result)),
            Op::Fail { error } => Some(("error", error)),
            Op::Heartbeat { .. } | Op::Cancel { .. } | Op::Claim { .. } | Op::Release { .. } => {
                None
            }
        };
        if let Some((field, value)) = value {
            check_value(field, value)?;
        }
        self.transact(false, |tasks, now| {
            let key = resolve_in(tasks, id)?;
            let task = tasks.get_mut(&key)?.ok_or_else(|| vanished(&key))?;
            let entries = task.history.len();
            let change = machine::apply(task, op, actor, now)
                .map_err(|r| refusal_error(op.kind(), r, task))?;
            self.sign(task, entries, actor);
            Ok((
                Outcome {
                    change,
                    task: task.clone(),
                },
                change == Change::Applied,
            ))
        })
    }

    pub fn request_input(
        &self,
        id: &str,
        schema: Value,
        message: Option<String>,
        actor: Actor<'_>,
    ) -> Result<Outcome, StoreError> {
        self.apply(id, &Op::RequestInput { schema, message }, actor)
    }

    pub fn provide_input(
        &self,
        id: &str,
        value: Value,
        expected_revision: Option<u64>,
    ) -> Result<Outcome, StoreError> {
        let op = Op::ProvideInput {
            value,
            expected_revision,
        };
        self.apply(id, &op, Actor::Anyone)
    }

    pub fn heartbeat(
        &self,
        id: &str,
        message: Option<String>,
        progress: Option<Progress>,
        actor: Actor<'_>,
    ) -> Result<Outcome, StoreError> {
        self.apply(id, &Op::Heartbeat { message, progress }, actor)
    }

    pub fn complete(
        &self,
        id: &str,
        result: Value,
        actor: Actor<'_>,
    ) -> Result<Outcome, StoreError> {
        self.apply(id, &Op::Complete { result }, actor)
    }

    /// Fail with `{"message": message}`.
    pub fn fail(&self, id: &str, message: &str, actor: Actor<'_>) -> Result<Outcome, StoreError> {
        let error = serde_json::json!({ "message": message });
        self.apply(id, &Op::Fail { error }, actor)
    }

    pub fn cancel(&self, id: &str, reason: Option<String>) -> Result<Outcome, StoreError> {
        self.apply(id, &Op::Cancel { reason }, Actor::Anyone)
    }

    /// Take or renew the lease on a working task.
    pub fn claim(&self, id: &str, holder: &str, lease: Duration) -> Result<Outcome, StoreError> {
        let op = Op::Claim {
            holder: holder.to_string(),
            lease,
        };
        self.apply(id, &op, Actor::Anyone)
    }

    /// Give a lease back.
    pub fn release(&self, id: &str, holder: &str) -> Result<Outcome, StoreError> {
        let op = Op::Release {
            holder: holder.to_string(),
        };
        self.apply(id, &op, Actor::Anyone)
    }

    /// Record `note` in the task's history, its status unchanged, as a
    /// heartbeat of `actor` (a lease holder's renews its lease): what a
    /// worker did that the trail should keep (a gateway's attempts).
    pub fn note(&self, id: &str, note: &str, actor: Actor<'_>) -> Result<Outcome, StoreError> {
        let op = Op::Heartbeat {
            message: None,
            progress: None,
        };
        let note = rudder_model::text::clean(note, 1000);
        self.transact(false, |tasks, now| {
            let key = resolve_in(tasks, id)?;
            let task = tasks.get_mut(&key)?.ok_or_else(|| vanished(&key))?;
            let entries = task.history.len();
            machine::apply(task, &op, actor, now).map_err(|r| refusal_error(op.kind(), r, task))?;
            task.history
                .push(HistoryEntry::new(task.status, now, Some(note.clone())));
            self.sign(task, entries, actor);
            Ok((
                Outcome {
                    change: Change::Applied,
                    task: task.clone(),
                },
                true,
            ))
        })
    }

    /// `request_input` by the worker `holder` that keeps its lease (renewed
    /// for `lease`) while the task waits for input, so that the same worker
    /// continues with the answer (the worker API's `ask`); a plain
    /// `request_input` gives the lease back. If that worker dies, its lease
    /// lapses and any worker claims the task once it has its answer.
    pub fn request_input_holding(
        &self,
        id: &str,
        schema: Value,
        message: Option<String>,
        holder: &str,
        lease: Duration,
    ) -> Result<Outcome, StoreError> {
        check_value("input_schema", &schema)?;
        let op = Op::RequestInput { schema, message };
        let actor = Actor::Worker {
            holder,
            lease: Some(lease),
        };
        self.transact(false, |tasks, now| {
            let key = resolve_in(tasks, id)?;
            let task = tasks.get_mut(&key)?.ok_or_else(|| vanished(&key))?;
            let entries = task.history.len();
            let change = machine::apply(task, &op, actor, now)
                .map_err(|r| refusal_error(op.kind(), r, task))?;
            self.sign(task, entries, actor);
            if change == Change::Applied {
                machine::hold(task, holder, Some(lease), now);
            }
            Ok((
                Outcome {
                    change,
                    task: task.clone(),
                },
                change == Change::Applied,
            ))
        })
    }

    /// Claim the oldest working task of one of `kinds` (any task, with a
    /// kind or not, when empty) that no live lease holds, if any, in one
    /// locked step (so two workers never take the same task).
    pub fn claim_next(
        &self,
        holder: &str,
        lease: Duration,
        kinds: &[String],
    ) -> Result<Option<Task>, StoreError> {
        self.claim_next_where(holder, lease, kinds, &|_| true)
    }

    /// [`Store::claim_next`] among the tasks `wanted` accepts only: a
    /// worker that knows how to run some tasks never takes the others.
    pub fn claim_next_where(
        &self,
        holder: &str,
        lease: Duration,
        kinds: &[String],
        wanted: &dyn Fn(&Summary<'_>) -> bool,
    ) -> Result<Option<Task>, StoreError> {
        // Idle workers poll: look without the lock first, so that a store
        // with nothing to claim is never locked, and its writers never wait,
        // for a poll. A task that turns claimable just after the look is
        // found by the next poll.
        let any =
            self.read(|tasks| Ok(tasks.next_claimable(self.now(), kinds, wanted)?.is_some()))?;
        if !any {
            return Ok(None);
        }
        self.transact(false, |tasks, now| {
            // A task found claimable may be gone or changed by the time it
            // is read in full (another machine pruned, cancelled or claimed
            // it in between, on a database whose statements each see the
            // latest commit): passed over for the next one.
            let mut passed: Vec<String> = Vec::new();
            let task = loop {
                let keep = |t: &Summary<'_>| !passed.iter().any(|p| p == t.task_id) && wanted(t);
                let Some(id) = tasks.next_claimable(now, kinds, &keep)? else {
                    return Ok((None, false));
                };
                match tasks.get(&id)? {
                    Some(t) if query::claimable(&Summary::of(&t), now) => break id,
                    _ => passed.push(id),
                }
            };
            let task = tasks.get_mut(&task)?.ok_or_else(|| vanished(&task))?;
            let op = Op::Claim {
                holder: holder.to_string(),
                lease,
            };
            machine::apply(task, &op, Actor::Anyone, now)
                .map_err(|r| refusal_error(OpKind::Claim, r, task))?;
            Ok((Some(task.clone()), true))
        })
    }

    /// Fail every non-terminal task not updated for `older_than`; with
    /// `dry_run`, only report what would be reclaimed. At most
    /// [`Store::batch_size`] tasks are failed per transaction.
    pub fn reclaim(
        &self,
        older_than: Duration,
        dry_run: bool,
    ) -> Result<ReclaimReport, StoreError> {
        self.reclaim_because(older_than, dry_run, None)
    }

    /// [`Store::reclaim`], recording `reason` (a person's why) on each
    /// reclaimed task's history entry.
    pub fn reclaim_because(
        &self,
        older_than: Duration,
        dry_run: bool,
        reason: Option<&str>,
    ) -> Result<ReclaimReport, StoreError> {
        let why = Why {
            author: self.author.as_ref(),
            reason,
        };
        if dry_run {
            return self.read(|tasks| plan_reclaim(tasks, older_than, self.now(), true));
        }
        let Some(batch) = self.batch_size() else {
            return self.transact(false, |tasks, now| {
                let report = plan_reclaim(tasks, older_than, now, false)?;
                fail_reclaimed(tasks, &report, older_than, now, why)?;
                let write = !report.reclaimed.is_empty();
                Ok((report, write))
            });
        };
        // In batches: plan from a snapshot without the lock, then fail the
        // planned tasks `batch` at a time, each one checked again under the
        // lock (a task that is no longer idle, or is now leased, is left
        // alone as one transaction would have found it).
        let mut plan = self.reclaim(older_than, true)?;
        plan.dry_run = false;
        let planned = std::mem::take(&mut plan.reclaimed);
        for chunk in planned.chunks(batch) {
            let step = self.transact(false, |tasks, now| {
                let mut step = Recheck::default();
                for r in chunk {
                    step.reclaim(tasks, &r.task_id, None, older_than, now, why)?;
                }
                let write = !step.reclaimed.is_empty();
                Ok((step, write))
            })?;
            plan.reclaimed.extend(step.reclaimed);
            plan.skipped.extend(step.skipped);
            plan.active += step.active;
        }
        Ok(plan)
    }

    /// Reclaim exactly the tasks a person was shown: each `(id, revision)`
    /// is failed only if it is still at that revision and still qualifies
    /// (unfinished, idle for `older_than`, no live lease); every other listed
    /// task is reported as skipped with the reason. Tasks not listed are
    /// never touched, even if they went idle since the preview. At most
    /// [`Store::batch_size`] tasks are failed per transaction.
    pub fn reclaim_tasks(
        &self,
        previewed: &[(String, u64)],
        older_than: Duration,
    ) -> Result<ReclaimReport, StoreError> {
        self.reclaim_tasks_because(previewed, older_than, None)
    }

    /// [`Store::reclaim_tasks`], recording `reason` (a person's why) on
    /// each reclaimed task's history entry.
    pub fn reclaim_tasks_because(
        &self,
        previewed: &[(String, u64)],
        older_than: Duration,
        reason: Option<&str>,
    ) -> Result<ReclaimReport, StoreError> {
        let why = Why {
            author: self.author.as_ref(),
            reason,
        };
        // Each task is checked on its own, so the previewed list can be
        // handled `batch` tasks per transaction.
        let batch = self.batch_size().unwrap_or(usize::MAX);
        let mut report: Option<ReclaimReport> = None;
        // Even an empty preview answers with the time and threshold.
        let empty: [(String, u64); 0] = [];
        let chunks: Vec<&[(String, u64)]> = if previewed.is_empty() {
            vec![&empty]
        } else {
            previewed.chunks(batch).collect()
        };
        for chunk in chunks {
            let (step, at) = self.transact(false, |tasks, now| {
                let mut step = Recheck::default();
                for (id, seen) in chunk {
                    step.reclaim(tasks, id, Some(*seen), older_than, now, why)?;
                }
                let write = !step.reclaimed.is_empty();
                Ok(((step, now), write))
            })?;
            let report = report.get_or_insert_with(|| ReclaimReport {
                dry_run: false,
                older_than_ms: older_than.as_millis() as u64,
                at,
                reclaimed: Vec::new(),
                skipped: Vec::new(),
                // Only the previewed tasks are the answer's subject.
                active: 0,
            });
            report.reclaimed.extend(step.reclaimed);
            report.skipped.extend(step.skipped);
        }
        // One chunk at least (an empty preview is one empty chunk).
        report.ok_or_else(|| self.skipped("reclaim"))
    }

    /// Remove terminal tasks past their retention: `ttl_ms` when set, else
    /// `older_than`. At most [`Store::batch_size`] tasks are removed per
    /// transaction.
    pub fn prune(&self, older_than: Duration) -> Result<PruneReport, StoreError> {
        let Some(batch) = self.batch_size() else {
            return self.transact(false, |tasks, now| {
                let found = tasks.prunable(now, older_than)?;
                let report = report::plan_prune(found.iter().map(|t| t.summary()), older_than, now);
                for p in &report.removed {
                    tasks.remove(&p.task_id)?;
                }
                let write = !report.removed.is_empty();
                Ok((report, write))
            });
        };
        // In batches, like `reclaim`: plan from a snapshot, then remove
        // `batch` tasks per transaction, each checked again under the lock.
        let mut plan = self.read(|tasks| {
            let now = self.now();
            let found = tasks.prunable(now, older_than)?;
            Ok(report::plan_prune(
                found.iter().map(|t| t.summary()),
                older_than,
                now,
            ))
        })?;
        let planned = std::mem::take(&mut plan.removed);
        for chunk in planned.chunks(batch) {
            let removed = self.transact(false, |tasks, now| {
                let mut removed = Vec::new();
                for p in chunk {
                    let Some(task) = tasks.get(&p.task_id)? else {
                        continue;
                    };
                    let again = report::plan_prune([Summary::of(&task)], older_than, now);
                    if let Some(pruned) = again.removed.into_iter().next() {
                        tasks.remove(&pruned.task_id)?;
                        removed.push(pruned);
                    }
                }
                let write = !removed.is_empty();
                Ok((removed, write))
            })?;
            plan.removed.extend(removed);
        }
        Ok(plan)
    }
}

/// What `reclaim` would do now: planned from the candidates the backend
/// finds, counting the other unfinished tasks as active.
fn plan_reclaim(
    tasks: &dyn Transaction,
    older_than: Duration,
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<ReclaimReport, StoreError> {
    let stale = tasks.stale(now, older_than)?;
    let mut plan = report::plan_reclaim(
        stale.candidates.iter().map(|t| t.summary()),
        older_than,
        now,
        dry_run,
    );
    plan.active += stale.unfinished.saturating_sub(stale.candidates.len());
    Ok(plan)
}

/// What one batch of a reclaim found, task by task.
#[derive(Default)]
struct Recheck {
    reclaimed: Vec<Reclaimed>,
    skipped: Vec<Skipped>,
    active: usize,
}

impl Recheck {
    /// Check the task `id` again under the lock and fail it if it still
    /// qualifies (and, with `seen`, is still at the revision a person was
    /// shown); else record why it was left alone.
    fn reclaim(
        &mut self,
        tasks: &mut dyn Transaction,
        id: &str,
        seen: Option<u64>,
        older_than: Duration,
        now: DateTime<Utc>,
        why: Why<'_>,
    ) -> Result<(), StoreError> {
        let skip = |status, reason: String| Skipped {
            task_id: id.to_string(),
            status,
            reason,
        };
        let Some(task) = tasks.get(id)? else {
            // Only finished tasks are pruned, so it finished first; a
            // reclaim that showed nobody a preview has nothing to say.
            if seen.is_some() {
                self.skipped
                    .push(skip(Status::Failed, "it no longer exists".into()));
            }
            return Ok(());
        };
        let mut again = report::plan_reclaim([Summary::of(&task)], older_than, now, false);
        match again.reclaimed.pop() {
            Some(_) if seen.is_some_and(|seen| seen != task.revision) => {
                self.skipped.push(skip(
                    task.status,
                    format!(
                        "changed since the preview (revision {}, now {})",
                        seen.unwrap_or_default(),
                        task.revision
                    ),
                ));
            }
            Some(r) => {
                let plan = ReclaimReport {
                    reclaimed: vec![r],
                    ..again
                };
                fail_reclaimed(tasks, &plan, older_than, now, why)?;
                self.reclaimed.extend(plan.reclaimed);
            }
            None => match again.skipped.pop() {
                Some(s) => self.skipped.push(s),
                None if seen.is_none() => self.active += again.active,
                None => {
                    let why = match task.updated_at {
                        Some(at) if !task.status.is_terminal() => format!(
                            "active again: last update {} ago",
                            report::human_duration(report::ms(now - at))
                        ),
                        _ => format!("it is {} now", task.status),
                    };
                    self.skipped.push(skip(task.status, why));
                }
            },
        }
        Ok(())
    }
}

/// How many ids of an ambiguous prefix an error lists.
const CANDIDATES_SHOWN: usize = 20;

/// Who reclaims, and why they said they did.
#[derive(Clone, Copy)]
struct Why<'a> {
    author: Option<&'a Author>,
    reason: Option<&'a str>,
}

/// Fail every task of a reclaim plan made from these very tasks.
fn fail_reclaimed(
    tasks: &mut dyn Transaction,
    plan: &ReclaimReport,
    older_than: Duration,
    now: DateTime<Utc>,
    why: Why<'_>,
) -> Result<(), StoreError> {
    for r in &plan.reclaimed {
        let task = tasks
            .get_mut(&r.task_id)?
            .ok_or_else(|| StoreError::UnknownTask {
                id: r.task_id.clone(),
            })?;
        let op = Op::Fail {
            error: report::reclaim_error(r, older_than),
        };
        let entries = task.history.len();
        machine::apply(task, &op, Actor::Anyone, now)
            .map_err(|refusal| refusal_error(OpKind::Reclaim, refusal, task))?;
        // The failure's message is rudder's (idle for how long): the
        // entry's note; the reason is the person's.
        if let Some(entry) = task.history.get_mut(entries..).and_then(|e| e.last_mut()) {
            entry.note = entry.reason.take();
            entry.reason = why.reason.map(str::to_string);
            if let Some(author) = why.author {
                entry.by(author);
            }
        }
    }
    Ok(())
}

/// Find the key for a full id or a unique prefix of one.
/// The task `id` was found and then, before it was read, removed by
/// another machine (a database whose statements each see the latest
/// commit): it is unknown now, a refusal like any unknown id, never a
/// panic.
fn vanished(id: &str) -> StoreError {
    StoreError::UnknownTask { id: id.to_string() }
}

/// The task id `id` names: itself when whole, else the one id it is a
/// prefix of.
fn resolve_in(tasks: &dyn Transaction, id: &str) -> Result<String, StoreError> {
    if tasks.contains(id)? {
        return Ok(id.to_string());
    }
    resolve_prefix(tasks, id)
}

/// [`resolve_in`] for an `id` known not to be a whole id: the one task id
/// it is a prefix of.
fn resolve_prefix(tasks: &dyn Transaction, id: &str) -> Result<String, StoreError> {
    let unknown = || StoreError::UnknownTask { id: id.to_string() };
    if id.is_empty() {
        return Err(unknown());
    }
    let mut candidates = tasks.ids_with_prefix(id, CANDIDATES_SHOWN + 1)?;
    match candidates.len() {
        0 => return Err(unknown()),
        1 => return Ok(candidates.remove(0)),
        _ => {}
    }
    candidates.sort();
    let more = candidates.len() > CANDIDATES_SHOWN;
    candidates.truncate(CANDIDATES_SHOWN);
    Err(StoreError::AmbiguousId {
        prefix: id.to_string(),
        candidates,
        more,
    })
}

fn refusal_error(op: OpKind, refusal: Refusal, task: &Task) -> StoreError {
    let task = Box::new(task.clone());
    match refusal {
        Refusal::NotAllowed(reason) => StoreError::Refused { op, reason, task },
        Refusal::StaleRevision { expected } => StoreError::StaleRevision { op, expected, task },
        Refusal::Lease => StoreError::LeaseLost { op, task },
        Refusal::InvalidInput(violations) => StoreError::InvalidInput {
            id: task.task_id.clone(),
            violations,
        },
        Refusal::InvalidSchema(message) => StoreError::InvalidSchema(message),
        Refusal::RevisionExhausted => StoreError::RevisionExhausted { op, task },
    }
}
