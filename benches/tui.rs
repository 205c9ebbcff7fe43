//! TUI speed: one frame at 1k/10k/100k tasks, the time from a store write to
//! the new state drawn at 10k tasks, and (outside criterion) idle CPU, frames
//! drawn while idle and resident memory of the real binary with 10k tasks.
//!
//! `cargo bench --bench tui` runs everything; `cargo bench --bench tui -- frame`
//! only the frame benchmarks; `-- idle` only the idle/memory measurement.
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use rudder::store::Store;
use rudder::task::{Progress, Status, Task, TaskMap};
use rudder::tui::app::{App, StoreUpdate};
use rudder::tui::view::{self, Theme};
use rudder::watch::{FeedEvent, ResetReason};

#[path = "common/pty.rs"]
mod pty;

fn tasks(n: usize) -> TaskMap {
    let now = Utc::now();
    (0..n)
        .map(|i| {
            let status = match i % 10 {
                0 => Status::InputRequired,
                1..=3 => Status::Working,
                4..=7 => Status::Completed,
                8 => Status::Failed,
                _ => Status::Cancelled,
            };
            let mut t = Task::new(format!("{i:08x}-0000-4000-8000-{i:012x}"), status);
            t.title = Some(format!("INC-{i} latency in service {}", i % 97));
            t.status_message = Some(format!(
                "step {} of 7: checking the logs of shard {}",
                i % 7,
                i % 13
            ));
            t.progress = Some(Progress {
                current: (i % 7) as u64,
                total: 7,
            });
            t.created_at = Some(now - TimeDelta::seconds((i % 86_400) as i64));
            t.updated_at = Some(now - TimeDelta::seconds((i % 3_600) as i64));
            t.revision = 1;
            (t.task_id.clone(), t)
        })
        .collect()
}

/// An app over `tasks` in memory, holding the rows around its selection
/// (as it does over every store).
fn app_with(tasks: TaskMap) -> App {
    let mut app = App::new(Path::new("/tmp/tasks.json"), false, Utc::now())
        .with_source(Arc::new(RwLock::new(tasks)));
    app.on_feed(StoreUpdate::Feed(FeedEvent::Reset(ResetReason::Start)));
    app
}

/// Time one frame of `app` drawn on a 120×35 terminal.
fn bench_draw(group: &mut BenchmarkGroup<'_, WallTime>, id: BenchmarkId, mut app: App) {
    let theme = Theme::DEFAULT;
    let mut terminal = Terminal::new(TestBackend::new(120, 35)).expect("terminal");
    group.bench_function(id, |b| {
        b.iter(|| {
            terminal
                .draw(|f| view::draw(f, &mut app, &theme))
                .expect("draw");
        })
    });
}

fn frame(c: &mut Criterion) {
    let mut group = c.benchmark_group("frame");
    for n in [1_000usize, 10_000, 100_000] {
        let mut app = app_with(tasks(n));
        app.select_row(n / 2);
        bench_draw(&mut group, BenchmarkId::new("render_120x35", n), app);
    }
    // Fetching the window again happens only when the store, the filter or
    // the sort changes; measured for reference.
    let mut app = app_with(tasks(100_000));
    group.bench_function("refetch_window/100000", |b| b.iter(|| app.rebuild()));
    // An idle frame with a selected task whose title and message are 25 MB
    // each: the text is sanitized once per change of the task, so a frame
    // costs what any other does (it used to sanitize 50 MB each time).
    let mut huge = tasks(1_000);
    let (huge_id, t) = huge.get_index_mut(500).expect("a task");
    let huge_id = huge_id.clone();
    t.title = Some(format!("HUGE {}", "title \u{1b}[31m".repeat(25 << 20 >> 4)));
    t.status_message = Some("m".repeat(25 << 20));
    let mut app = app_with(huge);
    app.selected = Some(huge_id);
    app.rebuild();
    bench_draw(
        &mut group,
        BenchmarkId::new("render_120x35", "25MB_title"),
        app,
    );
    group.finish();
}

