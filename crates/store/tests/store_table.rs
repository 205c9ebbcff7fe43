//! Every mutation × every status through the store API: applied, safe repeat
//! ("unchanged", the file not touched: same bytes, inode and mtime), refused
//! (typed error carrying the snapshot, file not touched), unknown task.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rudder_store::task::{Actor, Change, Status, Task};
use rudder_store::{ErrorClass, ErrorKind, NewTask, Outcome, Store, StoreError};
use rudder_testkit::stores::{self, StoreState, store_state, temp_files, written_since};
use serde_json::{Value, json};

const HOUR: Duration = Duration::from_secs(3600);

fn s0() -> Value {
    json!({"type": "object", "required": ["service"],
           "properties": {"service": {"type": "string"}}})
}
fn s1() -> Value {
    json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}})
}
fn v0() -> Value {
    json!({"service": "payments"})
}
fn v3() -> Value {
    json!({"service": "db"})
}
/// Invalid for `s0`.
fn v_bad() -> Value {
    json!({"service": 5})
}
fn r0() -> Value {
    json!({"summary": "no active incident"})
}
fn r1() -> Value {
    json!({"summary": "rewritten!"})
}

/// The state a row starts from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Start {
    /// Created without a schema.
    Working,
    /// Created with `s0`, given `v0`.
    WorkingWithInput,
    /// Created with `s0`.
    InputRequired,
    /// `WorkingWithInput`, then completed with `r0`.
    Completed,
    /// `WorkingWithInput`, then failed with "boom".
    Failed,
    /// `WorkingWithInput`, then cancelled.
    Cancelled,
    /// Working, with a live lease held by `w2`.
    ClaimedByOther,
    /// Working, with a live lease held by `w1`.
    ClaimedBySelf,
}

const STARTS: [Start; 8] = [
    Start::Working,
    Start::WorkingWithInput,
    Start::InputRequired,
    Start::Completed,
    Start::Failed,
    Start::Cancelled,
    Start::ClaimedByOther,
    Start::ClaimedBySelf,
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mutation {
    RequestInputS0,
    RequestInputS1,
    ProvideV0,
    ProvideV3,
    ProvideInvalid,
    Heartbeat,
    CompleteR0,
    CompleteR1,
    FailBoom,
    FailOther,
    Cancel,
    ClaimW1,
    ReleaseW1,
    /// `heartbeat` written by worker w1 (its writes carry its claim).
    WorkerHeartbeatW1,
    /// `complete` written by worker w1.
    WorkerCompleteW1,
}

const MUTATIONS: [Mutation; 15] = [
    Mutation::RequestInputS0,
    Mutation::RequestInputS1,
    Mutation::ProvideV0,
    Mutation::ProvideV3,
    Mutation::ProvideInvalid,
    Mutation::Heartbeat,
    Mutation::CompleteR0,
    Mutation::CompleteR1,
    Mutation::FailBoom,
    Mutation::FailOther,
    Mutation::Cancel,
    Mutation::ClaimW1,
    Mutation::ReleaseW1,
    Mutation::WorkerHeartbeatW1,
    Mutation::WorkerCompleteW1,
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Applied(Status),
    Unchanged,
    /// A typed error of this kind, carrying the task's snapshot when it is a refusal.
    Refused(ErrorKind),
}

fn worker(holder: &str) -> Actor<'_> {
    Actor::Worker {
        holder,
        lease: Some(HOUR),
    }
}

fn mutate(store: &Store, id: &str, m: Mutation) -> Result<Outcome, StoreError> {
    match m {
        Mutation::RequestInputS0 => store.request_input(id, s0(), None, Actor::Anyone),
        Mutation::RequestInputS1 => {
            store.request_input(id, s1(), Some("need n".into()), Actor::Anyone)
        }
        Mutation::ProvideV0 => store.provide_input(id, v0(), None),
        Mutation::ProvideV3 => store.provide_input(id, v3(), None),
        Mutation::ProvideInvalid => store.provide_input(id, v_bad(), None),
        Mutation::Heartbeat => store.heartbeat(id, Some("alive".into()), None, Actor::Anyone),
        Mutation::CompleteR0 => store.complete(id, r0(), Actor::Anyone),
        Mutation::CompleteR1 => store.complete(id, r1(), Actor::Anyone),
        Mutation::FailBoom => store.fail(id, "boom", Actor::Anyone),
        Mutation::FailOther => store.fail(id, "other", Actor::Anyone),
        Mutation::Cancel => store.cancel(id, Some("operator".into())),
        Mutation::ClaimW1 => store.claim(id, "w1", HOUR),
        Mutation::ReleaseW1 => store.release(id, "w1"),
        Mutation::WorkerHeartbeatW1 => store.heartbeat(id, None, None, worker("w1")),
        Mutation::WorkerCompleteW1 => store.complete(id, r0(), worker("w1")),
    }
}

