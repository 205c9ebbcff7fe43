//! The TUI's state, apart from any terminal: what is shown, what is selected,
//! which dialog is open. [`crate::update`] changes it; [`crate::view`]
//! draws it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use ratatui::layout::Rect;
use tui_input::Input;

use crate::WorkerState;
use crate::form::Form;
use crate::keys::KeyMap;
use crate::marks::Marks;
use crate::shown::ShownCache;
use crate::task_view::TaskView;
use crate::window::{self, Anchor, RowSource, View};
use rudder_model::task::{Status, Task, TaskMap};
use rudder_store::ReclaimReport;
use rudder_store::watch::{FeedEvent, TaskChange, Unavailable};

/// How long a changed row stays highlighted.
pub const FLASH: TimeDelta = TimeDelta::seconds(2);
/// How many transitions the log keeps.
pub const LOG_CAPACITY: usize = 500;
/// How many rows the app fetches on each side of the selection.
pub const WINDOW_SIDE: usize = 200;
/// How many tasks outside the window one batch of changes looks up for
/// the log's labels (the rest are logged by id alone).
const LABEL_LOOKUPS: usize = 50;
/// How many changes are held back while paused before they are replaced
/// by one re-read.
const PENDING_CAPACITY: usize = 10_000;
/// The reclaim age offered by default.
pub const DEFAULT_RECLAIM_AGE: &str = "15m";

/// What the TUI learns about the store, as [`crate::live`] delivers
/// it: the rows are then fetched from the app's source
/// ([`App::with_source`]).
#[derive(Debug, Clone)]
pub enum StoreUpdate {
    /// What the change feed said.
    Feed(FeedEvent),
}

/// What the change feed last said about the store file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchState {
    /// Nothing heard from the feed yet.
    Starting,
    /// A snapshot was read; updates are shown as they come.
    Live,
    /// The store file does not exist (yet, or any more).
    Missing,
    /// The file cannot be read or parsed; the last good tasks stay shown.
    Unreadable(String),
    /// The database server cannot be reached; the last good tasks stay
    /// shown and writes are refused until it is back.
    Unreachable(String),
}

impl WatchState {
    /// What a store that cannot be read now shows (its reason sanitized).
    fn unavailable(u: &Unavailable) -> Self {
        let shown = |m: &str| rudder_model::text::sanitize(m).into_owned();
        match u {
            Unavailable::Missing => WatchState::Missing,
            Unavailable::Unreadable { message } => WatchState::Unreadable(shown(message)),
            Unavailable::Unreachable { message } => WatchState::Unreachable(shown(message)),
        }
    }
}

/// The order of the table (waiting tasks always come first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Most recently updated first.
    Updated,
    /// Most recently created first.
    Created,
    /// By title (or key), then id.
    Title,
    /// By id.
    Id,
}

impl SortKey {
    /// The next sort in the `s` cycle.
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Updated => SortKey::Created,
            SortKey::Created => SortKey::Title,
            SortKey::Title => SortKey::Id,
            SortKey::Id => SortKey::Updated,
        }
    }

    /// The name shown in the header.
    pub fn label(self) -> &'static str {
        match self {
            SortKey::Updated => "last update",
            SortKey::Created => "created",
            SortKey::Title => "title",
            SortKey::Id => "id",
        }
    }
}

/// One observed transition in the log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// When it happened (the writer's `updated_at`, else when it was seen).
    pub at: DateTime<Utc>,
    /// The task's full id.
    pub task_id: String,
    /// The task's label when the transition was seen (already sanitized and
    /// capped, [`crate::shown::shown`]).
    pub label: String,
    /// The status before; `None` when the task appeared.
    pub from: Option<Status>,
    /// `None` when the task vanished from the store.
    pub to: Option<Status>,
}

/// How a status-line message should look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Neutral information.
    Info,
    /// The action succeeded.
    Success,
    /// Nothing done, or refused before asking the store.
    Warning,
    /// The store refused or failed.
    Error,
}

/// The one-line answer to the last action.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusLine {
    /// The message (sanitized where it quotes the store).
    pub text: String,
    /// How it is coloured.
    pub tone: Tone,
}

/// The text filter being typed (`/`), or `None` when not editing.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// The filter in force (lower case).
    pub text: String,
    /// Status filters (`1`–`5`, in [`Status::ALL`] order); none set shows all.
    pub statuses: [bool; 5],
    /// The filter being edited.
    pub editing: Option<Input>,
}

