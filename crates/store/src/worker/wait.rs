//! `store.wait(id, until, timeout)`: block until a task is finished (or
//! waits for input) on the change feed. `rudder wait` and a job's
//! [`Answer`](super::Answer) are built on it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::task::{Status, Task};
use crate::watch::{ChangeFeed, FeedEvent, FeedOptions, Unavailable};
use crate::{Backend, Store, StoreError};

/// Until when [`Store::wait`] waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Until {
    /// The task is finished or waits for input (`rudder wait`'s default).
    #[default]
    Settled,
    /// The task is finished, waiting past input requests.
    Terminal,
}

impl Until {
    /// Whether a wait is done with `task`.
    pub fn done(self, task: &Task) -> bool {
        task.status.is_terminal() || self == Until::Settled && task.status == Status::InputRequired
    }
}

/// Why [`Store::wait`] ended without the task settling.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// Unknown task, unreadable or corrupt store, ...: the store's own error.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The timeout passed first.
    #[error("timed out after {} waiting for task {id}", humantime::format_duration(*after))]
    TimedOut { after: Duration, id: String },
    /// The task was seen unfinished, then it was gone: removed before the
    /// wait saw how it ended, so its outcome is unknown.
    #[error("task {} vanished while it was {} (revision {})", last.task_id, last.status, last.revision)]
    Vanished {
        /// The task as last seen.
        last: Box<Task>,
        /// The whole store is gone, not only the task.
        store_gone: bool,
    },
    /// The change feed stopped (the runtime is shutting down).
    #[error("the change feed stopped")]
    FeedStopped,
}

/// What a wait tells its caller on the way (`rudder wait` prints these).
#[derive(Debug, Clone, PartialEq)]
pub enum WaitNote {
    /// The task was read and is not settled: the wait begins.
    Waiting(Box<Task>),
    /// The store's server cannot be reached now; the wait goes on (said
    /// once per outage).
    StillWaiting(String),
}

/// The field of [`Task::extra`] that marks a wait's answer read from the
/// change log of a task removed (pruned) right after it ended: the status
/// and revision are how it ended, but its result (or error) was not kept,
/// so the answer has none (`result` and `error` unset, which does not mean
/// a null result). Its value says so in words. [`removed_after_ending`]
/// tells.
pub const REMOVED: &str = "removed";

/// Whether `task` is a wait's answer for a task that was removed right
/// after it ended (see [`REMOVED`]): its result is gone.
pub fn removed_after_ending(task: &Task) -> bool {
    task.extra.contains_key(REMOVED)
}

/// A read of one task, sync or async.
pub(crate) type Read<'a> =
    dyn FnMut() -> Pin<Box<dyn Future<Output = Result<Task, StoreError>> + Send + 'a>> + Send + 'a;

/// [`Work::wait`](super::Work::wait): wait until the task `id` (full id or
/// unique prefix) is done as `until` says, or `timeout` passes (`None`: as
/// long as it takes), on the change feed (no polling), telling `note` on the
/// way. A task already done is answered at once.
///
/// - The store turning unreadable or corrupt ends the wait at once with the
///   store's own error, once a second read confirms it; a database server
///   that cannot be reached is waited out.
/// - The task vanishing after it was seen unfinished is
///   [`WaitError::Vanished`], unless the store's change log (SQLite,
///   PostgreSQL) still says how it ended: then the task as last seen, at
///   that status and revision. A task seen finished is answered at once, so
///   a prune afterwards cannot change the answer.
///
/// Runs a tokio runtime of its own: call it from sync code (from async
/// code, use [`AsyncWorker`](super::AsyncWorker)'s store on a blocking
/// thread).
pub(crate) fn wait(
    store: &Store,
    id: &str,
    until: Until,
    timeout: Option<Duration>,
    note: &mut (dyn FnMut(WaitNote) + Send),
) -> Result<Task, WaitError> {
    match wait_on_feed(store, id, until, timeout, note) {
        Err(WaitError::Vanished {
            last,
            store_gone: false,
        }) => ended_in_log(store, &last, until).ok_or(WaitError::Vanished {
            last,
            store_gone: false,
        }),
        other => other,
    }
}

