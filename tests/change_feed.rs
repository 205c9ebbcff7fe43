//! The change feed sees what other processes write (through an atomic
//! rename), a deleted and re-created store, unparsable writes (keeping the
//! last good snapshot), and reports transitions with their from and to.
//! Every test that does not write a file by hand runs on every backend.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::run;
use rudder::task::Status;
use rudder::watch::{ChangeFeed, FeedEvent, FeedOptions, Transition};
use rudder::{Actor, NewTask, Store};
use serde_json::json;

/// Generous: this waits for an event, it does not measure anything.
const DEADLINE: Duration = Duration::from_secs(15);

async fn next(feed: &mut ChangeFeed, what: &str) -> FeedEvent {
    tokio::time::timeout(DEADLINE, feed.next())
        .await
        .unwrap_or_else(|_| panic!("no event while waiting for {what}"))
        .expect("the feed stopped")
}

/// Skip events until one matches; returns it.
async fn until(
    feed: &mut ChangeFeed,
    what: &str,
    mut f: impl FnMut(&FeedEvent) -> bool,
) -> FeedEvent {
    let give_up = tokio::time::Instant::now() + DEADLINE;
    loop {
        let ev = tokio::time::timeout_at(give_up, feed.next())
            .await
            .unwrap_or_else(|_| panic!("no event while waiting for {what}"))
            .expect("the feed stopped");
        if f(&ev) {
            return ev;
        }
    }
}

fn transitions(ev: &FeedEvent) -> Vec<(String, Option<Status>, Status)> {
    match ev {
        FeedEvent::Snapshot { diff, .. } => diff
            .transitions
            .iter()
            .map(
                |Transition {
                     task_id, from, to, ..
                 }| (task_id.clone(), *from, *to),
            )
            .collect(),
        other => panic!("expected a snapshot, got {other:?}"),
    }
}

/// Run the binary from an async test without blocking the runtime.
async fn cli(store: &Path, args: &[&str]) -> common::Run {
    let store = store.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&store, &args)
    })
    .await
    .unwrap()
}

