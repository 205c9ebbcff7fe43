//! docs/workers.md's three examples, each run against a temp store with a
//! task of kind `greet`, which it must complete: the Rust worker and the
//! async one are compiled in here from `examples/` (the same files `cargo
//! run --example` builds), the shell one is run with the built `rudder`.

mod common;
use std::path::Path;
use std::time::Duration;

use rudder::store::NewTask;
use rudder::{Status, Store};
use serde_json::json;

#[path = "../examples/worker.rs"]
#[allow(dead_code)]
mod worker_example;

#[path = "../examples/worker_async.rs"]
#[allow(dead_code)]
mod worker_async_example;

fn greet_task(path: &Path, request: Option<serde_json::Value>) -> String {
    Store::connect(path)
        .expect("url")
        .create(NewTask {
            kind: Some("greet".into()),
            request,
            ..NewTask::default()
        })
        .expect("create")
        .task
        .task_id
}

fn completed(path: &Path, id: &str) -> serde_json::Value {
    let task = Store::connect(path).expect("url").get(id).expect("task");
    assert_eq!(task.status, Status::Completed, "{task:#?}");
    assert_eq!(task.progress.map(|p| (p.current, p.total)), Some((3, 3)));
    task.result.expect("a result")
}

#[test]
fn the_rust_worker_completes_a_task() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.db");
    let id = greet_task(&path, Some(json!({"name": "world"})));
    let url = path.to_str().expect("utf-8");
    assert_eq!(worker_example::run(url, true).expect("run"), 1);
    assert_eq!(completed(&path, &id), json!({"greeting": "hello, world"}));
}

#[test]
fn the_rust_worker_asks_for_a_missing_name_and_continues_with_the_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.db");
    let id = greet_task(&path, None);
    let url = path.to_str().expect("utf-8").to_string();
    let worker = std::thread::spawn(move || worker_example::run(&url, true).expect("run"));
    let store = Store::connect(&path).expect("url");
    let waiting = common::wait_for(Duration::from_secs(60), || {
        Some(store.get(&id).expect("task")).filter(|t| t.status == Status::InputRequired)
    })
    .expect("the worker asks");
    assert!(waiting.lease_live(store.now()), "the asker keeps its lease");
    store
        .provide_input(&id, json!({"name": "Ann"}), None)
        .expect("input");
    assert_eq!(worker.join().expect("worker"), 1);
    assert_eq!(completed(&path, &id), json!({"greeting": "hello, Ann"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_worker_completes_a_task() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.db");
    let id = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || greet_task(&path, Some(json!({"name": "async"}))))
            .await
            .expect("create")
    };
    let url = path.to_str().expect("utf-8");
    assert_eq!(worker_async_example::run(url, true).await.expect("run"), 1);
    let result = tokio::task::spawn_blocking(move || completed(&path, &id))
        .await
        .expect("read");
    assert_eq!(result, json!({"greeting": "hello, async"}));
}

#[test]
fn the_shell_worker_completes_a_task() {
    if std::process::Command::new("jq")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("jq is not installed: examples/worker.sh needs it; skipped");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.db");
    let id = greet_task(&path, Some(json!({"name": "shell"})));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/worker.sh");
    let out = std::process::Command::new("sh")
        .arg(script)
        .env("RUDDER", env!("CARGO_BIN_EXE_rudder"))
        .env("RUDDER_STORE", &path)
        .env("ONCE", "1")
        .env("WAIT", "30s")
        .output()
        .expect("run worker.sh");
    assert!(out.status.success(), "{out:#?}");
    let task = Store::connect(&path).expect("url").get(&id).expect("task");
    assert_eq!(task.status, Status::Completed, "{task:#?}");
    assert_eq!(task.result, Some(json!({"greeting": "hello, shell"})));
}
