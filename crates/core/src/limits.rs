//! What a value in the store may be: the rules every writer checks, so that
//! it never renames into place a file that a reader would refuse.
//!
//! Readers parse the store with serde_json, which refuses JSON nested deeper
//! than its recursion limit, and (with its `arbitrary_precision` feature,
//! which keeps numbers exactly) reads an object whose first key is its
//! private number marker as a number. A task's values sit two levels deep in
//! the file (the store object, then the task), so the limit for a value is
//! [`MAX_VALUE_DEPTH`], derived from the very constant the reader's own
//! check uses ([`index::MAX_LEVEL`]), so that writer and reader agree
//! exactly. The file's size limit is [`super::MAX_STORE_BYTES`], checked by
//! the file backend on the encoded bytes.

use serde_json::Value;

use super::StoreError;
use rudder_model::task::Task;

pub use rudder_model::limits::{MAX_VALUE_DEPTH, RESERVED_KEY};

/// What is wrong with a value, found by [`check`].
enum Problem {
    TooDeep,
    /// The reserved key leads the object at this path (segments innermost
    /// first, as they are found on the way out).
    Reserved(Vec<String>),
}

/// Refuse a value that the store could not hold as the task field `field`:
/// nested deeper than [`MAX_VALUE_DEPTH`], or holding an object led by
/// [`RESERVED_KEY`].
pub fn check_value(field: &str, value: &Value) -> Result<(), StoreError> {
    check(value, 0).map_err(|problem| field_error(field, problem))
}

/// The error for `problem`, found in the task field `field`.
fn field_error(field: &str, problem: Problem) -> StoreError {
    match problem {
        Problem::TooDeep => StoreError::TooDeep {
            field: field.to_string(),
            limit: MAX_VALUE_DEPTH,
        },
        Problem::Reserved(mut path) => {
            path.reverse();
            StoreError::ReservedKey {
                field: field.to_string(),
                pointer: path.iter().map(|s| format!("/{s}")).collect(),
            }
        }
    }
}

/// [`check_value`] for every JSON value of `task`: its opaque fields and the
/// fields this version does not know.
pub fn check_task(task: &Task) -> Result<(), StoreError> {
    let fields = [
        ("input_schema", &task.input_schema),
        ("input_value", &task.input_value),
        ("result", &task.result),
        ("request", &task.request),
        ("error", &task.error),
    ];
    for (name, value) in fields {
        if let Some(v) = value {
            check_value(name, v)?;
        }
    }
    for (name, v) in &task.extra {
        check_value(name, v)?;
    }
    // An earlier answer's values sit two containers below the field's
    // (the list, the entry), which count against the same limit.
    for (i, earlier) in task.answered.iter().enumerate() {
        let values = [
            ("input_schema", &earlier.input_schema),
            ("input_value", &earlier.input_value),
        ];
        for (name, v) in values {
            check(v, 2).map_err(|problem| {
                let problem = within(within(problem, name.to_string()), i.to_string());
                field_error("answered", problem)
            })?;
        }
    }
    Ok(())
}

/// `value` inside `enclosing` containers. The recursion stops one level past
/// the limit, so even a value built in code (never parsed) cannot exhaust
/// the stack here.
fn check(value: &Value, enclosing: usize) -> Result<(), Problem> {
    let depth = enclosing + 1;
    let segment = |key: &str| key.replace('~', "~0").replace('/', "~1");
    match value {
        Value::Array(items) => {
            if depth > MAX_VALUE_DEPTH {
                return Err(Problem::TooDeep);
            }
            for (i, item) in items.iter().enumerate() {
                check(item, depth).map_err(|p| within(p, i.to_string()))?;
            }
            Ok(())
        }
        Value::Object(map) => {
            if depth > MAX_VALUE_DEPTH {
                return Err(Problem::TooDeep);
            }
            if map.keys().next().is_some_and(|k| k == RESERVED_KEY) {
                return Err(Problem::Reserved(Vec::new()));
            }
            for (key, item) in map {
                check(item, depth).map_err(|p| within(p, segment(key)))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn within(problem: Problem, segment: String) -> Problem {
    match problem {
        Problem::Reserved(mut path) => {
            path.push(segment);
            Problem::Reserved(path)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `depth` arrays, one inside the other.
    fn nested(depth: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..depth {
            v = Value::Array(vec![v]);
        }
        v
    }

    #[test]
    fn a_value_at_the_limit_is_accepted_and_one_deeper_refused() {
        assert_eq!(MAX_VALUE_DEPTH, 125);
        check_value("request", &nested(MAX_VALUE_DEPTH)).unwrap();
        match check_value("request", &nested(MAX_VALUE_DEPTH + 1)) {
            Err(StoreError::TooDeep { field, limit }) => {
                assert_eq!((field.as_str(), limit), ("request", MAX_VALUE_DEPTH));
            }
            other => panic!("{other:?}"),
        }
        // Objects count like arrays.
        let mut obj = json!({});
        for _ in 1..MAX_VALUE_DEPTH {
            obj = json!({ "a": obj });
        }
        check_value("result", &obj).unwrap();
        assert!(check_value("result", &json!({ "a": obj })).is_err());
        // Far deeper values built in code are refused without deep recursion.
        assert!(check_value("result", &nested(MAX_VALUE_DEPTH * 4)).is_err());
    }

    /// An earlier answer's values are two containers further down than a
    /// field's: one at the field's limit is refused there.
    #[test]
    fn an_earlier_answer_counts_its_two_extra_levels() {
        let mut task = Task::new("t", rudder_model::task::Status::Working);
        task.answered = vec![rudder_model::task::Answered {
            message: None,
            input_schema: json!({}),
            input_value: nested(MAX_VALUE_DEPTH - 2),
        }];
        check_task(&task).unwrap();
        task.answered[0].input_value = nested(MAX_VALUE_DEPTH - 1);
        match check_task(&task) {
            Err(StoreError::TooDeep { field, .. }) => assert_eq!(field, "answered"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_object_led_by_the_number_marker_is_refused_with_its_place() {
        let v = json!({"a": [1, {RESERVED_KEY: "12"}], "b/~": 2});
        match check_value("input_value", &v) {
            Err(StoreError::ReservedKey { field, pointer }) => {
                assert_eq!((field.as_str(), pointer.as_str()), ("input_value", "/a/1"));
            }
            other => panic!("{other:?}"),
        }
        // Anywhere but first, the key is an ordinary key.
        check_value("input_value", &json!({"a": 1, RESERVED_KEY: "12"})).unwrap();
        let top = check_value("result", &json!({RESERVED_KEY: "x"})).unwrap_err();
        assert!(top.to_string().contains("at the top level"), "{top}");
    }
}
