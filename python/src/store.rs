//! `rudder.Store`: every store operation of the CLI, with the GIL released
//! while the store is read or written, so that other Python threads run.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use rudder_store::task::Progress;
use rudder_store::task::{Actor, Author, Face, Status};
use rudder_store::{NewTask, Store, StoreError, Work as _};
use rudder_store::{PageQuery, SortKey};
use serde_json::Value;

use crate::convert::{duration, millis, to_json, to_json_opt};
use crate::errors::{raise, store_error, usage};
use crate::task::{PyOutcome, PyPruneReport, PyReclaimReport, PyTask};

/// The lease a write with `holder=` renews when no `lease=` is given.
pub const DEFAULT_LEASE: Duration = rudder_store::worker::DEFAULT_LEASE;

/// A rudder store: a JSON file, a SQLite database or a PostgreSQL server,
/// named by a store URL or a path (as `--store` takes it).
///
/// Opening checks the URL only; the store is read on first use (a missing
/// store is empty and is created by the first write). Safe to share between
/// threads. `close()` (or leaving a `with` block) ends its use: every later
/// call raises `StoreClosedError`. A forked child must open its own.
#[pyclass(module = "rudder", name = "Store", frozen)]
pub struct PyStore {
    /// The store as messages show it (password redacted).
    location: String,
    /// The process that opened it.
    pid: u32,
    store: RwLock<Option<Arc<Store>>>,
}

impl PyStore {
    /// The open store, or why it cannot be used from here.
    pub(crate) fn store(&self, py: Python<'_>) -> PyResult<Arc<Store>> {
        if std::process::id() != self.pid {
            return Err(raise(
                py,
                "ForkedStoreError",
                format!(
                    "this Store ({}) was opened in process {}, the parent of this forked process: open the store again in the child (rudder.Store(url)); connections and locks do not survive a fork",
                    self.location, self.pid
                ),
                &[],
            ));
        }
        let guard = self.store.read().unwrap_or_else(|e| e.into_inner());
        guard.clone().ok_or_else(|| {
            raise(
                py,
                "StoreClosedError",
                format!("the store {} is closed", self.location),
                &[],
            )
        })
    }

    /// Run `f` on the store with the GIL released.
    pub(crate) fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send,
    ) -> PyResult<T> {
        let store = self.store(py)?;
        py.detach(|| f(&store)).map_err(|e| store_error(py, &e))
    }

    fn outcome(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Store) -> Result<rudder_store::Outcome, StoreError> + Send,
    ) -> PyResult<PyOutcome> {
        let outcome = self.with(py, f)?;
        PyOutcome::new(py, outcome)
    }
}

/// The lease a worker's write renews (`lease=`, else [`DEFAULT_LEASE`]).
fn lease_of(lease: Option<&Bound<'_, PyAny>>) -> PyResult<Duration> {
    match lease {
        Some(l) if !l.is_none() => duration(l, "lease"),
        _ => Ok(DEFAULT_LEASE),
    }
}

/// The lease a worker's write renews: `lease=` when given, else (`None`)
/// the length recorded with the claim.
fn write_lease(lease: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    match lease {
        Some(l) if !l.is_none() => duration(l, "lease").map(Some),
        _ => Ok(None),
    }
}

/// The writer of a mutation: anyone, or the worker `holder` renewing its
/// lease (refused with `LeaseLostError` if it no longer holds it).
fn as_actor(holder: Option<&str>, lease: Option<Duration>) -> Actor<'_> {
    match holder {
        Some(holder) => Actor::Worker { holder, lease },
        None => Actor::Anyone,
    }
}

/// A kind or several (`None`: every kind).
fn kinds(kind: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    match kind.filter(|k| !k.is_none()) {
        None => Ok(Vec::new()),
        Some(k) => match k.cast::<PyString>() {
            Ok(s) => Ok(vec![s.to_str()?.to_string()]),
            Err(_) => k
                .try_iter()?
                .map(|k| k.and_then(|k| k.extract::<String>()))
                .collect(),
        },
    }
}

fn statuses(py: Python<'_>, status: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Status>> {
    let Some(status) = status.filter(|s| !s.is_none()) else {
        return Ok(Vec::new());
    };
    let names: Vec<String> = if let Ok(s) = status.cast::<PyString>() {
        vec![s.to_str()?.to_string()]
    } else {
        status
            .try_iter()?
            .map(|s| s.and_then(|s| s.extract::<String>()))
            .collect::<PyResult<_>>()?
    };
    names
        .iter()
        .map(|n| {
            n.parse::<Status>()
                .map_err(|e| usage(py, format!("status: {e}")))
        })
        .collect()
}

