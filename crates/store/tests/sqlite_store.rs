//! What only the SQLite backend has, through the store: the indexed
//! queries agreeing with the in-memory reference on every backend, the
//! stalled count a range of an index, a row's unknown status reported as
//! corrupt, a read never waiting for a write of the same process. What the
//! binary does with SQLite files (refusing them untouched, creating the
//! schema, every command over a `sqlite:` URL) is tests/sqlite_cli.rs's.

use std::time::Duration;

use rudder_model::task::{Actor, Status};
use rudder_store::query::{PageQuery, SortKey, page_in_memory};
use rudder_store::{NewTask, Store};

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
    let path = rudder_testkit::stores::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
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
                    let ids = |v: Vec<rudder_model::task::Task>| -> Vec<String> {
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
        reference.sort_by(|a, b| rudder_store::query::compare(sort, a, b));
        if descending {
            reference.reverse();
        }
        let reference: Vec<String> = reference.into_iter().map(|t| t.task_id).collect();
        assert_eq!(seen, reference, "{sort:?}");
    }
}

/// A working task is stalled once its lease lapsed (`until <= now`);
/// waiting or finished tasks with an old lease, and a working task never
/// claimed, are not. The count covers the whole store.
fn the_stalled_count_agrees_with_the_tasks_once() {
    use chrono::{TimeDelta, Utc};
    use rudder_model::task::{Task, TaskMap};
    use rudder_store::Backend;
    let dir = tempfile::tempdir().unwrap();
    let path = rudder_testkit::stores::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
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
    if rudder_testkit::stores::kind().has_files() {
        let missing =
            Store::connect(rudder_testkit::stores::store_in(empty.path())).expect("a store URL");
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
    Store::connect(&path)
        .expect("a store URL")
        .create(NewTask::default())
        .unwrap();
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
    let store = Store::connect(&path).expect("a store URL");
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
            Err(rudder_store::StoreError::Corrupt { message, .. }) => {
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
    use rudder_store::Backend as _;
    use std::sync::mpsc;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(dir.path().join("tasks.db")).expect("a store URL");
    assert!(store.quick_reads(), "SQLite reads are quick");
    assert!(
        !Store::connect(dir.path().join("tasks.json"))
            .expect("a store URL")
            .quick_reads()
    );
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

rudder_testkit::backend_tests! {
    pages_and_counts_agree_with_the_reference_on_every_backend: pages_and_counts_agree_with_the_reference_on_every_backend_once,
    the_stalled_count_agrees_with_the_tasks_on_every_backend: the_stalled_count_agrees_with_the_tasks_once,
}
