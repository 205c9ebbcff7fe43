//! What only the SQLite backend has: files it must refuse untouched (not a
//! database, another application's database, a newer schema), the schema
//! created from an empty file, and the indexed queries agreeing with the
//! in-memory reference on both backends.

mod common;

use rudder::store::Open as _;
use std::path::Path;
use std::time::Duration;

use common::{CliKind, fingerprint, run};
use rudder::store::query::{PageQuery, SortKey, page_in_memory};
use rudder::store::sqlite::{APPLICATION_ID, SCHEMA_VERSION};
use rudder::task::Status;
use rudder::{Actor, NewTask, Store};

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
    Store::open(&path).create(NewTask::default()).unwrap();
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

/// A store with a little of everything, made through `store`.
fn varied(store: &Store) {
    let now = chrono::Utc::now();
    for i in 0..60u32 {
        let title = match i % 4 {
            // LIKE's own wildcards, matched as text.
            _ if i == 10 => Some("50% off_now".to_string()),
            0 => None,
            1 => Some(format!("t{}", i % 7)),
            _ => Some(format!("title {}", 60 - i)),
        };
        let task = store
            .create(NewTask {
                title,
                input_schema: (i % 5 == 0).then(|| serde_json::json!({"type": "object"})),
                idempotency_key: (i % 3 == 0).then(|| format!("key-{i}")),
                kind: match i % 4 {
                    0 => Some("diagnose"),
                    1 => Some("backup"),
                    3 => Some("diag"),
                    _ => None,
                }
                .map(str::to_string),
                ..NewTask::default()
            })
            .unwrap()
            .task;
        match i % 6 {
            1 => {
                store
                    .complete(&task.task_id, serde_json::json!(i), Actor::Anyone)
                    .ok();
            }
            2 => {
                store
                    .claim(&task.task_id, "w", Duration::from_secs(60))
                    .ok();
            }
            3 => {
                store.cancel(&task.task_id, None).unwrap();
            }
            4 => {
                store
                    .heartbeat(&task.task_id, Some("beat".into()), None, Actor::Anyone)
                    .ok();
            }
            _ => {}
        }
    }
    let _ = now;
}

fn pages_and_counts_agree_with_the_reference_on_every_backend_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::store_in(dir.path());
    let store = Store::open(&path);
    varied(&store);
    let all: Vec<_> = store.load().unwrap().into_values().collect();
    let counts = store.counts().unwrap();
    for s in Status::ALL {
        let n = all.iter().filter(|t| t.status == s).count();
        assert_eq!(counts.get(s), n, "{s}");
    }
    let filters = [
        vec![],
        vec![Status::Working],
        vec![Status::InputRequired, Status::Cancelled],
    ];
    let mut anchors: Vec<Option<String>> = vec![None, Some("zzz".into()), Some("0".into())];
    anchors.extend(all.iter().step_by(7).map(|t| Some(t.task_id.clone())));
    for sort in [
        SortKey::Store,
        SortKey::Updated,
        SortKey::Created,
        SortKey::Title,
        SortKey::Id,
    ] {
        for (statuses, kinds) in filters.iter().flat_map(|s| {
            let kinds: [&[&str]; 3] = [&[], &["diagnose"], &["backup", "diag", "nope"]];
            kinds.map(|k| (s, k.iter().map(|k| k.to_string()).collect::<Vec<_>>()))
        }) {
            for after in &anchors {
                for (limit, descending, text) in [
                    (None, false, None),
                    (Some(0), false, None),
                    (Some(1), false, None),
                    (Some(5), false, None),
                    (None, true, None),
                    (Some(5), true, None),
                    (None, false, Some("TITLE 1")),
                    (Some(3), true, Some("t1")),
                    (None, false, Some("beat")),
                    (None, true, Some("key-")),
                    (None, false, Some("cancel")),
                    (None, false, Some("%")),
                    (None, false, Some("_")),
                    (Some(2), false, Some("")),
                ] {
                    let q = PageQuery {
                        statuses: statuses.clone(),
                        kinds: kinds.clone(),
                        sort,
                        limit,
                        after: after.clone(),
                        descending,
                        text: text.map(str::to_string),
                    };
                    let ids = |v: Vec<rudder::Task>| -> Vec<String> {
                        v.into_iter().map(|t| t.task_id).collect()
                    };
                    assert_eq!(
                        ids(store.page(&q).unwrap()),
                        ids(page_in_memory(all.clone(), &q)),
                        "{q:?}"
                    );
                }
            }
        }
    }
    // Paging through in steps of 7 gives every task once, in order, and
    // backwards in reverse order.
    for (sort, descending) in [
        (SortKey::Updated, false),
        (SortKey::Title, false),
        (SortKey::Created, true),
        (SortKey::Updated, true),
    ] {
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let page = store
                .page(&PageQuery {
                    sort,
                    limit: Some(7),
                    after: after.clone(),
                    descending,
                    ..PageQuery::default()
                })
                .unwrap();
            let Some(last) = page.last() else { break };
            after = Some(last.task_id.clone());
            seen.extend(page.into_iter().map(|t| t.task_id));
        }
        let mut reference = all.clone();
        reference.sort_by(|a, b| rudder::store::query::compare(sort, a, b));
        if descending {
            reference.reverse();
        }
        let reference: Vec<String> = reference.into_iter().map(|t| t.task_id).collect();
        assert_eq!(seen, reference, "{sort:?}");
    }
}

