//! The worker API (DESIGN.md "Kinds and the worker API"; the guide is
//! `docs/workers.md`): a worker's identity and lease are bound once, by
//! [`Store::worker`]; [`Worker::next`] waits on the change feed until it
//! holds a claimed [`Job`]; the job renews its lease in the background while
//! it is alive, reports progress, asks a person, and ends the task; dropping
//! it gives the lease back.
//!
//! Every write a job makes either succeeds, or is a [`WorkError`]: a
//! [`Stop`] (the store refused it: the lease was lost, the task was
//! cancelled or finished by someone else, or it is gone), which the worker
//! obeys by dropping the job; an infrastructure failure
//! ([`WorkError::Store`]), which it may retry; or a value the store cannot
//! take ([`WorkError::Rejected`]), a bug of the caller's.
//!
//! [`AsyncWorker`] and [`AsyncJob`] are the same API for tokio code: store
//! calls run on a few store threads outside the runtime, the wait is the
//! feed's own async side.
//!
//! This module depends on the store, the task model and the feed only.

mod asynch;
mod job;
mod lease;
mod renewers;
mod wait;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use asynch::{Adopter, AsyncAnswer, AsyncJob, AsyncWorker};
pub use job::{Answer, Job};
pub use wait::{REMOVED, Until, WaitError, WaitNote, removed_after_ending};

use crate::task::{Status, Task};
use crate::watch::{ChangeFeed, FeedOptions};
use crate::{ErrorClass, Store, StoreError, Summary, UrlError};

/// The lease a worker takes unless told otherwise.
pub const DEFAULT_LEASE: Duration = crate::task::machine::DEFAULT_LEASE;

/// Why a worker must stop working a task: the store refused its write (or
/// its lease renewal). Nothing was written. The job is no longer this
/// worker's to work: drop it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Stop {
    /// The task was cancelled.
    #[error(transparent)]
    Cancelled(Arc<StoreError>),
    /// Someone else finished the task (completed or failed it; a reclaim
    /// fails a stalled one).
    #[error(transparent)]
    Finished(Arc<StoreError>),
    /// Another worker holds the task now (this worker's lease lapsed and
    /// was taken over, or was given back).
    #[error(transparent)]
    LeaseLost(Arc<StoreError>),
    /// The task is gone from the store (pruned).
    #[error(transparent)]
    Unknown(Arc<StoreError>),
    /// The state machine refused the write in the task's current status
    /// (for example, asking again while it waits for a different input).
    #[error(transparent)]
    Refused(Arc<StoreError>),
}

impl Stop {
    /// The store's refusal, with the task's current snapshot.
    pub fn error(&self) -> &StoreError {
        match self {
            Stop::Cancelled(e)
            | Stop::Finished(e)
            | Stop::LeaseLost(e)
            | Stop::Unknown(e)
            | Stop::Refused(e) => e,
        }
    }

    /// The task as the store holds it now (none for an unknown task).
    pub fn task(&self) -> Option<&Task> {
        self.error().task()
    }
}

/// What a worker's call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    /// The store refused the write: stop working the task.
    #[error(transparent)]
    Stop(#[from] Stop),
    /// The store could not be used (unreachable, locked, an I/O or database
    /// error, corrupt): nothing is known to be written; retry, or let the
    /// lease lapse. [`WorkError::is_retryable`] says which are worth it.
    #[error(transparent)]
    Store(StoreError),
    /// The value given cannot be stored (an invalid JSON Schema, too deep,
    /// too large): fix the call; the job is still this worker's.
    #[error(transparent)]
    Rejected(StoreError),
}

impl WorkError {
    /// Sort a store error into the three outcomes.
    pub fn of(e: StoreError) -> WorkError {
        use StoreError as E;
        let stop = |e: StoreError| match e.task().map(|t| t.status) {
            Some(Status::Cancelled) => Stop::Cancelled(Arc::new(e)),
            Some(s) if s.is_terminal() => Stop::Finished(Arc::new(e)),
            _ => match e {
                E::LeaseLost { .. } => Stop::LeaseLost(Arc::new(e)),
                e => Stop::Refused(Arc::new(e)),
            },
        };
        match e {
            E::UnknownTask { .. } | E::AmbiguousId { .. } => {
                WorkError::Stop(Stop::Unknown(Arc::new(e)))
            }
            E::Refused { .. }
            | E::LeaseLost { .. }
            | E::StaleRevision { .. }
            | E::RevisionExhausted { .. } => WorkError::Stop(stop(e)),
            E::TooDeep { .. }
            | E::InvalidKind { .. }
            | E::ReservedKey { .. }
            | E::TooLarge { .. }
            | E::InvalidInput { .. }
            | E::InvalidSchema(_) => WorkError::Rejected(e),
            e => WorkError::Store(e),
        }
    }

