//! Reading and writing the store file's bytes (format 1).

use std::path::Path;

use std::io::{self, Write};

use super::scan;
use crate::index;
use rudder_core::{Location, StoreError};
use rudder_model::task::{Task, TaskMap};

pub use rudder_core::settings::MAX_STORE_BYTES;

/// Parse a store file and check that it is a valid store.
///
/// An empty file is corrupt (a store rudder wrote is at least `{}`); so is any
/// entry whose key differs from its `task_id`.
///
/// The tasks are parsed on all cores when the file is large; any doubt sends
/// the whole file through serde_json in one piece, so that the result, and
/// every error with its line and column, is exactly what that parse gives.
pub fn decode(path: &Path, bytes: &[u8]) -> Result<TaskMap, StoreError> {
    match decode_parallel(bytes) {
        Some(tasks) => Ok(tasks),
        None => decode_whole(path, bytes),
    }
}

/// The tasks of a valid store, parsed task by task in parallel; `None` when
/// the file is not a valid store or is unusual (see [`scan::split`]), or too
/// small to share out.
fn decode_parallel(bytes: &[u8]) -> Option<TaskMap> {
    if scan::threads_for(bytes.len()) < 2 {
        return None;
    }
    decode_split(bytes)
}

/// [`decode_parallel`] whatever the size.
fn decode_split(bytes: &[u8]) -> Option<TaskMap> {
    let text = std::str::from_utf8(bytes).ok()?;
    let runs = scan::split_map(text, |key, rest| {
        // Checked here, in parallel: a task parsed on its own starts one
        // level shallower than in the file, so a deeply nested one might
        // pass here and not there.
        let (task, len) = scan::parse_one::<Task>(rest)?;
        let ok = task.task_id == key && !index::too_deep(&task);
        // The key is copied here, while its bytes are in this core's cache.
        ok.then(|| ((task.task_id.clone(), task), len))
    })?;
    let mut map = TaskMap::with_capacity(runs.iter().map(Vec::len).sum());
    for (_, _, (key, task)) in runs.into_iter().flatten() {
        // A repeated key is left to the whole-file parse.
        if let (_, Some(_)) = map.insert_full(key, task) {
            return None;
        }
    }
    Some(map)
}

/// The top-level object, refusing a task id that appears twice (a plain map
/// would keep the last and silently drop the other on the next write).
struct UniqueTasks(TaskMap);

impl<'de> serde::Deserialize<'de> for UniqueTasks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Tasks;
        impl<'de> serde::de::Visitor<'de> for Tasks {
            type Value = TaskMap;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object mapping task ids to tasks")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<TaskMap, A::Error> {
                let mut tasks = TaskMap::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(key) = map.next_key::<String>()? {
                    if tasks.contains_key(&key) {
                        return Err(serde::de::Error::custom(repeated_id(&key)));
                    }
                    let task = map.next_value()?;
                    tasks.insert(key, task);
                }
                Ok(tasks)
            }
        }
        d.deserialize_map(Tasks).map(UniqueTasks)
    }
}

/// The whole file through serde_json: the reference parse.
pub fn decode_whole(path: &Path, bytes: &[u8]) -> Result<TaskMap, StoreError> {
    let corrupt = |line, column, message: String| StoreError::Corrupt {
        location: Location::file(path),
        line,
        column,
        message,
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(corrupt(None, None, "the file is empty".into()));
    }
    let tasks: TaskMap = serde_json::from_slice::<UniqueTasks>(bytes)
        .map(|u| u.0)
        .map_err(|e| corrupt_at(path, &e))?;
    for (key, task) in &tasks {
        if *key != task.task_id {
            return Err(corrupt(None, None, wrong_id(key, &task.task_id)));
        }
    }
    Ok(tasks)
}

/// The task id `id` repeated in the file: what the error says.
pub(super) fn repeated_id(id: &str) -> String {
    format!("the task id {id:?} appears twice")
}

