//! The TUI's state, apart from any terminal: what is shown, what is selected,
//! which dialog is open. [`crate::tui::update`] changes it; [`crate::tui::view`]
//! draws it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use ratatui::layout::Rect;
use tui_input::Input;

use crate::store::ReclaimReport;
use crate::task::{Status, Task, TaskMap};
use crate::tui::WorkerState;
use crate::tui::diff::Diff;
use crate::tui::form::Form;
use crate::tui::keys::KeyMap;
use crate::tui::marks::Marks;
use crate::tui::shown::ShownCache;
use crate::tui::task_view::TaskView;
use crate::tui::window::{self, Anchor, RowSource, View};
use crate::watch::{FeedEvent, TaskChange, Unavailable};

/// How long a changed row stays highlighted.
pub const FLASH: TimeDelta = TimeDelta::seconds(2);
/// How many transitions the log keeps.
pub const LOG_CAPACITY: usize = 500;
/// How many rows a windowed app fetches on each side of the selection.
pub const WINDOW_SIDE: usize = 200;
/// How many tasks outside the window one batch of changes looks up for
/// the log's labels (the rest are logged by id alone).
const LABEL_LOOKUPS: usize = 50;
/// How many changes are held back while paused before they are replaced
/// by one re-read.
const PENDING_CAPACITY: usize = 10_000;
/// The reclaim age offered by default.
pub const DEFAULT_RECLAIM_AGE: &str = "15m";

/// What the TUI learns about the store: the tasks as they now are, or
/// why they cannot be read.
#[derive(Debug, Clone)]
pub enum StoreUpdate {
    /// The tasks as they now are, and what changed since the previous
    /// snapshot.
    Snapshot {
        /// Every task.
        tasks: Arc<TaskMap>,
        /// What changed.
        diff: Diff,
    },
    /// The store does not exist (yet, or any more).
    Missing,
    /// The store cannot be read; the last good tasks stay shown.
    Unreadable {
        /// Why.
        message: String,
    },
    /// What the change feed said, for an app that fetches its rows a
    /// window at a time ([`App::with_source`]).
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
    /// capped, [`crate::tui::shown::shown`]).
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
    /// The key overview.
    Help,
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
    /// Refuse every write with a message (`--read-only`).
    pub read_only: bool,
    /// The clock the screen is drawn at; set by the loop, fixed in tests.
    pub now: DateTime<Utc>,
    /// The tasks shown (the last good snapshot, or the one paused on).
    pub tasks: Arc<TaskMap>,
    /// What the feed last said about the file.
    pub watch: WatchState,
    /// Live updates are held back (`p`).
    pub paused: bool,
    /// The newest snapshot held back while paused, with the diffs of every
    /// snapshot held back merged into one, so the log misses no transition.
    pending_snapshot: Option<(Arc<TaskMap>, Diff)>,
    /// A missing or unreadable file reported after the newest held-back
    /// snapshot: applied after it on resume.
    pending_state: Option<StoreUpdate>,
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
    /// time (a database); `None`: `tasks` holds the whole store.
    source: Option<Arc<dyn RowSource>>,
    /// Rows fetched on each side of the selection (windowed; at least two
    /// pages).
    pub window_side: usize,
    /// The window holds the first row of the table (windowed).
    at_start: bool,
    /// The window holds the last row of the table (windowed).
    at_end: bool,
    /// Tasks in the store (windowed: from the counts).
    total: usize,
    /// Feed events held back while paused (windowed).
    pending_feed: Vec<FeedEvent>,
    /// Marked tasks outside the window, as last fetched (windowed).
    pub(crate) marked_outside: TaskMap,
    /// The keys in force (the key table with the user's rebindings).
    pub keys: KeyMap,
    /// The marked tasks (Space, `*`), by id.
    pub marks: Marks,
    /// Working tasks whose lease lapsed, at `now` ([`crate::task::Task::stalled`]).
    pub stalled: usize,
    /// What was wrong with the config file, shown at start and in the help.
    pub config_problems: Vec<String>,
}

