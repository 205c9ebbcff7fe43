//! The change feed: the changes of a store in commit order, plus `Reset`
//! (re-read everything) and `Unavailable` (keep showing the last good state).
//!
//! docs/architecture.md "Watching" and "Stores and backends". A feed reads from a
//! [`FeedSource`], which knows two things about its store: how to be woken
//! cheaply when it may have changed, and how to read what changed after its
//! cursor. The loop here is the same for every backend: wake-ups (the first
//! after a quiet spell read at once, a burst at most once per few
//! milliseconds) and a periodic safety-net check lead to a catch-up; the
//! catch-up's answer becomes events.
//!
//! - JSON file ([`FileSource`]): the store's *directory* is watched
//!   (`rudder_fs::watch::watch_dir`: inotify on Linux for the events that end a write,
//!   `notify` elsewhere; an atomic rename would leave a watch on the file
//!   pointing at the old inode), events are filtered by the store's name, a rescan
//!   means "read again", and a cheap `stat` is the safety net. Changes are
//!   derived by comparing each task's (revision, status, `updated_at`) with
//!   the previous read, from the tasks' summaries: no task is parsed in full.
//! - SQLite ([`SqliteSource`]): the lock file, which every rudder writer
//!   closes after its commit (and the database and `-wal` file), watched
//!   the same way, is the wake-up, `PRAGMA data_version` is the
//!   safety net, and the changes are read from the `changes` table after a
//!   cursor, which is written in the same transaction as each write.
//! - PostgreSQL ([`PostgresSource`]): `LISTEN` on a connection of its own
//!   is the wake-up (every commit notifies), `max(seq)` the safety net, and
//!   the changes are read from `rudder_changes` after a cursor.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::mpsc;

use crate::StoreError;
use rudder_model::task::Status;

/// How many changes one catch-up may report. A reader further behind than
/// this (say, after a bulk `copy` of a million tasks) is told to re-read
/// everything instead: that is cheaper than a million events.
pub const MAX_BATCH: usize = 10_000;

/// One change of one task, as committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskChange {
    pub task_id: String,
    /// The task's revision after the change (the last one seen, for a
    /// removal).
    pub revision: u64,
    /// The status before; `None` for a task that appeared.
    pub from: Option<Status>,
    /// The status after; `None` for a task that was removed.
    pub to: Option<Status>,
    /// When the writer says it happened (the task's `updated_at`), if known.
    pub at: Option<DateTime<Utc>>,
}

impl TaskChange {
    /// Whether the status changed (a task appearing or vanishing counts).
    pub fn is_transition(&self) -> bool {
        self.from != self.to
    }
}

/// Why a reader must re-read everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetReason {
    /// The first event of a feed over a readable store.
    Start,
    /// The store is readable again after being unavailable. Any changes
    /// the feed can still tell since the last good state follow.
    Recovered,
    /// The feed's place in the store's changes is gone (a database
    /// replaced by another, a changes table pruned or reset).
    CursorLost,
    /// More than [`MAX_BATCH`] changes at once.
    Overflow,
}

/// Why the store cannot be read now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Unavailable {
    /// The store does not exist (yet, or any more).
    Missing,
    /// It exists but cannot be read or parsed.
    Unreadable { message: String },
    /// Its database server cannot be reached now (stopped, restarting, the
    /// network): a `reset` follows when it is back.
    Unreachable { message: String },
}

impl Unavailable {
    /// A failed read, as the feed reports it: a database server that
    /// cannot be reached is [`Unavailable::Unreachable`] (worth waiting
    /// out), anything else [`Unavailable::Unreadable`].
    pub fn of(e: &StoreError) -> Self {
        let message = e.to_string();
        if e.is_unreachable() {
            Unavailable::Unreachable { message }
        } else {
            Unavailable::Unreadable { message }
        }
    }
}

/// One thing the feed observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedEvent {
    /// Re-read whatever you show: the first event over a readable store,
    /// the first after [`FeedEvent::Unavailable`], or the feed lost its
    /// place. No changes before it are reported.
    Reset(ResetReason),
    /// Tasks that changed since the last event, in commit order (the JSON
    /// file, which records no order, reports them in store order, then the
    /// removals). Never empty.
    Changes(Vec<TaskChange>),
    /// The store cannot be read now; keep showing the last good state.
    /// Reported once per distinct reason.
    Unavailable(Unavailable),
}

/// What a catch-up found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Catchup {
    /// The source has (re)positioned its cursor at the current end: the
    /// reader must re-read everything. `Start` the first time; the loop
    /// turns it into `Recovered` after an unavailable spell.
    Reset(ResetReason),
    /// The changes after the cursor, in commit order (possibly none); the
    /// cursor moved past them.
    Changes(Vec<TaskChange>),
    /// The store cannot be read; the cursor stays where it was.
    Unavailable(Unavailable),
}

