//! The TUI over a store it does not hold: rows fetched a window around the
//! selection at a time (App::with_source), driven by feed events, over
//! real stores (a JSON file and SQLite). Checked against an app whose
//! window holds the whole table: same rows, same order, same screen.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossterm::event::KeyCode;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use rudder_model::task::{Status, Task, TaskMap};
use rudder_store::StoreError;
use rudder_store::query::{PageQuery, StatusCounts};
use rudder_store::watch::{FeedEvent, ResetReason};
use rudder_testkit::tui::{Fixture, ch, each_store, fixture, key, now, screen_text, task};
use rudder_tui::app::{App, SortKey, StoreUpdate};
use rudder_tui::view::{self, Theme};
use rudder_tui::window::RowSource;

/// A real store (a JSON file or SQLite, see [`each_store`]), counting the
/// page queries made.
struct Source {
    fx: Arc<Fixture>,
    pages: AtomicUsize,
}

impl RowSource for Source {
    fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
        self.pages.fetch_add(1, Ordering::Relaxed);
        self.fx.page(q)
    }
    fn counts(&self) -> Result<StatusCounts, StoreError> {
        self.fx.counts()
    }
    fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        self.fx.task(id)
    }
    fn stalled(&self, now: chrono::DateTime<chrono::Utc>) -> Result<usize, StoreError> {
        self.fx.stalled(now)
    }
}

impl Source {
    /// Change the store's tasks with `f`; the feed's event for it.
    fn change(&self, f: impl FnOnce(&mut TaskMap)) -> StoreUpdate {
        let mut tasks = self.fx.store().load().expect("load");
        f(&mut tasks);
        self.fx.set(tasks)
    }
}

fn source(tasks: TaskMap) -> Arc<Source> {
    Arc::new(Source {
        fx: Fixture::new(tasks),
        pages: AtomicUsize::new(0),
    })
}

/// `n` tasks of every status, each with its own title and times.
fn many(n: u32) -> TaskMap {
    let statuses = [
        Status::Working,
        Status::InputRequired,
        Status::Completed,
        Status::Working,
        Status::Failed,
        Status::Cancelled,
    ];
    (0..n)
        .map(|i| {
            let age = i64::from(n - i) * 2;
            let upd = i64::from((i * 37) % n);
            let title = format!("INC-{:05} {}", (i * 7919) % 100_000, i);
            let t = task(i + 1, statuses[i as usize % 6], &title, age, upd);
            (t.task_id.clone(), t)
        })
        .collect()
}

/// The reference: an app whose window holds the whole table, so that it
/// never reaches a window's edge.
fn whole_app(tasks: &TaskMap) -> App {
    windowed_app(source(tasks.clone()), 1_000_000)
}

fn windowed_app(source: Arc<Source>, side: usize) -> App {
    let mut app =
        App::new(std::path::Path::new("/srv/rudder/tasks.db"), false, now()).with_source(source);
    app.window_side = side;
    app.on_feed(StoreUpdate::Feed(FeedEvent::Reset(ResetReason::Start)));
    app
}

fn selected(app: &App) -> Option<String> {
    app.selected.clone()
}

fn draw(app: &mut App) -> String {
    let mut terminal = Terminal::new(TestBackend::new(120, 35)).expect("terminal");
    terminal
        .draw(|f| view::draw(f, app, &Theme::MONO))
        .expect("draw");
    screen_text(&terminal)
}

#[test]
fn the_windowed_app_draws_what_the_whole_app_draws() {
    each_store(|| {
        let tasks = fixture();
        let mut whole = whole_app(&tasks);
        let mut windowed = windowed_app(source(tasks), 2);
        for sort_round in 0..4 {
            for _ in 0..7 {
                assert_eq!(
                    draw(&mut windowed),
                    draw(&mut whole),
                    "sort round {sort_round}"
                );
                whole.handle_key(ch('j'));
                windowed.handle_key(ch('j'));
            }
            whole.handle_key(ch('s'));
            windowed.handle_key(ch('s'));
        }
    });
}

