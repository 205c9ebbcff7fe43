//! The scriptable CLI as a user or a script meets it: exit codes, `--json`
//! shapes, `--set` typing, where the store comes from, `wait`, `reclaim` and
//! `prune`.

mod common;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use common::{Run, create, fingerprint, one_json_value, rudder, run, run_plain, wait_for};
use rudder::Store;
use rudder::task::Status;
use serde_json::{Value, json};

fn store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = common::store_in(dir.path());
    (dir, path)
}

const SCHEMA: &str = r#"{"type": "object", "required": ["service"],
  "properties": {
    "service": {"type": "string", "description": "affected service"},
    "window_minutes": {"type": "integer", "minimum": 1},
    "ratio": {"type": "number"},
    "dry_run": {"type": "boolean"},
    "env": {"enum": ["prod", "staging"]}
  }}"#;

/// A JSON error on stdout, nothing on stderr, and the exit code in both.
fn json_error(r: &Run, code: i32, kind: &str) -> Value {
    assert_eq!(r.code, code, "{r:#?}");
    let v = r.json();
    assert_eq!(v["error"], kind, "{v}");
    assert_eq!(v["exit_code"], code);
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(
        r.stderr.is_empty(),
        "--json errors go to stdout only: {}",
        r.stderr
    );
    v
}