impl Filter {
    /// Whether any filter narrows the list.
    pub fn active(&self) -> bool {
        !self.text.is_empty() || self.statuses.iter().any(|s| *s)
    }
}

/// The dialog on top of the screen, if any.
#[derive(Debug, Default)]
pub enum Popup {
    #[default]
    /// Nothing on top of the screen.
    None,
    /// The key overview, scrolled down by `scroll` rows; `page` is how
    /// many rows it showed when last drawn (what PgUp/PgDn move by).
    Help {
        /// Rows scrolled past.
        scroll: usize,
        /// Rows shown when last drawn.
        page: usize,
    },
    /// The input form of a waiting task.
    Form(Box<Form>),
    /// The whole task, full screen (`v`).
    View(Box<TaskView>),
    /// "Cancel these N marked tasks?" y/n.
    ConfirmCancelMany {
        /// The tasks to cancel: id and how the dialog names it.
        tasks: Vec<(String, String)>,
        /// Marked tasks left alone because they are finished, named.
        finished: Vec<String>,
    },
    /// What a bulk action did, task by task.
    BulkDone {
        /// What was done ("cancel 3 tasks").
        title: String,
        /// One line per task, with how it went.
        lines: Vec<(Tone, String)>,
    },
    /// "Cancel task X?" y/n.
    ConfirmCancel {
        /// The task to cancel.
        task_id: String,
        /// How the dialog names it (short id and title).
        label: String,
    },
    /// Asking the reclaim age.
    ReclaimAge {
        /// The age being typed.
        input: Input,
        /// Why the last age did not parse.
        error: Option<String>,
        /// Only these (marked) tasks, if any were marked.
        only: Option<Vec<String>>,
    },
    /// Waiting for the dry run.
    ReclaimLoading {
        /// The age asked for.
        older_than: Duration,
        /// The age as typed.
        age: String,
        /// Only these (marked) tasks, if any were marked.
        only: Option<Vec<String>>,
    },
    /// The dry run's report, y/n.
    ReclaimPreview {
        /// The age asked for.
        older_than: Duration,
        /// The age as typed.
        age: String,
        /// The dry run's report.
        report: ReclaimReport,
        /// What `y` reclaims: the previewed tasks with the revision the
        /// preview saw. Nothing else is ever failed.
        tasks: Vec<(String, u64)>,
    },
    /// What reclaim did.
    ReclaimDone {
        /// The report of the real run.
        report: ReclaimReport,
    },
}

/// Everything the TUI shows.
pub struct App {
    /// The store path as shown in the header.
    pub store_label: String,
    /// The store's file name ("waiting for tasks.json to appear").
    pub store_name: String,
    /// Refuse every write with a message (`--read-only`, or a store this
    /// user cannot write).
    pub read_only: bool,
    /// Why the store is read only when `--read-only` did not say so: this
    /// user cannot write it (a read-only mount, another user's directory).
    pub read_only_why: Option<String>,
    /// The clock the screen is drawn at; set by the loop, fixed in tests.
    pub now: DateTime<Utc>,
    /// The rows of the window around the selection (the selected task in
    /// full), in the table's order: never the whole store.
    pub tasks: Arc<TaskMap>,
    /// What the feed last said about the file.
    pub watch: WatchState,
    /// Live updates are held back (`p`).
    pub paused: bool,
    /// Changes (tasks appeared, changed or vanished) held back while paused.
    pub pending_changes: usize,
    /// Positions in `tasks` of the rows shown, in display order.
    pub rows: Vec<usize>,
    /// Count of tasks per status, in [`Status::ALL`] order.
    pub counts: [usize; 5],
    /// The selected task: selection follows the id, not the row.
    pub selected: Option<String>,
    /// Row index of the selection in `rows`.
    pub cursor: usize,
    /// The first row drawn.
    pub offset: usize,
    /// The text and status filters.
    pub filter: Filter,
    /// The order of the rows.
    pub sort: SortKey,
    /// Observed transitions, newest first.
    pub log: VecDeque<LogEntry>,
    /// Tasks that changed recently, and until when they flash.
    pub flashes: HashMap<String, DateTime<Utc>>,
    /// The dialog on top, if any.
    pub popup: Popup,
    /// The answer to the last action.
    pub status: Option<StatusLine>,
    /// Scroll of the detail pane, in lines.
    pub detail_scroll: u16,
    /// In demo mode: the worker's last known state.
    pub worker: Option<WorkerState>,
    /// Set when the user asked to quit.
    pub quit: bool,
    /// Where the table's rows were last drawn (for mouse clicks).
    pub table_area: Rect,
    /// Where the detail pane was last drawn (for mouse scrolling).
    pub detail_area: Rect,
    /// How many rows fit in the table (set when drawing).
    pub page: usize,
    /// Each drawn task's text, sanitized once per change of the task.
    pub shown: ShownCache,
    /// Where the rows are fetched from, a window around the selection at a
    /// time; `None` (no store given yet): nothing to show.
    source: Option<Arc<dyn RowSource>>,
    /// Rows fetched on each side of the selection (at least two pages).
    pub window_side: usize,
    /// The window holds the first row of the table.
    at_start: bool,
    /// The window holds the last row of the table.
    at_end: bool,
    /// Tasks in the store (from the counts).
    total: usize,
    /// Feed events held back while paused.
    pending_feed: Vec<FeedEvent>,
    /// Marked tasks outside the window, as last fetched.
    pub(crate) marked_outside: TaskMap,
    /// The keys in force (the key table with the user's rebindings).
    pub keys: KeyMap,
    /// The marked tasks (Space, `*`), by id.
    pub marks: Marks,
    /// Working tasks whose lease lapsed, at `now`, in the whole store
    /// ([`rudder_model::task::Task::stalled`], [`RowSource::stalled`]).
    pub stalled: usize,
    /// The clock of the last stalled count: counted again when the store
    /// changes, and as time passes (a lease lapses without any write) at
    /// most once a second.
    stalled_at: Option<DateTime<Utc>>,
    /// What was wrong with the config file, shown at start and in the help.
    pub config_problems: Vec<String>,
}