#[test]
fn moving_past_the_window_edge_fetches_the_rows_beyond_it() {
    each_store(|| {
        let tasks = many(300);
        for sort in 0..4 {
            let mut whole = whole_app(&tasks);
            let src = source(tasks.clone());
            let mut windowed = windowed_app(src.clone(), 15);
            for _ in 0..sort {
                whole.handle_key(ch('s'));
                windowed.handle_key(ch('s'));
            }
            if sort == 0 {
                // The reference itself, in creation order: waiting, then
                // working, then finished tasks, each group newest first.
                let group = |s: Status| match s {
                    Status::InputRequired => 0,
                    Status::Working => 1,
                    _ => 2,
                };
                let mut expected: Vec<&Task> = tasks.values().collect();
                expected.sort_by_key(|t| (group(t.status), std::cmp::Reverse(t.created_at)));
                let rows: Vec<&str> = (0..whole.rows.len())
                    .map(|r| whole.row_task(r).expect("a row").task_id.as_str())
                    .collect();
                let expected: Vec<&str> = expected.iter().map(|t| t.task_id.as_str()).collect();
                assert_eq!(rows, expected);
            }
            // Two pages (of 10 rows) each side.
            assert!(windowed.tasks.len() <= 41, "holds {}", windowed.tasks.len());
            // Down through the whole table one row at a time, then by pages
            // back up: the same task is selected at every step.
            for step in 0..310 {
                assert_eq!(
                    selected(&windowed),
                    selected(&whole),
                    "sort {sort}, j {step}"
                );
                whole.handle_key(ch('j'));
                windowed.handle_key(ch('j'));
            }
            assert!(windowed.tasks.len() <= 41);
            for step in 0..40 {
                assert_eq!(
                    selected(&windowed),
                    selected(&whole),
                    "sort {sort}, PgUp {step}"
                );
                whole.handle_key(key(KeyCode::PageUp));
                windowed.handle_key(key(KeyCode::PageUp));
            }
            for (k, name) in [
                (ch('G'), "G"),
                (ch('k'), "k"),
                (ch('g'), "g"),
                (key(KeyCode::PageDown), "PgDn"),
            ] {
                whole.handle_key(k);
                windowed.handle_key(k);
                assert_eq!(selected(&windowed), selected(&whole), "sort {sort}, {name}");
            }
            // The counts are the store's, not the window's.
            assert_eq!(windowed.counts, whole.counts);
            assert_eq!(windowed.table_len(), Some(300));
            assert_eq!(windowed.store_len(), 300);
        }
    });
}

#[test]
fn a_filter_with_fewer_matches_than_a_page() {
    each_store(|| {
        let tasks = many(300);
        let mut whole = whole_app(&tasks);
        let mut windowed = windowed_app(source(tasks), 15);
        for app in [&mut whole, &mut windowed] {
            app.handle_key(ch('/'));
            rudder_testkit::tui::type_text(app, "inc-0000");
            app.handle_key(key(KeyCode::Enter));
        }
        // "INC-00000 0" and "INC-0000x" titles only.
        let n = whole.rows.len();
        assert!(n > 0 && n < 10, "{n} matches");
        assert_eq!(windowed.rows.len(), n);
        assert_eq!(windowed.table_len(), Some(n));
        for _ in 0..n + 3 {
            assert_eq!(selected(&windowed), selected(&whole));
            whole.handle_key(ch('j'));
            windowed.handle_key(ch('j'));
        }
        assert_eq!(draw(&mut windowed), draw(&mut whole));
        // A status filter on top that leaves nothing.
        for app in [&mut whole, &mut windowed] {
            app.handle_key(ch('1'));
            app.handle_key(ch('2'));
        }
        assert_eq!(draw(&mut windowed), draw(&mut whole));
    });
}

#[test]
fn the_selected_task_vanishing_selects_the_row_that_took_its_place() {
    each_store(|| {
        let tasks = many(120);
        let src = source(tasks.clone());
        let whole_src = source(tasks.clone());
        let mut windowed = windowed_app(src.clone(), 10);
        let mut whole = windowed_app(whole_src.clone(), 1_000_000);
        for _ in 0..25 {
            windowed.handle_key(ch('j'));
            whole.handle_key(ch('j'));
        }
        let gone = selected(&windowed).expect("a selection");
        let removed = tasks[&gone].clone();
        let remove = |t: &mut TaskMap| {
            t.shift_remove(&gone).expect("there");
        };
        windowed.on_feed(src.change(remove));
        whole.on_feed(whole_src.change(remove));
        assert_ne!(selected(&windowed), Some(gone.clone()));
        assert_eq!(selected(&windowed), selected(&whole));
        assert_eq!(windowed.counts, whole.counts);
        let entry = windowed.log.front().expect("logged");
        assert_eq!((entry.task_id.as_str(), entry.to), (gone.as_str(), None));
        assert_eq!(entry.label, removed.title.unwrap());
    });
}

/// A heartbeat (and, with `message`, a new message) of task `id`.
fn beat(id: &str, message: Option<&str>) -> impl FnOnce(&mut TaskMap) {
    let id = id.to_string();
    let message = message.map(str::to_string);
    move |tasks: &mut TaskMap| {
        let t = tasks.get_mut(&id).expect("there");
        t.revision += 1;
        if let Some(m) = message {
            t.status_message = Some(m);
        }
    }
}

