//! Store benchmarks: each durable operation (fsync on: the real file backend)
//! at 100, 1k and 10k tasks, loading at those sizes, and a change-feed round
//! trip (write through the store, wait until the feed yields the snapshot).
//!
//! `cargo bench --bench store`. Targets on a 2-core machine: a durable
//! operation at 10k tasks ≤ 30 ms median, loading 10k tasks ≤ 20 ms.
//!
//! `cargo bench --bench store -- read-floor` prints whole `rudder` reads
//! (`get`, an existing-key `create`, `list --json`) of a store of 10k
//! tasks written by a rudder writer (which vouches for every task's text)
//! against a minimal reader of the same file, interleaved in the same run
//! (`RUDDER_BENCH_READ_ROUNDS`, default 30, runs of each).
//!
//! The store file of each size is generated once (`common/tasks.rs`'s rich
//! tasks: titles, requests, schemas, histories, results) and restored, untimed, whenever a
//! benchmark has used up its pool of suitable tasks, so that every measured
//! operation runs against a store of (nearly) the nominal size.
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group};
use rudder::store::encode;
use rudder::task::Status;
use rudder::watch::{FeedEvent, FeedOptions, ResetReason};
use rudder::{Actor, NewTask, Store};
use serde_json::json;

#[path = "common/tasks.rs"]
mod tasks;
use tasks::{generate_rich, schema};

const SIZES: [usize; 3] = [100, 1_000, 10_000];

/// One store of a given size, with the ids of its tasks by kind.
struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    original: Vec<u8>,
    working: Vec<String>,
    waiting: Vec<String>,
    n: usize,
}

impl Fixture {
    fn new(n: usize) -> Fixture {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let path = dir.path().join("tasks.json");
        let tasks = generate_rich(n);
        let original = encode(&tasks, 0);
        let ids = |s: Status| -> Vec<String> {
            tasks
                .values()
                .filter(|t| t.status == s)
                .map(|t| t.task_id.clone())
                .collect()
        };
        let f = Fixture {
            _dir: dir,
            path,
            working: ids(Status::Working),
            waiting: ids(Status::InputRequired),
            original,
            n,
        };
        f.restore();
        f
    }

    /// Put the original content back (atomically, untimed).
    fn restore(&self) {
        let tmp = self.path.with_extension("json.bench");
        std::fs::write(&tmp, &self.original).unwrap();
        std::fs::rename(&tmp, &self.path).unwrap();
    }

    fn store(&self) -> Store {
        Store::connect(&self.path).expect("a store URL")
    }
}

/// Time `op` on tasks taken from `pool` in turn, restoring the store when the
/// pool is used up (each task can take the operation once).
fn time_on_pool(
    f: &Fixture,
    pool: &[String],
    iters: u64,
    cursor: &mut usize,
    mut op: impl FnMut(&Store, &str),
) -> Duration {
    let store = f.store();
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        if *cursor == pool.len() {
            f.restore();
            *cursor = 0;
        }
        let id = &pool[*cursor];
        *cursor += 1;
        let start = Instant::now();
        op(&store, id);
        total += start.elapsed();
    }
    total
}

fn configure(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, n: usize) {
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_secs(if n >= 10_000 { 6 } else { 2 }));
}