impl App {
    /// Whether stalled tasks are only waiting for a free slot of a live
    /// worker: in the demo, with its worker running (it takes over every
    /// lapsed lease as soon as one of its slots is free).
    pub fn worker_will_resume(&self) -> bool {
        matches!(self.worker, Some(crate::WorkerState::Running { .. }))
    }

    /// What takes a stalled task over, for the header's hint (`short`
    /// where room is scarce): the demo's worker (started with its key) or
    /// any live worker. Never R, which fails them.
    pub fn resumes_stalled(&self, short: bool) -> String {
        use crate::keys::Action;
        let start = self.keys.first(Action::StartWorker);
        match (&self.worker, short) {
            (Some(crate::WorkerState::Running { .. }), false) => {
                "waiting for a free worker slot".to_string()
            }
            (Some(crate::WorkerState::Running { .. }), true) => "worker busy".to_string(),
            (Some(_), false) => format!("{start} starts a worker to resume"),
            (Some(_), true) => format!("{start} resumes"),
            (None, false) => "a live worker resumes".to_string(),
            (None, true) => "awaits a worker".to_string(),
        }
    }

    /// A fresh state for the store at `store` (a store URL or path; shown
    /// as its location, passwords redacted).
    pub fn new(store: &std::path::Path, read_only: bool, now: DateTime<Utc>) -> App {
        let (label, file) = match rudder_store::StoreUrl::parse(store) {
            Ok(url) => (url.to_string(), url.path().to_path_buf()),
            Err(e) => (e.to_string(), store.to_path_buf()),
        };
        App {
            store_label: rudder_model::text::sanitize(&label).into_owned(),
            store_name: file
                .file_name()
                .map(|n| rudder_model::text::sanitize(&n.to_string_lossy()).into_owned())
                .unwrap_or_else(|| "the store".into()),
            read_only,
            read_only_why: None,
            now,
            tasks: Arc::new(TaskMap::new()),
            watch: WatchState::Starting,
            paused: false,
            pending_changes: 0,
            rows: Vec::new(),
            counts: [0; 5],
            selected: None,
            cursor: 0,
            offset: 0,
            filter: Filter::default(),
            sort: SortKey::Created,
            log: VecDeque::new(),
            flashes: HashMap::new(),
            popup: Popup::None,
            status: None,
            detail_scroll: 0,
            worker: None,
            quit: false,
            table_area: Rect::default(),
            detail_area: Rect::default(),
            page: 10,
            shown: ShownCache::default(),
            source: None,
            window_side: WINDOW_SIDE,
            at_start: true,
            at_end: true,
            total: 0,
            pending_feed: Vec::new(),
            marked_outside: TaskMap::new(),
            keys: KeyMap::default(),
            marks: Marks::default(),
            stalled: 0,
            stalled_at: None,
            config_problems: Vec::new(),
        }
    }

