//! Edges of the command line found in review: broken pipes, empty
//! environment variables, absurd durations, errors that quote the store.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

fn rudder() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rudder"));
    c.env_remove("RUDDER_STORE");
    c
}

fn create_many(store: &Path, n: usize) {
    let tasks: serde_json::Map<String, serde_json::Value> = (0..n)
        .map(|i| {
            let id = format!("{i:08x}-0000-4000-8000-000000000000");
            let task = serde_json::json!({"task_id": id, "status": "working",
                "input_schema": null, "input_value": null, "result": null,
                "idempotency_key": null, "title": "a task with a long enough title to fill the pipe"});
            (id, task)
        })
        .collect();
    std::fs::write(store, serde_json::to_vec(&tasks).expect("json")).expect("write");
}

#[test]
fn a_reader_that_goes_away_ends_list_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.json");
    create_many(&store, 5000);
    let mut child = rudder()
        .arg("--store")
        .arg(&store)
        .arg("list")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("line");
    assert!(first.starts_with("ID"));
    drop(out); // like `| head -1`
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("stderr");
    let status = child.wait().expect("wait");
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(status.code(), Some(101), "a panic: {err}");
}

#[test]
fn an_empty_rudder_store_means_unset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = rudder()
        .current_dir(dir.path())
        .env("RUDDER_STORE", "")
        .args(["create", "--title", "x"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        dir.path().join("tasks.json").exists(),
        "fell back to ./tasks.json"
    );
}

#[test]
fn absurd_durations_are_usage_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.json");
    for args in [
        vec!["reclaim", "--older-than", "584542046y 2859952616ms"],
        vec!["create", "--ttl", "1000y"],
        vec!["prune", "--older-than", "15"],
    ] {
        let out = rudder()
            .arg("--store")
            .arg(&store)
            .args(&args)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    assert!(!store.exists(), "nothing was written");
}

#[test]
fn interactive_commands_report_store_errors_inertly_with_exit_6() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("evil.json");
    std::fs::write(
        &store,
        "{\"a\": {\"task_id\": \"a\", \"status\": \"\\u001b]0;PWNED\\u0007\\u001b[31m\"}}",
    )
    .expect("write");
    let out = rudder()
        .arg("--store")
        .arg(&store)
        .args(["demo", "--speed", "5"])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert!(err.contains("evil.json"), "{err}");
}

#[test]
fn a_refused_operation_on_a_missing_store_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("typo/deep/tasks.json");
    for args in [
        vec!["cancel", "abc"],
        vec!["heartbeat", "abc"],
        vec!["reclaim", "--older-than", "1m"],
        vec!["prune", "--older-than", "1m"],
    ] {
        let out = rudder()
            .arg("--store")
            .arg(&store)
            .args(&args)
            .output()
            .expect("run");
        assert!(matches!(out.status.code(), Some(0 | 3)), "{args:?}");
    }
    assert!(
        !dir.path().join("typo").exists(),
        "no directory, no lock file"
    );
    // The first create makes the directory, the lock and the store.
    let out = rudder()
        .arg("--store")
        .arg(&store)
        .arg("create")
        .output()
        .expect("run");
    assert!(out.status.success());
    assert!(store.exists() && dir.path().join("typo/deep/tasks.json.lock").exists());
}

#[test]
fn a_task_id_that_appears_twice_is_corrupt_not_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.json");
    let text = "{\"a\": {\"task_id\": \"a\", \"status\": \"working\"},\n \"a\": {\"task_id\": \"a\", \"status\": \"failed\"}}";
    std::fs::write(&store, text).expect("write");
    for args in [vec!["list"], vec!["create"]] {
        let out = rudder()
            .arg("--store")
            .arg(&store)
            .args(&args)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{args:?}: {err}");
        assert!(
            err.contains("appears twice") && err.contains("line 2"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read_to_string(&store).expect("read"), text);
}

#[test]
fn an_unreadable_lock_timeout_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = rudder()
        .arg("--store")
        .arg(dir.path().join("tasks.json"))
        .env("RUDDER_LOCK_TIMEOUT", "soon")
        .arg("create")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("RUDDER_LOCK_TIMEOUT"));
    assert!(!dir.path().join("tasks.json").exists());
}

