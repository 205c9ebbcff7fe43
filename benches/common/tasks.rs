//! Tasks as rudder really writes them, for every benchmark: 40% working,
//! 30% waiting, 30% finished. [`task`] is about 600 bytes as the file
//! stores it (what the backend and scale benchmarks compare); [`rich_task`]
//! adds what rudder writes as a task moves on (the input schema of a waiting
//! task, the input and result of a completed one, a failed one's error, the
//! second history entry), about 960 bytes (the store benchmark, behind the
//! docs/performance.md's first table).
use std::path::{Path, PathBuf};
use std::time::Instant;

use chrono::{DateTime, TimeDelta, Utc};
use rudder::Store;
use rudder::store::{Backend, PageQuery};
use rudder::task::{HistoryEntry, Status, Task, TaskMap};
use serde_json::json;

/// Task `i` of a store of `n` created up to `now`, one a minute.
pub fn task(i: usize, n: usize, now: DateTime<Utc>) -> Task {
    let status = match i % 10 {
        0..=3 => Status::Working,
        4..=6 => Status::InputRequired,
        7 => Status::Completed,
        8 => Status::Failed,
        _ => Status::Cancelled,
    };
    let mut t = Task::new(uuid::Uuid::new_v4().to_string(), status);
    let created = now - TimeDelta::minutes((n - i) as i64);
    t.created_at = Some(created);
    t.updated_at = Some(created + TimeDelta::seconds(30));
    t.title = Some(format!(
        "INC-{} checkout latency in eu-west-{}",
        1000 + i,
        i % 3
    ));
    t.idempotency_key = Some(format!("incident-{i}"));
    t.request = Some(
        json!({"incident": format!("INC-{}", 1000 + i), "since": "15m",
        "systems": ["events", "traces", "deploys"]}),
    );
    t.status_message = Some("correlating deploys with error spikes".into());
    t.revision = 3;
    t.history = vec![HistoryEntry::new(
        Status::Working,
        created,
        Some("created".into()),
    )];
    t
}

/// The input schema a waiting task asks for.
#[allow(dead_code)]
pub fn schema() -> serde_json::Value {
    json!({"type": "object", "required": ["service"], "properties": {
        "service": {"type": "string", "description": "the affected service"},
        "window_minutes": {"type": "integer", "minimum": 1, "default": 30}}})
}

/// [`task`] with what its status brings: a waiting task's input schema, a
/// completed task's input and result, a failed task's error, and the
/// history entry of the move out of `working`.
#[allow(dead_code)]
pub fn rich_task(i: usize, n: usize, now: DateTime<Utc>) -> Task {
    let mut t = task(i, n, now);
    let status = t.status;
    match status {
        Status::InputRequired => t.input_schema = Some(schema()),
        Status::Completed => {
            t.input_value = Some(json!({"service": "payments"}));
            t.result = Some(json!({"summary": "a deploy at 14:02 raised p99 latency",
                "citations": ["deploy #88", "trace 4f2a"]}));
        }
        Status::Failed => t.error = Some(json!({"message": "trace store unavailable"})),
        _ => {}
    }
    if status != Status::Working {
        let at = t.history[0].at + TimeDelta::seconds(30);
        t.history.push(HistoryEntry::new(status, at, None));
    }
    t
}

#[allow(dead_code)]
/// `n` tasks made by `make` (one of [`task`], [`rich_task`]).
fn generate_with(n: usize, make: fn(usize, usize, DateTime<Utc>) -> Task) -> TaskMap {
    let now = Utc::now();
    (0..n)
        .map(|i| {
            let t = make(i, n, now);
            (t.task_id.clone(), t)
        })
        .collect()
}

/// `n` [`task`]s.
#[allow(dead_code)]
pub fn generate(n: usize) -> TaskMap {
    generate_with(n, task)
}

/// `n` [`rich_task`]s.
#[allow(dead_code)]
pub fn generate_rich(n: usize) -> TaskMap {
    generate_with(n, rich_task)
}

#[allow(dead_code)]
/// A SQLite store of `n` tasks in the target directory, built once.
pub fn sqlite_fixture(n: usize) -> (PathBuf, String) {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("scale-{n}.db"));
    let store = Store::connect(&path).expect("a store URL");
    if store.counts().map(|c| c.total()).unwrap_or(0) != n {
        for ext in ["", "-wal", "-shm"] {
            let mut p = path.clone().into_os_string();
            p.push(ext);
            let _ = std::fs::remove_file(p);
        }
        let started = Instant::now();
        let now = Utc::now();
        for start in (0..n).step_by(10_000) {
            store
                .backend()
                .transaction(&mut |txn| {
                    for i in start..(start + 10_000).min(n) {
                        txn.insert(task(i, n, now))?;
                    }
                    Ok(true)
                })
                .expect("build the database");
        }
        println!("built {n} tasks in {:.1?}", started.elapsed());
    }
    let target = store
        .page(&PageQuery {
            statuses: vec![Status::Working],
            limit: Some(1),
            ..PageQuery::default()
        })
        .expect("a page")
        .remove(0)
        .task_id;
    (path, target)
}