    /// Fetch the rows from `source` a window around the selection at a
    /// time (with the counts and the selected task), never the whole
    /// store; the app then takes the feed's events ([`App::on_feed`]).
    pub fn with_source(mut self, source: Arc<dyn RowSource>) -> App {
        self.source = Some(source);
        self
    }

    /// How many rows the table has (the filters applied), if known: with a
    /// text filter, a table larger than its window knows only the rows it
    /// fetched.
    pub fn table_len(&self) -> Option<usize> {
        if self.at_start && self.at_end {
            return Some(self.rows.len());
        }
        if !self.filter.text.is_empty() {
            return None;
        }
        let any = self.filter.statuses.iter().any(|s| *s);
        Some(
            (0..5)
                .filter(|&i| !any || self.filter.statuses[i])
                .map(|i| self.counts[i])
                .sum(),
        )
    }

    /// How many tasks the store holds.
    pub fn store_len(&self) -> usize {
        self.total
    }

    /// Show the store read only because this user cannot write it (`why`).
    pub fn read_only_because(&mut self, why: String) {
        self.read_only = true;
        self.read_only_why = Some(why);
    }

    /// What a refused write says: why nothing is written.
    pub(crate) fn read_only_note(&self) -> String {
        match &self.read_only_why {
            Some(why) => format!("read-only: {why}; nothing is written"),
            None => crate::update::READ_ONLY.to_string(),
        }
    }

    /// Set the status line.
    pub fn say(&mut self, tone: Tone, text: impl Into<String>) {
        self.status = Some(StatusLine {
            text: text.into(),
            tone,
        });
    }

    /// The selected task, if it still exists.
    pub fn selected_task(&self) -> Option<&Task> {
        self.tasks.get(self.selected.as_deref()?)
    }

    /// The task shown on row `row`.
    pub fn row_task(&self, row: usize) -> Option<&Task> {
        let pos = *self.rows.get(row)?;
        self.tasks.get_index(pos).map(|(_, t)| t)
    }

    /// Take in what the change feed observed (held back while paused).
    pub fn on_feed(&mut self, update: StoreUpdate) {
        let StoreUpdate::Feed(event) = update;
        if !self.paused {
            self.apply_events(event);
            return;
        }
        if let FeedEvent::Changes(list) = &event {
            self.pending_changes += list.len();
        }
        self.pending_feed.push(event);
        let held: usize = self
            .pending_feed
            .iter()
            .map(|e| match e {
                FeedEvent::Changes(l) => l.len(),
                _ => 1,
            })
            .sum();
        if held > PENDING_CAPACITY {
            // Too much to replay: one re-read on resume instead.
            self.pending_feed = vec![FeedEvent::Reset(rudder_store::watch::ResetReason::Overflow)];
        }
    }

    /// Pause or resume live updates; resuming applies what was held back,
    /// in the order it came (so the log misses no transition).
    pub fn toggle_pause(&mut self) {
        if self.paused {
            self.paused = false;
            self.pending_changes = 0;
            for event in std::mem::take(&mut self.pending_feed) {
                self.apply_events(event);
            }
            self.say(Tone::Info, "live updates resumed");
        } else {
            self.paused = true;
            let key = self.keys.first(crate::keys::Action::Pause);
            self.say(
                Tone::Info,
                format!("paused: press {key} to resume live updates"),
            );
        }
    }

    /// Take in a feed event: fetch the window again when the
    /// changes could move it or the counts, log the transitions, flash
    /// the rows with news.
    fn apply_events(&mut self, event: FeedEvent) {
        match event {
            FeedEvent::Reset(_) => {
                let first = self.watch == WatchState::Starting;
                self.watch = WatchState::Live;
                self.shown.clear();
                let anchor = if first {
                    Anchor::Start
                } else {
                    Anchor::Tasks(self.anchors())
                };
                self.refetch(anchor);
            }
            FeedEvent::Changes(list) => {
                self.watch = WatchState::Live;
                let old = Arc::clone(&self.tasks);
                for c in &list {
                    self.shown.forget(&c.task_id);
                }
                // A heartbeat of a task outside the window moves nothing
                // in it (creation and id orders never change; the counts
                // change only with a status); any other change may.
                let affects = !self.filter.text.is_empty()
                    || matches!(self.sort, SortKey::Updated | SortKey::Title)
                    || list
                        .iter()
                        .any(|c| c.is_transition() || old.contains_key(&c.task_id));
                if affects {
                    self.refetch(Anchor::Tasks(self.anchors()));
                }
                self.record_changes(&list, &old);
            }
            FeedEvent::Unavailable(Unavailable::Missing) => {
                // Nothing is known about any task any more.
                self.tasks = Arc::new(TaskMap::new());
                self.rows.clear();
                self.counts = [0; 5];
                self.total = 0;
                self.shown.clear();
                self.stalled = 0;
                self.watch = WatchState::Missing;
                self.cursor = 0;
                self.offset = 0;
                self.selected = None;
            }
            FeedEvent::Unavailable(u) => self.watch = WatchState::unavailable(&u),
        }
        self.prune_marks();
        // The store changed (or is gone): count again.
        self.count_stalled();
        self.check_form();
    }

