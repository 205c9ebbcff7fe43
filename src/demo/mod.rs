//! The demo: a simulated root-cause diagnosis worker and `rudder demo`.
//!
//! - [`scenarios`]: the embedded incident store, call traces and deploys;
//! - [`diagnosis`]: the steps of a diagnosis and its conclusion (pure);
//! - [`worker`]: `rudder worker`, the process that claims and runs tasks;
//! - [`seed`]: the demo's incidents, seeded idempotently;
//! - [`supervisor`]: the worker as a child process the TUI can kill and restart;
//! - [`mcp`]: `rudder demo --mcp`, the diagnosis as an MCP tool beside the TUI;
//! - [`upstream`]: the diagnosis as an ordinary MCP server, which `rudder
//!   demo --gateway` puts behind rudder's gateway.

pub mod diagnosis;
pub mod mcp;
pub mod scenarios;
pub mod seed;
pub mod supervisor;
pub mod upstream;
pub mod worker;

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::store::{Store, StoreUrl};
use crate::tui::{self, WorkerControl};
use supervisor::Supervisor;

/// `rudder worker` options.
pub struct WorkerOptions {
    /// The store whose tasks the worker diagnoses.
    pub store: StoreUrl,
    /// Run the steps this many times faster than at speed 1 (about a minute
    /// per diagnosis).
    pub speed: f64,
    /// The worker's name, the prefix of its lease holder (`NAME#` and random
    /// hex, unique to the process); `worker-PID` when not given.
    pub name: Option<String>,
}

/// `rudder demo` options.
pub struct DemoOptions {
    /// The demo store (`./rudder-demo.json` unless `--store` is given).
    pub store: StoreUrl,
    /// Empty the demo store and seed it anew.
    pub fresh: bool,
    /// The worker's speed.
    pub speed: f64,
    /// Run this Python worker script (`--python-worker`) instead of the
    /// built-in worker.
    pub python_worker: Option<PathBuf>,
    /// Also serve the diagnosis as an MCP tool over HTTP at this address
    /// (`--mcp ADDR`).
    pub mcp: Option<String>,
    /// Also run a notifier that runs this program for each question
    /// (`--notify PROGRAM`).
    pub notify: Option<PathBuf>,
    /// Run the diagnosis as an MCP server behind rudder's gateway
    /// (`--gateway`) instead of as a rudder worker.
    pub gateway: bool,
    /// Who the presenter at the TUI is (recorded on their answers and
    /// cancels).
    pub author: Option<crate::task::Author>,
}

/// The task kind of the demo's incidents under `--gateway`: the upstream
/// tool's name, which the gateway's catalogue serves.
pub const GATEWAY_KIND: &str = "diagnose";

/// `--gateway`'s catalogue: the diagnosis server at `url`, its one tool
/// idempotent (a diagnosis may run again) with attempts enough to outlast
/// a server killed and restarted from the TUI.
pub fn gateway_catalogue(url: &str) -> String {
    format!(
        "[[upstream]]\nname = \"diagnosis\"\nurl = {url:?}\ntools = [\"{GATEWAY_KIND}\"]\n\n[upstream.tool.{GATEWAY_KIND}]\nidempotent = true\nattempts = 100\n"
    )
}

