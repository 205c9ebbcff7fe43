//! The backends side by side: one durable heartbeat at 1k, 10k and 100k
//! tasks, as a library call and as a whole `rudder heartbeat` process, and
//! a page query (the 50 most recently updated working tasks), on the JSON
//! file and on SQLite (fsync on for both: `synchronous=FULL` for SQLite).
//!
//! `cargo bench --bench backends` (`-- sqlite` or `-- file` for one). The
//! stores are generated once per size, untimed, with the same tasks.
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use rudder::store::{Backend, PageQuery, SortKey};
use rudder::task::{Status, TaskMap};
use rudder::{Actor, Store};

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

#[path = "common/tasks.rs"]
mod tasks;
use tasks::generate;

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    /// A working task to heartbeat (heartbeats never change its status).
    target: String,
}

fn fixture(name: &str, tasks: &TaskMap) -> Fixture {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join(name);
    let store = Store::connect(&path).expect("a store URL");
    store
        .backend()
        .transact(&mut |all| {
            *all = tasks.clone();
            Ok(true)
        })
        .unwrap();
    let target = tasks
        .values()
        .find(|t| t.status == Status::Working)
        .unwrap()
        .task_id
        .clone();
    Fixture {
        _dir: dir,
        path,
        target,
    }
}

fn whole_process(path: &Path, id: &str) {
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
        .arg("--store")
        .arg(path)
        .args(["heartbeat", id])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

fn backends(c: &mut Criterion) {
    for n in SIZES {
        let tasks = generate(n);
        for (backend, name) in [("file", "tasks.json"), ("sqlite", "tasks.db")] {
            let f = fixture(name, &tasks);
            let mut g = c.benchmark_group(backend);
            g.sampling_mode(SamplingMode::Flat);
            g.sample_size(if n >= 100_000 && backend == "file" {
                10
            } else {
                20
            });
            g.warm_up_time(Duration::from_millis(500));
            g.measurement_time(Duration::from_secs(3));
            let store = Store::connect(&f.path).expect("a store URL");
            g.bench_function(BenchmarkId::new("heartbeat in process", n), |b| {
                b.iter(|| {
                    black_box(
                        store
                            .heartbeat(&f.target, Some("beat".into()), None, Actor::Anyone)
                            .unwrap(),
                    )
                })
            });
            g.bench_function(BenchmarkId::new("heartbeat whole process", n), |b| {
                b.iter(|| whole_process(&f.path, &f.target))
            });
            let q = PageQuery {
                statuses: vec![Status::Working],
                sort: SortKey::Updated,
                limit: Some(50),
                ..PageQuery::default()
            };
            g.bench_function(BenchmarkId::new("page of 50", n), |b| {
                b.iter(|| black_box(store.page(&q).unwrap()))
            });
            g.finish();
        }
    }
}

criterion_group!(benches, backends);
criterion_main!(benches);