/// A database source's catch-up: `read` the changes table after the
/// source's `cursor` (the table's identity and the last change seen; with
/// none, `i64::MAX`, only to learn where the end is), then measure the log
/// against the cursor and move it to the log's end. Another table under
/// the same name, or changes gone from before the cursor's end (a table
/// pruned or reset), make the cursor meaningless; a missing store forgets
/// it.
pub fn follow<I: PartialEq>(
    cursor: &mut Option<(I, i64)>,
    read: impl FnOnce(i64) -> Result<Option<(I, crate::ChangeLog)>, StoreError>,
) -> Catchup {
    let after = cursor.as_ref().map_or(i64::MAX, |(_, seq)| *seq);
    let (at, log) = match read(after) {
        Ok(Some(found)) => found,
        Ok(None) => {
            *cursor = None;
            return Catchup::Unavailable(Unavailable::Missing);
        }
        Err(e) => return Catchup::Unavailable(Unavailable::of(&e)),
    };
    let Some((identity, seq)) = cursor.take() else {
        *cursor = Some((at, log.last));
        return Catchup::Reset(ResetReason::Start);
    };
    let lost = identity != at || log.last < seq || log.first.is_some_and(|f| f > seq + 1);
    *cursor = Some((at, log.last));
    if lost {
        return Catchup::Reset(ResetReason::CursorLost);
    }
    if log.changes.len() > MAX_BATCH {
        return Catchup::Reset(ResetReason::Overflow);
    }
    Catchup::Changes(
        log.changes
            .into_iter()
            .map(|c| TaskChange {
                task_id: c.task_id,
                revision: c.revision,
                from: c.before,
                to: c.after,
                at: c.at,
            })
            .collect(),
    )
}

/// A function that wakes the feed: the store may have changed.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// Where a feed's changes come from: one backend's wake-up and catch-up.
///
/// The loop calls [`FeedSource::catch_up`] once at the start, then after
/// each wake-up (coalesced) and whenever [`FeedSource::may_have_changed`]
/// says so at the safety-net interval. Both run on a blocking thread.
pub trait FeedSource: Send + 'static {
    /// Start waking the feed (by calling `wake`) when the store may have
    /// changed: a file watch, a `LISTEN` connection. The returned guard
    /// keeps the wake-ups going and stops them when dropped. `None` when
    /// they cannot be armed now (say, the directory does not exist yet):
    /// the loop tries again at each safety-net check.
    fn arm(&mut self, wake: Wake) -> Option<Box<dyn Send>>;

    /// The cheap safety net, for wake-ups that went missing: whether the
    /// store may have changed since the last catch-up (a `stat`, `PRAGMA
    /// data_version`).
    fn may_have_changed(&mut self) -> bool;

    /// Read what changed after the cursor and move it.
    fn catch_up(&mut self) -> Catchup;

    /// How many times the store's content was read so far.
    fn reads(&self) -> u64;
}

/// Tuning of the feed; the defaults suit interactive use.
#[derive(Debug, Clone)]
pub struct FeedOptions {
    /// The least time between two reads of a burst of wake-ups (the first
    /// wake-up after a quiet spell is read at once).
    pub coalesce: Duration,
    /// How often to run the safety-net check in case a wake-up went missing.
    pub stat_interval: Duration,
    /// Use file system notifications (`false`: rely on the safety net only).
    pub notify: bool,
    /// Report the changes of this task only (a full id): `rudder wait`. A
    /// JSON file is then searched for that task alone.
    pub task: Option<String>,
}

impl Default for FeedOptions {
    fn default() -> Self {
        FeedOptions {
            coalesce: Duration::from_millis(5),
            stat_interval: Duration::from_millis(500),
            notify: true,
            task: None,
        }
    }
}

/// A running change feed. Dropping it stops the watcher.
pub struct ChangeFeed {
    rx: mpsc::Receiver<FeedEvent>,
    task: tokio::task::JoinHandle<()>,
    reads: Arc<AtomicU64>,
}

impl ChangeFeed {
    /// A feed that says once that the store cannot be watched (a URL no
    /// backend of this build opens), then ends.
    pub fn unavailable(message: String) -> ChangeFeed {
        let (tx, rx) = mpsc::channel(1);
        let task = tokio::spawn(async move {
            let _ = tx
                .send(FeedEvent::Unavailable(Unavailable::Unreadable { message }))
                .await;
        });
        ChangeFeed {
            rx,
            task,
            reads: Arc::default(),
        }
    }

    /// Run a feed over `source` (for backends this module does not know).
    /// `options.task` is the source's business, not the loop's.
    pub fn with_source(source: Box<dyn FeedSource>, options: FeedOptions) -> ChangeFeed {
        let (tx, rx) = mpsc::channel(16);
        let reads = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&reads);
        let task = tokio::spawn(run(source, options, tx, counter));
        ChangeFeed { rx, task, reads }
    }

    /// How many times the feed has read the store so far: once at start,
    /// then once per change (an idle store is not re-read).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The next event; `None` only if the feed stopped.
    pub async fn next(&mut self) -> Option<FeedEvent> {
        self.rx.recv().await
    }

    /// The next event if one is ready now (to take a burst at once).
    pub fn try_next(&mut self) -> Option<FeedEvent> {
        self.rx.try_recv().ok()
    }
}

