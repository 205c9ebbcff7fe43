//! The TUI's state, apart from any terminal: what is shown, what is selected,
//! which dialog is open. [`crate::update`] changes it; [`crate::view`]
//! draws it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use indexmap::IndexSet;
use ratatui::layout::Rect;
use tui_input::Input;

use crate::WorkerState;
use crate::form::Form;
use crate::keys::KeyMap;
use crate::reads::{Held, ReadAnswer, ReadRequest, WindowAsk};
use crate::shown::ShownCache;
use crate::window::{self, Anchor, Order, RowSource, View};
pub use crate::window::{SortKey, status_index};
use rudder_model::task::{Status, Task, TaskMap};
use rudder_store::ReclaimReport;
use rudder_store::watch::{FeedEvent, TaskChange, Unavailable};

/// How long a changed row stays highlighted.
pub const FLASH: TimeDelta = TimeDelta::seconds(2);
/// How many transitions the log keeps.
pub const LOG_CAPACITY: usize = 500;
/// How many rows the app fetches on each side of the selection.
pub const WINDOW_SIDE: usize = 200;
/// How many changes are held back while paused before they are replaced
/// by one re-read.
const PENDING_CAPACITY: usize = 10_000;
/// The reclaim age offered by default.
pub const DEFAULT_RECLAIM_AGE: &str = "15m";
/// How long a read may take before the header says the TUI waits for the
/// store.
pub const SLOW_READ: Duration = Duration::from_secs(1);

/// How the app's reads are answered.
enum Reads {
    /// At once, on the caller's thread (the tests, and an app without a
    /// loop).
    Inline,
    /// By a reader thread ([`crate::reads::Reader`]): its answers come back
    /// through the loop, to [`App::on_read`].
    Background {
        /// Where requests go.
        ask: std::sync::mpsc::Sender<ReadRequest>,
        /// When the read under way was asked, if one is.
        reading: Option<std::time::Instant>,
        /// The read under way fetches rows the person asked for.
        for_person: bool,
    },
}

/// How many keys and clicks are held while rows the person asked for are
/// read ([`App::awaits_rows`]); more are dropped, and said.
pub const HELD_EVENTS: usize = 4096;

/// What the app wants read, gathered while a read is under way.
#[derive(Default)]
struct Want {
    /// The rows, fetched again.
    window: Option<WindowWant>,
    /// The feed's changes since the last read, to log.
    changes: Vec<TaskChange>,
    /// The window when the first of them came.
    old: Option<Arc<TaskMap>>,
    /// The stalled count.
    stalled: bool,
    /// The feed re-read the store: live once the rows are read.
    reset: bool,
}

/// The rows wanted again.
struct WindowWant {
    /// Where the window is anchored.
    aim: Aim,
    /// Whether the rows shown keep their order.
    order: Order,
    /// Only the feed's changes asked for it (their tasks may be taken
    /// into a text-filtered window without a page query).
    changes_only: bool,
    /// The person asked for these rows (or they are the first): keys wait
    /// for them.
    for_person: bool,
}

/// Where a window wanted is anchored, decided when it is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aim {
    /// The selection, then its neighbours.
    Here,
    /// The selection alone.
    Selected,
    /// The top of the table.
    Start,
    /// The bottom of the table.
    End,
}

/// Who wants the window again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asker {
    /// The person: another view or place (a filter, a sort, `g`/`G`).
    Person,
    /// The person moved near the window's edge.
    Scroll,
    /// The feed re-read the store.
    Store,
    /// The feed's changes.
    Changes,
    /// The feed's first reading of the store: the first rows.
    First,
}

/// What a refused write says when `--read-only` was given.
pub(crate) const READ_ONLY: &str = "read-only: started with --read-only, nothing is written";

/// The marked task ids, in the order they were marked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    pub(crate) ids: IndexSet<String>,
}

impl Marks {
    /// Whether `id` is marked.
    pub fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    /// How many tasks are marked.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no task is marked.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The marked ids, in the order they were marked.
    pub fn ids(&self) -> impl Iterator<Item = &String> {
        self.ids.iter()
    }

    /// Mark `id`, or unmark it if marked; returns whether it is marked now.
    pub fn toggle(&mut self, id: &str) -> bool {
        if self.ids.shift_remove(id) {
            false
        } else {
            self.ids.insert(id.to_string());
            true
        }
    }