impl App {
    /// A fresh state for the store at `store` (a store URL or path; shown
    /// as its location, passwords redacted).
    pub fn new(store: &std::path::Path, read_only: bool, now: DateTime<Utc>) -> App {
        let (label, file) = match crate::store::StoreUrl::parse(store) {
            Ok(url) => (url.to_string(), url.path().to_path_buf()),
            Err(e) => (e.to_string(), store.to_path_buf()),
        };
        App {
            store_label: crate::text::sanitize(&label).into_owned(),
            store_name: file
                .file_name()
                .map(|n| crate::text::sanitize(&n.to_string_lossy()).into_owned())
                .unwrap_or_else(|| "the store".into()),
            read_only,
            now,
            tasks: Arc::new(TaskMap::new()),
            watch: WatchState::Starting,
            paused: false,
            pending_snapshot: None,
            pending_state: None,
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
            config_problems: Vec::new(),
        }
    }

    /// Fetch the rows from `source` a window around the selection at a
    /// time (with the counts and the selected task), instead of holding
    /// the whole store: the app then takes [`StoreUpdate::Feed`] events.
    pub fn with_source(mut self, source: Arc<dyn RowSource>) -> App {
        self.source = Some(source);
        self
    }

    /// Whether rows are fetched a window at a time.
    pub fn windowed(&self) -> bool {
        self.source.is_some()
    }

    /// How many rows the table has (the filters applied), if known: a
    /// windowed table with a text filter knows only the rows it fetched.
    pub fn table_len(&self) -> Option<usize> {
        if !self.windowed() || (self.at_start && self.at_end) {
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
        if self.windowed() {
            self.total
        } else {
            self.tasks.len()
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
    pub fn on_feed(&mut self, event: StoreUpdate) {
        if let StoreUpdate::Feed(event) = event {
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
                self.pending_feed = vec![FeedEvent::Reset(crate::watch::ResetReason::Overflow)];
            }
            return;
        }
        if self.paused {
            match event {
                StoreUpdate::Snapshot { tasks, diff } => {
                    self.pending_changes +=
                        diff.appeared.len() + diff.changed.len() + diff.vanished.len();
                    // A snapshot is newer than any missing/unreadable state
                    // before it.
                    self.pending_state = None;
                    self.pending_snapshot = Some(match self.pending_snapshot.take() {
                        // Diffs accumulate so the log misses no transition.
                        Some((_, mut old)) => {
                            old.transitions.extend(diff.transitions);
                            old.appeared.extend(diff.appeared);
                            old.changed.extend(diff.changed);
                            old.vanished.extend(diff.vanished);
                            (tasks, old)
                        }
                        None => (tasks, diff),
                    });
                }
                // Kept apart from the snapshot: a file that went missing or
                // unreadable must not drop the transitions seen before.
                state @ (StoreUpdate::Missing | StoreUpdate::Unreadable { .. }) => {
                    self.pending_state = Some(state)
                }
                StoreUpdate::Feed(_) => unreachable!("handled above"),
            }
            return;
        }
        self.apply_feed(event);
    }

    /// Pause or resume live updates; resuming applies what was held back.
    pub fn toggle_pause(&mut self) {
        if self.paused {
            self.paused = false;
            self.pending_changes = 0;
            // In the order they came: the snapshot (logging its
            // transitions), then the file's state after it.
            if let Some((tasks, diff)) = self.pending_snapshot.take() {
                self.apply_feed(StoreUpdate::Snapshot { tasks, diff });
            }
            if let Some(state) = self.pending_state.take() {
                self.apply_feed(state);
            }
            for event in std::mem::take(&mut self.pending_feed) {
                self.apply_events(event);
            }
            self.say(Tone::Info, "live updates resumed");
        } else {
            self.paused = true;
            let key = self.keys.first(crate::tui::keys::Action::Pause);
            self.say(
                Tone::Info,
                format!("paused: press {key} to resume live updates"),
            );
        }
    }

    fn apply_feed(&mut self, event: StoreUpdate) {
        match event {
            StoreUpdate::Snapshot { tasks, diff } => {
                let first = self.watch == WatchState::Starting;
                for id in diff
                    .appeared
                    .iter()
                    .chain(&diff.changed)
                    .chain(&diff.vanished)
                {
                    self.shown.forget(id);
                }
                self.record(&diff, &tasks, first);
                self.tasks = tasks;
                self.watch = WatchState::Live;
            }
            StoreUpdate::Missing => {
                // The file is gone: nothing is known about any task any more.
                // The feed starts over from empty, so a re-created store shows
                // its tasks as appearing.
                self.tasks = Arc::new(TaskMap::new());
                self.shown.clear();
                self.watch = WatchState::Missing;
            }
            StoreUpdate::Unreadable { message } => {
                self.watch = WatchState::Unreadable(crate::text::sanitize(&message).into_owned());
            }
            StoreUpdate::Feed(event) => return self.apply_events(event),
        }
        self.rebuild();
        self.prune_marks();
        self.count_stalled();
        self.check_form();
    }

    /// Take in a feed event (windowed): fetch the window again when the
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
                self.watch = WatchState::Missing;
                self.reselect();
            }
            FeedEvent::Unavailable(Unavailable::Unreadable { message }) => {
                self.watch = WatchState::Unreadable(crate::text::sanitize(&message).into_owned());
            }
        }
        self.prune_marks();
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
                label: crate::tui::shown::shown(label.as_deref().unwrap_or("")),
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