/// The contract, written out row by row (docs/architecture.md "One policy for every mutation").
fn expected(start: Start, m: Mutation) -> Expect {
    use Expect::*;
    use Mutation as M;
    use Start as S;
    const REFUSED: Expect = Refused(ErrorKind::Refused);
    const LEASE: Expect = Refused(ErrorKind::LeaseLost);
    match start {
        S::Working | S::WorkingWithInput | S::ClaimedByOther | S::ClaimedBySelf => match m {
            M::RequestInputS0 | M::RequestInputS1 => Applied(Status::InputRequired),
            M::ProvideV0 if start == S::WorkingWithInput => Unchanged,
            M::ProvideV0 | M::ProvideV3 | M::ProvideInvalid => REFUSED,
            M::Heartbeat => Applied(Status::Working),
            M::CompleteR0 | M::CompleteR1 => Applied(Status::Completed),
            M::FailBoom | M::FailOther => Applied(Status::Failed),
            M::Cancel => Applied(Status::Cancelled),
            M::ClaimW1 | M::ReleaseW1 if start == S::ClaimedByOther => LEASE,
            M::ClaimW1 => Applied(Status::Working),
            M::ReleaseW1 if start == S::ClaimedBySelf => Applied(Status::Working),
            M::ReleaseW1 => Unchanged,
            M::WorkerHeartbeatW1 if start == S::ClaimedBySelf => Applied(Status::Working),
            M::WorkerCompleteW1 if start == S::ClaimedBySelf => Applied(Status::Completed),
            M::WorkerHeartbeatW1 | M::WorkerCompleteW1 => LEASE,
        },
        S::InputRequired => match m {
            M::RequestInputS0 => Unchanged,
            M::RequestInputS1 => REFUSED,
            M::ProvideV0 | M::ProvideV3 => Applied(Status::Working),
            M::ProvideInvalid => Refused(ErrorKind::InvalidInput),
            M::Heartbeat => Applied(Status::InputRequired),
            M::CompleteR0 | M::CompleteR1 => Applied(Status::Completed),
            M::FailBoom | M::FailOther => Applied(Status::Failed),
            M::Cancel => Applied(Status::Cancelled),
            M::ClaimW1 => REFUSED,
            M::ReleaseW1 => Unchanged,
            M::WorkerHeartbeatW1 | M::WorkerCompleteW1 => LEASE,
        },
        S::Completed | S::Failed | S::Cancelled => match m {
            // The same input resubmitted to a task that already took it.
            M::ProvideV0 => Unchanged,
            // A worker retrying after a lost response: its claim was dropped
            // when the task finished, yet the repeat is still safe.
            M::CompleteR0 | M::WorkerCompleteW1 if start == S::Completed => Unchanged,
            M::FailBoom if start == S::Failed => Unchanged,
            M::Cancel if start == S::Cancelled => Unchanged,
            // No lease is held: giving it back is already recorded.
            M::ReleaseW1 => Unchanged,
            _ => REFUSED,
        },
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    store: Store,
    id: String,
    /// Another task that no row touches.
    bystander: String,
}

fn fixture(start: Start) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = stores::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    let bystander = store
        .create(NewTask {
            title: Some("bystander".into()),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;
    let with_schema = NewTask {
        input_schema: Some(s0()),
        ..NewTask::default()
    };
    let id = match start {
        S::Working | S::ClaimedByOther | S::ClaimedBySelf => {
            store.create(NewTask::default()).unwrap().task.task_id
        }
        _ => store.create(with_schema).unwrap().task.task_id,
    };
    use Start as S;
    match start {
        S::Working | S::InputRequired => {}
        S::ClaimedByOther => {
            store.claim(&id, "w2", HOUR).unwrap();
        }
        S::ClaimedBySelf => {
            store.claim(&id, "w1", HOUR).unwrap();
        }
        S::WorkingWithInput | S::Completed | S::Failed | S::Cancelled => {
            store.provide_input(&id, v0(), None).unwrap();
            match start {
                S::Completed => {
                    store.complete(&id, r0(), Actor::Anyone).unwrap();
                }
                S::Failed => {
                    store.fail(&id, "boom", Actor::Anyone).unwrap();
                }
                S::Cancelled => {
                    store.cancel(&id, None).unwrap();
                }
                _ => {}
            }
        }
    }
    Fixture {
        _dir: dir,
        path,
        store,
        id,
        bystander,
    }
}

fn stored(path: &Path, id: &str) -> Task {
    Store::connect(path).expect("a store URL").get(id).unwrap()
}

fn assert_untouched(before: &StoreState, path: &Path, ctx: &str) {
    stores::assert_store_untouched(before, path, ctx);
}

fn check_row(start: Start, m: Mutation) {
    let ctx = format!("{m:?} on {start:?}");
    let f = fixture(start);
    let before_task = stored(&f.path, &f.id);
    let bystander_before = stored(&f.path, &f.bystander);
    let before = store_state(&f.path);
    let result = mutate(&f.store, &f.id, m);
    let expect = expected(start, m);
    match (expect, result) {
        (Expect::Applied(status), Ok(o)) => {
            assert_eq!(o.change, Change::Applied, "{ctx}");
            assert_eq!(o.task.status, status, "{ctx}");
            assert_eq!(o.task.revision, before_task.revision + 1, "{ctx}");
            assert!(o.task.updated_at >= before_task.updated_at, "{ctx}");
            let history_grew = o.task.history.len() == before_task.history.len() + 1;
            assert_eq!(history_grew, status != before_task.status, "{ctx}: history");
            assert_eq!(stored(&f.path, &f.id), o.task, "{ctx}: returned != stored");
            assert!(written_since(&before, &f.path), "{ctx}: not written");
        }
        (Expect::Unchanged, Ok(o)) => {
            assert_eq!(o.change, Change::Unchanged, "{ctx}");
            assert_eq!(o.task, before_task, "{ctx}: an unchanged task changed");
            assert_untouched(&before, &f.path, &ctx);
        }
        (Expect::Refused(kind), Err(e)) => {
            assert_eq!(e.kind(), kind, "{ctx}: {e}");
            let msg = e.to_string();
            assert!(
                msg.contains(&f.id),
                "{ctx}: message does not name the task: {msg}"
            );
            if kind == ErrorKind::InvalidInput {
                assert_eq!(e.kind().class(), ErrorClass::InvalidInput, "{ctx}");
                let StoreError::InvalidInput { violations, .. } = &e else {
                    unreachable!()
                };
                assert_eq!(violations[0].pointer, "/service", "{ctx}");
            } else {
                assert_eq!(e.kind().class(), ErrorClass::Refused, "{ctx}");
                assert_eq!(e.task(), Some(&before_task), "{ctx}: snapshot");
            }
            if kind == ErrorKind::Refused {
                assert!(
                    msg.contains(before_task.status.as_str()),
                    "{ctx}: message does not name the status: {msg}"
                );
            }
            assert_untouched(&before, &f.path, &ctx);
        }
        (expect, got) => panic!("{ctx}: expected {expect:?}, got {got:?}"),
    }
    assert_eq!(stored(&f.path, &f.bystander), bystander_before, "{ctx}");
    if stores::kind().has_files() {
        let dir = f.path.parent().unwrap();
        assert!(temp_files(dir).is_empty(), "{ctx}");
    }
}

fn every_mutation_on_every_status_once() {
    for start in STARTS {
        for m in MUTATIONS {
            check_row(start, m);
        }
    }
}

fn error_messages_name_task_status_and_operation_once() {
    let f = fixture(Start::Completed);
    let e = f.store.cancel(&f.id, None).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("cancel"), "{msg}");
    assert!(msg.contains("completed"), "{msg}");
    assert!(msg.contains(&f.id), "{msg}");
    let e = f.store.provide_input(&f.id, v3(), None).unwrap_err();
    assert!(e.to_string().contains("provide input"), "{e}");
}

fn every_mutation_on_an_unknown_task_once() {
    let f = fixture(Start::Working);
    let before = store_state(&f.path);
    for m in MUTATIONS {
        let e = mutate(&f.store, "no-such-task", m).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnknownTask, "{m:?}");
        assert_eq!(e.to_string(), "unknown task: no-such-task", "{m:?}");
        assert_eq!(e.kind().class(), ErrorClass::Unknown);
        assert_untouched(&before, &f.path, &format!("{m:?} on an unknown task"));
    }
    let e = f.store.get("no-such-task").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnknownTask);
    // An empty id is unknown, not "the first task".
    assert_eq!(f.store.get("").unwrap_err().kind(), ErrorKind::UnknownTask);
}

