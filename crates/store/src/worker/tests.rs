//! Unit tests of the worker API's pure parts: how a store error is
//! sorted, names, the builder's checks.

use std::time::Duration;

use super::*;
use crate::task::OpKind;

fn task(status: Status) -> Box<Task> {
    Box::new(Task::new("t", status))
}

#[test]
fn refusals_are_stops_by_what_the_task_became() {
    let refused = |status| StoreError::Refused {
        op: OpKind::Heartbeat,
        reason: "r".into(),
        task: task(status),
    };
    assert!(matches!(
        WorkError::of(refused(Status::Cancelled)),
        WorkError::Stop(Stop::Cancelled(_))
    ));
    assert!(matches!(
        WorkError::of(refused(Status::Completed)),
        WorkError::Stop(Stop::Finished(_))
    ));
    assert!(matches!(
        WorkError::of(refused(Status::InputRequired)),
        WorkError::Stop(Stop::Refused(_))
    ));
    let lost = StoreError::LeaseLost {
        op: OpKind::Complete,
        task: task(Status::Working),
    };
    let e = WorkError::of(lost);
    assert!(matches!(e, WorkError::Stop(Stop::LeaseLost(_))));
    assert_eq!(
        e.stop().and_then(Stop::task).map(|t| t.status),
        Some(Status::Working)
    );
    let unknown = StoreError::UnknownTask { id: "t".into() };
    assert!(matches!(
        WorkError::of(unknown),
        WorkError::Stop(Stop::Unknown(_))
    ));
}

#[test]
fn infrastructure_failures_are_store_errors_and_bad_values_rejected() {
    let down = StoreError::Database {
        location: crate::Location::remote("postgres://db"),
        action: "connect",
        message: "connection refused".into(),
    };
    let e = WorkError::of(down);
    assert!(matches!(e, WorkError::Store(_)) && e.is_retryable());
    let bad = StoreError::InvalidSchema("not a schema".into());
    let e = WorkError::of(bad);
    assert!(matches!(e, WorkError::Rejected(_)) && !e.is_retryable());
}

#[test]
fn names_with_control_characters_or_nothing_in_them_are_refused() {
    assert_eq!(check_name("holder", "sh-1#ab"), Ok(()));
    assert!(matches!(
        check_name("holder", " "),
        Err(ConfigError::Empty { .. })
    ));
    let e = check_name("holder", "a\u{1b}[2J").expect_err("refused");
    // The message shows the escape escaped, never raw.
    assert!(!e.to_string().contains('\u{1b}'), "{e}");
}

#[test]
fn the_builder_refuses_a_renewal_no_shorter_than_the_lease_and_bad_kinds() {
    let store = Store::connect("unused-worker-unit.json").expect("a store URL");
    let e = store
        .worker("w")
        .lease(Duration::from_secs(1))
        .renew_every(Duration::from_secs(1))
        .start()
        .err()
        .expect("refused");
    assert!(
        matches!(e, StartError::Config(ConfigError::Renewal { .. })),
        "{e}"
    );
    let e = store
        .worker("w")
        .kinds(["two words"])
        .start()
        .err()
        .expect("refused");
    assert!(
        matches!(e, StartError::Config(ConfigError::Kind { .. })),
        "{e}"
    );
    let w = store.worker("w").start().expect("a worker");
    assert!(w.holder().starts_with("w#") && w.holder().len() == "w#".len() + 8);
    assert_eq!(w.lease(), DEFAULT_LEASE);
}

/// A worker keeps its change feed only while it waits: a busy worker's
/// feed would be woken by every write of every worker for nothing.
#[test]
fn a_worker_watches_the_store_only_while_it_waits() {
    let dir = tempfile::tempdir().expect("a directory");
    let store = Store::connect(format!("sqlite:{}", dir.path().join("t.db").display()))
        .expect("a store URL");
    let mut w = store.worker("w").start().expect("a worker");
    // Nothing to do, no time to wait: no feed started.
    assert!(w.next(Duration::ZERO).expect("next").is_none());
    assert!(w.feed.is_none());
    // Waiting starts one, kept across waits.
    assert!(w.next(Duration::from_millis(20)).expect("next").is_none());
    assert!(w.feed.is_some());
    // A claim drops it.
    store.create(crate::NewTask::default()).expect("create");
    let job = w
        .next(Duration::from_secs(5))
        .expect("next")
        .expect("a job");
    assert!(w.feed.is_none());
    drop(job);
}