    /// Log the transitions of `list` and flash the rows with news; `old`
    /// is the window before the changes.
    fn record_changes(&mut self, list: &[TaskChange], old: &TaskMap) {
        let until = self.now + FLASH;
        let mut lookups = 0;
        for c in list {
            let new = self.tasks.get(&c.task_id);
            let before = old.get(&c.task_id);
            // A flash means news: a new task, a transition, a new title or
            // message. A heartbeat alone changes none of these.
            let news = match (before, new) {
                (Some(o), Some(n)) => {
                    o.status != n.status
                        || o.title != n.title
                        || o.status_message != n.status_message
                }
                _ => c.is_transition(),
            };
            if news && c.to.is_some() {
                self.flashes.insert(c.task_id.clone(), until);
            }
            if !c.is_transition() {
                continue;
            }
            let mut label = new.or(before).and_then(|t| t.label()).map(str::to_string);
            if label.is_none()
                && new.is_none()
                && before.is_none()
                && lookups < LABEL_LOOKUPS
                && let Some(source) = &self.source
            {
                lookups += 1;
                label = source
                    .task(&c.task_id)
                    .ok()
                    .flatten()
                    .and_then(|t| t.label().map(str::to_string));
            }
            self.log.push_front(LogEntry {
                at: c.at.unwrap_or(self.now),
                task_id: c.task_id.clone(),
                label: crate::shown::shown(label.as_deref().unwrap_or("")),
                from: c.from,
                to: c.to,
            });
        }
        self.log.truncate(LOG_CAPACITY);
    }

    /// The selection, then its neighbours nearest first: where a window
    /// fetched again is anchored (the first that still exists and is
    /// shown), so that the selection follows its task, or falls on the
    /// row that took its place.
    fn anchors(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.selected.iter().cloned().collect();
        for d in 1..=8 {
            for row in [self.cursor.checked_add(d), self.cursor.checked_sub(d)] {
                if let Some(t) = row.and_then(|r| self.row_task(r)) {
                    ids.push(t.task_id.clone());
                }
            }
        }
        ids
    }

    /// Fetch the window again, keeping the selected row on the
    /// same line of the screen.
    fn refetch(&mut self, anchor: Anchor) {
        let Some(source) = self.source.clone() else {
            return;
        };
        let view = View {
            statuses: self.filter.statuses,
            text: self.filter.text.clone(),
            sort: self.sort,
        };
        let line = self.cursor.saturating_sub(self.offset);
        // At least two pages each side, so that a page key never leaves it.
        let side = self.window_side.max(2 * self.page.max(1));
        let w = match window::fetch(&*source, &view, &anchor, side) {
            Ok(w) => w,
            Err(e) => {
                self.watch = WatchState::unavailable(&Unavailable::of(&e));
                return;
            }
        };
        let mut counts = [0; 5];
        for (status, n) in &w.counts.0 {
            counts[status_index(*status)] += n;
        }
        self.counts = counts;
        self.total = w.counts.total();
        self.at_start = w.at_start;
        self.at_end = w.at_end;
        let tasks: TaskMap = w.rows.into_iter().map(|t| (t.task_id.clone(), t)).collect();
        // The text of rows that left the window is not kept either.
        self.shown.retain(|id| tasks.contains_key(id));
        self.rows = (0..tasks.len()).collect();
        // Marks follow their tasks outside the window too.
        self.marked_outside = self
            .marks
            .ids()
            .filter(|id| !tasks.contains_key(*id))
            .filter_map(|id| source.task(id).ok().flatten())
            .map(|t| (t.task_id.clone(), t))
            .collect();
        self.tasks = Arc::new(tasks);
        let cursor = match (w.anchor, &anchor) {
            (Some(at), _) => at,
            (None, Anchor::End) => self.rows.len().saturating_sub(1),
            (None, _) => 0,
        };
        let id = self.row_task(cursor).map(|t| t.task_id.clone());
        if id != self.selected {
            self.detail_scroll = 0;
        }
        self.cursor = cursor;
        self.selected = id;
        self.offset = self.cursor.saturating_sub(line);
        self.scroll_to_cursor();
    }