#[pymethods]
impl PyStore {
    /// Open the store `url` names (a path, `file:PATH`, `sqlite:PATH`, a
    /// path ending in `.db`/`.sqlite`/`.sqlite3`, or `postgres://...`).
    /// A URL that names no store rudder can open raises `UsageError` at once.
    /// Every change made through it is recorded as `actor`'s (the trail,
    /// `rudder log`), else `$RUDDER_ACTOR`'s, else `USER@HOST`'s; a name
    /// that is not printable text of at most 128 characters raises
    /// `UsageError`.
    #[new]
    #[pyo3(signature = (url, *, actor=None))]
    fn new(py: Python<'_>, url: PathBuf, actor: Option<String>) -> PyResult<Self> {
        let store = Store::connect(&url).map_err(|e| usage(py, e.to_string()))?;
        let author = match actor.or_else(rudder_store::author::env_actor) {
            Some(name) => {
                Author::new(name, Face::Python).map_err(|e| usage(py, format!("actor: {e}")))?
            }
            None => rudder_store::author::local_author(Face::Python),
        };
        let store = store.by(author);
        Ok(PyStore {
            location: store.location(),
            pid: std::process::id(),
            store: RwLock::new(Some(Arc::new(store))),
        })
    }

    /// The store as messages show it (a password redacted).
    #[getter]
    fn url(&self) -> &str {
        &self.location
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.store
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// End the use of this object; calls still running finish first. Safe to
    /// call again.
    fn close(&self) {
        let taken = self.store.write().unwrap_or_else(|e| e.into_inner()).take();
        drop(taken);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        let closed = if self.closed() { ", closed" } else { "" };
        format!("Store({:?}{closed})", self.location)
    }

    /// Create a task. With `input_schema` it starts `input_required`, else
    /// `working`. With an `idempotency_key` already used, the existing task
    /// is returned unchanged (`change == "unchanged"`), or
    /// `IdempotencyConflictError` if it was created with another
    /// `input_schema` or `request`.
    #[pyo3(signature = (*, title=None, kind=None, idempotency_key=None, input_schema=None, request=None, message=None, ttl=None, poll_interval=None))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        &self,
        py: Python<'_>,
        title: Option<String>,
        kind: Option<String>,
        idempotency_key: Option<String>,
        input_schema: Option<&Bound<'_, PyAny>>,
        request: Option<&Bound<'_, PyAny>>,
        message: Option<String>,
        ttl: Option<&Bound<'_, PyAny>>,
        poll_interval: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyOutcome> {
        let new = NewTask {
            kind,
            input_schema: to_json_opt(input_schema, "input_schema")?,
            idempotency_key,
            title,
            request: to_json_opt(request, "request")?,
            status_message: message,
            ttl_ms: millis(ttl, "ttl")?,
            poll_interval_ms: millis(poll_interval, "poll_interval")?,
            origin: None,
            owned_by: None,
        };
        self.outcome(py, move |s| s.create(new))
    }

    /// One task by its id or a unique prefix of it. Raises
    /// `UnknownTaskError` (a `KeyError`) or `AmbiguousIdError`.
    fn get(&self, py: Python<'_>, task_id: String) -> PyResult<PyTask> {
        self.with(py, move |s| s.get(&task_id)).map(PyTask::from)
    }

    /// Tasks whose status is `status` (a name or several) and whose kind is
    /// `kind` (a name or several), in the order
    /// `sort` names (`"store"`, `"updated"`, `"created"`, `"title"`,
    /// `"id"`), `descending` to walk it backwards; a page of at most `limit`
    /// tasks starting right after the task `after` (a full id); `text`
    /// keeps the tasks whose id, title, idempotency key, message or status
    /// contains it (ASCII letters in any case), as the TUI's `/` filter.
    #[pyo3(signature = (*, status=None, kind=None, sort="store", descending=false, limit=None, after=None, text=None))]
    #[allow(clippy::too_many_arguments)]
    fn list(
        &self,
        py: Python<'_>,
        status: Option<&Bound<'_, PyAny>>,
        kind: Option<&Bound<'_, PyAny>>,
        sort: &str,
        descending: bool,
        limit: Option<usize>,
        after: Option<String>,
        text: Option<String>,
    ) -> PyResult<Vec<PyTask>> {
        let query = PageQuery {
            kinds: kinds(kind)?,
            statuses: statuses(py, status)?,
            sort: sort
                .parse::<SortKey>()
                .map_err(|e| usage(py, format!("sort: {e}")))?,
            limit,
            after,
            descending,
            text,
        };
        let tasks = self.with(py, move |s| s.page(&query))?;
        Ok(tasks.into_iter().map(PyTask::from).collect())
    }

    /// How many tasks have each status: `{"working": n, ...}` (every status
    /// present, zeros included).
    fn counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let counts = self.with(py, |s| s.counts())?;
        let dict = PyDict::new(py);
        for status in Status::ALL {
            dict.set_item(status.as_str(), counts.get(status))?;
        }
        Ok(dict)
    }