/// How a task that is gone ended, as the change log of a database store
/// still says (its last change before the removal): the task as last seen,
/// at that status and revision, when that status settles the wait. The JSON
/// file keeps no log: `None` there, as for a task removed unfinished.
fn ended_in_log(store: &Store, last: &Task, until: Until) -> Option<Task> {
    const PAGE: usize = 1000;
    let mut after = 0;
    let mut ended = None;
    loop {
        let log = match store.backend() {
            #[cfg(feature = "sqlite")]
            crate::AnyBackend::Sqlite(db) => {
                db.changes_after(after, Some(&last.task_id), PAGE).ok()??.1
            }
            #[cfg(feature = "postgres")]
            crate::AnyBackend::Postgres(db) => {
                db.changes_after(after, Some(&last.task_id), PAGE).ok()??.1
            }
            _ => return None,
        };
        for change in &log.changes {
            if let Some(status) = change.after {
                ended = Some((status, change.revision));
            }
        }
        match log.changes.last() {
            Some(c) if log.changes.len() == PAGE => after = c.seq,
            _ => break,
        }
    }
    let (status, revision) = ended?;
    let mut task = last.clone();
    task.status = status;
    task.revision = revision;
    // What the log does not keep is not made up: no result, no error.
    task.result = None;
    task.error = None;
    task.extra.insert(
        REMOVED.to_string(),
        serde_json::Value::String(
            "the task was removed right after it ended; the change log says how it \
             ended, and its result was not kept"
                .into(),
        ),
    );
    until.done(&task).then_some(task)
}

fn wait_on_feed(
    store: &Store,
    id: &str,
    until: Until,
    timeout: Option<Duration>,
    note: &mut (dyn FnMut(WaitNote) + Send),
) -> Result<Task, WaitError> {
    // Resolve the prefix once, so that a later task with the same
    // prefix cannot make the wait ambiguous.
    let task = store.get(id)?;
    if until.done(&task) {
        return Ok(task);
    }
    let runtime = super::feed_runtime(store)?;
    let full = task.task_id.clone();
    runtime.block_on(async {
        let feed = super::feed(
            store,
            Some(full.clone()),
            FeedOptions {
                task: Some(full.clone()),
                ..FeedOptions::default()
            },
        );
        let mut read = || -> Pin<Box<dyn Future<Output = _> + Send + '_>> {
            Box::pin(std::future::ready(store.get(&full)))
        };
        let exists = || store.backend().exists().unwrap_or(true);
        follow(
            feed,
            task,
            &|t| until.done(t),
            &mut read,
            &exists,
            timeout,
            note,
        )
        .await
    })
}

/// Follow the task `last` on `feed` until `done` says so (see
/// [`Store::wait`]); `read` reads it again.
pub(crate) async fn follow(
    mut feed: ChangeFeed,
    mut last: Task,
    done: &(dyn Fn(&Task) -> bool + Sync),
    read: &mut Read<'_>,
    store_exists: &(dyn Fn() -> bool + Sync),
    timeout: Option<Duration>,
    note: &mut (dyn FnMut(WaitNote) + Send),
) -> Result<Task, WaitError> {
    let id = last.task_id.clone();
    note(WaitNote::Waiting(Box::new(last.clone())));
    let watch = async {
        let mut said_unreachable = false;
        while let Some(event) = feed.next().await {
            // A database restarting under a deploy is waited out (the
            // timeout still bounds it), said once per outage.
            let mut still_waiting = |message: &str| {
                if !said_unreachable {
                    note(WaitNote::StillWaiting(message.to_string()));
                }
                said_unreachable = true;
            };
            match event {
                FeedEvent::Unavailable(Unavailable::Missing) => {
                    return Err(WaitError::Vanished {
                        last: Box::new(last),
                        store_gone: true,
                    });
                }
                // The feed resets when the server is back, and the task is
                // read again then.
                FeedEvent::Unavailable(Unavailable::Unreachable { message }) => {
                    still_waiting(&message);
                    continue;
                }
                FeedEvent::Changes(changes) => {
                    let Some(change) = changes.last() else {
                        continue;
                    };
                    if change.to.is_none() {
                        return Err(WaitError::Vanished {
                            last: Box::new(last),
                            store_gone: false,
                        });
                    }
                    if change.revision == last.revision && change.to == Some(last.status) {
                        continue;
                    }
                }
                // Read the task: after a reset anything may have changed.
                // Writers rename whole files into place, so an unreadable
                // store is not a torn write: read again for the store's own
                // error (file, line, column), and stop unless it was mended.
                FeedEvent::Reset(_) | FeedEvent::Unavailable(Unavailable::Unreadable { .. }) => {}
            }
            // The server may go between the feed's event and this read (the
            // feed has not noticed yet): read again until it is back, rather
            // than miss the change the event announced.
            let got = loop {
                match read().await {
                    Err(e) if e.is_unreachable() => {
                        still_waiting(&e.to_string());
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    got => break got,
                }
            };
            if got.is_ok() {
                said_unreachable = false;
            }
            match got {
                Ok(t) if done(&t) => return Ok(t),
                Ok(t) => last = t,
                Err(StoreError::UnknownTask { .. }) => {
                    return Err(WaitError::Vanished {
                        last: Box::new(last),
                        store_gone: !store_exists(),
                    });
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(WaitError::FeedStopped)
    };
    match timeout {
        Some(after) => tokio::time::timeout(after, watch)
            .await
            .unwrap_or(Err(WaitError::TimedOut { after, id })),
        None => watch.await,
    }
}
