//! The TUI's reads of the store, apart from its loop (gitui's pattern): the
//! app asks for a read ([`ReadRequest`]), a reader answers it ([`answer`])
//! on a thread of its own ([`Reader`]), and the loop hands the answer back
//! to the app (`App::on_read`). A slow or stopped database then delays the
//! rows, never the keys or the screen.
//!
//! Nothing here knows the app: a request carries what the read needs (the
//! view, the anchor, the window as it was for the changes it takes in),
//! and the answer what was read, or why it could not be.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::window::{self, Anchor, Order, RowSource, View, Window};
use rudder_model::task::{Status, Task, TaskMap};
use rudder_store::StoreError;
use rudder_store::query::StatusCounts;
use rudder_store::watch::{TaskChange, Unavailable};

/// How many tasks outside the window one read looks up for the log's
/// labels (the rest are logged by id alone).
pub const LABEL_LOOKUPS: usize = 50;

/// One read the app asks of the store.
#[derive(Debug, Clone)]
pub struct ReadRequest {
    /// The place the person last asked for when this was asked: an answer
    /// for an older one ([`ReadAnswer::generation`]) has stale rows.
    pub generation: u64,
    /// The rows to fetch, if any.
    pub window: Option<WindowAsk>,
    /// Changes the feed reported since the last read, to log: their tasks
    /// outside the window are looked up for a label.
    pub changes: Vec<TaskChange>,
    /// The window as it was when the first of `changes` came.
    pub old: Arc<TaskMap>,
    /// Tasks to read when the window does not hold them (the marked ones,
    /// the open form's).
    pub extra: Vec<String>,
    /// Count the stalled tasks of the whole store at this time.
    pub stalled_at: Option<DateTime<Utc>>,
    /// The selection when this was asked.
    pub selected: Option<String>,
    /// The feed re-read the store: the rows read make the screen live.
    pub reset: bool,
}

/// The rows a read fetches.
#[derive(Debug, Clone)]
pub struct WindowAsk {
    /// The filters and the order.
    pub view: View,
    /// Where the window is anchored.
    pub anchor: Anchor,
    /// Whether the rows shown keep their order.
    pub order: Order,
    /// Rows on each side of the anchor.
    pub side: usize,
    /// With a text filter: the window to take the changes into without a
    /// page query ([`held_window`]), when that can be done.
    pub held: Option<Held>,
}

/// A text-filtered window the feed's changes are taken into.
#[derive(Debug, Clone)]
pub struct Held {
    /// The changed tasks.
    pub changed: Vec<TaskChange>,
    /// The window's rows, in the table's order.
    pub rows: Arc<TaskMap>,
    /// The window holds the first row of the table.
    pub at_start: bool,
    /// The window holds the last row of the table.
    pub at_end: bool,
    /// The selection.
    pub selected: Option<String>,
    /// The counts shown, per status in [`Status::ALL`] order.
    pub counts: [usize; 5],
}

/// What a read found.
#[derive(Debug, Clone)]
pub struct ReadAnswer {
    /// The request's [`ReadRequest::generation`].
    pub generation: u64,
    /// The rows, with the anchor and order asked; `None` when none were
    /// asked for.
    pub window: Option<Result<(Window, Anchor, Order), Unavailable>>,
    /// The request's changes, to log.
    pub changes: Vec<TaskChange>,
    /// The request's window before the changes.
    pub old: Arc<TaskMap>,
    /// Labels of changed tasks in neither window, by id.
    pub labels: HashMap<String, String>,
    /// The extra tasks the window does not hold, as read (a task gone is
    /// absent).
    pub outside: TaskMap,
    /// The stalled count at the time asked.
    pub stalled: Option<(DateTime<Utc>, Result<usize, Unavailable>)>,
    /// The request's selection.
    pub selected: Option<String>,
    /// The request's [`ReadRequest::reset`].
    pub reset: bool,
}

