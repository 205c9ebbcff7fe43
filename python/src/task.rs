//! The typed objects the store answers with: [`PyTask`] (every field of a
//! task), [`PyOutcome`] (a mutation's change and task), and the reports of
//! `reclaim` and `prune`.

use chrono::{DateTime, Utc};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rudder_store::task::{Change, Task};
use rudder_store::{PruneReport, Pruned, ReclaimReport, Reclaimed, Skipped};

use crate::convert::{opt_to_py, to_py};

/// `s` as Python writes a string literal (for `__repr__`).
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// An optional string as Python writes it.
fn quoted_opt(s: Option<&str>) -> String {
    s.map_or_else(|| "None".to_string(), quoted)
}

/// One task, as the store holds it now (a snapshot: it does not change
/// when the store does; read the task again, or use what a mutation
/// returns).
#[pyclass(module = "rudder", name = "Task", frozen)]
pub struct PyTask {
    pub inner: Task,
}

impl From<Task> for PyTask {
    fn from(inner: Task) -> Self {
        PyTask { inner }
    }
}

#[pymethods]
impl PyTask {
    #[getter]
    fn task_id(&self) -> &str {
        &self.inner.task_id
    }
    #[getter]
    fn status(&self) -> &'static str {
        self.inner.status.as_str()
    }
    /// The task's kind (`diagnose`, `backup`), which workers claim by.
    #[getter]
    fn kind(&self) -> Option<&str> {
        self.inner.kind.as_deref()
    }
    #[getter]
    fn input_schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        opt_to_py(py, self.inner.input_schema.as_ref())
    }
    #[getter]
    fn input_value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        opt_to_py(py, self.inner.input_value.as_ref())
    }
    #[getter]
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        opt_to_py(py, self.inner.result.as_ref())
    }
    #[getter]
    fn idempotency_key(&self) -> Option<&str> {
        self.inner.idempotency_key.as_deref()
    }
    #[getter]
    fn created_at(&self) -> Option<DateTime<Utc>> {
        self.inner.created_at
    }
    #[getter]
    fn updated_at(&self) -> Option<DateTime<Utc>> {
        self.inner.updated_at
    }
    #[getter]
    fn title(&self) -> Option<&str> {
        self.inner.title.as_deref()
    }
    #[getter]
    fn request<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        opt_to_py(py, self.inner.request.as_ref())
    }
    #[getter]
    fn status_message(&self) -> Option<&str> {
        self.inner.status_message.as_deref()
    }
    /// `(current, total)` steps done, when the worker said.
    #[getter]
    fn progress(&self) -> Option<(u64, u64)> {
        self.inner.progress.map(|p| (p.current, p.total))
    }
    #[getter]
    fn claimed_by(&self) -> Option<&str> {
        self.inner.claimed_by.as_deref()
    }
    #[getter]
    fn lease_expires_at(&self) -> Option<DateTime<Utc>> {
        self.inner.lease_expires_at
    }
    #[getter]
    fn error<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        opt_to_py(py, self.inner.error.as_ref())
    }
    /// The error's message of a failed task.
    #[getter]
    fn error_message(&self) -> Option<&str> {
        self.inner.error_message()
    }
    #[getter]
    fn ttl_ms(&self) -> Option<u64> {
        self.inner.ttl_ms
    }
    #[getter]
    fn poll_interval_ms(&self) -> Option<u64> {
        self.inner.poll_interval_ms
    }
    #[getter]
    fn revision(&self) -> u64 {
        self.inner.revision
    }
    /// Every transition, oldest first: `HistoryEntry(status, at, note,
    /// actor, face, reason, fields)`.
    #[getter]
    fn history<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for h in &self.inner.history {
            let entry = PyHistoryEntry {
                status: h.status.as_str(),
                at: h.at,
                note: h.note.clone(),
                actor: h.actor.clone(),
                face: h.face.as_ref().map(|f| f.as_str().to_string()),
                reason: h.reason.clone(),
                fields: h.fields.clone(),
            };
            list.append(Py::new(py, entry)?)?;
        }
        Ok(list)
    }
    /// Fields rudder does not know, kept as they were written.
    #[getter]
    fn extra<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (k, v) in &self.inner.extra {
            dict.set_item(k, to_py(py, v)?)?;
        }
        Ok(dict)
    }
    /// Whether the task is finished (completed, failed or cancelled).
    #[getter]
    fn is_terminal(&self) -> bool {
        self.inner.status.is_terminal()
    }
    /// The task as a JSON object, as `rudder get --reveal --json` prints
    /// it, but for its earlier answers (`answered`), which are not shown:
    /// they are the worker's to replay (the gateway's), and may hold
    /// secrets in clear.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut value = serde_json::to_value(&self.inner)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        if let Some(fields) = value.as_object_mut() {
            fields.remove("answered");
        }
        to_py(py, &value)
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyTask>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }
    fn __repr__(&self) -> String {
        let t = &self.inner;
        let title = t
            .title
            .as_deref()
            .map(|s| format!(", title={}", quoted(s)))
            .unwrap_or_default();
        format!(
            "Task(task_id={}, status={}, revision={}{title})",
            quoted(&t.task_id),
            quoted(t.status.as_str()),
            t.revision
        )
    }
}