fn unknown_task_on_a_store_that_does_not_exist_yet_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = stores::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    assert!(store.list(&[]).unwrap().is_empty());
    for m in MUTATIONS {
        assert_eq!(
            mutate(&store, "abc", m).unwrap_err().kind(),
            ErrorKind::UnknownTask
        );
    }
    assert!(
        !stores::store_exists(&path),
        "a refused mutation created the store"
    );
}

fn a_prefix_finds_a_task_and_an_ambiguous_one_is_refused_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = stores::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    let ids: Vec<String> = (0..40)
        .map(|_| store.create(NewTask::default()).unwrap().task.task_id)
        .collect();
    // With 40 random ids, two share a first hex digit.
    let first = ids[0].clone();
    let prefix = &first[..8];
    assert_eq!(store.get(prefix).unwrap().task_id, first);
    let shared = ids
        .iter()
        .find_map(|a| {
            let p = &a[..1];
            (ids.iter().filter(|b| b.starts_with(p)).count() > 1).then(|| p.to_string())
        })
        .unwrap();
    let before = store_state(&path);
    let e = store.cancel(&shared, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AmbiguousId);
    assert_eq!(e.kind().class(), ErrorClass::Unknown);
    assert_untouched(&before, &path, "cancel with an ambiguous prefix");
    let applied = store.cancel(prefix, None).unwrap();
    assert_eq!(applied.task.task_id, first);
}

