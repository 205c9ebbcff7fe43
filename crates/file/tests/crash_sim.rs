//! Simulated power loss and injected I/O errors against the writing protocol.
//!
//! A fixed sequence of operations runs on a simulated file system that
//! records every call. The power-loss sweep crashes after every single call
//! of the sequence, drops what was not fsynced (in two ways a kernel may),
//! reopens and checks that the store parses and holds exactly the state
//! before or after the interrupted operation. The fault sweep fails every
//! call of every operation with ENOSPC, EIO and EACCES and checks that the
//! operation reports it, leaves the previous file and no temp file behind,
//! and succeeds once the fault is gone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use rudder_core::{ErrorClass, NewTask, StoreError};
use rudder_file::FileBackend;
use rudder_file::fs::{CrashMode, FsCall, SimFs};
use rudder_model::task::{Actor, Status};
use serde_json::{Value, json};

const ENOSPC: i32 = 28;
const EIO: i32 = 5;
const EACCES: i32 = 13;

fn store_path() -> PathBuf {
    PathBuf::from("/sim/tasks.json")
}

type Store = rudder_core::Store<FileBackend>;

/// A store on `fs` whose clock advances only when the test says so.
fn open(fs: &SimFs, clock: &Arc<AtomicI64>) -> Store {
    let clock = clock.clone();
    Store::with_backend(FileBackend::with_fs(store_path(), Arc::new(fs.clone()))).with_clock(
        Arc::new(move || -> DateTime<Utc> {
            Utc.timestamp_millis_opt(clock.load(Ordering::SeqCst))
                .single()
                .unwrap_or_default()
        }),
    )
}

/// What a person would check after recovery, keyed by title (ids are random).
type Projection = BTreeMap<String, (Status, Option<Value>, Option<Value>, u64)>;

fn project(store: &Store) -> Result<Projection, StoreError> {
    Ok(store
        .load()?
        .into_values()
        .map(|t| {
            let title = t.title.clone().unwrap_or_default();
            (title, (t.status, t.input_value, t.result, t.revision))
        })
        .collect())
}

fn id_of(store: &Store, title: &str) -> Result<String, StoreError> {
    store
        .list(&[])?
        .into_iter()
        .find(|t| t.title.as_deref() == Some(title))
        .map(|t| t.task_id)
        .ok_or(StoreError::UnknownTask { id: title.into() })
}

fn new(title: &str, key: Option<&str>, schema: Option<Value>) -> NewTask {
    NewTask {
        title: Some(title.into()),
        idempotency_key: key.map(str::to_string),
        input_schema: schema,
        ..NewTask::default()
    }
}

/// Operation `n` of the sequence.
fn step(n: usize, store: &Store, clock: &AtomicI64) -> Result<(), StoreError> {
    clock.fetch_add(1_000, Ordering::SeqCst);
    let schema = json!({"type": "object", "required": ["service"],
        "properties": {"service": {"type": "string"}}});
    let w1 = Actor::Worker {
        holder: "w1",
        lease: Some(Duration::from_secs(30)),
    };
    match n {
        0 => store.create(new("A", None, Some(schema))).map(drop),
        1 => store.create(new("B", Some("b"), None)).map(drop),
        2 => store.create(new("B", Some("b"), None)).map(drop),
        3 => store
            .provide_input(&id_of(store, "A")?, json!({"service": "payments"}), None)
            .map(drop),
        4 => store
            .claim(&id_of(store, "B")?, "w1", Duration::from_secs(30))
            .map(drop),
        5 => store
            .heartbeat(&id_of(store, "B")?, Some("step 1".into()), None, w1)
            .map(drop),
        6 => store
            .complete(&id_of(store, "A")?, json!({"summary": "ok"}), Actor::Anyone)
            .map(drop),
        7 => store
            .cancel(&id_of(store, "B")?, Some("not needed".into()))
            .map(drop),
        8 => store.create(new("C", None, None)).map(drop),
        9 => {
            clock.fetch_add(3_600_000, Ordering::SeqCst);
            store.reclaim(Duration::from_secs(900), false).map(drop)
        }
        10 => store.prune(Duration::from_secs(1800)).map(drop),
        11 => store.create(new("D", Some("d"), None)).map(drop),
        _ => unreachable!(),
    }
}