/// From the moment a write (the rename) is done to the new state drawn, with
/// the real change feed watching the file.
fn write_to_drawn(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.json");
    let initial = tasks(10_000);
    let id = initial.keys().nth(1).cloned().expect("a task");
    std::fs::write(&path, rudder::store::encode(&initial, 0)).expect("seed");
    let store = std::sync::Arc::new(Store::connect(&path).expect("a store URL"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let theme = Theme::DEFAULT;
    let mut terminal = Terminal::new(TestBackend::new(120, 35)).expect("terminal");
    let (source, mut feed) = runtime.block_on(async { rudder::tui::live(&store) });
    let mut app = App::new(&path, false, Utc::now()).with_source(source);
    runtime.block_on(async {
        if let Some(e) = feed.recv().await {
            app.on_feed(e);
        }
    });
    // The task written is the selected one, so its row is in the window.
    app.selected = Some(id.clone());
    app.rebuild();
    let mut seq = 0u64;
    let mut group = c.benchmark_group("write_to_drawn");
    group.sample_size(30);
    group.bench_function("10000", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                seq += 1;
                let message = format!("heartbeat {seq}");
                store
                    .heartbeat(
                        &id,
                        Some(message.clone()),
                        None,
                        rudder::task::Actor::Anyone,
                    )
                    .expect("heartbeat");
                let written = Instant::now();
                runtime.block_on(async {
                    loop {
                        let Some(event) = feed.recv().await else {
                            panic!("feed stopped")
                        };
                        app.on_feed(event);
                        let shown = app.tasks.get(&id).and_then(|t| t.status_message.as_deref());
                        if shown == Some(message.as_str()) {
                            break;
                        }
                    }
                });
                terminal
                    .draw(|f| view::draw(f, &mut app, &theme))
                    .expect("draw");
                total += written.elapsed();
            }
            total
        })
    });
    group.finish();
}

/// Start the real binary on a 10k-task store in a pseudo-terminal, leave it
/// idle for ten seconds, and report CPU time, frames drawn and memory.
fn idle_and_memory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.json");
    std::fs::write(&path, rudder::store::encode(&tasks(10_000), 0)).expect("seed");
    let pty::Watch {
        mut child,
        pid,
        mut reader,
        master: _master,
    } = pty::watch(&path);
    let frames = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&frames);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        // Each frame is wrapped in a synchronized update: count its start.
        let marker = b"\x1b[?2026h";
        let mut tail: Vec<u8> = Vec::new();
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            tail.extend_from_slice(&buf[..n]);
            let found = tail.windows(marker.len()).filter(|w| w == marker).count();
            counter.fetch_add(found, Ordering::Relaxed);
            let keep = tail.len().min(marker.len() - 1);
            tail.drain(..tail.len() - keep);
        }
    });
    std::thread::sleep(Duration::from_secs(2));
    let cpu = |pid: u32| -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let after = stat.rsplit(')').next().unwrap_or("");
        let f: Vec<&str> = after.split_whitespace().collect();
        let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
            + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        ticks / 100.0
    };
    let status = |key: &str| pty::status(pid, key);
    let frames0 = frames.load(Ordering::Relaxed);
    let cpu0 = cpu(pid);
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(10));
    let elapsed = start.elapsed().as_secs_f64();
    let cpu1 = cpu(pid);
    let frames1 = frames.load(Ordering::Relaxed);
    println!(
        "idle/10000: {:.1}s idle, CPU {:.2}s ({:.2}%), {} frames drawn ({:.2}/s), startup frames {}",
        elapsed,
        cpu1 - cpu0,
        100.0 * (cpu1 - cpu0) / elapsed,
        frames1 - frames0,
        (frames1 - frames0) as f64 / elapsed,
        frames0
    );
    println!(
        "memory/10000: VmRSS {}, VmHWM {}",
        status("VmRSS:"),
        status("VmHWM:")
    );
    let _ = child.kill();
    let _ = child.wait();
}

criterion_group!(benches, frame, write_to_drawn);

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    // A filter naming "idle" or "memory" selects the process measurement;
    // any other filter is criterion's.
    let is_idle = |f: &String| f.contains("idle") || f.contains("memory");
    if filter.is_empty() || !filter.iter().all(is_idle) {
        benches();
    }
    // `cargo test --benches` runs bench targets in test mode: skip the
    // ten-second measurement there.
    let testing = std::env::args().any(|a| a == "--test");
    if !testing && (filter.is_empty() || filter.iter().any(is_idle)) {
        idle_and_memory();
    }
    Criterion::default().configure_from_args().final_summary();
}
