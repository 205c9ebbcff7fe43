//! The worker API for Python, bound to the library's (`rudder_store::worker`):
//! `Store.worker(...)` → [`PyWorker`], whose `next()` waits on the change
//! feed for a claimed [`PyJob`]; the job renews its lease in a background
//! thread of the library's, reports progress, asks a person ([`PyAnswer`])
//! and ends the task.
//!
//! Every blocking call releases the GIL and runs in slices of [`SLICE`],
//! with Python's signal handlers run between them, so that Ctrl-C
//! (`KeyboardInterrupt`) ends a `next()` or a `wait()` promptly; a job
//! interrupted while it waits for an answer gives its lease back at once.
//! The library objects sit behind mutexes that are only ever taken with the
//! GIL released, so that two Python threads using one job cannot deadlock.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use rudder_store::task::Task;
use rudder_store::worker::{Job, StartError, WorkError, Worker};

use crate::convert::{to_json, to_json_opt, to_py};
use crate::errors::{raise, usage, work_error};
use crate::task::PyTask;

/// How long a blocking call keeps the GIL released before Python's signal
/// handlers run again: how promptly Ctrl-C is seen.
pub const SLICE: Duration = Duration::from_millis(250);

/// Why a worker or job cannot be used from here.
enum Unusable {
    Closed,
    Work(WorkError),
}

fn closed(py: Python<'_>, what: &str) -> PyErr {
    raise(py, "StoreClosedError", format!("the {what} is closed"), &[])
}

fn forked(py: Python<'_>, what: &str, pid: u32) -> PyErr {
    raise(
        py,
        "ForkedStoreError",
        format!(
            "this {what} belongs to process {pid}, the parent of this forked process: open the store and start a worker in the child"
        ),
        &[],
    )
}

pub fn start_error(py: Python<'_>, e: StartError) -> PyErr {
    match e {
        StartError::Config(e) => usage(py, e.to_string()),
        StartError::Url(e) => usage(py, e.to_string()),
        StartError::Runtime(e) => pyo3::exceptions::PyOSError::new_err(e.to_string()),
    }
}

/// A worker: a name, a lease holder, a lease and the kinds it takes.
#[pyclass(module = "rudder", name = "Worker", frozen)]
pub struct PyWorker {
    inner: Arc<Mutex<Option<Worker>>>,
    name: String,
    holder: String,
    lease: Duration,
    pid: u32,
}

impl PyWorker {
    pub fn new(worker: Worker) -> PyWorker {
        PyWorker {
            name: worker.name().to_string(),
            holder: worker.holder().to_string(),
            lease: worker.lease(),
            inner: Arc::new(Mutex::new(Some(worker))),
            pid: std::process::id(),
        }
    }

    fn next_job(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<Option<PyJob>> {
        if std::process::id() != self.pid {
            return Err(forked(py, "worker", self.pid));
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let slice = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(SLICE),
                None => SLICE,
            };
            let inner = Arc::clone(&self.inner);
            let got = py.detach(move || {
                let mut guard = inner.lock().unwrap_or_else(|e| e.into_inner());
                match guard.as_mut() {
                    None => Err(Unusable::Closed),
                    Some(w) => w.next(slice).map_err(Unusable::Work),
                }
            });
            match got {
                Ok(Some(job)) => return Ok(Some(PyJob::new(job))),
                Ok(None) => {}
                Err(Unusable::Closed) => return Err(closed(py, "worker")),
                Err(Unusable::Work(e)) => return Err(work_error(py, &e)),
            }
            py.check_signals()?;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
        }
    }
}

#[pymethods]
impl PyWorker {
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
    /// The lease holder its claims record (`claimed_by`).
    #[getter]
    fn holder(&self) -> &str {
        &self.holder
    }
    /// The lease its jobs hold, in seconds.
    #[getter]
    fn lease(&self) -> f64 {
        self.lease.as_secs_f64()
    }