/// `rudder demo --gateway`'s gateway workers, in this process on threads
/// of their own, logging to `STORE.gateway.log`; stopped with the demo.
struct Gateway {
    stop: tokio_util::sync::CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Gateway {
    fn start(store: &Store, url: &str) -> anyhow::Result<Gateway> {
        use std::sync::Arc;
        let text = gateway_catalogue(url);
        let upstreams = Arc::new(
            crate::gateway::catalogue::parse(Path::new("demo-gateway.toml"), &text)
                .context("the demo's gateway catalogue")?,
        );
        let log = PathBuf::from(
            Supervisor::log_path_for(&store.backend().url())
                .to_string_lossy()
                .replace(".worker.log", ".gateway.log"),
        );
        // The gateway workers' own handle on the same store.
        let store = crate::store::reopen(store)?;
        let say: crate::gateway::Say = Arc::new(move |s: &str| {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&log)
            {
                let _ = writeln!(f, "{}", crate::text::sanitize(s));
            }
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("cannot start the demo's gateway")?;
        let stop = tokio_util::sync::CancellationToken::new();
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("gateway".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let directory =
                        crate::gateway::Directory::start(Arc::clone(&upstreams), Arc::clone(&say));
                    let options = crate::gateway::GatewayOptions {
                        name: "demo-gateway".into(),
                        ..crate::gateway::GatewayOptions::default()
                    };
                    if let Err(e) = crate::gateway::run(
                        &store,
                        upstreams,
                        directory,
                        options,
                        Arc::clone(&say),
                        stopping,
                    )
                    .await
                    {
                        say(&e.to_string());
                    }
                });
                runtime.shutdown_timeout(std::time::Duration::from_secs(2));
            })
            .context("cannot start the demo's gateway")?;
        Ok(Gateway {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The Python diagnosis worker of the checkout this binary was built from
/// (`rudder demo --python-worker`).
pub const PYTHON_WORKER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/python/examples/diagnosis_worker.py"
);

/// Run the worker until it is killed or told to stop (SIGTERM, SIGINT: it
/// gives its leases back first).
pub fn run_worker(options: WorkerOptions) -> anyhow::Result<()> {
    let config = worker::Config::new(options.store, options.speed, options.name)?;
    worker::run(config)
}

/// Seed the demo store, start the worker and open the TUI.
pub fn run_demo(options: DemoOptions) -> anyhow::Result<()> {
    // Check the speed here, where the user gets the message, not in a child
    // whose output goes to a log file.
    worker::Config::new(options.store.clone(), options.speed, None)?;
    // Before anything is written: a bad --mcp address is said here.
    let mcp = options
        .mcp
        .as_deref()
        .map(|addr| {
            let log = mcp::log_path_for(&options.store);
            Store::connect(&options.store)
                .map_err(anyhow::Error::from)
                .and_then(|store| mcp::bind(addr, store, log))
        })
        .transpose()?;
    // Before anything is written: a Python worker that cannot start is a
    // set-up problem, said with its remedy.
    let python = options
        .python_worker
        .as_ref()
        .map(|script| {
            let python = std::env::var_os("RUDDER_PYTHON").unwrap_or_else(|| "python3".into());
            supervisor::check_python(&python, script).map(|()| (PathBuf::from(python), script))
        })
        .transpose()?;
    let store = Store::connect(&options.store)?;
    // Before anything is written: a store with real tasks is refused, with
    // or without --fresh (which checks again under the lock).
    seed::check_demo_store(&store)?;
    if options.fresh {
        seed::clear(&store).context("cannot start the demo afresh")?;
    }
    let kind = options.gateway.then_some(GATEWAY_KIND);
    seed::seed_as(&store, kind)
        .with_context(|| format!("cannot seed the demo store {}", options.store))?;
    if let Some(bound) = mcp {
        bound.serve()?;
    }
    let exe = std::env::current_exe().context("cannot find the rudder binary to run the worker")?;
    let log = Supervisor::log_path_for(&options.store);
    let mut supervisor =
        Supervisor::new(exe.clone(), options.store.clone(), options.speed, Some(log));
    if let Some((python, script)) = python {
        supervisor = supervisor.python(python, script.clone());
    }
    // The diagnosis server keeps one address across its restarts, which
    // the gateway's catalogue names.
    let gateway = if options.gateway {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("cannot find a loopback port for the diagnosis server")?;
        supervisor = supervisor.upstream(addr.to_string());
        Some(Gateway::start(&store, &format!("http://{addr}/mcp"))?)
    } else {
        None
    };
    let supervisor = supervisor.shared();
    let mut control = supervisor.clone();
    control
        .start()
        .map_err(anyhow::Error::msg)
        .context("cannot start the demo worker")?;
    let notifier = options
        .notify
        .as_ref()
        .map(|program| Notifier::start(&exe, &options.store, program))
        .transpose()?;
    let shown = tui::run(tui::Options {
        store,
        read_only: false,
        author: options.author.clone(),
        worker: Some(Box::new(control)),
    });
    drop(notifier);
    drop(gateway);
    // Whether the TUI ended well or not, the worker must not outlive the demo.
    // (Dropping the last handle would stop it too; stopping here makes the
    // order explicit: the worker is gone before we say where the tasks are.)
    supervisor.lock().stop();
    shown?;
    crate::cli::output::emit_line(&goodbye(&exe, &options.store))?;
    Ok(())
}

/// `rudder demo --notify PROGRAM`: `rudder notify --name demo --exec
/// PROGRAM` on the demo store, beside the worker, logging to
/// `STORE.notify.log`; stopped with the demo.
struct Notifier(std::process::Child);

impl Notifier {
    fn start(exe: &Path, store: &StoreUrl, program: &Path) -> anyhow::Result<Notifier> {
        let worker_log = Supervisor::log_path_for(store);
        let log = PathBuf::from(
            worker_log
                .to_string_lossy()
                .replace(".worker.log", ".notify.log"),
        );
        let open = || {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&log)
        };
        let out = open().with_context(|| format!("cannot open {}", log.display()))?;
        let err = open().with_context(|| format!("cannot open {}", log.display()))?;
        // As for the worker: the store in the environment (no password on
        // a command line), a process group of its own (the terminal's
        // Ctrl-C is for the TUI).
        let child = std::process::Command::new(exe)
            .env("RUDDER_STORE", store.to_arg())
            .args(["notify", "--name", "demo", "--exec"])
            .arg(program)
            .stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .context("cannot start the demo's notifier")?;
        Ok(Notifier(child))
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The demo's last line: where the tasks are, and how to go on.
pub fn goodbye(exe: &Path, store: &StoreUrl) -> String {
    let shown = store.to_string();
    // A redacted URL does not connect: say what to put back.
    let password = if shown.contains("***") {
        " (with the password in place of ***)"
    } else {
        ""
    };
    format!(
        "rudder demo: the worker is stopped and every task stays where it was in {shown}; \
         run `{}` again{password} to go on",
        again_command(exe, store)
    )
}

/// The command that starts this demo again, as the user can type it: `cargo
/// run --release -- demo` for a binary cargo built in a `target` directory
/// (not on `PATH`), else `rudder demo`; with `--store` unless it is the
/// default store. The store is shown as every message shows it (password
/// hidden), quoted for a POSIX shell where it needs it.
pub fn again_command(exe: &Path, store: &StoreUrl) -> String {
    let built_by_cargo = exe.components().any(|c| c.as_os_str() == "target");
    let mut command = if built_by_cargo {
        "cargo run --release -- demo".to_string()
    } else {
        "rudder demo".to_string()
    };
    if *store != StoreUrl::from_path(Path::new("rudder-demo.json")) {
        let shown = store.to_string();
        // `try_quote` refuses only a NUL, which no argument can hold.
        let quoted = shlex::try_quote(&shown).unwrap_or_else(|_| shown.clone().into());
        command.push_str(&format!(" --store {quoted}"));
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_says_how_to_start_it_again_as_it_was_started() {
        let url = |s: &str| StoreUrl::parse(s).expect("a store URL");
        let default = &url("rudder-demo.json");
        assert_eq!(
            again_command(Path::new("/src/rudder/target/release/rudder"), default),
            "cargo run --release -- demo"
        );
        assert_eq!(
            again_command(Path::new("/home/me/.cargo/bin/rudder"), default),
            "rudder demo"
        );
        assert_eq!(
            again_command(Path::new("/usr/bin/rudder"), &url("/tmp/d.json")),
            "rudder demo --store /tmp/d.json"
        );
        // A URL's `&` is quoted for the shell; its password never shows.
        let pg = &url("postgres://u:s3cret@h/db?sslmode=disable&connect_timeout=3");
        let again = again_command(Path::new("/usr/bin/rudder"), pg);
        assert_eq!(
            again,
            "rudder demo --store 'postgres://u:***@h/db?sslmode=disable&connect_timeout=3'"
        );
        let bye = goodbye(Path::new("/usr/bin/rudder"), pg);
        assert!(!bye.contains("s3cret"), "{bye}");
        assert!(bye.contains("with the password in place of ***"), "{bye}");
    }
}