#[test]
fn an_ambiguous_prefix_lists_a_bounded_number_of_candidates() {
    use rudder::store::Backend;
    common::each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = common::store_in(dir.path());
        let store = Store::open(&path);
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

/// A working task is stalled once its lease lapsed (`until <= now`);
/// waiting or finished tasks with an old lease, and a working task never
/// claimed, are not. The count covers the whole store.
fn the_stalled_count_agrees_with_the_tasks_once() {
    use chrono::{TimeDelta, Utc};
    use rudder::store::Backend;
    use rudder::task::{Task, TaskMap};
    let dir = tempfile::tempdir().unwrap();
    let path = common::store_in(dir.path());
    let store = Store::open(&path);
    let base = Utc::now();
    let mut tasks = TaskMap::new();
    for i in 0..300u32 {
        let status = [
            Status::Working,
            Status::Working,
            Status::InputRequired,
            Status::Completed,
            Status::Failed,
        ][i as usize % 5];
        let mut t = Task::new(format!("{i:08x}-0000-4000-8000-000000000000"), status);
        t.revision = 1;
        t.created_at = Some(base);
        t.updated_at = Some(base);
        // Leases from 150 s ago to 149 s ahead (some at a whole second,
        // some between), and every seventh task never claimed.
        if i % 7 != 0 {
            t.claimed_by = Some("w".into());
            t.lease_expires_at = Some(
                base + TimeDelta::seconds(i64::from(i) - 150)
                    + TimeDelta::microseconds(i64::from(i % 3) * 250),
            );
        }
        tasks.insert(t.task_id.clone(), t);
    }
    store
        .backend()
        .transact(&mut |all| {
            *all = tasks.clone();
            Ok(true)
        })
        .unwrap();
    let loaded = store.load().unwrap();
    let edge = loaded
        .values()
        .find(|t| t.status == Status::Working && t.lease_expires_at.is_some())
        .and_then(|t| t.lease_expires_at)
        .unwrap();
    for now in [
        base - TimeDelta::hours(1),
        base,
        edge,
        edge - TimeDelta::microseconds(1),
        base + TimeDelta::seconds(30),
        base + TimeDelta::hours(1),
    ] {
        let expected = loaded.values().filter(|t| t.stalled(now)).count();
        assert_eq!(store.stalled(now).unwrap(), expected, "at {now}");
    }
    assert!(store.stalled(base).unwrap() > 0);
    // A lease renewed is no longer stalled; a stalled task that finishes
    // leaves the count.
    let stalled: Vec<String> = loaded
        .values()
        .filter(|t| t.stalled(base))
        .map(|t| t.task_id.clone())
        .take(2)
        .collect();
    let before = store.stalled(base).unwrap();
    store
        .backend()
        .transact(&mut |all| {
            let t = all.get_mut(&stalled[0]).unwrap();
            t.lease_expires_at = Some(base + TimeDelta::minutes(5));
            t.revision += 1;
            let t = all.get_mut(&stalled[1]).unwrap();
            t.status = Status::Failed;
            t.revision += 1;
            Ok(true)
        })
        .unwrap();
    assert_eq!(store.stalled(base).unwrap(), before - 2);
    // A store that does not exist has none (and is not created).
    let empty = tempfile::tempdir().unwrap();
    if common::kind() != common::Kind::Postgres {
        let missing = Store::open(common::store_in(empty.path()));
        assert_eq!(missing.stalled(base).unwrap(), 0);
        assert!(std::fs::read_dir(empty.path()).unwrap().next().is_none());
    }
}

/// The stalled count (asked by the TUI once a second) is a range of the
/// (status, lease) index, not a walk over the working tasks.
#[test]
fn the_stalled_count_is_a_range_of_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    Store::open(&path).create(NewTask::default()).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let plan: Vec<String> = conn
        .prepare(
            "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM tasks \
             WHERE status = 'working' AND lease_expires_at <= ?1",
        )
        .unwrap()
        .query_map(["2026-01-01T00:00:00.000000000Z"], |r| {
            r.get::<_, String>(3)
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        plan.iter()
            .any(|p| p.contains("tasks_by_status_lease") && p.contains("lease_expires_at<?")),
        "{plan:?}"
    );
}

/// A row whose status no rudder writes (a hand-edited database) is
/// reported as corrupt by every read of the column, as PostgreSQL reports
/// it (`tests/postgres_store.rs`), never read as another status.
#[test]
fn an_unknown_status_in_a_row_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.db");
    let store = Store::open(&path);
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "UPDATE tasks SET status = 'bogus'; INSERT INTO counts (status, n) VALUES ('bogus', 1)",
        )
        .unwrap();
    }
    for result in [
        store.get(&id).map(|_| ()),
        store.cancel(&id, None).map(|_| ()),
        store.counts().map(|_| ()),
    ] {
        match result {
            Err(rudder::StoreError::Corrupt { message, .. }) => {
                assert!(message.contains("unknown status \"bogus\""), "{message}")
            }
            other => panic!("expected a corrupt store, got {other:?}"),
        }
    }
}