/// One renewer thread per worker renews every job it holds, those one
/// after another and those held at once, woken by neither their start nor
/// their end; it ends once the worker and its jobs are gone.
#[test]
fn one_renewer_thread_renews_all_of_a_workers_jobs() {
    let dir = tempfile::tempdir().expect("a directory");
    let store = Store::connect(format!("sqlite:{}", dir.path().join("t.db").display()))
        .expect("a store URL");
    let mut w = store
        .worker("w")
        .lease(Duration::from_secs(2))
        .renew_every(Duration::from_millis(50))
        .start()
        .expect("a worker");
    for _ in 0..3 {
        store.create(crate::NewTask::default()).expect("create");
        let mut job = w.next(Duration::ZERO).expect("next").expect("a job");
        job.complete(serde_json::json!(1)).expect("complete");
    }
    assert_eq!(
        w.renewers.probe().counts().0,
        1,
        "one thread for jobs in turn"
    );
    let lease_of = |id: &str| store.get(id).expect("get").lease_expires_at;
    let mut held = Vec::new();
    for _ in 0..2 {
        store.create(crate::NewTask::default()).expect("create");
        let job = w.next(Duration::ZERO).expect("next").expect("a job");
        let first = lease_of(job.id());
        held.push((job, first));
    }
    // Both leases renewed without a write of the jobs' own.
    for (job, first) in &held {
        let renewed = wait_until(|| lease_of(job.id()) > *first);
        assert!(renewed, "job {} was not renewed", job.id());
    }
    assert_eq!(
        w.renewers.probe().counts().0,
        1,
        "one thread for jobs held at once"
    );
    // Jobs that ended are let go of; with the worker gone, the thread ends.
    drop(held);
    assert!(
        wait_until(|| w.renewers.probe().counts().1 == 0),
        "ended jobs kept"
    );
    let probe = w.renewers.probe();
    assert!(probe.running());
    drop(w);
    assert!(
        wait_until(|| !probe.running()),
        "the thread outlived its worker"
    );
}

/// Polls `f` for up to ten seconds.
fn wait_until(mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    f()
}

/// A task created held by a worker's holder is that worker's job at once
/// (claim and note in the create's one write); one held by nobody else's
/// is not adopted, and a task that starts waiting for input cannot be
/// created held.
#[tokio::test]
async fn a_task_created_held_is_adopted_as_a_job_without_a_claim() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(format!("sqlite:{}", dir.path().join("t.db").display())).unwrap();
    let worker = store
        .worker("w")
        .lease(Duration::from_secs(30))
        .start_async()
        .unwrap();
    let adopter = worker.adopter();
    let held = crate::Held {
        holder: adopter.holder().to_string(),
        lease: adopter.lease(),
        note: Some("attempt 1".into()),
        face: crate::task::Face::Gateway,
    };
    let made = store
        .create_held(crate::NewTask::default(), &held)
        .unwrap()
        .task;
    assert_eq!(made.revision, 1, "one write");
    assert_eq!(made.claimed_by.as_deref(), Some(adopter.holder()));
    let note = made.history.last().unwrap();
    assert_eq!(note.note.as_deref(), Some("attempt 1"));
    assert_eq!(note.actor.as_deref(), Some(adopter.holder()));
    // Nobody else claims it while the lease lives.
    let other = store
        .claim_next("other", Duration::from_secs(30), &[])
        .unwrap();
    assert!(other.is_none());
    let mut job = adopter.adopt(made).expect("its own task");
    let done = job.complete(serde_json::json!({"ok": true})).await.unwrap();
    assert_eq!(done.status, Status::Completed);
    // Another holder's task is not adopted.
    let theirs = crate::Held {
        holder: "someone#else".into(),
        ..held.clone()
    };
    let made = store
        .create_held(crate::NewTask::default(), &theirs)
        .unwrap()
        .task;
    assert!(adopter.adopt(made).is_none());
    // A task that starts waiting for a person is not a worker's.
    let waiting = crate::NewTask {
        input_schema: Some(serde_json::json!({"type": "object"})),
        ..crate::NewTask::default()
    };
    assert!(store.create_held(waiting, &held).is_err());
}
