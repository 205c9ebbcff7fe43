//! `rudder worker`: claims every claimable demo incident of the store and
//! runs the simulated diagnosis on it, a few at a time, one thread per task.
//! A task that is not a demo incident (its idempotency key does not start
//! with `demo:`) is never claimed, so a worker started on a real store by
//! mistake can never fail real tasks.
//!
//! Restart safety comes from the store alone: the step a diagnosis reached is
//! its `progress.current`, the service is in its `request` or `input_value`,
//! and each step is a pure function of those, so a worker started after a
//! SIGKILL picks a task up where the dead one left it once the dead one's
//! lease has run out. Every write carries this worker's claim, so a worker
//! whose lease was taken over is refused by the store and stops.
//!
//! A claim names this process, not just the worker's `--name`: the lease
//! holder is `NAME#` and random hex ([`Config::holder`]). Two processes of
//! the same name (a restarted worker and a stalled one it replaced) are thus
//! two holders, and the stalled one's writes are refused once the other took
//! its tasks over.
//!
//! SIGTERM and SIGINT stop the worker like the end of its demo does: every
//! diagnosis gives its lease back within a tick and the process exits, so
//! the tasks can be picked up again at once. SIGKILL leaves the leases to run
//! out, which is what the demo shows.

use crate::store::Work as _;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use anyhow::Context;
use chrono::Utc;

use super::diagnosis::{self, Plan, STEPS, Stop, TOTAL_STEPS};
use super::scenarios::service_schema;
use crate::store::{Store, StoreError, Summary};
use crate::task::Status;
use crate::worker::{Job, WorkError, Worker};

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

/// How long the main loop waits for a claimable task (on the change feed)
/// before it checks whether it was told to stop.
const POLL: Duration = Duration::from_millis(250);

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The store whose tasks the worker diagnoses.
    pub store: crate::store::StoreUrl,
    /// Steps take `seconds / speed`.
    pub speed: f64,
    /// The human-readable name (`--name`, else `worker-PID`): the prefix of
    /// [`holder`](Config::holder), and the worker named in results.
    pub name: String,
    /// Recorded as the lease holder (`claimed_by`): `NAME#` and eight random
    /// hex digits, unique to this process.
    pub holder: String,
    /// The lease taken on each task, renewed by every heartbeat ([`lease_for`]).
    pub lease: Duration,
}

impl Config {
    /// A configuration for `store` at `speed`, named `name` or `worker-PID`,
    /// with a lease holder of its own ([`Config::holder`]).
    pub fn new(
        store: crate::store::StoreUrl,
        speed: f64,
        name: Option<String>,
    ) -> anyhow::Result<Config> {
        check_speed(speed).map_err(anyhow::Error::msg)?;
        let name = name.unwrap_or_else(|| format!("worker-{}", std::process::id()));
        anyhow::ensure!(!name.trim().is_empty(), "--name must not be empty");
        let process = uuid::Uuid::new_v4().simple().to_string();
        let holder = format!("{name}#{}", &process[..8]);
        Ok(Config {
            store,
            speed,
            name,
            holder,
            lease: lease_for(speed),
        })
    }
}

/// The slowest speed a worker runs at: a diagnosis then takes about 100
/// minutes. Slower speeds would make the durations computed from it absurd
/// (and overflow a `Duration` near 0).
pub const MIN_SPEED: f64 = 0.01;
/// The fastest speed: a diagnosis then takes a few milliseconds of sleeps.
pub const MAX_SPEED: f64 = 10_000.0;

/// Whether `speed` is one a worker can run at ([`MIN_SPEED`] to
/// [`MAX_SPEED`]), with the message for `--speed` if not.
pub fn check_speed(speed: f64) -> Result<f64, String> {
    if (MIN_SPEED..=MAX_SPEED).contains(&speed) {
        Ok(speed)
    } else {
        Err(format!(
            "the speed must be a number from {MIN_SPEED} to {MAX_SPEED} (1 is normal speed, 3 three times faster), not {speed:?}"
        ))
    }
}

