//! The demo: a simulated root-cause diagnosis worker and `rudder demo`.

use std::path::PathBuf;

/// `rudder worker` options.
pub struct WorkerOptions {
    pub store: PathBuf,
    pub speed: f64,
    pub name: Option<String>,
}

/// `rudder demo` options.
pub struct DemoOptions {
    pub store: PathBuf,
    pub fresh: bool,
    pub speed: f64,
}

/// Run the worker until it is killed or told to stop.
pub fn run_worker(_options: WorkerOptions) -> anyhow::Result<()> {
    anyhow::bail!("the demo worker is not built yet")
}

/// Seed the demo store, start the worker and open the TUI.
pub fn run_demo(_options: DemoOptions) -> anyhow::Result<()> {
    anyhow::bail!("the demo is not built yet")
}
