//! The demo's worker as a child process the presenter can kill and restart.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use super::worker::PARENT_ENV;
use crate::tui::{WorkerControl, WorkerState};

/// Starts `EXE worker --speed SPEED` with `RUDDER_STORE=STORE` in its
/// environment and keeps track of it.
///
/// The store goes by environment, never argv: a PostgreSQL URL carries a
/// password, and every user of the machine can read a process's argv (`ps`,
/// `/proc/PID/cmdline`), while its environment is its owner's alone.
///
/// The child's stdout and stderr go to a log file (or nowhere), never to the
/// terminal: the TUI owns the screen. Dropping the supervisor stops and
/// reaps the worker ([`Supervisor::stop`]).
#[derive(Debug)]
pub struct Supervisor {
    exe: PathBuf,
    store: crate::store::StoreUrl,
    speed: f64,
    log: Option<PathBuf>,
    child: Option<Child>,
    state: WorkerState,
    /// `(interpreter, script)`: run the Python diagnosis worker
    /// (`rudder demo --python-worker`) instead of `EXE worker`.
    python: Option<(PathBuf, PathBuf)>,
    /// Run the diagnosis as an MCP server at this address (`rudder demo
    /// --gateway`: `EXE demo --serve-upstream ADDR`) instead of a worker.
    upstream: Option<String>,
}

impl Supervisor {
    /// A supervisor of workers run as `exe` (normally the running binary) on
    /// `store`, logging to `log` (appended), or to nowhere with `None`.
    pub fn new(
        exe: PathBuf,
        store: crate::store::StoreUrl,
        speed: f64,
        log: Option<PathBuf>,
    ) -> Self {
        Supervisor {
            exe,
            store,
            speed,
            log,
            child: None,
            state: WorkerState::NotStarted,
            python: None,
            upstream: None,
        }
    }

    /// Run `EXE demo --serve-upstream ADDR --speed SPEED` (the diagnosis
    /// as an MCP server, which knows no store) instead of a worker.
    pub fn upstream(mut self, addr: String) -> Self {
        self.upstream = Some(addr);
        self
    }

    /// Run `python SCRIPT --store STORE --speed SPEED` (the Python
    /// diagnosis worker) instead of `EXE --store STORE worker --speed SPEED`.
    pub fn python(mut self, python: PathBuf, script: PathBuf) -> Self {
        self.python = Some((python, script));
        self
    }

    /// The log file beside the store: `rudder-demo.json.worker.log`.
    /// `store` is a store URL or path: the log goes beside its file (a
    /// database server's store has none: `rudder-demo.worker.log` in the
    /// current directory).
    pub fn log_path_for(store: &crate::store::StoreUrl) -> PathBuf {
        let store = match store {
            crate::store::StoreUrl::File(p) | crate::store::StoreUrl::Sqlite(p) => p,
            _ => return PathBuf::from("rudder-demo.worker.log"),
        };
        let mut name = store.file_name().unwrap_or_default().to_os_string();
        name.push(".worker.log");
        store.with_file_name(name)
    }

    fn output(&self) -> std::io::Result<(Stdio, Stdio)> {
        match &self.log {
            Some(path) => {
                // 0600: the log names the store. A log an older rudder
                // made readable to others is made private too (best
                // effort: it may be someone else's file).
                let file: File = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(0o600)
                    .open(path)?;
                let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
                let err = file.try_clone()?;
                Ok((Stdio::from(file), Stdio::from(err)))
            }
            None => Ok((Stdio::null(), Stdio::null())),
        }
    }

