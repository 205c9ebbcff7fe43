//! The worker API against the low-level Store calls it is built on
//! (issue 19 "Speed"), on SQLite and PostgreSQL (a throwaway cluster with
//! fsync on, as a real server; skipped with a message without PostgreSQL's
//! server programs):
//!
//! - `loop`: W workers (threads, each its own store connection, as W
//!   processes) each running claim, three progress reports, complete until
//!   no task is left, over 480 tasks; tasks per second, median of 15 runs,
//!   and the API's cost as the median of 15 pairs' ratios (a run's fsyncs
//!   swing by 10–20%, more than the 5% the figure is about, so the runs
//!   are long and many, and paired),
//!   once written with `Store::claim_next` / `heartbeat` / `complete` and
//!   once with `store.worker(..)`, `next`, `Job::progress`, `Job::complete`;
//! - `wake-up`: a worker blocked in `next()` until a task created by
//!   another process (this binary run with `--create URL`) is claimed (from
//!   just before the create to `next` returning the job, so it includes the
//!   create's commit); median of 30.
//!
//! `cargo bench --bench worker` prints one line per figure.

use rudder::store::Work as _;
use rudder_testkit::pg;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rudder::task::Progress;
use rudder::{Actor, NewTask, Store};

const TASKS: usize = 480;
const RUNS: usize = 15;
const WAKES: usize = 30;
const LEASE: Duration = Duration::from_secs(60);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn fill(url: &str, tasks: usize) {
    let store = Store::connect(url).unwrap();
    for _ in 0..tasks {
        store.create(NewTask::default()).unwrap();
    }
}

/// The loop on the low-level calls: what a worker wrote before the API.
fn low_level(store: &Store, holder: &str) -> usize {
    let actor = Actor::Worker {
        holder,
        lease: Some(LEASE),
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
    run_loop_of(url, workers, with_api, TASKS, true)
}

/// [`run_loop`] of `tasks`; `warm_worker`: the worker's own connection is
/// opened before the clock starts (else, as a Python worker cannot, it is
/// opened at the first claim: the `--loop` of python/benches/bench.py).
fn run_loop_of(url: &str, workers: usize, with_api: bool, tasks: usize, warm_worker: bool) -> f64 {
    fill(url, tasks);
    let barrier = Arc::new(Barrier::new(workers + 1));
    let threads: Vec<_> = (0..workers)
        .map(|i| {
            let (url, barrier) = (url.to_string(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                // Connections and workers are made before the clock starts.
                let store = Store::connect(&url).unwrap();
                let holder = format!("bench-{i}");
                // Only the API's run has a worker (the low-level loop is
                // what a worker wrote before the API: no feed, no renewer).
                let mut worker =
                    with_api.then(|| store.worker(holder.clone()).lease(LEASE).start().unwrap());
                // Warm the connection the loop uses: the worker's is its
                // own (opening it under the store's write lock at its first
                // claim cost the 16-worker run several percent).
                match worker.as_ref() {
                    Some(worker) if warm_worker => worker.store().counts().unwrap(),
                    _ => store.counts().unwrap(),
                };
                barrier.wait();
                match worker.as_mut() {
                    Some(worker) => api(worker),
                    None => low_level(&store, &holder),
                }
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let done: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let took = start.elapsed();
    assert_eq!(done, tasks);
    tasks as f64 / took.as_secs_f64()
}

fn loops(name: &str, url: &dyn Fn() -> String) {
    for workers in [1, 4, 16] {
        // The two loops' runs in pairs, each pair's order the other way
        // round from the last, so that the machine's load and a pair's
        // position weigh on both alike; the API's cost is the median of the
        // pairs' ratios (a run's fsyncs drift by more than the 5% the
        // figure is about, a pair's two runs much less).
        let (mut lows, mut apis, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..RUNS {
            let (low, api) = if run % 2 == 0 {
                let low = run_loop(&url(), workers, false);
                (low, run_loop(&url(), workers, true))
            } else {
                let api = run_loop(&url(), workers, true);
                (run_loop(&url(), workers, false), api)
            };
            lows.push(low);
            apis.push(api);
            ratios.push(low / api);
        }
        let (low, api) = (median(lows), median(apis));
        let mut sorted = ratios.clone();
        sorted.sort_by(f64::total_cmp);
        let quartile = |q: usize| (sorted[(sorted.len() - 1) * q / 4] - 1.0) * 100.0;
        println!(
            "{name:10} loop   {workers:2} worker(s): low-level {low:8.1} tasks/s, worker API {api:8.1} tasks/s (API's cost, median of {RUNS} pairs {:+.1}%, quartiles {:+.1}% {:+.1}%)",
            (median(ratios) - 1.0) * 100.0,
            quartile(1),
            quartile(3),
        );
    }
}

/// The other process of the wake-up: `worker --create URL` reads a line
/// from stdin, creates a task on URL and writes the wall-clock time (ns
/// since the epoch) taken just before the create, per line, until stdin
/// ends. Connected before its first line, so a sample is the create and the
/// wake-up, not a process start.
fn creator(url: &str) {
    use std::io::{BufRead, Write};
    let store = Store::connect(url).unwrap();
    store.counts().unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").unwrap();
    out.flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        line.unwrap();
        let start = epoch_ns();
        store.create(NewTask::default()).unwrap();
        writeln!(out, "{start}").unwrap();
        out.flush().unwrap();
    }
}

fn epoch_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// `next()` waking on a task another *process* created: from just before
/// that process's create (its commit included) to `next` returning the job
/// here (both clocks the machine's wall clock).
fn wake_up(name: &str, url: &str) {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let store = Store::connect(url).unwrap();
    let mut worker = store.worker("waker").lease(LEASE).start().unwrap();
    // The feed is started (and has read the store) before the first sample.
    assert!(worker.next(Duration::from_millis(50)).unwrap().is_none());
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("--create")
        .arg(url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_child = child.stdin.take().unwrap();
    let mut from_child = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(from_child.next().unwrap().unwrap(), "ready");
    let mut samples = Vec::new();
    for _ in 0..WAKES {
        writeln!(to_child, "go").unwrap();
        to_child.flush().unwrap();
        let mut job = worker
            .next(Duration::from_secs(10))
            .unwrap()
            .expect("woken");
        let woke = epoch_ns();
        let start: u128 = from_child.next().unwrap().unwrap().parse().unwrap();
        samples.push(woke.saturating_sub(start) as f64 / 1e6);
        job.complete(serde_json::json!(1)).unwrap();
    }
    drop(to_child);
    child.wait().unwrap();
    println!(
        "{name:10} wake-up: median {:.1} ms (min {:.1}, max {:.1}) over {WAKES}, task created by another process",
        median(samples.clone()),
        samples.iter().cloned().fold(f64::INFINITY, f64::min),
        samples.iter().cloned().fold(0.0, f64::max)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--create") {
        return creator(&args[i + 1]);
    }
    // `--loop URL N`: the worker API's loop once, one worker, N tasks on a
    // new store at URL; prints tasks/s (python/benches/bench.py's Rust side).
    if let Some(i) = args.iter().position(|a| a == "--loop") {
        let n = args[i + 2].parse().unwrap();
        println!("{:.1}", run_loop_of(&args[i + 1], 1, true, n, false));
        return;
    }
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
