//! The live TUI (`rudder watch`, `rudder demo`).

use std::path::PathBuf;

/// How the TUI is started.
pub struct Options {
    pub store: PathBuf,
    /// Refuse every write with a message.
    pub read_only: bool,
    /// In `rudder demo`: the worker the presenter can kill and restart.
    pub worker: Option<Box<dyn WorkerControl>>,
}

/// What the TUI shows about the demo worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerState {
    NotStarted,
    Running {
        pid: u32,
    },
    /// Killed from the TUI with SIGKILL.
    Killed {
        pid: u32,
    },
    /// Exited on its own (code, or None when a signal ended it).
    Exited {
        pid: u32,
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
}

/// Run the TUI until the user quits.
pub fn run(_options: Options) -> anyhow::Result<()> {
    anyhow::bail!("the TUI is not built yet")
}