    /// The stop, if the store refused the write.
    pub fn stop(&self) -> Option<&Stop> {
        match self {
            WorkError::Stop(s) => Some(s),
            _ => None,
        }
    }

    /// Whether trying again later may succeed: the store's server could not
    /// be reached, its lock was busy, or a file or database call failed.
    pub fn is_retryable(&self) -> bool {
        match self {
            WorkError::Store(e) => e.kind().class() == ErrorClass::Retry,
            _ => false,
        }
    }
}

impl From<StoreError> for WorkError {
    fn from(e: StoreError) -> Self {
        WorkError::of(e)
    }
}

/// A bad worker name, holder or kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("a worker's {what} must not be empty")]
    Empty { what: &'static str },
    #[error("a worker's {what} must not hold control characters: {shown}")]
    Control { what: &'static str, shown: String },
    #[error("{kind:?} is not a kind: {reason}")]
    Kind {
        kind: String,
        reason: crate::task::KindError,
    },
    #[error("a worker's renewal interval ({renew:?}) must be shorter than its lease ({lease:?})")]
    Renewal { renew: Duration, lease: Duration },
}

/// Check a name, holder or kind: not empty, no control characters (it is
/// shown in the TUI and in logs).
pub fn check_name(what: &'static str, text: &str) -> Result<(), ConfigError> {
    if text.trim().is_empty() {
        return Err(ConfigError::Empty { what });
    }
    if text.chars().any(char::is_control) {
        return Err(ConfigError::Control {
            what,
            shown: format!("{text:?}"),
        });
    }
    Ok(())
}

/// Which tasks a worker takes beyond its kinds (the demo worker takes its
/// own incidents only).
pub type Filter = Arc<dyn Fn(&Summary<'_>) -> bool + Send + Sync>;

/// The worker API on a [`Store`]: `use rudder_store::Work` (or the
/// [`prelude`](crate::prelude)) and call `store.worker(name)`.
pub trait Work {
    /// A worker named `name` on this store: set its lease, kinds and
    /// holder on the builder, then [`WorkerBuilder::start`] it.
    fn worker(&self, name: impl Into<String>) -> WorkerBuilder;

    /// Wait until the task `id` (full id or unique prefix) is done as
    /// `until` says, or `timeout` passes: see [`wait::wait`].
    fn wait(&self, id: &str, until: Until, timeout: Option<Duration>) -> Result<Task, WaitError>;

    /// [`Work::wait`], telling `note` what it waits for and when the store
    /// cannot be reached.
    fn wait_noting(
        &self,
        id: &str,
        until: Until,
        timeout: Option<Duration>,
        note: &mut (dyn FnMut(WaitNote) + Send),
    ) -> Result<Task, WaitError>;
}

impl Work for Store {
    fn worker(&self, name: impl Into<String>) -> WorkerBuilder {
        WorkerBuilder {
            store: crate::reopen(self),
            clock: self.clock(),
            name: name.into(),
            holder: None,
            lease: DEFAULT_LEASE,
            renew: None,
            kinds: Vec::new(),
            filter: None,
            idle_check: FeedOptions::default().stat_interval,
        }
    }

    fn wait(&self, id: &str, until: Until, timeout: Option<Duration>) -> Result<Task, WaitError> {
        wait::wait(self, id, until, timeout, &mut |_| {})
    }

    fn wait_noting(
        &self,
        id: &str,
        until: Until,
        timeout: Option<Duration>,
        note: &mut (dyn FnMut(WaitNote) + Send),
    ) -> Result<Task, WaitError> {
        wait::wait(self, id, until, timeout, note)
    }
}

/// A runtime of this thread's own for a blocking wait on the change feed;
/// failing to make one is an I/O error of `store`.
pub(crate) fn feed_runtime(store: &Store) -> Result<tokio::runtime::Runtime, StoreError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            let location = store.backend().store_location();
            StoreError::Io {
                file: location.path().map(Path::to_path_buf).unwrap_or_default(),
                location,
                action: "start the change feed",
                source: e,
            }
        })
}