    /// Stop the worker if it runs, reap it, and say which pid it was.
    ///
    /// The worker gets SIGTERM, on which it gives its leases back and exits,
    /// so that the next demo resumes the tasks at once instead of after a
    /// lease; SIGKILL only if it has not exited within [`STOP_GRACE`].
    pub fn stop(&mut self) -> Option<u32> {
        let mut child = self.child.take()?;
        let pid = child.id();
        let exited = match terminate(&child) {
            Ok(()) => wait_until_exited(&mut child, STOP_GRACE),
            Err(_) => None,
        };
        let status = match exited {
            Some(status) => Ok(status),
            None => {
                // Killing a child that already exited fails harmlessly;
                // waiting reaps it either way so no zombie process is left.
                let _ = child.kill();
                child.wait()
            }
        };
        self.state = match status {
            Ok(s) if s.code().is_some() => WorkerState::Exited {
                pid,
                code: s.code(),
            },
            _ => WorkerState::Killed { pid },
        };
        Some(pid)
    }

    /// Share the supervisor between the TUI and the demo that stops it.
    pub fn shared(self) -> SharedSupervisor {
        SharedSupervisor(Arc::new(Mutex::new(self)))
    }
}

/// How long [`Supervisor::stop`] lets the worker give its leases back
/// before killing it: it needs a tick of its diagnoses and a write each.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// Why the Python worker cannot start: a set-up problem of the machine,
/// said before the TUI takes the screen (exit 2, as a usage error: the
/// remedy is the command it names, not a bug report).
#[derive(Debug, thiserror::Error)]
pub enum PythonWorkerError {
    /// The worker script is not a file.
    #[error("the Python worker {} does not exist", .script.display())]
    NoScript {
        /// The script asked for.
        script: PathBuf,
    },
    /// The interpreter could not be run at all.
    #[error(
        "cannot run {} ({source}): install Python 3 and the rudder package with `pip install ./python`, or name another interpreter with $RUDDER_PYTHON",
        .python.display()
    )]
    NoPython {
        /// The interpreter.
        python: PathBuf,
        /// Why it could not be run.
        source: std::io::Error,
    },
    /// The interpreter runs but cannot import the package.
    #[error(
        "{} cannot import the rudder Python package: install it with `pip install ./python` (or name another interpreter with $RUDDER_PYTHON)",
        .python.display()
    )]
    NoPackage {
        /// The interpreter.
        python: PathBuf,
    },
}

/// Refuse a Python worker that cannot start, before the TUI takes the
/// screen: the script must exist and `python` must import `rudder`.
pub fn check_python(python: &std::ffi::OsStr, script: &Path) -> Result<(), PythonWorkerError> {
    if !script.is_file() {
        return Err(PythonWorkerError::NoScript {
            script: script.to_path_buf(),
        });
    }
    let imports = Command::new(python)
        .args(["-c", "import rudder"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|source| PythonWorkerError::NoPython {
            python: PathBuf::from(python),
            source,
        })?;
    if !imports.success() {
        return Err(PythonWorkerError::NoPackage {
            python: PathBuf::from(python),
        });
    }
    Ok(())
}

/// Send SIGTERM to `child`, which has not been reaped (so its pid is still
/// its own, even if it exited).
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn terminate(child: &Child) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(child.id()).map_err(std::io::Error::other)?;
    // SAFETY: kill(2) has no memory-safety preconditions; the pid is our
    // unreaped child's.
    if unsafe { libc::kill(pid, libc::SIGTERM) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether process `pid` is stopped by a signal, as `/proc/PID/stat` says
/// (state `T`, or `t` when a tracer stopped it); `false` where there is no
/// `/proc` to ask.
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat_state(&stat))
        .is_some_and(|state| matches!(state, 'T' | 't'))
}

/// The state letter of a `/proc/PID/stat` line: the field after the
/// command name, which is in parentheses and may itself hold `)`.
fn stat_state(stat: &str) -> Option<char> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// Wait up to `grace` for `child` to exit; its status if it did.
fn wait_until_exited(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}