/// One transition of a task's history: when, who (`actor`, through
/// `face`: cli, tui, mcp, python, worker, gateway), why (`reason`) and, for
/// an answer, the names of the fields it gave.
#[pyclass(module = "rudder", name = "HistoryEntry", frozen, get_all)]
pub struct PyHistoryEntry {
    status: &'static str,
    at: DateTime<Utc>,
    note: Option<String>,
    actor: Option<String>,
    face: Option<String>,
    reason: Option<String>,
    fields: Vec<String>,
}

#[pymethods]
impl PyHistoryEntry {
    fn __repr__(&self) -> String {
        format!(
            "HistoryEntry(status={}, at={}, note={}, actor={}, reason={})",
            quoted(self.status),
            quoted(&self.at.to_rfc3339()),
            quoted_opt(self.note.as_deref()),
            quoted_opt(self.actor.as_deref()),
            quoted_opt(self.reason.as_deref())
        )
    }
}

/// What a mutation did: `change` is `"applied"` or `"unchanged"` (a safe
/// repeat: the effect was already recorded, nothing was written), `task`
/// the task as it now is.
#[pyclass(module = "rudder", name = "Outcome", frozen)]
pub struct PyOutcome {
    change: Change,
    task: Py<PyTask>,
}

impl PyOutcome {
    pub fn new(py: Python<'_>, outcome: rudder_store::Outcome) -> PyResult<Self> {
        Ok(PyOutcome {
            change: outcome.change,
            task: Py::new(py, PyTask::from(outcome.task))?,
        })
    }
}

#[pymethods]
impl PyOutcome {
    #[getter]
    fn change(&self) -> &'static str {
        match self.change {
            Change::Applied => "applied",
            Change::Unchanged => "unchanged",
        }
    }
    /// Whether this call wrote the change (`False` for a safe repeat).
    #[getter]
    fn applied(&self) -> bool {
        self.change == Change::Applied
    }
    #[getter]
    fn task(&self, py: Python<'_>) -> Py<PyTask> {
        self.task.clone_ref(py)
    }
    fn __repr__(&self) -> String {
        format!(
            "Outcome(change={}, task={})",
            quoted(self.change()),
            self.task.get().__repr__()
        )
    }
}

/// A task `reclaim` failed (or, in a dry run, would fail), and why.
#[pyclass(module = "rudder", name = "Reclaimed", frozen, get_all)]
pub struct PyReclaimed {
    task_id: String,
    title: Option<String>,
    status_before: &'static str,
    /// Time since its last update, in milliseconds.
    idle_ms: u64,
    last_update: DateTime<Utc>,
    claimed_by: Option<String>,
    revision: u64,
}

