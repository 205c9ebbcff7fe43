//! The TUI at scale: over SQLite at 1M tasks (with `RUDDER_BENCH_1M=1`;
//! 100k otherwise), the app holding a window of rows; over the JSON file at
//! 100k rich tasks (about 790 bytes each) too, through the file's rows kept
//! between changes (`rudder::store::FileRows`).
//!
//! - `tui_sqlite/frame/N`: one frame, 120×35;
//! - `tui_sqlite/key j/N`, `key PgDn/N`: a key to its redraw (the window is
//!   fetched again near its edge);
//! - `tui_sqlite/change to drawn/N`, `tui_file/change to drawn/100000`:
//!   another connection's commit (a heartbeat with a new message on the
//!   selected task) to the new message drawn, through the real change feed;
//! - `tui_sqlite/filtered change to drawn/N`: the same with the table
//!   narrowed to that task by the text filter (`/` and an id prefix), and
//!   `…, window re-read (before)`: each change taken as a reset, the
//!   window read again from the store (what every change to a filtered
//!   window did before issue 30, item 19), in the same run;
//! - `tui_postgres/…/N`: the two changes over PostgreSQL (a throwaway
//!   cluster, the SQLite fixture copied in; skipped without PostgreSQL's
//!   server programs);
//! - (printed) resident memory of the real binary in a pseudo-terminal
//!   after it started and moved through the table.
//!
//! `cargo bench --bench tui_scale` (`-- memory` for the memory alone).
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use criterion::{BenchmarkId, Criterion};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use rudder::task::{Actor, Status};
use rudder::tui::app::{App, StoreUpdate};
use rudder::tui::view::{self, Theme};
use rudder::tui::window::RowSource;
use rudder::watch::{FeedEvent, FeedOptions, ResetReason};
use rudder::{Store, StoreError};

use rudder_testkit::pg;
#[path = "common/pty.rs"]
mod pty;
#[path = "common/tasks.rs"]
mod tasks;

