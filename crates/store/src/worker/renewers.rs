//! The thread that renews a sync worker's leases: one per worker, started
//! with its first job, asleep until the earliest renewal is due.
//!
//! Neither a job's start nor its end wakes it. A new job's first renewal
//! is due a whole interval after its claim, and the thread never sleeps
//! longer than an interval, so it is awake in time; a job that ended is
//! dropped at its next wake-up. A thread handed each job and woken at its
//! end (the design before) ran twice per job: on a loaded machine each of
//! those wake-ups may preempt a worker that holds the store's write lock.
//!
//! The thread ends once the worker is gone and none of its jobs is live.
//! It renews due jobs one after another: a worker with many jobs at once on
//! a store that hangs renews them late together, as their writes would be.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::lease::Shared;

/// A worker's renewer (see the module comment); dropped with the worker.
pub(crate) struct Renewers {
    inner: Arc<Inner>,
}

struct Inner {
    /// The longest the thread sleeps: the worker's renewal interval.
    every: Duration,
    pool: Mutex<Pool>,
    woken: Condvar,
}

#[derive(Default)]
struct Pool {
    /// The jobs to renew; one that is over is dropped at the next wake-up.
    jobs: Vec<Arc<Shared>>,
    /// Whether the thread runs.
    running: bool,
    /// Whether the worker is gone (the thread ends with its last job).
    worker_gone: bool,
    /// How many threads were started (for the tests).
    started: usize,
}

impl Inner {
    fn pool(&self) -> MutexGuard<'_, Pool> {
        // Every change to the pool is one push, retain or assignment.
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Renewers {
    /// A renewer for jobs renewed every `every`.
    pub fn new(every: Duration) -> Renewers {
        Renewers {
            inner: Arc::new(Inner {
                every,
                pool: Mutex::default(),
                woken: Condvar::new(),
            }),
        }
    }

    /// What the tests look at, also once the worker is gone.
    #[cfg(test)]
    pub fn probe(&self) -> Probe {
        Probe(Arc::clone(&self.inner))
    }

    /// Renew `shared`'s lease until its job is over. Without a thread (none
    /// could be started) the lease simply lapses if a write fails to renew
    /// it; the job still works.
    pub fn renew(&self, shared: Arc<Shared>) {
        let mut pool = self.inner.pool();
        pool.jobs.push(shared);
        if pool.running {
            return;
        }
        let inner = Arc::clone(&self.inner);
        let spawned = std::thread::Builder::new()
            .name("rudder-renew".into())
            .spawn(move || serve(&inner));
        pool.running = spawned.is_ok();
        pool.started += usize::from(spawned.is_ok());
    }
}

impl Drop for Renewers {
    fn drop(&mut self) {
        self.inner.pool().worker_gone = true;
        self.inner.woken.notify_all();
    }
}

/// A view of a renewer for the tests.
#[cfg(test)]
pub(crate) struct Probe(Arc<Inner>);

#[cfg(test)]
impl Probe {
    /// How many threads were started, and how many jobs are kept.
    pub fn counts(&self) -> (usize, usize) {
        let pool = self.0.pool();
        (pool.started, pool.jobs.len())
    }

    /// Whether the thread runs.
    pub fn running(&self) -> bool {
        self.0.pool().running
    }
}

/// The renewer thread.
fn serve(inner: &Inner) {
    let mut pool = inner.pool();
    loop {
        // One look at each job (its own lock, taken under the pool's, never
        // the other way round): over ones dropped, due ones renewed, the
        // others' next renewal the longest the thread may sleep.
        let mut due: Vec<Arc<Shared>> = Vec::new();
        let mut sleep = inner.every;
        pool.jobs.retain(|job| match job.renew_in() {
            None => false,
            Some(wait) if wait.is_zero() => {
                due.push(Arc::clone(job));
                true
            }
            Some(wait) => {
                sleep = sleep.min(wait);
                true
            }
        });
        if pool.jobs.is_empty() && pool.worker_gone {
            pool.running = false;
            return;
        }
        if !due.is_empty() {
            drop(pool);
            for job in due {
                job.renew();
            }
            pool = inner.pool();
            continue;
        }
        pool = inner
            .woken
            .wait_timeout(pool, sleep)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}