fn provide_input_only_if_unchanged_since_a_revision_once() {
    let f = fixture(Start::InputRequired);
    let rev = stored(&f.path, &f.id).revision;
    let before = store_state(&f.path);
    let e = f
        .store
        .provide_input(&f.id, v0(), Some(rev - 1))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::StaleRevision);
    assert_eq!(e.kind().class(), ErrorClass::Refused);
    assert_eq!(e.task().unwrap().revision, rev);
    assert_untouched(&before, &f.path, "stale revision");
    let o = f.store.provide_input(&f.id, v0(), Some(rev)).unwrap();
    assert_eq!(o.change, Change::Applied);
    assert_eq!(o.task.revision, rev + 1);
}

fn a_zombie_worker_cannot_overwrite_its_successor_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = stores::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    // w1 takes a lease that is already over; w2 takes the task over.
    store.claim(&id, "w1", Duration::ZERO).unwrap();
    store.claim(&id, "w2", HOUR).unwrap();
    let before = store_state(&path);
    let e = store
        .complete(&id, json!("zombie"), worker("w1"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost);
    assert!(e.to_string().contains("w2"), "{e}");
    assert_untouched(&before, &path, "zombie write");
    // And w2 cannot be bumped while its lease lives.
    assert_eq!(
        store.claim(&id, "w1", HOUR).unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
    let o = store.complete(&id, json!("done"), worker("w2")).unwrap();
    assert_eq!(o.change, Change::Applied);
    assert_eq!(o.task.claimed_by, None, "a finished task holds no lease");
}

fn create_is_idempotent_by_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = stores::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    let new = || NewTask {
        input_schema: Some(s0()),
        idempotency_key: Some("incident-1".into()),
        request: Some(json!({"incident": "INC-1"})),
        kind: Some("diagnose".into()),
        ..NewTask::default()
    };
    let first = store.create(new()).unwrap();
    assert_eq!(first.change, Change::Applied);
    assert_eq!(first.task.status, Status::InputRequired);
    assert_eq!(first.task.revision, 1);
    let before = store_state(&path);

    let again = store.create(new()).unwrap();
    assert_eq!(again.change, Change::Unchanged);
    assert_eq!(again.task, first.task);
    assert_untouched(&before, &path, "create with the same key");

    // A title or message is not part of the identity of the request.
    let retitled = store
        .create(NewTask {
            title: Some("other title".into()),
            ..new()
        })
        .unwrap();
    assert_eq!(retitled.change, Change::Unchanged);
    assert_eq!(retitled.task, first.task);

    for (what, conflicting) in [
        (
            "input_schema",
            NewTask {
                input_schema: Some(s1()),
                ..new()
            },
        ),
        (
            "input_schema",
            NewTask {
                input_schema: None,
                ..new()
            },
        ),
        (
            "request",
            NewTask {
                request: Some(json!({"incident": "INC-2"})),
                ..new()
            },
        ),
        (
            "request",
            NewTask {
                request: None,
                ..new()
            },
        ),
        (
            "kind",
            NewTask {
                kind: Some("backup".into()),
                ..new()
            },
        ),
        (
            "kind",
            NewTask {
                kind: None,
                ..new()
            },
        ),
    ] {
        let e = store.create(conflicting).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IdempotencyConflict, "{what}");
        assert_eq!(e.kind().class(), ErrorClass::Refused);
        assert!(e.to_string().contains(what), "{e}");
        assert_eq!(e.task(), Some(&first.task));
        assert_untouched(&before, &path, &format!("conflicting create ({what})"));
    }

    // The key still answers once the task is finished.
    store.cancel(&first.task.task_id, None).unwrap();
    let after_cancel = store.create(new()).unwrap();
    assert_eq!(after_cancel.change, Change::Unchanged);
    assert_eq!(after_cancel.task.status, Status::Cancelled);
    assert_eq!(store.list(&[]).unwrap().len(), 1);
}

