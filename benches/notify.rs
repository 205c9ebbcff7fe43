//! `rudder notify`'s delivery latency (issue 34 "Speed"): from just before
//! a write that makes a task wait for input (a `create` with a schema, in
//! this process) to the notifier's program having started (it writes a
//! byte to a FIFO this process reads), on the JSON file, SQLite and
//! PostgreSQL (a throwaway cluster with fsync on; skipped with a message
//! without PostgreSQL's server programs). The notifier is the built
//! binary, `rudder notify --exec`, started once per store and warmed up
//! by a first event. Median and 90th percentile of 30 events each.
//!
//! Then the cost of following a large store while nothing changes: a
//! `rudder notify --exec true` on the 1M-task SQLite store of the other
//! benchmarks (`benches/common/tasks.rs`, built once in the target
//! directory), its 300 000 waiting tasks' events recorded delivered (a
//! notifier that has caught up); once its start-up scan is over (its CPU
//! time stands still), its resident memory (`VmRSS`, and the peak
//! `VmHWM`, from `/proc/PID/status`) and the CPU time (`utime + stime`
//! from `/proc/PID/stat`) it uses over 10 s.
//!
//! `cargo bench --bench notify` prints one line per store, then the idle
//! figures (`RUDDER_BENCH_NOTIFY=idle` runs the idle part alone).

use rudder_testkit::pg;
#[path = "common/tasks.rs"]
#[allow(dead_code)]
mod tasks;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rudder::{NewTask, Store};

const EVENTS: usize = 30;

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn latency(name: &str, url: &str, dir: &Path) {
    let fifo = dir.join(format!("{name}.fifo"));
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    let hook = dir.join(format!("{name}.sh"));
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nprintf x > '{}'\ncat > /dev/null\n",
            fifo.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = Store::connect(url).unwrap();
    let schema: serde_json::Value = serde_json::json!({"type": "object"});
    let ask = || {
        store
            .create(NewTask {
                input_schema: Some(schema.clone()),
                ..NewTask::default()
            })
            .unwrap();
    };
    // The store exists before the notifier starts (its feed then starts
    // from a reset, not from a missing store).
    ask();
    let _notifier = Killed(
        Command::new(env!("CARGO_BIN_EXE_rudder"))
            .args(["--store", url, "notify", "--exec"])
            .arg(&hook)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rudder notify"),
    );
    // Opening a FIFO for reading blocks until the program opens it.
    let wait = || {
        let mut f = std::fs::File::open(&fifo).unwrap();
        let mut b = [0u8; 1];
        f.read_exact(&mut b).unwrap();
    };
    wait(); // the event of the first task: the notifier is up
    let mut ms = Vec::with_capacity(EVENTS);
    for _ in 0..EVENTS {
        let start = Instant::now();
        ask();
        wait();
        ms.push(start.elapsed().as_secs_f64() * 1000.0);
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "notify latency {name}: median {:.1} ms, p90 {:.1} ms (write to program started, {EVENTS} events)",
        percentile(ms.clone(), 0.5),
        percentile(ms, 0.9)
    );
}

/// `name`'s value in `/proc/PID/status`, in KiB.
fn status_kib(pid: u32, name: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The CPU time (user + system) of process `pid` so far.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command's closing parenthesis: utime and stime are the
    // 14th and 15th fields of the line, the 12th and 13th from here.
    let rest = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let fields: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // Clock ticks per second: `getconf CLK_TCK`, 100 on Linux.
    let hz: f64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0);
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_secs_f64(ticks as f64 / hz)
}

/// The idle notifier on the 1M-task SQLite store.
fn idle() {
    const N: usize = 1_000_000;
    let (path, _) = tasks::sqlite_fixture(N);
    // Its waiting tasks' events told already, as a notifier that has
    // caught up leaves them (their round is 0: the fixture's history has
    // no entry entering `input_required`).
    let db = rusqlite::Connection::open(&path).expect("open the fixture");
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let recorded = db
        .execute(
            "INSERT OR IGNORE INTO deliveries \
             (notifier, task_id, event, round, delivered_at, attempts) \
             SELECT 'idle', task_id, 'input_required', 0, ?1, 1 FROM tasks \
             WHERE status = 'input_required'",
            [&now],
        )
        .expect("record the events told");
    drop(db);
    if recorded > 0 {
        println!("recorded {recorded} events told");
    }
    let url = format!("sqlite:{}", path.display());
    let started = Instant::now();
    let notifier = Killed(
        Command::new(env!("CARGO_BIN_EXE_rudder"))
            .args([
                "--store", &url, "notify", "--name", "idle", "--exec", "true",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rudder notify"),
    );
    let pid = notifier.0.id();
    // The start-up scan is over once the CPU time stands still for 2 s.
    let mut last = cpu(pid);
    loop {
        std::thread::sleep(Duration::from_secs(2));
        let now = cpu(pid);
        if now == last {
            break;
        }
        last = now;
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the notifier did not settle"
        );
    }
    let settled = started.elapsed();
    let before = cpu(pid);
    std::thread::sleep(Duration::from_secs(10));
    let used = cpu(pid) - before;
    println!(
        "notify idle on 1M-task SQLite: VmRSS {:.1} MiB (peak VmHWM {:.1} MiB), CPU {} ms over 10 s \
         (start-up scan settled after {:.0?}, {:.1} s CPU)",
        status_kib(pid, "VmRSS") as f64 / 1024.0,
        status_kib(pid, "VmHWM") as f64 / 1024.0,
        used.as_millis(),
        settled,
        before.as_secs_f64()
    );
}

fn main() {
    if std::env::var("RUDDER_BENCH_NOTIFY").as_deref() == Ok("idle") {
        idle();
        return;
    }
    // `cargo bench` passes --bench; nothing else is taken.
    let dir = tempfile::tempdir().unwrap();
    latency(
        "file",
        dir.path().join("tasks.json").to_str().unwrap(),
        dir.path(),
    );
    latency(
        "sqlite",
        &format!("sqlite:{}", dir.path().join("tasks.db").display()),
        dir.path(),
    );
    if !pg::available() {
        println!(
            "notify latency postgres: skipped (PostgreSQL's server programs are not installed)"
        );
        idle();
        return;
    }
    let cluster = pg::Cluster::start_durable().expect("a cluster");
    latency(
        "postgres",
        &cluster.url(&cluster.create_database()),
        dir.path(),
    );
    drop(cluster);
    idle();
}