/// Answer `request` from `source` (on any thread: it blocks as long as the
/// store takes).
pub fn answer(source: &dyn RowSource, request: &ReadRequest) -> ReadAnswer {
    let window = request.window.as_ref().map(|ask| {
        rows(source, ask)
            .map(|w| (w, ask.anchor.clone(), ask.order))
            .map_err(|e| Unavailable::of(&e))
    });
    let fetched: Option<HashSet<&str>> = match &window {
        Some(Ok((w, ..))) => Some(w.rows.iter().map(|t| t.task_id.as_str()).collect()),
        _ => None,
    };
    let held = |id: &str| match &fetched {
        Some(rows) => rows.contains(id),
        None => request.old.contains_key(id),
    };
    // A task beside the window that cannot be read is left out, as one
    // that is gone: the window's own read says when the store is not
    // there.
    let mut outside = TaskMap::new();
    for id in &request.extra {
        if held(id) || outside.contains_key(id) {
            continue;
        }
        match source.task(id) {
            Ok(Some(t)) => {
                outside.insert(t.task_id.clone(), t);
            }
            Ok(None) => {}
            Err(_) => break,
        }
    }
    let mut labels = HashMap::new();
    let unlabelled = request
        .changes
        .iter()
        .filter(|c| c.is_transition() && !request.old.contains_key(&c.task_id) && !held(&c.task_id))
        .map(|c| c.task_id.as_str())
        .collect::<Vec<_>>();
    for id in unlabelled.into_iter().take(LABEL_LOOKUPS) {
        if labels.contains_key(id) {
            continue;
        }
        // A label is a nicety: a failed lookup logs the id alone.
        if let Ok(Some(t)) = source.task(id)
            && let Some(l) = t.label()
        {
            labels.insert(id.to_string(), l.to_string());
        }
    }
    let stalled = request
        .stalled_at
        .map(|at| (at, source.stalled(at).map_err(|e| Unavailable::of(&e))));
    ReadAnswer {
        generation: request.generation,
        window,
        changes: request.changes.clone(),
        old: Arc::clone(&request.old),
        labels,
        outside,
        stalled,
        selected: request.selected.clone(),
        reset: request.reset,
    }
}

/// What a read that panicked answers: the rows could not be read (the
/// panic itself is reported by the TUI's panic hook).
pub fn failed(request: &ReadRequest, why: String) -> ReadAnswer {
    let unavailable = Unavailable::Unreadable { message: why };
    ReadAnswer {
        generation: request.generation,
        window: request.window.as_ref().map(|_| Err(unavailable)),
        changes: request.changes.clone(),
        old: Arc::clone(&request.old),
        labels: HashMap::new(),
        outside: TaskMap::new(),
        stalled: None,
        selected: request.selected.clone(),
        reset: request.reset,
    }
}

/// No store: no rows, no tasks, nothing stalled.
pub struct NoStore;

impl RowSource for NoStore {
    fn page(&self, _: &rudder_store::query::PageQuery) -> Result<Vec<Task>, StoreError> {
        Ok(Vec::new())
    }
    fn counts(&self) -> Result<StatusCounts, StoreError> {
        Ok(StatusCounts::default())
    }
    fn task(&self, _: &str) -> Result<Option<Task>, StoreError> {
        Ok(None)
    }
    fn stalled(&self, _: DateTime<Utc>) -> Result<usize, StoreError> {
        Ok(0)
    }
}

/// The rows `ask` wants: the changes taken into a text-filtered window
/// when that can be done, else a window fetched.
fn rows(source: &dyn RowSource, ask: &WindowAsk) -> Result<Window, StoreError> {
    if let Some(held) = &ask.held
        && let Some(w) = held_window(source, ask, held)?
    {
        return Ok(w);
    }
    window::fetch(source, &ask.view, &ask.anchor, ask.side)
}