fn tasks_are_created_listed_and_claimed_by_kind_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = stores::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    let create = |kind: Option<&str>| {
        store
            .create(NewTask {
                kind: kind.map(str::to_string),
                ..NewTask::default()
            })
            .unwrap()
            .task
    };
    let a = create(Some("diagnose"));
    let b = create(Some("backup"));
    let c = create(None);
    let d = create(Some("diagnose"));
    assert_eq!(a.kind.as_deref(), Some("diagnose"));
    assert_eq!(
        store.get(&b.task_id).unwrap().kind.as_deref(),
        Some("backup")
    );
    assert_eq!(store.get(&c.task_id).unwrap().kind, None);

    // A kind a store may not hold is refused, naming the field, before
    // anything is written.
    let before = store_state(&path);
    let long = "k".repeat(65);
    for bad in [
        "",
        "two words",
        "tab\there",
        "bell\u{7}",
        "line\n",
        long.as_str(),
    ] {
        let e = store
            .create(NewTask {
                kind: Some(bad.into()),
                ..NewTask::default()
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidKind, "{bad:?}");
        assert_eq!(e.kind().class(), ErrorClass::Usage);
        assert!(e.to_string().contains("kind"), "{e}");
        assert_untouched(&before, &path, &format!("create with kind {bad:?}"));
    }

    let ids = |kinds: &[&str]| -> Vec<String> {
        let q = rudder_store::PageQuery {
            kinds: kinds.iter().map(|k| k.to_string()).collect(),
            ..rudder_store::PageQuery::default()
        };
        store
            .page(&q)
            .unwrap()
            .into_iter()
            .map(|t| t.task_id)
            .collect()
    };
    let id = |t: &Task| t.task_id.clone();
    assert_eq!(ids(&["diagnose"]), [id(&a), id(&d)]);
    assert_eq!(ids(&["backup", "diagnose"]), [id(&a), id(&b), id(&d)]);
    assert_eq!(ids(&["nope"]), Vec::<String>::new());
    assert_eq!(ids(&[]).len(), 4);

    // A worker of a kind takes the oldest claimable task of its kinds only;
    // a worker of any kind takes any task.
    let kinds = |k: &[&str]| k.iter().map(|k| k.to_string()).collect::<Vec<_>>();
    let claim = |k: &[&str]| {
        store
            .claim_next("w", HOUR, &kinds(k))
            .unwrap()
            .map(|t| t.task_id)
    };
    assert_eq!(claim(&["backup"]), Some(id(&b)));
    assert_eq!(claim(&["backup"]), None);
    assert_eq!(claim(&["nope"]), None);
    assert_eq!(claim(&["diagnose"]), Some(id(&a)));
    assert_eq!(claim(&[]), Some(id(&c)));
    assert_eq!(claim(&["backup", "diagnose"]), Some(id(&d)));
    assert_eq!(claim(&[]), None);
    // A lapsed lease frees the task for its kind again.
    let later = Store::connect(&path)
        .expect("a store URL")
        .with_clock(std::sync::Arc::new(|| {
            chrono::Utc::now() + chrono::TimeDelta::hours(2)
        }));
    let next = later
        .claim_next("w2", HOUR, &kinds(&["nope", "backup"]))
        .unwrap();
    assert_eq!(next.map(|t| t.task_id), Some(id(&b)));
}

fn create_starts_working_or_input_required_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = stores::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    let w = store.create(NewTask::default()).unwrap().task;
    assert_eq!(w.status, Status::Working);
    assert_eq!(w.history.len(), 1);
    let ir = store
        .create(NewTask {
            input_schema: Some(s0()),
            ..NewTask::default()
        })
        .unwrap()
        .task;
    assert_eq!(ir.status, Status::InputRequired);
    assert_ne!(w.task_id, ir.task_id);
    // An invalid schema is refused before anything is written.
    let before = store_state(&path);
    let e = store
        .create(NewTask {
            input_schema: Some(json!({"type": "nonsense"})),
            ..NewTask::default()
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidSchema);
    assert_untouched(&before, &path, "create with an invalid schema");
}

#[test]
fn a_new_store_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/tasks.json");
    let store = Store::connect(&path).expect("a store URL");
    store.create(NewTask::default()).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // An existing store keeps its permissions across writes.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    store.create(NewTask::default()).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    assert!(dir.path().join("sub/tasks.json.lock").exists());
}

/// `depth` arrays one inside the other around a number.
fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

/// An object whose `x` holds `depth - 1` arrays: `depth` levels in all.
fn nested_object(depth: usize) -> Value {
    json!({ "x": nested(depth - 1) })
}

