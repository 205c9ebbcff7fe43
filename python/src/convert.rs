//! JSON values across the boundary: Python's dicts, lists, ints of any size,
//! floats, strings, bools and `None` to `serde_json::Value` and back,
//! losslessly (the library keeps numbers as their text: serde_json's
//! `arbitrary_precision`).
//!
//! A Python value that JSON cannot express (a set, bytes, a NaN, a dict
//! with a key that is not a string, a container that holds itself) is a
//! `TypeError` or `ValueError` naming the field and the JSON pointer of the
//! culprit, raised before anything is sent to the store.

use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use rudder_store::MAX_VALUE_DEPTH;
use serde_json::{Map, Number, Value};

/// `value` (a Python object given as `field`) as JSON.
pub fn to_json(value: &Bound<'_, PyAny>, field: &str) -> PyResult<Value> {
    let mut walk = Walk {
        field,
        path: Vec::new(),
        open: Vec::new(),
    };
    walk.value(value)
}

/// `value` as JSON, `None` for Python's `None`.
pub fn to_json_opt(value: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<Value>> {
    match value {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => to_json(v, field).map(Some),
    }
}

struct Walk<'f> {
    field: &'f str,
    /// The keys and indexes from the top to the value at hand.
    path: Vec<String>,
    /// The containers being converted, outermost first: one met again
    /// inside itself is a cycle.
    open: Vec<usize>,
}

impl Walk<'_> {
    /// Where the value at hand is, as a JSON pointer (RFC 6901).
    fn pointer(&self) -> String {
        self.path
            .iter()
            .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
            .collect()
    }

    fn at(&self) -> String {
        let pointer = self.pointer();
        if pointer.is_empty() {
            self.field.to_string()
        } else {
            format!("{} at {pointer}", self.field)
        }
    }

    fn value(&mut self, v: &Bound<'_, PyAny>) -> PyResult<Value> {
        if v.is_none() {
            return Ok(Value::Null);
        }
        // `bool` is a subclass of `int`: ask first.
        if let Ok(b) = v.cast::<PyBool>() {
            return Ok(Value::Bool(b.is_true()));
        }
        if v.is_instance_of::<PyInt>() {
            if let Ok(i) = v.extract::<i64>() {
                return Ok(Value::from(i));
            }
            // Any size: through the exact `int`'s decimal text (an `int`
            // subclass such as an `IntEnum` prints otherwise).
            let exact = v.py().get_type::<PyInt>().call1((v,))?;
            let text = exact.str()?.to_string();
            return serde_json::from_str::<Number>(&text)
                .map(Value::Number)
                .map_err(|e| PyValueError::new_err(format!("{}: {e}", self.at())));
        }
        if let Ok(f) = v.cast::<PyFloat>() {
            let f = f.value();
            return Number::from_f64(f).map(Value::Number).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "{}: {f} is not a JSON value (JSON has no NaN or infinity); nothing was written",
                    self.at()
                ))
            });
        }
        if let Ok(s) = v.cast::<PyString>() {
            return match s.to_str() {
                Ok(s) => Ok(Value::String(s.to_string())),
                Err(_) => Err(PyValueError::new_err(format!(
                    "{}: the string is not valid Unicode (it holds a lone surrogate); nothing was written",
                    self.at()
                ))),
            };
        }
        let is_dict = v.is_instance_of::<PyDict>();
        if is_dict || v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
            let id = v.as_ptr() as usize;
            if self.open.contains(&id) {
                return Err(PyValueError::new_err(format!(
                    "{}: the value contains itself (a cycle), which JSON cannot express; nothing was written",
                    self.at()
                )));
            }
            if self.open.len() >= MAX_VALUE_DEPTH {
                return Err(crate::exceptions::too_deep(v.py(), self.field));
            }
            self.open.push(id);
            let out = if is_dict {
                self.dict(v.cast::<PyDict>()?)
            } else {
                self.array(v)
            };
            self.open.pop();
            return out;
        }
        let kind = v.get_type().name()?;
        Err(PyTypeError::new_err(format!(
            "{}: a value of type {kind} is not JSON (use dict, list, str, int, float, bool or None); nothing was written",
            self.at()
        )))
    }

    fn dict(&mut self, d: &Bound<'_, PyDict>) -> PyResult<Value> {
        let mut map = Map::new();
        for (k, item) in d.iter() {
            let key = match k.cast::<PyString>() {
                Ok(k) => k.to_str()?.to_string(),
                Err(_) => {
                    let kind = k.get_type().name()?;
                    return Err(PyTypeError::new_err(format!(
                        "{}: a key of type {kind} ({}) is not JSON (object keys are strings); nothing was written",
                        self.at(),
                        k.repr()?
                    )));
                }
            };
            self.path.push(key.clone());
            let value = self.value(&item)?;
            self.path.pop();
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }

    fn array(&mut self, seq: &Bound<'_, PyAny>) -> PyResult<Value> {
        let mut out = Vec::new();
        for (i, item) in seq.try_iter()?.enumerate() {
            self.path.push(i.to_string());
            let value = self.value(&item?)?;
            self.path.pop();
            out.push(value);
        }
        Ok(Value::Array(out))
    }
}

/// `value` as a Python object: objects as dicts (in their order), arrays
/// as lists, integers as `int` of any size, other numbers as `float`.
pub fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => number(py, n)?,
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// `value` as a Python object, `None` for none.
pub fn opt_to_py<'py>(py: Python<'py>, value: Option<&Value>) -> PyResult<Bound<'py, PyAny>> {
    match value {
        Some(v) => to_py(py, v),
        None => Ok(py.None().into_bound(py)),
    }
}

fn number<'py>(py: Python<'py>, n: &Number) -> PyResult<Bound<'py, PyAny>> {
    if let Some(i) = n.as_i64() {
        return Ok(i.into_pyobject(py)?.into_any());
    }
    if let Some(u) = n.as_u64() {
        return Ok(u.into_pyobject(py)?.into_any());
    }
    let text = n.as_str();
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        // An integer beyond 64 bits: Python's `int` parses any size.
        return py.get_type::<PyInt>().call1((text,));
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    Ok(PyFloat::new(py, f).into_any())
}

/// A duration given as seconds (`int` or `float`) or a `datetime.timedelta`.
pub fn duration(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Duration> {
    let seconds: f64 = if let Ok(d) = value.extract::<chrono::TimeDelta>() {
        if d < chrono::TimeDelta::zero() {
            return Err(PyValueError::new_err(format!(
                "{what} must not be negative"
            )));
        }
        return d
            .to_std()
            .map_err(|e| PyValueError::new_err(format!("{what}: {e}")));
    } else if value.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} is a number of seconds or a datetime.timedelta, not a bool"
        )));
    } else if let Ok(f) = value.extract::<f64>() {
        f
    } else {
        let kind = value.get_type().name()?;
        return Err(PyTypeError::new_err(format!(
            "{what} is a number of seconds or a datetime.timedelta, not {kind}"
        )));
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| {
        PyValueError::new_err(format!(
            "{what} must be a finite, non-negative number of seconds, not {seconds}"
        ))
    })
}

/// A duration in whole milliseconds (`ttl`, `poll_interval`).
pub fn millis(value: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<u64>> {
    match value {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => {
            let d = duration(v, what)?;
            Ok(Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)))
        }
    }
}
