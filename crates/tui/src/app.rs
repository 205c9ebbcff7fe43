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
use rudder_store::query::StatusCounts;
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
    /// Who made the change and why (`ana: duplicate of INC-4411`), from
    /// the history entry that recorded it, shown; empty when unknown.
    pub by: String,
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
        /// The reason being typed (`r`), if any ([`crate::reason`]).
        reason: Option<Input>,
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
        /// The reason being typed (`r`), if any ([`crate::reason`]).
        reason: Option<Input>,
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
        /// The reason being typed (`r`), if any ([`crate::reason`]).
        reason: Option<Input>,
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
    /// How a task that starts waiting is told of (the config's `notify`).
    pub notify: crate::alert::NotifyMode,
    /// The rounds of waiting told of, and those still to tell.
    pub alerts: crate::alert::Alerts,
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
    /// How many rows are out of the order chosen with `s`: the table
    /// holds still while changes come in (a changed task keeps its row) and
    /// the header says how many rows a re-sort ([`App::resort`]) would move.
    pub out_of_order: usize,
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
            notify: crate::alert::NotifyMode::default(),
            alerts: crate::alert::Alerts::default(),
            marked_outside: TaskMap::new(),
            keys: KeyMap::default(),
            marks: Marks::default(),
            stalled: 0,
            stalled_at: None,
            config_problems: Vec::new(),
            out_of_order: 0,
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
                self.fetch_window(anchor, Order::Held);
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
                if affects && !self.take_changes(&list) {
                    self.fetch_window(Anchor::Tasks(self.anchors()), Order::Held);
                }
                self.record_changes(&list, &old);
                self.alerts.see(&list, &self.tasks);
            }
            FeedEvent::Unavailable(Unavailable::Missing) => {
                // Nothing is known about any task any more.
                self.tasks = Arc::new(TaskMap::new());
                self.rows.clear();
                self.out_of_order = 0;
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
            // The entry that recorded this transition: the task's last,
            // when it is still at the status the change went to.
            let by = new
                .and_then(|t| t.history.last())
                .filter(|h| Some(h.status) == c.to)
                .map(|h| {
                    let who = h.actor.as_deref().map(crate::shown::shown);
                    let why = h.reason.as_deref().map(crate::shown::shown);
                    match (who, why) {
                        (Some(who), Some(why)) => format!("{who}: {why}"),
                        (Some(who), None) => who,
                        (None, Some(why)) => why,
                        (None, None) => String::new(),
                    }
                })
                .unwrap_or_default();
            self.log.push_front(LogEntry {
                at: c.at.unwrap_or(self.now),
                task_id: c.task_id.clone(),
                label: crate::shown::shown(label.as_deref().unwrap_or("")),
                from: c.from,
                to: c.to,
                by,
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

    /// What the table shows: the filters and the order.
    fn view(&self) -> View {
        View {
            statuses: self.filter.statuses,
            text: self.filter.text.clone(),
            sort: self.sort,
        }
    }

    /// Fetch the window again in the table's order, keeping the selected
    /// row on the same line of the screen (the person asked for it: a
    /// filter, a sort, `g`/`G`).
    fn refetch(&mut self, anchor: Anchor) {
        self.fetch_window(anchor, Order::Fresh);
    }

    /// Fetch the window again, keeping the selected row on the same line
    /// of the screen; with [`Order::Held`], the rows already shown keep
    /// their order.
    fn fetch_window(&mut self, anchor: Anchor, order: Order) {
        let Some(source) = self.source.clone() else {
            return;
        };
        // At least two pages each side, so that a page key never leaves it.
        let side = self.window_side.max(2 * self.page.max(1));
        match window::fetch(&*source, &self.view(), &anchor, side) {
            Ok(w) => self.take_window(w, &anchor, order),
            Err(e) => self.watch = WatchState::unavailable(&Unavailable::of(&e)),
        }
    }

    /// Take in the changes of a text-filtered window without asking the
    /// store for its rows again: with a text filter a page query reads
    /// every task to find the few that match, but the feed names the tasks
    /// that changed, and the window is the slice of the table between its
    /// first and last rows. So the rows that did not change stay, and each
    /// changed task is read by its id and kept if the filter shows it
    /// inside that slice. `false` when this cannot be done (no text
    /// filter, an empty or overgrown window, no anchor left in it): then
    /// the window is fetched again.
    fn take_changes(&mut self, list: &[TaskChange]) -> bool {
        let Some(source) = self.source.clone() else {
            return false;
        };
        if self.filter.text.is_empty() || (self.tasks.is_empty() && !(self.at_start && self.at_end))
        {
            return false;
        }
        let view = self.view();
        let old = Arc::clone(&self.tasks);
        // The old window held exactly the tasks between these two, in
        // the order as it was; a task outside them is outside the window.
        let first = (!self.at_start)
            .then(|| old.first().map(|(_, t)| t))
            .flatten();
        let last = (!self.at_end).then(|| old.last().map(|(_, t)| t)).flatten();
        let inside = |t: &Task| {
            first.is_none_or(|f| view.order(f, t).is_le())
                && last.is_none_or(|l| view.order(t, l).is_le())
        };
        let changed: std::collections::HashSet<&str> =
            list.iter().map(|c| c.task_id.as_str()).collect();
        let mut rows: Vec<Task> = old
            .values()
            .filter(|t| !changed.contains(t.task_id.as_str()))
            .cloned()
            .collect();
        for id in &changed {
            match source.task(id) {
                Ok(Some(t)) if view.shows(&t) && inside(&t) => rows.push(t),
                // The selection follows its task out of the window: a
                // fetch anchored at it.
                Ok(Some(t)) if view.shows(&t) && self.selected.as_deref() == Some(id) => {
                    return false;
                }
                Ok(_) => {}
                Err(e) => {
                    self.watch = WatchState::unavailable(&Unavailable::of(&e));
                    return true;
                }
            }
        }
        // Grown past a fetch's size: a fetch trims it around the selection.
        let side = self.window_side.max(2 * self.page.max(1));
        if rows.len() > 4 * side + 2 {
            return false;
        }
        rows.sort_by(|a, b| view.order(a, b));
        let anchors = self.anchors();
        let Some(at) = anchors
            .iter()
            .find_map(|id| rows.iter().position(|t| &t.task_id == id))
        else {
            return false;
        };
        // The counts change only when a task appears, vanishes or changes
        // status.
        let counts = if list.iter().any(|c| c.is_transition()) {
            match source.counts() {
                Ok(c) => c,
                Err(e) => {
                    self.watch = WatchState::unavailable(&Unavailable::of(&e));
                    return true;
                }
            }
        } else {
            StatusCounts(
                Status::ALL
                    .iter()
                    .zip(self.counts)
                    .filter(|(_, n)| *n > 0)
                    .map(|(s, n)| (*s, n))
                    .collect(),
            )
        };
        let w = window::Window {
            rows,
            anchor: Some(at),
            at_start: self.at_start,
            at_end: self.at_end,
            counts,
        };
        self.take_window(w, &Anchor::Tasks(anchors), Order::Held);
        true
    }

    /// Show the window `w` fetched at `anchor`, keeping the selected row on
    /// the same line of the screen.
    fn take_window(&mut self, w: window::Window, anchor: &Anchor, order: Order) {
        let Some(source) = self.source.clone() else {
            return;
        };
        let line = self.cursor.saturating_sub(self.offset);
        let mut counts = [0; 5];
        for (status, n) in &w.counts.0 {
            counts[status_index(*status)] += n;
        }
        self.counts = counts;
        self.total = w.counts.total();
        self.at_start = w.at_start;
        self.at_end = w.at_end;
        // The order the rows were shown in, with each one's status.
        let shown: Vec<(String, Status)> = match order {
            Order::Fresh => Vec::new(),
            Order::Held => (0..self.rows.len())
                .filter_map(|r| self.row_task(r))
                .map(|t| (t.task_id.clone(), t.status))
                .collect(),
        };
        let tasks: TaskMap = w.rows.into_iter().map(|t| (t.task_id.clone(), t)).collect();
        // The text of rows that left the window is not kept either.
        self.shown.retain(|id| tasks.contains_key(id));
        self.rows = match order {
            Order::Fresh => (0..tasks.len()).collect(),
            Order::Held => held_order(&shown, &tasks),
        };
        self.out_of_order = out_of_order(&self.rows);
        // Marks follow their tasks outside the window too.
        self.marked_outside = self
            .marks
            .ids()
            .filter(|id| !tasks.contains_key(*id))
            .filter_map(|id| source.task(id).ok().flatten())
            .map(|t| (t.task_id.clone(), t))
            .collect();
        self.tasks = Arc::new(tasks);
        // The anchor's place in the window, then on the screen.
        let at = match (w.anchor, anchor) {
            (Some(at), _) => at,
            (None, Anchor::End) => self.tasks.len().saturating_sub(1),
            (None, _) => 0,
        };
        let cursor = match (order, anchor) {
            (Order::Held, _) => self.rows.iter().position(|&r| r == at).unwrap_or(0),
            (Order::Fresh, _) => at,
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

    /// Put the rows in the chosen order (`o`): those that changed since
    /// the table last was in order move to their places; the selection
    /// stays on its task, on the same line of the screen.
    /// The rows that moved are shown too where the page has room for them
    /// beside the selection (a task re-sorted to the top is not left just
    /// above the screen).
    /// Returns the rows (in the new order) of the tasks that moved but are
    /// off the screen all the same.
    pub fn resort(&mut self) -> Vec<usize> {
        let line = self.cursor.saturating_sub(self.offset);
        let moved = in_order(&self.rows)
            .iter()
            .zip(&self.rows)
            .filter(|(kept, _)| !**kept)
            .map(|(_, &at)| at)
            .collect::<Vec<_>>();
        self.rows = (0..self.tasks.len()).collect();
        self.out_of_order = 0;
        if let Some(at) = self
            .selected
            .as_deref()
            .and_then(|id| self.tasks.get_index_of(id))
        {
            self.cursor = at;
        }
        self.offset = self.cursor.saturating_sub(line);
        let page = self.page.max(1);
        if let Some(&first) = moved.iter().min()
            && first < self.offset
            && self.cursor < first + page
        {
            self.offset = first;
        }
        if let Some(&last) = moved.iter().max()
            && last >= self.offset + page
            && last < self.cursor + page
        {
            self.offset = last + 1 - page;
        }
        self.scroll_to_cursor();
        let shown = self.offset..self.offset + page;
        let mut off: Vec<usize> = moved.into_iter().filter(|r| !shown.contains(r)).collect();
        off.sort_unstable();
        off
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
            // Moving is not asking for a re-sort: the rows shown keep
            // their order.
            self.fetch_window(
                Anchor::Tasks(self.selected.iter().cloned().collect()),
                Order::Held,
            );
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

/// Whether a window fetched again keeps the order the rows were shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// The table's order (the person asked for the rows).
    Fresh,
    /// The rows shown keep their order; a row new to the window, or whose
    /// task changed status group, takes the place the table's order gives
    /// it after the rows around it.
    Held,
}

/// The rows of `tasks` (in the table's order) in the order of `shown`
/// (ids with their status as last shown): each task shown before, of the
/// same status, keeps its place among the others; every other task goes
/// right after the nearest task before it in the table's order that kept
/// its place in its status group (first in the group if none).
fn held_order(shown: &[(String, Status)], tasks: &TaskMap) -> Vec<usize> {
    let group = |at: usize| {
        tasks
            .get_index(at)
            .map_or(0, |(_, t)| window::group_of(t.status))
    };
    let mut rank: Vec<Option<usize>> = vec![None; tasks.len()];
    for (i, (id, status)) in shown.iter().enumerate() {
        if let Some((at, _, t)) = tasks.get_full(id.as_str())
            && t.status == *status
        {
            rank[at] = Some(i);
        }
    }
    // (group, rank of the row it follows, kept first, place in the order)
    let key = |at: usize| -> (usize, Option<usize>, bool, usize) {
        match rank[at] {
            Some(r) => (group(at), Some(r), false, at),
            None => {
                let after = (0..at)
                    .rev()
                    .take_while(|&q| group(q) == group(at))
                    .find_map(|q| rank[q]);
                (group(at), after, true, at)
            }
        }
    };
    let mut rows: Vec<usize> = (0..tasks.len()).collect();
    rows.sort_by_cached_key(|&at| key(at));
    rows
}

/// How many rows must move for `rows` (positions in the table's order) to
/// be in order: all but the longest run already in order.
fn out_of_order(rows: &[usize]) -> usize {
    in_order(rows).iter().filter(|kept| !**kept).count()
}

/// Which of `rows` (positions in the table's order) stay put when the
/// fewest rows move to put them in order: one longest increasing
/// subsequence (patience sorting, with each row's predecessor).
fn in_order(rows: &[usize]) -> Vec<bool> {
    // tails[k]: the index in `rows` ending the best run of length k + 1.
    let mut tails: Vec<usize> = Vec::new();
    let mut before: Vec<Option<usize>> = vec![None; rows.len()];
    for (i, &r) in rows.iter().enumerate() {
        let k = tails.partition_point(|&t| rows[t] < r);
        before[i] = k.checked_sub(1).map(|k| tails[k]);
        if k == tails.len() {
            tails.push(i);
        } else {
            tails[k] = i;
        }
    }
    let mut kept = vec![false; rows.len()];
    let mut at = tails.last().copied();
    while let Some(i) = at {
        kept[i] = true;
        at = before[i];
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use rudder_store::query::PageQuery;
    use rudder_store::{StoreError, Transaction};
    use std::sync::RwLock;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Tasks in memory that count the page queries asked of them.
    #[derive(Default)]
    struct Counted {
        tasks: RwLock<TaskMap>,
        pages: AtomicUsize,
    }

    impl RowSource for Counted {
        fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
            self.pages.fetch_add(1, Ordering::Relaxed);
            Transaction::page(&*self.tasks.read().expect("lock"), q)
        }
        fn counts(&self) -> Result<StatusCounts, StoreError> {
            Transaction::counts(&*self.tasks.read().expect("lock"))
        }
        fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
            Ok(self.tasks.read().expect("lock").get(id).cloned())
        }
        fn stalled(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
            Transaction::stalled(&*self.tasks.read().expect("lock"), now)
        }
    }

    fn base() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).expect("a time")
    }

    fn task(i: usize) -> Task {
        let status = [Status::Working, Status::InputRequired, Status::Completed][i % 3];
        let mut t = Task::new(format!("t{i:04}"), status);
        t.created_at = Some(base() + TimeDelta::minutes(i as i64));
        t.updated_at = Some(base() + TimeDelta::minutes((i * 7 % 300) as i64));
        t.title = Some(format!("incident {}", i % 7));
        t.revision = 1;
        t
    }

    /// A small pseudo-random generator, so that a failure replays.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n
        }
    }

    /// The whole table in order, as a fresh fetch from the start gives it.
    fn table(source: &dyn RowSource, app: &App) -> Vec<String> {
        let w = window::fetch(source, &app.view(), &Anchor::Start, 100_000).expect("fetch");
        w.rows.into_iter().map(|t| t.task_id).collect()
    }

    /// Issue 30, item 19: with a text filter, a page query reads every
    /// task to find the few that match; the feed's changes are taken in
    /// without one, and the window is still exactly the slice of the table
    /// between its first and last rows, with the selection in it.
    #[test]
    fn a_filtered_window_takes_the_feeds_changes_without_a_page_query() {
        for sort in [
            SortKey::Created,
            SortKey::Updated,
            SortKey::Title,
            SortKey::Id,
        ] {
            let source = Arc::new(Counted::default());
            *source.tasks.write().expect("lock") =
                (0..300).map(|i| (format!("t{i:04}"), task(i))).collect();
            let mut app = App::new(std::path::Path::new("/tmp/t.json"), false, base())
                .with_source(Arc::clone(&source) as Arc<dyn RowSource>);
            app.window_side = 6;
            app.page = 3;
            app.sort = sort;
            app.filter.text = "incident 3".into();
            app.on_feed(StoreUpdate::Feed(FeedEvent::Reset(
                rudder_store::watch::ResetReason::Start,
            )));
            // Somewhere in the middle of a window that holds part of it.
            for _ in 0..20 {
                app.select_row(app.cursor + 1);
            }
            let selected = app.selected.clone().expect("a selection");
            let mut rng = Rng(sort as u64 + 1);
            let mut next = 300;
            for round in 0..200 {
                let mut list = Vec::new();
                {
                    let mut tasks = source.tasks.write().expect("lock");
                    for _ in 0..1 + rng.below(3) {
                        let id = format!("t{:04}", rng.below(next + 1));
                        // A change that takes the selected task out of
                        // the window's slice is fetched again, anchored
                        // at it, so that the selection follows its task:
                        // its heartbeats only where they move nothing.
                        if id == selected && sort == SortKey::Updated {
                            continue;
                        }
                        let before = tasks.get(&id).cloned();
                        let after = match (before.clone(), rng.below(6)) {
                            // A new task, matching or not.
                            (None, _) => {
                                next += 1;
                                Some(task(rng.below(300))).map(|mut t| {
                                    t.task_id = id.clone();
                                    t
                                })
                            }
                            // The selection stays (its neighbours anchor
                            // otherwise, which a fetch handles).
                            (Some(_), 0) if id != selected => None,
                            (Some(mut t), 1) if !t.status.is_terminal() && id != selected => {
                                t.status = [Status::Working, Status::InputRequired, Status::Failed]
                                    [rng.below(3)];
                                Some(t)
                            }
                            (Some(mut t), 2) if id != selected => {
                                t.title = Some(format!("incident {}", rng.below(7)));
                                Some(t)
                            }
                            (Some(mut t), _) => {
                                t.updated_at =
                                    Some(base() + TimeDelta::minutes(300 + round as i64));
                                Some(t)
                            }
                        };
                        let after = after.map(|mut t| {
                            t.revision += 1;
                            t
                        });
                        match &after {
                            Some(t) => {
                                tasks.insert(id.clone(), t.clone());
                            }
                            None => {
                                tasks.shift_remove(&id);
                            }
                        }
                        list.push(TaskChange {
                            task_id: id,
                            revision: after.as_ref().map_or(0, |t| t.revision),
                            from: before.map(|t| t.status),
                            to: after.map(|t| t.status),
                            at: None,
                        });
                    }
                }
                source.pages.store(0, Ordering::Relaxed);
                app.on_feed(StoreUpdate::Feed(FeedEvent::Changes(list)));
                assert_eq!(
                    source.pages.load(Ordering::Relaxed),
                    0,
                    "{sort:?} round {round}: the store was paged"
                );
                let all = table(&*source, &app);
                let ids: Vec<&String> = app.tasks.keys().collect();
                let first = all
                    .iter()
                    .position(|id| Some(id) == ids.first().copied())
                    .expect("the first row is in the table");
                assert_eq!(
                    all[first..first + ids.len()].iter().collect::<Vec<_>>(),
                    ids,
                    "{sort:?} round {round}: the window is a slice of the table"
                );
                assert!(!app.at_start || first == 0, "{sort:?} round {round}");
                assert!(
                    !app.at_end || first + ids.len() == all.len(),
                    "{sort:?} round {round}"
                );
                assert_eq!(app.selected.as_ref(), Some(&selected), "{sort:?} {round}");
                let counts = source.counts().expect("counts");
                assert_eq!(app.store_len(), counts.total(), "{sort:?} {round}");
                let shown_row = app
                    .rows
                    .iter()
                    .position(|&r| app.tasks.get_index(r).map(|(id, _)| id) == Some(&selected));
                assert_eq!(shown_row, Some(app.cursor), "{sort:?} {round}");
            }
        }
    }

    #[test]
    fn rows_held_still_count_the_fewest_that_must_move() {
        assert_eq!(out_of_order(&[0, 1, 2, 3]), 0);
        // One task that moved to the top while the rest held still.
        assert_eq!(out_of_order(&[1, 2, 0, 3]), 1);
        assert_eq!(out_of_order(&[3, 2, 1, 0]), 3);
        assert_eq!(out_of_order(&[]), 0);
        assert_eq!(in_order(&[1, 2, 0, 3]), [true, true, false, true]);
        assert_eq!(in_order(&[0, 3, 1, 2]), [true, false, true, true]);
    }
}
