//! The limits every writer checks so that a reader never refuses what was
//! written (see `rudder_core::limits` for the checks).

/// No opaque value may hold a container at this level or deeper, counting
/// the store's top-level object as 1 and the task as 2: serde_json's
/// recursion limit, so that this check, the full parse and the writers'
/// [`MAX_VALUE_DEPTH`] all draw the line in the same place (the
/// tests check it against serde_json itself).
pub const MAX_LEVEL: usize = 128;

/// The container level of a task field's value.
pub const FIELD_LEVEL: usize = 3;

/// How deeply a JSON value stored in a task may nest: `[]` and `{}` are 1
/// deep, `[[1]]` is 2. A value nested one level more would make the store
/// unreadable for every process (serde_json stops at 128 levels, counting
/// the store's object and the task's).
pub const MAX_VALUE_DEPTH: usize = MAX_LEVEL - FIELD_LEVEL;

/// serde_json's private marker for a number kept exactly: an object whose
/// first key is this reads back as a number (or is refused), never as the
/// object, so no such object is ever written.
pub const RESERVED_KEY: &str = "$serde_json::private::Number";

/// Whether `value` nests at most `depth` containers deep (`[]` and `{}`
/// are 1 deep). The walk stops one level past `depth`.
pub fn within_depth(value: &serde_json::Value, depth: usize) -> bool {
    match value {
        serde_json::Value::Array(items) => {
            depth > 0 && items.iter().all(|v| within_depth(v, depth - 1))
        }
        serde_json::Value::Object(map) => {
            depth > 0 && map.values().all(|v| within_depth(v, depth - 1))
        }
        _ => true,
    }
}
