//! The change log's bounded retention on SQLite and PostgreSQL
//! (`rudder_sql::retention`, docs/stores.md "Change log retention"):
//! trimmed to the bound after a large copy and after many writes, never a
//! change newer than the bound, and a feed reader whose cursor was
//! trimmed away gets `reset` and then the changes after it. The bound is
//! made small here (the same code runs with the real constants).

use std::time::Duration;

use chrono::{TimeZone, Utc};
use rudder_model::task::{Status, Task};
use rudder_sql::retention::Retention;
use rudder_store::NewTask;
use rudder_store::StoreOf;
use rudder_store::postgres::PostgresSource;
use rudder_store::sqlite::SqliteSource;
use rudder_store::watch::{Catchup, FeedSource, ResetReason};
use rudder_store::{ChangeLog, PostgresBackend, SqliteBackend, StoreUrl};
use rudder_testkit::pg;

/// Keep the last 50 changes, and nothing older for its age.
const SMALL: Retention = Retention {
    keep: 50,
    keep_for: Duration::ZERO,
    every: 10,
};

/// Keep the last 50 changes, and anything of the last hour.
const SMALL_BUT_AN_HOUR: Retention = Retention {
    keep: 50,
    keep_for: Duration::from_secs(3600),
    every: 10,
};

/// The two database backends of one store, as the tests drive them.
enum Db {
    Sqlite(SqliteBackend),
    Postgres(PostgresBackend),
}

impl Db {
    fn log(&self) -> ChangeLog {
        let log = match self {
            Db::Sqlite(b) => b.changes_after(0, None, 1_000_000).map(|l| l.map(|l| l.1)),
            Db::Postgres(b) => b.changes_after(0, None, 1_000_000).map(|l| l.map(|l| l.1)),
        };
        log.expect("read the changes").expect("a store")
    }

    fn copy(&self, tasks: &[Task]) {
        for batch in tasks.chunks(1000) {
            match self {
                Db::Sqlite(b) => b.copy_batch(batch),
                Db::Postgres(b) => b.copy_batch(batch),
            }
            .expect("copy")
            .expect("nothing newer");
        }
    }
}

/// Run `f` on a SQLite store and (when a server can be had) a PostgreSQL
/// one, each made with `retention`, with a feed source of its own.
fn each_db(retention: Retention, f: impl Fn(&dyn Fn() -> Db, &mut dyn FeedSource) + Sync) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let make = || Db::Sqlite(SqliteBackend::new(&path).with_retention(retention));
    f(&make, &mut SqliteSource::new(&path, None));
    if !pg::available() {
        return;
    }
    let url = match StoreUrl::parse(pg::store_url()).expect("a URL") {
        StoreUrl::Postgres(u) => u,
        other => panic!("not postgres: {other:?}"),
    };
    pg::off_runtime(|| {
        let make = || Db::Postgres(PostgresBackend::new(url.clone()).with_retention(retention));
        f(&make, &mut PostgresSource::new(url.clone(), None))
    });
}

fn tasks(n: usize, at: chrono::DateTime<Utc>) -> Vec<Task> {
    (0..n)
        .map(|i| {
            let mut t = Task::new(format!("task-{i:06}"), Status::Completed);
            t.created_at = Some(at);
            t.updated_at = Some(at);
            t
        })
        .collect()
}

fn create(db: Db, n: usize) {
    match db {
        Db::Sqlite(b) => create_in(&StoreOf::with_backend(b), n),
        Db::Postgres(b) => create_in(&StoreOf::with_backend(b), n),
    }
}

fn create_in<B: rudder_store::Backend>(store: &StoreOf<B>, n: usize) {
    for i in 0..n {
        store
            .create(NewTask {
                title: Some(format!("write {i}")),
                ..NewTask::default()
            })
            .expect("create");
    }
}

/// The log is every change from its first to its last, in order.
fn assert_whole(log: &ChangeLog) {
    let seqs: Vec<i64> = log.changes.iter().map(|c| c.seq).collect();
    let first = log.first.expect("a change kept");
    assert_eq!(seqs.first(), Some(&first));
    assert_eq!(seqs.last(), Some(&log.last));
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
}

#[test]
fn a_large_copy_leaves_the_last_changes_only() {
    let old = Utc.with_ymd_and_hms(2020, 1, 2, 3, 4, 5).unwrap();
    each_db(SMALL_BUT_AN_HOUR, |make, _| {
        let db = make();
        db.copy(&tasks(3000, old));
        let log = db.log();
        assert_eq!(log.last, 3000);
        assert_eq!(log.changes.len(), 50, "trimmed to the last 50");
        assert_whole(&log);
    });
}