/// Replace `path` with `bytes` the way every writer must: temp file + rename.
fn write_atomically(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("json.test-tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The store in `dir`: a JSON file, or a database in the tests that run
/// on every backend.
fn store_in(dir: &Path) -> PathBuf {
    common::store_in(dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_transitions_written_by_other_processes() {
    for kind in common::kinds() {
        common::set_kind(kind);
        reports_transitions_written_by_other_processes_once().await;
    }
}

async fn reports_transitions_written_by_other_processes_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_in(dir.path());
    let id = Store::open(&path)
        .create(NewTask {
            input_schema: Some(json!({"type": "object", "required": ["service"]})),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;
    let mut feed = ChangeFeed::start(&path, FeedOptions::default());

    let first = next(&mut feed, "the first snapshot").await;
    assert_eq!(
        transitions(&first),
        [(id.clone(), None, Status::InputRequired)]
    );
    let FeedEvent::Snapshot { diff, tasks } = &first else {
        unreachable!()
    };
    assert_eq!(diff.appeared, std::slice::from_ref(&id));
    assert_eq!(tasks.len(), 1);

    let r = cli(&path, &["input", &id, "--set", "service=payments"]).await;
    assert_eq!(r.code, 0, "{r:#?}");
    let ev = until(&mut feed, "input_required -> working", |e| {
        matches!(e, FeedEvent::Snapshot { .. })
    })
    .await;
    assert_eq!(
        transitions(&ev),
        [(id.clone(), Some(Status::InputRequired), Status::Working)]
    );

    // A change that is not a transition is still reported, as "changed".
    assert_eq!(
        cli(&path, &["heartbeat", &id, "--message", "step 3/7"])
            .await
            .code,
        0
    );
    let ev = until(&mut feed, "the heartbeat", |e| {
        matches!(e, FeedEvent::Snapshot { .. })
    })
    .await;
    let FeedEvent::Snapshot { diff, tasks } = &ev else {
        unreachable!()
    };
    assert!(diff.transitions.is_empty(), "{diff:?}");
    assert_eq!(diff.changed, std::slice::from_ref(&id));
    assert_eq!(tasks[&id].status_message.as_deref(), Some("step 3/7"));

    assert_eq!(
        cli(&path, &["complete", &id, "--result", "{\"ok\": true}"])
            .await
            .code,
        0
    );
    let ev = until(&mut feed, "working -> completed", |e| {
        matches!(e, FeedEvent::Snapshot { .. })
    })
    .await;
    assert_eq!(
        transitions(&ev),
        [(id.clone(), Some(Status::Working), Status::Completed)]
    );
    let FeedEvent::Snapshot { tasks, diff } = &ev else {
        unreachable!()
    };
    assert_eq!(tasks[&id].status, Status::Completed);
    // The transition carries the writer's timestamp.
    assert_eq!(Some(diff.transitions[0].at), tasks[&id].updated_at);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_deletion_and_recreation() {
    for kind in common::kinds() {
        common::set_kind(kind);
        reports_deletion_and_recreation_once().await;
    }
}

async fn reports_deletion_and_recreation_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_in(dir.path());
    let mut feed = ChangeFeed::start(&path, FeedOptions::default());
    assert!(matches!(
        next(&mut feed, "missing at start").await,
        FeedEvent::Missing
    ));

    let first = cli(&path, &["create", "--json"]).await.json()["task"]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let ev = until(&mut feed, "the store to appear", |e| {
        matches!(e, FeedEvent::Snapshot { .. })
    })
    .await;
    assert_eq!(transitions(&ev), [(first.clone(), None, Status::Working)]);

    common::remove_store(&path);
    let ev = until(&mut feed, "the deletion", |e| {
        !matches!(e, FeedEvent::Snapshot { .. })
    })
    .await;
    assert!(matches!(ev, FeedEvent::Missing), "{ev:?}");

    let second = cli(
        &path,
        &["create", "--json", "--schema", "{\"type\": \"object\"}"],
    )
    .await
    .json()["task"]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let ev = until(&mut feed, "the re-creation", |e| {
        matches!(e, FeedEvent::Snapshot { .. })
    })
    .await;
    assert_eq!(
        transitions(&ev),
        [(second.clone(), None, Status::InputRequired)]
    );
    let FeedEvent::Snapshot { tasks, .. } = &ev else {
        unreachable!()
    };
    assert!(!tasks.contains_key(&first));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unparsable_write_is_reported_and_the_last_snapshot_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_in(dir.path());
    let store = Store::open(&path);
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    let good = std::fs::read(&path).unwrap();
    // The next good version, prepared elsewhere: the task completed.
    let elsewhere = store_in(&dir.path().join("elsewhere"));
    std::fs::create_dir(elsewhere.parent().unwrap()).unwrap();
    std::fs::write(&elsewhere, &good).unwrap();
    Store::open(&elsewhere)
        .complete(&id, json!("done"), Actor::Anyone)
        .unwrap();
    let completed = std::fs::read(&elsewhere).unwrap();

    let mut feed = ChangeFeed::start(&path, FeedOptions::default());
    let ev = next(&mut feed, "the first snapshot").await;
    assert_eq!(transitions(&ev), [(id.clone(), None, Status::Working)]);

    // A foreign writer renames garbage into place.
    write_atomically(&path, b"{\"half\": ");
    let ev = until(&mut feed, "the garbage", |e| {
        !matches!(e, FeedEvent::Snapshot { .. })
    })
    .await;
    let FeedEvent::Unreadable { message } = &ev else {
        panic!("{ev:?}")
    };
    assert!(
        message.contains("tasks.json") && message.contains("line 1"),
        "{message}"
    );

    // A good file again: the diff is against the last good snapshot, so the
    // task is seen going working -> completed, not appearing anew.
    write_atomically(&path, &completed);
    let ev = until(&mut feed, "the repair", |e| {
        matches!(e, FeedEvent::Snapshot { .. })
    })
    .await;
    assert_eq!(
        transitions(&ev),
        [(id.clone(), Some(Status::Working), Status::Completed)]
    );
    let FeedEvent::Snapshot { diff, .. } = &ev else {
        unreachable!()
    };
    assert!(
        diff.appeared.is_empty() && diff.vanished.is_empty(),
        "{diff:?}"
    );

    // A torn in-place write (what the seed's store could leave) is reported too.
    std::fs::write(&path, &completed[..completed.len() / 2]).unwrap();
    let ev = until(&mut feed, "the torn write", |e| {
        !matches!(e, FeedEvent::Snapshot { .. })
    })
    .await;
    assert!(matches!(ev, FeedEvent::Unreadable { .. }), "{ev:?}");
    // Restoring the same content as the last snapshot reports it again, without transitions.
    write_atomically(&path, &completed);
    let ev = until(&mut feed, "the restore", |e| {
        matches!(e, FeedEvent::Snapshot { .. })
    })
    .await;
    assert!(transitions(&ev).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stat_check_alone_sees_changes() {
    for kind in common::kinds() {
        common::set_kind(kind);
        the_stat_check_alone_sees_changes_once().await;
    }
}

async fn the_stat_check_alone_sees_changes_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_in(dir.path());
    let id = Store::open(&path)
        .create(NewTask::default())
        .unwrap()
        .task
        .task_id;
    let options = FeedOptions {
        notify: false,
        stat_interval: Duration::from_millis(50),
        ..FeedOptions::default()
    };
    let mut feed = ChangeFeed::start(&path, options);
    next(&mut feed, "the first snapshot").await;
    assert_eq!(cli(&path, &["cancel", &id]).await.code, 0);
    let ev = until(&mut feed, "the cancel", |e| {
        matches!(e, FeedEvent::Snapshot { .. })
    })
    .await;
    assert_eq!(
        transitions(&ev),
        [(id, Some(Status::Working), Status::Cancelled)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_writes_ends_in_the_final_state() {
    for kind in common::kinds() {
        common::set_kind(kind);
        a_burst_of_writes_ends_in_the_final_state_once().await;
    }
}

async fn a_burst_of_writes_ends_in_the_final_state_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_in(dir.path());
    let store = Store::open(&path);
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    let mut feed = ChangeFeed::start(&path, FeedOptions::default());
    next(&mut feed, "the first snapshot").await;
    for i in 0..20 {
        store
            .heartbeat(&id, Some(format!("beat {i}")), None, Actor::Anyone)
            .unwrap();
    }
    let final_revision = store.get(&id).unwrap().revision;
    until(&mut feed, "the last heartbeat", |e| match e {
        FeedEvent::Snapshot { tasks, .. } => tasks[&id].revision == final_revision,
        _ => false,
    })
    .await;
}

/// An idle feed must not keep re-reading the store: its own reads (inotify
/// open / close-nowrite events on the store's name) must not count as changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_feed_does_not_reread_the_store() {
    for kind in common::kinds() {
        common::set_kind(kind);
        an_idle_feed_does_not_reread_the_store_once().await;
    }
}

async fn an_idle_feed_does_not_reread_the_store_once() {
    use notify::{EventKind, RecursiveMode, Watcher};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let dir = tempfile::tempdir().unwrap();
    let path = store_in(dir.path());
    Store::open(&path).create(NewTask::default()).unwrap();
    // The spy learns of opens some time after they happen. Opening this
    // marker file shows when it has caught up: one watch reports events in
    // the order they happened, so once it has seen the marker opened, it
    // has counted every open of the store made before.
    let marker = dir.path().join("marker");
    std::fs::write(&marker, "").unwrap();
    // Count opens of the store file, whoever makes them, and of the marker.
    let opens = Arc::new(AtomicUsize::new(0));
    let markers = Arc::new(AtomicUsize::new(0));
    let (counter, marker_counter) = (opens.clone(), markers.clone());
    let name = path.file_name().unwrap().to_os_string();
    let marker_name = marker.file_name().unwrap().to_os_string();
    let mut spy = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        let Ok(ev) = ev else { return };
        if !matches!(
            ev.kind,
            EventKind::Access(notify::event::AccessKind::Open(_))
        ) {
            return;
        }
        for p in &ev.paths {
            if p.file_name() == Some(name.as_os_str()) {
                counter.fetch_add(1, Ordering::SeqCst);
            } else if p.file_name() == Some(marker_name.as_os_str()) {
                marker_counter.fetch_add(1, Ordering::SeqCst);
            }
        }
    })
    .unwrap();
    spy.watch(dir.path(), RecursiveMode::NonRecursive).unwrap();
    // Open the marker and wait for the spy to report it: every open of the
    // store made before is counted from then on.
    let caught_up = async |what: &str| {
        let seen = markers.load(Ordering::SeqCst);
        std::fs::File::open(&marker).unwrap();
        let give_up = tokio::time::Instant::now() + DEADLINE;
        while markers.load(Ordering::SeqCst) == seen {
            assert!(
                tokio::time::Instant::now() < give_up,
                "the spy never reported the marker opened {what}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };

    let mut feed = ChangeFeed::start(&path, FeedOptions::default());
    next(&mut feed, "the first snapshot").await;
    caught_up("after the first snapshot").await;
    let before = opens.load(Ordering::SeqCst);
    let reads_before = feed.reads();
    // The second the feed is watched idle: a measurement, not a wait for
    // something to happen.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reads = feed.reads() - reads_before;
    caught_up("after the idle second").await;
    let during = opens.load(Ordering::SeqCst) - before;
    assert!(
        reads <= 3,
        "the idle feed read the store {reads} times in a second"
    );
    // Nothing was written: at most a reload or two from the safety-net stat.
    assert!(
        during <= 3,
        "the idle feed opened the store {during} times in a second"
    );
    drop(feed);
}