/// `--speed FACTOR` as the command line gives it: a number in the range of
/// [`check_speed`], refused as a usage error otherwise.
pub fn parse_speed(text: &str) -> Result<f64, String> {
    let speed: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("the speed is a number such as 1, 3 or 0.5, not {text:?}"))?;
    check_speed(speed)
}

/// The lease: 8 s at speed 1, shorter when faster so that a killed worker's
/// tasks are picked up soon, but never under 3 s, which is six heartbeats
/// (TICK): a worker on a busy machine must not lose a lease it is renewing.
pub fn lease_for(speed: f64) -> Duration {
    Duration::from_secs_f64((8.0 / speed).clamp(3.0, 8.0))
}

/// Run until killed, told to stop (SIGTERM, SIGINT), or until the demo that
/// started this worker is gone; in the last two cases every lease is given
/// back before the worker exits.
pub fn run(config: Config) -> anyhow::Result<()> {
    let config = Arc::new(config);
    let store = Store::connect(&config.store)?;
    let parent: Option<u32> = std::env::var(PARENT_ENV).ok().and_then(|v| v.parse().ok());
    let stop = Arc::new(AtomicBool::new(false));
    // Before the first claim: from here on SIGTERM no longer kills the
    // worker outright, leases and all.
    stop_on_signals(Arc::clone(&stop), config.holder.clone())?;
    // Files by their absolute path (the log outlives the working
    // directory); anything else as every message names it, password hidden.
    let path = match &config.store {
        crate::store::StoreUrl::File(p) => std::path::absolute(p)
            .unwrap_or_else(|_| p.clone())
            .display()
            .to_string(),
        crate::store::StoreUrl::Sqlite(p) => format!(
            "sqlite:{}",
            std::path::absolute(p)
                .unwrap_or_else(|_| p.clone())
                .display()
        ),
        other => other.to_string(),
    };
    log(
        &config.holder,
        &format!(
            "started on the store {} at speed {} (lease {:.1}s, up to {SLOTS} diagnoses at once)",
            path,
            config.speed,
            config.lease.as_secs_f64()
        ),
    );
    // Say so when the store holds other work: it is left alone.
    if let Ok(tasks) = store.load() {
        let others = tasks
            .values()
            .filter(|t| !super::seed::is_demo_task(t))
            .count();
        if others > 0 {
            log(
                &config.holder,
                &format!(
                    "{others} task(s) in this store are not demo incidents: this worker never claims them"
                ),
            );
        }
    }
    let mut worker = demo_worker(&store, &config)?;
    let mut running: HashMap<String, JoinHandle<()>> = HashMap::new();
    let mut last_error: Option<String> = None;
    loop {
        if !stop.load(Ordering::SeqCst)
            && parent.is_some_and(|p| std::os::unix::process::parent_id() != p)
        {
            log(
                &config.holder,
                "the demo that started this worker is gone: giving the leases back and exiting",
            );
            stop.store(true, Ordering::SeqCst);
        }
        if stop.load(Ordering::SeqCst) {
            // Each diagnosis sees `stop` within a tick and gives its lease back.
            for (_, handle) in running.drain() {
                // A diagnosis thread that panicked has nothing left to give back.
                let _ = handle.join();
            }
            log(&config.holder, "exited");
            return Ok(());
        }
        running.retain(|_, handle| !handle.is_finished());
        if running.len() >= SLOTS {
            thread::sleep(POLL);
            continue;
        }
        match next_job(&mut worker, &running, POLL) {
            Ok(Some(job)) => {
                last_error = None;
                let id = job.id().to_string();
                let name = format!("diagnose-{}", job.task().short_id());
                let config = Arc::clone(&config);
                let stop = Arc::clone(&stop);
                let handle = thread::Builder::new()
                    .name(name)
                    .spawn(move || diagnose(&config, job, &stop))
                    .context("cannot start a diagnosis thread")?;
                running.insert(id, handle);
            }
            Ok(None) => last_error = None,
            Err(e) => {
                // The store may be briefly unreadable (a person editing
                // it, a full disk): say so once and keep trying, like a
                // real worker would, instead of dying. The worker waits
                // for the store before it tries again.
                let message = format!("cannot claim a task: {e}");
                if last_error.as_ref() != Some(&message) {
                    log(&config.holder, &message);
                    last_error = Some(message);
                }
            }
        }
    }
}

