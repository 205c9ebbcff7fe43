//! The trail: what recording who did what costs a write, and how fast it
//! is read back.
//!
//! - `author cost/BACKEND/...`: one answer's worth of writes as a person
//!   makes them (create a task with its title, request and schema, then
//!   cancel it with a reason: two history entries), side by side in one
//!   run: `before` is the store as the build before this one wrote it (no
//!   actor on the entries and, on SQLite and PostgreSQL, no trail triggers:
//!   they are dropped from a store of this schema), `author` as this build
//!   writes it (an actor, face and reason on each entry, the trail kept by
//!   the database). The JSON file has no triggers: there, `before` only
//!   lacks the actor. PostgreSQL runs on a throwaway cluster with fsync on
//!   (skipped with a message without the server's programs).
//! - `log/...`: `rudder log --since 1h --json` as a whole process (and
//!   `--actor` for one person's entries) over a SQLite store of
//!   `$RUDDER_BENCH_TRAIL_TASKS` tasks (default 1,000,000) with ten
//!   history entries each (10 M entries over 30 days), built once in the
//!   target directory and kept.
//!
//! `cargo bench --bench trail` (`-- "author cost"` or `-- log` for one).

use rudder_testkit::pg;
#[path = "common/tasks.rs"]
#[allow(dead_code)]
mod tasks;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use rudder::store::Backend;
use rudder::task::{Author, Face, HistoryEntry, Status};
use rudder::{NewTask, Store};
use serde_json::json;

/// One answer's worth of writes: a task as rudder creates one, cancelled
/// with a reason.
fn create_and_cancel(store: &Store, i: usize) {
    let made = store
        .create(NewTask {
            title: Some(format!("INC-{} checkout latency in eu-west-1", 5000 + i)),
            request: Some(
                json!({"incident": format!("INC-{}", 5000 + i), "since": "15m",
                "systems": ["events", "traces", "deploys"]}),
            ),
            input_schema: Some(tasks::schema()),
            status_message: Some("which service should I look at?".into()),
            ..NewTask::default()
        })
        .expect("create");
    store
        .cancel(&made.task.task_id, Some("duplicate of INC-4411".into()))
        .expect("cancel");
}

/// The SQL that takes a store of this schema back to writing as the build
/// before did: no trail triggers.
fn drop_triggers(url: &str) {
    if let Some(path) = url.strip_prefix("sqlite:") {
        let conn = rusqlite::Connection::open(path).expect("open");
        conn.execute_batch(
            "DROP TRIGGER trail_of_new; DROP TRIGGER trail_of_changed; DROP TRIGGER trail_of_removed;",
        )
        .expect("drop the triggers");
    } else if url.starts_with("postgres") {
        let rudder::store::StoreUrl::Postgres(u) =
            rudder::store::StoreUrl::parse(url).expect("a URL")
        else {
            unreachable!()
        };
        let mut c = postgres::Client::connect(u.secret_text(), postgres::NoTls).expect("connect");
        c.batch_execute(
            "DROP TRIGGER rudder_trail_of_new ON rudder_tasks; \
             DROP TRIGGER rudder_trail_of_changed ON rudder_tasks;",
        )
        .expect("drop the triggers");
    }
}