/// Take the changes of a text-filtered window in without asking the store
/// for its rows again: with a text filter a page query reads every task to
/// find the few that match, but the feed names the tasks that changed, and
/// the window is the slice of the table between its first and last rows.
/// So the rows that did not change stay, and each changed task is read by
/// its id and kept if the filter shows it inside that slice. `None` when
/// this cannot be done (an empty or overgrown window, no anchor left in
/// it, the selection moved out of it): then the window is fetched again.
fn held_window(
    source: &dyn RowSource,
    ask: &WindowAsk,
    held: &Held,
) -> Result<Option<Window>, StoreError> {
    let view = &ask.view;
    let old = &held.rows;
    if old.is_empty() && !(held.at_start && held.at_end) {
        return Ok(None);
    }
    // The old window held exactly the tasks between these two, in the
    // order as it was; a task outside them is outside the window.
    let first = (!held.at_start)
        .then(|| old.first().map(|(_, t)| t))
        .flatten();
    let last = (!held.at_end).then(|| old.last().map(|(_, t)| t)).flatten();
    let inside = |t: &Task| {
        first.is_none_or(|f| view.order(f, t).is_le())
            && last.is_none_or(|l| view.order(t, l).is_le())
    };
    let changed: HashSet<&str> = held.changed.iter().map(|c| c.task_id.as_str()).collect();
    let mut rows: Vec<Task> = old
        .values()
        .filter(|t| !changed.contains(t.task_id.as_str()))
        .cloned()
        .collect();
    for id in &changed {
        match source.task(id)? {
            Some(t) if view.shows(&t) && inside(&t) => rows.push(t),
            // The selection follows its task out of the window: a fetch
            // anchored at it.
            Some(t) if view.shows(&t) && held.selected.as_deref() == Some(id) => {
                return Ok(None);
            }
            _ => {}
        }
    }
    // Grown past a fetch's size: a fetch trims it around the selection.
    if rows.len() > 4 * ask.side + 2 {
        return Ok(None);
    }
    rows.sort_by(|a, b| view.order(a, b));
    let Anchor::Tasks(anchors) = &ask.anchor else {
        return Ok(None);
    };
    let Some(at) = anchors
        .iter()
        .find_map(|id| rows.iter().position(|t| &t.task_id == id))
    else {
        return Ok(None);
    };
    // The counts change only when a task appears, vanishes or changes
    // status.
    let counts = if held.changed.iter().any(|c| c.is_transition()) {
        source.counts()?
    } else {
        StatusCounts(
            Status::ALL
                .iter()
                .zip(held.counts)
                .filter(|(_, n)| *n > 0)
                .map(|(s, n)| (*s, n))
                .collect(),
        )
    };
    Ok(Some(Window {
        rows,
        anchor: Some(at),
        at_start: held.at_start,
        at_end: held.at_end,
        counts,
    }))
}

/// The reader thread: answers requests one at a time, in order, and hands
/// each answer to the loop. It holds the only reference to its requests'
/// channel, so it ends when the app is dropped.
pub struct Reader;

impl Reader {
    /// Start a reader over `source`: requests go in through the returned
    /// sender, answers come out of the receiver (an async one, for the
    /// loop's `select!`).
    pub fn spawn(
        source: Arc<dyn RowSource>,
    ) -> std::io::Result<(
        std::sync::mpsc::Sender<ReadRequest>,
        tokio::sync::mpsc::UnboundedReceiver<ReadAnswer>,
    )> {
        let (ask, requests) = std::sync::mpsc::channel::<ReadRequest>();
        let (tell, answers) = tokio::sync::mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("tui-reads".into())
            .spawn(move || {
                while let Ok(request) = requests.recv() {
                    // A read that panics must still be answered, or the app
                    // would wait for it for ever.
                    let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        answer(&*source, &request)
                    }))
                    .unwrap_or_else(|_| {
                        failed(&request, "internal error while reading the store".into())
                    });
                    if tell.send(answered).is_err() {
                        return;
                    }
                }
            })?;
        Ok((ask, answers))
    }
}