const STEPS: usize = 12;

/// The reference run: the projection after each step, and the calls each made.
fn reference() -> (Vec<Projection>, Vec<usize>) {
    let fs = SimFs::new();
    let clock = Arc::new(AtomicI64::new(1_700_000_000_000));
    let store = open(&fs, &clock);
    let mut states = vec![Projection::new()];
    let mut calls = Vec::new();
    for n in 0..STEPS {
        let before = fs.call_count();
        step(n, &store, &clock).unwrap_or_else(|e| panic!("step {n} failed: {e}"));
        calls.push(fs.call_count() - before);
        states.push(project(&store).expect("reference store loads"));
    }
    // The sequence must really exercise the state machine.
    let last = states.last().expect("states");
    // Prune removed A and B; C was failed by reclaim a moment ago and stays.
    assert_eq!(last.keys().collect::<Vec<_>>(), ["C", "D"], "{last:?}");
    assert_eq!(states[10]["C"].0, Status::Failed);
    (states, calls)
}

fn temp_files(fs: &SimFs) -> Vec<PathBuf> {
    fs.paths()
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(".rudder-tmp."))
        .collect()
}

#[test]
fn power_loss_after_every_call_recovers_to_before_or_after() {
    let (states, calls) = reference();
    let total: usize = calls.iter().sum();
    assert!(total > 50, "the sequence makes {total} calls");
    let mut checked = 0;
    for mode in [CrashMode::DropUnsynced, CrashMode::KeepDirectoryChanges] {
        for crash_at in 0..=total {
            let fs = SimFs::new();
            let clock = Arc::new(AtomicI64::new(1_700_000_000_000));
            let store = open(&fs, &clock);
            fs.crash_after(crash_at);
            let mut acked = 0;
            while acked < STEPS && step(acked, &store, &clock).is_ok() {
                acked += 1;
            }
            fs.power_loss(mode);
            let reopened = open(&fs, &clock);
            let recovered = project(&reopened).unwrap_or_else(|e| {
                panic!("crash after call {crash_at} ({mode:?}): store does not load: {e}")
            });
            let before = &states[acked];
            let after = states.get(acked + 1).unwrap_or(before);
            assert!(
                recovered == *before || recovered == *after,
                "crash after call {crash_at} ({mode:?}), {acked} steps acknowledged:\n\
                 recovered {recovered:?}\nbefore    {before:?}\nafter     {after:?}\ncalls {:?}",
                fs.calls()
            );
            // The store is usable again after the crash.
            reopened
                .create(new("E", None, None))
                .unwrap_or_else(|e| panic!("crash after call {crash_at}: next write fails: {e}"));
            checked += 1;
        }
    }
    println!("power-loss sweep: {checked} crash points checked over {total} calls");
}

fn describe(call: &FsCall) -> &'static str {
    match call {
        FsCall::Read(_) => "read",
        FsCall::Mode(_) => "stat the store",
        FsCall::CreateDirAll(_) => "directory",
        FsCall::CreateNew(_) => "temporary file",
        FsCall::Write(_, _) => "write",
        FsCall::Sync(_) => "fsync the temporary",
        FsCall::Rename(_, _) => "rename",
        FsCall::SyncDir(_) => "fsync the store directory",
        FsCall::Remove(_) => "remove",
        FsCall::ListDir(_) => "list",
        FsCall::Lock(_) => "lock",
    }
}

