//! `rudder worker`: claims every claimable task of the store and runs the
//! simulated diagnosis on it, a few at a time, one thread per task.
//!
//! Restart safety comes from the store alone: the step a diagnosis reached is
//! its `progress.current`, the service is in its `request` or `input_value`,
//! and each step is a pure function of those, so a worker started after a
//! SIGKILL picks a task up where the dead one left it once the dead one's
//! lease has run out. Every write carries this worker's claim, so a worker
//! whose lease was taken over is refused by the store and stops.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use anyhow::Context;
use chrono::Utc;

use super::diagnosis::{self, Plan, STEPS, Stop, TOTAL_STEPS};
use super::scenarios::service_schema;
use crate::store::{Store, StoreError};
use crate::task::{Actor, Progress, Status, Task};

/// Set by the demo's supervisor to its own pid: a worker whose parent is no
/// longer that process was orphaned (the demo was killed) and exits, so a
/// forgotten worker never keeps running in the background.
pub const PARENT_ENV: &str = "RUDDER_DEMO_PARENT";

/// How many diagnoses one worker runs at once.
pub const SLOTS: usize = 3;

/// How long one write to the store may be apart from the next within a step.
/// Each write is a heartbeat, and a heartbeat on a cancelled task is refused,
/// so this bounds how long a cancelled diagnosis keeps running.
const TICK: Duration = Duration::from_millis(500);

/// How often an idle worker looks for claimable tasks.
const POLL: Duration = Duration::from_millis(250);

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The store whose tasks the worker diagnoses.
    pub store: PathBuf,
    /// Steps take `seconds / speed`.
    pub speed: f64,
    /// Recorded as the lease holder (`claimed_by`).
    pub name: String,
    /// The lease taken on each task, renewed by every heartbeat ([`lease_for`]).
    pub lease: Duration,
}

impl Config {
    /// A configuration for `store` at `speed`, named `name` or `worker-PID`.
    pub fn new(store: PathBuf, speed: f64, name: Option<String>) -> anyhow::Result<Config> {
        anyhow::ensure!(
            speed.is_finite() && speed > 0.0 && speed <= 10_000.0,
            "--speed must be a number above 0 (and at most 10000), not {speed}"
        );
        let name = name.unwrap_or_else(|| format!("worker-{}", std::process::id()));
        anyhow::ensure!(!name.trim().is_empty(), "--name must not be empty");
        Ok(Config {
            store,
            speed,
            name,
            lease: lease_for(speed),
        })
    }
}

/// The lease: 8 s at speed 1, shorter when faster so that a killed worker's
/// tasks are picked up soon, but never under 3 s, which is six heartbeats
/// (TICK): a worker on a busy machine must not lose a lease it is renewing.
pub fn lease_for(speed: f64) -> Duration {
    Duration::from_secs_f64((8.0 / speed).clamp(3.0, 8.0))
}

/// Run until killed, or until the demo that started this worker is gone.
pub fn run(config: Config) -> anyhow::Result<()> {
    let config = Arc::new(config);
    let store = Store::open(&config.store);
    let parent: Option<u32> = std::env::var(PARENT_ENV).ok().and_then(|v| v.parse().ok());
    let stop = Arc::new(AtomicBool::new(false));
    log(
        &config.name,
        &format!(
            "started on {} at speed {} (lease {:.1}s, up to {SLOTS} diagnoses at once)",
            config.store.display(),
            config.speed,
            config.lease.as_secs_f64()
        ),
    );
    let mut running: HashMap<String, JoinHandle<()>> = HashMap::new();
    let mut last_error: Option<String> = None;
    loop {
        if parent.is_some_and(|p| std::os::unix::process::parent_id() != p) {
            log(
                &config.name,
                "the demo that started this worker is gone: giving the leases back and exiting",
            );
            stop.store(true, Ordering::SeqCst);
            for (_, handle) in running.drain() {
                // A diagnosis thread that panicked has nothing left to give back.
                let _ = handle.join();
            }
            return Ok(());
        }
        running.retain(|_, handle| !handle.is_finished());
        while running.len() < SLOTS {
            match next_task(&store, &config, &running) {
                Ok(Some(task)) => {
                    last_error = None;
                    let id = task.task_id.clone();
                    let config = Arc::clone(&config);
                    let stop = Arc::clone(&stop);
                    let handle = thread::Builder::new()
                        .name(format!("diagnose-{}", task.short_id()))
                        .spawn(move || diagnose(&config, task, &stop))
                        .context("cannot start a diagnosis thread")?;
                    running.insert(id, handle);
                }
                Ok(None) => {
                    last_error = None;
                    break;
                }
                Err(e) => {
                    // The store may be briefly unreadable (a person editing
                    // it, a full disk): say so once and keep trying, like a
                    // real worker would, instead of dying.
                    let message = format!("cannot claim a task: {e}");
                    if last_error.as_ref() != Some(&message) {
                        log(&config.name, &message);
                        last_error = Some(message);
                    }
                    break;
                }
            }
        }
        thread::sleep(POLL);
    }
}