fn operations(c: &mut Criterion) {
    for n in SIZES {
        let f = Fixture::new(n);
        let mut g = c.benchmark_group("durable");
        configure(&mut g, n);

        g.bench_function(BenchmarkId::new("create", n), |b| {
            let store = f.store();
            let mut added = 0;
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Keep the store within 5% of its nominal size.
                    if added >= (n / 20).max(5) {
                        f.restore();
                        added = 0;
                    }
                    let start = Instant::now();
                    black_box(
                        store
                            .create(NewTask {
                                title: Some("INC-9999 new incident".into()),
                                request: Some(json!({"incident": "INC-9999"})),
                                input_schema: Some(schema()),
                                ..NewTask::default()
                            })
                            .unwrap(),
                    );
                    total += start.elapsed();
                    added += 1;
                }
                total
            });
        });
        f.restore();

        let mut cursor = 0;
        g.bench_function(BenchmarkId::new("provide_input", n), |b| {
            b.iter_custom(|iters| {
                time_on_pool(&f, &f.waiting, iters, &mut cursor, |s, id| {
                    black_box(
                        s.provide_input(id, json!({"service": "payments"}), None)
                            .unwrap(),
                    );
                })
            });
        });
        f.restore();

        g.bench_function(BenchmarkId::new("heartbeat", n), |b| {
            let store = f.store();
            let id = &f.working[0];
            b.iter(|| {
                black_box(
                    store
                        .heartbeat(id, Some("step 4/7".into()), None, Actor::Anyone)
                        .unwrap(),
                )
            });
        });
        f.restore();

        let mut cursor = 0;
        g.bench_function(BenchmarkId::new("complete", n), |b| {
            b.iter_custom(|iters| {
                time_on_pool(&f, &f.working, iters, &mut cursor, |s, id| {
                    black_box(
                        s.complete(id, json!({"summary": "done"}), Actor::Anyone)
                            .unwrap(),
                    );
                })
            });
        });
        f.restore();

        let mut cursor = 0;
        g.bench_function(BenchmarkId::new("cancel", n), |b| {
            b.iter_custom(|iters| {
                time_on_pool(&f, &f.waiting, iters, &mut cursor, |s, id| {
                    black_box(s.cancel(id, Some("operator".into())).unwrap());
                })
            });
        });
        f.restore();
        g.finish();

        let mut g = c.benchmark_group("read");
        configure(&mut g, n);
        let store = f.store();
        let id = f.working[f.working.len() / 2].clone();
        g.bench_function(BenchmarkId::new("get", n), |b| {
            b.iter(|| black_box(store.get(&id[..8]).unwrap()));
        });
        g.bench_function(BenchmarkId::new("list", n), |b| {
            b.iter(|| black_box(store.list(&[Status::InputRequired]).unwrap()));
        });
        g.bench_function(BenchmarkId::new("load", n), |b| {
            b.iter(|| black_box(store.load().unwrap()));
        });
        g.finish();
        assert_eq!(store.load().unwrap().len(), f.n);
    }
}

fn feed_round_trip(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("feed_round_trip");
    for n in SIZES {
        configure(&mut g, n);
        let f = Fixture::new(n);
        let store = f.store();
        let id = f.working[0].clone();
        let mut feed = rt.block_on(async {
            let mut feed = rudder::Store::connect(&f.path)
                .expect("a store URL")
                .feed(FeedOptions::default());
            assert_eq!(
                feed.next().await,
                Some(FeedEvent::Reset(ResetReason::Start))
            );
            feed
        });
        g.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                rt.block_on(async {
                    let revision = store
                        .heartbeat(&id, None, None, Actor::Anyone)
                        .unwrap()
                        .task
                        .revision;
                    loop {
                        match feed.next().await {
                            Some(FeedEvent::Changes(changes))
                                if changes
                                    .iter()
                                    .any(|c| c.task_id == id && c.revision == revision) =>
                            {
                                break;
                            }
                            Some(_) => {}
                            None => panic!("the feed stopped"),
                        }
                    }
                })
            });
        });
        drop(feed);
    }
    g.finish();
}

/// The physical floor of one durable write of a store file of this size:
/// read the file, write the same bytes to a temp file, fsync it, rename it
/// over the store, fsync the directory. No rudder write can cost less.
fn floor_write(path: &std::path::Path) {
    use std::io::Write;
    let bytes = std::fs::read(path).unwrap();
    let tmp = path.with_extension("floor-tmp");
    let mut f = std::fs::File::create(&tmp).unwrap();
    f.write_all(&bytes).unwrap();
    f.sync_all().unwrap();
    drop(f);
    std::fs::rename(&tmp, path).unwrap();
    std::fs::File::open(path.parent().unwrap())
        .unwrap()
        .sync_all()
        .unwrap();
}