/// A read has a connection of its own: it never queues behind a write of
/// the same store in this process (`rudder mcp` reads on its async
/// threads, where such a wait would stall every client).
#[test]
fn a_read_does_not_wait_for_a_write_of_the_same_process() {
    use rudder::store::Backend as _;
    use std::sync::mpsc;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("tasks.db"));
    assert!(store.quick_reads(), "SQLite reads are quick");
    assert!(!Store::open(dir.path().join("tasks.json")).quick_reads());
    let id = store
        .create(NewTask {
            title: Some("held behind a write".into()),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;
    let (inside, writing) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let (store, id) = (&store, &id);
    std::thread::scope(|s| {
        let writer = s.spawn(move || {
            store.backend().transaction(&mut |_| {
                inside.send(()).unwrap();
                // Held until the read is done, or long after the test gave up.
                let _ = released.recv_timeout(Duration::from_secs(60));
                Ok(false)
            })
        });
        writing.recv().unwrap();
        let (read, got) = mpsc::channel();
        let reader = s.spawn(move || read.send(store.get(id).map(|t| t.task_id)));
        let answer = got.recv_timeout(Duration::from_secs(20));
        release.send(()).unwrap();
        reader.join().unwrap().unwrap();
        writer.join().unwrap().unwrap();
        assert_eq!(&answer.expect("the read waited for the write").unwrap(), id);
    });
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

common::backend_tests! {
    pages_and_counts_agree_with_the_reference_on_every_backend: pages_and_counts_agree_with_the_reference_on_every_backend_once,
    list_pages_with_sort_limit_and_after: list_pages_with_sort_limit_and_after_once,
    the_stalled_count_agrees_with_the_tasks_on_every_backend: the_stalled_count_agrees_with_the_tasks_once,
}