/// The next task to diagnose, claimed: the oldest free one, else one this
/// worker's name still holds with an expired lease (a previous process of the
/// same name died; `claim_next` skips tasks claimed by the caller).
fn next_task(
    store: &Store,
    config: &Config,
    running: &HashMap<String, JoinHandle<()>>,
) -> Result<Option<Task>, StoreError> {
    if let Some(task) = store.claim_next(&config.name, config.lease)? {
        if running.contains_key(&task.task_id) {
            // Our own thread for it is still winding down after losing the
            // lease and will notice it holds it again on its next heartbeat.
            return Ok(None);
        }
        return Ok(Some(task));
    }
    let now = store.now();
    let orphan = store.load()?.into_values().find(|t| {
        t.status == Status::Working
            && t.claimed_by.as_deref() == Some(config.name.as_str())
            && !t.lease_live(now)
            && !running.contains_key(&t.task_id)
    });
    match orphan {
        Some(t) => match store.claim(&t.task_id, &config.name, config.lease) {
            Ok(outcome) => Ok(Some(outcome.task)),
            // Someone else took it meanwhile: fine, it is being worked on.
            Err(StoreError::LeaseLost { .. } | StoreError::Refused { .. }) => Ok(None),
            Err(e) => Err(e),
        },
        None => Ok(None),
    }
}

/// Why a diagnosis ended in this worker.
enum End {
    Completed,
    Failed(String),
    AskedForInput,
    /// The store refused a write (cancelled, finished or taken over meanwhile).
    Refused {
        at: String,
        error: StoreError,
    },
    /// Another error from the store; the lease runs out and the task is
    /// picked up again.
    Error {
        at: String,
        error: StoreError,
    },
    /// This worker is exiting; the lease was given back.
    Stopped,
}

/// Run the diagnosis of a claimed `task` and log how it ended.
fn diagnose(config: &Config, task: Task, stop: &AtomicBool) {
    let store = Store::open(&config.store);
    let plan = Plan::of(&task);
    let done = match task.progress {
        Some(p) if p.total == TOTAL_STEPS => p.current.min(TOTAL_STEPS),
        _ => 0,
    };
    let label = format!("{} ({})", plan.label(), task.short_id());
    // A worker's own messages start with "step ": a task claimed with one
    // was interrupted mid-way (its worker died or stalled), whereas a task
    // that took input or was never started shows a person's or the seed's.
    let interrupted = done > 0
        && task
            .status_message
            .as_deref()
            .is_some_and(|m| m.starts_with("step "));
    let how = match (done, interrupted) {
        (0, _) => "starting".to_string(),
        (_, true) => {
            format!("resuming after step {done}/{TOTAL_STEPS}, where its last worker stopped")
        }
        (_, false) => format!("continuing after step {done}/{TOTAL_STEPS}"),
    };
    log(&config.name, &format!("claimed {label}: {how}"));
    let diagnosis = Diagnosis {
        store: &store,
        config,
        id: &task.task_id,
        plan: &plan,
        resumed_after: done,
        interrupted,
        stop,
    };
    let message = match diagnosis.run() {
        End::Completed => "completed".to_string(),
        End::Failed(m) => format!("failed: {m}"),
        End::AskedForInput => "asked a person for the service; the lease is given back".into(),
        End::Refused { at, error } => match error.task() {
            Some(t) if t.status == Status::Cancelled => format!("cancelled {at}: stopped"),
            _ => format!("stopped {at}: the store refused the write: {error}"),
        },
        End::Error { at, error } => format!("gave up {at}: {error}"),
        End::Stopped => "lease given back: this worker is exiting".into(),
    };
    log(&config.name, &format!("{label}: {message}"));
}

/// One diagnosis of one task by this worker.
struct Diagnosis<'a> {
    store: &'a Store,
    config: &'a Config,
    id: &'a str,
    plan: &'a Plan,
    /// Steps done when this worker took the task.
    resumed_after: u64,
    /// Whether another worker was interrupted mid-way on this task.
    interrupted: bool,
    stop: &'a AtomicBool,
}