#[test]
fn an_io_error_at_any_call_is_reported_and_loses_nothing() {
    let (states, calls) = reference();
    let mut injected = 0;
    for (n, &count) in calls.iter().enumerate() {
        for offset in 0..count {
            for errno in [ENOSPC, EIO, EACCES] {
                let fs = SimFs::new();
                let clock = Arc::new(AtomicI64::new(1_700_000_000_000));
                let store = open(&fs, &clock);
                for k in 0..n {
                    step(k, &store, &clock).expect("steps before the fault succeed");
                }
                let start = fs.call_count();
                let before_bytes = fs.contents(&store_path());
                fs.fail_call(start + offset, errno);
                let saved_clock = clock.load(Ordering::SeqCst);
                let result = step(n, &store, &clock);
                let failed_call = fs.calls()[start + offset].clone();
                injected += 1;
                let err = match result {
                    Err(e) => e,
                    // Looking for stale temp files happens after the write
                    // is durable and is best effort: a fault there is no
                    // failure of the operation.
                    Ok(()) if matches!(failed_call, FsCall::ListDir(_)) => {
                        assert_eq!(project(&store).expect("loads"), states[n + 1], "step {n}");
                        continue;
                    }
                    Ok(()) => panic!("step {n}: fault {errno} at {failed_call:?} was not reported"),
                };
                let text = err.to_string();
                let os = std::io::Error::from_raw_os_error(errno).to_string();
                assert!(
                    text.contains(&os) && text.contains(describe(&failed_call)),
                    "step {n}: error {text:?} should name the failed call {failed_call:?} and {os:?}"
                );
                // What the CLI exits 6 for (src/cli/exit.rs): a store that
                // needs a person, or a failure worth retrying.
                assert!(
                    matches!(err.kind().class(), ErrorClass::Store | ErrorClass::Retry),
                    "I/O errors exit 6: {text}"
                );
                assert!(
                    temp_files(&fs).is_empty(),
                    "step {n}: temp file left after {failed_call:?}: {:?}",
                    fs.paths()
                );
                let visible = project(&store).expect("the store still loads");
                if matches!(failed_call, FsCall::SyncDir(_)) {
                    // The rename happened: the change is visible, and the
                    // error says it may not be durable.
                    assert_eq!(visible, states[n + 1], "step {n}");
                    assert!(text.contains("may not survive"), "{text}");
                    continue;
                }
                assert_eq!(
                    fs.contents(&store_path()),
                    before_bytes,
                    "step {n}: file changed"
                );
                assert_eq!(visible, states[n], "step {n}");
                // Once the fault is gone, the same operation succeeds.
                fs.heal();
                clock.store(saved_clock, Ordering::SeqCst);
                step(n, &store, &clock)
                    .unwrap_or_else(|e| panic!("step {n}: retry after the fault failed: {e}"));
                assert_eq!(project(&store).expect("loads"), states[n + 1], "step {n}");
            }
        }
    }
    println!("fault sweep: {injected} faults injected");
}

#[test]
fn the_protocol_orders_fsync_before_rename_before_directory_fsync() {
    let fs = SimFs::new();
    let clock = Arc::new(AtomicI64::new(0));
    let store = open(&fs, &clock);
    store.create(new("A", None, None)).expect("create");
    let kinds: Vec<&str> = fs.calls().iter().map(describe).collect();
    assert_eq!(
        kinds,
        [
            "directory",
            "lock",
            "read",
            "stat the store",
            // A new store: its directory's group (set-group-ID) is asked.
            "stat the store",
            "temporary file",
            "write",
            "fsync the temporary",
            "rename",
            "fsync the store directory",
            "list"
        ]
    );
    let lock = fs
        .calls()
        .into_iter()
        .find_map(|c| match c {
            FsCall::Lock(p) => Some(p),
            _ => None,
        })
        .expect("locks");
    assert_eq!(lock, Path::new("/sim/tasks.json.lock"));
}

#[test]
fn a_write_the_directory_refuses_to_rename_leaves_no_temp_file() {
    let fs = SimFs::new();
    let clock = Arc::new(AtomicI64::new(0));
    let store = open(&fs, &clock);
    store.create(new("A", None, None)).expect("create");
    let before = fs.contents(&store_path());
    // `chattr +a` on the directory: files may be created, never renamed
    // or removed, so a temp file once made would stay for good.
    fs.make_append_only(Path::new("/sim"));
    for title in ["B", "C", "D"] {
        let err = store.create(new(title, None, None)).expect_err("refused");
        assert!(err.to_string().contains("append-only"), "{err}");
    }
    assert_eq!(fs.contents(&store_path()), before, "the store is untouched");
    assert_eq!(temp_files(&fs), Vec::<PathBuf>::new(), "no temp file left");
}