fn author_cost(c: &mut Criterion) {
    if !wanted("author cost") {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a temp dir");
    let cluster = pg::available().then(|| pg::Cluster::start_durable().expect("a cluster"));
    let file = |v: &str| format!("{}", dir.path().join(format!("{v}.json")).display());
    let sqlite = |v: &str| format!("sqlite:{}", dir.path().join(format!("{v}.db")).display());
    let mut urls: Vec<(&str, String, String)> = vec![
        ("file", file("before"), file("author")),
        ("sqlite", sqlite("before"), sqlite("author")),
    ];
    if let Some(cluster) = &cluster {
        urls.push((
            "postgres",
            cluster.url(&cluster.create_database()),
            cluster.url(&cluster.create_database()),
        ));
    }
    let ana = Author::new("ana@ops-1", Face::Cli).expect("a name");
    for (backend, before, author) in urls {
        // 1,000 tasks in each first, as a store in use holds.
        let stores = [
            ("before", Store::connect(&before).expect("a store URL")),
            (
                "author",
                Store::connect(&author)
                    .expect("a store URL")
                    .by(ana.clone()),
            ),
        ];
        for (_, s) in &stores {
            for i in 0..1000 {
                create_and_cancel(s, i);
            }
        }
        drop_triggers(&before);
        if wanted("interleaved") {
            interleaved(backend, &stores);
        }
        let mut g = c.benchmark_group(format!("author cost/{backend}"));
        g.sampling_mode(SamplingMode::Flat);
        g.sample_size(30);
        g.warm_up_time(Duration::from_millis(500));
        g.measurement_time(Duration::from_secs(4));
        let mut i = 1000;
        // Interleaved per sample would be fairer still; criterion runs
        // one after the other, so the two share the same minute of load.
        for (variant, store) in &stores {
            g.bench_function(BenchmarkId::new("create+cancel", variant), |b| {
                b.iter(|| {
                    i += 1;
                    create_and_cancel(store, i)
                })
            });
        }
        g.finish();
    }
}

/// Whether the command line's filter (criterion's first free argument)
/// asks for `what`, or there is no filter.
fn wanted(what: &str) -> bool {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    filter.is_none_or(|f| what.contains(&f) || f.contains(what))
}

/// The two variants one write after the other, 400 times, so that the
/// machine's load falls on both alike; prints each one's median and the
/// ratio (`author cost interleaved`).
fn interleaved(backend: &str, stores: &[(&str, Store); 2]) {
    let mut times = [Vec::new(), Vec::new()];
    for i in 0..400 {
        for (k, (_, store)) in stores.iter().enumerate() {
            let started = Instant::now();
            create_and_cancel(store, 100_000 + i);
            times[k].push(started.elapsed());
        }
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let before = median(&mut times[0]);
    let author = median(&mut times[1]);
    println!(
        "author cost interleaved/{backend}: before {before:.2?}, author {author:.2?}, ratio {:.3}",
        author.as_secs_f64() / before.as_secs_f64()
    );
}

/// A SQLite store of `n` tasks, ten history entries each over 30 days, by
/// five people; built once and kept.
fn trail_fixture(n: usize) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("trail-{n}.db"));
    let store = Store::connect(&path).expect("a store URL");
    if store.counts().map(|c| c.total()).unwrap_or(0) == n {
        return path;
    }
    for ext in ["", "-wal", "-shm"] {
        let mut p = path.clone().into_os_string();
        p.push(ext);
        let _ = std::fs::remove_file(p);
    }
    let started = Instant::now();
    let now = Utc::now();
    let span = TimeDelta::days(30).num_seconds() as f64;
    let people = ["ana@ops-1", "bo@ops-2", "cy@ops-1", "dee@ops-3", "ed@ops-2"];
    for start in (0..n).step_by(10_000) {
        store
            .backend()
            .transaction(&mut |txn| {
                for i in start..(start + 10_000).min(n) {
                    let mut t = tasks::task(i, n, now);
                    // Created evenly over the 30 days, each entry three
                    // minutes after the last.
                    let created =
                        now - TimeDelta::seconds((span * (n - i) as f64 / n as f64) as i64);
                    t.created_at = Some(created);
                    t.history.clear();
                    for k in 0..10 {
                        let status = if k % 2 == 0 {
                            Status::Working
                        } else {
                            Status::InputRequired
                        };
                        let mut h = HistoryEntry::new(
                            status,
                            created + TimeDelta::minutes(3 * k),
                            Some(if k == 0 { "created" } else { "progress" }.into()),
                        );
                        h.by(&Author::lossy(
                            people[(i + k as usize) % people.len()],
                            Face::Tui,
                        ));
                        if k % 2 == 0 && k > 0 {
                            h.fields = vec!["service".into()];
                        }
                        t.history.push(h);
                    }
                    t.status = Status::Working;
                    t.updated_at = t.history.last().map(|h| h.at);
                    txn.insert(t)?;
                }
                Ok(true)
            })
            .expect("build the database");
    }
    println!(
        "built {n} tasks, {} entries, in {:.1?}",
        n * 10,
        started.elapsed()
    );
    path
}

fn log_process(path: &Path, args: &[&str]) {
    let status = Command::new(env!("CARGO_BIN_EXE_rudder"))
        .arg("--store")
        .arg(format!("sqlite:{}", path.display()))
        .arg("log")
        .args(args)
        .stdout(Stdio::null())
        .status()
        .expect("run rudder");
    assert!(status.success());
}

fn log(c: &mut Criterion) {
    if !wanted("log") {
        return;
    }
    let n = std::env::var("RUDDER_BENCH_TRAIL_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let path = trail_fixture(n);
    let store = Store::connect(&path).expect("a store URL");
    let hour = store
        .trail(&rudder::store::TrailQuery {
            since: Some(Utc::now() - TimeDelta::hours(1)),
            ..Default::default()
        })
        .expect("the trail")
        .len();
    println!("{n} tasks: the last hour holds {hour} entries");
    let mut g = c.benchmark_group("log");
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(20);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(5));
    g.bench_function(BenchmarkId::new("--since 1h whole process", n), |b| {
        b.iter(|| log_process(&path, &["--since", "1h", "--json"]))
    });
    g.bench_function(
        BenchmarkId::new("--actor --since 1h whole process", n),
        |b| b.iter(|| log_process(&path, &["--actor", "ana@ops-1", "--since", "1h", "--json"])),
    );
    g.bench_function(
        BenchmarkId::new("rudder list --limit 1 (process floor)", n),
        |b| {
            b.iter(|| {
                let status = Command::new(env!("CARGO_BIN_EXE_rudder"))
                    .arg("--store")
                    .arg(format!("sqlite:{}", path.display()))
                    .args(["list", "--limit", "1", "--json"])
                    .stdout(Stdio::null())
                    .status()
                    .expect("run rudder");
                assert!(status.success());
            })
        },
    );
    g.finish();
}

criterion_group!(benches, author_cost, log);
criterion_main!(benches);