/// How a worker is set up: [`Store::worker`].
#[must_use = "a worker does nothing until it is started"]
pub struct WorkerBuilder {
    /// The worker's own store, over what the caller's opened, with its
    /// settings ([`crate::reopen`]).
    store: Result<Store, UrlError>,
    clock: crate::Clock,
    name: String,
    holder: Option<String>,
    lease: Duration,
    renew: Option<Duration>,
    kinds: Vec<String>,
    filter: Option<Filter>,
    idle_check: Duration,
}

/// Why a worker could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("cannot start the worker's change feed: {0}")]
    Runtime(#[from] std::io::Error),
}

impl WorkerBuilder {
    /// The lease a job holds, renewed in the background (default 30 s).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long a job may go without writing before its lease is renewed
    /// (default a third of the lease). It also bounds how soon a job whose
    /// task was cancelled learns it while it writes nothing.
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.renew = Some(every);
        self
    }

    /// Take tasks of these kinds only (none given: every kind).
    pub fn kinds<I, S>(mut self, kinds: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.kinds.extend(kinds.into_iter().map(Into::into));
        self
    }

    /// Take only the tasks `wanted` accepts (on top of the kinds).
    pub fn filter(mut self, wanted: impl Fn(&Summary<'_>) -> bool + Send + Sync + 'static) -> Self {
        self.filter = Some(Arc::new(wanted));
        self
    }

    /// The lease holder recorded on claimed tasks (`claimed_by`). Default:
    /// the name, `#` and eight random hex digits, unique to this worker, so
    /// that a restarted worker of the same name is another holder.
    pub fn holder(mut self, holder: impl Into<String>) -> Self {
        self.holder = Some(holder.into());
        self
    }

    /// How often an idle worker looks for tasks whose lease lapsed (a lapse
    /// writes nothing, so the feed cannot tell): default the feed's safety
    /// tick (500 ms), never more often.
    pub fn idle_check(mut self, every: Duration) -> Self {
        self.idle_check = every.max(FeedOptions::default().stat_interval);
        self
    }

    fn settings(self) -> Result<(Settings, Store), StartError> {
        check_name("name", &self.name)?;
        let holder = match self.holder {
            Some(h) => h,
            None => {
                let random = uuid::Uuid::new_v4().simple().to_string();
                format!("{}#{}", self.name, &random[..8])
            }
        };
        check_name("holder", &holder)?;
        for kind in &self.kinds {
            crate::task::check_kind(kind).map_err(|reason| ConfigError::Kind {
                kind: kind.clone(),
                reason,
            })?;
        }
        let renew = self.renew.unwrap_or(self.lease / 3);
        if renew >= self.lease {
            return Err(ConfigError::Renewal {
                renew,
                lease: self.lease,
            }
            .into());
        }
        let store = self.store?.with_clock(self.clock);
        Ok((
            Settings {
                name: self.name,
                holder,
                lease: self.lease,
                renew: renew.max(Duration::from_millis(1)),
                kinds: self.kinds,
                filter: self.filter,
                idle_check: self.idle_check,
            },
            store,
        ))
    }

    /// Start the worker (sync). Nothing is claimed until [`Worker::next`].
    pub fn start(self) -> Result<Worker, StartError> {
        let (settings, store) = self.settings()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let renewers = renewers::Renewers::new(settings.renew);
        Ok(Worker {
            core: Core::new(settings, store),
            runtime,
            feed: None,
            renewers,
        })
    }

    /// Start the worker for tokio code. Call from within a runtime.
    pub fn start_async(self) -> Result<AsyncWorker, StartError> {
        let (settings, store) = self.settings()?;
        Ok(AsyncWorker::new(Core::new(settings, store)))
    }
}

/// A worker's fixed settings.
#[derive(Clone)]
pub(crate) struct Settings {
    pub name: String,
    pub holder: String,
    pub lease: Duration,
    pub renew: Duration,
    pub kinds: Vec<String>,
    pub filter: Option<Filter>,
    pub idle_check: Duration,
}

/// What the sync and async workers share: the settings, the store, and
/// what `next` has reported.
pub(crate) struct Core {
    pub settings: Arc<Settings>,
    pub store: Arc<Store>,
    /// The store error `next` last reported, so that a store that stays
    /// unusable is reported once, not at every call.
    reported: Option<String>,
}

