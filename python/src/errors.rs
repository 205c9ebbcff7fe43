//! The library's errors as Python exceptions: one class per error kind of
//! the CLI (docs/cli.md "Exit codes"), defined in `rudder/errors.py` (where a
//! class can also be a `KeyError` or a `ValueError`) and raised from here
//! with what each kind carries: the task's current snapshot for refusals,
//! every violation with its JSON pointer for invalid input, the store for
//! errors about the store itself.

use pyo3::prelude::*;
use pyo3::types::PyList;
use rudder_store::StoreError;

use crate::exceptions::class;
pub use crate::exceptions::{raise, usage};
use crate::task::PyTask;

/// The class and attributes of a store error.
pub fn store_error(py: Python<'_>, e: &StoreError) -> PyErr {
    let message = e.to_string();
    let build = || -> PyResult<PyErr> {
        let mut attrs: Vec<(&str, Py<PyAny>)> = Vec::new();
        if let Some(task) = e.task() {
            let task = Py::new(py, PyTask::from(task.clone()))?;
            attrs.push(("task", task.into_any()));
        }
        if let Some(location) = e.location() {
            attrs.push((
                "store",
                location.as_str().into_pyobject(py)?.into_any().unbind(),
            ));
        }
        let name = match e {
            StoreError::UnknownTask { id } => {
                attrs.push(("task_id", id.into_pyobject(py)?.into_any().unbind()));
                "UnknownTaskError"
            }
            StoreError::AmbiguousId {
                prefix, candidates, ..
            } => {
                attrs.push(("task_id", prefix.into_pyobject(py)?.into_any().unbind()));
                let list = PyList::new(py, candidates)?;
                attrs.push(("candidates", list.into_any().unbind()));
                "AmbiguousIdError"
            }
            StoreError::Refused { op, .. } => {
                attrs.push(("op", op.to_string().into_pyobject(py)?.into_any().unbind()));
                "RefusedError"
            }
            StoreError::IdempotencyConflict { key, field, .. } => {
                attrs.push(("key", key.into_pyobject(py)?.into_any().unbind()));
                attrs.push(("field", field.into_pyobject(py)?.into_any().unbind()));
                "IdempotencyConflictError"
            }
            StoreError::StaleRevision { op, expected, .. } => {
                attrs.push(("op", op.to_string().into_pyobject(py)?.into_any().unbind()));
                attrs.push((
                    "expected_revision",
                    expected.into_pyobject(py)?.into_any().unbind(),
                ));
                "StaleRevisionError"
            }
            StoreError::LeaseLost { op, .. } => {
                attrs.push(("op", op.to_string().into_pyobject(py)?.into_any().unbind()));
                "LeaseLostError"
            }
            StoreError::RevisionExhausted { op, .. } => {
                attrs.push(("op", op.to_string().into_pyobject(py)?.into_any().unbind()));
                "RevisionExhaustedError"
            }
            StoreError::CopyRefused { .. } => "CopyRefusedError",
            StoreError::TooDeep { field, limit } => {
                attrs.push(("field", field.into_pyobject(py)?.into_any().unbind()));
                attrs.push(("limit", limit.into_pyobject(py)?.into_any().unbind()));
                "TooDeepError"
            }
            StoreError::ReservedKey { field, pointer } => {
                attrs.push(("field", field.into_pyobject(py)?.into_any().unbind()));
                attrs.push(("pointer", pointer.into_pyobject(py)?.into_any().unbind()));
                "ReservedKeyError"
            }
            StoreError::InvalidInput { id, violations } => {
                attrs.push(("task_id", id.into_pyobject(py)?.into_any().unbind()));
                let make = class(py, "Violation")?;
                let list = PyList::empty(py);
                for v in violations {
                    list.append(make.call1((&v.pointer, &v.message))?)?;
                }
                attrs.push(("violations", list.into_any().unbind()));
                "InvalidInputError"
            }
            StoreError::InvalidSchema(_) => "InvalidSchemaError",
            StoreError::InvalidKind { kind, .. } => {
                attrs.push(("field", "kind".into_pyobject(py)?.into_any().unbind()));
                attrs.push(("value", kind.into_pyobject(py)?.into_any().unbind()));
                "InvalidKindError"
            }
            StoreError::Corrupt { line, column, .. } => {
                attrs.push(("line", line.into_pyobject(py)?.into_any().unbind()));
                attrs.push(("column", column.into_pyobject(py)?.into_any().unbind()));
                "CorruptStoreError"
            }
            StoreError::NotAStore { .. } => "NotAStoreError",
            StoreError::Unreachable { .. } => "StoreUnreachableError",
            StoreError::Database { .. } => "DatabaseError",
            StoreError::TooLarge { size, limit, .. } => {
                attrs.push(("size", size.into_pyobject(py)?.into_any().unbind()));
                attrs.push(("limit", limit.into_pyobject(py)?.into_any().unbind()));
                "TooLargeError"
            }
            StoreError::Io { source, .. } => {
                if let Some(code) = source.raw_os_error() {
                    attrs.push(("errno", code.into_pyobject(py)?.into_any().unbind()));
                }
                "StoreIOError"
            }
            StoreError::LockTimeout { .. } => "LockTimeoutError",
        };
        Ok(raise(py, name, message.clone(), &attrs))
    };
    build().unwrap_or_else(|e| e)
}

/// A worker's error: a [`Stop`](rudder_store::worker::Stop) is `JobStopped` (a
/// `RefusedError` with `reason` and the task's current snapshot), anything
/// else the store error's own class.
pub fn work_error(py: Python<'_>, e: &rudder_store::worker::WorkError) -> PyErr {
    use rudder_store::worker::{Stop, WorkError};
    match e {
        WorkError::Stop(stop) => {
            let reason = match stop {
                Stop::Cancelled(_) => "cancelled",
                Stop::Finished(_) => "finished",
                Stop::LeaseLost(_) => "lease_lost",
                Stop::Unknown(_) => "unknown",
                Stop::Refused(_) => "refused",
            };
            let build = || -> PyResult<PyErr> {
                let mut attrs: Vec<(&str, Py<PyAny>)> =
                    vec![("reason", reason.into_pyobject(py)?.into_any().unbind())];
                if let Some(task) = stop.task() {
                    let task = Py::new(py, PyTask::from(task.clone()))?;
                    attrs.push(("task", task.into_any()));
                }
                Ok(raise(py, "JobStopped", stop.to_string(), &attrs))
            };
            build().unwrap_or_else(|e| e)
        }
        WorkError::Store(e) | WorkError::Rejected(e) => store_error(py, e),
    }
}