    /// Wait until this worker holds a claimed job, or `timeout` (seconds or
    /// a timedelta; `None`: as long as it takes) passes: `None` then. It
    /// wakes on the store's change feed, not by polling.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<PyJob>> {
        let timeout = match timeout {
            Some(t) if !t.is_none() => Some(crate::convert::duration(t, "timeout")?),
            _ => None,
        };
        self.next_job(py, timeout)
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The next job, waiting as long as it takes; the iteration ends when
    /// the worker is closed.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyJob>> {
        match self.next_job(py, None) {
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyValueError>(py) && self.closed() => {
                Ok(None)
            }
            other => other,
        }
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.lock().is_ok_and(|g| g.is_none())
    }

    /// Stop the worker (its change feed); jobs it handed out go on.
    fn close(&self, py: Python<'_>) {
        let inner = Arc::clone(&self.inner);
        let taken = py.detach(move || inner.lock().unwrap_or_else(|e| e.into_inner()).take());
        drop(taken);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!("Worker(name='{}', holder='{}')", self.name, self.holder)
    }
}

/// A claimed task, its lease renewed in the background while the job is
/// alive. Use it as a context manager: leaving the block gives the lease
/// back unless the job completed or failed the task, and a `JobStopped`
/// raised inside (the task was cancelled, taken over or finished by someone
/// else) is obeyed: the block ends and the exception is swallowed.
#[pyclass(module = "rudder", name = "Job", frozen)]
pub struct PyJob {
    inner: Arc<Mutex<Option<Job>>>,
    /// The task as of the job's last write (kept after the job is over).
    task: Mutex<Task>,
    holder: String,
    pid: u32,
}

impl PyJob {
    fn new(job: Job) -> PyJob {
        PyJob {
            task: Mutex::new(job.task().clone()),
            holder: job.holder().to_string(),
            inner: Arc::new(Mutex::new(Some(job))),
            pid: std::process::id(),
        }
    }