/// The worker of `config` on `store`: its holder and lease, and only demo
/// incidents ([`super::seed::is_demo_key`]): a task someone else created
/// is real work this simulated diagnosis knows nothing about, and would
/// fail for good.
fn demo_worker(store: &Store, config: &Config) -> anyhow::Result<Worker> {
    store
        .worker(config.name.clone())
        .holder(config.holder.clone())
        .lease(config.lease)
        .filter(|t: &Summary<'_>| super::seed::is_demo_key(t.idempotency_key))
        .start()
        .context("cannot start the worker")
}

/// Set `stop` on the first SIGTERM or SIGINT, which makes the worker give its
/// leases back and exit; a second one exits at once. The handlers are
/// installed before this returns.
fn stop_on_signals(stop: Arc<AtomicBool>, holder: String) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .context("cannot start the signal handler")?;
    let (mut term, mut int) = runtime
        .block_on(async {
            Ok::<_, std::io::Error>((
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
            ))
        })
        .context("cannot handle SIGTERM and SIGINT")?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            runtime.block_on(async move {
                let mut told = false;
                loop {
                    let (name, code) = tokio::select! {
                        _ = term.recv() => ("SIGTERM", 128 + 15),
                        _ = int.recv() => ("SIGINT", 128 + 2),
                    };
                    if told {
                        log(&holder, &format!("{name} again: exiting at once"));
                        std::process::exit(code);
                    }
                    told = true;
                    log(
                        &holder,
                        &format!("{name}: giving the leases back and exiting"),
                    );
                    stop.store(true, Ordering::SeqCst);
                }
            });
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

/// The next task to diagnose, claimed within `wait`: the oldest working
/// demo incident no live lease holds; other tasks are never touched. That
/// includes a task whose lease this process let lapse (it was stalled) and
/// one a dead worker of the same name left, which is how a restarted worker
/// resumes its predecessor's tasks.
fn next_job(
    worker: &mut Worker,
    running: &HashMap<String, JoinHandle<()>>,
    wait: Duration,
) -> Result<Option<Job>, WorkError> {
    let Some(mut job) = worker.next(wait)? else {
        return Ok(None);
    };
    if running.contains_key(job.id()) {
        // Our own thread for it has not finished (it lost the lease and is
        // winding down, or it stalled past its lease). Give the lease back so
        // that the task does not sit claimed and idle for a whole lease: a
        // thread still at work is refused at its next write and stops, and
        // the next look, ours or another worker's, resumes the task.
        job.release()?;
        return Ok(None);
    }
    Ok(Some(job))
}

/// Why a diagnosis ended in this worker.
enum End {
    Completed,
    Failed(String),
    AskedForInput,
    /// The store refused a write (cancelled, finished or taken over meanwhile).
    Refused {
        at: String,
        error: WorkError,
    },
    /// Another error from the store; the lease runs out and the task is
    /// picked up again.
    Error {
        at: String,
        error: WorkError,
    },
    /// This worker is exiting; the lease was given back.
    Stopped {
        at: String,
    },
}

/// Run the diagnosis of a claimed `task` and log how it ended.
fn diagnose(config: &Config, mut job: Job, stop: &AtomicBool) {
    let task = job.task().clone();
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
    log(&config.holder, &format!("claimed {label}: {how}"));
    let diagnosis = Diagnosis {
        config,
        plan: &plan,
        resumed_after: done,
        interrupted,
        stop,
    };
    let message = match diagnosis.run(&mut job) {
        End::Completed => "completed".to_string(),
        End::Failed(m) => format!("failed: {m}"),
        End::AskedForInput => "asked a person for the service; the lease is given back".into(),
        End::Refused { at, error } => match error.stop().and_then(|s| s.task()) {
            Some(t) if t.status == Status::Cancelled => format!("cancelled {at}: stopped"),
            _ => format!("stopped {at}: the store refused the write: {error}"),
        },
        End::Error { at, error } => format!("gave up {at}: {error}"),
        End::Stopped { at } => format!("stopped {at}: lease given back, this worker is exiting"),
    };
    log(&config.holder, &format!("{label}: {message}"));
}

/// One diagnosis of one task by this worker.
struct Diagnosis<'a> {
    config: &'a Config,
    plan: &'a Plan,
    /// Steps done when this worker took the task.
    resumed_after: u64,
    /// Whether another worker was interrupted mid-way on this task.
    interrupted: bool,
    stop: &'a AtomicBool,
}

