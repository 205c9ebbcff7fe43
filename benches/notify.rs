//! `rudder notify`'s delivery latency (issue 34 "Speed"): from just before
//! a write that makes a task wait for input (a `create` with a schema, in
//! this process) to the notifier's program having started (it writes a
//! byte to a FIFO this process reads), on the JSON file, SQLite and
//! PostgreSQL (a throwaway cluster with fsync on; skipped with a message
//! without PostgreSQL's server programs). The notifier is the built
//! binary, `rudder notify --exec`, started once per store and warmed up
//! by a first event. Median and 90th percentile of 30 events each.
//!
//! `cargo bench --bench notify` prints one line per store.

#[path = "../tests/common/pg.rs"]
#[allow(dead_code)]
mod pg;

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

fn main() {
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
        return;
    }
    let cluster = pg::Cluster::start_durable().expect("a cluster");
    latency(
        "postgres",
        &cluster.url(&cluster.create_database()),
        dir.path(),
    );
}