#[test]
fn read_only_is_accepted_before_and_after_any_command() {
    use clap::Parser;
    use rudder::cli::{Cli, Command};
    let top = Cli::try_parse_from(["rudder", "--read-only"]).expect("rudder --read-only");
    assert!(top.read_only && top.command.is_none());
    let sub = Cli::try_parse_from(["rudder", "watch", "--read-only"]).expect("watch --read-only");
    assert!(sub.read_only && matches!(sub.command, Some(Command::Watch(_))));
    // Global: every command takes it, before or after its name.
    let list = Cli::try_parse_from(["rudder", "list", "--read-only"]).expect("list --read-only");
    assert!(list.read_only);
}

/// `rudder … >/dev/full`: the command does its work, the answer cannot be
/// written, and that is exit 6 with a message on stderr saying so (and what
/// was done all the same), never a panic (exit 101).
#[test]
fn output_that_cannot_be_written_is_exit_6_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.json");
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full")
    };
    let run_full = |args: &[&str]| {
        let out = rudder()
            .arg("--store")
            .arg(&store)
            .args(args)
            .stdout(full())
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(6), "{args:?}: {err}");
        assert!(
            err.contains("cannot write the output to stdout") && err.contains("No space left"),
            "{args:?}: {err}"
        );
        err
    };
    for json in [false, true] {
        let mut args = vec!["create", "--title", "x"];
        if json {
            args.push("--json");
        }
        let err = run_full(&args);
        assert!(err.contains("the change stands: task "), "{err}");
        assert!(err.contains(" is now working (revision 1)"), "{err}");
    }
    // Both creates happened.
    let listed = rudder()
        .arg("--store")
        .arg(&store)
        .args(["list", "--json"])
        .output()
        .expect("run");
    let tasks: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    let tasks = tasks.as_array().expect("an array");
    assert_eq!(tasks.len(), 2);
    let id = tasks[0]["task_id"].as_str().expect("an id").to_string();
    for args in [
        vec!["list"],
        vec!["list", "--json"],
        vec!["get", &id],
        vec!["get", &id, "--json"],
        vec!["reclaim", "--older-than", "1h", "--dry-run"],
        vec!["--help"],
    ] {
        run_full(&args);
    }
    let err = run_full(&["cancel", &id, "--json"]);
    assert!(err.contains(" is now cancelled"), "{err}");
    run_full(&["wait", &id]);
    // An error that cannot be written as JSON keeps its own exit code and
    // is said on stderr instead.
    let out = rudder()
        .arg("--store")
        .arg(&store)
        .args(["get", "nope", "--json"])
        .stdout(full())
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("unknown task: nope"), "{err}");
}

/// The cap on durations is inclusive: `100y` is accepted, a second more is not.
#[test]
fn a_hundred_years_is_the_longest_duration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.json");
    for args in [
        vec!["create", "--ttl", "100y"],
        vec!["prune", "--older-than", "100y"],
        vec!["reclaim", "--older-than", "100y", "--dry-run"],
        vec!["reclaim", "--older-than", "36525d"],
    ] {
        let out = rudder()
            .arg("--store")
            .arg(&store)
            .args(&args)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
    for args in [
        vec!["prune", "--older-than", "100y 1s"],
        vec!["create", "--ttl", "101y"],
    ] {
        let out = rudder()
            .arg("--store")
            .arg(&store)
            .args(&args)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("at most 100 years"), "{err}");
    }
}

/// Giving up on the lock says how long in units a person reads (`1.0s`),
/// not the nanoseconds of the exact measurement.
#[test]
fn the_lock_timeout_message_is_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.json");
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.path().join("tasks.json.lock"))
        .expect("the lock file");
    lock.lock().expect("hold the store lock");
    let out = rudder()
        .arg("--store")
        .arg(&store)
        .env("RUDDER_LOCK_TIMEOUT", "1s")
        .args(["create", "--title", "x"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    let waited = err
        .split("gave up after ")
        .nth(1)
        .and_then(|rest| rest.split(" waiting for the store lock").next())
        .unwrap_or_else(|| panic!("no wait in {err}"));
    let seconds = waited
        .strip_suffix('s')
        .and_then(|n| n.split_once('.'))
        .filter(|(whole, tenth)| {
            !whole.is_empty()
                && whole.chars().all(|c| c.is_ascii_digit())
                && tenth.len() == 1
                && tenth.chars().all(|c| c.is_ascii_digit())
        });
    assert!(seconds.is_some(), "not like 1.0s: {waited:?} in {err}");
    assert!(!store.exists(), "nothing was written");
}
