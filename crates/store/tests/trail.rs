//! The trail on every backend: who did what is recorded on each history
//! entry (actor, face, reason, the fields an answer gave), read back
//! oldest first through the seam, filtered by task, time and actor, paged
//! without loss, and agreeing with the in-memory reference read from the
//! tasks themselves. Pruning a task removes its trail. That `rudder copy`
//! carries it is the root's tests/trail_cli.rs.

use std::time::Duration;

use chrono::Utc;
use rudder_model::task::{Face, Status};
use rudder_store::TrailQuery;
use rudder_store::{NewTask, Store};
use rudder_testkit::trail::{night, person, reference, schema};
use serde_json::json;

fn every_write_records_its_author_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(rudder_testkit::stores::store_in(dir.path())).unwrap();
    let (asked, cancelled, worked) = night(&store);

    let all = store.trail(&TrailQuery::default()).unwrap();
    assert_eq!(all, reference(&store, &TrailQuery::default()));
    assert_eq!(all.len(), 6, "{all:#?}");
    let find = |id: &str, status: Status| {
        all.iter()
            .find(|e| e.task_id == id && e.entry.status == status)
            .unwrap_or_else(|| panic!("{id} {status}: {all:#?}"))
    };
    let created = find(&asked, Status::InputRequired);
    assert_eq!(created.entry.actor.as_deref(), Some("ops-bot"));
    assert_eq!(created.entry.face, Some(Face::Cli));
    assert_eq!(created.before, None);
    let answer = find(&asked, Status::Working);
    assert_eq!(answer.entry.actor.as_deref(), Some("ann"));
    assert_eq!(answer.entry.face, Some(Face::Tui));
    assert_eq!(answer.entry.fields, ["service", "note"]);
    assert_eq!(answer.before, Some(Status::InputRequired));
    let text = serde_json::to_string(&answer.entry).unwrap();
    assert!(
        !text.contains("payments"),
        "values stay out of the trail: {text}"
    );
    let cancel = find(&cancelled, Status::Cancelled);
    assert_eq!(cancel.entry.actor.as_deref(), Some("bob"));
    assert_eq!(cancel.entry.reason.as_deref(), Some("duplicate of INC-7"));
    let done = find(&worked, Status::Completed);
    assert_eq!(done.entry.actor.as_deref(), Some("w#1"));
    assert_eq!(done.entry.face, Some(Face::Worker));
    // Oldest first.
    assert!(all.windows(2).all(|w| w[0].key() < w[1].key()));
}

fn the_trail_filters_and_pages_like_the_reference_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(rudder_testkit::stores::store_in(dir.path())).unwrap();
    let (asked, ..) = night(&store);
    let mid = store.load().unwrap()[&asked].history[1].at;
    for q in [
        TrailQuery {
            task: Some(asked.clone()),
            ..Default::default()
        },
        TrailQuery {
            actor: Some("ann".into()),
            ..Default::default()
        },
        TrailQuery {
            actor: Some("nobody".into()),
            ..Default::default()
        },
        TrailQuery {
            since: Some(mid),
            ..Default::default()
        },
        TrailQuery {
            since: Some(Utc::now() + chrono::TimeDelta::hours(1)),
            ..Default::default()
        },
    ] {
        assert_eq!(store.trail(&q).unwrap(), reference(&store, &q), "{q:?}");
    }
    // Pages of two follow on from their last key: nothing lost or twice.
    let mut q = TrailQuery {
        limit: Some(2),
        ..Default::default()
    };
    let mut paged = Vec::new();
    loop {
        let page = store.trail(&q).unwrap();
        let Some(last) = page.last() else { break };
        q.after = Some(last.key());
        paged.extend(page);
    }
    assert_eq!(paged, store.trail(&TrailQuery::default()).unwrap());
}

fn a_reclaim_records_who_and_why_and_a_prune_removes_the_trail_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(rudder_testkit::stores::store_in(dir.path())).unwrap();
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    let carol = store.by(person("carol", Face::Tui));
    let report = carol
        .reclaim_because(Duration::ZERO, false, Some("worker host died"))
        .unwrap();
    assert_eq!(report.reclaimed.len(), 1);
    let entries = store
        .trail(&TrailQuery {
            task: Some(id.clone()),
            ..Default::default()
        })
        .unwrap();
    let last = entries.last().unwrap();
    assert_eq!(last.entry.status, Status::Failed);
    assert_eq!(last.entry.actor.as_deref(), Some("carol"));
    assert_eq!(last.entry.reason.as_deref(), Some("worker host died"));
    assert!(
        last.entry
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("reclaimed")),
        "{last:?}"
    );
    store.prune(Duration::ZERO).unwrap();
    assert_eq!(store.trail(&TrailQuery::default()).unwrap(), []);
}

fn a_store_without_authors_reads_as_unknown_actors_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(rudder_testkit::stores::store_in(dir.path())).unwrap();
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    store.cancel(&id, None).unwrap();
    let all = store.trail(&TrailQuery::default()).unwrap();
    assert_eq!(all.len(), 2);
    assert!(
        all.iter()
            .all(|e| e.entry.actor.is_none() && e.entry.face.is_none())
    );
}

