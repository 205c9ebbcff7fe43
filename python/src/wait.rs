//! `Store.wait`: the library's `Store::wait` (the change feed, no polling),
//! run in slices of [`SLICE`] with the GIL released and Python's signal
//! handlers run between them, so that Ctrl-C (`KeyboardInterrupt`) ends a
//! wait promptly.

use std::time::{Duration, Instant};

use pyo3::prelude::*;
use rudder_store::task::Task;
use rudder_store::worker::{Until, WaitError};
use rudder_store::{StoreError, Work as _};

use crate::errors::{raise, store_error};
use crate::task::PyTask;
use crate::worker::SLICE;

/// Wait on `store` (opened at `location`, as messages name it); the
/// caller checked the store may be used in this process.
pub fn wait(
    py: Python<'_>,
    store: &std::sync::Arc<rudder_store::Store>,
    location: &str,
    id: &str,
    timeout: Option<Duration>,
    terminal: bool,
) -> PyResult<Task> {
    let until = if terminal {
        Until::Terminal
    } else {
        Until::Settled
    };
    let deadline = timeout.map(|t| Instant::now() + t);
    // Resolve a prefix once: a later task with the same prefix cannot make
    // the wait ambiguous.
    let get =
        |py: Python<'_>, id: &str| py.detach(|| store.get(id)).map_err(|e| store_error(py, &e));
    let mut last = get(py, id)?;
    if until.done(&last) {
        return Ok(last);
    }
    let full_id = last.task_id.clone();
    let task_attr = |py: Python<'_>, task: &Task| -> PyResult<Vec<(&'static str, Py<PyAny>)>> {
        Ok(vec![(
            "task",
            Py::new(py, PyTask::from(task.clone()))?.into_any(),
        )])
    };
    let vanished = |py: Python<'_>, last: &Task| -> PyResult<PyErr> {
        Ok(raise(
            py,
            "VanishedError",
            format!(
                "task {} vanished from {} while it was {} (revision {}): its outcome is unknown",
                last.task_id, location, last.status, last.revision
            ),
            &task_attr(py, last)?,
        ))
    };
    loop {
        let slice = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()).min(SLICE),
            None => SLICE,
        };
        let s = std::sync::Arc::clone(store);
        let id = full_id.clone();
        match py.detach(move || s.wait(&id, until, Some(slice))) {
            Ok(task) => return Ok(task),
            Err(WaitError::TimedOut { .. }) => {}
            Err(WaitError::Vanished { last, .. }) => return Err(vanished(py, &last)?),
            // Seen unfinished by an earlier slice, gone now.
            Err(WaitError::Store(StoreError::UnknownTask { .. })) => {
                return Err(vanished(py, &last)?);
            }
            Err(WaitError::Store(e)) => return Err(store_error(py, &e)),
            Err(WaitError::FeedStopped) => {
                return Err(raise(
                    py,
                    "RudderError",
                    "the change feed stopped".into(),
                    &[],
                ));
            }
        }
        py.check_signals()?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            if let Ok(now) = get(py, &full_id) {
                last = now;
            }
            return Err(raise(
                py,
                "WaitTimeoutError",
                format!(
                    "timed out after {:.1}s waiting for task {full_id} (it is {})",
                    timeout.unwrap_or_default().as_secs_f64(),
                    last.status
                ),
                &task_attr(py, &last)?,
            ));
        }
    }
}
