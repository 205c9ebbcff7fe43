//! The live TUI (`rudder watch`, `rudder demo`).
//!
//! - [`app`]: the state, apart from any terminal;
//! - [`update`]: what keys, mouse events and store answers do to it;
//! - [`form`]: the input form generated from a task's schema;
//! - [`view`]: drawing, one module per pane or dialog;
//! - [`shown`]: each task's text sanitized once per change, for drawing;
//! - `run`: the event loop.
//!
//! Choices where docs/architecture.md is silent:
//!
//! - Rows are grouped waiting → working → finished, then sorted by the `s`
//!   key (last update, created, title, id), ties broken by id so rows never
//!   jitter. Through the feed's changes the rows shown keep their order
//!   inside their group (a task that changes status moves to its group; a
//!   task new to the window takes its place in the order), the header
//!   counts the rows out of order ([`app::App::out_of_order`]) and `o`
//!   re-sorts; a sort, a filter and `g`/`G` fetching the table's ends
//!   show it in order.
//! - With a text filter (which a database answers by reading every task
//!   but for PostgreSQL's trigram index) the feed's changes are taken in
//!   without a page query: the window is the slice of the table between
//!   its first and last rows, so each changed task is read by its id and
//!   kept if the filter shows it inside that slice.
//! - Over every store ([`app::App::with_source`], [`window`], [`live`]) the
//!   app holds the rows around the selection, fetched with the page query:
//!   from a database's indexes, or from a JSON file's rows kept between
//!   changes ([`rudder_store::FileRows`]: each task without its payloads,
//!   only the tasks whose text changed read again). Under the title order
//!   the table sorts by title alone (tasks without one first, as the
//!   store's order has it). The app never holds the whole store.
//! - `d`/`u` (and the mouse wheel over the pane) scroll the detail pane; `Esc`
//!   on the list clears every filter.
//! - A deleted store empties the table (nothing is known any more) and shows
//!   "waiting for … to appear"; a re-created one shows its tasks again. An
//!   unparsable one keeps the last good tasks under a banner.
//! - A form whose task changes while it is open says so at once and keeps
//!   what was typed; the store refuses the submit by revision anyway.
//! - Status-line answers stay until the next one, so a refusal is never missed.
//! - Reclaim's `y` fails only the tasks the preview listed, and each only if
//!   it is still at the revision the preview saw (and still idle, without a
//!   live lease); a task that went idle after the preview is never touched.
//!   Previewed tasks left alone are listed in the report with the reason.
//! - While paused, the feed's events are held back and applied in order on
//!   resume (their transitions all reach the log); past 10 000 of them,
//!   one re-read replaces them.
//! - The header's stalled count covers the whole store (one count query,
//!   [`window::RowSource::stalled`]): counted again at each change the feed
//!   reports, and once a second as the clock moves, since a lease lapses
//!   without any write.
//! - The form shows exactly what it submits: string defaults are cleaned of
//!   control characters and escape sequences when the form is built, JSON
//!   defaults and enum choices show such characters as `\uXXXX` escapes (the
//!   same JSON value, or the exact choice), and keys carrying such characters
//!   (a paste arrives as keys) are not taken.
//! - Marks are cleared once a bulk action is confirmed (the report says how
//!   each task went); `n` keeps them. With marks, `c` and `R` ignore the
//!   selection. A stalled task is a working one whose lease lapsed
//!   ([`rudder_model::task::Task::stalled`]); one never claimed is not stalled.
//! - The task view's search is incremental and case-insensitive for ASCII
//!   letters; a match that a row break splits is highlighted on both rows.
//! - The help fits the screen in one or two columns; what does not fit at
//!   80×24 is said to be in the README's key table.
//! - Panics: one on the UI thread restores the terminal, prints the message
//!   and ends the TUI, as usual. One on a background thread (a store call,
//!   the change feed's reader) leaves the terminal to the UI thread, which
//!   keeps drawing: restoring would leave it drawing in cooked mode and
//!   printing would garble the screen. The store is transactional, so the
//!   TUI stays useful: the panic is shown in the status line (a store call's
//!   dialog is put right, e.g. the form can be sent again), and the details
//!   are printed to stderr when the TUI exits, which then exits with an
//!   error.

#![warn(missing_docs)]

pub mod alert;
pub mod app;
pub mod config;
pub mod errors;
pub mod form;
pub mod keys;
pub mod marks;
pub mod reads;
pub mod reason;
mod run;
pub mod shown;
pub mod task_view;
pub mod terminal;
pub mod update;
pub mod view;
pub mod window;

pub use run::live;

/// How the TUI is started.
pub struct Options {
    /// The store to watch and steer, opened by the caller (once: the TUI
    /// asks it for its rows and its feed).
    pub store: rudder_store::Store,
    /// Refuse every write with a message.
    pub read_only: bool,
    /// Who the person at the TUI is: recorded on every answer, cancel and
    /// reclaim they make (`None`: an unknown actor).
    pub author: Option<rudder_store::task::Author>,
    /// In `rudder demo`: the worker the presenter can kill and restart.
    pub worker: Option<Box<dyn WorkerControl>>,
}

/// What the TUI shows about the demo worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerState {
    /// No worker was started yet.
    NotStarted,
    /// The worker runs.
    Running {
        /// Its process id.
        pid: u32,
    },
    /// Alive but stopped by a signal (SIGSTOP, or SIGTSTP from a
    /// terminal): it does nothing until SIGCONT, and its leases lapse.
    /// Known where the system tells a process's state (`/proc`, Linux);
    /// elsewhere a stopped worker shows as running.
    Stopped {
        /// Its process id.
        pid: u32,
    },
    /// Killed from the TUI with SIGKILL.
    Killed {
        /// Its process id.
        pid: u32,
    },
    /// Exited on its own (code, or None when a signal ended it).
    Exited {
        /// Its process id.
        pid: u32,
        /// Its exit code.
        code: Option<i32>,
    },
}

/// Control of the demo worker child process.
pub trait WorkerControl: Send {
    /// The current state (polls the child without blocking).
    fn state(&mut self) -> WorkerState;
    /// Kill the worker with SIGKILL, like the deploy in the story.
    fn kill(&mut self) -> Result<(), String>;
    /// Start a new worker (if none is running).
    fn start(&mut self) -> Result<(), String>;
    /// What the header calls it: `worker`, or `upstream` when the demo's
    /// diagnosis runs as an MCP server behind the gateway (`rudder demo
    /// --gateway`: K and W kill and restart that server).
    fn role(&self) -> &'static str {
        "worker"
    }
}

/// Run the TUI until the user quits (`q`, Ctrl-C or SIGTERM).
pub fn run(options: Options) -> anyhow::Result<()> {
    terminal::check(if options.worker.is_some() {
        "rudder demo"
    } else {
        "rudder watch"
    })?;
    run::run(options)
}
