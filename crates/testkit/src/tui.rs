//! Fixtures shared by the TUI tests: fixed ids, fixed times, a fixed clock,
//! so snapshots are stable; real stores (a JSON file, SQLite) in temp
//! dirs that the app fetches its rows from, as `rudder watch` does; keys.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use chrono::{DateTime, TimeDelta, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use rudder_model::task::{HistoryEntry, Progress, Status, Task, TaskMap};
use rudder_store::query::{PageQuery, StatusCounts};
use rudder_store::watch::{FeedEvent, ResetReason, TaskChange, Unavailable};
use rudder_store::{AnyBackend, Backend, FileRows, Store, StoreError};
use rudder_tui::app::{App, StoreUpdate};
use rudder_tui::window::RowSource;
use serde_json::json;

pub use crate::screen::screen_text;
pub use crate::stores::{self, Kind};

/// The fixed "now" of every fixture.
pub fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-15T12:00:00Z")
        .expect("a valid time")
        .with_timezone(&Utc)
}

/// `minutes` before [`now`].
pub fn ago(minutes: i64) -> DateTime<Utc> {
    now() - TimeDelta::minutes(minutes)
}

/// A fixed id for fixture number `n`.
pub fn id(n: u32) -> String {
    format!("{n:08x}-0000-4000-8000-000000000000")
}

/// The schema the waiting fixture asks for.
pub fn schema() -> serde_json::Value {
    json!({
        "type": "object",
        "required": ["service"],
        "properties": {
            "service": {"type": "string", "description": "the service to diagnose", "minLength": 2},
            "window_minutes": {"type": "integer", "default": 30, "minimum": 1},
            "env": {"enum": ["prod", "staging"]},
            "deep": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}}
        }
    })
}

/// A task with the given status, created `age` minutes ago, updated `upd` minutes ago.
pub fn task(n: u32, status: Status, title: &str, age: i64, upd: i64) -> Task {
    let mut t = Task::new(id(n), status);
    t.title = Some(title.to_string());
    t.created_at = Some(ago(age));
    t.updated_at = Some(ago(upd));
    t.revision = 1;
    t.history.push(HistoryEntry::new(
        Status::Working,
        ago(age),
        Some("created".into()),
    ));
    if status != Status::Working {
        t.history.push(HistoryEntry::new(status, ago(upd), None));
        t.revision = 2;
    }
    t
}

/// Six tasks, one per status plus one whose message is hostile.
pub fn fixture() -> TaskMap {
    let mut tasks = Vec::new();
    let mut waiting = task(1, Status::InputRequired, "INC-1042 checkout latency", 20, 3);
    waiting.input_schema = Some(schema());
    waiting.status_message = Some("which service should I look at?".into());
    waiting.idempotency_key = Some("inc-1042".into());
    waiting.kind = Some("diagnose".into());
    tasks.push(waiting);
    let mut working = task(2, Status::Working, "INC-1043 db replication lag", 45, 1);
    working.status_message = Some("comparing replica offsets".into());
    working.progress = Some(Progress {
        current: 3,
        total: 7,
    });
    working.claimed_by = Some("worker-7".into());
    working.kind = Some("diagnose".into());
    working.lease_expires_at = Some(now() + TimeDelta::seconds(30));
    working.request = Some(json!({"incident": "INC-1043", "service": "db"}));
    tasks.push(working);
    let mut done = task(3, Status::Completed, "INC-1001 cache misses", 120, 60);
    done.result =
        Some(json!({"root_cause": "cache TTL set to 0 by deploy 4711", "confidence": 0.9}));
    done.input_value = Some(json!({"service": "cache"}));
    // Longer than the table's kind column.
    done.kind = Some("cache-flush-nightly".into());
    tasks.push(done);
    let mut failed = task(4, Status::Failed, "INC-0999 dns", 300, 200);
    failed.error = Some(json!({"message": "worker lost: no update for 17m 5s"}));
    tasks.push(failed);
    let mut cancelled = task(5, Status::Cancelled, "INC-0998 noise", 400, 390);
    cancelled.status_message = Some("cancelled from the TUI".into());
    tasks.push(cancelled);
    let mut hostile = task(6, Status::Working, "evil\u{1b}]0;pwned\u{7} title", 5, 0);
    // No writer stores this kind; a hand-written file may.
    hostile.kind = Some("k\u{1b}[31mred".into());
    hostile.status_message = Some(
        "msg\u{1b}[2J\u{1b}[1;1Hcleared?\u{202E}reversed\u{1b}]52;c;Zm9v\u{7} end\r\nnext".into(),
    );
    tasks.push(hostile);
    tasks.into_iter().map(|t| (t.task_id.clone(), t)).collect()
}

