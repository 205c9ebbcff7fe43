//! What the binary does with SQLite stores: files it must refuse
//! untouched (not a database, another application's database, a newer
//! schema), the schema created from an empty file, reads that never create
//! a store, every command over a `sqlite:` URL, ambiguous prefixes, `list`'s
//! pages, a reader without write access. The SQLite backend's own tests
//! (through the store) are in crates/store/tests/sqlite_store.rs.

mod common;
use std::path::Path;

use common::{CliKind, fingerprint, run};
use rudder::store::sqlite::{APPLICATION_ID, SCHEMA_VERSION};
use rudder::task::Status;
use rudder::{NewTask, Store};

/// Every kind of command refuses `path` with exit 6, writing nothing.
fn refused_untouched(path: &Path, expect: &str) {
    let before = fingerprint(path);
    let dir = path.parent().unwrap();
    let files_before = common::files_starting_with(dir, "");
    for args in [
        &["list"][..],
        &["create", "--title", "x"],
        &["get", "abc"],
        &["cancel", "abc"],
        &["reclaim", "--older-than", "0s"],
        &["prune", "--older-than", "0s"],
    ] {
        let r = run(path, args);
        assert_eq!(r.code, 6, "{args:?}: {r:#?}");
        assert!(r.stderr.contains(expect), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("left untouched"),
            "{args:?}: {}",
            r.stderr
        );
        let j = run(path, &[args, &["--json"]].concat());
        assert_eq!(j.code, 6, "{args:?} --json: {j:#?}");
        assert_eq!(j.json()["exit_code"], 6);
    }
    assert_eq!(fingerprint(path), before, "the file was written");
    assert_eq!(
        common::files_starting_with(dir, ""),
        files_before,
        "files appeared beside it"
    );
}

#[test]
fn a_file_that_is_not_a_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in [
        ("text.db", &b"not a database at all, just text\n"[..]),
        ("short.db", b"SQLite"),
        ("json.sqlite", b"{}"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        refused_untouched(&path, "not a SQLite database");
    }
}

#[test]
fn another_applications_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE tasks (id INTEGER PRIMARY KEY, what TEXT);")
            .unwrap();
    }
    refused_untouched(&path, "not a rudder store");

    let path = dir.path().join("app.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "application_id", 0x1234).unwrap();
    }
    refused_untouched(&path, "another application");
}

#[test]
fn a_store_from_a_newer_rudder_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    Store::connect(&path)
        .expect("a store URL")
        .create(NewTask::default())
        .unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        // Fold the WAL back so that the fingerprint covers everything.
        conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    }
    refused_untouched(&path, "newer rudder");
}

#[test]
fn an_empty_file_becomes_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    std::fs::write(&path, b"").unwrap();
    // Reading an empty file is an empty store, and writes nothing.
    let r = run(&path, &["list", "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json(), serde_json::json!([]));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    let id = common::create(&path, &["--title", "first"]);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let app: i32 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(
        (app, version, mode.as_str()),
        (APPLICATION_ID, SCHEMA_VERSION, "wal")
    );
    let changes: i64 = conn
        .query_row(
            "SELECT count(*) FROM changes WHERE task_id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(changes, 1);
}

#[test]
fn a_missing_database_is_read_as_empty_and_never_created_by_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/tasks.db");
    for args in [
        &["list"][..],
        &["get", "abc"],
        &["cancel", "abc"],
        &["reclaim", "--older-than", "0s"],
        &["prune", "--older-than", "0s"],
        &["heartbeat", "abc"],
    ] {
        run(&path, args);
    }
    assert!(!dir.path().join("sub").exists(), "a read created the store");
}