/// What one look for a task found.
pub(crate) enum Look {
    Claimed(Box<Task>),
    Nothing,
    /// The store failed again as already reported: wait before trying.
    StillFailing,
}

impl Core {
    fn new(settings: Settings, store: Store) -> Core {
        Core {
            settings: Arc::new(settings),
            store: Arc::new(store),
            reported: None,
        }
    }

    /// Claim the next task this worker takes, if any (a blocking call).
    pub fn claim(settings: &Settings, store: &Store) -> Result<Option<Task>, StoreError> {
        let wanted = |s: &Summary<'_>| settings.filter.as_ref().is_none_or(|f| f(s));
        store.claim_next_where(&settings.holder, settings.lease, &settings.kinds, &wanted)
    }

    /// Turn a claim's answer into what `next` does with it.
    pub fn looked(&mut self, got: Result<Option<Task>, StoreError>) -> Result<Look, WorkError> {
        match got {
            Ok(found) => {
                self.reported = None;
                Ok(match found {
                    Some(t) => Look::Claimed(Box::new(t)),
                    None => Look::Nothing,
                })
            }
            Err(e) => {
                let message = e.to_string();
                if self.reported.as_ref() == Some(&message) {
                    return Ok(Look::StillFailing);
                }
                self.reported = Some(message);
                Err(WorkError::Store(e))
            }
        }
    }

    /// How long to wait for the feed before looking again.
    pub fn pause(&self, left: Duration) -> Duration {
        left.min(self.settings.idle_check)
    }

    /// The change feed a waiting worker wakes on. Started when a claim
    /// finds nothing to do, dropped when one finds a task: a feed watches
    /// the store's files (or listens on PostgreSQL) and reads the change
    /// log after every write, and a busy worker's would be woken by every
    /// write of every worker for nothing.
    pub fn feed(&self) -> ChangeFeed {
        self.store.feed(FeedOptions::default())
    }
}

/// A worker that works tasks from sync code: see the module docs.
pub struct Worker {
    core: Core,
    runtime: tokio::runtime::Runtime,
    feed: Option<ChangeFeed>,
    /// The thread that renews its jobs' leases.
    renewers: renewers::Renewers,
}

impl Worker {
    /// The name the worker was given.
    pub fn name(&self) -> &str {
        &self.core.settings.name
    }

    /// The lease holder its claims record.
    pub fn holder(&self) -> &str {
        &self.core.settings.holder
    }

    /// The lease its jobs hold.
    pub fn lease(&self) -> Duration {
        self.core.settings.lease
    }

    /// The store it works on.
    pub fn store(&self) -> &Store {
        &self.core.store
    }

    /// Wait until this worker holds a claimed job (`Some`) or `timeout`
    /// passes (`None`). It wakes on the change feed when a task is created
    /// or changes, and looks for lapsed leases (which write nothing) at the
    /// feed's safety tick.
    ///
    /// A store that cannot be used is reported as [`WorkError::Store`] once;
    /// calls after it wait for the store to come back (or the timeout)
    /// without reporting the same error again, and claim once it is back.
    pub fn next(&mut self, timeout: Duration) -> Result<Option<Job>, WorkError> {
        let deadline = Instant::now() + timeout;
        loop {
            let got = Core::claim(&self.core.settings, &self.core.store);
            match self.core.looked(got)? {
                Look::Claimed(task) => {
                    // A busy worker keeps no feed (see `Core::feed`).
                    self.feed = None;
                    return Ok(Some(Job::start(
                        Arc::clone(&self.core.settings),
                        Arc::clone(&self.core.store),
                        &self.renewers,
                        *task,
                    )));
                }
                Look::Nothing | Look::StillFailing => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let Some(feed) = self.feed.as_mut() else {
                let _inside = self.runtime.enter();
                self.feed = Some(self.core.feed());
                // Look again: a task made before the feed started is told
                // by no one.
                continue;
            };
            let pause = self.core.pause(left);
            let event = self
                .runtime
                .block_on(async { tokio::time::timeout(pause, feed.next()).await });
            if let Ok(None) = event {
                // The feed stopped (it never does while the runtime runs):
                // start another.
                let _inside = self.runtime.enter();
                self.feed = Some(self.core.feed());
            }
        }
    }
}

#[cfg(test)]
mod tests;