    /// Run `f` on the job with the GIL released; the job's task is kept.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Job) -> Result<T, WorkError> + Send,
    ) -> PyResult<T> {
        if std::process::id() != self.pid {
            return Err(forked(py, "job", self.pid));
        }
        let inner = Arc::clone(&self.inner);
        let got = py.detach(move || {
            let mut guard = inner.lock().unwrap_or_else(|e| e.into_inner());
            match guard.as_mut() {
                None => Err(Unusable::Closed),
                Some(job) => f(job)
                    .map(|v| (v, job.task().clone()))
                    .map_err(Unusable::Work),
            }
        });
        match got {
            Ok((value, task)) => {
                *self.task.lock().unwrap_or_else(|e| e.into_inner()) = task;
                Ok(value)
            }
            Err(Unusable::Closed) => Err(closed(py, "job")),
            Err(Unusable::Work(e)) => Err(work_error(py, &e)),
        }
    }

    /// End the job: give the lease back unless the task was finished.
    fn end(&self, py: Python<'_>) {
        let inner = Arc::clone(&self.inner);
        py.detach(move || {
            let taken = inner.lock().unwrap_or_else(|e| e.into_inner()).take();
            drop(taken);
        });
    }

    fn current(&self) -> PyTask {
        PyTask::from(self.task.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

#[pymethods]
impl PyJob {
    /// The task as of this job's last write (or its claim).
    #[getter]
    fn task(&self) -> PyTask {
        self.current()
    }
    #[getter]
    fn task_id(&self) -> String {
        self.task
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .task_id
            .clone()
    }
    /// The lease holder this job writes as.
    #[getter]
    fn holder(&self) -> &str {
        &self.holder
    }
    /// Whether the job is over (finished, given back or closed).
    #[getter]
    fn closed(&self) -> bool {
        self.inner.lock().is_ok_and(|g| g.is_none())
    }

    /// Raise `JobStopped` if the store refused a write or a renewal (the
    /// task was cancelled meanwhile): for a job that computes for long
    /// without writing.
    fn check(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |job| job.check())
    }

    /// Say how far the job is (`current` of `total` steps), with an
    /// optional status message, in one write.
    #[pyo3(signature = (current, total, message=None))]
    fn progress(
        &self,
        py: Python<'_>,
        current: u64,
        total: u64,
        message: Option<String>,
    ) -> PyResult<()> {
        self.with(py, move |job| match message {
            Some(m) => job.report(m, current, total),
            None => job.progress(current, total),
        })
    }

    /// Set the task's status message (what the TUI shows).
    fn message(&self, py: Python<'_>, message: String) -> PyResult<()> {
        self.with(py, move |job| job.message(message))
    }

    /// Ask a person: the task waits for input that fits `schema` (a JSON
    /// Schema), `message` being the question. The job keeps its lease;
    /// `wait()` on the answer returns the input, and this worker continues.
    fn ask(
        slf: &Bound<'_, Self>,
        message: String,
        schema: &Bound<'_, PyAny>,
    ) -> PyResult<PyAnswer> {
        let schema = to_json(schema, "input_schema")?;
        slf.get()
            .with(slf.py(), move |job| job.ask(message, schema).map(|_| ()))?;
        Ok(PyAnswer {
            job: slf.clone().unbind(),
        })
    }

    /// Ask a person and give the task back: whichever worker is free
    /// claims it once it has the answer. The job is over.
    fn hand_over(
        &self,
        py: Python<'_>,
        message: String,
        schema: &Bound<'_, PyAny>,
    ) -> PyResult<PyTask> {
        let schema = to_json(schema, "input_schema")?;
        let task = self.with(py, move |job| job.hand_over(message, schema))?;
        self.end(py);
        Ok(PyTask::from(task))
    }

    /// Complete the task with `result` (any JSON value). The job is over;
    /// a retry after a store error is safe.
    #[pyo3(signature = (result=None))]
    fn complete(&self, py: Python<'_>, result: Option<&Bound<'_, PyAny>>) -> PyResult<PyTask> {
        let result = to_json_opt(result, "result")?.unwrap_or(serde_json::Value::Null);
        let task = self.with(py, move |job| job.complete(result))?;
        self.end(py);
        Ok(PyTask::from(task))
    }

    /// Fail the task with the error `{"message": error}`. The job is over.
    fn fail(&self, py: Python<'_>, error: String) -> PyResult<PyTask> {
        let task = self.with(py, move |job| job.fail(&error))?;
        self.end(py);
        Ok(PyTask::from(task))
    }

    /// Give the lease back now: another worker may claim the task at once.
    fn release(&self, py: Python<'_>) -> PyResult<PyTask> {
        let task = self.with(py, |job| job.release())?;
        self.end(py);
        Ok(PyTask::from(task))
    }

    /// Give the lease back (unless the task was finished) and end the job.
    fn close(&self, py: Python<'_>) {
        self.end(py);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.end(py);
        let Some(exc_type) = exc_type.filter(|t| !t.is_none()) else {
            return Ok(false);
        };
        let stopped = py.import("rudder.errors")?.getattr("JobStopped")?;
        exc_type
            .cast::<pyo3::types::PyType>()
            .map_or(Ok(false), |t| t.is_subclass(&stopped))
    }

    fn __repr__(&self) -> String {
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner());
        format!(
            "Job(task_id='{}', status='{}', holder='{}')",
            task.task_id, task.status, self.holder
        )
    }
}

/// The answer a `Job.ask` waits for.
#[pyclass(module = "rudder", name = "Answer", frozen)]
pub struct PyAnswer {
    job: Py<PyJob>,
}

#[pymethods]
impl PyAnswer {
    /// Wait until a person answered (the input given) or `timeout` (seconds
    /// or a timedelta; `None`: as long as it takes) passed (`None`: call
    /// `wait` again). The lease is renewed meanwhile; a task cancelled
    /// meanwhile raises `JobStopped`. Ctrl-C raises `KeyboardInterrupt`
    /// promptly and gives the job's lease back.
    #[pyo3(signature = (timeout=None))]
    fn wait<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timeout = match timeout {
            Some(t) if !t.is_none() => Some(crate::convert::duration(t, "timeout")?),
            _ => None,
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        let job = self.job.get();
        loop {
            let slice = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(SLICE),
                None => SLICE,
            };
            if let Some(value) = job.with(py, move |job| job.answer().wait(Some(slice)))? {
                return to_py(py, &value);
            }
            if let Err(e) = py.check_signals() {
                if e.is_instance_of::<PyKeyboardInterrupt>(py) {
                    job.end(py);
                }
                return Err(e);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(py.None().into_bound(py));
            }
        }
    }
}
