//! The stores at scale: SQLite at 100k tasks, and at 1M with
//! `RUDDER_BENCH_1M=1` (building the 1M database takes a minute or two; it
//! is kept in the target directory and reused).
//!
//! - `sqlite/heartbeat in process/N`: one durable operation, library call;
//! - `sqlite/heartbeat whole process/N`: the same as a `rudder heartbeat`
//!   process;
//! - `sqlite/page of 50/N`: the 50 most recently updated working tasks;
//! - `feed/BACKEND/N`: from a heartbeat's commit (another connection, as
//!   another process would write) to the change feed's event for it; the
//!   JSON file at 100k only;
//! - `copy/N` (printed, not criterion: one copy of 1M takes tens of
//!   seconds): a JSON file of N tasks into a new SQLite database as a whole
//!   `rudder copy` process, median of three, with its peak resident memory.
//!
//! `cargo bench --bench scale` (`-- copy`, `-- feed`, `-- sqlite` for one).
use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::Utc;
use criterion::{BenchmarkId, Criterion, SamplingMode};
use rudder::store::{PageQuery, SortKey};
use rudder::task::Status;
use rudder::watch::{FeedEvent, FeedOptions};
use rudder::{Actor, Store};

use rudder_testkit::pg;
#[path = "common/tasks.rs"]
mod tasks;

fn sizes() -> Vec<usize> {
    let mut sizes = vec![100_000];
    if std::env::var_os("RUDDER_BENCH_1M").is_some_and(|v| v == "1") {
        sizes.push(1_000_000);
    }
    sizes
}

fn whole_process(path: &Path, args: &[&str]) {
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
        .arg("--store")
        .arg(path)
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run rudder");
    assert!(status.success(), "rudder {args:?}");
}

fn sqlite(c: &mut Criterion) {
    for n in sizes() {
        let (path, target) = tasks::sqlite_fixture(n);
        let store = Store::connect(&path).expect("a store URL");
        let mut g = c.benchmark_group("sqlite");
        g.sampling_mode(SamplingMode::Flat);
        g.sample_size(20);
        g.warm_up_time(Duration::from_millis(500));
        g.measurement_time(Duration::from_secs(3));
        g.bench_function(BenchmarkId::new("heartbeat in process", n), |b| {
            b.iter(|| {
                black_box(
                    store
                        .heartbeat(&target, Some("beat".into()), None, Actor::Anyone)
                        .expect("heartbeat"),
                )
            })
        });
        g.bench_function(BenchmarkId::new("heartbeat whole process", n), |b| {
            b.iter(|| whole_process(&path, &["heartbeat", &target]))
        });
        let q = PageQuery {
            statuses: vec![Status::Working],
            sort: SortKey::Updated,
            limit: Some(50),
            ..PageQuery::default()
        };
        g.bench_function(BenchmarkId::new("page of 50", n), |b| {
            b.iter(|| black_box(store.page(&q).expect("page")))
        });
        g.finish();
    }
}

/// From a commit to the feed's event for it.
fn feed(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut stores: Vec<(&str, usize, PathBuf, String, Option<tempfile::TempDir>)> = sizes()
        .into_iter()
        .map(|n| {
            let (path, target) = tasks::sqlite_fixture(n);
            ("sqlite", n, path, target, None)
        })
        .collect();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let path = dir.path().join("tasks.json");
    let all = tasks::generate(100_000);
    std::fs::write(&path, rudder::store::encode(&all, 0)).expect("write the file");
    let target = all
        .values()
        .find(|t| t.status == Status::Working)
        .expect("a working task")
        .task_id
        .clone();
    drop(all);
    stores.push(("file", 100_000, path, target, Some(dir)));
    let mut g = c.benchmark_group("feed");
    g.sample_size(20);
    for (backend, n, path, target, _dir) in &stores {
        let writer = Store::connect(path).expect("a store URL");
        let mut feed = rt.block_on(async {
            let mut feed = rudder::Store::connect(path)
                .expect("a store URL")
                .feed(FeedOptions::default());
            feed.next().await.expect("the first event");
            feed
        });
        g.bench_function(BenchmarkId::new(*backend, n), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let revision = writer
                        .heartbeat(target, None, None, Actor::Anyone)
                        .expect("heartbeat")
                        .task
                        .revision;
                    let written = Instant::now();
                    rt.block_on(async {
                        loop {
                            match feed.next().await {
                                Some(FeedEvent::Changes(list))
                                    if list.iter().any(|c| {
                                        &c.task_id == target && c.revision == revision
                                    }) =>
                                {
                                    break;
                                }
                                Some(_) => {}
                                None => panic!("the feed stopped"),
                            }
                        }
                    });
                    total += written.elapsed();
                }
                total
            })
        });
    }
    g.finish();
}