/// Env var that makes this benchmark binary do [`floor_write`] on the path
/// it names and exit: the whole-process floor, a Rust process as small as
/// a process can be.
const FLOOR_ENV: &str = "RUDDER_BENCH_FLOOR";

/// Heartbeats against the floor at 10k and 100k tasks, in the same run:
/// in process, and as whole processes (`rudder heartbeat` against this
/// binary doing only the floor).
fn against_the_floor(c: &mut Criterion) {
    let me = std::env::current_exe().unwrap();
    for n in [10_000, 100_000] {
        let f = Fixture::new(n);
        let mut g = c.benchmark_group("floor");
        configure(&mut g, 10_000);
        g.bench_function(BenchmarkId::new("floor", n), |b| {
            b.iter(|| floor_write(&f.path));
        });
        let store = f.store();
        let id = f.working[0].clone();
        g.bench_function(BenchmarkId::new("heartbeat", n), |b| {
            b.iter(|| {
                black_box(
                    store
                        .heartbeat(&id, Some("step 4/7".into()), None, Actor::Anyone)
                        .unwrap(),
                )
            });
        });
        g.bench_function(BenchmarkId::new("floor_process", n), |b| {
            b.iter(|| {
                let status = std::process::Command::new(&me)
                    .env(FLOOR_ENV, &f.path)
                    .status()
                    .unwrap();
                assert!(status.success());
            });
        });
        g.bench_function(BenchmarkId::new("heartbeat_process", n), |b| {
            b.iter(|| {
                let status = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
                    .arg("--store")
                    .arg(&f.path)
                    .args(["heartbeat", &id, "--message", "step 4/7"])
                    .stdout(std::process::Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success());
            });
        });
        g.finish();
    }
}

/// Env var that makes this benchmark binary do [`floor_read`] and exit:
/// `find:NEEDLE:PATH` or `cat:PATH`.
const READ_FLOOR_ENV: &str = "RUDDER_BENCH_READ_FLOOR";

/// The floor of a whole process that reads a store file: read it whole,
/// then `find:NEEDLE` looks for the needle's line (`memmem`) and writes
/// the text from there to the next task's line, `cat` writes it all out.
/// No rudder read can cost less than its mode: `get` and an existing-key
/// `create` against `find`, `list --json` against `cat`.
fn floor_read(spec: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Some(rest) = spec.strip_prefix("find:") {
        let (needle, path) = rest.rsplit_once(':').unwrap();
        let bytes = std::fs::read(path).unwrap();
        let at = memchr::memmem::find(&bytes, needle.as_bytes()).unwrap();
        let end =
            memchr::memmem::find(&bytes[at + 1..], b"\n  \"").map_or(bytes.len(), |e| at + 1 + e);
        out.write_all(&bytes[at..end]).unwrap();
    } else {
        let path = spec.strip_prefix("cat:").unwrap();
        out.write_all(&std::fs::read(path).unwrap()).unwrap();
    }
    out.flush().unwrap();
}

/// The median of `v` (sorted here).
fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    let n = v.len();
    (v[(n - 1) / 2] + v[n / 2]) / 2
}