#[test]
fn a_heartbeat_outside_the_window_fetches_nothing_and_news_in_it_flashes() {
    each_store(|| {
        let tasks = many(200);
        let src = source(tasks.clone());
        let mut app = windowed_app(src.clone(), 10);
        let outside = tasks
            .keys()
            .find(|id| !app.tasks.contains_key(*id))
            .expect("a task outside the window")
            .clone();
        let inside = app.row_task(3).expect("a row").task_id.clone();
        let before = src.pages.load(Ordering::Relaxed);
        app.on_feed(src.change(beat(&outside, None)));
        assert_eq!(
            src.pages.load(Ordering::Relaxed),
            before,
            "the window was fetched again"
        );
        assert!(!app.flashing(&outside));

        app.on_feed(src.change(beat(&inside, None)));
        assert!(src.pages.load(Ordering::Relaxed) > before);
        assert!(!app.flashing(&inside), "a heartbeat alone is no news");
        app.on_feed(src.change(beat(&inside, Some("step 4/7"))));
        assert!(app.flashing(&inside));
        assert_eq!(
            app.tasks[&inside].status_message.as_deref(),
            Some("step 4/7")
        );
        assert!(app.log.is_empty(), "no transition happened");
    });
}

#[test]
fn paused_changes_are_applied_on_resume() {
    each_store(|| {
        let tasks = many(60);
        let src = source(tasks.clone());
        let mut app = windowed_app(src.clone(), 10);
        app.handle_key(ch('p'));
        let id = app.row_task(0).expect("a row").task_id.clone();
        let from = tasks[&id].status;
        app.on_feed(src.change(|tasks| {
            let t = tasks.get_mut(&id).expect("there");
            t.status = Status::Cancelled;
            t.revision += 1;
        }));
        assert_eq!(app.pending_changes, 1);
        assert_eq!(app.tasks[&id].status, from, "held back");
        app.handle_key(ch('p'));
        assert_eq!(app.selected.as_deref(), Some(id.as_str()));
        assert_eq!(app.tasks[&id].status, Status::Cancelled);
        assert_eq!(app.log.front().map(|e| e.to), Some(Some(Status::Cancelled)));
        assert_eq!(app.sort, SortKey::Created);
    });
}

#[test]
fn a_mark_outside_the_window_stays_with_its_task() {
    each_store(|| {
        let tasks = many(300);
        let src = source(tasks);
        let mut app = windowed_app(src.clone(), 10);
        let marked = selected(&app).expect("a selection");
        app.toggle_mark();
        app.handle_key(ch('G'));
        assert!(!app.tasks.contains_key(&marked), "the window moved on");
        // A change elsewhere: the window is fetched again, the mark kept.
        let other = app.row_task(0).expect("a row").task_id.clone();
        app.on_feed(src.change(beat(&other, Some("moved on"))));
        assert_eq!(app.marks.len(), 1);
        assert_eq!(
            app.task_by_id(&marked).map(|t| t.task_id.as_str()),
            Some(marked.as_str())
        );
        // Gone from the store: the mark goes too.
        app.on_feed(src.change(|t| {
            t.shift_remove(&marked).expect("there");
        }));
        assert!(app.marks.is_empty());
    });
}

/// `rudder watch` over a JSON file: the rows are the file's, kept between
/// changes and read again by the feed before it reports a change, so the
/// app fetching at the event sees what another writer wrote; a file that
/// goes away empties the table and comes back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_json_file_the_window_follows_another_writer() {
    use rudder_model::task::Actor;
    use rudder_store::{NewTask, Store};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    let store = Arc::new(Store::connect(&path).expect("a store URL"));
    let new = |title: &str| NewTask {
        title: Some(title.into()),
        request: Some(serde_json::json!({"big": "x".repeat(100)})),
        ..NewTask::default()
    };
    let first = store.create(new("first")).expect("create").task.task_id;
    let (source, mut updates) = rudder_tui::live(&store);
    let mut app = App::new(&path, false, now()).with_source(source);
    let mut until = async |app: &mut App, done: &dyn Fn(&App) -> bool| {
        while !done(app) {
            let update = updates.recv().await.expect("the feed runs");
            app.on_feed(update);
        }
    };
    until(&mut app, &|a| a.store_len() == 1).await;
    assert_eq!(app.selected.as_deref(), Some(first.as_str()));
    // The selected task in full, payloads and all.
    let shown = app.selected_task().expect("selected").clone();
    assert_eq!(shown, store.get(&first).expect("get"));

    let writer = Store::connect(&path).expect("a store URL");
    writer
        .heartbeat(&first, Some("beat 1".into()), None, Actor::Anyone)
        .expect("heartbeat");
    let second = writer.create(new("second")).expect("create").task.task_id;
    until(&mut app, &|a| {
        a.store_len() == 2
            && a.selected_task().and_then(|t| t.status_message.as_deref()) == Some("beat 1")
    })
    .await;
    assert!(app.tasks.contains_key(&second));
    assert!(draw(&mut app).contains("second"));

    let bytes = std::fs::read(&path).expect("read");
    std::fs::remove_file(&path).expect("remove");
    until(&mut app, &|a| a.store_len() == 0 && a.rows.is_empty()).await;
    std::fs::write(&path, &bytes).expect("write");
    until(&mut app, &|a| a.store_len() == 2 && a.rows.len() == 2).await;
}