/// A JSON file of `n` tasks, compact: 1M of the benchmark's tasks without
/// their `request` (about 500 bytes each) fit the file's 512 MiB limit.
fn json_fixture(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("from.json");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
    let now = Utc::now();
    out.write_all(b"{").expect("write");
    for i in 0..n {
        let mut t = tasks::task(i, n, now);
        t.request = None;
        if i > 0 {
            out.write_all(b",").expect("write");
        }
        serde_json::to_writer(&mut out, &t.task_id).expect("write");
        out.write_all(b":").expect("write");
        serde_json::to_writer(&mut out, &t).expect("write");
    }
    out.write_all(b"}\n").expect("write");
    out.flush().expect("flush");
    path
}

fn copy() {
    for n in sizes() {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
        let from = json_fixture(dir.path(), n);
        let bytes = std::fs::metadata(&from).map(|m| m.len()).unwrap_or(0);
        let mut times = Vec::new();
        let mut peaks = Vec::new();
        for round in 0..3 {
            let to = dir.path().join(format!("to-{round}.db"));
            let started = Instant::now();
            let child = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
                .arg("copy")
                .arg(&from)
                .arg(&to)
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("run rudder copy");
            let (ok, peak_kib) = wait_with_peak(child);
            assert!(ok, "rudder copy failed");
            times.push(started.elapsed());
            peaks.push(peak_kib);
            for ext in ["", "-wal", "-shm"] {
                let mut p = to.clone().into_os_string();
                p.push(ext);
                let _ = std::fs::remove_file(p);
            }
        }
        times.sort();
        peaks.sort();
        println!(
            "copy/{n}: JSON file ({:.0} MB) -> SQLite, whole process: median {:.2?} ({:.0} tasks/s); \
             peak RSS median {:.0} MiB; runs {:?}",
            bytes as f64 / 1e6,
            times[1],
            n as f64 / times[1].as_secs_f64(),
            peaks[1] as f64 / 1024.0,
            times
        );
    }
}

/// `rudder copy` of the same JSON file into a PostgreSQL store (a fresh
/// database each round, a durable cluster: fsync on), whole process,
/// median of three.
fn copy_postgres() {
    if !pg::available() {
        println!("copy-postgres: skipped, no PostgreSQL server programs");
        return;
    }
    let cluster = pg::Cluster::start_durable().expect("a cluster");
    for n in sizes() {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
        let from = json_fixture(dir.path(), n);
        let mut times = Vec::new();
        for _ in 0..3 {
            let url = cluster.url(&cluster.create_database());
            let started = Instant::now();
            let status = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
                .arg("copy")
                .arg(&from)
                .arg(&url)
                .stdout(std::process::Stdio::null())
                .status()
                .expect("run rudder copy");
            assert!(status.success(), "rudder copy failed");
            times.push(started.elapsed());
        }
        times.sort();
        println!(
            "copy-postgres/{n}: JSON file -> PostgreSQL, whole process: median {:.2?} \
             ({:.0} tasks/s); runs {:?}",
            times[1],
            n as f64 / times[1].as_secs_f64(),
            times
        );
    }
}

/// Wait for `child`: whether it succeeded, and its peak resident memory
/// in KiB (`ru_maxrss`).
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn wait_with_peak(child: std::process::Child) -> (bool, i64) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: plain out-parameters; the child is ours and not yet reaped
    // (`child` is never waited on through std).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above: out-parameters that outlive the call.
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(got, pid, "wait4");
    std::mem::forget(child);
    (
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        usage.ru_maxrss,
    )
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let testing = std::env::args().any(|a| a == "--test");
    let wants = |name: &str| {
        filter.is_empty()
            || filter
                .iter()
                .any(|f| name.contains(f.as_str()) || f.contains(name))
    };
    let mut c = Criterion::default().configure_from_args();
    if !testing {
        if wants("sqlite") {
            sqlite(&mut c);
        }
        if wants("feed") {
            feed(&mut c);
        }
        if wants("copy") {
            copy();
        }
        if wants("copy-postgres") {
            copy_postgres();
        }
    }
    c.final_summary();
}
