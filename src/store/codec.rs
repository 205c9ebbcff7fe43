//! Reading and writing the store file's bytes (format 1).

use std::path::Path;

use super::StoreError;
use crate::task::TaskMap;

/// Files larger than this are refused instead of being read into memory.
/// 10k tasks take about 5 MB; this leaves room for a hundred times that.
pub const MAX_STORE_BYTES: u64 = 512 * 1024 * 1024;

/// Parse a store file and check that it is a valid store.
///
/// An empty file is corrupt (a store rudder wrote is at least `{}`); so is any
/// entry whose key differs from its `task_id`.
pub fn decode(path: &Path, bytes: &[u8]) -> Result<TaskMap, StoreError> {
    let corrupt = |line, column, message: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        line,
        column,
        message,
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(corrupt(None, None, "the file is empty".into()));
    }
    let tasks: TaskMap = serde_json::from_slice(bytes).map_err(|e| {
        // serde_json's message ends with the position, which the error
        // already states: keep it once.
        let message = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let message = message
            .strip_suffix(&suffix)
            .unwrap_or(&message)
            .to_string();
        corrupt(Some(e.line()), Some(e.column()), message)
    })?;
    for (key, task) in &tasks {
        if *key != task.task_id {
            return Err(corrupt(
                None,
                None,
                format!(
                    "the entry {key:?} holds a task whose task_id is {:?}",
                    task.task_id
                ),
            ));
        }
    }
    Ok(tasks)
}

/// Serialize the tasks the way the seed's Python store did: UTF-8, two-space
/// indent, non-ASCII kept as is.
pub fn encode(tasks: &TaskMap, size_hint: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size_hint + 4096);
    // Serializing plain data into a Vec cannot fail.
    serde_json::to_writer_pretty(&mut out, tasks).expect("tasks serialize to JSON");
    out.push(b'\n');
    out
}