impl Diagnosis<'_> {
    fn actor(&self) -> Actor<'_> {
        Actor::Worker {
            holder: &self.config.name,
            lease: self.config.lease,
        }
    }

    /// Turn a failed write into the end of the diagnosis.
    fn ended(at: String, error: StoreError) -> End {
        match error {
            StoreError::Refused { .. } | StoreError::LeaseLost { .. } => End::Refused { at, error },
            error => End::Error { at, error },
        }
    }

    fn heartbeat(&self, message: String, progress: Option<Progress>) -> Result<(), StoreError> {
        self.store
            .heartbeat(self.id, Some(message), progress, self.actor())
            .map(|_| ())
    }

    /// " · resumed by NAME" on the messages of a task this worker took over
    /// mid-way, so the TUI shows which diagnoses survived a restart.
    fn suffix(&self) -> String {
        if self.interrupted {
            format!(" · resumed by {}", self.config.name)
        } else {
            String::new()
        }
    }

    fn run(&self) -> End {
        let first = self.resumed_after as usize;
        for step in first..STEPS.len() {
            let before = format!("before step {}/{TOTAL_STEPS}", step + 1);
            match diagnosis::before_step(step, self.plan) {
                Ok(()) => {}
                Err(stop) => return self.stop_with(stop, before),
            }
            let progress = Progress {
                current: step as u64,
                total: TOTAL_STEPS,
            };
            let message = diagnosis::step_message(step, self.plan, 0.0) + &self.suffix();
            if let Err(e) = self.heartbeat(message, Some(progress)) {
                return Self::ended(before, e);
            }
            if let Some(end) = self.work_through(step) {
                return end;
            }
            let after = format!("after step {}/{TOTAL_STEPS}", step + 1);
            if let Err(stop) = diagnosis::after_step(step, self.plan) {
                return self.stop_with(stop, after);
            }
            if step + 1 < STEPS.len() {
                let progress = Progress {
                    current: step as u64 + 1,
                    total: TOTAL_STEPS,
                };
                let message = diagnosis::step_done_message(step, self.plan) + &self.suffix();
                if let Err(e) = self.heartbeat(message, Some(progress)) {
                    return Self::ended(after, e);
                }
            }
        }
        let result = match diagnosis::conclusion(self.plan, &self.config.name, self.resumed_after) {
            Ok(result) => result,
            Err(stop) => return self.stop_with(stop, "at the conclusion".into()),
        };
        // The last word in status_message and progress is the conclusion,
        // not the percentage of the step that wrote it.
        let summary = result["summary"].as_str().unwrap_or("conclusion written");
        let done = Progress {
            current: TOTAL_STEPS,
            total: TOTAL_STEPS,
        };
        if let Err(e) = self.heartbeat(format!("diagnosed: {summary}"), Some(done)) {
            return Self::ended("at the conclusion".into(), e);
        }
        match self.store.complete(self.id, result, self.actor()) {
            Ok(_) => End::Completed,
            Err(e) => Self::ended("at the conclusion".into(), e),
        }
    }

    /// Spend the step's time in ticks, with a heartbeat after each but the
    /// last: it keeps the lease, shows the step's progress, and is refused
    /// once the task was cancelled or taken over, which stops the diagnosis
    /// within a tick. `None` when the step ran to its end.
    fn work_through(&self, step: usize) -> Option<End> {
        let duration = diagnosis::step_duration(step, self.config.speed);
        let ticks = (duration.as_secs_f64() / TICK.as_secs_f64())
            .ceil()
            .max(1.0) as u32;
        let slice = duration / ticks;
        for tick in 1..=ticks {
            thread::sleep(slice);
            if self.stop.load(Ordering::SeqCst) {
                // Best effort: if this fails the lease simply runs out.
                let _ = self.store.release(self.id, &self.config.name);
                return Some(End::Stopped);
            }
            if tick < ticks {
                let fraction = f64::from(tick) / f64::from(ticks);
                let message = diagnosis::step_message(step, self.plan, fraction) + &self.suffix();
                if let Err(e) = self.heartbeat(message, None) {
                    let at = format!("during step {}/{TOTAL_STEPS}", step + 1);
                    return Some(Self::ended(at, e));
                }
            }
        }
        None
    }

    /// Ask for the service, or fail the task.
    fn stop_with(&self, stop: Stop, at: String) -> End {
        match stop {
            Stop::AskForService(message) => {
                match self.store.request_input(
                    self.id,
                    service_schema(),
                    Some(message),
                    self.actor(),
                ) {
                    Ok(_) => End::AskedForInput,
                    Err(e) => Self::ended(at, e),
                }
            }
            Stop::Fail(message) => {
                // Replace the step's percentage in status_message, which
                // would otherwise stay on the failed task for good.
                if let Err(e) = self.heartbeat(format!("failed {at}: {message}"), None) {
                    return Self::ended(at, e);
                }
                match self.store.fail(self.id, &message, self.actor()) {
                    Ok(_) => End::Failed(message),
                    Err(e) => Self::ended(at, e),
                }
            }
        }
    }
}

/// One line on stderr: time, worker, what happened. `eprintln!` writes a line
/// at once, so lines of concurrent diagnoses never interleave.
fn log(name: &str, message: &str) {
    // Names and incident ids come from the store: keep escape sequences out
    // of a log someone will `tail` on a terminal.
    let line = format!("{name}: {message}");
    eprintln!(
        "{} {}",
        Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ"),
        crate::text::sanitize(&line)
    );
}