impl Diagnosis<'_> {
    /// Turn a failed write into the end of the diagnosis.
    fn ended(at: String, error: WorkError) -> End {
        let refused = error.stop().is_some_and(|s| {
            matches!(
                s.error(),
                StoreError::Refused { .. } | StoreError::LeaseLost { .. }
            )
        });
        match refused {
            true => End::Refused { at, error },
            false => End::Error { at, error },
        }
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

    fn run(&self, job: &mut Job) -> End {
        let first = self.resumed_after as usize;
        for step in first..STEPS.len() {
            let before = format!("before step {}/{TOTAL_STEPS}", step + 1);
            match diagnosis::before_step(step, self.plan) {
                Ok(()) => {}
                Err(stop) => return self.stop_with(job, stop, before),
            }
            let message = diagnosis::step_message(step, self.plan, 0.0) + &self.suffix();
            if let Err(e) = job.report(message, step as u64, TOTAL_STEPS) {
                return Self::ended(before, e);
            }
            if let Some(end) = self.work_through(job, step) {
                return end;
            }
            let after = format!("after step {}/{TOTAL_STEPS}", step + 1);
            if let Err(stop) = diagnosis::after_step(step, self.plan) {
                return self.stop_with(job, stop, after);
            }
            if step + 1 < STEPS.len() {
                let message = diagnosis::step_done_message(step, self.plan) + &self.suffix();
                if let Err(e) = job.report(message, step as u64 + 1, TOTAL_STEPS) {
                    return Self::ended(after, e);
                }
            }
        }
        let result = match diagnosis::conclusion(self.plan, &self.config.name, self.resumed_after) {
            Ok(result) => result,
            Err(stop) => return self.stop_with(job, stop, "at the conclusion".into()),
        };
        // The last word in status_message and progress is the conclusion,
        // not the percentage of the step that wrote it.
        let summary = result["summary"].as_str().unwrap_or("conclusion written");
        if let Err(e) = job.report(format!("diagnosed: {summary}"), TOTAL_STEPS, TOTAL_STEPS) {
            return Self::ended("at the conclusion".into(), e);
        }
        match job.complete(result) {
            Ok(_) => End::Completed,
            Err(e) => Self::ended("at the conclusion".into(), e),
        }
    }

    /// Spend the step's time in ticks, with a heartbeat after each but the
    /// last: it keeps the lease, shows the step's progress, and is refused
    /// once the task was cancelled or taken over, which stops the diagnosis
    /// within a tick. `None` when the step ran to its end.
    fn work_through(&self, job: &mut Job, step: usize) -> Option<End> {
        let duration = diagnosis::step_duration(step, self.config.speed);
        let ticks = (duration.as_secs_f64() / TICK.as_secs_f64())
            .ceil()
            .max(1.0) as u32;
        let slice = duration / ticks;
        let during = || format!("during step {}/{TOTAL_STEPS}", step + 1);
        for tick in 1..=ticks {
            thread::sleep(slice);
            if self.stop.load(Ordering::SeqCst) {
                let at = during();
                // If this fails the lease simply runs out.
                return Some(match job.release() {
                    Ok(_) => End::Stopped { at },
                    Err(e) => Self::ended(at, e),
                });
            }
            if tick < ticks {
                let fraction = f64::from(tick) / f64::from(ticks);
                let message = diagnosis::step_message(step, self.plan, fraction) + &self.suffix();
                if let Err(e) = job.message(message) {
                    return Some(Self::ended(during(), e));
                }
            }
        }
        None
    }

    /// Ask for the service, or fail the task.
    fn stop_with(&self, job: &mut Job, stop: Stop, at: String) -> End {
        match stop {
            Stop::AskForService(message) => {
                // Today's demo gives the task back while it waits: whichever
                // worker is free takes the answer.
                match job.hand_over(message, service_schema()) {
                    Ok(_) => End::AskedForInput,
                    Err(e) => Self::ended(at, e),
                }
            }
            Stop::Fail(message) => {
                // Replace the step's percentage in status_message, which
                // would otherwise stay on the failed task for good.
                if let Err(e) = job.message(format!("failed {at}: {message}")) {
                    return Self::ended(at, e);
                }
                match job.fail(&message) {
                    Ok(_) => End::Failed(message),
                    Err(e) => Self::ended(at, e),
                }
            }
        }
    }
}

