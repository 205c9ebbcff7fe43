//! PostgreSQL: a throwaway cluster with fsync on (as a real server), one
//! store of 1,000 tasks. Measured:
//!
//! - `heartbeat whole process`: `rudder heartbeat ID` as a new process,
//!   against `psql -c` doing the equivalent one-row UPDATE (the floor a
//!   whole process that connects and commits cannot beat by much);
//! - `heartbeat in process`: the library call on an open connection;
//! - `claim throughput`: W workers (threads, each its own connection, as
//!   W machines) claiming and completing 200 tasks (report: time per batch;
//!   tasks per second = 200 / time);
//! - `page ...`: `Store::page` as the TUI asks it (newest first after a
//!   task, the same backwards, the text filter);
//! - `feed latency`: a heartbeat on one connection until the change feed
//!   (LISTEN woken) delivers its change on another.
//!
//! `cargo bench --bench postgres` (needs PostgreSQL's server programs, as
//! the tests do; skipped with a message without them).

use rudder_testkit::pg;
use std::hint::black_box;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use rudder::watch::{FeedEvent, FeedOptions};
use rudder::{Actor, NewTask, Store};

const TASKS: usize = 1_000;
const BATCH: usize = 200;

fn rudder_heartbeat(url: &str, id: &str) {
    let status = Command::new(env!("CARGO_BIN_EXE_rudder"))
        .args(["--store", url, "heartbeat", id])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

fn postgres(c: &mut Criterion) {
    if !pg::available() {
        return;
    }
    let cluster = pg::Cluster::start_durable().expect("a cluster");
    let db = cluster.create_database();
    let url = cluster.url(&db);
    let store = Store::connect(&url).expect("a store URL");
    let mut ids = Vec::new();
    for i in 0..TASKS {
        let t = store
            .create(NewTask {
                title: Some(format!("task {i}")),
                ..NewTask::default()
            })
            .unwrap();
        ids.push(t.task.task_id);
    }
    let target = ids[TASKS / 2].clone();

    let mut g = c.benchmark_group("postgres");
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(30);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(4));

    let psql = cluster.bin().join("psql");
    let update = format!(
        "UPDATE rudder_tasks SET revision = revision + 1, updated_at = now()::text \
         WHERE task_id = '{target}'"
    );
    // Over TCP, as another machine connects: 60 runs of each (or
    // $RUDDER_BENCH_PG_ROUNDS), interleaved, so that the machine's load
    // falls on both alike; the order alternates and each run starts 20 ms
    // after the one before, on a server whose previous backend has ended:
    // `psql` leaves without waiting for the server to end its backend,
    // `rudder` waits, so back to back the run after `psql` shares the
    // machine with that backend's end (on two cores: 1.00–1.06× back to
    // back, 0.91–1.00× apart, 2026-12-06; docs/performance.md).
    let tcp = cluster.tcp_url(&db);
    let rounds: usize = std::env::var("RUDDER_BENCH_PG_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n >= 2)
        .unwrap_or(60);
    let (mut floor, mut ours) = (Vec::new(), Vec::new());
    let run_psql = |floor: &mut Vec<Duration>| {
        std::thread::sleep(Duration::from_millis(20));
        let started = Instant::now();
        let status = Command::new(&psql)
            .args(["-q", "-X", "-d", &tcp, "-c", &update])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        floor.push(started.elapsed());
    };
    let run_rudder = |ours: &mut Vec<Duration>| {
        std::thread::sleep(Duration::from_millis(20));
        let started = Instant::now();
        rudder_heartbeat(&tcp, &target);
        ours.push(started.elapsed());
    };
    for round in 0..rounds {
        if round % 2 == 0 {
            run_psql(&mut floor);
            run_rudder(&mut ours);
        } else {
            run_rudder(&mut ours);
            run_psql(&mut floor);
        }
    }
    floor.sort();
    ours.sort();
    let median = |v: &[Duration]| (v[(v.len() - 1) / 2] + v[v.len() / 2]) / 2;
    println!(
        "postgres/over TCP, {rounds} interleaved runs 20 ms apart: psql -c UPDATE median {:.2?}, \
         rudder heartbeat median {:.2?} ({:.2}x psql)",
        median(&floor),
        median(&ours),
        median(&ours).as_secs_f64() / median(&floor).as_secs_f64()
    );

    g.bench_function(BenchmarkId::new("psql -c UPDATE (floor)", TASKS), |b| {
        b.iter(|| {
            let status = Command::new(&psql)
                .args(["-q", "-X", "-d", &url, "-c", &update])
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
        })
    });
    g.bench_function(BenchmarkId::new("heartbeat whole process", TASKS), |b| {
        b.iter(|| rudder_heartbeat(&url, &target))
    });
    g.bench_function(BenchmarkId::new("heartbeat in process", TASKS), |b| {
        b.iter(|| {
            black_box(
                store
                    .heartbeat(&target, Some("beat".into()), None, Actor::Anyone)
                    .unwrap(),
            )
        })
    });

    // Pages as the TUI asks them: forwards and backwards from a task in
    // the middle, and the text filter (a rare text: one task in 1,000).
    use rudder::store::query::{PageQuery, SortKey};
    for (name, q) in [
        (
            "page of 50 newest first",
            PageQuery {
                sort: SortKey::Updated,
                after: Some(target.clone()),
                limit: Some(50),
                ..PageQuery::default()
            },
        ),
        (
            "page of 50 backwards",
            PageQuery {
                sort: SortKey::Updated,
                after: Some(target.clone()),
                limit: Some(50),
                descending: true,
                ..PageQuery::default()
            },
        ),
        (
            "text filter, page of 50",
            PageQuery {
                text: Some("TASK 777".into()),
                limit: Some(50),
                ..PageQuery::default()
            },
        ),
    ] {
        g.bench_function(BenchmarkId::new(name, TASKS), |b| {
            b.iter(|| black_box(store.page(&q).unwrap()))
        });
    }

    // Claims in a database of their own: they complete every task.
    g.sample_size(10);
    let claims_url = cluster.url(&cluster.create_database());
    let store = Store::connect(&claims_url).expect("a store URL");
    for workers in [1usize, 4, 16] {
        let stores: Vec<Store> = (0..workers)
            .map(|_| Store::connect(&claims_url).expect("a store URL"))
            .collect();
        g.bench_function(
            BenchmarkId::new(format!("claim+complete {BATCH} tasks"), workers),
            |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        for _ in 0..BATCH {
                            store.create(NewTask::default()).unwrap();
                        }
                        let start = Instant::now();
                        std::thread::scope(|s| {
                            for (w, st) in stores.iter().enumerate() {
                                s.spawn(move || {
                                    let name = format!("w{w}");
                                    let lease = Duration::from_secs(600);
                                    while let Some(t) = st.claim_next(&name, lease, &[]).unwrap() {
                                        st.complete(
                                            &t.task_id,
                                            serde_json::json!({}),
                                            Actor::Worker {
                                                holder: &name,
                                                lease: Some(lease),
                                            },
                                        )
                                        .unwrap();
                                    }
                                });
                            }
                        });
                        total += start.elapsed();
                    }
                    total
                })
            },
        );
    }

    // The feed in this process, the write on another connection.
    g.sample_size(30);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let writer = Store::connect(&url).expect("a store URL");
    let _context = runtime.enter();
    let mut feed = rudder::Store::connect(&url)
        .expect("a store URL")
        .feed(FeedOptions::default());
    runtime.block_on(async { while !matches!(feed.next().await, Some(FeedEvent::Reset(_))) {} });
    g.bench_function(BenchmarkId::new("feed latency", TASKS), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let revision = writer
                    .heartbeat(&target, None, None, Actor::Anyone)
                    .unwrap()
                    .task
                    .revision;
                runtime.block_on(async {
                    loop {
                        if let Some(FeedEvent::Changes(changes)) = feed.next().await
                            && changes
                                .iter()
                                .any(|c| c.task_id == target && c.revision >= revision)
                        {
                            break;
                        }
                    }
                });
                total += start.elapsed();
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, postgres);
criterion_main!(benches);