/// A task an operation looked at and left alone, and why.
#[pyclass(module = "rudder", name = "Skipped", frozen, get_all)]
pub struct PySkipped {
    task_id: String,
    status: &'static str,
    reason: String,
}

/// What `reclaim` did: the tasks it failed, the ones it left alone with
/// the reason, and how many unfinished tasks were active.
#[pyclass(module = "rudder", name = "ReclaimReport", frozen, get_all)]
pub struct PyReclaimReport {
    dry_run: bool,
    older_than_ms: u64,
    at: DateTime<Utc>,
    reclaimed: Vec<Py<PyReclaimed>>,
    skipped: Vec<Py<PySkipped>>,
    active: usize,
}

/// A finished task `prune` removed.
#[pyclass(module = "rudder", name = "Pruned", frozen, get_all)]
pub struct PyPruned {
    task_id: String,
    title: Option<String>,
    status: &'static str,
    age_ms: u64,
    /// `"ttl"` when the task's own ttl expired, else `"older_than"`.
    rule: &'static str,
}

/// What `prune` removed.
#[pyclass(module = "rudder", name = "PruneReport", frozen, get_all)]
pub struct PyPruneReport {
    older_than_ms: u64,
    at: DateTime<Utc>,
    removed: Vec<Py<PyPruned>>,
    skipped: Vec<Py<PySkipped>>,
}

fn skipped(py: Python<'_>, s: Vec<Skipped>) -> PyResult<Vec<Py<PySkipped>>> {
    s.into_iter()
        .map(|s| {
            Py::new(
                py,
                PySkipped {
                    task_id: s.task_id,
                    status: s.status.as_str(),
                    reason: s.reason,
                },
            )
        })
        .collect()
}

impl PyReclaimReport {
    pub fn new(py: Python<'_>, r: ReclaimReport) -> PyResult<Self> {
        let reclaimed = r
            .reclaimed
            .into_iter()
            .map(|r: Reclaimed| {
                Py::new(
                    py,
                    PyReclaimed {
                        task_id: r.task_id,
                        title: r.title,
                        status_before: r.status_before.as_str(),
                        idle_ms: r.idle_ms,
                        last_update: r.last_update,
                        claimed_by: r.claimed_by,
                        revision: r.revision,
                    },
                )
            })
            .collect::<PyResult<_>>()?;
        Ok(PyReclaimReport {
            dry_run: r.dry_run,
            older_than_ms: r.older_than_ms,
            at: r.at,
            reclaimed,
            skipped: skipped(py, r.skipped)?,
            active: r.active,
        })
    }
}

impl PyPruneReport {
    pub fn new(py: Python<'_>, r: PruneReport) -> PyResult<Self> {
        let removed = r
            .removed
            .into_iter()
            .map(|p: Pruned| {
                Py::new(
                    py,
                    PyPruned {
                        task_id: p.task_id,
                        title: p.title,
                        status: p.status.as_str(),
                        age_ms: p.age_ms,
                        rule: p.rule,
                    },
                )
            })
            .collect::<PyResult<_>>()?;
        Ok(PyPruneReport {
            older_than_ms: r.older_than_ms,
            at: r.at,
            removed,
            skipped: skipped(py, r.skipped)?,
        })
    }
}

#[pymethods]
impl PyReclaimed {
    fn __repr__(&self) -> String {
        format!(
            "Reclaimed(task_id={}, status_before={}, idle_ms={})",
            quoted(&self.task_id),
            quoted(self.status_before),
            self.idle_ms
        )
    }
}

#[pymethods]
impl PySkipped {
    fn __repr__(&self) -> String {
        format!(
            "Skipped(task_id={}, status={}, reason={})",
            quoted(&self.task_id),
            quoted(self.status),
            quoted(&self.reason)
        )
    }
}
