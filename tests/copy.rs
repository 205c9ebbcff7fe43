//! `rudder copy FROM TO`: file → SQLite → file gives back equal tasks
//! (history and unknown fields included), running it again is safe, and a
//! TO holding other tasks is refused untouched.

mod common;

use common::{run_plain, store_state};
use rudder::task::TaskMap;
use rudder::{Actor, NewTask, Store};
use serde_json::json;

fn copy(from: &std::path::Path, to: &std::path::Path) -> serde_json::Value {
    let r = run_plain(&[
        "copy",
        from.to_str().unwrap(),
        to.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{r:#?}");
    r.json()
}

/// A JSON store with unknown fields, odd values and a full history.
fn source(path: &std::path::Path) -> TaskMap {
    let store = Store::connect(path).expect("a store URL");
    for i in 0..25 {
        let t = store
            .create(NewTask {
                title: Some(format!("task {i}")),
                input_schema: (i % 3 == 0).then(|| json!({"type": "object", "required": ["x"]})),
                idempotency_key: Some(format!("key-{i}")),
                kind: (i % 2 == 0).then(|| format!("kind-{}", i % 4)),
                request: Some(json!({"n": i, "nested": {"a": [1, 2.5, "три"]}})),
                ..NewTask::default()
            })
            .unwrap()
            .task;
        if i % 3 == 0 {
            store
                .provide_input(&t.task_id, json!({"x": i}), None)
                .unwrap();
        }
        if i % 4 == 1 {
            store
                .complete(&t.task_id, json!({"ok": i}), Actor::Anyone)
                .unwrap();
        }
    }
    // Fields another tool wrote.
    let mut text: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    for (i, (_, t)) in text.as_object_mut().unwrap().iter_mut().enumerate() {
        t["owner"] = json!({"team": "支付", "i": i});
    }
    std::fs::write(path, serde_json::to_vec_pretty(&text).unwrap()).unwrap();
    store.load().unwrap()
}

#[test]
fn file_to_sqlite_to_file_gives_back_equal_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let (a, db, b) = (
        dir.path().join("a.json"),
        dir.path().join("tasks.db"),
        dir.path().join("b.json"),
    );
    let original = source(&a);
    assert!(original.values().all(|t| t.extra.contains_key("owner")));
    let r = copy(&a, &db);
    assert_eq!(
        (r["copied"].as_u64(), r["unchanged"].as_u64()),
        (Some(25), Some(0))
    );
    let in_db = Store::connect(&db).expect("a store URL").load().unwrap();
    assert_eq!(in_db, original, "file -> sqlite");
    assert_eq!(
        in_db.keys().collect::<Vec<_>>(),
        original.keys().collect::<Vec<_>>(),
        "store order"
    );
    // The kinds are in SQLite's indexed column too, not only the documents.
    let of_kind = rudder::store::PageQuery {
        kinds: vec!["kind-2".into()],
        ..Default::default()
    };
    let want: Vec<_> = original
        .values()
        .filter(|t| t.kind.as_deref() == Some("kind-2"))
        .collect();
    assert_eq!(want.len(), 6);
    assert_eq!(
        Store::connect(&db)
            .expect("a store URL")
            .page(&of_kind)
            .unwrap()
            .len(),
        want.len()
    );
    copy(&db, &b);
    assert_eq!(
        Store::connect(&b).expect("a store URL").load().unwrap(),
        original,
        "sqlite -> file"
    );

    // Again: nothing to do, nothing written.
    let before = store_state(&db);
    let r = copy(&a, &db);
    assert_eq!(
        (r["copied"].as_u64(), r["unchanged"].as_u64()),
        (Some(0), Some(25))
    );
    assert_eq!(store_state(&db), before);

    // FROM moved on: the next copy brings it forward.
    let first = original.keys().next().unwrap().clone();
    Store::connect(&a)
        .expect("a store URL")
        .heartbeat(&first, Some("later".into()), None, Actor::Anyone)
        .ok();
    Store::connect(&a)
        .expect("a store URL")
        .cancel(&first, None)
        .ok();
    let r = copy(&a, &db);
    assert_eq!(r["updated"].as_u64(), Some(1), "{r}");
    assert_eq!(
        Store::connect(&db).expect("a store URL").load().unwrap(),
        Store::connect(&a).expect("a store URL").load().unwrap()
    );
}

fn a_destination_holding_other_tasks_is_refused_untouched_once() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    source(&a);
    let to = common::store_in(&dir.path().join("to"));
    Store::connect(&to)
        .expect("a store URL")
        .create(NewTask::default())
        .unwrap();
    let before = store_state(&to);
    let r = run_plain(&["copy", a.to_str().unwrap(), to.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 4, "{r:#?}");
    assert_eq!(r.json()["error"], "copy_refused");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("does not have")
    );
    assert_eq!(store_state(&to), before);

    // A TO already in use (a newer revision than FROM's) is refused too.
    let to = common::store_in(&dir.path().join("used"));
    copy(&a, &to);
    let id = Store::connect(&to)
        .expect("a store URL")
        .load()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    Store::connect(&to)
        .expect("a store URL")
        .heartbeat(&id, None, None, Actor::Anyone)
        .ok();
    let before = store_state(&to);
    let r = run_plain(&["copy", a.to_str().unwrap(), to.to_str().unwrap()]);
    assert_eq!(r.code, 4, "{r:#?}");
    assert!(r.stderr.contains("in use"), "{}", r.stderr);
    assert_eq!(store_state(&to), before);

    // The same store twice is a usage error.
    let r = run_plain(&["copy", a.to_str().unwrap(), a.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:#?}");
}

/// A copy into SQLite killed (SIGKILL) after its first batches committed
/// leaves a store that opens, holding a prefix of FROM; running it again
/// completes it, and the result equals an uninterrupted copy.
#[test]
fn a_copy_killed_midway_then_run_again_gives_the_same_store() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("big.json");
    let n = 25_000;
    let mut tasks = TaskMap::new();
    for i in 0..n {
        let mut t = rudder::task::Task::new(
            format!("task-{i:06}"),
            [
                rudder::task::Status::Working,
                rudder::task::Status::InputRequired,
                rudder::task::Status::Completed,
            ][i % 3],
        );
        t.title = Some(format!("task {i}"));
        t.idempotency_key = Some(format!("key-{i}"));
        t.revision = 1 + (i % 4) as u64;
        tasks.insert(t.task_id.clone(), t);
    }
    std::fs::write(&from, rudder::store::encode(&tasks, 0)).unwrap();
    let to = dir.path().join("to.db");
    let mut child = common::rudder()
        .arg("copy")
        .arg(&from)
        .arg(&to)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed as soon as a first batch is in.
    let partial = common::wait_for(std::time::Duration::from_secs(120), || {
        let total = Store::connect(&to)
            .expect("a store URL")
            .counts()
            .map(|c| c.total())
            .unwrap_or(0);
        (total > 0).then_some(total)
    })
    .expect("a first batch committed");
    child.kill().unwrap();
    child.wait().unwrap();
    let after_kill = Store::connect(&to)
        .expect("a store URL")
        .load()
        .expect("the store opens");
    assert!(after_kill.len() >= partial);
    assert!(
        after_kill.len() < n,
        "the copy was killed before it ended ({} of {n})",
        after_kill.len()
    );
    assert!(
        after_kill.iter().zip(tasks.iter()).all(|(a, b)| a == b),
        "what is there is a prefix of FROM"
    );

    let r = copy(&from, &to);
    assert_eq!(r["copied"].as_u64(), Some((n - after_kill.len()) as u64));
    assert_eq!(r["unchanged"].as_u64(), Some(after_kill.len() as u64));
    let whole = dir.path().join("whole.db");
    copy(&from, &whole);
    let (resumed, fresh) = (
        Store::connect(&to).expect("a store URL"),
        Store::connect(&whole).expect("a store URL"),
    );
    assert_eq!(resumed.load().unwrap(), tasks);
    assert_eq!(resumed.load().unwrap(), fresh.load().unwrap());
    assert_eq!(resumed.counts().unwrap(), fresh.counts().unwrap());
    // Run once more: nothing to do.
    let r = copy(&from, &to);
    assert_eq!(r["unchanged"].as_u64(), Some(n as u64));
}

/// A FROM that breaks past the first read buffer (its tasks read a buffer
/// at a time) is refused with where it breaks, before anything is written:
/// TO is not even created, and a TO that exists keeps what it had.
#[test]
fn a_corrupt_source_is_refused_with_its_place_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("big.json");
    // The last task's status is not one.
    let line = common::write_store_with_a_bad_last_status(&from, 12_000);
    assert!(
        std::fs::metadata(&from).unwrap().len() > 10 << 20,
        "more than one buffer"
    );

    let to = dir.path().join("to.db");
    let r = run_plain(&[
        "copy",
        from.to_str().unwrap(),
        to.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 6, "{r:#?}");
    assert_eq!(r.json()["error"], "corrupt_store");
    assert_eq!(r.json()["line"].as_u64(), Some(line as u64), "{r:#?}");
    assert!(!to.exists(), "TO was created");

    let used = common::store_in(&dir.path().join("used"));
    let kept = Store::connect(&used)
        .expect("a store URL")
        .create(NewTask::default())
        .unwrap()
        .task;
    let before = store_state(&used);
    let r = run_plain(&["copy", from.to_str().unwrap(), used.to_str().unwrap()]);
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(r.stderr.contains(&format!("line {line}")), "{}", r.stderr);
    assert_eq!(store_state(&used), before);
    assert!(
        Store::connect(&used)
            .expect("a store URL")
            .load()
            .unwrap()
            .contains_key(&kept.task_id)
    );
}

common::shared_backend_tests! {
    a_destination_holding_other_tasks_is_refused_untouched: a_destination_holding_other_tasks_is_refused_untouched_once,
}
