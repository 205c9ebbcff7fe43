//! `Store.wait`: block on the store's change feed (no polling loop) until a
//! task is finished or waits for input, as `rudder wait` does, with the GIL
//! released and Python's signal handlers run between short slices, so that
//! Ctrl-C (`KeyboardInterrupt`) ends a wait promptly.

use std::time::{Duration, Instant};

use pyo3::prelude::*;
use rudder::task::Status;
use rudder::watch::{ChangeFeed, FeedEvent, FeedOptions, Unavailable};
use rudder::{StoreError, Task};

use crate::errors::{raise, store_error};
use crate::store::PyStore;
use crate::task::PyTask;

/// How long the GIL stays released before signals are checked again.
const SLICE: Duration = Duration::from_millis(100);

/// Whether the wait is over with `task`.
fn settled(task: &Task, terminal: bool) -> bool {
    task.status.is_terminal() || !terminal && task.status == Status::InputRequired
}

pub fn wait(
    py: Python<'_>,
    store: &PyStore,
    id: &str,
    timeout: Option<Duration>,
    terminal: bool,
) -> PyResult<Task> {
    let deadline = timeout.map(|t| Instant::now() + t);
    // Resolve a prefix once: a later task with the same prefix cannot make
    // the wait ambiguous.
    let mut last = store.with(py, |s| s.get(id))?;
    if settled(&last, terminal) {
        return Ok(last);
    }
    let full_id = last.task_id.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?;
    let options = FeedOptions {
        task: Some(full_id.clone()),
        ..FeedOptions::default()
    };
    let mut feed = {
        let _entered = runtime.enter();
        ChangeFeed::start(store.url.clone(), options)
    };
    let vanished = |py: Python<'_>, last: &Task| -> PyErr {
        let task = Py::new(py, PyTask::from(last.clone())).map(Py::into_any);
        let attrs: Vec<(&str, Py<PyAny>)> = task.into_iter().map(|t| ("task", t)).collect();
        raise(
            py,
            "VanishedError",
            format!(
                "task {} vanished from {} while it was {} (revision {}): its outcome is unknown",
                last.task_id,
                store.location(),
                last.status,
                last.revision
            ),
            &attrs,
        )
    };
    // A read is owed: the feed announced a change that is not read yet
    // (also while the server is briefly unreachable).
    let mut owed = false;
    loop {
        let slice = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(raise(
                        py,
                        "WaitTimeoutError",
                        format!(
                            "timed out after {:.1}s waiting for task {full_id} (it is {})",
                            timeout.unwrap_or_default().as_secs_f64(),
                            last.status
                        ),
                        &[("task", Py::new(py, PyTask::from(last.clone()))?.into_any())],
                    ));
                }
                left.min(SLICE)
            }
            None => SLICE,
        };
        let event = py
            .detach(|| runtime.block_on(async { tokio::time::timeout(slice, feed.next()).await }));
        py.check_signals()?;
        let read_again = match event {
            Err(_elapsed) => false,
            Ok(None) => {
                return Err(raise(
                    py,
                    "RudderError",
                    "the change feed stopped".into(),
                    &[],
                ));
            }
            Ok(Some(FeedEvent::Unavailable(Unavailable::Missing))) => {
                return Err(vanished(py, &last));
            }
            // A server restarting is waited out (the timeout bounds it); the
            // feed resets when it is back and the task is read again then.
            Ok(Some(FeedEvent::Unavailable(Unavailable::Unreachable { .. }))) => false,
            Ok(Some(FeedEvent::Changes(changes))) => match changes.last() {
                None => false,
                Some(c) if c.to.is_none() => return Err(vanished(py, &last)),
                Some(c) => !(c.revision == last.revision && c.to == Some(last.status)),
            },
            // After a reset anything may have changed; an unreadable store
            // is read for its own error (file, line, column).
            Ok(Some(
                FeedEvent::Reset(_) | FeedEvent::Unavailable(Unavailable::Unreadable { .. }),
            )) => true,
        };
        owed |= read_again;
        if !owed {
            continue;
        }
        let store_now = store.store(py)?;
        match py.detach(|| store_now.get(&full_id)) {
            Ok(t) if settled(&t, terminal) => return Ok(t),
            Ok(t) => {
                last = t;
                owed = false;
            }
            // The server went between the event and the read: read again
            // at the next slice rather than miss what the event announced.
            Err(e) if e.is_unreachable() => {}
            Err(StoreError::UnknownTask { .. }) => return Err(vanished(py, &last)),
            Err(e) => return Err(store_error(py, &e)),
        }
    }
}
