//! `reclaim_tasks`: a reclaim confirmed after a preview fails exactly the
//! previewed tasks that did not change since, and nothing else.
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use rudder_model::task::{Actor, Status};
use rudder_store::{NewTask, Store};

type Clock = Arc<Mutex<DateTime<Utc>>>;

/// A store in a temp dir whose clock the test sets, starting at `start`.
fn store_with_clock() -> (tempfile::TempDir, DateTime<Utc>, Clock, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let start: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().expect("time");
    let clock = Arc::new(Mutex::new(start));
    let c = clock.clone();
    let store = Store::connect(dir.path().join("tasks.json"))
        .expect("a store URL")
        .with_clock(Arc::new(move || *c.lock().expect("clock")));
    (dir, start, clock, store)
}

#[test]
fn only_unchanged_previewed_tasks_are_reclaimed() {
    let (_dir, _start, clock, store) = store_with_clock();
    let advance = |minutes| *clock.lock().expect("clock") += TimeDelta::minutes(minutes);
    let create = |title: &str| {
        store
            .create(NewTask {
                title: Some(title.into()),
                ..NewTask::default()
            })
            .expect("create")
            .task
    };

    let a = create("A");
    let b = create("B");
    advance(20);
    let c_task = create("C"); // active at preview time
    // The preview: A and B idle for 15m or more.
    let preview = store
        .reclaim(Duration::from_secs(900), true)
        .expect("preview");
    let shown: Vec<(String, u64)> = preview
        .reclaimed
        .iter()
        .map(|r| {
            let t = store.get(&r.task_id).expect("get");
            (t.task_id, t.revision)
        })
        .collect();
    assert_eq!(shown.len(), 2);

    // Meanwhile B's worker comes back, and C goes idle too.
    store
        .heartbeat(&b.task_id, Some("back".into()), None, Actor::Anyone)
        .expect("heartbeat");
    advance(20);
    let report = store
        .reclaim_tasks(&shown, Duration::from_secs(900))
        .expect("reclaim");

    let reclaimed: Vec<&str> = report
        .reclaimed
        .iter()
        .map(|r| r.task_id.as_str())
        .collect();
    assert_eq!(reclaimed, [a.task_id.as_str()]);
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert_eq!(report.skipped[0].task_id, b.task_id);
    assert!(
        report.skipped[0]
            .reason
            .contains("changed since the preview")
    );
    assert_eq!(store.get(&a.task_id).expect("a").status, Status::Failed);
    assert_eq!(store.get(&b.task_id).expect("b").status, Status::Working);
    assert_eq!(
        store.get(&c_task.task_id).expect("c").status,
        Status::Working,
        "a task that was not previewed is never reclaimed"
    );
}

#[test]
fn a_preview_names_each_task_at_its_revision_and_counts_the_active_ones() {
    let (_dir, start, clock, store) = store_with_clock();
    let set = |t: DateTime<Utc>| *clock.lock().expect("clock") = t;
    let idle = store.create(NewTask::default()).expect("create").task;
    store
        .heartbeat(&idle.task_id, Some("step 1".into()), None, Actor::Anyone)
        .expect("heartbeat");
    set(start + TimeDelta::minutes(30));
    let active: Vec<_> = (0..50)
        .map(|_| store.create(NewTask::default()).expect("create").task)
        .collect();
    // A task written by a machine whose clock runs an hour ahead.
    set(start + TimeDelta::minutes(90));
    let future = store.create(NewTask::default()).expect("create").task;
    set(start + TimeDelta::minutes(31));

    let preview = store
        .reclaim(Duration::from_secs(900), true)
        .expect("preview");
    assert_eq!(preview.reclaimed.len(), 1);
    assert_eq!(preview.reclaimed[0].task_id, idle.task_id);
    assert_eq!(preview.reclaimed[0].revision, 2, "the revision it saw");
    assert_eq!(preview.active, active.len(), "active tasks are counted");
    assert_eq!(preview.skipped.len(), 1, "{:?}", preview.skipped);
    assert_eq!(preview.skipped[0].task_id, future.task_id);
    assert!(
        preview.skipped[0].reason.contains("in the future"),
        "{}",
        preview.skipped[0].reason
    );
    // The preview is all a confirmation needs.
    let shown: Vec<(String, u64)> = preview
        .reclaimed
        .iter()
        .map(|r| (r.task_id.clone(), r.revision))
        .collect();
    let done = store
        .reclaim_tasks(&shown, Duration::from_secs(900))
        .expect("reclaim");
    assert_eq!(done.reclaimed.len(), 1);
    assert_eq!(
        store.get(&idle.task_id).expect("get").status,
        Status::Failed
    );
}