#[test]
fn every_command_runs_over_a_sqlite_url() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("store");
    let url = format!("sqlite:{}", file.display());
    let url = Path::new(&url);
    let schema =
        r#"{"type":"object","required":["service"],"properties":{"service":{"type":"string"}}}"#;
    let a = common::create(url, &["--schema", schema, "--key", "k", "--title", "A"]);
    assert_eq!(common::create(url, &["--schema", schema, "--key", "k"]), a);
    let b = common::create(url, &["--title", "B"]);
    let ok = |args: &[&str]| {
        let r = run(url, args);
        assert_eq!(r.code, 0, "{args:?}: {r:#?}");
        r
    };
    let list = ok(&["list", "--status", "input_required", "--json"]).json();
    assert_eq!(list.as_array().unwrap().len(), 1);
    ok(&["input", &a[..6], "--set", "service=payments"]);
    ok(&[
        "request-input",
        &a,
        "--schema",
        schema,
        "--message",
        "again?",
    ]);
    // `wait` says how it ended: 9 for a task that waits for input.
    let r = run(url, &["wait", &a, "--timeout", "5s", "--json"]);
    assert_eq!(r.code, 9, "{r:#?}");
    let waited = r.json();
    assert_eq!(waited["status"], "input_required");
    ok(&["input", &a, "--value", r#"{"service":"search"}"#]);
    ok(&["heartbeat", &a, "--message", "step 2"]);
    ok(&["complete", &a, "--result", "42"]);
    assert_eq!(ok(&["wait", &a, "--json"]).json()["status"], "completed");
    let dry = ok(&["reclaim", "--older-than", "0s", "--dry-run", "--json"]).json();
    assert_eq!(dry["reclaimed"][0]["task_id"], b.as_str());
    ok(&["reclaim", "--older-than", "0s"]);
    assert_eq!(ok(&["get", &b, "--json"]).json()["status"], "failed");
    let c = common::create(url, &[]);
    ok(&["fail", &c, "--error", "boom"]);
    let d = common::create(url, &[]);
    ok(&["cancel", &d]);
    let pruned = ok(&["prune", "--older-than", "0s", "--json"]).json();
    assert_eq!(pruned["removed"].as_array().unwrap().len(), 4);
    assert_eq!(ok(&["list", "--json"]).json(), serde_json::json!([]));
    assert!(file.exists() && !dir.path().join("store.json").exists());
}

#[test]
fn an_ambiguous_prefix_lists_a_bounded_number_of_candidates() {
    use rudder::store::Backend;
    common::each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = common::store_in(dir.path());
        let store = Store::connect(&path).expect("a store URL");
        store
            .backend()
            .transact(&mut |tasks| {
                for i in (0..30).rev() {
                    let t = rudder::Task::new(format!("same-{i:02}"), Status::Working);
                    tasks.insert(t.task_id.clone(), t);
                }
                tasks.insert("other".into(), rudder::Task::new("other", Status::Working));
                Ok(true)
            })
            .unwrap();
        let e = store.get("same-").unwrap_err();
        let rudder::StoreError::AmbiguousId {
            candidates, more, ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert!(*more);
        assert_eq!(candidates.len(), 20);
        let mut sorted = candidates.clone();
        sorted.sort();
        assert_eq!(&sorted, candidates);
        assert!(e.to_string().contains("more than 20"), "{e}");
        let e = store.get("same-1").unwrap_err();
        let rudder::StoreError::AmbiguousId {
            candidates, more, ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert!(!*more);
        assert_eq!(candidates.len(), 10);
        assert_eq!(store.get("same-29").unwrap().task_id, "same-29");
        assert_eq!(store.get("oth").unwrap().task_id, "other");
        assert_eq!(store.get("s").unwrap_err().cli_kind(), "ambiguous_id");
    });
}

fn list_pages_with_sort_limit_and_after_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::store_in(dir.path());
    let mut ids: Vec<String> = ["c", "a", "b", "d"]
        .iter()
        .map(|t| common::create(&path, &["--title", t]))
        .collect();
    let list = |args: &[&str]| -> Vec<String> {
        let r = run(&path, &[&["list", "--json"], args].concat());
        assert_eq!(r.code, 0, "{args:?}: {r:#?}");
        r.json()
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["task_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(list(&[]), ids);
    let by_title = list(&["--sort", "title"]);
    assert_eq!(
        by_title,
        [
            ids[1].clone(),
            ids[2].clone(),
            ids[0].clone(),
            ids[3].clone()
        ]
    );
    assert_eq!(list(&["--sort", "title", "--limit", "2"]), by_title[..2]);
    assert_eq!(
        list(&["--sort", "title", "--limit", "2", "--after", &by_title[1]]),
        by_title[2..]
    );
    // Newest first: the last created comes first.
    assert_eq!(
        list(&["--sort", "updated", "--limit", "1"]),
        [ids[3].clone()]
    );
    ids.sort();
    assert_eq!(list(&["--sort", "id"]), ids);
    let r = run(&path, &["list", "--sort", "size", "--json"]);
    assert_eq!(r.code, 2, "{r:#?}");
}

/// Issue 30, item 7: a reader that may not create `-wal` and `-shm` beside
/// the database (a read-only mount, another user's directory) reads the
/// store, idle (no `-wal`: the last connection deleted it) and in use (a
/// `-wal` and `-shm` it reads through), and writes nothing there.
#[test]
fn a_reader_without_write_access_to_the_directory_reads_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    std::fs::create_dir(&src).expect("mkdir");
    let db = src.join("t.db");
    let id = common::create(&db, &["--title", "hello"]);
    let view = match common::ReadOnlyView::of(&src, &dir.path().join("view")) {
        Ok(v) => v,
        Err(why) => {
            eprintln!(
                "SKIPPED a_reader_without_write_access...: cannot set up a read-only view: {why}"
            );
            return;
        }
    };
    let ro = view.path().join("t.db");
    let names = || {
        let mut n: Vec<String> = std::fs::read_dir(&src)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    // Idle: the database alone (and the writers' lock file).
    assert_eq!(names(), ["t.db", "t.db.lock"]);
    let r = run(&ro, &["list", "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()[0]["task_id"], id.as_str(), "{r:#?}");
    let message = |r: &common::Run| r.json()["status_message"].clone();
    let get = |store: &Path| {
        let r = run(store, &["get", &id, "--json"]);
        assert_eq!(r.code, 0, "{r:#?}");
        r
    };
    assert_eq!(get(&ro).json()["title"], "hello");

    // In use: another connection keeps -wal and -shm; the reader reads the
    // commit that is only in the WAL.
    let holder = rusqlite::Connection::open(&db).expect("open");
    let _: i64 = holder
        .query_row("SELECT count(*) FROM tasks", [], |r| r.get(0))
        .expect("read");
    let w = run(
        &db,
        &["heartbeat", &id, "--message", "while open", "--json"],
    );
    assert_eq!(w.code, 0, "{w:#?}");
    assert!(src.join("t.db-wal").exists(), "{:?}", names());
    assert_eq!(message(&get(&ro)), "while open");
    drop(holder);

    // Idle again, with a later commit checkpointed into the file.
    let w = run(&db, &["heartbeat", &id, "--message", "after", "--json"]);
    assert_eq!(w.code, 0, "{w:#?}");
    assert_eq!(names(), ["t.db", "t.db.lock"]);
    assert_eq!(message(&get(&ro)), "after");
    // A write through the read-only view is refused, and writes nothing.
    let before = common::store_state(&db);
    let r = run(&ro, &["heartbeat", &id, "--json"]);
    assert_eq!(r.code, 6, "{r:#?}");
    common::assert_store_untouched(&before, &db, "a write without access");
}

common::shared_backend_tests! {
    list_pages_with_sort_limit_and_after: list_pages_with_sort_limit_and_after_once,
}
