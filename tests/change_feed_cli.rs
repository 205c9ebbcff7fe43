//! The change feed sees what other processes (the binary) write, through
//! an atomic rename or a database commit, as changes with their revision,
//! from and to; a deleted and re-created store; and the stat check alone
//! sees changes. The feed's own tests (writes through the store) are in
//! crates/store/tests/change_feed.rs.
//! Every test runs on every backend.

mod common;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::run;
use rudder::task::Status;
use rudder::watch::{FeedEvent, FeedOptions, ResetReason, Unavailable};
use rudder::{NewTask, Store};
use rudder_testkit::feed::{changes, is_changes, is_sqlite, next, until};
use serde_json::json;

/// The store in `dir`: a JSON file, or a database in the tests that run
/// on every backend.
fn store_in(dir: &Path) -> PathBuf {
    common::store_in(dir)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_changes_written_by_other_processes() {
    for kind in common::kinds() {
        common::set_kind(kind);
        reports_changes_written_by_other_processes_once().await;
    }
}

async fn reports_changes_written_by_other_processes_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    let id = store
        .create(NewTask {
            input_schema: Some(json!({"type": "object", "required": ["service"]})),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;
    let mut feed = rudder::Store::connect(&path)
        .expect("a store URL")
        .feed(FeedOptions::default());
    assert_eq!(
        next(&mut feed, "the start").await,
        FeedEvent::Reset(ResetReason::Start)
    );

    let r = cli(&path, &["input", &id, "--set", "service=payments"]).await;
    assert_eq!(r.code, 0, "{r:#?}");
    let ev = until(&mut feed, "input_required -> working", is_changes).await;
    assert_eq!(
        changes(&ev),
        [(
            id.clone(),
            Some(Status::InputRequired),
            Some(Status::Working)
        )]
    );

    // A change that is not a transition is still reported, with its revision.
    assert_eq!(
        cli(&path, &["heartbeat", &id, "--message", "step 3/7"])
            .await
            .code,
        0
    );
    let ev = until(&mut feed, "the heartbeat", is_changes).await;
    let FeedEvent::Changes(list) = &ev else {
        unreachable!()
    };
    let now = store.get(&id).unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert!(!list[0].is_transition());
    assert_eq!(
        (list[0].task_id.as_str(), list[0].revision),
        (id.as_str(), now.revision)
    );

    assert_eq!(
        cli(&path, &["complete", &id, "--result", "{\"ok\": true}"])
            .await
            .code,
        0
    );
    let ev = until(&mut feed, "working -> completed", is_changes).await;
    assert_eq!(
        changes(&ev),
        [(id.clone(), Some(Status::Working), Some(Status::Completed))]
    );
    // The change carries the writer's timestamp.
    let FeedEvent::Changes(list) = &ev else {
        unreachable!()
    };
    assert_eq!(list[0].at, store.get(&id).unwrap().updated_at);
    assert!(list[0].at.is_some());

    // A prune is a removal.
    let pruned = cli(&path, &["prune", "--older-than", "0s"]).await;
    assert_eq!(pruned.code, 0, "{pruned:#?}");
    let ev = until(&mut feed, "the removal", is_changes).await;
    assert_eq!(changes(&ev), [(id, Some(Status::Completed), None)]);
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
    let mut feed = rudder::Store::connect(&path)
        .expect("a store URL")
        .feed(FeedOptions::default());
    assert_eq!(
        next(&mut feed, "missing at start").await,
        FeedEvent::Unavailable(Unavailable::Missing)
    );

    let first = cli(&path, &["create", "--json"]).await.json()["task"]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Waiting for the store is over: read everything.
    assert_eq!(
        next(&mut feed, "the store to appear").await,
        FeedEvent::Reset(ResetReason::Recovered)
    );

    common::remove_store(&path);
    assert_eq!(
        until(&mut feed, "the deletion", |e| !is_changes(e)).await,
        FeedEvent::Unavailable(Unavailable::Missing)
    );

    let second = cli(
        &path,
        &["create", "--json", "--schema", "{\"type\": \"object\"}"],
    )
    .await
    .json()["task"]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        next(&mut feed, "the re-creation").await,
        FeedEvent::Reset(ResetReason::Recovered)
    );
    if !is_sqlite(&path) && !common::is_postgres(&path) {
        // The file is compared with the last good read: the old task is
        // gone, the new one appeared. (A new database starts a new list of
        // changes: the reset alone says it all.)
        let ev = next(&mut feed, "what changed meanwhile").await;
        assert_eq!(
            changes(&ev),
            [
                (second, None, Some(Status::InputRequired)),
                (first, Some(Status::Working), None)
            ]
        );
    }
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
    let id = Store::connect(&path)
        .expect("a store URL")
        .create(NewTask::default())
        .unwrap()
        .task
        .task_id;
    let options = FeedOptions {
        notify: false,
        stat_interval: Duration::from_millis(50),
        ..FeedOptions::default()
    };
    let mut feed = rudder::Store::connect(&path)
        .expect("a store URL")
        .feed(options);
    next(&mut feed, "the start").await;
    assert_eq!(cli(&path, &["cancel", &id]).await.code, 0);
    let ev = until(&mut feed, "the cancel", is_changes).await;
    assert_eq!(
        changes(&ev),
        [(id, Some(Status::Working), Some(Status::Cancelled))]
    );
}
