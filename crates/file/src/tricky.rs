//! Tasks whose strings make a boundary scanner stumble, for the property
//! tests of the readers that find tasks in a file without parsing it whole
//! (stream.rs, file_rows.rs).

use proptest::prelude::*;
use serde_json::json;

use super::codec;
use rudder_model::task::{Status, Task, TaskMap};

/// Strings of quotes, escapes, brackets, what looks like the start of a
/// key or an entry, non-ASCII and control characters.
pub(crate) fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("\"".to_string()),
            Just("\\".to_string()),
            Just("\\\"".to_string()),
            Just("{".to_string()),
            Just("}".to_string()),
            Just("[".to_string()),
            Just("]".to_string()),
            Just("\n  \"".to_string()),
            Just("\",\n  \"k\": {".to_string()),
            Just("é支🚒".to_string()),
            Just("\u{1}\t".to_string()),
            "[a-z ]{0,12}",
        ],
        0..8,
    )
    .prop_map(|parts| parts.concat())
}

/// A task holding `text` everywhere a string can be, unknown fields too.
pub(crate) fn task(id: String, text: String, revision: u64) -> Task {
    let mut t = Task::new(id, Status::Working);
    t.title = Some(text.clone());
    t.revision = revision;
    t.request = Some(json!({"s": text, "a": [text, {"b": [[], {}]}], "n": 1.50}));
    t.extra.insert(text.clone(), json!([text]));
    t
}

/// Up to a dozen such tasks, their ids tricky too.
pub(crate) fn tasks() -> impl Strategy<Value = TaskMap> {
    prop::collection::vec((text(), text(), 0..5u64), 0..12).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (id, text, rev))| {
                let t = task(format!("{i}{id}"), text, rev);
                (t.task_id.clone(), t)
            })
            .collect()
    })
}

/// The file of `tasks` in one of the layouts a writer may leave: as rudder
/// writes it (0), compact (1), or with white space of every kind JSON
/// allows wherever it may be.
pub(crate) fn layout(tasks: &TaskMap, kind: u8) -> Vec<u8> {
    match kind {
        0 => codec::encode(tasks, 0),
        1 => serde_json::to_vec(tasks).expect("tasks serialize"),
        _ => String::from_utf8(serde_json::to_vec_pretty(tasks).expect("tasks serialize"))
            .expect("UTF-8")
            .replace("\n", "\r\n\t ")
            .into_bytes(),
    }
}
