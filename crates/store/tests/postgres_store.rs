//! The PostgreSQL backend against a real server (see
//! crates/testkit/src/pg.rs), through the store: schema creation, readers
//! of an empty database, many processes on one
//! database, faults (the server stopped mid-burst, backends terminated
//! mid-transaction), the feed of a dropped store, older schemas read and
//! migrated. What the binary does over PostgreSQL (errors and exit codes,
//! roles, TLS, `copy`, `migrate`, waiting through a restart) is the root's
//! tests/postgres_cli.rs.

use std::path::PathBuf;
use std::time::Duration;

use rudder_model::task::{Actor, Status};
use rudder_store::{Backend, NewTask, PostgresBackend, Store, StoreUrl};
use rudder_testkit::pg;
use serde_json::json;

/// Skip (loudly, see `pg::available`) without PostgreSQL.
macro_rules! need_pg {
    () => {
        if !pg::available() {
            return;
        }
    };
}

fn backend(url: &str) -> PostgresBackend {
    match StoreUrl::parse(url).expect("a URL") {
        StoreUrl::Postgres(u) => PostgresBackend::new(u),
        other => panic!("not postgres: {other:?}"),
    }
}

/// Says, in `cargo test`'s output, whether the PostgreSQL tests run and on
/// what: `pg::available` prints where the server binaries are (or that the
/// tests are skipped) on the process's stderr, which the harness does not
/// capture; here the shared cluster answers and its version is printed too.
/// With `RUDDER_REQUIRE_PG=1` a missing server fails this test by name.
#[test]
fn postgres_server_found_or_skipped() {
    use std::io::Write;
    if !pg::available() {
        let _ = writeln!(
            std::io::stderr(),
            "postgres_server_found_or_skipped: SKIPPED, no PostgreSQL server"
        );
        return;
    }
    let cluster = pg::shared();
    let version: String = cluster
        .admin()
        .query_one("SELECT version()", &[])
        .expect("the test cluster answers")
        .get(0);
    let _ = writeln!(
        std::io::stderr(),
        "postgres_server_found_or_skipped: FOUND, {version} (binaries in {}, cluster in {})",
        cluster.bin().display(),
        cluster.dir().display()
    );
    assert!(version.starts_with("PostgreSQL"), "{version}");
}

#[test]
fn a_new_database_reads_empty_and_the_first_write_creates_the_schema() {
    need_pg!();
    let url = pg::store_url();
    let store = Store::connect(&url).expect("a store URL");
    assert!(store.load().unwrap().is_empty());
    assert!(!store.backend().exists().unwrap());
    assert_eq!(backend(&url).last_change().unwrap(), None);
    let created = store
        .create(NewTask {
            title: Some("first".into()),
            idempotency_key: Some("k1".into()),
            ..NewTask::default()
        })
        .unwrap();
    assert!(store.backend().exists().unwrap());
    let again = store
        .create(NewTask {
            title: Some("first".into()),
            idempotency_key: Some("k1".into()),
            ..NewTask::default()
        })
        .unwrap();
    assert_eq!(again.task.task_id, created.task.task_id);
    let id = created.task.task_id.clone();
    let claimed = store
        .claim_next("w1", Duration::from_secs(60), &[])
        .unwrap()
        .expect("a claimable task");
    assert_eq!(claimed.task_id, id);
    assert!(
        store
            .claim_next("w2", Duration::from_secs(60), &[])
            .unwrap()
            .is_none()
    );
    store
        .complete(
            &id[..8],
            json!({"ok": true}),
            Actor::Worker {
                holder: "w1",
                lease: Some(Duration::from_secs(60)),
            },
        )
        .unwrap();
    let counts = store.counts().unwrap();
    assert_eq!(counts.get(Status::Completed), 1);
    assert_eq!(counts.total(), 1);
    assert!(backend(&url).last_change().unwrap().unwrap() >= 3);
}