impl Drop for ChangeFeed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the loop last told its reader, to turn catch-ups into events.
#[derive(Debug, Default, PartialEq, Eq)]
enum Told {
    #[default]
    Nothing,
    Live,
    Unavailable(Unavailable),
}

impl Told {
    /// The events a catch-up means, given what was told before.
    fn events(&mut self, found: Catchup) -> Vec<FeedEvent> {
        let before = std::mem::replace(self, Told::Live);
        let reset = |why| match before {
            Told::Nothing => Some(ResetReason::Start),
            Told::Unavailable(_) => Some(ResetReason::Recovered),
            Told::Live => why,
        };
        match found {
            Catchup::Reset(why) => reset(Some(why)).map(FeedEvent::Reset).into_iter().collect(),
            Catchup::Changes(changes) => {
                let mut events: Vec<FeedEvent> =
                    reset(None).map(FeedEvent::Reset).into_iter().collect();
                if !changes.is_empty() {
                    events.push(FeedEvent::Changes(changes));
                }
                events
            }
            Catchup::Unavailable(why) => {
                if before == Told::Unavailable(why.clone()) {
                    *self = before;
                    return Vec::new();
                }
                *self = Told::Unavailable(why.clone());
                vec![FeedEvent::Unavailable(why)]
            }
        }
    }
}

async fn run(
    mut source: Box<dyn FeedSource>,
    options: FeedOptions,
    tx: mpsc::Sender<FeedEvent>,
    reads: Arc<AtomicU64>,
) {
    let (poke_tx, mut poke_rx) = mpsc::unbounded_channel::<()>();
    let wake: Wake = Arc::new(move || {
        let _ = poke_tx.send(());
    });
    // Kept alive for as long as the feed runs; re-armed at the safety-net
    // checks until it can be.
    let mut armed = if options.notify {
        source.arm(wake.clone())
    } else {
        None
    };
    let mut told = Told::default();
    let mut tick = tokio::time::interval(options.stat_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut due = true;
    // When the store was last read: a wake-up after a quiet spell is read
    // at once, a burst at most once per `coalesce`.
    let mut last_read: Option<tokio::time::Instant> = None;
    loop {
        if due {
            last_read = Some(tokio::time::Instant::now());
            // Reading a large store takes tens of milliseconds: keep it off
            // the runtime thread, which in the TUI also handles keys.
            let (back, found) = match tokio::task::spawn_blocking(move || {
                let found = source.catch_up();
                (source, found)
            })
            .await
            {
                Ok(done) => done,
                Err(_) => return, // the read panicked or the runtime is shutting down
            };
            source = back;
            reads.store(source.reads(), Ordering::Relaxed);
            for event in told.events(found) {
                if tx.send(event).await.is_err() {
                    return;
                }
            }
        }
        due = tokio::select! {
            poke = poke_rx.recv() => {
                if poke.is_none() { return; }
                // The first change after a quiet spell is told at once (a
                // worker waiting for a task, a person waiting for a
                // question); the wake-ups of a burst wait out the rest of
                // the window and are read together.
                if let Some(at) = last_read {
                    tokio::time::sleep_until(at + options.coalesce).await;
                }
                while poke_rx.try_recv().is_ok() {}
                true
            }
            _ = tick.tick() => {
                if armed.is_none() && options.notify {
                    armed = source.arm(wake.clone());
                }
                let (back, changed) = match tokio::task::spawn_blocking(move || {
                    let changed = source.may_have_changed();
                    (source, changed)
                })
                .await
                {
                    Ok(done) => done,
                    Err(_) => return,
                };
                source = back;
                changed
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(id: &str) -> TaskChange {
        TaskChange {
            task_id: id.into(),
            revision: 1,
            from: None,
            to: Some(Status::Working),
            at: None,
        }
    }

    #[test]
    fn catch_ups_become_events() {
        let mut told = Told::default();
        let missing = || Catchup::Unavailable(Unavailable::Missing);
        assert_eq!(
            told.events(missing()),
            [FeedEvent::Unavailable(Unavailable::Missing)]
        );
        // Said once per reason.
        assert_eq!(told.events(missing()), []);
        // The first good read after it is a reset, then what changed.
        assert_eq!(
            told.events(Catchup::Changes(vec![change("a")])),
            [
                FeedEvent::Reset(ResetReason::Recovered),
                FeedEvent::Changes(vec![change("a")])
            ]
        );
        assert_eq!(told.events(Catchup::Changes(vec![])), []);
        assert_eq!(
            told.events(Catchup::Reset(ResetReason::CursorLost)),
            [FeedEvent::Reset(ResetReason::CursorLost)]
        );
        let mut fresh = Told::default();
        assert_eq!(
            fresh.events(Catchup::Reset(ResetReason::Start)),
            [FeedEvent::Reset(ResetReason::Start)]
        );
    }
}