fn size() -> usize {
    if std::env::var_os("RUDDER_BENCH_1M").is_some_and(|v| v == "1") {
        1_000_000
    } else {
        100_000
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// The message drawn on the screen, as text.
fn screen(terminal: &Terminal<TestBackend>) -> String {
    let buf = terminal.backend().buffer();
    buf.content().iter().map(|c| c.symbol()).collect()
}

/// How the app takes in the feed's events.
#[derive(Clone, Copy, PartialEq)]
enum Take {
    /// As `rudder watch` does.
    AsFed,
    /// Each event as a reset (`Reset`): the window read again from the
    /// store, as every change to a text-filtered window was before the
    /// app took the feed's changes in (issue 30, item 19): the "before"
    /// of the same run.
    Reread,
}

/// A commit by `writer` on `id`, then wait until `app` draws its message.
#[allow(clippy::too_many_arguments)]
fn change_to_drawn(
    rt: &tokio::runtime::Runtime,
    updates: &mut tokio::sync::mpsc::Receiver<StoreUpdate>,
    app: &mut App,
    terminal: &mut Terminal<TestBackend>,
    writer: &Store,
    id: &str,
    seq: u64,
    take: Take,
) -> Result<Duration, StoreError> {
    let theme = Theme::DEFAULT;
    let message = format!("beat {seq:06}");
    writer.heartbeat(id, Some(message.clone()), None, Actor::Anyone)?;
    let written = Instant::now();
    loop {
        let Some(update) = rt.block_on(updates.recv()) else {
            panic!("the feed stopped");
        };
        app.now = Utc::now();
        let update = match (take, update) {
            (Take::Reread, StoreUpdate::Feed(FeedEvent::Changes(_))) => {
                StoreUpdate::Feed(FeedEvent::Reset(ResetReason::Overflow))
            }
            (_, update) => update,
        };
        app.on_feed(update);
        terminal.draw(|f| view::draw(f, app, &theme)).expect("draw");
        if screen(terminal).contains(&message) {
            return Ok(written.elapsed());
        }
    }
}

/// The live app a benchmark drives: the app, its terminal, and the feed's
/// updates on the runtime that runs the feed.
struct Live {
    rt: tokio::runtime::Runtime,
    updates: tokio::sync::mpsc::Receiver<StoreUpdate>,
    app: App,
    terminal: Terminal<TestBackend>,
    /// The last heartbeat's number (each message differs from the last).
    seq: u64,
}

impl Live {
    /// The first event taken and drawn.
    fn start(
        rt: tokio::runtime::Runtime,
        mut updates: tokio::sync::mpsc::Receiver<StoreUpdate>,
        mut app: App,
    ) -> Live {
        let mut terminal = Terminal::new(TestBackend::new(120, 35)).expect("terminal");
        let first = rt.block_on(updates.recv()).expect("the first event");
        app.on_feed(first);
        terminal
            .draw(|f| view::draw(f, &mut app, &Theme::DEFAULT))
            .expect("draw");
        Live {
            rt,
            updates,
            app,
            terminal,
            seq: 0,
        }
    }

    /// `change to drawn/n`: a heartbeat by `writer` on `id` (the selected
    /// task) to its message drawn, once per iteration.
    #[allow(clippy::too_many_arguments)]
    fn bench_change(
        &mut self,
        g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        name: &str,
        n: usize,
        writer: &Store,
        id: &str,
        take: Take,
    ) {
        let mut seq = self.seq;
        g.bench_function(BenchmarkId::new(name, n), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    seq += 1;
                    total += change_to_drawn(
                        &self.rt,
                        &mut self.updates,
                        &mut self.app,
                        &mut self.terminal,
                        writer,
                        id,
                        seq,
                        take,
                    )
                    .expect("heartbeat");
                }
                total
            })
        });
        self.seq = seq;
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn sqlite(c: &mut Criterion) {
    let n = size();
    let (path, _) = tasks::sqlite_fixture(n);
    let store = Arc::new(Store::connect(&path).expect("a store URL"));
    let rt = runtime();
    let app =
        App::new(&path, false, Utc::now()).with_source(Arc::clone(&store) as Arc<dyn RowSource>);
    let updates = rt.block_on(async {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let mut feed = rudder::Store::connect(&path)
            .expect("a store URL")
            .feed(FeedOptions::default());
        tokio::spawn(async move {
            while let Some(e) = feed.next().await {
                if tx.send(StoreUpdate::Feed(e)).await.is_err() {
                    return;
                }
            }
        });
        rx
    });
    let mut live = Live::start(rt, updates, app);
    let theme = Theme::DEFAULT;
    let mut g = c.benchmark_group("tui_sqlite");
    g.sample_size(30);
    let Live { app, terminal, .. } = &mut live;
    g.bench_function(BenchmarkId::new("frame", n), |b| {
        b.iter(|| {
            terminal.draw(|f| view::draw(f, app, &theme)).expect("draw");
        })
    });
    for (name, code) in [
        ("key j", KeyCode::Char('j')),
        ("key PgDn", KeyCode::PageDown),
    ] {
        g.bench_function(BenchmarkId::new(name, n), |b| {
            b.iter(|| {
                app.handle_key(key(code));
                terminal.draw(|f| view::draw(f, app, &theme)).expect("draw");
            })
        });
    }
    // A working task on screen, written by another connection.
    app.handle_key(key(KeyCode::Char('g')));
    app.handle_key(key(KeyCode::Char('2')));
    let id = app.selected.clone().expect("a selected task");
    assert_eq!(app.selected_task().map(|t| t.status), Some(Status::Working));
    app.handle_key(key(KeyCode::Char('2')));
    let writer = Store::connect(&path).expect("a store URL");
    live.bench_change(&mut g, "change to drawn", n, &writer, &id, Take::AsFed);
    filtered(&mut live, &mut g, n, &writer, &id);
    g.finish();
}

/// Narrowed to the task `id` by the text filter (`/` and an id prefix), as
/// an engineer narrows the table to their incident: the feed's change
/// taken in, against the window read again (the way before, same run).
fn filtered(
    live: &mut Live,
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    n: usize,
    writer: &Store,
    id: &str,
) {
    let app = &mut live.app;
    app.handle_key(key(KeyCode::Char('/')));
    for c in id[..8].chars() {
        app.handle_key(key(KeyCode::Char(c)));
    }
    app.handle_key(key(KeyCode::Enter));
    assert_eq!(app.rows.len(), 1, "the filter keeps the one task");
    for (name, take) in [
        ("filtered change to drawn", Take::AsFed),
        (
            "filtered change to drawn, window re-read (before)",
            Take::Reread,
        ),
    ] {
        live.bench_change(g, name, n, writer, id, take);
    }
}

