//! Raising the package's exception classes (`rudder/errors.py`), below
//! everything else: [`crate::errors`] maps the library's errors onto them.

use pyo3::prelude::*;
use pyo3::types::PyType;
use rudder_store::MAX_VALUE_DEPTH;
use rudder_store::StoreError;

/// The exception class `name` of `rudder.errors`.
pub(crate) fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    Ok(py
        .import("rudder.errors")?
        .getattr(name)?
        .cast_into::<PyType>()?)
}

/// An exception of class `name` with `message` and the attributes `attrs`
/// (on top of `kind` and `exit_code`, which the class itself declares).
pub fn raise(py: Python<'_>, name: &str, message: String, attrs: &[(&str, Py<PyAny>)]) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let exc = class(py, name)?.call1((message.clone(),))?;
        for (key, value) in attrs {
            exc.setattr(*key, value)?;
        }
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|e| e)
}

/// A value nested deeper than the store holds, found while converting it.
pub fn too_deep(py: Python<'_>, field: &str) -> PyErr {
    // As `errors::store_error` raises `StoreError::TooDeep`, without the
    // task it never carries.
    let message = StoreError::TooDeep {
        field: field.to_string(),
        limit: MAX_VALUE_DEPTH,
    }
    .to_string();
    let attrs = || -> PyResult<Vec<(&'static str, Py<PyAny>)>> {
        Ok(vec![
            ("field", field.into_pyobject(py)?.into_any().unbind()),
            (
                "limit",
                MAX_VALUE_DEPTH.into_pyobject(py)?.into_any().unbind(),
            ),
        ])
    };
    match attrs() {
        Ok(attrs) => raise(py, "TooDeepError", message, &attrs),
        Err(e) => e,
    }
}

/// A usage error (bad URL, bad argument): `UsageError`, a `ValueError`.
pub fn usage(py: Python<'_>, message: String) -> PyErr {
    raise(py, "UsageError", message, &[])
}