/// The [`fixture`] after task 2 completed.
pub fn task_2_completed() -> TaskMap {
    let mut tasks = fixture();
    tasks.get_mut(&id(2)).expect("fixture").status = Status::Completed;
    tasks
}

/// The backends the TUI tests run over: the JSON file and SQLite
/// (`$RUDDER_TEST_STORE` narrows to one, as for the conformance suites;
/// narrowed to PostgreSQL, which the pty tests cover, the JSON file).
pub fn store_kinds() -> Vec<Kind> {
    let kinds: Vec<Kind> = stores::kinds()
        .into_iter()
        .filter(|k| *k != Kind::Postgres)
        .collect();
    if kinds.is_empty() {
        vec![Kind::File]
    } else {
        kinds
    }
}

/// Run `f` once over each of [`store_kinds`]: inside, [`Fixture::new`]
/// makes a store of that backend. Snapshots taken inside must be the same
/// on every backend (`insta::allow_duplicates!` checks that).
pub fn each_store(mut f: impl FnMut()) {
    for kind in store_kinds() {
        stores::set_kind(kind);
        f();
    }
    stores::set_kind(Kind::File);
}

/// A real store in a temp dir, of the backend [`each_store`] chose, which
/// an app fetches its rows from as `rudder watch` does: a JSON file's
/// rows kept between changes ([`FileRows`]), a database asked directly.
/// Tests change it whole with [`Fixture::set`], which gives the change
/// feed's event for what changed.
pub struct Fixture {
    dir: tempfile::TempDir,
    path: PathBuf,
    store: RwLock<Arc<Store>>,
    rows: RwLock<Option<Arc<FileRows>>>,
    /// The tasks last written (what the next change is compared with).
    last: Mutex<TaskMap>,
}