/// Two people answer one question at once, each at the revision they saw:
/// exactly one answer is taken, and the trail says whose.
fn two_people_answering_at_once_one_wins_and_the_trail_says_whose_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = rudder_testkit::stores::store_in(dir.path());
    let store = Store::connect(&path).unwrap();
    for round in 0..5 {
        let made = store
            .create(NewTask {
                input_schema: Some(schema()),
                ..NewTask::default()
            })
            .unwrap()
            .task;
        let barrier = std::sync::Barrier::new(2);
        let results: Vec<(
            String,
            Result<rudder_store::Outcome, rudder_store::StoreError>,
        )> = std::thread::scope(|s| {
            let racers: Vec<_> = ["ann", "bob"]
                .into_iter()
                .map(|name| {
                    let (path, id, barrier) = (&path, &made.task_id, &barrier);
                    s.spawn(move || {
                        // A process of its own, as two people's are.
                        let mine = Store::connect(path).unwrap().by(person(name, Face::Tui));
                        barrier.wait();
                        let value = json!({"service": format!("{name}-{round}")});
                        (
                            name.to_string(),
                            mine.provide_input(id, value, Some(made.revision)),
                        )
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let won: Vec<&String> = results
            .iter()
            .filter(|(_, r)| {
                r.as_ref()
                    .is_ok_and(|o| o.change == rudder_model::task::Change::Applied)
            })
            .map(|(n, _)| n)
            .collect();
        assert_eq!(won.len(), 1, "exactly one answer is taken: {results:?}");
        let task = store.get(&made.task_id).unwrap();
        assert_eq!(
            task.input_value,
            Some(json!({"service": format!("{}-{round}", won[0])}))
        );
        let answers: Vec<_> = store
            .trail(&TrailQuery {
                task: Some(made.task_id.clone()),
                ..Default::default()
            })
            .unwrap()
            .into_iter()
            .filter(|e| !e.entry.fields.is_empty())
            .collect();
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0].entry.actor.as_deref(), Some(won[0].as_str()));
    }
}

rudder_testkit::backend_tests! {
    every_write_records_its_author: every_write_records_its_author_once,
    the_trail_filters_and_pages_like_the_reference: the_trail_filters_and_pages_like_the_reference_once,
    a_reclaim_records_who_and_why_and_a_prune_removes_the_trail: a_reclaim_records_who_and_why_and_a_prune_removes_the_trail_once,
    a_store_without_authors_reads_as_unknown_actors: a_store_without_authors_reads_as_unknown_actors_once,
    two_people_answering_at_once_one_wins_and_the_trail_says_whose: two_people_answering_at_once_one_wins_and_the_trail_says_whose_once,
}

/// A SQLite store from before the trail (schema version 5) is read as it
/// is, its trail read from the tasks; the first write migrates it and
/// fills the table from every task already there.
#[test]
fn a_sqlite_store_from_before_the_trail_is_read_then_migrated_and_filled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    let store = Store::connect(&path).unwrap();
    night(&store);
    let all = store.trail(&TrailQuery::default()).unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TRIGGER trail_of_new; DROP TRIGGER trail_of_changed; \
         DROP TRIGGER trail_of_removed; DROP TABLE trail; PRAGMA user_version = 5;",
    )
    .unwrap();
    let store = Store::connect(&path).unwrap();
    assert_eq!(
        store.trail(&TrailQuery::default()).unwrap(),
        all,
        "read from the tasks"
    );
    let later = store.create(NewTask::default()).unwrap().task.task_id;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 6);
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM trail", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        rows as usize,
        all.len() + 1,
        "the old tasks' entries and the new one's"
    );
    let now = store.trail(&TrailQuery::default()).unwrap();
    assert_eq!(now, reference(&store, &TrailQuery::default()));
    assert_eq!(now.last().map(|e| e.task_id.as_str()), Some(later.as_str()));
}

/// The same for PostgreSQL: a store of version 6 (before `rudder_trail`)
/// is read from the tasks; a write migrates it to 7 and fills the table.
#[test]
fn a_postgres_store_from_before_the_trail_is_read_then_migrated_and_filled() {
    if !rudder_testkit::pg::available() {
        return;
    }
    let url = rudder_testkit::pg::store_url();
    let store = Store::connect(&url).unwrap();
    night(&store);
    let all = store.trail(&TrailQuery::default()).unwrap();
    drop(store);
    let rudder_store::StoreUrl::Postgres(u) = rudder_store::StoreUrl::parse(&url).unwrap() else {
        unreachable!()
    };
    let mut admin = ::postgres::Client::connect(u.secret_text(), ::postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "DROP TABLE rudder_trail; DROP FUNCTION rudder_trail_of() CASCADE; \
             DROP FUNCTION rudder_trail_rows(text, text); UPDATE rudder_schema SET version = 6",
        )
        .unwrap();
    let store = Store::connect(&url).unwrap();
    assert_eq!(
        store.trail(&TrailQuery::default()).unwrap(),
        all,
        "read from the tasks"
    );
    store.create(NewTask::default()).unwrap();
    let version: i32 = admin
        .query_one("SELECT version FROM rudder_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, 7);
    let rows: i64 = admin
        .query_one("SELECT count(*) FROM rudder_trail", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows as usize, all.len() + 1);
    assert_eq!(
        store.trail(&TrailQuery::default()).unwrap(),
        reference(&store, &TrailQuery::default())
    );
}
