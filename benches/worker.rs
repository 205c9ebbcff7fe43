//! The worker API against the low-level Store calls it is built on
//! (issue 19 "Speed"), on SQLite and PostgreSQL (a throwaway cluster with
//! fsync on, as a real server; skipped with a message without PostgreSQL's
//! server programs):
//!
//! - `loop`: W workers (threads, each its own store connection, as W
//!   processes) each running claim, three progress reports, complete until
//!   no task is left, over 160 tasks; tasks per second, median of 5 runs,
//!   once written with `Store::claim_next` / `heartbeat` / `complete` and
//!   once with `store.worker(..)`, `next`, `Job::progress`, `Job::complete`;
//! - `wake-up`: a worker blocked in `next()` until a task created on
//!   another connection is claimed (from just before the create to `next`
//!   returning the job, so it includes the create's commit); median of 30.
//!
//! `cargo bench --bench worker` prints one line per figure.

#[path = "../tests/common/pg.rs"]
#[allow(dead_code)]
mod pg;

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rudder::task::Progress;
use rudder::{Actor, NewTask, Store};

const TASKS: usize = 160;
const RUNS: usize = 5;
const WAKES: usize = 30;
const LEASE: Duration = Duration::from_secs(60);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn fill(url: &str) {
    let store = Store::connect(url).unwrap();
    for _ in 0..TASKS {
        store.create(NewTask::default()).unwrap();
    }
}

/// The loop on the low-level calls: what a worker wrote before the API.
fn low_level(store: &Store, holder: &str) -> usize {
    let actor = Actor::Worker {
        holder,
        lease: LEASE,
    };
    let mut done = 0;
    while let Some(task) = store.claim_next(holder, LEASE, &[]).unwrap() {
        for current in 1..=3 {
            let progress = Some(Progress { current, total: 3 });
            store
                .heartbeat(&task.task_id, None, progress, actor)
                .unwrap();
        }
        store
            .complete(&task.task_id, serde_json::json!(1), actor)
            .unwrap();
        done += 1;
    }
    done
}

/// The same loop on the worker API.
fn api(worker: &mut rudder::worker::Worker) -> usize {
    let mut done = 0;
    while let Some(mut job) = worker.next(Duration::ZERO).unwrap() {
        for current in 1..=3 {
            job.progress(current, 3).unwrap();
        }
        job.complete(serde_json::json!(1)).unwrap();
        done += 1;
    }
    done
}

/// Tasks per second of `workers` threads running the loop once.
fn run_loop(url: &str, workers: usize, with_api: bool) -> f64 {
    fill(url);
    let barrier = Arc::new(Barrier::new(workers + 1));
    let threads: Vec<_> = (0..workers)
        .map(|i| {
            let (url, barrier) = (url.to_string(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                // Connections and workers are made before the clock starts.
                let store = Store::connect(&url).unwrap();
                let holder = format!("bench-{i}");
                let mut worker = store.worker(holder.clone()).lease(LEASE).start().unwrap();
                store.counts().unwrap();
                barrier.wait();
                if with_api {
                    api(&mut worker)
                } else {
                    low_level(&store, &holder)
                }
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let done: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let took = start.elapsed();
    assert_eq!(done, TASKS);
    TASKS as f64 / took.as_secs_f64()
}

fn loops(name: &str, url: &dyn Fn() -> String) {
    for workers in [1, 4, 16] {
        let mut figures = Vec::new();
        for with_api in [false, true] {
            let runs: Vec<f64> = (0..RUNS)
                .map(|_| run_loop(&url(), workers, with_api))
                .collect();
            figures.push(median(runs));
        }
        let (low, api) = (figures[0], figures[1]);
        println!(
            "{name:10} loop   {workers:2} worker(s): low-level {low:8.1} tasks/s, worker API {api:8.1} tasks/s ({:+.1}%)",
            (low / api - 1.0) * 100.0
        );
    }
}

fn wake_up(name: &str, url: &str) {
    let store = Store::connect(url).unwrap();
    let creator = Store::connect(url).unwrap();
    creator.counts().unwrap();
    let mut worker = store.worker("waker").lease(LEASE).start().unwrap();
    // The feed is started (and has read the store) before the first sample.
    assert!(worker.next(Duration::from_millis(50)).unwrap().is_none());
    let mut samples = Vec::new();
    for _ in 0..WAKES {
        let (tx, rx) = std::sync::mpsc::channel();
        let url = url.to_string();
        let create = std::thread::spawn(move || {
            let creator = Store::connect(&url).unwrap();
            creator.counts().unwrap();
            rx.recv().unwrap();
            let start = Instant::now();
            creator.create(NewTask::default()).unwrap();
            start
        });
        tx.send(()).unwrap();
        let job = worker
            .next(Duration::from_secs(10))
            .unwrap()
            .expect("woken");
        let woke = Instant::now();
        let start = create.join().unwrap();
        samples.push((woke - start).as_secs_f64() * 1000.0);
        let mut job = job;
        job.complete(serde_json::json!(1)).unwrap();
    }
    let _ = creator;
    println!(
        "{name:10} wake-up: median {:.1} ms (min {:.1}, max {:.1}) over {WAKES}",
        median(samples.clone()),
        samples.iter().cloned().fold(f64::INFINITY, f64::min),
        samples.iter().cloned().fold(0.0, f64::max)
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter of criterion's style is ignored.
    let dir = tempfile::tempdir().unwrap();
    let n = std::cell::Cell::new(0);
    let sqlite = |dir: &Path| {
        n.set(n.get() + 1);
        format!(
            "sqlite:{}",
            dir.join(format!("bench-{}.db", n.get())).display()
        )
    };
    loops("sqlite", &|| sqlite(dir.path()));
    wake_up("sqlite", &sqlite(dir.path()));
    if !pg::available() {
        println!("postgres: skipped (PostgreSQL's server programs are not installed)");
        return;
    }
    let cluster = pg::Cluster::start_durable().expect("a cluster");
    loops("postgres", &|| cluster.url(&cluster.create_database()));
    wake_up("postgres", &cluster.url(&cluster.create_database()));
}