    /// Unmark everything.
    pub fn clear(&mut self) {
        self.ids.clear();
    }
}

/// The full-screen task view's state.
#[derive(Debug, Clone)]
pub struct TaskView {
    /// The task shown: the one selected when `v` was pressed.
    pub task_id: String,
    /// The first row drawn.
    pub scroll: usize,
    /// The search being typed (`/`), if any.
    pub search: Option<Input>,
    /// The search in force.
    pub query: String,
    /// Which match is the current one (taken modulo the matches).
    pub current: usize,
    /// Scroll to the current match at the next frame.
    pub jump: bool,
    /// How many matches the last frame found.
    pub matches: usize,
    /// How many rows the last frame had, and how many fit.
    pub rows: usize,
    /// See `rows`.
    pub height: usize,
}

impl TaskView {
    /// The view of task `task_id`, from the top.
    pub fn new(task_id: String) -> TaskView {
        TaskView {
            task_id,
            scroll: 0,
            search: None,
            query: String::new(),
            current: 0,
            jump: false,
            matches: 0,
            rows: 0,
            height: 10,
        }
    }

    pub(crate) fn max_scroll(&self) -> usize {
        if self.rows == 0 {
            // Not drawn yet: the first frame clamps.
            return usize::MAX;
        }
        self.rows.saturating_sub(self.height)
    }
}

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
    /// What the header calls the demo's worker ([`crate::WorkerControl::role`]).
    pub worker_role: &'static str,
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
    /// How the store is read.
    reads: Reads,
    /// What is wanted read and not yet asked.
    want: Want,
    /// Grows when the person asks for another view or place: a read asked
    /// before it has stale rows.
    generation: u64,
    /// How long the read under way has taken, once that is at least
    /// [`SLOW_READ`] (the header says the TUI waits for the store).
    pub slow_read: Option<Duration>,
    /// Keys and clicks that came while rows the person asked for were
    /// read, to be taken in order once they are shown
    /// ([`App::next_held`]).
    held: VecDeque<crossterm::event::Event>,
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
        match rudder_store::StoreUrl::parse(store) {
            Ok(url) => App::at(&url, read_only, now),
            Err(e) => App::labelled(e.to_string(), store, read_only, now),
        }
    }

    /// A fresh state for the store at `url` (shown with its password
    /// redacted).
    pub fn at(url: &rudder_store::StoreUrl, read_only: bool, now: DateTime<Utc>) -> App {
        App::labelled(url.to_string(), url.path(), read_only, now)
    }

    /// A fresh state for a store shown as `label`, in `file`.
    fn labelled(label: String, file: &std::path::Path, read_only: bool, now: DateTime<Utc>) -> App {
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
            worker_role: "worker",
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
            reads: Reads::Inline,
            want: Want::default(),
            generation: 0,
            slow_read: None,
            held: VecDeque::new(),
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
            None => READ_ONLY.to_string(),
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

    /// Take in a feed event: ask for the window again when the changes
    /// could move it or the counts, and for what the log and the flashes
    /// need; what is read is taken in by [`App::on_read`].
    fn apply_events(&mut self, event: FeedEvent) {
        match event {
            FeedEvent::Reset(_) => {
                // Live once the rows are read ([`App::on_read`]).
                self.want.reset = true;
                self.shown.clear();
                // Keys typed before the first rows wait for them.
                let (aim, asker) = if self.watch == WatchState::Starting {
                    (Aim::Start, Asker::First)
                } else {
                    (Aim::Here, Asker::Store)
                };
                self.want_window(aim, Order::Held, asker);
            }
            FeedEvent::Changes(list) => {
                self.watch = WatchState::Live;
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
                        .any(|c| c.is_transition() || self.tasks.contains_key(&c.task_id));
                if self.want.old.is_none() {
                    self.want.old = Some(Arc::clone(&self.tasks));
                }
                self.want.changes.extend(list);
                if affects {
                    self.want_window(Aim::Here, Order::Held, Asker::Changes);
                }
            }
            FeedEvent::Unavailable(Unavailable::Missing) => {
                // Nothing is known about any task any more; a read under
                // way reads a store that is gone.
                self.generation += 1;
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
                self.prune_marks();
                self.check_form(None);
            }
            FeedEvent::Unavailable(u) => self.watch = WatchState::unavailable(&u),
        }
        // The store changed (or is gone): count again.
        self.want.stalled = true;
        self.ask();
    }

    /// Take in what a read found ([`crate::reads`]): the rows, unless the
    /// person has asked for another view or place since it was asked; the
    /// transitions it was asked to log (always, so the log misses none);
    /// the stalled count; the open form's task. Then ask for what was
    /// wanted meanwhile.
    pub fn on_read(&mut self, answer: ReadAnswer) {
        if let Reads::Background {
            reading,
            for_person,
            ..
        } = &mut self.reads
        {
            *reading = None;
            *for_person = false;
            self.slow_read = None;
        }
        let ReadAnswer {
            generation,
            window,
            changes,
            old,
            labels,
            outside,
            stalled,
            selected,
            reset,
        } = answer;
        // The tasks as the read found them, for the log, the alerts and
        // the form, whether or not its rows are shown.
        let mut fetched: Option<Arc<TaskMap>> = None;
        match window {
            Some(Ok((mut w, anchor, order))) => {
                if generation != self.generation && reset {
                    // Stale (the person asked for another view, or the
                    // store went missing since): the next read says it.
                    self.want.reset = true;
                } else if reset || self.watch == WatchState::Starting {
                    self.watch = WatchState::Live;
                }
                if generation == self.generation {
                    if selected != self.selected {
                        // Moved while the read was under way: the window
                        // follows the selection as it is now.
                        let anchors = self.anchors();
                        w.anchor = anchors
                            .iter()
                            .find_map(|id| w.rows.iter().position(|t| &t.task_id == id))
                            .or(w.anchor);
                    }
                    self.take_window(w, &anchor, order, &outside);
                    fetched = Some(Arc::clone(&self.tasks));
                } else {
                    fetched = Some(Arc::new(
                        w.rows.into_iter().map(|t| (t.task_id.clone(), t)).collect(),
                    ));
                }
            }
            Some(Err(u)) => self.watch = WatchState::unavailable(&u),
            None => {}
        }
        let new = fetched.unwrap_or_else(|| Arc::clone(&self.tasks));
        if !changes.is_empty() {
            self.record_changes(&changes, &old, &new, &labels);
            self.alerts.see(&changes, &new);
        }
        if let Some((_, Ok(n))) = stalled {
            self.stalled = n;
        }
        self.prune_marks();
        let form = match &self.popup {
            Popup::Form(form) => Some(form.task_id.clone()),
            _ => None,
        };
        if let Some(id) = form {
            let found = new.get(&id).or_else(|| outside.get(&id)).cloned();
            self.check_form(found.as_ref());
        }
        if matches!(self.reads, Reads::Background { .. }) {
            self.ask();
        }
    }

    /// Log the transitions of `list` and flash the rows with news; `old`
    /// is the window before the changes, `new` the tasks read after them,
    /// `labels` those of changed tasks in neither.
    fn record_changes(
        &mut self,
        list: &[TaskChange],
        old: &TaskMap,
        new: &TaskMap,
        labels: &HashMap<String, String>,
    ) {
        let until = self.now + FLASH;
        for c in list {
            let before = old.get(&c.task_id);
            let new = new.get(&c.task_id);
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
            let label = new
                .or(before)
                .and_then(|t| t.label())
                .or_else(|| labels.get(&c.task_id).map(String::as_str));
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
                label: crate::shown::shown(label.unwrap_or("")),
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
    fn refetch(&mut self, aim: Aim) {
        self.want_window(aim, Order::Fresh, Asker::Person);
    }

    /// Want the window fetched again at `aim`: what the person asks for
    /// replaces what was wanted before (and makes a read under way for
    /// another view or place stale); anything else adds to it.
    fn want_window(&mut self, aim: Aim, order: Order, asker: Asker) {
        let wanted = WindowWant {
            aim,
            order,
            changes_only: asker == Asker::Changes,
            for_person: matches!(asker, Asker::Person | Asker::First),
        };
        match (&mut self.want.window, asker) {
            (_, Asker::Person) => {
                self.generation += 1;
                self.want.window = Some(wanted);
            }
            (Some(w), _) => {
                w.changes_only &= wanted.changes_only;
                w.for_person |= wanted.for_person;
            }
            (None, _) => self.want.window = Some(wanted),
        }
        self.ask();
    }

    /// Ask for what is wanted: at once on this thread ([`Reads::Inline`]),
    /// or of the reader when no read is under way (one at a time: what is
    /// wanted meanwhile is asked when the answer comes, from the state
    /// then).
    fn ask(&mut self) {
        let Some(source) = self.source.clone() else {
            // Nothing to read from: the changes are logged as they are.
            if let Some(mut request) = self.request() {
                request.window = None;
                request.stalled_at = None;
                self.on_read(crate::reads::answer(&crate::reads::NoStore, &request));
            }
            self.stalled = 0;
            return;
        };
        if let Reads::Background {
            reading: Some(_), ..
        } = &self.reads
        {
            return;
        }
        let person = self.want.window.as_ref().is_some_and(|w| w.for_person);
        let Some(request) = self.request() else {
            return;
        };
        match &mut self.reads {
            Reads::Inline => {
                let answer = crate::reads::answer(&*source, &request);
                self.on_read(answer);
            }
            Reads::Background {
                ask,
                reading,
                for_person,
            } => {
                if ask.send(request).is_ok() {
                    *reading = Some(std::time::Instant::now());
                    *for_person = person;
                } else {
                    self.watch = WatchState::Unreadable(
                        "the TUI's reader stopped: the rows are no longer read".into(),
                    );
                }
            }
        }
    }

    /// The read for what is wanted, built from the state as it is now;
    /// `None` when nothing is wanted.
    fn request(&mut self) -> Option<ReadRequest> {
        let want = std::mem::take(&mut self.want);
        let form = match &self.popup {
            Popup::Form(form) => Some(form.task_id.clone()),
            _ => None,
        };
        if want.window.is_none() && want.changes.is_empty() && !want.stalled && form.is_none() {
            return None;
        }
        // At least two pages each side, so that a page key never leaves it.
        let side = self.window_side.max(2 * self.page.max(1));
        let window = want.window.map(|w| {
            let anchor = match w.aim {
                Aim::Here => Anchor::Tasks(self.anchors()),
                Aim::Selected => Anchor::Tasks(self.selected.iter().cloned().collect()),
                Aim::Start => Anchor::Start,
                Aim::End => Anchor::End,
            };
            // Only changes moved it, under a text filter: they are taken
            // into the rows held, without a page query.
            let held = (w.changes_only
                && w.aim == Aim::Here
                && !self.filter.text.is_empty()
                && !want.changes.is_empty())
            .then(|| Held {
                changed: want.changes.clone(),
                rows: Arc::clone(&self.tasks),
                at_start: self.at_start,
                at_end: self.at_end,
                selected: self.selected.clone(),
                counts: self.counts,
            });
            WindowAsk {
                view: self.view(),
                anchor,
                order: w.order,
                side,
                held,
            }
        });
        // Marks follow their tasks outside the window too.
        let mut extra: Vec<String> = match window {
            Some(_) => self.marks.ids().cloned().collect(),
            None => Vec::new(),
        };
        extra.extend(form);
        let stalled_at = want.stalled.then(|| {
            self.stalled_at = Some(self.now);
            self.now
        });
        Some(ReadRequest {
            generation: self.generation,
            window,
            old: want.old.unwrap_or_else(|| Arc::clone(&self.tasks)),
            changes: want.changes,
            extra,
            stalled_at,
            selected: self.selected.clone(),
            reset: want.reset,
        })
    }

    /// Show the window `w` fetched at `anchor`, keeping the selected row on
    /// the same line of the screen.
    fn take_window(&mut self, w: window::Window, anchor: &Anchor, order: Order, outside: &TaskMap) {
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
            .filter_map(|id| outside.get(id))
            .map(|t| (t.task_id.clone(), t.clone()))
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
    /// `found` is its task as the last read found it (`None`: gone).
    fn check_form(&mut self, found: Option<&Task>) {
        let Popup::Form(form) = &mut self.popup else {
            return;
        };
        form.moved_on = match found {
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
    /// lapses without any write to the store, so no change tells of it);
    /// say how long a read has been under way once that is long.
    pub fn tick(&mut self, now: DateTime<Utc>) {
        self.now = now;
        self.flashes.retain(|_, until| *until > now);
        if let Reads::Background {
            reading: Some(at), ..
        } = &self.reads
        {
            self.slow_read = Some(at.elapsed()).filter(|d| *d >= SLOW_READ);
        }
        if self
            .stalled_at
            .is_none_or(|at| now < at || now - at >= TimeDelta::seconds(1))
        {
            // One count query; a store that cannot answer keeps the last
            // count, and the next fetch says why.
            self.want.stalled = true;
            self.ask();
        }
    }

    /// Read the store on a thread of its own from now on ([`crate::reads::Reader`]):
    /// the loop hands each answer to [`App::on_read`].
    pub fn read_with(&mut self, ask: std::sync::mpsc::Sender<ReadRequest>) {
        self.reads = Reads::Background {
            ask,
            reading: None,
            for_person: false,
        };
    }

    /// Whether rows the person asked for (a filter, a sort, `g`/`G`, the
    /// first rows) are being read: keys and clicks then wait for them
    /// ([`App::hold`]), so that a key acts on the rows the keys before it
    /// asked for (`/INC-10` Enter `c` cancels INC-10, not the task
    /// selected before the filter).
    pub fn awaits_rows(&self) -> bool {
        self.want.window.as_ref().is_some_and(|w| w.for_person)
            || matches!(
                self.reads,
                Reads::Background {
                    for_person: true,
                    ..
                }
            )
    }

    /// Hold `event` until the rows the person asked for are shown, when it
    /// must wait for them (see [`App::awaits_rows`]); `false` when it is
    /// to be taken now. Quitting never waits.
    pub fn hold(&mut self, event: &crossterm::event::Event) -> bool {
        use crossterm::event::Event;
        let waits = self.awaits_rows() || !self.held.is_empty();
        if !waits || !matches!(event, Event::Key(_) | Event::Mouse(_)) || self.quits(event) {
            return false;
        }
        if self.held.len() >= HELD_EVENTS {
            self.say(
                Tone::Warning,
                "keys typed while waiting for the store were dropped: too many",
            );
        } else {
            self.held.push_back(event.clone());
        }
        true
    }

    /// The next key or click held, once the rows it waited for are shown.
    pub fn next_held(&mut self) -> Option<crossterm::event::Event> {
        if self.awaits_rows() {
            return None;
        }
        self.held.pop_front()
    }

    /// Whether `event` quits the TUI (Ctrl-C, or the quit key on the
    /// table with nothing open).
    fn quits(&self, event: &crossterm::event::Event) -> bool {
        use crossterm::event::{Event, KeyCode, KeyModifiers};
        let Event::Key(key) = event else {
            return false;
        };
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return true;
        }
        matches!(self.popup, Popup::None)
            && self.filter.editing.is_none()
            && self.keys.action(
                crate::keys::Scope::List,
                self.worker.is_some(),
                crate::keys::Key::of(*key),
            ) == Some(crate::keys::Action::Quit)
    }

    /// Whether a read is under way (asked of the reader, not yet answered).
    pub fn reading(&self) -> bool {
        matches!(
            self.reads,
            Reads::Background {
                reading: Some(_),
                ..
            }
        )
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
        self.refetch(Aim::Here);
    }

    /// Move the cursor to `row` (clamped) and select its task.
    pub fn select_row(&mut self, row: usize) {
        // The top and the bottom of the table may be outside the window.
        if row == usize::MAX && !self.at_end {
            return self.refetch(Aim::End);
        }
        if row == 0 && !self.at_start {
            return self.refetch(Aim::Start);
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
            self.want_window(Aim::Selected, Order::Held, Asker::Scroll);
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
    use rudder_store::query::{PageQuery, StatusCounts};
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

    /// An app whose reads go to a reader the test plays: each request
    /// waits in the receiver until the test answers it ([`answer_next`]).
    fn reading_app(source: &Arc<Counted>) -> (App, std::sync::mpsc::Receiver<ReadRequest>) {
        let mut app = App::new(std::path::Path::new("/tmp/t.json"), false, base())
            .with_source(Arc::clone(source) as Arc<dyn RowSource>);
        let (ask, asked) = std::sync::mpsc::channel();
        app.read_with(ask);
        (app, asked)
    }

    /// Answer the read under way from `source`, as the reader thread does.
    fn answer_next(
        app: &mut App,
        source: &Counted,
        asked: &std::sync::mpsc::Receiver<ReadRequest>,
    ) {
        let request = asked.try_recv().expect("a read was asked");
        app.on_read(crate::reads::answer(source, &request));
    }

    /// Answer reads until none is asked.
    fn settle(app: &mut App, source: &Counted, asked: &std::sync::mpsc::Receiver<ReadRequest>) {
        while let Ok(request) = asked.try_recv() {
            app.on_read(crate::reads::answer(source, &request));
        }
    }

    fn source_of(n: usize) -> Arc<Counted> {
        let source = Arc::new(Counted::default());
        *source.tasks.write().expect("lock") =
            (0..n).map(|i| (format!("t{i:04}"), task(i))).collect();
        source
    }

    fn start() -> StoreUpdate {
        StoreUpdate::Feed(FeedEvent::Reset(rudder_store::watch::ResetReason::Start))
    }

    /// Change `id` in `source` to `status` and say so as the feed would.
    fn change(source: &Counted, id: &str, status: Option<Status>) -> StoreUpdate {
        let mut tasks = source.tasks.write().expect("lock");
        let before = tasks.get(id).cloned();
        let revision = before.as_ref().map_or(1, |t| t.revision + 1);
        match status {
            Some(s) => {
                let mut t = before.clone().unwrap_or_else(|| {
                    let mut t = task(1);
                    t.task_id = id.to_string();
                    t.title = Some(format!("new {id}"));
                    t
                });
                t.status = s;
                t.revision = revision;
                tasks.insert(id.to_string(), t);
            }
            None => {
                tasks.shift_remove(id);
            }
        }
        StoreUpdate::Feed(FeedEvent::Changes(vec![TaskChange {
            task_id: id.to_string(),
            revision,
            from: before.map(|t| t.status),
            to: status,
            at: None,
        }]))
    }

    /// Issue 31: the TUI never blocks on the store. A read under way
    /// holds the next one back (one at a time, whatever the feed says
    /// meanwhile); the screen is live only once the rows are read; the
    /// changes that came meanwhile are asked in one read when the answer
    /// comes, and every transition is logged.
    #[test]
    fn a_read_under_way_holds_the_next_back_and_the_log_misses_no_transition() {
        let source = source_of(30);
        let (mut app, asked) = reading_app(&source);
        app.on_feed(start());
        assert!(app.reading());
        assert_eq!(
            app.watch,
            WatchState::Starting,
            "live once the rows are read"
        );
        assert!(app.rows.is_empty());
        app.on_feed(change(&source, "t0003", Some(Status::Failed)));
        app.on_feed(change(&source, "t0030", Some(Status::Working)));
        app.tick(base());
        answer_next(&mut app, &source, &asked);
        assert_eq!(app.watch, WatchState::Live);
        assert!(!app.rows.is_empty());
        // What was wanted meanwhile, in one read.
        let request = asked.try_recv().expect("the changes asked in one read");
        assert!(asked.try_recv().is_err(), "one read at a time");
        assert_eq!(request.changes.len(), 2);
        assert!(request.stalled_at.is_some());
        app.on_read(crate::reads::answer(&*source, &request));
        assert!(!app.reading());
        let logged: Vec<_> = app.log.iter().map(|e| (e.task_id.as_str(), e.to)).collect();
        assert_eq!(
            logged,
            [
                ("t0030", Some(Status::Working)),
                ("t0003", Some(Status::Failed))
            ]
        );
        assert_eq!(app.log[0].label, "new t0030");
        assert!(app.flashing("t0003"));
        assert_eq!(app.store_len(), 31);
    }

    /// Rows read for a view the person has left since are not shown (the
    /// view they asked for is read next), but the transitions that read
    /// was asked to log are logged.
    #[test]
    fn rows_read_for_a_view_the_person_left_are_dropped_and_their_changes_logged() {
        let source = source_of(30);
        let (mut app, asked) = reading_app(&source);
        app.on_feed(start());
        settle(&mut app, &source, &asked);
        assert_eq!(app.rows.len(), 30);
        app.on_feed(change(&source, "t0030", Some(Status::InputRequired)));
        let under_way = asked.try_recv().expect("the change's read");
        assert_eq!(under_way.changes.len(), 1);
        // While that read is under way, the person filters.
        app.filter.text = "incident 3".into();
        app.rebuild();
        assert!(asked.try_recv().is_err(), "one read at a time");
        let stale = crate::reads::answer(&*source, &under_way);
        app.on_read(stale);
        assert_eq!(app.rows.len(), 30, "the old view's rows are not shown");
        assert_eq!(app.log[0].task_id, "t0030", "its change is logged");
        // The filtered view is read next.
        answer_next(&mut app, &source, &asked);
        assert!(app.rows.len() < 30);
        assert!(
            (0..app.rows.len())
                .filter_map(|r| app.row_task(r))
                .all(|t| t.title.as_deref() == Some("incident 3")),
        );
    }

    /// The person moves while a read is under way: its rows arrive and the
    /// selection stays on the task they moved to.
    #[test]
    fn the_selection_stays_where_the_person_moved_while_a_read_was_under_way() {
        let source = source_of(30);
        let (mut app, asked) = reading_app(&source);
        app.page = 5;
        app.on_feed(start());
        settle(&mut app, &source, &asked);
        app.select_row(5);
        app.on_feed(change(&source, "t0029", Some(Status::Cancelled)));
        app.select_row(8);
        let moved_to = app.selected.clone().expect("a selection");
        answer_next(&mut app, &source, &asked);
        assert_eq!(app.selected.as_deref(), Some(moved_to.as_str()));
        assert_eq!(
            app.row_task(app.cursor).map(|t| t.task_id.clone()),
            Some(moved_to)
        );
    }

    /// A read that does not come back in time is said in the header's
    /// state, and the keys keep working meanwhile.
    #[test]
    fn a_read_that_never_comes_back_leaves_the_keys_working() {
        let source = source_of(30);
        let (mut app, asked) = reading_app(&source);
        app.on_feed(start());
        settle(&mut app, &source, &asked);
        app.on_feed(change(&source, "t0001", Some(Status::Cancelled)));
        let _never = asked.try_recv().expect("a read under way");
        let before = app.cursor;
        app.select_row(before + 3);
        assert_eq!(app.cursor, before + 3);
        app.filter.text = "incident 2".into();
        app.rebuild();
        app.tick(base() + TimeDelta::seconds(5));
        assert!(
            asked.try_recv().is_err(),
            "nothing more is asked until it answers"
        );
        assert!(app.reading());
    }

    /// Keys typed while rows the person asked for are read wait for them
    /// and are then taken in order (`/INC-10` Enter `c` cancels what the
    /// filter shows); quitting never waits; keys typed while only the
    /// feed's rows are read are taken at once.
    #[test]
    fn keys_wait_for_the_rows_the_person_asked_for() {
        use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
        let key = |c: char| Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        let source = source_of(30);
        let (mut app, asked) = reading_app(&source);
        app.on_feed(start());
        assert!(app.awaits_rows(), "the first rows");
        assert!(app.hold(&key('c')));
        settle(&mut app, &source, &asked);
        assert!(!app.awaits_rows());
        assert_eq!(app.next_held(), Some(key('c')));
        assert_eq!(app.next_held(), None);
        // The feed's rows: keys are taken at once.
        app.on_feed(change(&source, "t0002", Some(Status::Cancelled)));
        assert!(app.reading() && !app.awaits_rows());
        assert!(!app.hold(&key('j')));
        settle(&mut app, &source, &asked);
        // A filter: the next keys wait, in order, for its rows; q does not.
        app.filter.text = "incident 4".into();
        app.rebuild();
        assert!(app.hold(&key('c')));
        assert!(app.hold(&key('v')));
        assert!(!app.hold(&key('q')), "quitting never waits");
        assert!(!app.hold(&Event::FocusGained));
        assert_eq!(app.next_held(), None, "not before the rows");
        settle(&mut app, &source, &asked);
        assert!(
            app.row_task(app.cursor)
                .is_some_and(|t| t.title.as_deref() == Some("incident 4"))
        );
        assert_eq!(app.next_held(), Some(key('c')));
        assert_eq!(app.next_held(), Some(key('v')));
        assert_eq!(app.next_held(), None);
    }

    /// A store that went missing while its rows were read stays missing:
    /// the rows read before are not shown, and the screen is not live.
    #[test]
    fn rows_read_before_the_store_went_missing_are_not_shown() {
        let source = source_of(30);
        let (mut app, asked) = reading_app(&source);
        app.on_feed(start());
        let first = asked.try_recv().expect("the first read");
        app.on_feed(StoreUpdate::Feed(FeedEvent::Unavailable(
            Unavailable::Missing,
        )));
        app.on_read(crate::reads::answer(&*source, &first));
        settle(&mut app, &source, &asked);
        assert_eq!(app.watch, WatchState::Missing);
        assert!(app.rows.is_empty());
        // It comes back: the feed says so, and the rows are read.
        app.on_feed(start());
        settle(&mut app, &source, &asked);
        assert_eq!(app.watch, WatchState::Live);
        assert_eq!(app.rows.len(), 30);
    }
}