    /// Tell an open form that its task moved on (it keeps what was typed).
    fn check_form(&mut self) {
        let Popup::Form(form) = &mut self.popup else {
            return;
        };
        let looked_up = match (self.tasks.get(&form.task_id), &self.source) {
            (None, Some(source)) => source.task(&form.task_id).ok().flatten(),
            _ => None,
        };
        form.moved_on = match self.tasks.get(&form.task_id).or(looked_up.as_ref()) {
            None => Some("this task is no longer in the store".into()),
            Some(t) if t.revision != form.revision => Some(format!(
                "this task changed since the form was opened (now {}, revision {}); submitting will be refused",
                t.status, t.revision
            )),
            Some(_) => None,
        };
    }

    /// Advance the clock and drop expired flashes; count the stalled
    /// tasks again once a second has passed since the last count (a lease
    /// lapses without any write to the store, so no change tells of it).
    pub fn tick(&mut self, now: DateTime<Utc>) {
        self.now = now;
        self.flashes.retain(|_, until| *until > now);
        if self
            .stalled_at
            .is_none_or(|at| now < at || now - at >= TimeDelta::seconds(1))
        {
            self.count_stalled();
        }
    }

    /// Count the stalled tasks of the whole store at `now` (one count
    /// query); a store that cannot answer keeps the last count, and the
    /// next fetch says why.
    fn count_stalled(&mut self) {
        self.stalled_at = Some(self.now);
        let Some(source) = &self.source else {
            self.stalled = 0;
            return;
        };
        if let Ok(n) = source.stalled(self.now) {
            self.stalled = n;
        }
    }

    /// Whether `task_id` is flashing.
    pub fn flashing(&self, task_id: &str) -> bool {
        self.flashes
            .get(task_id)
            .is_some_and(|until| *until > self.now)
    }

    /// Fetch the rows again (the filter or the sort changed), keeping the
    /// selection on the same task id, or on the row that took its place.
    pub fn rebuild(&mut self) {
        self.refetch(Anchor::Tasks(self.anchors()));
    }

    /// Move the cursor to `row` (clamped) and select its task.
    pub fn select_row(&mut self, row: usize) {
        // The top and the bottom of the table may be outside the window.
        if row == usize::MAX && !self.at_end {
            return self.refetch(Anchor::End);
        }
        if row == 0 && !self.at_start {
            return self.refetch(Anchor::Start);
        }
        if self.rows.is_empty() {
            self.cursor = 0;
            self.selected = None;
            return;
        }
        let row = row.min(self.rows.len() - 1);
        let id = self.row_task(row).map(|t| t.task_id.clone());
        if id != self.selected {
            self.detail_scroll = 0;
        }
        self.cursor = row;
        self.selected = id;
        self.scroll_to_cursor();
        // Within a page of the window's edge: fetch the rows beyond it, so
        // that no move of a page (or less) reaches the window's first or
        // last row unless it is the table's (moving to them is `g`, `G`).
        let margin = self.page.max(1);
        let near_top = self.cursor <= margin && !self.at_start;
        let near_bottom = self.cursor + margin + 1 >= self.rows.len() && !self.at_end;
        if near_top || near_bottom {
            self.refetch(Anchor::Tasks(self.selected.iter().cloned().collect()));
        }
    }

    /// Keep the cursor inside the visible page.
    pub fn scroll_to_cursor(&mut self) {
        let page = self.page.max(1);
        if self.cursor < self.offset {
            self.offset = self.cursor;
        } else if self.cursor >= self.offset + page {
            self.offset = self.cursor + 1 - page;
        }
        let max_offset = self.rows.len().saturating_sub(page);
        self.offset = self.offset.min(max_offset);
    }
}

/// The position of `status` in [`Status::ALL`].
pub fn status_index(status: Status) -> usize {
    Status::ALL
        .iter()
        .position(|s| *s == status)
        .unwrap_or_default()
}