/// A store's tables are the ones in the first schema of the connection's
/// search path, where a writer makes them: a store in a later schema of
/// the path is not this URL's store (read empty; a write to one of its
/// tasks finds no task and makes no tables), whatever the schemas are
/// called. The probe's cheap form reads the path the server reports, so a
/// schema whose name must be quoted is spelled here as the server spells it.
#[test]
fn the_store_is_the_one_in_the_first_schema_of_the_search_path() {
    need_pg!();
    let cluster = pg::shared();
    let db = cluster.create_database();
    cluster.sql(
        &db,
        r#"CREATE SCHEMA later; CREATE SCHEMA first; CREATE SCHEMA "a""b,c""#,
    );
    let url = |path: &str| cluster.url_in(&db, path);
    let tables_in = |schema: &str| -> i64 {
        cluster.query(
            &db,
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1",
            &[&schema],
        )[0]
        .get(0)
    };
    let new_task = || NewTask {
        title: Some("in one schema".into()),
        ..NewTask::default()
    };
    let mut ids = Vec::new();
    for path in ["later", r#""a""b,c""#] {
        let store = Store::connect(url(path)).expect("a store URL");
        ids.push(store.create(new_task()).unwrap().task.task_id);
    }
    for (path, id) in [
        ("later", &ids[0]),
        ("later,first", &ids[0]),
        (r#""a""b,c""#, &ids[1]),
        (r#""a""b,c",later"#, &ids[1]),
    ] {
        let store = Store::connect(url(path)).expect("a store URL");
        assert!(store.backend().exists().unwrap(), "{path}");
        assert_eq!(store.load().unwrap().len(), 1, "{path}");
        store
            .heartbeat(id, Some("here".into()), None, Actor::Anyone)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    for path in ["first,later", r#"first,"a""b,c""#] {
        let store = Store::connect(url(path)).expect("a store URL");
        assert!(!store.backend().exists().unwrap(), "{path}");
        assert!(store.load().unwrap().is_empty(), "{path}");
        for id in &ids {
            assert!(
                store.heartbeat(id, None, None, Actor::Anyone).is_err(),
                "{path}: {id}"
            );
        }
    }
    assert_eq!(
        tables_in("first"),
        0,
        "a write that found no task made no tables"
    );
}

/// A dropped store closes its connection: the database is left with none
/// (a long-lived process that opens and drops stores, as the TUI and
/// `rudder mcp` do, leaks no connection).
#[test]
fn a_dropped_store_closes_its_connection() {
    need_pg!();
    let cluster = pg::shared();
    let db = cluster.create_database();
    let connections = || -> i64 {
        pg::off_runtime(|| {
            let mut admin = cluster.admin();
            admin.query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1",
                &[&db],
            )
        })
        .expect("count connections")
        .get(0)
    };
    let store = Store::connect(cluster.url(&db)).expect("a store URL");
    store
        .create(NewTask {
            title: Some("one".into()),
            ..NewTask::default()
        })
        .expect("a create");
    assert_eq!(connections(), 1, "the store's own connection");
    drop(store);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while connections() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the dropped store's connection is still open after a minute"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Not a test of its own: one "machine" of
/// `many_machines_lose_nothing_and_run_nothing_twice`. Creates the shared
/// jobs (keys every machine uses: one task per key), then claims and
/// completes until nothing is left, printing what it won.
#[test]
fn child_machine() {
    let (Some(url), Ok(name)) = (
        std::env::var_os("RUDDER_TEST_MACHINE_STORE"),
        std::env::var("RUDDER_TEST_MACHINE_NAME"),
    ) else {
        return;
    };
    let store = Store::connect(url).expect("a store URL");
    let jobs: usize = std::env::var("RUDDER_TEST_MACHINE_JOBS")
        .unwrap()
        .parse()
        .unwrap();
    let mut out = String::new();
    for i in 0..jobs {
        let o = store
            .create(NewTask {
                idempotency_key: Some(format!("job-{i}")),
                title: Some(format!("job {i}")),
                ..NewTask::default()
            })
            .expect("create");
        if o.change == rudder_model::task::Change::Applied {
            out.push_str(&format!("CREATED {}\n", o.task.task_id));
        }
    }
    let lease = Duration::from_secs(600);
    while let Some(task) = store.claim_next(&name, lease, &[]).expect("claim") {
        let done = store
            .complete(
                &task.task_id,
                json!({"by": name}),
                Actor::Worker {
                    holder: &name,
                    lease: Some(lease),
                },
            )
            .expect("complete what this machine holds");
        assert_eq!(done.change, rudder_model::task::Change::Applied);
        out.push_str(&format!("COMPLETED {}\n", task.task_id));
    }
    print!("{out}");
}

fn spawn_child(test: &str, env: &[(&str, &str)]) -> std::process::Child {
    let mut c = std::process::Command::new(std::env::current_exe().unwrap());
    c.args([test, "--exact", "--nocapture", "--test-threads=1", "-q"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

fn lines_with<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .collect()
}

#[test]
fn many_machines_lose_nothing_and_run_nothing_twice() {
    need_pg!();
    const MACHINES: usize = 6;
    const JOBS: usize = 40;
    let url = pg::store_url();
    let children: Vec<_> = (0..MACHINES)
        .map(|m| {
            let name = format!("machine-{m}");
            spawn_child(
                "child_machine",
                &[
                    ("RUDDER_TEST_MACHINE_STORE", &url),
                    ("RUDDER_TEST_MACHINE_NAME", &name),
                    ("RUDDER_TEST_MACHINE_JOBS", &JOBS.to_string()),
                ],
            )
        })
        .collect();
    let mut created = Vec::new();
    let mut completed = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(
            out.status.success(),
            "a machine failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        created.extend(
            lines_with(&stdout, "CREATED ")
                .into_iter()
                .map(String::from),
        );
        completed.extend(
            lines_with(&stdout, "COMPLETED ")
                .into_iter()
                .map(String::from),
        );
    }
    // One winner per key: exactly one create of each job was applied.
    assert_eq!(created.len(), JOBS, "{created:?}");
    let tasks = Store::connect(&url).expect("a store URL").load().unwrap();
    assert_eq!(tasks.len(), JOBS);
    // Every job run exactly once, by the machine that says it ran it.
    completed.sort();
    let mut unique = completed.clone();
    unique.dedup();
    assert_eq!(unique, completed, "a task was completed twice");
    assert_eq!(completed.len(), JOBS);
    for task in tasks.values() {
        assert_eq!(task.status, Status::Completed, "{task:?}");
        let by = task.result.as_ref().unwrap()["by"].as_str().unwrap();
        assert!(by.starts_with("machine-"), "{task:?}");
        let completes = task
            .history
            .iter()
            .filter(|h| h.status == Status::Completed)
            .count();
        assert_eq!(completes, 1, "{task:?}");
    }
    assert_eq!(
        Store::connect(&url)
            .expect("a store URL")
            .counts()
            .unwrap()
            .get(Status::Completed),
        JOBS
    );
}

/// Not a test of its own: creates tasks until it is stopped or its store
/// fails, printing each acknowledged create.
#[test]
fn child_create_loop() {
    let Some(url) = std::env::var_os("RUDDER_TEST_CREATE_STORE") else {
        return;
    };
    use std::io::Write;
    let store = Store::connect(url).expect("a store URL");
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        match store.create(NewTask {
            title: Some(format!("burst {i}")),
            ..NewTask::default()
        }) {
            Ok(o) => {
                writeln!(out, "CREATED {}", o.task.task_id).unwrap();
                out.flush().unwrap();
            }
            Err(e) => {
                writeln!(out, "ERROR {e}").unwrap();
                return;
            }
        }
    }
}

/// The counts and the changes agree with the tasks: nothing half-applied.
fn assert_whole(url: &str) {
    let store = Store::connect(url).expect("a store URL");
    let tasks = store.load().unwrap();
    let mut expect = std::collections::BTreeMap::new();
    for t in tasks.values() {
        *expect.entry(t.status).or_insert(0usize) += 1;
    }
    assert_eq!(
        store.counts().unwrap().0,
        expect,
        "counts disagree with the tasks"
    );
    let StoreUrl::Postgres(u) = StoreUrl::parse(url).unwrap() else {
        unreachable!()
    };
    let changes: i64 = pg::off_runtime(|| {
        postgres::Client::connect(u.secret_text(), postgres::NoTls)?
            .query_one("SELECT count(*) FROM rudder_changes", &[])
    })
    .unwrap()
    .get(0);
    // Only creates ran: one change each.
    assert_eq!(
        changes as usize,
        tasks.len(),
        "changes disagree with the tasks"
    );
}

#[test]
fn a_server_stopped_mid_burst_keeps_every_acknowledged_write() {
    need_pg!();
    let cluster = pg::Cluster::start().expect("a cluster of its own");
    let db = cluster.create_database();
    let url = cluster.url(&db);
    // The lock timeout bounds how long the writer waits for the server
    // it lost before it reports it.
    let child = spawn_child(
        "child_create_loop",
        &[
            ("RUDDER_TEST_CREATE_STORE", &url),
            ("RUDDER_LOCK_TIMEOUT", "2s"),
        ],
    );
    // Wait until the burst is under way, then crash the server.
    let store = Store::connect(&url).expect("a store URL");
    rudder_testkit::wait_for(Duration::from_secs(60), || {
        (store.counts().ok()?.total() >= 50).then_some(())
    })
    .expect("the burst started");
    drop(store);
    cluster.stop_immediate();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let acknowledged = lines_with(&stdout, "CREATED ");
    let error = lines_with(&stdout, "ERROR ");
    assert_eq!(error.len(), 1, "the writer saw the server go: {stdout}");
    assert!(!error[0].contains("s3cret"));
    cluster.start_server().expect("restart");
    let tasks = Store::connect(&url).expect("a store URL").load().unwrap();
    for id in &acknowledged {
        assert!(tasks.contains_key(*id), "acknowledged create {id} was lost");
    }
    // At most the one create under way when the server went may be in
    // without having been acknowledged.
    assert!(tasks.len() <= acknowledged.len() + 1);
    assert_whole(&url);
    // And the store takes writes again.
    Store::connect(&url)
        .expect("a store URL")
        .create(NewTask::default())
        .unwrap();
}

#[test]
fn backends_terminated_mid_transaction_are_retried_or_reported_never_doubled() {
    need_pg!();
    let cluster = pg::shared();
    let db = cluster.create_database();
    let url = cluster.url(&db);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Creates answered so far (applied or refused).
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writer = {
        let url = url.clone();
        let stop = stop.clone();
        let answered = answered.clone();
        std::thread::spawn(move || {
            let store = Store::connect(&url).expect("a store URL");
            let (mut ok, mut failed) = (Vec::new(), Vec::new());
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || ok.len() < 50 {
                let title = format!("t{i}");
                match store.create(NewTask {
                    title: Some(title.clone()),
                    ..NewTask::default()
                }) {
                    Ok(_) => ok.push(title),
                    Err(e) => failed.push((title, e.to_string())),
                }
                answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                i += 1;
            }
            (ok, failed)
        })
    };
    let mut killed = 0;
    for _ in 0..30 {
        // One termination per create at most: a create whose every
        // attempt is terminated (ten, under a loaded machine) would be
        // reported as the termination, which is not what this tests.
        let before = answered.load(std::sync::atomic::Ordering::Relaxed);
        killed += cluster.terminate_backends(&db);
        let next = rudder_testkit::wait_for(Duration::from_secs(20), || {
            (answered.load(std::sync::atomic::Ordering::Relaxed) > before).then_some(())
        });
        assert!(next.is_some(), "the writer stopped answering");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (ok, failed) = writer.join().unwrap();
    assert!(killed > 0, "no backend was terminated");
    let tasks = Store::connect(&url).expect("a store URL").load().unwrap();
    let mut titles: Vec<String> = tasks.values().filter_map(|t| t.title.clone()).collect();
    titles.sort();
    let mut unique = titles.clone();
    unique.dedup();
    assert_eq!(unique, titles, "a create was applied twice");
    for t in &ok {
        assert!(titles.contains(t), "acknowledged {t} was lost");
    }
    // A failure is reported only when the commit's fate is unknown, and
    // says so; everything else was run again.
    for (t, e) in &failed {
        assert!(e.contains("may or may not"), "{t}: {e}");
    }
    assert!(titles.len() <= ok.len() + failed.len());
    assert_whole(&url);
}

/// Drop the store at `url`: `feed` says it is missing (within 20 s).
async fn removed_is_missing(feed: &mut rudder_store::watch::ChangeFeed, url: &str) {
    let path = PathBuf::from(url);
    pg::off_runtime(|| rudder_testkit::stores::remove_store(&path));
    let ev = tokio::time::timeout(Duration::from_secs(20), feed.next()).await;
    assert!(
        matches!(
            ev,
            Ok(Some(rudder_store::watch::FeedEvent::Unavailable(
                rudder_store::watch::Unavailable::Missing
            )))
        ),
        "{ev:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_of_one_task_reports_its_changes() {
    if !pg::available() {
        return;
    }
    let url = pg::off_runtime(pg::store_url);
    let store = Store::connect(&url).expect("a store URL");
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    let other = store.create(NewTask::default()).unwrap().task.task_id;
    let mut feed = rudder_store::Store::connect(&url)
        .expect("a store URL")
        .feed(rudder_store::watch::FeedOptions {
            task: Some(id.clone()),
            ..Default::default()
        });
    let first = tokio::time::timeout(Duration::from_secs(20), feed.next()).await;
    assert!(
        matches!(first, Ok(Some(rudder_store::watch::FeedEvent::Reset(_)))),
        "{first:?}"
    );
    store.heartbeat(&other, None, None, Actor::Anyone).unwrap();
    store.heartbeat(&id, None, None, Actor::Anyone).unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(20), feed.next()).await;
    let Ok(Some(rudder_store::watch::FeedEvent::Changes(changes))) = ev else {
        panic!("{ev:?}")
    };
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].task_id, id);
    removed_is_missing(&mut feed, &url).await;
}

/// `rudder wait`'s case: a store dropped right after the feed's first read
/// (before its safety net ever looked) is reported missing. The safety net
/// used to compare each look with the one before, and "no store" before
/// the first look equalled "no store" after the drop: `wait` waited to its
/// timeout. A current-thread runtime, as `wait`'s; no `LISTEN` wake-ups
/// (a drop sends none anyway), so only the safety net can tell.
#[tokio::test(flavor = "current_thread")]
async fn a_store_dropped_before_the_feeds_first_look_is_reported_missing() {
    if !pg::available() {
        return;
    }
    let url = pg::off_runtime(pg::store_url);
    let store = Store::connect(&url).expect("a store URL");
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    let mut feed = rudder_store::Store::connect(&url)
        .expect("a store URL")
        .feed(rudder_store::watch::FeedOptions {
            task: Some(id),
            notify: false,
            // Long enough for the drop to be done before the first look.
            stat_interval: Duration::from_secs(2),
            ..Default::default()
        });
    let first = tokio::time::timeout(Duration::from_secs(20), feed.next()).await;
    assert!(
        matches!(first, Ok(Some(rudder_store::watch::FeedEvent::Reset(_)))),
        "{first:?}"
    );
    removed_is_missing(&mut feed, &url).await;
}

/// A store of schema version 2 (no `status_message` column, no trigram
/// index, indexes `NULLS LAST`): a reader's text filter still answers from
/// the tasks; the first write migrates it to version 3, the column filled
/// from the documents already there.
#[test]
fn a_version_2_store_is_read_and_then_migrated_by_the_first_write() {
    need_pg!();
    let url = pg::store_url();
    let store = Store::connect(&url).expect("a store URL");
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    store
        .heartbeat(
            &id,
            Some("looking for the needle".into()),
            None,
            Actor::Anyone,
        )
        .unwrap();
    drop(store);
    let StoreUrl::Postgres(u) = StoreUrl::parse(&url).unwrap() else {
        unreachable!()
    };
    let mut admin = postgres::Client::connect(u.secret_text(), postgres::NoTls).expect("connect");
    admin
        .batch_execute(
            // A store of version 2 had neither the text index nor kinds.
            "DROP INDEX rudder_tasks_by_text; \
             ALTER TABLE rudder_tasks DROP COLUMN status_message; \
             DROP INDEX rudder_tasks_by_status_kind; \
             ALTER TABLE rudder_tasks DROP COLUMN kind; \
             UPDATE rudder_schema SET version = 2",
        )
        .unwrap();
    let needle = rudder_store::query::PageQuery {
        text: Some("NEEDLE".into()),
        ..Default::default()
    };
    let store = Store::connect(&url).expect("a store URL");
    let found = store.page(&needle).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].task_id, id);
    store.create(NewTask::default()).unwrap();
    let (version, message): (i32, Option<String>) = {
        let v = admin
            .query_one("SELECT version FROM rudder_schema", &[])
            .unwrap()
            .get(0);
        let m = admin
            .query_one(
                "SELECT status_message FROM rudder_tasks WHERE task_id = $1",
                &[&id],
            )
            .unwrap()
            .get(0);
        (v, m)
    };
    assert_eq!(version, rudder_store::postgres::SCHEMA_VERSION);
    assert_eq!(message.as_deref(), Some("looking for the needle"));
    let found = Store::connect(&url)
        .expect("a store URL")
        .page(&needle)
        .unwrap();
    assert_eq!(found.len(), 1);
}

