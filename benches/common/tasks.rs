//! Tasks as rudder really writes them, for the benchmarks that compare
//! backends and sizes: 40% working, 30% waiting, 30% finished, about 600
//! bytes each as the file stores them.

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
    t.history = vec![HistoryEntry {
        status: Status::Working,
        at: created,
        note: Some("created".into()),
    }];
    t
}

/// `n` such tasks.
#[allow(dead_code)]
pub fn generate(n: usize) -> TaskMap {
    let now = Utc::now();
    (0..n)
        .map(|i| {
            let t = task(i, n, now);
            (t.task_id.clone(), t)
        })
        .collect()
}

#[allow(dead_code)]
/// A SQLite store of `n` tasks in the target directory, built once.
pub fn sqlite_fixture(n: usize) -> (PathBuf, String) {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("scale-{n}.db"));
    let store = Store::open(&path);
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
                        txn.insert(task(i, n, now));
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