/// The deepest value the store takes is one every reader reads back; one
/// level more is refused by every operation that stores a value, with a typed
/// error (exit 2) naming the field and the limit, and nothing is written.
#[test]
fn a_value_too_deep_for_readers_is_refused_by_every_writer() {
    use rudder_store::MAX_VALUE_DEPTH;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    let store = Store::connect(&path).expect("a store URL");
    let working = store.create(NewTask::default()).unwrap().task.task_id;
    let waiting = store
        .create(NewTask {
            input_schema: Some(json!({"type": "object"})),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;

    let deep = nested(MAX_VALUE_DEPTH + 1);
    let deep_object = nested_object(MAX_VALUE_DEPTH + 1);
    let before = store_state(&path);
    let attempts: Vec<(&str, Result<Outcome, StoreError>)> = vec![
        (
            "request",
            store.create(NewTask {
                request: Some(deep.clone()),
                ..NewTask::default()
            }),
        ),
        (
            "input_schema",
            store.create(NewTask {
                input_schema: Some(deep_object.clone()),
                ..NewTask::default()
            }),
        ),
        (
            "result",
            store.complete(&working, deep.clone(), Actor::Anyone),
        ),
        (
            "input_value",
            store.provide_input(&waiting, deep_object.clone(), None),
        ),
        (
            "input_schema",
            store.request_input(&working, deep_object.clone(), None, Actor::Anyone),
        ),
        (
            "error",
            store.apply(
                &working,
                &rudder_store::task::Op::Fail {
                    error: json!({"message": "x", "detail": deep.clone()}),
                },
                Actor::Anyone,
            ),
        ),
    ];
    for (field, result) in attempts {
        match result {
            Err(e @ StoreError::TooDeep { .. }) => {
                assert_eq!(e.kind().class(), ErrorClass::Usage);
                assert_eq!(e.kind(), ErrorKind::TooDeep);
                let msg = e.to_string();
                assert!(
                    msg.contains(field) && msg.contains(&MAX_VALUE_DEPTH.to_string()),
                    "{msg}"
                );
            }
            other => panic!("{field}: {other:?}"),
        }
        assert_untouched(&before, &path, field);
    }

    // Exactly at the limit: taken, and read back by every reader.
    let at_limit = nested(MAX_VALUE_DEPTH);
    let created = store
        .create(NewTask {
            request: Some(at_limit.clone()),
            ..NewTask::default()
        })
        .unwrap();
    store
        .complete(&working, nested_object(MAX_VALUE_DEPTH), Actor::Anyone)
        .unwrap();
    let tasks = Store::connect(&path).expect("a store URL").load().unwrap();
    assert_eq!(tasks[&created.task.task_id].request, Some(at_limit));
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(rudder_store::decode(&path, &bytes).unwrap(), tasks);
}

/// An object led by serde_json's private number marker would read back as a
/// number (or make the store unreadable): refused, nothing written.
#[test]
fn a_value_that_would_read_back_as_something_else_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    let store = Store::connect(&path).expect("a store URL");
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    let before = store_state(&path);
    let marker = json!({"a": [{ (rudder_store::RESERVED_KEY): "not a number" }]});
    match store.complete(&id, marker, Actor::Anyone) {
        Err(e @ StoreError::ReservedKey { .. }) => {
            assert_eq!(e.kind().class(), ErrorClass::Usage);
            assert!(e.to_string().contains("/a/0"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert_untouched(&before, &path, "reserved key");
    Store::connect(&path).expect("a store URL").load().unwrap();
}

/// A write that would grow the file past the size every reader accepts is
/// refused (exit 6) before anything is written: no temp file, same bytes.
#[test]
fn a_store_never_grows_past_what_readers_accept() {
    use rudder_store::FileBackend;
    use rudder_store::fs::{FsCall, SimFs};
    use std::sync::Arc;
    let fs = Arc::new(SimFs::new());
    let path = PathBuf::from("/store/tasks.json");
    let limit = 4096;
    let store = rudder_store::StoreOf::with_backend(
        FileBackend::with_fs(&path, fs.clone()).with_max_bytes(limit),
    );
    let big = |n: usize| NewTask {
        request: Some(json!("x".repeat(n))),
        ..NewTask::default()
    };
    store.create(big(1500)).unwrap();
    let before = fs.contents(&path).unwrap();
    let calls = fs.call_count();
    match store.create(big(2500)) {
        Err(e @ StoreError::TooLarge { .. }) => {
            assert_eq!(e.kind(), ErrorKind::TooLarge);
            // What the CLI exits 6 for (src/cli/exit.rs).
            assert!(
                matches!(e.kind().class(), ErrorClass::Store | ErrorClass::Retry),
                "{e}"
            );
            let msg = e.to_string();
            assert!(
                msg.contains("4 KiB") && msg.contains("nothing was written"),
                "{msg}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fs.contents(&path).unwrap(), before);
    assert!(
        !fs.calls()[calls..]
            .iter()
            .any(|c| matches!(c, FsCall::CreateNew(_) | FsCall::Rename(..))),
        "{:?}",
        &fs.calls()[calls..]
    );
    // The store is still readable and writable; a file exactly at the limit
    // is written, as it is read.
    assert_eq!(store.load().unwrap().len(), 1);
    let room = limit as usize - before.len();
    let probe = store.create(big(10)).unwrap();
    let grown = fs.contents(&path).unwrap().len() - before.len();
    store.cancel(&probe.task.task_id, None).unwrap();
    store.prune(Duration::ZERO).unwrap();
    assert_eq!(fs.contents(&path).unwrap(), before);
    store.create(big(room - grown + 10)).unwrap();
    assert_eq!(fs.contents(&path).unwrap().len(), limit as usize);
    assert_eq!(store.load().unwrap().len(), 2);
}

/// A revision never wraps: a task at `u64::MAX` takes no further change
/// (typed refusal, exit 4, nothing written), but a safe repeat still answers.
#[test]
fn a_revision_at_its_maximum_refuses_further_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    let store = Store::connect(&path).expect("a store URL");
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    let done = store.create(NewTask::default()).unwrap().task.task_id;
    store.cancel(&done, None).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace("\"revision\": 1,", "\"revision\": 18446744073709551615,");
    let text = text.replace("\"revision\": 2,", "\"revision\": 18446744073709551615,");
    std::fs::write(&path, &text).unwrap();
    assert_eq!(stored(&path, &id).revision, u64::MAX);
    assert_eq!(stored(&path, &done).revision, u64::MAX);

    let before = store_state(&path);
    type Attempt<'a> = Box<dyn Fn() -> Result<Outcome, StoreError> + 'a>;
    let ops: [(&str, Attempt); 4] = [
        (
            "heartbeat",
            Box::new(|| store.heartbeat(&id, None, None, Actor::Anyone)),
        ),
        ("cancel", Box::new(|| store.cancel(&id, None))),
        (
            "complete",
            Box::new(|| store.complete(&id, r0(), Actor::Anyone)),
        ),
        ("claim", Box::new(|| store.claim(&id, "w1", HOUR))),
    ];
    for (name, op) in ops {
        match op() {
            Err(e @ StoreError::RevisionExhausted { .. }) => {
                assert_eq!(
                    (e.kind().class(), e.kind()),
                    (ErrorClass::Refused, ErrorKind::RevisionExhausted)
                );
                assert!(e.to_string().contains("18446744073709551615"), "{e}");
                assert_eq!(e.task().map(|t| t.revision), Some(u64::MAX));
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_untouched(&before, &path, name);
    }
    // A repeat changes nothing and so still succeeds.
    let again = store.cancel(&done, None).unwrap();
    assert_eq!(again.change, Change::Unchanged);
    assert_untouched(&before, &path, "repeat");
    // Reclaim leaves it alone and says why, instead of wrapping its
    // revision or refusing to reclaim anything else.
    let other = store.create(NewTask::default()).unwrap().task.task_id;
    let report = store.reclaim(Duration::ZERO, false).unwrap();
    let reclaimed: Vec<&str> = report
        .reclaimed
        .iter()
        .map(|r| r.task_id.as_str())
        .collect();
    assert_eq!(reclaimed, [other.as_str()]);
    let skipped = report.skipped.iter().find(|s| s.task_id == id).unwrap();
    assert!(
        skipped.reason.contains("18446744073709551615"),
        "{skipped:?}"
    );
    assert_eq!(stored(&path, &id).revision, u64::MAX);
    assert_eq!(stored(&path, &id).status, Status::Working);
}

#[test]
fn a_new_database_and_its_wal_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/tasks.db");
    let store = Store::connect(&path).expect("a store URL");
    store.create(NewTask::default()).unwrap();
    // While the store is open its -wal and -shm files exist.
    for p in ["sub/tasks.db", "sub/tasks.db-wal", "sub/tasks.db-shm"] {
        let mode = std::fs::metadata(dir.path().join(p))
            .unwrap_or_else(|e| panic!("{p}: {e}"))
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{p}");
    }
}

// Prune racing every mutation, with real concurrent writers (threads,
// each with its own `Store`): a task found and then removed before it is
// read (on PostgreSQL each statement sees the latest commit) is answered
// as unknown, never a panic; every answer is a success or a typed
// refusal.

/// The errors a racing writer may meet: refusals the caller acts on.
fn racing_refusal(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::UnknownTask { .. }
            | StoreError::Refused { .. }
            | StoreError::LeaseLost { .. }
            | StoreError::StaleRevision { .. }
            | StoreError::InvalidInput { .. }
            // A create again with the key of a task the mutator asked a
            // question of: the existing task's schema differs from none.
            | StoreError::IdempotencyConflict { .. }
    )
}

fn prune_racing_every_mutation_once() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const TASKS: usize = 24;
    let dir = tempfile::tempdir().unwrap();
    let path = stores::store_in(dir.path());
    let key = |i: usize| NewTask {
        idempotency_key: Some(format!("k{i}")),
        ..NewTask::default()
    };
    let setup = Store::connect(&path).expect("a store URL");
    let ids: Vec<String> = (0..TASKS)
        .map(|i| setup.create(key(i)).unwrap().task.task_id)
        .collect();
    let done = AtomicBool::new(false);
    // What each writer met that is not a success or a refusal.
    let check = |what: &str, r: Result<(), StoreError>, bad: &mut Vec<String>| {
        if let Err(e) = r
            && !racing_refusal(&e)
        {
            bad.push(format!("{what}: {e:?}"));
        }
    };
    let unexpected: Vec<String> = std::thread::scope(|s| {
        // Removes every finished task, over and over, until the others end.
        let pruner = s.spawn(|| {
            let store = Store::connect(&path).expect("a store URL");
            let mut bad = Vec::new();
            let mut rounds = 0;
            while rounds == 0 || !done.load(Ordering::SeqCst) {
                check("prune", store.prune(Duration::ZERO).map(|_| ()), &mut bad);
                rounds += 1;
            }
            bad
        });
        // Finishes each task in turn, making it prunable under the others.
        let finisher = s.spawn(|| {
            let store = Store::connect(&path).expect("a store URL");
            let mut bad = Vec::new();
            for id in &ids {
                check("cancel", store.cancel(id, None).map(|_| ()), &mut bad);
            }
            bad
        });
        // Every mutation, and a read, on each task in turn.
        let mutator = s.spawn(|| {
            let store = Store::connect(&path).expect("a store URL");
            let mut bad = Vec::new();
            for id in &ids {
                for m in MUTATIONS {
                    check(
                        &format!("{m:?}"),
                        mutate(&store, id, m).map(|_| ()),
                        &mut bad,
                    );
                }
                check("get", store.get(id).map(|_| ()), &mut bad);
            }
            bad
        });
        // Claims whatever is claimable while tasks are finished and removed.
        let claimer = s.spawn(|| {
            let store = Store::connect(&path).expect("a store URL");
            let mut bad = Vec::new();
            for _ in 0..TASKS {
                let r = store.claim_next("w3", HOUR, &[]).map(|_| ());
                check("claim_next", r, &mut bad);
            }
            bad
        });
        // Creates again with the keys of the tasks being removed.
        let creator = s.spawn(|| {
            let store = Store::connect(&path).expect("a store URL");
            let mut bad = Vec::new();
            for i in 0..TASKS {
                check("create", store.create(key(i)).map(|_| ()), &mut bad);
            }
            bad
        });
        let mut bad = Vec::new();
        for (name, t) in [
            ("finisher", finisher),
            ("mutator", mutator),
            ("claimer", claimer),
            ("creator", creator),
        ] {
            bad.extend(t.join().unwrap_or_else(|_| panic!("the {name} panicked")));
        }
        done.store(true, Ordering::SeqCst);
        bad.extend(pruner.join().expect("the pruner panicked"));
        bad
    });
    assert!(unexpected.is_empty(), "{unexpected:#?}");
    // Every task the finisher cancelled is gone once prune has run again.
    setup.prune(Duration::ZERO).unwrap();
    let left = setup.load().unwrap();
    assert!(left.values().all(|t| !t.status.is_terminal()), "{left:#?}");
}

/// A NUL character is a character like any other in a task's values and
/// free text: JSON's `\u0000` in a request, input or result, and NUL in a
/// title or message, kept and read back on every backend (PostgreSQL's
/// `text` cannot hold one: only its own search columns show U+FFFD).
fn nul_characters_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = stores::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    let nul = json!({"note": "a\u{0}b", "list": ["\u{0}"]});
    let id = store
        .create(NewTask {
            title: Some("title\u{0}with nul".into()),
            request: Some(nul.clone()),
            input_schema: Some(s0()),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;
    store
        .provide_input(&id, json!({"service": "pay\u{0}ments"}), None)
        .unwrap();
    store
        .heartbeat(&id, Some("still\u{0}here".into()), None, Actor::Anyone)
        .unwrap();
    store.complete(&id, nul.clone(), Actor::Anyone).unwrap();
    let task = Store::connect(&path)
        .expect("a store URL")
        .get(&id)
        .unwrap();
    assert_eq!(task.title.as_deref(), Some("title\u{0}with nul"));
    assert_eq!(task.request.as_ref(), Some(&nul));
    assert_eq!(task.result.as_ref(), Some(&nul));
    assert_eq!(task.input_value, Some(json!({"service": "pay\u{0}ments"})));
    assert_eq!(task.status_message.as_deref(), Some("still\u{0}here"));
    // The list and its filters read such a task as any other. (The text
    // filter finds what comes before the NUL: SQLite's `LIKE`, as its
    // other string functions, ends a string there.)
    let page = store
        .page(&rudder_store::PageQuery {
            text: Some("title".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(page.iter().map(|t| &t.task_id).collect::<Vec<_>>(), [&id]);
}

rudder_testkit::backend_tests! {
    every_mutation_on_every_status: every_mutation_on_every_status_once,
    error_messages_name_task_status_and_operation: error_messages_name_task_status_and_operation_once,
    every_mutation_on_an_unknown_task: every_mutation_on_an_unknown_task_once,
    unknown_task_on_a_store_that_does_not_exist_yet: unknown_task_on_a_store_that_does_not_exist_yet_once,
    a_prefix_finds_a_task_and_an_ambiguous_one_is_refused: a_prefix_finds_a_task_and_an_ambiguous_one_is_refused_once,
    provide_input_only_if_unchanged_since_a_revision: provide_input_only_if_unchanged_since_a_revision_once,
    a_zombie_worker_cannot_overwrite_its_successor: a_zombie_worker_cannot_overwrite_its_successor_once,
    create_is_idempotent_by_key: create_is_idempotent_by_key_once,
    tasks_are_created_listed_and_claimed_by_kind: tasks_are_created_listed_and_claimed_by_kind_once,
    create_starts_working_or_input_required: create_starts_working_or_input_required_once,
    prune_racing_every_mutation_gives_only_typed_answers: prune_racing_every_mutation_once,
    nul_characters_in_values_and_text_are_kept: nul_characters_once,
}