/// A store of the schema before kinds (no `kind` column, no index of it):
/// a reader's kind filter answers from the tasks in full; the first write
/// migrates it, the column filled from the documents already there, and
/// claims by kind then find the task.
#[test]
fn a_store_from_before_kinds_is_read_and_then_migrated_by_the_first_write() {
    need_pg!();
    let url = pg::store_url();
    let store = Store::connect(&url).expect("a store URL");
    let new = |kind: &str| NewTask {
        kind: Some(kind.into()),
        ..NewTask::default()
    };
    let id = store.create(new("diagnose")).unwrap().task.task_id;
    store.create(new("backup")).unwrap();
    drop(store);
    let StoreUrl::Postgres(u) = StoreUrl::parse(&url).unwrap() else {
        unreachable!()
    };
    let mut admin = postgres::Client::connect(u.secret_text(), postgres::NoTls).expect("connect");
    let before = rudder_store::postgres::KIND_VERSION - 1;
    admin
        .batch_execute(&format!(
            "ALTER TABLE rudder_tasks DROP COLUMN kind; \
             UPDATE rudder_schema SET version = {before}"
        ))
        .unwrap();
    let diagnose = rudder_store::query::PageQuery {
        kinds: vec!["diagnose".into()],
        ..Default::default()
    };
    let store = Store::connect(&url).expect("a store URL");
    let found = store.page(&diagnose).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].task_id, id);
    assert_eq!(store.list(&[]).unwrap().len(), 2);
    store.create(NewTask::default()).unwrap();
    let (version, kind): (i32, Option<String>) = {
        let v = admin
            .query_one("SELECT version FROM rudder_schema", &[])
            .unwrap()
            .get(0);
        let k = admin
            .query_one("SELECT kind FROM rudder_tasks WHERE task_id = $1", &[&id])
            .unwrap()
            .get(0);
        (v, k)
    };
    assert!(version >= rudder_store::postgres::KIND_VERSION);
    assert_eq!(kind.as_deref(), Some("diagnose"));
    assert_eq!(store.page(&diagnose).unwrap().len(), 1);
    let claimed = store
        .claim_next("w", Duration::from_secs(60), &["diagnose".into()])
        .unwrap();
    assert_eq!(claimed.map(|t| t.task_id), Some(id));
}