impl WorkerControl for Supervisor {
    fn role(&self) -> &'static str {
        match self.upstream {
            Some(_) => "upstream",
            None => "worker",
        }
    }

    fn state(&mut self) -> WorkerState {
        if let Some(child) = &mut self.child {
            let pid = child.id();
            match child.try_wait() {
                Ok(None) if stopped(pid) => self.state = WorkerState::Stopped { pid },
                Ok(None) => self.state = WorkerState::Running { pid },
                Ok(Some(status)) => {
                    self.child = None;
                    self.state = WorkerState::Exited {
                        pid,
                        code: status.code(),
                    };
                }
                // try_wait only fails for a child that is not ours; keep
                // showing what we knew.
                Err(_) => {}
            }
        }
        self.state.clone()
    }

    fn kill(&mut self) -> Result<(), String> {
        // Reap a worker that exited by itself first: it is not running.
        self.state();
        let Some(mut child) = self.child.take() else {
            return Err("no worker is running: press W to start one".into());
        };
        let pid = child.id();
        // std's Child::kill sends SIGKILL: no cleanup, no goodbye, exactly
        // what a deploy that restarts the process does to the worker.
        child
            .kill()
            .map_err(|e| format!("cannot kill worker {pid}: {e}"))?;
        child
            .wait()
            .map_err(|e| format!("cannot reap worker {pid}: {e}"))?;
        self.state = WorkerState::Killed { pid };
        Ok(())
    }

    fn start(&mut self) -> Result<(), String> {
        match self.state() {
            WorkerState::Running { pid } => {
                return Err(format!("worker {pid} is already running"));
            }
            WorkerState::Stopped { pid } => {
                return Err(format!(
                    "worker {pid} is stopped by a signal (SIGCONT resumes it, K kills it)"
                ));
            }
            _ => {}
        }
        let (stdout, stderr) = self.output().map_err(|e| {
            let log = self.log.as_deref().unwrap_or(Path::new("-"));
            format!("cannot open the worker log {}: {e}", log.display())
        })?;
        // The store goes to the worker in its environment, never on its
        // command line, where `ps` would show a password.
        let mut command = match (&self.python, &self.upstream) {
            (_, Some(addr)) => {
                // An MCP server knows nothing of the store.
                let mut c = Command::new(&self.exe);
                c.args(["demo", "--serve-upstream", addr]);
                for name in crate::store::WITHHELD_FROM_CHILDREN {
                    c.env_remove(name);
                }
                c
            }
            (Some((python, script)), None) => {
                let mut c = Command::new(python);
                c.arg(script);
                c.env("RUDDER_STORE", self.store.to_arg());
                c
            }
            (None, None) => {
                let mut c = Command::new(&self.exe);
                c.arg("worker");
                c.env("RUDDER_STORE", self.store.to_arg());
                c
            }
        };
        let child = command
            .arg("--speed")
            .arg(self.speed.to_string())
            .env(PARENT_ENV, std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            // Its own process group: keys the terminal turns into signals
            // (Ctrl-C, Ctrl-Z) are for the TUI, never for the worker.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.exe.display()))?;
        self.state = WorkerState::Running { pid: child.id() };
        self.child = Some(child);
        Ok(())
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A [`Supervisor`] shared by the TUI (as its [`WorkerControl`]) and the demo,
/// which stops the worker when the TUI returns.
#[derive(Debug, Clone)]
pub struct SharedSupervisor(Arc<Mutex<Supervisor>>);

impl SharedSupervisor {
    /// The supervisor; a panic while it was locked leaves it usable (its
    /// state is a child handle and a copy of what was last seen).
    pub fn lock(&self) -> MutexGuard<'_, Supervisor> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl WorkerControl for SharedSupervisor {
    fn state(&mut self) -> WorkerState {
        self.lock().state()
    }

    fn kill(&mut self) -> Result<(), String> {
        self.lock().kill()
    }

    fn start(&mut self) -> Result<(), String> {
        self.lock().start()
    }

    fn role(&self) -> &'static str {
        self.lock().role()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_letter_follows_the_last_parenthesis() {
        assert_eq!(stat_state("4242 (rudder) T 1 4242 4242 0 -1"), Some('T'));
        assert_eq!(stat_state("7 (a) b) S 1 7"), Some('S'));
        assert_eq!(stat_state("7 (x)"), None);
        assert_eq!(stat_state("garbage"), None);
        assert!(!stopped(u32::MAX), "no such process");
    }
}