    /// Fetch the window again (windowed), keeping the selected row on the
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
                self.watch =
                    WatchState::Unreadable(crate::text::sanitize(&e.to_string()).into_owned());
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

    /// Log transitions and flash changed rows. The first snapshot is the
    /// starting point, not news: nothing is logged or flashed for it.
    fn record(&mut self, diff: &Diff, tasks: &TaskMap, first: bool) {
        if first {
            return;
        }
        let until = self.now + FLASH;
        // A flash means news: a new task, a transition, a new title or
        // message. A heartbeat alone changes none of these.
        let news = |id: &&String| match (self.tasks.get(*id), tasks.get(*id)) {
            (Some(old), Some(new)) => {
                old.status != new.status
                    || old.title != new.title
                    || old.status_message != new.status_message
            }
            _ => true,
        };
        for id in diff.appeared.iter().chain(diff.changed.iter().filter(news)) {
            self.flashes.insert(id.clone(), until);
        }
        let label = |id: &str, old: &TaskMap| {
            let t = tasks.get(id).or_else(|| old.get(id));
            crate::tui::shown::shown(t.and_then(Task::label).unwrap_or(""))
        };
        for t in &diff.transitions {
            self.log.push_front(LogEntry {
                at: t.at,
                task_id: t.task_id.clone(),
                label: label(&t.task_id, &self.tasks),
                from: t.from,
                to: Some(t.to),
            });
        }
        for id in &diff.vanished {
            self.log.push_front(LogEntry {
                at: self.now,
                task_id: id.clone(),
                label: label(id, &self.tasks),
                from: self.tasks.get(id).map(|t| t.status),
                to: None,
            });
        }
        self.log.truncate(LOG_CAPACITY);
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

    /// Advance the clock and drop expired flashes.
    pub fn tick(&mut self, now: DateTime<Utc>) {
        self.now = now;
        self.flashes.retain(|_, until| *until > now);
        self.count_stalled();
    }

    /// Whether `task_id` is flashing.
    pub fn flashing(&self, task_id: &str) -> bool {
        self.flashes
            .get(task_id)
            .is_some_and(|until| *until > self.now)
    }

    /// Recompute the rows (filter, sort) and the counts, keeping the
    /// selection on the same task id. Called only when the snapshot, the
    /// filter or the sort changed, never per frame.
    pub fn rebuild(&mut self) {
        if self.windowed() {
            return self.refetch(Anchor::Tasks(self.anchors()));
        }
        let mut counts = [0; 5];
        for t in self.tasks.values() {
            counts[status_index(t.status)] += 1;
        }
        self.counts = counts;
        let any_status = self.filter.statuses.iter().any(|s| *s);
        let needle = self.filter.text.as_str();
        let mut rows: Vec<usize> = self
            .tasks
            .values()
            .enumerate()
            .filter(|(_, t)| !any_status || self.filter.statuses[status_index(t.status)])
            .filter(|(_, t)| needle.is_empty() || matches_text(t, needle))
            .map(|(i, _)| i)
            .collect();
        let tasks = &self.tasks;
        // Ties are broken by file position so that equal rows never swap
        // places between rebuilds (which would make the screen jitter).
        match self.sort {
            SortKey::Updated | SortKey::Created => {
                // Sorting plain integer keys is several times faster than
                // comparing tasks, which matters at 100k tasks.
                let updated = self.sort == SortKey::Updated;
                let mut keyed: Vec<(u8, i64, usize)> = rows
                    .iter()
                    .map(|&i| {
                        let t = &tasks[i];
                        let at = if updated { t.updated_at } else { t.created_at };
                        // Newest first; tasks without a time last.
                        let key = at.map_or(i64::MAX, |d| d.timestamp_micros().saturating_neg());
                        (rank(t.status), key, i)
                    })
                    .collect();
                keyed.sort_unstable();
                rows = keyed.into_iter().map(|(_, _, i)| i).collect();
            }
            SortKey::Title => rows.sort_unstable_by(|&a, &b| {
                let (ta, tb) = (&tasks[a], &tasks[b]);
                rank(ta.status)
                    .cmp(&rank(tb.status))
                    .then_with(|| {
                        ta.label()
                            .unwrap_or("\u{10FFFF}")
                            .cmp(tb.label().unwrap_or("\u{10FFFF}"))
                    })
                    .then(a.cmp(&b))
            }),
            SortKey::Id => rows.sort_unstable_by(|&a, &b| {
                let (ta, tb) = (&tasks[a], &tasks[b]);
                rank(ta.status)
                    .cmp(&rank(tb.status))
                    .then_with(|| ta.task_id.cmp(&tb.task_id))
            }),
        }
        self.rows = rows;
        self.reselect();
    }

    /// Put the cursor back on the selected id, or on the nearest row when
    /// that task is gone or filtered out.
    fn reselect(&mut self) {
        if self.windowed() && self.rows.is_empty() {
            self.cursor = 0;
            self.offset = 0;
            self.selected = None;
            return;
        }
        let found = self.selected.as_deref().and_then(|id| {
            let pos = self.tasks.get_index_of(id)?;
            self.rows.iter().position(|&r| r == pos)
        });
        match found {
            Some(row) => self.cursor = row,
            None => {
                self.cursor = self.cursor.min(self.rows.len().saturating_sub(1));
                self.selected = self.row_task(self.cursor).map(|t| t.task_id.clone());
                self.detail_scroll = 0;
            }
        }
        self.scroll_to_cursor();
    }

    /// Move the cursor to `row` (clamped) and select its task.
    pub fn select_row(&mut self, row: usize) {
        if self.windowed() {
            // The top and the bottom of the table may be outside the window.
            if row == usize::MAX && !self.at_end {
                return self.refetch(Anchor::End);
            }
            if row == 0 && !self.at_start {
                return self.refetch(Anchor::Start);
            }
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
        if self.windowed() && (near_top || near_bottom) {
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

/// Waiting tasks first, then running ones, then finished ones.
fn rank(status: Status) -> u8 {
    match status {
        Status::InputRequired => 0,
        Status::Working => 1,
        _ => 2,
    }
}

/// Case-insensitive match of the (lower-case) `needle` on what the table shows.
fn matches_text(task: &Task, needle: &str) -> bool {
    let hit = |s: &str| {
        if s.is_ascii() {
            s.as_bytes()
                .windows(needle.len().max(1))
                .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
                || needle.is_empty()
        } else {
            s.to_lowercase().contains(needle)
        }
    };
    hit(&task.task_id)
        || task.title.as_deref().is_some_and(hit)
        || task.idempotency_key.as_deref().is_some_and(hit)
        || task.status_message.as_deref().is_some_and(hit)
        || hit(task.status.as_str())
}