/// One line on stderr: time, worker, what happened. The line is written
/// whole under the stderr lock, so lines of concurrent diagnoses never
/// interleave; a log that cannot be written (a full disk) is skipped rather
/// than stopping the worker.
fn log(name: &str, message: &str) {
    // Names and incident ids come from the store: keep escape sequences out
    // of a log someone will `tail` on a terminal.
    let line = format!("{name}: {message}");
    crate::cli::output::note(&format!(
        "{} {}",
        Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ"),
        crate::text::sanitize(&line)
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewTask;
    use crate::task::Task;

    fn config(path: &std::path::Path, name: &str) -> Config {
        let url = crate::store::StoreUrl::from_path(path);
        Config::new(url, 1.0, Some(name.into())).expect("a valid configuration")
    }

    #[test]
    fn each_worker_process_is_a_holder_of_its_own() {
        let path = std::path::PathBuf::from("unused.json");
        let (a, b) = (config(&path, "same"), config(&path, "same"));
        assert_eq!(a.name, "same");
        assert!(a.holder.starts_with("same#"), "{}", a.holder);
        assert!(b.holder.starts_with("same#"), "{}", b.holder);
        assert_ne!(a.holder, b.holder);
    }

    /// A task claimed back while this worker's own thread for it has not
    /// finished is given back, not left claimed and idle for a lease.
    #[test]
    fn a_task_whose_thread_has_not_finished_is_given_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.json");
        let store = Store::connect(&path).expect("a store path");
        let config = config(&path, "unit");
        let id = store
            .create(NewTask {
                idempotency_key: Some("demo:INC-1042".into()),
                ..NewTask::default()
            })
            .expect("create")
            .task
            .task_id;
        // Our thread's lease lapsed (it stalled, or lost the lease and is
        // winding down).
        store
            .claim(&id, &config.holder, Duration::ZERO)
            .expect("claim");
        while get(&store, &id).lease_live(store.now()) {
            thread::sleep(Duration::from_millis(1));
        }
        let mut worker = demo_worker(&store, &config).expect("a worker");
        let thread = thread::spawn(|| {});
        let running = HashMap::from([(id.clone(), thread)]);
        assert!(
            next_job(&mut worker, &running, Duration::ZERO)
                .expect("next")
                .is_none()
        );
        let task = get(&store, &id);
        assert_eq!(task.claimed_by, None);
        assert_eq!(task.lease_expires_at, None);

        // Once the thread is gone the task is this worker's to resume.
        let running = HashMap::new();
        let job = next_job(&mut worker, &running, Duration::ZERO)
            .expect("next")
            .expect("the task is claimable");
        assert_eq!(
            job.task().claimed_by.as_deref(),
            Some(config.holder.as_str())
        );
    }

    fn get(store: &Store, id: &str) -> Task {
        store.get(id).expect("the task exists")
    }

    /// The README: a lease of 8 s at speed 1, renewed by a heartbeat at
    /// least every 500 ms, and never shorter than six heartbeats.
    #[test]
    fn the_lease_and_the_heartbeat_interval_are_the_documented_ones() {
        assert_eq!(lease_for(1.0), Duration::from_secs(8));
        assert_eq!(TICK, Duration::from_millis(500));
        assert!(lease_for(10_000.0) >= TICK * 6);
    }
}
