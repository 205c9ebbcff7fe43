//! A store written by the seed's Python `TaskStore` (`json.dumps(indent=2,
//! ensure_ascii=False)` of `{task_id: asdict(TaskSnapshot)}`; one task also
//! carries a field this version does not know) loads, lists, takes input and
//! keeps what it does not understand.

mod common;
use std::path::PathBuf;

use common::{fingerprint, run};
use rudder::Store;
use rudder::task::Status;
use serde_json::{Value, json};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/seed_store.json"
);
const WAITING: &str = "34df0ab7-eac3-429b-902f-efa8ea132d2f";
const DONE: &str = "8a1c2e4f-5b6d-4e7f-9a0b-1c2d3e4f5a6b";
const SEED_FIELDS: [&str; 6] = [
    "task_id",
    "status",
    "input_schema",
    "input_value",
    "result",
    "idempotency_key",
];

fn copy_of_fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    std::fs::copy(FIXTURE, &path).unwrap();
    (dir, path)
}

fn raw(path: &std::path::Path) -> serde_json::Map<String, Value> {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn the_fixture_has_the_seed_layout() {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    // Python's json.dumps(indent=2, ensure_ascii=False): two-space indent, ", "
    // never used as item separator, non-ASCII kept raw, no trailing newline.
    assert!(text.starts_with("{\n  \"34df0ab7"));
    assert!(text.contains("\n    \"task_id\": "));
    assert!(text.contains("支付平台") && !text.contains("\\u"));
    assert!(!text.ends_with('\n'));
    let tasks = raw(FIXTURE.as_ref());
    for (id, t) in &tasks {
        let keys: Vec<&str> = t.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys[..6], SEED_FIELDS, "{id}");
        let extra = if id == WAITING { 1 } else { 0 };
        assert_eq!(keys.len(), 6 + extra, "{id}");
    }
}

#[test]
fn a_seed_store_loads_with_defaults() {
    let (_dir, path) = copy_of_fixture();
    let before = fingerprint(&path);
    let tasks = Store::connect(&path).expect("a store URL").load().unwrap();
    assert_eq!(tasks.len(), 4);
    let ids: Vec<&str> = tasks.keys().map(String::as_str).collect();
    assert_eq!(ids[..2], [WAITING, DONE], "file order is kept");
    let w = &tasks[WAITING];
    assert_eq!(w.status, Status::InputRequired);
    assert_eq!(w.idempotency_key.as_deref(), Some("incident-1"));
    assert_eq!(w.revision, 0);
    assert!(w.history.is_empty() && w.created_at.is_none() && w.updated_at.is_none());
    assert_eq!(w.extra["owner"]["team"], "支付平台");
    let d = &tasks[DONE];
    assert_eq!(d.status, Status::Completed);
    assert_eq!(
        d.result.as_ref().unwrap()["summary"],
        "no active incident — 无活动事件"
    );
    assert_eq!(
        tasks["deadbeef-0000-4000-8000-000000000001"]
            .idempotency_key
            .as_deref(),
        Some("diag-🚒")
    );
    assert_eq!(fingerprint(&path), before, "reading wrote the file");
}

#[test]
fn the_cli_lists_and_shows_a_seed_store_without_writing() {
    let (_dir, path) = copy_of_fixture();
    let before = fingerprint(&path);
    let r = run(&path, &["list"]);
    assert_eq!(r.code, 0, "{r:#?}");
    for id in [WAITING, DONE] {
        assert!(r.stdout.contains(&id[..8]), "{}", r.stdout);
    }
    assert!(r.stdout.contains("input_required") && r.stdout.contains("incident-1"));
    let r = run(&path, &["list", "--json", "--status", "input_required"]);
    assert_eq!(r.code, 0);
    let list = r.json();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["task_id"], WAITING);
    assert_eq!(list[0]["owner"]["oncall"], json!(["李雷", "韩梅梅"]));
    let r = run(&path, &["get", "34df"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains("other fields") && r.stdout.contains("韩梅梅"),
        "{}",
        r.stdout
    );
    let r = run(&path, &["wait", "34df", "--json"]);
    // An input_required task needs no waiting: at once, exit 9.
    assert_eq!(r.code, 9, "{r:#?}");
    assert_eq!(r.json()["status"], "input_required");
    assert_eq!(
        fingerprint(&path),
        before,
        "reading commands wrote the file"
    );
}

#[test]
fn a_seed_task_takes_input_and_keeps_unknown_fields() {
    let (_dir, path) = copy_of_fixture();
    let before = raw(&path);
    let r = run(
        &path,
        &["input", "34df0ab7", "--set", "service=payments", "--json"],
    );
    assert_eq!(r.code, 0, "{r:#?}");
    let out = r.json();
    assert_eq!(out["change"], "applied");
    assert_eq!(out["task"]["status"], "working");
    assert_eq!(out["task"]["input_value"], json!({"service": "payments"}));
    assert_eq!(out["task"]["revision"], 1);

    let after = raw(&path);
    assert_eq!(after.len(), 4);
    let keys: Vec<&String> = after.keys().collect();
    let keys_before: Vec<&String> = before.keys().collect();
    assert_eq!(keys, keys_before, "task order changed");
    // The unknown field survives the write unchanged.
    assert_eq!(after[WAITING]["owner"], before[WAITING]["owner"]);
    // The six seed fields of every other task are as they were.
    for (id, t) in &before {
        for f in SEED_FIELDS {
            if id == WAITING && matches!(f, "status" | "input_value") {
                continue;
            }
            assert_eq!(after[id][f], t[f], "{id}.{f}");
        }
    }
    // Still the seed's layout: UTF-8 kept raw, two-space indent.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("无活动事件") && text.contains("diag-🚒"));
    assert!(!text.contains("\\u"), "non-ASCII was escaped");
    assert!(text.starts_with("{\n  \"34df0ab7"));

    // A fresh process reads back what was written; a repeat is unchanged.
    let t = Store::connect(&path)
        .expect("a store URL")
        .get(WAITING)
        .unwrap();
    assert_eq!(t.status, Status::Working);
    assert_eq!(t.extra["owner"]["escalated"], false);
    let r = run(
        &path,
        &[
            "input",
            WAITING,
            "--value",
            r#"{"service":"payments"}"#,
            "--json",
        ],
    );
    assert_eq!(r.code, 0);
    assert_eq!(r.json()["change"], "unchanged");
}

#[test]
fn the_seeds_terminal_policy_is_now_explicit() {
    // The seed silently returned the snapshot for a second `complete`; rudder
    // says "unchanged" for the same result and refuses a different one.
    let (_dir, path) = copy_of_fixture();
    let same =
        r#"{"summary": "no active incident — 无活动事件", "citations": ["INC-1042", "部署 #88"]}"#;
    let r = run(&path, &["complete", DONE, "--result", same, "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()["change"], "unchanged");
    let before = fingerprint(&path);
    let r = run(
        &path,
        &["complete", DONE, "--result", r#"{"summary": "rewritten!"}"#],
    );
    assert_eq!(r.code, 4);
    assert!(r.stderr.contains("completed"), "{}", r.stderr);
    let r = run(&path, &["cancel", DONE]);
    assert_eq!(r.code, 4);
    assert_eq!(fingerprint(&path), before);
}
