//! Jepsen-style check of acknowledged writes across real processes.
//!
//! Several child processes (this test binary re-run in a child role) hammer
//! one store: heartbeats on a shared task and creates of their own. Each
//! records when every operation started and finished (wall clock, shared by
//! all processes on the machine) and what the store answered. The checker
//! then verifies that no acknowledged operation is missing and that any
//! operation that finished before another started is ordered before it:
//! by revision for the shared task, by store order (position in the file, a database's sequence) for creates.
//! It runs once per backend (`$RUDDER_TEST_STORE` narrows to one).

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use rudder_model::task::Actor;
use rudder_store::{NewTask, Store};
use serde_json::{Value, json};

const CHILDREN: usize = 4;
const OPS: usize = 40;

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// The child role: run operations and print one JSON line per acknowledged one.
#[test]
fn child_role() {
    let (Ok(store), Ok(shared), Ok(me)) = (
        std::env::var("RT_STORE"),
        std::env::var("RT_SHARED"),
        std::env::var("RT_CHILD"),
    ) else {
        return; // not started as a child: nothing to do
    };
    let store = Store::connect(store).expect("a store URL");
    for i in 0..OPS {
        let start = now_ns();
        let line = if i % 2 == 0 {
            let o = store
                .heartbeat(&shared, Some(format!("{me}-{i}")), None, Actor::Anyone)
                .expect("heartbeat");
            json!({"op": "heartbeat", "revision": o.task.revision, "start": start.to_string(), "end": now_ns().to_string()})
        } else {
            let o = store
                .create(NewTask {
                    title: Some(format!("{me}-{i}")),
                    ..NewTask::default()
                })
                .expect("create");
            json!({"op": "create", "id": o.task.task_id, "start": start.to_string(), "end": now_ns().to_string()})
        };
        println!("RT {line}");
    }
}

fn acknowledged_operations_are_present_and_in_real_time_order_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = rudder_testkit::stores::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    let shared = store
        .create(NewTask::default())
        .expect("create")
        .task
        .task_id;

    let children: Vec<_> = (0..CHILDREN)
        .map(|c| {
            Command::new(std::env::current_exe().expect("test binary"))
                .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
                .env("RT_STORE", &path)
                .env("RT_SHARED", &shared)
                .env("RT_CHILD", format!("c{c}"))
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn child")
        })
        .collect();
    let mut ops: Vec<Value> = Vec::new();
    for mut child in children {
        let out = child.stdout.take().expect("stdout");
        for line in BufReader::new(out).lines() {
            let line = line.expect("line");
            // libtest may print its own "test child_role ... " before ours.
            if let Some(at) = line.find("RT {") {
                ops.push(serde_json::from_str(&line[at + 3..]).expect("op record"));
            }
        }
        assert!(child.wait().expect("wait").success(), "a child failed");
    }
    assert_eq!(
        ops.len(),
        CHILDREN * OPS,
        "every operation was acknowledged"
    );

    let n =
        |v: &Value, k: &str| -> u128 { v[k].as_str().and_then(|s| s.parse().ok()).expect("time") };
    let tasks = store.load().expect("load");
    let order: Vec<&String> = tasks.keys().collect();
    let position = |id: &str| order.iter().position(|k| k.as_str() == id);

    // No acknowledged write is missing.
    let heartbeats: Vec<&Value> = ops.iter().filter(|o| o["op"] == "heartbeat").collect();
    let revisions: HashSet<u64> = heartbeats
        .iter()
        .map(|o| o["revision"].as_u64().expect("revision"))
        .collect();
    assert_eq!(
        revisions.len(),
        heartbeats.len(),
        "two heartbeats wrote the same revision"
    );
    assert_eq!(
        tasks[&shared].revision,
        1 + heartbeats.len() as u64,
        "the shared task lost a heartbeat"
    );
    for o in ops.iter().filter(|o| o["op"] == "create") {
        let id = o["id"].as_str().expect("id");
        assert!(
            position(id).is_some(),
            "acknowledged create {id} is missing"
        );
    }

    // Real-time order: finished-before-started implies ordered-before.
    let mut pairs = 0u64;
    for a in &ops {
        for b in &ops {
            if a["op"] != b["op"] || n(a, "end") >= n(b, "start") {
                continue;
            }
            pairs += 1;
            if a["op"] == "heartbeat" {
                assert!(
                    a["revision"].as_u64() < b["revision"].as_u64(),
                    "{a} finished before {b} started but wrote a later revision"
                );
            } else {
                let (pa, pb) = (
                    position(a["id"].as_str().expect("id")),
                    position(b["id"].as_str().expect("id")),
                );
                assert!(
                    pa < pb,
                    "{a} finished before {b} started but comes after it in the file"
                );
            }
        }
    }
    assert!(pairs > 1000, "only {pairs} ordered pairs were checked");
}

rudder_testkit::shared_backend_tests! {
    acknowledged_operations_are_present_and_in_real_time_order: acknowledged_operations_are_present_and_in_real_time_order_once,
}