/// The entry `key` holding the task `task_id`: what the error says.
pub(super) fn wrong_id(key: &str, task_id: &str) -> String {
    format!("the entry {key:?} holds a task whose task_id is {task_id:?}")
}

/// serde_json's verdict on the file at `path`, placed at its line and column.
pub(super) fn corrupt_at(path: &Path, e: &serde_json::Error) -> StoreError {
    // serde_json's message ends with the position, which the error already
    // states: keep it once.
    let message = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = message.strip_suffix(&suffix).unwrap_or(&message);
    let (line, column) = match e.line() {
        0 => (None, None),
        line => (Some(line), Some(e.column())),
    };
    StoreError::Corrupt {
        location: Location::file(path),
        line,
        column,
        message: message.to_string(),
    }
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

/// What the encoder writes before a task's value: `{\n  "key": ` for the
/// first task, `,\n  "key": ` after.
pub(super) fn write_lead(out: &mut Vec<u8>, key: &str, first: bool) {
    out.extend_from_slice(if first { b"{\n  " } else { b",\n  " });
    serde_json::to_writer(&mut *out, key).expect("a string serializes to JSON");
    out.extend_from_slice(b": ");
}

/// A task's value as [`encode`] writes it inside the store's object.
pub(super) fn write_task(out: &mut Vec<u8>, task: &Task) {
    serde_json::to_writer_pretty(Indented(out), task).expect("tasks serialize to JSON");
}

/// The version of the encoder a writer vouches for in its record when every
/// task's text of the file it wrote is what [`write_task`] writes for the
/// task that text reads back as ([`rudder_fs::Record::canonical`]): a
/// reader of the same version may then show a task's text as it stands
/// instead of reading and writing it again (`rudder list --json`). Raise it
/// whenever what `write_task` writes for some task changes (a field, an
/// order, a number's or a time's text): the test
/// `the_encoders_text_is_pinned_to_its_version` holds one task's text.
pub(crate) const ENCODER_VERSION: u32 = 1;

/// Whether `text`, a task's value as [`write_task`] wrote it for `task`,
/// reads back as exactly `task`: then reading it and writing it again,
/// pretty or compact, gives the same text (a task that does not, say one
/// whose request is `null`, which reads back as no request, keeps the
/// file from being vouched for).
pub(crate) fn reads_back_as(text: &[u8], task: &Task) -> bool {
    serde_json::from_slice::<Task>(text).is_ok_and(|read| read == *task && !index::too_deep(&read))
}

/// How a write ended.
pub(crate) enum Written {
    /// Durable, with the store's identity if it is still exactly what was
    /// written and that identity names one content ([`crate::fs::Identity::settled`]).
    Done(Option<crate::fs::Identity>),
    /// The lock was lost just before the rename: nothing was written.
    LockLost,
}

#[cfg(test)]
pub(super) enum Piece<'a> {
    /// Its JSON text, copied as it is.
    Raw(&'a str),
    /// A task to serialize.
    Task(&'a Task),
}

/// The file of these tasks: byte for byte what [`encode`] writes for the
/// serialized ones (a pretty-printed object, two-space indent, UTF-8 kept
/// raw), with the raw ones copied verbatim where they stand.
#[cfg(test)]
pub(super) fn encode_pieces<'a>(
    pieces: impl Iterator<Item = (&'a str, Piece<'a>)>,
    size_hint: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(size_hint + 4096);
    let mut first = true;
    for (key, piece) in pieces {
        write_lead(&mut out, key, first);
        first = false;
        match piece {
            Piece::Raw(json) => out.extend_from_slice(json.as_bytes()),
            Piece::Task(task) => write_task(&mut out, task),
        }
    }
    out.extend_from_slice(if first { b"{}\n" } else { b"\n}\n" });
    out
}

/// Pretty JSON one level deeper: two more spaces after every line break.
/// JSON strings never hold a raw line break (serde_json writes `\n`), so
/// every one is between tokens.
struct Indented<'a>(&'a mut Vec<u8>);