/// A row whose status no rudder writes (a hand-edited table) is reported
/// as corrupt, as SQLite reports it (`tests/sqlite_store.rs`), never read
/// as `failed`.
#[test]
fn an_unknown_status_in_a_row_is_reported_as_corrupt() {
    need_pg!();
    let url = pg::store_url();
    let store = Store::connect(&url).expect("a store URL");
    let id = store.create(NewTask::default()).unwrap().task.task_id;
    let StoreUrl::Postgres(u) = StoreUrl::parse(&url).unwrap() else {
        unreachable!()
    };
    let mut admin = postgres::Client::connect(u.secret_text(), postgres::NoTls).expect("connect");
    admin
        .batch_execute(
            "UPDATE rudder_tasks SET status = 'bogus'; \
             INSERT INTO rudder_counts (status, n) VALUES ('bogus', 1)",
        )
        .unwrap();
    for result in [
        store.get(&id).map(|_| ()),
        store.cancel(&id, None).map(|_| ()),
        store.counts().map(|_| ()),
    ] {
        match result {
            Err(rudder_store::StoreError::Corrupt { message, .. }) => {
                assert!(message.contains("unknown status \"bogus\""), "{message}")
            }
            other => panic!("expected a corrupt store, got {other:?}"),
        }
    }
}