/// Whole `rudder` reads of a store file of 10k tasks, as rudder writes
/// them (the seed's layout, and rich tasks), against [`floor_read`]
/// processes of the same file, interleaved in the same run (printed, with
/// the ratios): `get ID`, `create --key K` of an existing key (which
/// writes nothing) and `list --json`.
fn reads_against_the_floor() {
    let me = std::env::current_exe().unwrap();
    let rounds: usize = std::env::var("RUDDER_BENCH_READ_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let n = 10_000;
    for (layout, tasks) in [
        ("seed", tasks::generate(n)),
        ("rich", tasks::generate_rich(n)),
    ] {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let path = dir.path().join("tasks.json");
        // Written by a rudder writer (every task's text its encoder's, so
        // it vouches for them in its record: `list --json` prints them as
        // they stand), as `rudder copy` or any write of every task would.
        let store = Store::connect(&path).unwrap();
        rudder::store::Backend::transaction(store.backend(), &mut |txn| {
            for task in tasks.values() {
                txn.insert(task.clone())?;
            }
            Ok(true)
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), encode(&tasks, 0));
        // A working task (no schema): the create that repeats it gives its
        // request, as a retried create does.
        let (id, key, request) = {
            let t = tasks.values().nth(n / 2).unwrap();
            assert!(t.input_schema.is_none());
            let request = serde_json::to_string(t.request.as_ref().unwrap()).unwrap();
            (
                t.task_id.clone(),
                t.idempotency_key.clone().unwrap(),
                request,
            )
        };
        // As a store rudder wrote: one write through rudder (which checks
        // the file and records it for the next reader).
        let working = tasks
            .values()
            .find(|t| t.status == Status::Working)
            .unwrap()
            .task_id
            .clone();
        store
            .heartbeat(&working, None, None, Actor::Anyone)
            .unwrap();
        let lock = std::fs::read_to_string(path.with_file_name("tasks.json.lock")).unwrap();
        assert!(
            lock.contains("\ncanonical-store "),
            "not vouched for: {lock}"
        );
        let id_line = format!("\n  \"{id}\": ");
        let key_text = format!("\"idempotency_key\": \"{key}\"");
        let run = |cmd: &mut std::process::Command| {
            let started = Instant::now();
            let status = cmd.stdout(std::process::Stdio::null()).status().unwrap();
            assert!(status.success());
            started.elapsed()
        };
        let floor = |spec: String| {
            let me = me.clone();
            move || {
                let mut c = std::process::Command::new(&me);
                c.env(READ_FLOOR_ENV, &spec);
                c
            }
        };
        let rudder = |args: Vec<String>| {
            let path = path.clone();
            move || {
                let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"));
                c.arg("--store").arg(&path).args(&args);
                c
            }
        };
        let p = path.display().to_string();
        type Make = Box<dyn Fn() -> std::process::Command>;
        let cases: [(&str, Make, Make); 3] = [
            (
                "get ID",
                Box::new(floor(format!("find:{id_line}:{p}"))),
                Box::new(rudder(vec!["get".into(), id.clone()])),
            ),
            (
                "create --key EXISTING",
                Box::new(floor(format!("find:{key_text}:{p}"))),
                Box::new(rudder(vec![
                    "create".into(),
                    "--key".into(),
                    key.clone(),
                    "--request".into(),
                    request.clone(),
                    "--json".into(),
                ])),
            ),
            (
                "list --json",
                Box::new(floor(format!("cat:{p}"))),
                Box::new(rudder(vec!["list".into(), "--json".into()])),
            ),
        ];
        for (name, floor, ours) in &cases {
            let (mut f, mut o) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                f.push(run(&mut floor()));
                o.push(run(&mut ours()));
            }
            let (f, o) = (median(&mut f), median(&mut o));
            println!(
                "read-floor/{layout}/{n}: {name}: floor median {f:.2?}, rudder median {o:.2?} \
                 ({:.2}x the floor; {rounds} interleaved runs of each)",
                o.as_secs_f64() / f.as_secs_f64()
            );
        }
    }
}

criterion_group!(benches, operations, feed_round_trip, against_the_floor);

fn main() {
    if let Some(path) = std::env::var_os(FLOOR_ENV) {
        floor_write(std::path::Path::new(&path));
        return;
    }
    if let Ok(spec) = std::env::var(READ_FLOOR_ENV) {
        floor_read(&spec);
        return;
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !std::env::args().any(|a| a == "--test")
        && (args.is_empty() || args.iter().any(|a| "read-floor".contains(a.as_str())))
    {
        reads_against_the_floor();
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