impl Write for Indented<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut lines = buf.split(|&b| b == b'\n');
        if let Some(first) = lines.next() {
            self.0.extend_from_slice(first);
        }
        for line in lines {
            self.0.extend_from_slice(b"\n  ");
            self.0.extend_from_slice(line);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`write_task`]'s text for the task of
    /// `the_encoders_text_is_pinned_to_its_version`.
    const PINNED: &str = r#"{
    "task_id": "t-1",
    "status": "working",
    "input_schema": {
      "type": "object"
    },
    "input_value": {
      "n": 1.5
    },
    "result": [
      1e+400,
      12345678901234567890123,
      "é"
    ],
    "idempotency_key": "k",
    "created_at": "2026-01-02T03:04:05Z",
    "updated_at": "2026-01-02T03:04:05.120Z",
    "title": "a \"b\"\n",
    "kind": "diagnose",
    "request": {},
    "status_message": "m",
    "progress": {
      "current": 1,
      "total": 2
    },
    "claimed_by": "w",
    "lease_expires_at": "2026-01-02T03:04:05.123456789Z",
    "lease_ms": 30000,
    "error": {
      "code": 1
    },
    "ttl_ms": 5,
    "poll_interval_ms": 6,
    "revision": 7,
    "history": [
      {
        "status": "working",
        "at": "2026-01-02T03:04:05.000000000Z",
        "actor": "ana",
        "face": "cli",
        "reason": "r",
        "fields": [
          "n"
        ]
      }
    ],
    "origin": {
      "tool": "diagnose"
    },
    "owned_by": "o",
    "zz": null
  }"#;
    use rudder_model::task::{HistoryEntry, Status};
    use serde_json::json;

    fn sample() -> TaskMap {
        let mut tasks = TaskMap::new();
        for (i, id) in ["t-1", "t-2\u{e9}\"\\", "t-3"].into_iter().enumerate() {
            let mut t = Task::new(id, Status::Working);
            t.title = Some("line one\nline two, 支付平台 🚒".into());
            t.request = Some(json!({"a": [], "b": {}, "c": [1, {"d": "x\ny"}], "e": null}));
            t.history.push(HistoryEntry::new(
                Status::Working,
                chrono::DateTime::UNIX_EPOCH,
                Some("created".into()),
            ));
            t.revision = i as u64;
            t.extra
                .insert("z-unknown".into(), json!({"nested": [[], [{}]]}));
            tasks.insert(id.to_string(), t);
        }
        tasks
    }

    /// What [`write_task`] writes for a task with every field set: a
    /// reader trusts a file's text as this version's encoder's only when
    /// its writer recorded [`ENCODER_VERSION`], so a change here (a field,
    /// an order, a time's or a number's text) must raise the version too.
    #[test]
    fn the_encoders_text_is_pinned_to_its_version() {
        let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        let mut t = Task::new("t-1", Status::Working);
        t.input_schema = Some(json!({"type": "object"}));
        t.input_value = Some(json!({"n": 1.50}));
        t.result = Some(serde_json::from_str(r#"[1e400, 12345678901234567890123, "é"]"#).unwrap());
        t.idempotency_key = Some("k".into());
        t.created_at = Some(at("2026-01-02T03:04:05Z"));
        t.updated_at = Some(at("2026-01-02T03:04:05.120Z"));
        t.title = Some("a \"b\"\n".into());
        t.kind = Some("diagnose".into());
        t.request = Some(json!({}));
        t.status_message = Some("m".into());
        t.progress = Some(rudder_model::task::Progress {
            current: 1,
            total: 2,
        });
        t.claimed_by = Some("w".into());
        t.lease_expires_at = Some(at("2026-01-02T03:04:05.123456789Z"));
        t.lease_ms = Some(30_000);
        t.error = Some(json!({"code": 1}));
        t.ttl_ms = Some(5);
        t.poll_interval_ms = Some(6);
        t.revision = 7;
        let mut entry = HistoryEntry::new(Status::Working, at("2026-01-02T03:04:05Z"), None);
        entry.actor = Some("ana".into());
        entry.face = Some(rudder_model::task::Face::Cli);
        entry.reason = Some("r".into());
        entry.fields = vec!["n".into()];
        t.history.push(entry);
        t.origin = Some(rudder_model::task::Origin {
            tool: "diagnose".into(),
            client: None,
        });
        t.owned_by = Some("o".into());
        t.extra.insert("zz".into(), json!(null));
        let mut out = Vec::new();
        write_task(&mut out, &t);
        let expected = PINNED;
        assert_eq!(
            (ENCODER_VERSION, String::from_utf8(out).unwrap().as_str()),
            (1, expected)
        );
    }

    #[test]
    fn the_reindenting_encoder_writes_what_encode_writes() {
        let tasks = sample();
        let pieces = tasks.iter().map(|(k, t)| (k.as_str(), Piece::Task(t)));
        let ours = encode_pieces(pieces, 0);
        assert_eq!(
            String::from_utf8(ours).unwrap(),
            String::from_utf8(encode(&tasks, 0)).unwrap()
        );
        let empty = TaskMap::new();
        assert_eq!(encode_pieces(std::iter::empty(), 0), encode(&empty, 0));
        assert_eq!(encode(&empty, 0), b"{}\n");
    }

    #[test]
    fn raw_pieces_are_copied_verbatim_at_their_place() {
        let tasks = sample();
        let compact = serde_json::to_string(&tasks["t-1"]).unwrap();
        let pieces = tasks.iter().map(|(k, t)| {
            let piece = if k == "t-1" {
                Piece::Raw(&compact)
            } else {
                Piece::Task(t)
            };
            (k.as_str(), piece)
        });
        let text = String::from_utf8(encode_pieces(pieces, 0)).unwrap();
        assert!(text.starts_with(&format!("{{\n  \"t-1\": {compact},\n  \"t-2")));
        assert_eq!(decode(Path::new("x"), text.as_bytes()).unwrap(), tasks);
    }

    /// The parallel decode gives exactly what the whole-file parse gives
    /// (tasks, or the error with its position), and a transaction accepts a
    /// file only if the whole-file parse does. Run over the fuzz corpus when
    /// it is present (`fuzz/corpus/load_store`) and the kept regressions.
    #[test]
    fn the_quick_paths_agree_with_the_whole_file_parse() {
        let path = Path::new("s.json");
        let mut inputs: Vec<Vec<u8>> = vec![
            br#"{"a": {"task_id": "a", "status": "working", "result": "\ud800"}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": "working", "request": 1e400}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": "working", "x": -1e400}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": "working", "status": "working"}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": {"working": null}}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": "working", "history": [["working", "2026-01-01T00:00:00Z", null]]}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": "working", "history": [{"status": "working", "at": "yesterday"}]}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": "working", "updated_at": "2026-01-01T23:59:60.5+14:00"}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": "working", "progress": [1, 2]}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": "working", "progress": {"current": -1, "total": 2}}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": "working", "revision": null}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": "working", "ttl_ms": 1.5}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": "working"}, "a": {"task_id": "a", "status": "failed"}}"#.to_vec(),
            br#"{"\u0061": {"t\u0061sk_id": "\u0061", "status": "working"}}"#.to_vec(),
            br#"{"a": ["a", "working"]}"#.to_vec(),
            br#"{"a": {"task_id": "b", "status": "working"}}"#.to_vec(),
            br#"{"a": {"task_id": "a", "status": "working", "$serde_json::private::RawValue": "1"}}"#.to_vec(),
            b"{\"a\": {\"task_id\": \"a\", \"status\": \"working\", \"x\": \"\xff\"}}".to_vec(),
        ];
        for depth in [95, 98, 99, 100, 124, 125, 126, 127, 128] {
            let nested = "[".repeat(depth) + &"]".repeat(depth);
            let with_number = "[".repeat(depth) + "1.50" + &"]".repeat(depth);
            let with_marker = "[".repeat(depth - 1)
                + r#"{"$serde_json::private::Number": "7"}"#
                + &"]".repeat(depth - 1);
            for value in [nested, with_number, with_marker] {
                inputs.push(
                    format!(r#"{{"a": {{"task_id": "a", "status": "working", "x": {value}}}}}"#)
                        .into_bytes(),
                );
            }
        }
        // serde_json's private number marker (`arbitrary_precision`): an
        // object led by it is a number, or refused.
        for value in [
            r#"{"$serde_json::private::Number": "12"}"#,
            r#"{"$serde_json::private::Number": "1.50e400"}"#,
            r#"{"$serde_json::private::Number": "x"}"#,
            r#"{"$serde_json::private::Number": 5}"#,
            r#"{"$serde_json::private::Number": "1", "b": 2}"#,
            r#"{"b": 1, "$serde_json::private::Number": "x"}"#,
            r#"{"$serde_json::private::Numbe": "x"}"#,
            "12345678901234567890123456789",
            "-0.000000000000000000000000000001",
        ] {
            inputs.push(
                format!(r#"{{"a": {{"task_id": "a", "status": "working", "result": {value}}}}}"#)
                    .into_bytes(),
            );
        }
        // Paths from the workspace root (this crate is crates/file): the
        // corpus only where a fuzz run made it, the kept regressions always.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let corpus = std::fs::read_dir(root.join("fuzz/corpus/load_store"));
        let kept = std::fs::read_dir(root.join("crates/testkit/tests/fuzz_regressions"))
            .expect("the kept fuzz regressions");
        for entry in corpus.into_iter().flatten().chain(kept).flatten() {
            inputs.push(std::fs::read(entry.path()).unwrap());
        }
        assert!(inputs.len() > 20, "{}", inputs.len());
        let (mut split_read, mut checked) = (0, 0);
        for bytes in &inputs {
            let whole = decode_whole(path, bytes);
            let quick = decode(path, bytes);
            match (&whole, &quick) {
                (Ok(a), Ok(b)) => assert_eq!(a, b),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                _ => panic!(
                    "{:?}: {whole:?} vs {quick:?}",
                    String::from_utf8_lossy(bytes)
                ),
            }
            if let Some(split) = decode_split(bytes) {
                split_read += 1;
                match &whole {
                    Ok(tasks) => assert_eq!(&split, tasks),
                    Err(e) => panic!("{:?} passed the split: {e}", String::from_utf8_lossy(bytes)),
                }
            }
            if let Some(txn) = crate::txn::FileTxn::parse(path, bytes) {
                checked += 1;
                let tasks = whole.unwrap_or_else(|e| {
                    panic!("{:?} passed the check: {e}", String::from_utf8_lossy(bytes))
                });
                // Written back untouched, the file reads as the same tasks.
                assert_eq!(decode_whole(path, &txn.encode()).unwrap(), tasks);
            }
        }
        assert!(split_read >= 5 && checked >= 5, "{split_read} {checked}");
    }

    /// The deepest value a writer accepts ([`rudder_core::MAX_VALUE_DEPTH`])
    /// is one that serde_json reads back from the file, and one level more
    /// is one it refuses: writer and reader draw the line in one place.
    #[test]
    fn the_writers_depth_limit_is_the_readers() {
        let limit = rudder_core::MAX_VALUE_DEPTH;
        let file = |depth: usize| {
            let value = "[".repeat(depth) + "1" + &"]".repeat(depth);
            format!(r#"{{"a": {{"task_id": "a", "status": "working", "result": {value}}}}}"#)
        };
        let path = Path::new("s.json");
        let tasks = decode_whole(path, file(limit).as_bytes()).unwrap();
        rudder_core::check_value("result", tasks["a"].result.as_ref().unwrap()).unwrap();
        assert_eq!(decode(path, file(limit).as_bytes()).unwrap(), tasks);
        let err = decode_whole(path, file(limit + 1).as_bytes()).unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }
}