#[test]
fn a_copy_of_tasks_changed_within_the_hour_is_kept_whole() {
    each_db(SMALL_BUT_AN_HOUR, |make, _| {
        let db = make();
        db.copy(&tasks(3000, Utc::now()));
        let log = db.log();
        assert_eq!((log.first, log.last), (Some(1), 3000));
        assert_eq!(
            log.changes.len(),
            3000,
            "nothing younger than the hour went"
        );
    });
}

#[test]
fn many_writes_keep_the_log_within_the_bound() {
    each_db(SMALL, |make, _| {
        create(make(), 300);
        let log = make().log();
        assert_eq!(log.last, 300);
        // Trimmed when a write passes a multiple of 10: at most 9 more.
        let kept = log.changes.len() as i64;
        assert!(
            (SMALL.keep..SMALL.keep + SMALL.every).contains(&kept),
            "{kept}"
        );
        assert_whole(&log);
    });
}

#[test]
fn writes_within_the_hour_are_never_trimmed() {
    each_db(SMALL_BUT_AN_HOUR, |make, _| {
        create(make(), 120);
        let log = make().log();
        assert_eq!((log.first, log.last), (Some(1), 120));
        assert_eq!(log.changes.len(), 120);
    });
}

#[test]
fn a_reader_whose_cursor_was_trimmed_away_resets_then_sees_new_changes() {
    each_db(SMALL, |make, feed| {
        create(make(), 1);
        assert_eq!(feed.catch_up(), Catchup::Reset(ResetReason::Start));
        // Within the bound, every change is told, trims or not.
        create(make(), 30);
        match feed.catch_up() {
            Catchup::Changes(c) => assert_eq!(c.len(), 30),
            other => panic!("{other:?}"),
        }
        // The reader's place goes with the next 200 writes.
        create(make(), 200);
        let log = make().log();
        assert!(log.first > Some(31), "{:?}", log.first);
        assert_eq!(feed.catch_up(), Catchup::Reset(ResetReason::CursorLost));
        create(make(), 1);
        match feed.catch_up() {
            Catchup::Changes(c) => {
                assert_eq!(c.len(), 1);
                assert_eq!(c[0].from, None);
                assert_eq!(c[0].to, Some(Status::Working));
            }
            other => panic!("{other:?}"),
        }
    });
}

/// A `copy` into an empty PostgreSQL store (`load_into_empty`) does not
/// write the changes the trim would remove at once: the log ends as a
/// full write and trim would leave it, numbered as if every change had
/// been written, and a reader whose cursor was before the load resets.
/// When the log already holds a young change (which stops the trim), the
/// load writes them all: the log keeps no hole.
#[test]
fn a_load_into_an_empty_postgres_store_leaves_the_log_a_trim_would() {
    if !pg::available() {
        return;
    }
    let old = Utc.with_ymd_and_hms(2020, 1, 2, 3, 4, 5).unwrap();
    // 2,000 tasks last changed long ago, then 1,000 of the last hour.
    let mut loaded = tasks(3000, old);
    for t in &mut loaded[2000..] {
        t.updated_at = Some(Utc::now());
    }
    pg::off_runtime(|| {
        // A store with one change, its task then removed behind rudder's
        // back (`sql`: the change's date).
        let emptied = |at: &str| {
            let text = pg::store_url();
            let url = match StoreUrl::parse(&text).expect("a URL") {
                StoreUrl::Postgres(u) => u,
                other => panic!("not postgres: {other:?}"),
            };
            let make = || PostgresBackend::new(url.clone()).with_retention(SMALL_BUT_AN_HOUR);
            create_in(&StoreOf::with_backend(make()), 1);
            let mut feed = PostgresSource::new(url.clone(), None);
            assert_eq!(feed.catch_up(), Catchup::Reset(ResetReason::Start));
            let mut c = postgres::Client::connect(&text, postgres::NoTls).expect("connect");
            c.batch_execute(&format!(
                "DELETE FROM rudder_tasks; UPDATE rudder_changes SET at = '{at}'"
            ))
            .expect("empty the store");
            let b = make();
            let counts = b
                .load_into_empty(&mut |sink| loaded.chunks(700).try_for_each(&mut *sink))
                .expect("load")
                .expect("an empty store");
            assert_eq!(counts.copied, 3000);
            (Db::Postgres(make()).log(), feed)
        };
        let (log, mut feed) = emptied("2020-01-01T00:00:00.000000000Z");
        assert_eq!((log.first, log.last), (Some(2002), 3001));
        assert_eq!(log.changes.len(), 1000, "the young ones, whole");
        assert_whole(&log);
        assert_eq!(feed.catch_up(), Catchup::Reset(ResetReason::CursorLost));
        // A young change before the load stops the trim: nothing skipped.
        let (log, _) = emptied(&rudder_store::query::time_text(Utc::now()));
        assert_eq!((log.first, log.last), (Some(1), 3001), "no hole");
        assert_whole(&log);
    });
}
