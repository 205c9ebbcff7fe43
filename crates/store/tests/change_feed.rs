//! The change feed sees what is written to the store (through an atomic
//! rename, or a database commit) as changes with their revision, from and
//! to, unparsable writes (keeping the last good state), one task's feed,
//! and tells its reader to re-read everything when it must. What other
//! processes (the binary) write, a deleted and re-created store, and the
//! stat check alone are the root's tests/change_feed_cli.rs.
//! Every test that does not write a file by hand runs on every backend.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rudder_model::task::Actor;
use rudder_model::task::Status;
use rudder_store::watch::{FeedEvent, FeedOptions, MAX_BATCH, ResetReason, Unavailable};
use rudder_store::{NewTask, Store};
use rudder_testkit::feed::{DEADLINE, changes, is_changes, is_sqlite, next, until};
use serde_json::json;

/// Replace `path` with `bytes` the way every writer must: temp file + rename.
fn write_atomically(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("json.test-tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The store in `dir`: a JSON file, or a database in the tests that run
/// on every backend.
fn store_in(dir: &Path) -> PathBuf {
    rudder_testkit::stores::store_in(dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unparsable_write_is_reported_and_the_last_state_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    let good = std::fs::read(&path).unwrap();
    // The next good version, prepared elsewhere: the task completed.
    let elsewhere = store_in(&dir.path().join("elsewhere"));
    std::fs::create_dir(elsewhere.parent().unwrap()).unwrap();
    std::fs::write(&elsewhere, &good).unwrap();
    Store::connect(&elsewhere)
        .expect("a store URL")
        .complete(&id, json!("done"), Actor::Anyone)
        .unwrap();
    let completed = std::fs::read(&elsewhere).unwrap();

    let mut feed = rudder_store::Store::connect(&path)
        .expect("a store URL")
        .feed(FeedOptions::default());
    assert_eq!(
        next(&mut feed, "the start").await,
        FeedEvent::Reset(ResetReason::Start)
    );

    // A foreign writer renames garbage into place.
    write_atomically(&path, b"{\"half\": ");
    let ev = next(&mut feed, "the garbage").await;
    let FeedEvent::Unavailable(Unavailable::Unreadable { message }) = &ev else {
        panic!("{ev:?}")
    };
    assert!(
        message.contains("tasks.json") && message.contains("line 1"),
        "{message}"
    );

    // A good file again: a reset, then what changed since the last good
    // read, so the task is seen going working -> completed, not appearing
    // anew.
    write_atomically(&path, &completed);
    assert_eq!(
        next(&mut feed, "the repair").await,
        FeedEvent::Reset(ResetReason::Recovered)
    );
    let ev = next(&mut feed, "what changed meanwhile").await;
    assert_eq!(
        changes(&ev),
        [(id.clone(), Some(Status::Working), Some(Status::Completed))]
    );

    // A torn in-place write (what the seed's store could leave) is reported too.
    std::fs::write(&path, &completed[..completed.len() / 2]).unwrap();
    let ev = until(&mut feed, "the torn write", |e| !is_changes(e)).await;
    assert!(
        matches!(ev, FeedEvent::Unavailable(Unavailable::Unreadable { .. })),
        "{ev:?}"
    );
    // Restoring the same content as the last good read: available again,
    // with nothing changed (a later change is the next event).
    write_atomically(&path, &completed);
    assert_eq!(
        next(&mut feed, "the restore").await,
        FeedEvent::Reset(ResetReason::Recovered)
    );
    store.cancel(&id, None).unwrap_err();
    let created = store.create(NewTask::default()).unwrap().task.task_id;
    let ev = next(&mut feed, "the next change").await;
    assert_eq!(changes(&ev), [(created, None, Some(Status::Working))]);
}

/// The wake-up alone, with a safety net too slow to matter: what a writer
/// that keeps the store open (a worker, `rudder mcp`) writes reaches the
/// feed through the watch (SQLite: its lock file, closed after each commit,
/// while its `-wal` stays open; the file: its rename).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_alone_sees_changes() {
    for kind in rudder_testkit::stores::kinds() {
        rudder_testkit::stores::set_kind(kind);
        the_watch_alone_sees_changes_once().await;
    }
}

async fn the_watch_alone_sees_changes_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_in(dir.path());
    let writer = std::sync::Arc::new(Store::connect(&path).expect("a store URL"));
    let id = writer.create(NewTask::default()).unwrap().task.task_id;
    let options = FeedOptions {
        stat_interval: Duration::from_secs(3600),
        ..FeedOptions::default()
    };
    let mut feed = rudder_store::Store::connect(&path)
        .expect("a store URL")
        .feed(options);
    next(&mut feed, "the start").await;
    for cancel in [false, true] {
        let (w, task) = (writer.clone(), id.clone());
        tokio::task::spawn_blocking(move || match cancel {
            false => w
                .heartbeat(&task, Some("still here".into()), None, Actor::Anyone)
                .map(drop),
            true => w.cancel(&task, None).map(drop),
        })
        .await
        .unwrap()
        .unwrap();
        let to = if cancel {
            Status::Cancelled
        } else {
            Status::Working
        };
        let ev = until(&mut feed, "the write", is_changes).await;
        assert_eq!(
            changes(&ev),
            [(id.clone(), Some(Status::Working), Some(to))]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_writes_ends_in_the_final_state() {
    for kind in rudder_testkit::stores::kinds() {
        rudder_testkit::stores::set_kind(kind);
        a_burst_of_writes_ends_in_the_final_state_once().await;
    }
}

async fn a_burst_of_writes_ends_in_the_final_state_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    let mut feed = rudder_store::Store::connect(&path)
        .expect("a store URL")
        .feed(FeedOptions::default());
    next(&mut feed, "the start").await;
    for i in 0..20 {
        store
            .heartbeat(&id, Some(format!("beat {i}")), None, Actor::Anyone)
            .unwrap();
    }
    let final_revision = store.get(&id).unwrap().revision;
    let mut seen = Vec::new();
    until(&mut feed, "the last heartbeat", |e| match e {
        FeedEvent::Changes(list) => {
            seen.extend(list.iter().map(|c| c.revision));
            list.iter().any(|c| c.revision == final_revision)
        }
        _ => false,
    })
    .await;
    // Never out of order; a database reports every commit.
    assert!(seen.is_sorted(), "{seen:?}");
    if is_sqlite(&path) {
        assert_eq!(seen, (2..=final_revision).collect::<Vec<_>>());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_for_one_task_reports_only_that_task() {
    for kind in rudder_testkit::stores::kinds() {
        rudder_testkit::stores::set_kind(kind);
        a_feed_for_one_task_reports_only_that_task_once().await;
    }
}

async fn a_feed_for_one_task_reports_only_that_task_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    let other = store.create(NewTask::default()).unwrap().task.task_id;
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    let options = FeedOptions {
        task: Some(id.clone()),
        ..FeedOptions::default()
    };
    let mut feed = rudder_store::Store::connect(&path)
        .expect("a store URL")
        .feed(options);
    next(&mut feed, "the start").await;
    store.heartbeat(&other, None, None, Actor::Anyone).unwrap();
    store.create(NewTask::default()).unwrap();
    store.cancel(&id, None).unwrap();
    store.cancel(&other, None).unwrap();
    let ev = until(&mut feed, "the cancel", is_changes).await;
    assert_eq!(
        changes(&ev),
        [(id.clone(), Some(Status::Working), Some(Status::Cancelled))]
    );
    store.prune(Duration::ZERO).unwrap();
    let ev = until(&mut feed, "the prune", is_changes).await;
    assert_eq!(changes(&ev), [(id, Some(Status::Cancelled), None)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_changes_at_once_than_a_batch_are_a_reset() {
    for kind in rudder_testkit::stores::kinds() {
        rudder_testkit::stores::set_kind(kind);
        more_changes_at_once_than_a_batch_are_a_reset_once().await;
    }
}

async fn more_changes_at_once_than_a_batch_are_a_reset_once() {
    use rudder_store::Backend;
    let dir = tempfile::tempdir().unwrap();
    let path = store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    store.create(NewTask::default()).unwrap();
    let mut feed = rudder_store::Store::connect(&path)
        .expect("a store URL")
        .feed(FeedOptions::default());
    next(&mut feed, "the start").await;
    store
        .backend()
        .transaction(&mut |txn| {
            for i in 0..=MAX_BATCH {
                let mut t = rudder_model::task::Task::new(format!("bulk-{i}"), Status::Working);
                t.revision = 1;
                txn.insert(t)?;
            }
            Ok(true)
        })
        .unwrap();
    assert_eq!(
        next(&mut feed, "the bulk insert").await,
        FeedEvent::Reset(ResetReason::Overflow)
    );
}

/// A database whose changes are gone from under the cursor (a table reset
/// by hand) means the feed lost its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_whose_changes_were_reset_is_a_reset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    let store = Store::connect(&path).expect("a store URL");
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    store.heartbeat(&id, None, None, Actor::Anyone).unwrap();
    let mut feed = rudder_store::Store::connect(&path)
        .expect("a store URL")
        .feed(FeedOptions::default());
    next(&mut feed, "the start").await;
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DELETE FROM changes; DELETE FROM sqlite_sequence WHERE name = 'changes';",
        )
        .unwrap();
    }
    // The next write starts the list of changes at 1, before the cursor.
    // (The feed may also have read the emptied table before it: either
    // way its place is lost.)
    store.cancel(&id, None).unwrap();
    assert_eq!(
        until(&mut feed, "the reset", |e| !is_changes(e)).await,
        FeedEvent::Reset(ResetReason::CursorLost)
    );
    // From its new place on, the feed reports changes again.
    let created = store.create(NewTask::default()).unwrap().task.task_id;
    let ev = until(
        &mut feed,
        "the next change",
        |e| matches!(e, FeedEvent::Changes(l) if l.iter().any(|c| c.task_id == created)),
    )
    .await;
    assert_eq!(
        changes(&ev).last(),
        Some(&(created, None, Some(Status::Working)))
    );
}

/// An idle feed must not keep re-reading the store: its own reads (inotify
/// open / close-nowrite events on the store's name) must not count as changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_feed_does_not_reread_the_store() {
    for kind in rudder_testkit::stores::kinds() {
        rudder_testkit::stores::set_kind(kind);
        an_idle_feed_does_not_reread_the_store_once().await;
    }
}

async fn an_idle_feed_does_not_reread_the_store_once() {
    use notify::{EventKind, RecursiveMode, Watcher};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let dir = tempfile::tempdir().unwrap();
    // PostgreSQL notifies per database, and the shared test database
    // holds the other tests' stores (a schema each): their writes would
    // wake this feed. A database of its own keeps it idle.
    let path = match rudder_testkit::stores::kind() {
        rudder_testkit::stores::Kind::Postgres => {
            let cluster = rudder_testkit::pg::shared();
            std::path::PathBuf::from(cluster.url(&cluster.create_database()))
        }
        _ => store_in(dir.path()),
    };
    Store::connect(&path)
        .expect("a store URL")
        .create(NewTask::default())
        .unwrap();
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

    let mut feed = rudder_store::Store::connect(&path)
        .expect("a store URL")
        .feed(FeedOptions::default());
    next(&mut feed, "the start").await;
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

/// The feed is the store's own, read by its backend as the store was
/// opened: here with a size limit below the file's size, which the feed
/// keeps (it says the file cannot be read), where a feed that found its
/// store again by URL would read it with the process's 512 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_reads_the_store_with_the_settings_it_was_opened_with() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    let store = Store::connect(&path).expect("a store URL");
    for _ in 0..20 {
        store
            .create(NewTask {
                title: Some("x".repeat(200)),
                ..NewTask::default()
            })
            .unwrap();
    }
    let size = std::fs::metadata(&path).unwrap().len();
    let settings = rudder_store::Settings {
        lock_timeout: Duration::from_secs(5),
        max_store_bytes: Some(size / 2),
    };
    let limited = Store::connect_with(&path, &settings).expect("a store URL");
    let mut feed = limited.feed(FeedOptions::default());
    match next(&mut feed, "the first event").await {
        FeedEvent::Unavailable(Unavailable::Unreadable { message }) => {
            assert!(message.contains("bytes"), "{message}")
        }
        other => panic!("expected the file refused as too large, got {other:?}"),
    }
    // The whole process's limit reads it.
    let mut feed = store.feed(FeedOptions::default());
    assert_eq!(
        next(&mut feed, "the start").await,
        FeedEvent::Reset(ResetReason::Start)
    );
}