impl Fixture {
    /// A store holding `tasks`.
    pub fn new(tasks: TaskMap) -> Arc<Fixture> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(stores::store_file());
        let fx = Arc::new(Fixture {
            store: RwLock::new(Arc::new(Store::connect(&path).expect("a store URL"))),
            rows: RwLock::new(None),
            last: Mutex::new(TaskMap::new()),
            dir,
            path,
        });
        fx.reopen();
        let _ = fx.set(tasks);
        fx
    }

    /// The store's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A store handle (for the app's effects and for checking what it holds).
    pub fn store(&self) -> Arc<Store> {
        Arc::clone(&self.store.read().expect("lock"))
    }

    fn reopen(&self) {
        let store = Arc::new(Store::connect(&self.path).expect("a store URL"));
        *self.rows.write().expect("lock") = match store.backend() {
            AnyBackend::File(b) => Some(Arc::new(FileRows::new(b.clone()))),
            _ => None,
        };
        *self.store.write().expect("lock") = store;
    }

    fn refresh(&self) {
        if let Some(rows) = &*self.rows.read().expect("lock") {
            rows.refresh().expect("read the rows");
        }
    }

    /// An app at [`now`] (its header naming `/srv/rudder/tasks.json`, so
    /// that screens are the same on every backend) over this store, after
    /// the feed's first event.
    pub fn app(self: &Arc<Self>) -> App {
        self.app_at(Path::new("/srv/rudder/tasks.json"), false)
    }

    /// An app at `now` over the store as other writers left it (what is
    /// there is the starting point, not news), its header naming its path.
    pub fn app_now(self: &Arc<Self>, now: DateTime<Utc>) -> App {
        let _ = self.reread();
        let mut app = self.app_at(&self.path, false);
        app.now = now;
        app
    }

    /// An app over this store whose header names `label`.
    pub fn app_at(self: &Arc<Self>, label: &Path, read_only: bool) -> App {
        let mut app =
            App::new(label, read_only, now()).with_source(Arc::clone(self) as Arc<dyn RowSource>);
        app.on_feed(StoreUpdate::Feed(FeedEvent::Reset(ResetReason::Start)));
        app
    }

    /// Make the store hold `tasks` (and nothing else); the feed's event for
    /// what changed since the last [`Fixture::set`] or [`Fixture::reread`].
    pub fn set(&self, tasks: TaskMap) -> StoreUpdate {
        let store = self.store();
        store
            .backend()
            .transact(&mut |all| {
                *all = tasks.clone();
                Ok(true)
            })
            .expect("write the store");
        self.changes_to(tasks)
    }

    /// What another writer did to the store meanwhile (through a
    /// [`Store`]), as the feed's event.
    pub fn reread(&self) -> StoreUpdate {
        let tasks = self.store().load().expect("load the store");
        self.changes_to(tasks)
    }

    fn changes_to(&self, tasks: TaskMap) -> StoreUpdate {
        self.refresh();
        let mut last = self.last.lock().expect("lock");
        let mut list = Vec::new();
        for (id, t) in &tasks {
            match last.get(id) {
                Some(before) if before == t => {}
                before => list.push(TaskChange {
                    task_id: id.clone(),
                    revision: t.revision,
                    from: before.map(|b| b.status),
                    to: Some(t.status),
                    at: t.updated_at,
                }),
            }
        }
        for (id, t) in last.iter().filter(|(id, _)| !tasks.contains_key(*id)) {
            list.push(TaskChange {
                task_id: id.clone(),
                revision: t.revision,
                from: Some(t.status),
                to: None,
                at: None,
            });
        }
        *last = tasks;
        StoreUpdate::Feed(FeedEvent::Changes(list))
    }

    /// Delete the store; the feed's event for it.
    pub fn remove(&self) -> StoreUpdate {
        for name in std::fs::read_dir(self.dir.path()).expect("read dir") {
            std::fs::remove_file(name.expect("entry").path()).expect("remove");
        }
        // A database's connection would go on with the deleted file.
        self.reopen();
        self.refresh();
        self.last.lock().expect("lock").clear();
        StoreUpdate::Feed(FeedEvent::Unavailable(Unavailable::Missing))
    }
}

impl RowSource for Fixture {
    fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
        match &*self.rows.read().expect("lock") {
            Some(rows) => rows.page(q),
            None => self.store().page(q),
        }
    }
    fn counts(&self) -> Result<StatusCounts, StoreError> {
        match &*self.rows.read().expect("lock") {
            Some(rows) => Ok(rows.counts()),
            None => self.store().counts(),
        }
    }
    fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        match &*self.rows.read().expect("lock") {
            Some(rows) => rows.task(id),
            None => RowSource::task(&*self.store(), id),
        }
    }
    fn stalled(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        match &*self.rows.read().expect("lock") {
            Some(rows) => Ok(rows.stalled(now)),
            None => self.store().stalled(now),
        }
    }
}

/// The feed's event for a store that cannot be read (the rows fetched
/// last stay shown).
pub fn unreadable(message: &str) -> StoreUpdate {
    StoreUpdate::Feed(FeedEvent::Unavailable(Unavailable::Unreadable {
        message: message.into(),
    }))
}

/// The feed's event for a database server that cannot be reached.
pub fn unreachable_server(message: &str) -> StoreUpdate {
    StoreUpdate::Feed(FeedEvent::Unavailable(Unavailable::Unreachable {
        message: message.into(),
    }))
}

/// An app at [`now`] over a store holding `tasks`.
pub fn app_with(tasks: TaskMap) -> App {
    Fixture::new(tasks).app()
}

/// Select the row of `task_id` (it must have one).
pub fn select(app: &mut App, task_id: &str) {
    let row = (0..app.rows.len())
        .find(|&r| app.row_task(r).is_some_and(|t| t.task_id == task_id))
        .expect("the task has a row");
    app.select_row(row);
}

/// A plain key press.
pub fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// A character key press.
pub fn ch(c: char) -> KeyEvent {
    key(KeyCode::Char(c))
}

/// Ctrl + `c`.
pub fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

/// Type `text` into the app, one key per character.
pub fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        let effects = app.handle_key(ch(c));
        assert!(effects.is_empty(), "typing {c:?} asked for {effects:?}");
    }
}
