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
    let store = Store::open("unused-worker-unit.json");
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
    let store = Store::open(format!("sqlite:{}", dir.path().join("t.db").display()));
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

/// A worker's renewer threads serve its next jobs: one thread for jobs one
/// after another, one per job for jobs held at once.
#[test]
fn renewer_threads_are_kept_for_the_next_jobs() {
    let dir = tempfile::tempdir().expect("a directory");
    let store = Store::open(format!("sqlite:{}", dir.path().join("t.db").display()));
    let mut w = store
        .worker("w")
        .lease(Duration::from_secs(2))
        .start()
        .expect("a worker");
    let idle = |w: &Worker, want: usize| {
        // The thread goes back to the pool once it sees its job over.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let n = w.renewers.idle_count();
            if n == want || std::time::Instant::now() > deadline {
                return n;
            }
            std::thread::yield_now();
        }
    };
    for _ in 0..3 {
        store.create(crate::NewTask::default()).expect("create");
        let mut job = w.next(Duration::ZERO).expect("next").expect("a job");
        job.complete(serde_json::json!(1)).expect("complete");
        drop(job);
        assert_eq!(idle(&w, 1), 1, "one thread, back in the pool");
    }
    store.create(crate::NewTask::default()).expect("create");
    store.create(crate::NewTask::default()).expect("create");
    let a = w.next(Duration::ZERO).expect("next").expect("a job");
    let b = w.next(Duration::ZERO).expect("next").expect("a job");
    assert_eq!(w.renewers.idle_count(), 0, "both threads busy");
    drop((a, b));
    assert_eq!(idle(&w, 2), 2);
}