    /// Give the input an `input_required` task waits for; it must validate
    /// against the task's `input_schema` (else `InvalidInputError`, a
    /// `ValueError`, with every violation). With `expected_revision`, only if
    /// the task is still at that revision (else `StaleRevisionError`).
    #[pyo3(signature = (task_id, value, *, expected_revision=None))]
    fn provide_input(
        &self,
        py: Python<'_>,
        task_id: String,
        value: &Bound<'_, PyAny>,
        expected_revision: Option<u64>,
    ) -> PyResult<PyOutcome> {
        let value = to_json(value, "input_value")?;
        self.outcome(py, move |s| {
            s.provide_input(&task_id, value, expected_revision)
        })
    }

    /// Ask for input: a working task becomes `input_required` with
    /// `input_schema` and `message` (the question).
    #[pyo3(signature = (task_id, input_schema, *, message=None, holder=None, lease=None))]
    fn request_input(
        &self,
        py: Python<'_>,
        task_id: String,
        input_schema: &Bound<'_, PyAny>,
        message: Option<String>,
        holder: Option<String>,
        lease: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyOutcome> {
        let schema = to_json(input_schema, "input_schema")?;
        let lease = write_lease(lease)?;
        self.outcome(py, move |s| {
            s.request_input(
                &task_id,
                schema,
                message,
                as_actor(holder.as_deref(), lease),
            )
        })
    }

    /// Say the task's worker is alive (bumps `updated_at`), with an optional
    /// `message` and `progress` `(current, total)`.
    #[pyo3(signature = (task_id, *, message=None, progress=None, holder=None, lease=None))]
    fn heartbeat(
        &self,
        py: Python<'_>,
        task_id: String,
        message: Option<String>,
        progress: Option<(u64, u64)>,
        holder: Option<String>,
        lease: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyOutcome> {
        let lease = write_lease(lease)?;
        let progress = progress.map(|(current, total)| Progress { current, total });
        self.outcome(py, move |s| {
            s.heartbeat(
                &task_id,
                message,
                progress,
                as_actor(holder.as_deref(), lease),
            )
        })
    }

    /// Complete the task with `result` (any JSON value; `None` is null).
    #[pyo3(signature = (task_id, result=None, *, holder=None, lease=None))]
    fn complete(
        &self,
        py: Python<'_>,
        task_id: String,
        result: Option<&Bound<'_, PyAny>>,
        holder: Option<String>,
        lease: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyOutcome> {
        let result = to_json_opt(result, "result")?.unwrap_or(Value::Null);
        let lease = write_lease(lease)?;
        self.outcome(py, move |s| {
            s.complete(&task_id, result, as_actor(holder.as_deref(), lease))
        })
    }

    /// Fail the task with the error `{"message": error}`.
    #[pyo3(signature = (task_id, error, *, holder=None, lease=None))]
    fn fail(
        &self,
        py: Python<'_>,
        task_id: String,
        error: String,
        holder: Option<String>,
        lease: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyOutcome> {
        let lease = write_lease(lease)?;
        self.outcome(py, move |s| {
            s.fail(&task_id, &error, as_actor(holder.as_deref(), lease))
        })
    }

    /// Cancel the task (a cancelled task: unchanged; another finished
    /// task: `RefusedError`).
    #[pyo3(signature = (task_id, reason=None))]
    fn cancel(
        &self,
        py: Python<'_>,
        task_id: String,
        reason: Option<String>,
    ) -> PyResult<PyOutcome> {
        self.outcome(py, move |s| s.cancel(&task_id, reason))
    }

    /// Take (or renew) the lease on a working task for `holder`.
    #[pyo3(signature = (task_id, holder, *, lease=None))]
    fn claim(
        &self,
        py: Python<'_>,
        task_id: String,
        holder: String,
        lease: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyOutcome> {
        let lease = lease_of(lease)?;
        self.outcome(py, move |s| s.claim(&task_id, &holder, lease))
    }

    /// Give `holder`'s lease on the task back.
    fn release(&self, py: Python<'_>, task_id: String, holder: String) -> PyResult<PyOutcome> {
        self.outcome(py, move |s| s.release(&task_id, &holder))
    }

    /// Claim the oldest working task (of `kind`, a name or several, when
    /// given) that no live lease holds, if any.
    #[pyo3(signature = (holder, *, lease=None, kind=None))]
    fn claim_next(
        &self,
        py: Python<'_>,
        holder: String,
        lease: Option<&Bound<'_, PyAny>>,
        kind: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<PyTask>> {
        let lease = lease_of(lease)?;
        let kinds = kinds(kind)?;
        let task = self.with(py, move |s| s.claim_next(&holder, lease, &kinds))?;
        Ok(task.map(PyTask::from))
    }

    /// Fail every unfinished task not updated for `older_than` (seconds or
    /// a timedelta) and no live lease holds; with `dry_run`, only report.
    /// `reason` is recorded on each reclaimed task's history (the trail).
    #[pyo3(signature = (older_than, *, dry_run=false, reason=None))]
    fn reclaim(
        &self,
        py: Python<'_>,
        older_than: &Bound<'_, PyAny>,
        dry_run: bool,
        reason: Option<String>,
    ) -> PyResult<PyReclaimReport> {
        let older_than = duration(older_than, "older_than")?;
        let report = self.with(py, move |s| {
            s.reclaim_because(older_than, dry_run, reason.as_deref())
        })?;
        PyReclaimReport::new(py, report)
    }

    /// Remove finished tasks past their retention: their `ttl` when set,
    /// else `older_than`.
    fn prune(&self, py: Python<'_>, older_than: &Bound<'_, PyAny>) -> PyResult<PyPruneReport> {
        let older_than = duration(older_than, "older_than")?;
        let report = self.with(py, move |s| s.prune(older_than))?;
        PyPruneReport::new(py, report)
    }

    /// A worker named `name` on this store, taking tasks of `kinds` (every
    /// kind when none are given), each claimed with a lease of `lease`
    /// (default 30 s) renewed in the background every `renew_every`
    /// (default a third of the lease). `holder` is the lease holder its
    /// claims record (default: the name, `#`, eight random hex digits).
    /// With `key_prefix`, only tasks whose idempotency key starts with it
    /// are taken (the demo's worker takes its `demo:` incidents only).
    #[pyo3(signature = (name, *, lease=None, kinds=None, holder=None, renew_every=None, key_prefix=None))]
    #[allow(clippy::too_many_arguments)]
    fn worker(
        &self,
        py: Python<'_>,
        name: String,
        lease: Option<&Bound<'_, PyAny>>,
        kinds: Option<Vec<String>>,
        holder: Option<String>,
        renew_every: Option<&Bound<'_, PyAny>>,
        key_prefix: Option<String>,
    ) -> PyResult<crate::worker::PyWorker> {
        let store = self.store(py)?;
        let mut builder = store.worker(name).lease(lease_of(lease)?);
        if let Some(kinds) = kinds {
            builder = builder.kinds(kinds);
        }
        if let Some(holder) = holder {
            builder = builder.holder(holder);
        }
        if let Some(every) = renew_every.filter(|e| !e.is_none()) {
            builder = builder.renew_every(duration(every, "renew_every")?);
        }
        if let Some(prefix) = key_prefix {
            builder = builder.filter(move |t: &rudder_store::Summary<'_>| {
                t.idempotency_key.is_some_and(|k| k.starts_with(&prefix))
            });
        }
        let worker = builder
            .start()
            .map_err(|e| crate::worker::start_error(py, e))?;
        Ok(crate::worker::PyWorker::new(worker))
    }

    /// Block until the task is finished or waits for input (with
    /// `terminal=True`: until it is finished), following the store's change
    /// feed; `timeout` (seconds or a timedelta) raises `WaitTimeoutError`
    /// (a `TimeoutError`). Ctrl-C raises `KeyboardInterrupt` promptly.
    #[pyo3(signature = (task_id, timeout=None, *, terminal=false))]
    fn wait(
        &self,
        py: Python<'_>,
        task_id: String,
        timeout: Option<&Bound<'_, PyAny>>,
        terminal: bool,
    ) -> PyResult<PyTask> {
        let timeout = match timeout {
            Some(t) if !t.is_none() => Some(duration(t, "timeout")?),
            _ => None,
        };
        let store = self.store(py)?;
        crate::wait::wait(py, &store, &self.location, &task_id, timeout, terminal).map(PyTask::from)
    }
}