/// The same store in PostgreSQL (a throwaway cluster, the SQLite
/// fixture copied in): a change to the selected task, unfiltered and in
/// a text-filtered window.
fn postgres(c: &mut Criterion) {
    if !pg::available() {
        println!("tui_postgres: skipped (no PostgreSQL server programs)");
        return;
    }
    let n = size();
    let (sqlite, _) = tasks::sqlite_fixture(n);
    let cluster = pg::Cluster::start().expect("a cluster");
    let db = cluster.create_database();
    let url = cluster.url(&db);
    let started = Instant::now();
    rudder::store::copy::copy(
        &Store::connect(&sqlite).expect("a store URL"),
        &Store::connect(&url).expect("a store URL"),
        |_| {},
    )
    .expect("copy the tasks into PostgreSQL");
    println!(
        "copied {n} tasks into PostgreSQL in {:.1?}",
        started.elapsed()
    );
    let store = Arc::new(Store::connect(&url).expect("a store URL"));
    let rt = runtime();
    let (source, updates) = rt.block_on(async { rudder::tui::live(&store) });
    let app = App::new(Path::new(&url), false, Utc::now()).with_source(source);
    let mut live = Live::start(rt, updates, app);
    let mut g = c.benchmark_group("tui_postgres");
    g.sample_size(20);
    let app = &mut live.app;
    app.handle_key(key(KeyCode::Char('g')));
    app.handle_key(key(KeyCode::Char('2')));
    let id = app.selected.clone().expect("a selected task");
    app.handle_key(key(KeyCode::Char('2')));
    let writer = Store::connect(&url).expect("a store URL");
    live.bench_change(&mut g, "change to drawn", n, &writer, &id, Take::AsFed);
    filtered(&mut live, &mut g, n, &writer, &id);
    g.finish();
}

/// The JSON file of 100k rich tasks, in the target directory.
fn json_fixture() -> std::path::PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tui-scale-100000.json");
    if !path.exists() {
        std::fs::write(&path, rudder::store::encode(&tasks::generate(100_000), 0))
            .expect("write the file");
    }
    path
}

fn file(c: &mut Criterion) {
    let path = json_fixture();
    let store = Arc::new(Store::connect(&path).expect("a store URL"));
    let rt = runtime();
    let (source, updates) = rt.block_on(async { rudder::tui::live(&store) });
    let app = App::new(&path, false, Utc::now()).with_source(source);
    let mut live = Live::start(rt, updates, app);
    let theme = Theme::DEFAULT;
    let mut g = c.benchmark_group("tui_file");
    g.sample_size(10);
    let Live { app, terminal, .. } = &mut live;
    // A page key near the window's edge: the rows queried again.
    g.bench_function(BenchmarkId::new("key PgDn", 100_000), |b| {
        b.iter(|| {
            app.handle_key(key(KeyCode::PageDown));
            terminal.draw(|f| view::draw(f, app, &theme)).expect("draw");
        })
    });
    // The first working task on screen.
    app.handle_key(key(KeyCode::Char('g')));
    app.handle_key(key(KeyCode::Char('2')));
    let id = app.selected.clone().expect("a selected task");
    app.handle_key(key(KeyCode::Char('2')));
    live.bench_change(
        &mut g,
        "change to drawn",
        100_000,
        &Store::connect(&path).expect("a store URL"),
        &id,
        Take::AsFed,
    );
    g.finish();
}

/// Resident memory of `rudder watch` on `store` after it started and moved
/// through the table.
fn memory(label: &str, store: &Path) {
    use std::io::Write;
    let pty::Watch {
        mut child,
        pid,
        mut reader,
        master,
    } = pty::watch(store);
    let mut writer = master.take_writer().expect("writer");
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
    });
    let status = |key: &str| pty::status(pid, key);
    std::thread::sleep(Duration::from_secs(5));
    let started = status("VmRSS:");
    for keys in [
        "G",
        "g",
        "\x1b[6~\x1b[6~\x1b[6~\x1b[6~\x1b[6~",
        "s",
        "s",
        "/inc-1\r",
    ] {
        writer.write_all(keys.as_bytes()).expect("keys");
        writer.flush().expect("flush");
        std::thread::sleep(Duration::from_secs(1));
    }
    println!(
        "memory/{label}: VmRSS {started} after start, {} after moving; VmHWM {}",
        status("VmRSS:"),
        status("VmHWM:")
    );
    let _ = child.kill();
    let _ = child.wait();
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let testing = std::env::args().any(|a| a == "--test");
    let wants = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    let mut c = Criterion::default().configure_from_args();
    if !testing {
        if wants("tui_sqlite") {
            sqlite(&mut c);
        }
        if wants("tui_postgres") {
            postgres(&mut c);
        }
        if wants("tui_file") {
            file(&mut c);
        }
        if wants("memory") {
            let n = size();
            memory(&format!("sqlite/{n}"), &tasks::sqlite_fixture(n).0);
            memory("file/100000", &json_fixture());
        }
    }
    c.final_summary();
}