fn exit_0_for_success_and_for_a_safe_repeat_once() {
    let (_d, path) = store();
    let id = create(&path, &["--title", "INC-1042 checkout latency"]);
    let r = run(&path, &["cancel", &id, "--reason", "duplicate"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(
        r.stdout.contains("cancelled") && r.stdout.contains(&id),
        "{}",
        r.stdout
    );
    let before = common::store_state(&path);
    let r = run(&path, &["cancel", &id]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.starts_with("unchanged:"), "{}", r.stdout);
    assert!(r.stdout.contains("nothing was written"));
    assert_eq!(common::store_state(&path), before);
}

fn retrying_with_a_null_result_or_request_is_a_safe_repeat_once() {
    // `null` and "absent" are one thing once written: a retry must match.
    let (_d, path) = store();
    let id = create(&path, &[]);
    assert_eq!(run(&path, &["complete", &id]).code, 0);
    let before = common::store_state(&path);
    let r = run(&path, &["complete", &id, "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()["change"], "unchanged");
    let r = run(&path, &["complete", &id, "--result", "null", "--json"]);
    assert_eq!(r.json()["change"], "unchanged");
    assert_eq!(common::store_state(&path), before);
    let first = run(
        &path,
        &["create", "--key", "k", "--request", "null", "--json"],
    )
    .json();
    let again = run(
        &path,
        &["create", "--key", "k", "--request", "null", "--json"],
    );
    assert_eq!(again.code, 0, "{again:#?}");
    assert_eq!(again.json()["change"], "unchanged");
    assert_eq!(again.json()["task"]["task_id"], first["task"]["task_id"]);
    let plain = run(&path, &["create", "--key", "k", "--json"]);
    assert_eq!(plain.json()["change"], "unchanged");
}

/// `create --kind`, `list --kind` (repeatable), the table's KIND column and
/// `get`; a kind a store may not hold is refused, nothing written.
fn kinds_are_created_listed_and_shown_once() {
    let (_d, path) = store();
    let a = create(&path, &["--kind", "diagnose", "--title", "INC-1 slow"]);
    let b = create(&path, &["--kind", "backup", "--title", "nightly"]);
    let c = create(&path, &["--title", "no kind"]);
    let r = run_plain(&["--store", path.to_str().unwrap(), "list"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[0].contains("  KIND  "), "{}", r.stdout);
    assert!(lines[1].contains("  diagnose  ") && lines[1].contains("INC-1 slow"));
    assert!(lines[3].contains("  -  ") && lines[3].contains("no kind"));
    let r = run_plain(&[
        "--store",
        path.to_str().unwrap(),
        "list",
        "--kind",
        "backup",
    ]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    assert!(lines[1].starts_with(&b[..8]), "{}", r.stdout);
    let r = run(
        &path,
        &["list", "--kind", "backup", "--kind", "diagnose", "--json"],
    );
    let json = r.json();
    let ids: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [a.as_str(), b.as_str()]);
    let r = run_plain(&["--store", path.to_str().unwrap(), "get", &a]);
    assert!(
        r.stdout.lines().any(|l| l == "kind       diagnose"),
        "{}",
        r.stdout
    );
    let r = run_plain(&["--store", path.to_str().unwrap(), "get", &c]);
    assert!(!r.stdout.contains("kind "), "{}", r.stdout);

    let before = common::store_state(&path);
    for bad in ["", "a\tb", "x\u{1b}[31m", &"k".repeat(65)] {
        let r = run(&path, &["create", "--kind", bad, "--json"]);
        let v = json_error(&r, 2, "invalid_kind");
        assert_eq!(v["field"], "kind");
        let r = run_plain(&["--store", path.to_str().unwrap(), "create", "--kind", bad]);
        assert_eq!(r.code, 2, "{r:#?}");
        assert!(r.stderr.contains("kind"), "{}", r.stderr);
        assert!(
            !r.stderr.contains('\u{1b}'),
            "the message is sanitized: {:?}",
            r.stderr
        );
    }
    assert_eq!(common::store_state(&path), before, "nothing written");
}

fn exit_2_for_usage_errors_once() {
    let (_d, path) = store();
    let id = create(&path, &[]);
    for args in [
        vec!["list", "--no-such-flag"],
        vec!["no-such-command"],
        vec!["input", &id],
        vec!["input", &id, "--set", "a=1", "--value", "{}"],
        vec!["list", "--status", "paused"],
    ] {
        let r = run(&path, &args);
        assert_eq!(r.code, 2, "{args:?}: {r:#?}");
        assert!(!r.stderr.is_empty(), "{args:?}");
    }
    // Errors found after parsing: with --json they are one JSON value.
    for args in [
        vec!["complete", &id, "--result", "{not json"],
        vec!["reclaim", "--older-than", "15"],
        vec!["prune", "--older-than", "soon"],
        vec!["create", "--schema", r#"{"type": "nonsense"}"#],
        vec!["create", "--schema", "@/no/such/file.json"],
        vec!["wait", &id, "--timeout", "forever"],
    ] {
        let mut with_json = args.clone();
        with_json.push("--json");
        json_error(
            &run(&path, &with_json),
            2,
            if args[0] == "create" && args[2].starts_with('{') {
                "invalid_schema"
            } else {
                "usage"
            },
        );
        let r = run(&path, &args);
        assert_eq!(r.code, 2, "{args:?}");
        assert!(
            r.stdout.is_empty() && r.stderr.starts_with("rudder: "),
            "{args:?}: {r:#?}"
        );
    }
    assert_eq!(
        Store::connect(&path)
            .expect("a store URL")
            .list(&[])
            .unwrap()
            .len(),
        1,
        "a usage error wrote"
    );
}

/// Two tasks whose ids share the prefix `aaaa`.
fn store_with_twins(path: &Path) -> (String, String) {
    let a = "aaaa1111-0000-4000-8000-000000000001".to_string();
    let b = "aaaa2222-0000-4000-8000-000000000002".to_string();
    let task = |id: &str| {
        json!({"task_id": id, "status": "working", "input_schema": null,
        "input_value": null, "result": null, "idempotency_key": null})
    };
    let file = json!({ a.clone(): task(&a), b.clone(): task(&b) });
    common::write_store(path, &serde_json::to_string_pretty(&file).unwrap());
    (a, b)
}

fn exit_3_for_unknown_or_ambiguous_ids_once() {
    let (_d, path) = store();
    let (a, b) = store_with_twins(&path);
    let before = common::store_state(&path);
    for cmd in ["get", "cancel", "heartbeat", "complete", "wait"] {
        let r = run(&path, &[cmd, "ffff"]);
        assert_eq!(r.code, 3, "{cmd}: {r:#?}");
        assert!(
            r.stderr.contains("unknown task: ffff"),
            "{cmd}: {}",
            r.stderr
        );
        let v = json_error(&run(&path, &[cmd, "aaaa", "--json"]), 3, "ambiguous_id");
        assert_eq!(v["candidates"], json!([a, b]), "{cmd}");
    }
    let v = json_error(
        &run(&path, &["input", "ffff", "--set", "x=1", "--json"]),
        3,
        "unknown_task",
    );
    assert_eq!(v["message"], "unknown task: ffff");
    let r = run(&path, &["cancel", "aaaa"]);
    assert!(
        r.stderr.contains(&a) && r.stderr.contains(&b),
        "{}",
        r.stderr
    );
    assert_eq!(common::store_state(&path), before);
    // A unique prefix is accepted wherever an id is.
    let r = run(&path, &["cancel", "aaaa2", "--json"]);
    assert_eq!(r.code, 0);
    assert_eq!(r.json()["task"]["task_id"], b.as_str());
    assert_eq!(run(&path, &["get", "aaaa1"]).code, 0);
}

fn exit_4_for_refusals_with_the_current_state_once() {
    let (_d, path) = store();
    let id = create(&path, &["--key", "incident-1"]);
    assert_eq!(run(&path, &["complete", &id, "--result", "1"]).code, 0);
    let before = common::store_state(&path);
    for args in [
        vec!["complete", &id, "--result", "2"],
        vec!["cancel", &id],
        vec!["fail", &id, "--error", "late"],
        vec!["heartbeat", &id],
        vec!["request-input", &id, "--schema", "{\"type\": \"object\"}"],
        vec!["input", &id, "--value", "{\"service\": \"x\"}"],
    ] {
        let r = run(&path, &args);
        assert_eq!(r.code, 4, "{args:?}: {r:#?}");
        assert!(
            r.stderr.contains("completed") && r.stderr.contains("current state:"),
            "{}",
            r.stderr
        );
        let mut with_json = args.clone();
        with_json.push("--json");
        let v = json_error(&run(&path, &with_json), 4, "refused");
        assert_eq!(v["task"]["status"], "completed");
        assert_eq!(v["task"]["result"], 1);
    }
    // Idempotency conflict.
    let v = json_error(
        &run(
            &path,
            &[
                "create",
                "--key",
                "incident-1",
                "--request",
                "{\"other\": 1}",
                "--json",
            ],
        ),
        4,
        "idempotency_conflict",
    );
    assert_eq!(v["task"]["task_id"], id.as_str());
    assert_eq!(common::store_state(&path), before);
    // Stale revision.
    let waiting = create(&path, &["--schema", SCHEMA]);
    let v = json_error(
        &run(
            &path,
            &[
                "input",
                &waiting,
                "--set",
                "service=db",
                "--revision",
                "7",
                "--json",
            ],
        ),
        4,
        "stale_revision",
    );
    assert_eq!(v["task"]["revision"], 1);
    assert_eq!(
        run(
            &path,
            &["input", &waiting, "--set", "service=db", "--revision", "1"]
        )
        .code,
        0
    );
}

fn exit_5_for_input_that_does_not_match_the_schema_once() {
    let (_d, path) = store();
    let id = create(&path, &["--schema", SCHEMA]);
    let before = common::store_state(&path);
    let v = json_error(
        &run(
            &path,
            &[
                "input",
                &id,
                "--set",
                "window_minutes=0",
                "--set",
                "env=dev",
                "--json",
            ],
        ),
        5,
        "invalid_input",
    );
    let mut pointers: Vec<&str> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["pointer"].as_str().unwrap())
        .collect();
    pointers.sort();
    assert_eq!(pointers, ["/env", "/service", "/window_minutes"]);
    let r = run(&path, &["input", &id, "--value", "{\"service\": 42}"]);
    assert_eq!(r.code, 5);
    assert!(r.stderr.contains("/service"), "{}", r.stderr);
    assert_eq!(common::store_state(&path), before);
}

#[test]
fn exit_6_for_a_corrupt_store() {
    // A JSON file's own problem (a database's are in sqlite_cli.rs).
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("tasks.json");
    std::fs::write(
        &path,
        "{\n  \"x\": {\"task_id\": \"x\", \"status\": \"working\",}\n}\n",
    )
    .unwrap();
    let v = json_error(&run(&path, &["list", "--json"]), 6, "corrupt_store");
    assert_eq!(v["line"], 2);
    let r = run(&path, &["get", "x"]);
    assert_eq!(r.code, 6);
    assert!(r.stderr.contains("line 2 column"), "{}", r.stderr);
}

fn exit_124_when_wait_times_out_once() {
    let (_d, path) = store();
    let id = create(&path, &[]);
    let v = json_error(
        &run(&path, &["wait", &id, "--timeout", "1s", "--json"]),
        124,
        "timeout",
    );
    assert!(v["message"].as_str().unwrap().contains(&id));
    let r = run(&path, &["wait", &id[..8], "--timeout", "1s"]);
    assert_eq!(r.code, 124);
    assert!(r.stderr.contains("timed out"), "{}", r.stderr);
}

fn json_output_is_one_value_per_command_once() {
    let (_d, path) = store();
    let r = run(
        &path,
        &[
            "create",
            "--json",
            "--title",
            "INC-1",
            "--ttl",
            "7d",
            "--schema",
            SCHEMA,
            "--key",
            "k1",
            "--request",
            "{\"incident\": \"INC-1\"}",
            "--message",
            "waiting for a person",
        ],
    );
    assert_eq!(r.code, 0);
    let v = r.json();
    assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
    assert_eq!(v["change"], "applied");
    let t = &v["task"];
    let id = t["task_id"].as_str().unwrap().to_string();
    assert_eq!(t["status"], "input_required");
    assert_eq!(t["title"], "INC-1");
    assert_eq!(t["idempotency_key"], "k1");
    assert_eq!(t["request"], json!({"incident": "INC-1"}));
    assert_eq!(t["status_message"], "waiting for a person");
    assert_eq!(t["ttl_ms"], 7 * 24 * 3600 * 1000u64);
    assert_eq!(t["revision"], 1);
    assert_eq!(t["history"][0]["status"], "input_required");
    // Same key again: unchanged.
    let r = run(
        &path,
        &[
            "create",
            "--json",
            "--schema",
            SCHEMA,
            "--key",
            "k1",
            "--request",
            "{\"incident\": \"INC-1\"}",
        ],
    );
    assert_eq!(r.json()["change"], "unchanged");
    assert_eq!(r.json()["task"]["task_id"], id.as_str());

    let list = run(&path, &["list", "--json"]).json();
    assert_eq!(list.as_array().unwrap().len(), 1);
    let mut got = run(&path, &["get", &id, "--json"]).json();
    // `get` adds whether the schema fits MCP elicitation to the task.
    let fit = got
        .as_object_mut()
        .unwrap()
        .remove("mcp_elicitation")
        .expect("get says whether the schema fits MCP elicitation");
    assert_eq!(fit["fits"], false);
    assert!(fit["reason"].as_str().unwrap().contains("env"), "{fit}");
    assert_eq!(got, list[0]);
    assert_eq!(got["task_id"], id.as_str());
    let empty = run(&path, &["list", "--json", "--status", "completed"]).json();
    assert_eq!(empty, json!([]));
    let both = run(
        &path,
        &[
            "list",
            "--json",
            "--status",
            "completed",
            "--status",
            "input_required",
        ],
    )
    .json();
    assert_eq!(both.as_array().unwrap().len(), 1);

    for args in [
        vec!["input", &id, "--set", "service=db", "--json"],
        vec!["heartbeat", &id, "--message", "step 2", "--json"],
        vec![
            "request-input",
            &id,
            "--schema",
            "{\"type\": \"object\"}",
            "--json",
        ],
        vec!["input", &id, "--value", "{}", "--json"],
        vec![
            "complete",
            &id,
            "--result",
            "{\"summary\": \"ok\"}",
            "--json",
        ],
    ] {
        let r = run(&path, &args);
        assert_eq!(r.code, 0, "{args:?}: {r:#?}");
        let v = r.json();
        assert_eq!(v["change"], "applied", "{args:?}");
        assert!(v["task"]["task_id"] == id.as_str());
        assert!(r.stderr.is_empty());
    }
    let waited = run(&path, &["wait", &id, "--json"]).json();
    assert_eq!(waited["status"], "completed");
    let fail_id = create(&path, &[]);
    let v = run(&path, &["fail", &fail_id, "--error", "disk full", "--json"]).json();
    assert_eq!(v["task"]["error"], json!({"message": "disk full"}));
    assert_eq!(v["task"]["status"], "failed");
}

fn set_values_are_typed_by_the_schema_once() {
    let (_d, path) = store();
    let id = create(&path, &["--schema", SCHEMA]);
    let r = run(
        &path,
        &[
            "input",
            &id[..8],
            "--json",
            "--set",
            "service=123",
            "--set",
            "window_minutes=30",
            "--set",
            "ratio=0.25",
            "--set",
            "dry_run=true",
            "--set",
            "env=prod",
            "--set",
            "note=a=b",
        ],
    );
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(
        r.json()["task"]["input_value"],
        json!({"service": "123", "window_minutes": 30, "ratio": 0.25, "dry_run": true,
           "env": "prod", "note": "a=b"})
    );
    // A value that cannot have the field's type is invalid input (exit 5,
    // like `--value`), naming the field; a malformed --set is a usage error.
    let id = create(&path, &["--schema", SCHEMA]);
    for (set, field, code) in [
        ("window_minutes=half", "window_minutes", 5),
        ("ratio=lots", "ratio", 5),
        ("dry_run=maybe", "dry_run", 5),
        ("env=dev", "env", 5),
        ("=x", "field name", 2),
        ("service", "FIELD=VALUE", 2),
    ] {
        let r = run(&path, &["input", &id, "--set", set]);
        assert_eq!(r.code, code, "{set}: {r:#?}");
        assert!(r.stderr.contains(field), "{set}: {}", r.stderr);
    }
    let r = run(
        &path,
        &[
            "input",
            &id,
            "--set",
            "service=x",
            "--set",
            "dry_run=no",
            "--set",
            "ratio=3",
            "--json",
        ],
    );
    assert_eq!(
        r.json()["task"]["input_value"],
        json!({"service": "x", "dry_run": false, "ratio": 3.0})
    );
}

#[test]
fn the_store_comes_from_the_flag_anywhere_or_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    let id = create(&a, &["--title", "in a"]);
    let before = rudder()
        .args(["--store", a.to_str().unwrap(), "get", &id, "--json"])
        .output()
        .unwrap();
    assert!(before.status.success());
    let after = rudder()
        .args(["get", &id, "--json", "--store", a.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(after.status.success(), "{after:?}");
    assert_eq!(before.stdout, after.stdout);

    let via_env = rudder()
        .env("RUDDER_STORE", &a)
        .args(["get", &id, "--json"])
        .output()
        .unwrap();
    assert!(via_env.status.success());
    assert_eq!(
        one_json_value(&String::from_utf8(via_env.stdout).unwrap()).unwrap()["title"],
        "in a"
    );
    // The flag wins over the environment.
    let r = rudder()
        .env("RUDDER_STORE", &a)
        .args(["get", &id, "--store", b.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(3));
    // Without either: ./tasks.json.
    let r = rudder()
        .current_dir(dir.path())
        .args(["create", "--json"])
        .output()
        .unwrap();
    assert!(r.status.success());
    assert!(dir.path().join("tasks.json").exists());
    let r = run_plain(&["list", "--store", b.to_str().unwrap(), "--json"]);
    assert_eq!(r.json(), json!([]));
}

fn spawn_wait(path: &Path, id: &str) -> Child {
    rudder()
        .arg("--store")
        .arg(path)
        .args(["wait", id, "--json", "--timeout", "60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Whether `child` watches the store for changes: it has an inotify
/// instance open (a listening connection, for PostgreSQL), which `wait`
/// makes only once it read the task and found it not settled yet.
fn watching(child: &Child) -> bool {
    // PostgreSQL: its feed's LISTEN connection.
    if common::kind() == common::Kind::Postgres {
        return common::pg::listening(child.id());
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{}/fd", child.id())) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|to| to.to_string_lossy().contains("inotify"))
    })
}

/// A waiting child is in its wait, and stays in it: it neither returns
/// before it watches the store nor in the moment after.
fn still_waiting(child: &mut Child) {
    let started = wait_for(Duration::from_secs(20), || {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("wait returned before anything happened: {status:?}");
        }
        watching(child).then_some(())
    });
    assert!(started.is_some(), "wait never started watching the store");
    // Nothing happens to the task: there is no event to wait for, only a
    // while in which the child must not return.
    let stayed = wait_for(Duration::from_millis(400), || {
        child.try_wait().unwrap().map(|status| status.to_string())
    });
    assert_eq!(stayed, None, "wait returned before anything happened");
}

#[track_caller]
fn finished(mut child: Child) -> Run {
    let done = wait_for(Duration::from_secs(20), || child.try_wait().unwrap());
    if done.is_none() {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "wait did not return: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    child.wait_with_output().unwrap().into()
}

fn wait_returns_when_another_process_acts_once() {
    let (_d, path) = store();
    // Waiting for input: nothing to wait for.
    let id = create(&path, &["--schema", SCHEMA]);
    let r = run(&path, &["wait", &id, "--json", "--timeout", "5s"]);
    assert_eq!(r.code, 9, "{r:#?}");
    assert_eq!(r.json()["status"], "input_required");
    let r = run(&path, &["wait", &id]);
    assert_eq!(r.code, 9, "{r:#?}");
    assert!(r.stdout.contains("input_required"), "{}", r.stdout);

    // Once someone provides the input the task works again, and `wait`
    // returns when another process completes it.
    assert_eq!(
        run(&path, &["input", &id, "--set", "service=payments"]).code,
        0
    );
    let mut child = spawn_wait(&path, &id);
    still_waiting(&mut child);
    assert_eq!(run(&path, &["heartbeat", &id]).code, 0);
    still_waiting(&mut child);
    assert_eq!(
        run(
            &path,
            &["complete", &id, "--result", "{\"summary\": \"ok\"}"]
        )
        .code,
        0
    );
    let r = finished(child);
    assert_eq!(r.code, 0, "{r:#?}");
    let v = r.json();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["result"]["summary"], "ok");

    // ... and when another process asks for (more) input.
    let id = create(&path, &[]);
    let mut child = spawn_wait(&path, &id[..8]);
    still_waiting(&mut child);
    assert_eq!(
        run(
            &path,
            &[
                "request-input",
                &id,
                "--schema",
                SCHEMA,
                "--message",
                "which service?"
            ]
        )
        .code,
        0
    );
    let r = finished(child);
    assert_eq!(r.code, 9, "{r:#?}");
    assert_eq!(r.json()["status"], "input_required");
    assert_eq!(r.json()["status_message"], "which service?");

    // A store deleted while a task in it is waited for: the task vanished,
    // and the answer says how it was last seen.
    let id = create(&path, &[]);
    let mut child = spawn_wait(&path, &id);
    still_waiting(&mut child);
    common::remove_store(&path);
    let r = finished(child);
    assert_eq!(r.code, 3, "{r:#?}");
    let v = r.json();
    assert_eq!(v["error"], "vanished", "{v}");
    assert_eq!(v["task"]["status"], "working");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("while it was working") && message.contains("no longer exists"),
        "{message}"
    );
}

/// docs/architecture.md: `wait` exits 0 completed, 7 failed, 8 cancelled, 9 waiting
/// for input, whether the task was there already or got there meanwhile.
fn wait_exit_codes_say_how_the_task_ended_once() {
    let (_d, path) = store();
    let completed = create(&path, &[]);
    assert_eq!(run(&path, &["complete", &completed]).code, 0);
    let failed = create(&path, &[]);
    assert_eq!(
        run(&path, &["fail", &failed, "--error", "disk full"]).code,
        0
    );
    let cancelled = create(&path, &[]);
    assert_eq!(run(&path, &["cancel", &cancelled]).code, 0);
    let waiting = create(&path, &["--schema", SCHEMA]);
    for (id, code, status) in [
        (&completed, 0, "completed"),
        (&failed, 7, "failed"),
        (&cancelled, 8, "cancelled"),
        (&waiting, 9, "input_required"),
    ] {
        let r = run(&path, &["wait", id, "--json"]);
        assert_eq!(r.code, code, "{status}: {r:#?}");
        assert_eq!(r.json()["status"], status);
        let r = run(&path, &["wait", &id[..8]]);
        assert_eq!(r.code, code, "{status}: {r:#?}");
        assert!(r.stdout.contains(status), "{status}: {}", r.stdout);
    }
    let r = run(&path, &["wait", &failed]);
    assert!(r.stdout.contains("failed: disk full"), "{}", r.stdout);

    // Cancelled while waited for.
    let id = create(&path, &[]);
    let (child, _err) = spawn_announced_wait(&path, &id);
    assert_eq!(run(&path, &["cancel", &id]).code, 0);
    let r = finished(child);
    assert_eq!(r.code, 8, "{r:#?}");
    assert!(r.stdout.contains("cancelled"), "{}", r.stdout);
}

/// `wait --until terminal` waits past input requests: a task that waits
/// for input does not end it, only a finished one does.
#[test]
fn wait_until_terminal_waits_past_input_requests() {
    let (_d, path) = store();
    let id = create(&path, &["--schema", SCHEMA]);
    // Settled (the default) returns at once with 9.
    assert_eq!(run(&path, &["wait", &id]).code, 9);
    let r = run(
        &path,
        &[
            "wait",
            &id,
            "--until",
            "terminal",
            "--timeout",
            "300ms",
            "--json",
        ],
    );
    assert_eq!(r.code, 124, "{r:#?}");
    assert_eq!(r.json()["error"], "timeout");
    // It says it waits although the task waits for input; answered, asked
    // again, then completed: only the end ends the wait.
    let (child, _err) = spawn_announced_wait_with(&path, &id, &["--until", "terminal"]);
    let answer = r#"{"service": "db"}"#;
    assert_eq!(run(&path, &["input", &id, "--value", answer]).code, 0);
    assert_eq!(
        run(&path, &["request-input", &id, "--schema", SCHEMA]).code,
        0
    );
    assert_eq!(run(&path, &["input", &id, "--value", answer]).code, 0);
    assert_eq!(run(&path, &["complete", &id]).code, 0);
    let r = finished(child);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(r.stdout.contains("is completed"), "{}", r.stdout);
    let r = run(&path, &["wait", &id, "--until", "never"]);
    assert_eq!(r.code, 2, "{r:#?}");
}

/// `wait ID` (human output, stderr to a file) that has said it waits: it
/// has read the task, unfinished, so whatever happens next happens while
/// it waits. No sleep: the line is the signal.
fn spawn_announced_wait(path: &Path, id: &str) -> (Child, PathBuf) {
    spawn_announced_wait_with(path, id, &[])
}

/// [`spawn_announced_wait`] with more arguments for `wait`.
fn spawn_announced_wait_with(path: &Path, id: &str, more: &[&str]) -> (Child, PathBuf) {
    // Beside the store, or (PostgreSQL) in the test cluster's dir.
    let err = if common::is_postgres(path) {
        common::pg::shared()
            .dir()
            .join(format!("wait-{}.err", &id[..8]))
    } else {
        path.with_file_name(format!("wait-{}.err", &id[..8]))
    };
    let child = rudder()
        .arg("--store")
        .arg(path)
        .args(["wait", id, "--timeout", "600s"])
        .args(more)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let said = wait_for(Duration::from_secs(20), || {
        let text = std::fs::read_to_string(&err).unwrap_or_default();
        text.contains(&format!("rudder: waiting for task {id}"))
            .then_some(())
    });
    assert!(said.is_some(), "wait never said it waits");
    (child, err)
}

/// docs/architecture.md: 6 at once, not after the timeout, when the store becomes
/// unreadable while `wait` waits; the error names the file.
#[test]
fn wait_stops_with_exit_6_when_the_store_turns_corrupt() {
    let (_d, path) = store();
    let id = create(&path, &["--title", "INC-1042"]);
    let (child, err) = spawn_announced_wait(&path, &id);
    // Another process replaces the store with something no reader accepts.
    let tmp = path.with_file_name("corrupt.json.tmp");
    std::fs::write(&tmp, "{\n  \"oops\": [1, 2,\n").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    // Waiting for the exit, not timing it: the wait's own timeout is 600 s.
    let r = finished(child);
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert_eq!(r.code, 6, "{r:#?}\n{stderr}");
    assert!(
        stderr.contains(&path.display().to_string()) && stderr.contains("corrupt"),
        "{stderr}"
    );
    assert!(stderr.contains("at line 2 column"), "{stderr}");
    assert!(!stderr.contains("timed out"), "{stderr}");
}

/// A task seen working that is gone at the next read (completed and pruned
/// in one go, between two reads) cannot be reported as anything it was not
/// seen to be: `wait` says it vanished and how it was last seen, exit 3,
/// instead of calling it an unknown task.
fn wait_reports_a_task_that_vanished_unfinished_once() {
    let (_d, path) = store();
    let id = create(&path, &["--title", "INC-1042"]);
    let other = create(&path, &[]);
    let (child, err) = spawn_announced_wait(&path, &id);
    let store = Store::connect(&path).expect("a store URL");
    // One write: what wait reads next no longer has the task.
    let mut removed = None;
    rudder::store::Backend::transact(store.backend(), &mut |tasks| {
        removed = tasks.shift_remove(&id);
        Ok(true)
    })
    .unwrap();
    assert!(removed.is_some());
    let r = finished(child);
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert_eq!(r.code, 3, "{r:#?}\n{stderr}");
    assert!(!stderr.contains("unknown task"), "{stderr}");
    assert!(
        stderr.contains(&format!("task {id} vanished from"))
            && stderr.contains("while it was working (revision 1)")
            && stderr.contains("outcome is unknown"),
        "{stderr}"
    );
    // The store itself is fine.
    assert_eq!(run(&path, &["get", &other]).code, 0);
}

fn ago(d: TimeDelta) -> String {
    (Utc::now() - d).to_rfc3339()
}

/// A store written by the test, with timestamps in the past.
fn aged_store(path: &Path) -> Value {
    let task = |id: &str, status: &str, updated: Option<TimeDelta>| {
        let mut t = json!({"task_id": id, "status": status, "input_schema": null,
            "input_value": null, "result": null, "idempotency_key": null,
            "title": format!("task {id}"), "revision": 3, "history": []});
        if let Some(u) = updated {
            t["updated_at"] = json!(ago(u));
            t["created_at"] = json!(ago(u + TimeDelta::hours(1)));
        }
        t
    };
    let h = TimeDelta::hours;
    let mut tasks = vec![
        task("a0000000-idle-working", "working", Some(h(2))),
        task("b0000000-idle-waiting", "input_required", Some(h(3))),
        task("c0000000-active", "working", Some(TimeDelta::minutes(1))),
        task("d0000000-no-updated-at", "working", None),
        task("e0000000-done-long-ago", "completed", Some(h(5))),
        task("f0000000-live-lease", "working", Some(h(2))),
        task("g0000000-expired-lease", "working", Some(h(2))),
    ];
    tasks[1]["input_schema"] = json!({"type": "object"});
    tasks[5]["claimed_by"] = json!("worker-9");
    tasks[5]["lease_expires_at"] = json!((Utc::now() + h(1)).to_rfc3339());
    tasks[6]["claimed_by"] = json!("worker-7");
    tasks[6]["lease_expires_at"] = json!(ago(h(1)));
    let map: serde_json::Map<String, Value> = tasks
        .into_iter()
        .map(|t| (t["task_id"].as_str().unwrap().to_string(), t))
        .collect();
    let v = Value::Object(map);
    common::write_store(path, &serde_json::to_string_pretty(&v).unwrap());
    v
}

fn ids(v: &Value) -> Vec<&str> {
    let mut ids: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["task_id"].as_str().unwrap())
        .collect();
    ids.sort();
    ids
}

fn reclaim_dry_run_writes_nothing_once() {
    let (_d, path) = store();
    aged_store(&path);
    let before = common::store_state(&path);
    // A writer made the JSON file; its lock file goes, so that a dry run
    // that locked would make it again.
    let json_file = matches!(
        rudder::store::StoreUrl::parse(&path),
        Ok(rudder::store::StoreUrl::File(_))
    );
    let lock = path.with_file_name(format!(
        "{}.lock",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    if json_file {
        let _ = std::fs::remove_file(&lock);
    }
    let r = run(
        &path,
        &["reclaim", "--older-than", "15m", "--dry-run", "--json"],
    );
    assert_eq!(r.code, 0, "{r:#?}");
    let v = r.json();
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["older_than_ms"], 15 * 60 * 1000);
    assert_eq!(
        ids(&v["reclaimed"]),
        [
            "a0000000-idle-working",
            "b0000000-idle-waiting",
            "g0000000-expired-lease"
        ]
    );
    // Only the skips a person needs are listed; active tasks are counted.
    assert_eq!(
        ids(&v["skipped"]),
        ["d0000000-no-updated-at", "f0000000-live-lease"]
    );
    assert_eq!(v["active"], 1);
    for r in v["reclaimed"].as_array().unwrap() {
        assert_eq!(r["revision"], 3, "{r}");
    }
    let r = run(&path, &["reclaim", "--older-than", "15m", "--dry-run"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("Would reclaim 3 task(s)"), "{}", r.stdout);
    assert!(
        r.stdout.contains("Dry run: nothing was changed."),
        "{}",
        r.stdout
    );
    assert_eq!(
        common::store_state(&path),
        before,
        "a dry run wrote the store"
    );
    // A dry run is a read: over the JSON file it takes no lock. (SQLite
    // opens a connection under its writers' lock, and PostgreSQL has no
    // lock file: there the unchanged store above is the proof.)
    assert!(!json_file || !lock.exists(), "a dry run took the lock");
}

fn reclaim_fails_idle_tasks_with_a_readable_report_once() {
    let (_d, path) = store();
    let original = aged_store(&path);
    let r = run(&path, &["reclaim", "--older-than", "15m"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let out = &r.stdout;
    assert!(
        out.contains("Reclaimed 3 task(s) idle for 15m or more"),
        "{out}"
    );
    for line in [
        "a0000000-idle-working  was working",
        "b0000000-idle-waiting  was input_required",
        "g0000000-expired-lease  was working",
    ] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }
    assert!(
        out.contains("idle 2h 0m") && out.contains("idle 3h 0m"),
        "{out}"
    );
    assert!(out.contains("worker worker-7 stopped renewing"), "{out}");
    assert!(
        out.contains("Each is now failed with an error saying why."),
        "{out}"
    );
    assert!(out.contains("Left alone (2)"), "{out}");
    assert!(out.contains("no updated_at recorded"), "{out}");
    assert!(out.contains("lease held by worker-9"), "{out}");
    assert!(
        out.contains("1 unfinished task(s) updated within 15m left alone."),
        "{out}"
    );

    let tasks = Store::connect(&path).expect("a store URL").load().unwrap();
    for id in [
        "a0000000-idle-working",
        "b0000000-idle-waiting",
        "g0000000-expired-lease",
    ] {
        let t = &tasks[id];
        assert_eq!(t.status, Status::Failed, "{id}");
        let msg = t.error_message().unwrap();
        assert!(
            msg.starts_with("reclaimed: no update for") && msg.contains("threshold 15m"),
            "{msg}"
        );
        assert_eq!(t.error.as_ref().unwrap()["reclaimed"], true);
        assert_eq!(t.revision, 4);
        assert_eq!(t.history.last().unwrap().status, Status::Failed);
    }
    assert!(
        tasks["g0000000-expired-lease"]
            .error_message()
            .unwrap()
            .contains("worker-7")
    );
    for id in [
        "c0000000-active",
        "d0000000-no-updated-at",
        "f0000000-live-lease",
        "e0000000-done-long-ago",
    ] {
        let t = serde_json::to_value(&tasks[id]).unwrap();
        assert_eq!(t["status"], original[id]["status"], "{id}");
        assert_eq!(t["revision"], 3, "{id}");
    }
    // Nothing left to reclaim: a second run writes nothing.
    let before = common::store_state(&path);
    let r = run(&path, &["reclaim", "--older-than", "15m", "--json"]);
    assert_eq!(r.code, 0);
    assert_eq!(r.json()["reclaimed"], json!([]));
    assert_eq!(common::store_state(&path), before);
    let r = run(&path, &["reclaim", "--older-than", "15m"]);
    assert!(r.stdout.contains("nothing to reclaim"), "{}", r.stdout);
}

/// Terminal tasks of various ages and retentions.
fn prunable_store(path: &Path) {
    let task = |id: &str, status: &str, updated: Option<TimeDelta>, ttl: Option<TimeDelta>| {
        let mut t = json!({"task_id": id, "status": status, "input_schema": null,
            "input_value": null, "result": null, "idempotency_key": null, "revision": 2});
        if let Some(u) = updated {
            t["updated_at"] = json!(ago(u));
        }
        if let Some(ttl) = ttl {
            t["ttl_ms"] = json!(ttl.num_milliseconds());
        }
        t
    };
    let (d, h, m) = (TimeDelta::days, TimeDelta::hours, TimeDelta::minutes);
    let tasks = [
        task("p1-old-completed", "completed", Some(d(10)), None),
        task("p2-recent-completed", "completed", Some(d(1)), None),
        task("p3-failed-past-ttl", "failed", Some(h(2)), Some(h(1))),
        task(
            "p4-cancelled-within-ttl",
            "cancelled",
            Some(m(30)),
            Some(h(1)),
        ),
        task("p5-old-but-working", "working", Some(d(30)), None),
        task("p6-no-updated-at", "completed", None, None),
        task("p7-old-long-ttl", "completed", Some(d(10)), Some(d(30))),
    ];
    let map: serde_json::Map<String, Value> = tasks
        .into_iter()
        .map(|t| (t["task_id"].as_str().unwrap().to_string(), t))
        .collect();
    common::write_store(
        path,
        &serde_json::to_string_pretty(&Value::Object(map)).unwrap(),
    );
}

fn prune_removes_finished_tasks_by_ttl_and_by_age_once() {
    let (_d, path) = store();
    prunable_store(&path);
    let r = run(&path, &["prune", "--older-than", "7d", "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let v = r.json();
    assert_eq!(
        ids(&v["removed"]),
        ["p1-old-completed", "p3-failed-past-ttl"]
    );
    let rules: Vec<(&str, &str)> = v["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["task_id"].as_str().unwrap(), p["rule"].as_str().unwrap()))
        .collect();
    assert!(rules.contains(&("p1-old-completed", "older_than")));
    assert!(rules.contains(&("p3-failed-past-ttl", "ttl")));
    assert_eq!(ids(&v["skipped"]), ["p6-no-updated-at"]);
    let left: Vec<String> = Store::connect(&path)
        .expect("a store URL")
        .load()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        left,
        [
            "p2-recent-completed",
            "p4-cancelled-within-ttl",
            "p5-old-but-working",
            "p6-no-updated-at",
            "p7-old-long-ttl"
        ]
    );
    // Nothing more to prune: nothing written.
    let before = common::store_state(&path);
    let r = run(&path, &["prune", "--older-than", "7d"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("Nothing to prune."), "{}", r.stdout);
    assert!(r.stdout.contains("kept p6-no-updated-at"), "{}", r.stdout);
    assert_eq!(common::store_state(&path), before);
    // A shorter age takes the recent one too, but never a working task.
    let r = run(&path, &["prune", "--older-than", "12h"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains("Removed 1 finished task(s)") && r.stdout.contains("p2-recent-completed"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("older than the limit"), "{}", r.stdout);
    let left = Store::connect(&path).expect("a store URL").load().unwrap();
    assert!(left.contains_key("p5-old-but-working") && left.contains_key("p7-old-long-ttl"));
}

fn prune_by_ttl_set_at_create_once() {
    let (_d, path) = store();
    let id = create(&path, &["--ttl", "1ms"]);
    assert_eq!(run(&path, &["complete", &id]).code, 0);
    let keep = create(&path, &["--ttl", "1h"]);
    assert_eq!(run(&path, &["cancel", &keep]).code, 0);
    // The ttl runs from the completion: wait until the clock prune reads is
    // past it (by a whole millisecond more, whatever the rounding of ages).
    let completed_at = Store::connect(&path)
        .expect("a store URL")
        .get(&id)
        .unwrap()
        .updated_at
        .expect("a completed task has updated_at");
    let expired = wait_for(Duration::from_secs(20), || {
        (Utc::now() - completed_at >= TimeDelta::milliseconds(2)).then_some(())
    });
    assert!(expired.is_some(), "the clock never passed the 1ms ttl");
    let r = run(&path, &["prune", "--older-than", "30d"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains(&id) && r.stdout.contains("its ttl expired"),
        "{}",
        r.stdout
    );
    let left = Store::connect(&path).expect("a store URL").load().unwrap();
    assert!(!left.contains_key(&id) && left.contains_key(&keep));
}

fn hostile_text_from_the_store_never_reaches_the_terminal_once() {
    let (_d, path) = store();
    let id = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J-id";
    let old = ago(TimeDelta::days(30));
    // Each its own key: a PostgreSQL store keeps keys unique.
    let task = |id: &str, status: &str| {
        json!({"task_id": id, "status": status, "input_schema": null, "input_value": null,
        "result": null, "idempotency_key": format!("key\u{1b}[31m{status}"), "title": "t\u{1b}[5m",
        "status_message": "m\u{9b}31m", "updated_at": old, "claimed_by": "w\u{1b}[8m",
        "lease_expires_at": old, "revision": 1, "history": []})
    };
    let other = "done\u{1b}[2J-id";
    let file = json!({ id: task(id, "working"), other: task(other, "completed") });
    common::write_store(&path, &serde_json::to_string_pretty(&file).unwrap());
    let clean = |r: &Run, what: &str| {
        for s in [&r.stdout, &r.stderr] {
            assert!(
                !s.contains(['\u{1b}', '\u{7}', '\u{9b}']),
                "{what}: control characters reached the terminal: {s:?}"
            );
        }
    };
    for args in [
        vec!["list"],
        vec!["get", "evil"],
        vec!["heartbeat", "evil"],
        vec!["complete", "done"],
        vec!["reclaim", "--older-than", "1h", "--dry-run"],
        vec!["reclaim", "--older-than", "1h"],
        vec!["cancel", "evil"],
        vec!["wait", "evil", "--timeout", "10s"],
        vec!["cancel", "evil"],
        vec!["prune", "--older-than", "0s"],
    ] {
        let r = run(&path, &args);
        // `wait` on the cancelled task says so with its exit code, 8.
        assert!(matches!(r.code, 0 | 4 | 8), "{args:?}: {r:#?}");
        clean(&r, &args.join(" "));
    }
}

#[test]
fn json_usage_errors_from_argument_parsing_are_json_too() {
    let (_d, path) = store();
    let id = create(&path, &[]);
    // `input` without --set or --value, and an unknown flag, with --json.
    for args in [
        vec!["input", id.as_str(), "--json"],
        vec!["list", "--json", "--bogus"],
    ] {
        json_error(&run(&path, &args), 2, "usage");
    }
}

/// `depth` arrays one inside the other, as JSON text.
fn nested(depth: usize) -> String {
    "[".repeat(depth) + "1" + &"]".repeat(depth)
}

/// Issue 8: an accepted write must never make the store unreadable for
/// every process. Each way a value or the file could outgrow what readers
/// accept is refused (exit 2 for an argument, exit 6 for a store that would
/// grow too large), naming the flag or the limit; nothing is written and the
/// store stays readable.
#[test]
fn no_write_makes_the_store_unreadable() {
    let (_d, path) = store();
    let working = create(&path, &[]);
    let waiting = create(&path, &["--schema", r#"{"type": "object"}"#]);
    let limit = rudder::store::MAX_VALUE_DEPTH;
    // One level more than the store holds, as each flag takes it.
    let deep = nested(limit + 1);
    let deep_object = format!(r#"{{"type": "object", "default": {}}}"#, nested(limit));
    let too_deep: [(&str, Vec<&str>); 5] = [
        ("--request", vec!["create", "--request", &deep]),
        ("--schema", vec!["create", "--schema", &deep_object]),
        ("--result", vec!["complete", &working, "--result", &deep]),
        ("--value", vec!["input", &waiting, "--value", &deep_object]),
        (
            "--schema",
            vec!["request-input", &working, "--schema", &deep_object],
        ),
    ];
    for (flag, args) in &too_deep {
        let before = fingerprint(&path);
        let r = run(&path, args);
        assert_eq!(r.code, 2, "{flag}: {r:#?}");
        assert!(
            r.stderr.contains(flag) && r.stderr.contains(&format!("{limit} levels")),
            "{flag}: {}",
            r.stderr
        );
        assert_eq!(fingerprint(&path), before, "{flag}: the store was written");
        let mut json_args = args.clone();
        json_args.push("--json");
        json_error(&run(&path, &json_args), 2, "usage");
        assert_eq!(run(&path, &["list"]).code, 0);
    }
    // The issue's own example, 126 levels, and the deepest value accepted.
    let r = run(&path, &["create", "--request", &nested(126)]);
    assert_eq!(r.code, 2, "{r:#?}");
    let id = create(&path, &["--request", &nested(limit)]);
    let got = run(&path, &["get", &id, "--json"]);
    assert_eq!(got.code, 0, "{got:#?}");
    assert_eq!(got.json()["request"].to_string(), nested(limit));
    assert_eq!(run(&path, &["cancel", &working]).code, 0);
    assert_eq!(run(&path, &["prune", "--older-than", "0s"]).code, 0);

    // Growing the file past the limit every reader applies: refused, exit
    // 6, naming the limit (lowered here, so that the test writes kilobytes,
    // not 512 MiB).
    let size = std::fs::metadata(&path).unwrap().len();
    let cap = size + 6000;
    let capped = |args: &[&str]| -> Run {
        rudder()
            .arg("--store")
            .arg(&path)
            .args(args)
            .env("RUDDER_MAX_STORE_BYTES", cap.to_string())
            .output()
            .unwrap()
            .into()
    };
    let big = serde_json::to_string(&"x".repeat(4000)).unwrap();
    assert_eq!(capped(&["create", "--request", &big]).code, 0);
    let before = fingerprint(&path);
    let r = capped(&["create", "--request", &big]);
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(
        r.stderr
            .contains(&format!("more than the {cap} bytes a store may hold")),
        "{}",
        r.stderr
    );
    assert_eq!(fingerprint(&path), before);
    let r = capped(&["create", "--request", &big, "--json"]);
    json_error(&r, 6, "too_large");
    assert_eq!(r.json()["limit"], cap);
    assert_eq!(fingerprint(&path), before);
    assert!(common::files_starting_with(path.parent().unwrap(), "tasks.json.tmp.").is_empty());
    // Still readable, by every command, and writable within the limit.
    assert_eq!(capped(&["list"]).code, 0);
    assert_eq!(run(&path, &["list"]).code, 0);
    assert_eq!(capped(&["cancel", &waiting]).code, 0);
    // A limit that is not a size is a usage error, not silently 512 MiB.
    let r: Run = rudder()
        .arg("--store")
        .arg(&path)
        .args(["list"])
        .env("RUDDER_MAX_STORE_BYTES", "1GB")
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(r.stderr.contains("RUDDER_MAX_STORE_BYTES"), "{}", r.stderr);
}

/// Issue 8: a key given twice in a JSON argument is an error naming the
/// flag and the key, at any depth, not "the last one wins".
#[test]
fn a_key_given_twice_in_a_json_argument_is_a_usage_error() {
    let (_d, path) = store();
    let working = create(&path, &[]);
    let waiting = create(&path, &["--schema", r#"{"type": "object"}"#]);
    let cases: [(&str, Vec<&str>, &str); 5] = [
        (
            "--request",
            vec!["create", "--request", r#"{"a":1,"a":2}"#],
            "a",
        ),
        (
            "--schema",
            vec![
                "create",
                "--schema",
                r#"{"type": "object", "properties": {"s": {"type": "string", "type": "integer"}}}"#,
            ],
            "type",
        ),
        (
            "--result",
            vec![
                "complete",
                &working,
                "--result",
                r#"[{"ok": true, "detail": {"n": 1, "n": 1}}]"#,
            ],
            "n",
        ),
        (
            "--value",
            vec![
                "input",
                &waiting,
                "--value",
                r#"{"service": "a", "service": "b"}"#,
            ],
            "service",
        ),
        (
            "--schema",
            vec![
                "request-input",
                &working,
                "--schema",
                r#"{"required": ["x"], "required": []}"#,
            ],
            "required",
        ),
    ];
    for (flag, args, key) in &cases {
        let before = fingerprint(&path);
        let r = run(&path, args);
        assert_eq!(r.code, 2, "{flag}: {r:#?}");
        assert!(
            r.stderr.contains(&format!(
                "{flag}: the argument is refused: the key \"{key}\" appears twice"
            )),
            "{flag}: {}",
            r.stderr
        );
        assert_eq!(fingerprint(&path), before, "{flag}");
    }
    // From a file too, with where the key is.
    let file = path.with_file_name("result.json");
    std::fs::write(&file, r#"{"a": {"b": [0, {"c": 1, "c": 2}]}}"#).unwrap();
    let r = run(
        &path,
        &[
            "complete",
            &working,
            "--result",
            &format!("@{}", file.display()),
        ],
    );
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(
        r.stderr
            .contains("the key \"c\" appears twice in the object at /a/b/1"),
        "{}",
        r.stderr
    );
    // The same key in different objects is fine.
    assert_eq!(
        run(
            &path,
            &[
                "complete",
                &working,
                "--result",
                r#"{"a": {"a": 1}, "b": {"a": 2}}"#
            ]
        )
        .code,
        0
    );
}

/// Issue 8: numbers in a user's own JSON are stored and printed exactly as
/// given, beyond 64 bits and beyond a double's precision too.
#[test]
fn numbers_in_json_arguments_are_kept_exactly() {
    let (_d, path) = store();
    let exact = r#"{"big":12345678901234567890123,"neg":-98765432109876543210,"fine":0.1000000000000000000001,"two":1.50}"#;
    let id = create(&path, &["--request", exact]);
    let text = std::fs::read_to_string(&path).unwrap();
    for n in [
        "12345678901234567890123",
        "-98765432109876543210",
        "0.1000000000000000000001",
        "1.50",
    ] {
        assert!(text.contains(n), "{n} not in the file:\n{text}");
    }
    let got = run(&path, &["get", &id, "--json"]);
    assert_eq!(got.json()["request"].to_string(), exact);
    // The same create again (same key, same request) is a safe repeat.
    let keyed = create(&path, &["--key", "k", "--request", exact]);
    let again = run(
        &path,
        &["create", "--key", "k", "--request", exact, "--json"],
    );
    assert_eq!(again.code, 0, "{again:#?}");
    assert_eq!(again.json()["change"], "unchanged");
    assert_eq!(again.json()["task"]["task_id"], keyed.as_str());

    // An input typed by the schema: a big integer is an integer.
    let schema = r#"{"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}"#;
    let waiting = create(&path, &["--schema", schema]);
    let value = r#"{"n":123456789012345678901234567890}"#;
    let r = run(&path, &["input", &waiting, "--value", value, "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()["task"]["input_value"].to_string(), value);
    let r = run(&path, &["input", &waiting, "--value", value]);
    assert_eq!(r.code, 0, "a repeat of the same input: {r:#?}");

    let result = r#"{"total":18446744073709551616,"ratio":3.141592653589793238462643383279}"#;
    let r = run(&path, &["complete", &id, "--result", result, "--json"]);
    assert_eq!(r.json()["task"]["result"].to_string(), result);
    let r = run(&path, &["complete", &id, "--result", result, "--json"]);
    assert_eq!(r.json()["change"], "unchanged", "{r:#?}");
    assert_eq!(run(&path, &["list"]).code, 0);
}

/// Issue 8: a revision never wraps around to 0.
#[test]
fn a_task_at_the_largest_revision_is_refused_not_wrapped() {
    let (_d, path) = store();
    let id = create(&path, &[]);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("\"revision\": 1,", "\"revision\": 18446744073709551615,"),
    )
    .unwrap();
    let before = fingerprint(&path);
    let r = run(&path, &["heartbeat", &id]);
    assert_eq!(r.code, 4, "{r:#?}");
    assert!(
        r.stderr
            .contains("18446744073709551615, the largest a revision can be"),
        "{}",
        r.stderr
    );
    let r = run(&path, &["cancel", &id, "--json"]);
    let v = json_error(&r, 4, "revision_exhausted");
    assert_eq!(v["task"]["revision"], u64::MAX);
    assert_eq!(fingerprint(&path), before);
}

common::shared_backend_tests! {
    exit_0_for_success_and_for_a_safe_repeat: exit_0_for_success_and_for_a_safe_repeat_once,
    retrying_with_a_null_result_or_request_is_a_safe_repeat: retrying_with_a_null_result_or_request_is_a_safe_repeat_once,
    kinds_are_created_listed_and_shown: kinds_are_created_listed_and_shown_once,
    exit_2_for_usage_errors: exit_2_for_usage_errors_once,
    exit_3_for_unknown_or_ambiguous_ids: exit_3_for_unknown_or_ambiguous_ids_once,
    exit_4_for_refusals_with_the_current_state: exit_4_for_refusals_with_the_current_state_once,
    exit_5_for_input_that_does_not_match_the_schema: exit_5_for_input_that_does_not_match_the_schema_once,
    exit_124_when_wait_times_out: exit_124_when_wait_times_out_once,
    json_output_is_one_value_per_command: json_output_is_one_value_per_command_once,
    set_values_are_typed_by_the_schema: set_values_are_typed_by_the_schema_once,
    wait_returns_when_another_process_acts: wait_returns_when_another_process_acts_once,
    wait_exit_codes_say_how_the_task_ended: wait_exit_codes_say_how_the_task_ended_once,
    wait_reports_a_task_that_vanished_unfinished: wait_reports_a_task_that_vanished_unfinished_once,
    reclaim_dry_run_writes_nothing: reclaim_dry_run_writes_nothing_once,
    reclaim_fails_idle_tasks_with_a_readable_report: reclaim_fails_idle_tasks_with_a_readable_report_once,
    prune_removes_finished_tasks_by_ttl_and_by_age: prune_removes_finished_tasks_by_ttl_and_by_age_once,
    prune_by_ttl_set_at_create: prune_by_ttl_set_at_create_once,
    hostile_text_from_the_store_never_reaches_the_terminal: hostile_text_from_the_store_never_reaches_the_terminal_once,
}
