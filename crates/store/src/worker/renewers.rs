//! The threads that renew sync jobs' leases: one per live job, as before,
//! but kept by the worker for its next jobs instead of started for each.
//! Starting a thread costs about 40 µs on the project's machine, 2% of a
//! job that writes five times on SQLite, paid on every claim.
//!
//! An idle thread waits on a channel whose only sender is in the pool's
//! `idle` list; a job takes a sender from there and sends itself (with the
//! sender, which the thread gives back to the list when the job is over).
//! So a thread serves one job at a time, as a thread of its own did, and
//! when the worker (and so the pool) is gone, its idle threads' channels
//! lose their last sender and the threads end.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, Weak};

use super::job::Shared;

/// A job to renew, and the sender that reaches the thread renewing it.
struct Turn(Arc<Shared>, Sender<Turn>);

/// A worker's renewer threads that have no job (see the module comment).
#[derive(Default)]
pub(crate) struct Renewers {
    idle: Mutex<Vec<Sender<Turn>>>,
}

impl Renewers {
    /// How many threads wait for a job.
    #[cfg(test)]
    pub fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Renew `shared`'s lease until its job is over, on an idle thread or
    /// a new one. Without one (none could be started) the lease simply
    /// lapses if a write fails to renew it; the job still works.
    pub fn renew(self: &Arc<Self>, shared: Arc<Shared>) {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let shared = match idle {
            Some(to) => match to.send(Turn(shared, to.clone())) {
                Ok(()) => return,
                // The thread is gone (it panicked): start another.
                Err(back) => back.0.0,
            },
            None => shared,
        };
        let (to, from) = channel();
        let pool = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name("rudder-renew".into())
            .spawn(move || serve(pool, Turn(shared, to), from));
    }
}

/// A renewer thread: each job it is given until the pool is gone.
fn serve(pool: Weak<Renewers>, first: Turn, from: Receiver<Turn>) {
    let Turn(mut shared, mut to) = first;
    loop {
        shared.renew_until_over();
        drop(shared);
        let Some(pool) = pool.upgrade() else {
            return;
        };
        pool.idle.lock().unwrap_or_else(|p| p.into_inner()).push(to);
        drop(pool);
        match from.recv() {
            Ok(Turn(next, back)) => (shared, to) = (next, back),
            Err(_) => return,
        }
    }
}
