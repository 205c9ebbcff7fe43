//! Reading a change feed in the tests, shared by the store's feed tests
//! (`crates/store/tests/change_feed.rs`) and the binary's
//! (`tests/change_feed_cli.rs`).

use std::path::Path;
use std::time::Duration;

use rudder_model::task::Status;
use rudder_store::watch::{ChangeFeed, FeedEvent, TaskChange};

/// Generous: this waits for an event, it does not measure anything.
pub const DEADLINE: Duration = Duration::from_secs(15);

/// The feed's next event (`what` names it in the panic when none comes).
pub async fn next(feed: &mut ChangeFeed, what: &str) -> FeedEvent {
    tokio::time::timeout(DEADLINE, feed.next())
        .await
        .unwrap_or_else(|_| panic!("no event while waiting for {what}"))
        .expect("the feed stopped")
}

/// Skip events until one matches; returns it.
pub async fn until(
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

/// The (task, from, to) of each change of a `Changes` event.
pub fn changes(ev: &FeedEvent) -> Vec<(String, Option<Status>, Option<Status>)> {
    match ev {
        FeedEvent::Changes(changes) => changes
            .iter()
            .map(
                |TaskChange {
                     task_id, from, to, ..
                 }| (task_id.clone(), *from, *to),
            )
            .collect(),
        other => panic!("expected changes, got {other:?}"),
    }
}

/// Whether `ev` is a batch of changes.
pub fn is_changes(ev: &FeedEvent) -> bool {
    matches!(ev, FeedEvent::Changes(_))
}

/// Whether the store at `path` is a SQLite database (the tests name theirs `*.db`).
pub fn is_sqlite(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "db")
}
