//! The in-process queue in front of a lock file's `flock`.
//!
//! `flock` has no timeout, so [`RealFs::lock`](super::RealFs) polls it,
//! sleeping up to 20 ms between tries. Between processes that is fine;
//! between the threads of one process (sixteen MCP clients creating at
//! once, a worker's threads) it is not: a thread asleep in its backoff
//! loses the lock to one that just arrived, again and again, and waits
//! hundreds of milliseconds behind writes of one millisecond each. So the
//! threads of a process first take turns at a gate of the lock path,
//! woken the moment the one before them is done; only the thread through
//! the gate polls the `flock`, against other processes alone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// One gate per lock path (as made absolute, without resolving links: two
/// spellings of one path give two gates, and the `flock` still keeps
/// their holders apart).
static GATES: LazyLock<Mutex<HashMap<PathBuf, Arc<Gate>>>> = LazyLock::new(Mutex::default);

#[derive(Default)]
struct Gate {
    held: Mutex<bool>,
    freed: Condvar,
}

/// The gate of one lock path, passed; dropping it lets the next thread in.
pub(super) struct Passed {
    gate: Arc<Gate>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Pass the gate of `path`, waiting until `deadline` at most (`None`: the
/// deadline passed with another thread of this process still through).
pub(super) fn pass(path: &Path, deadline: Instant) -> Option<Passed> {
    let key = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let gate = Arc::clone(lock(&GATES).entry(key).or_default());
    let mut held = lock(&gate.held);
    while *held {
        let left = deadline.checked_duration_since(Instant::now())?;
        held = gate
            .freed
            .wait_timeout(held, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    *held = true;
    drop(held);
    Some(Passed { gate })
}

impl Drop for Passed {
    fn drop(&mut self) {
        *lock(&self.gate.held) = false;
        self.gate.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_thread_at_a_time_and_the_next_is_let_in_when_it_is_done() {
        let path = Path::new("/nonexistent/gate-test-1.lock");
        let first = pass(path, Instant::now()).expect("a free gate passes at once");
        // Another thread waits, and times out while the first is through.
        let waited = std::thread::spawn(move || {
            pass(path, Instant::now() + Duration::from_millis(50)).is_some()
        });
        assert!(!waited.join().expect("thread"), "a held gate must not pass");
        let (tx, rx) = std::sync::mpsc::channel();
        let next = std::thread::spawn(move || {
            let passed = pass(path, Instant::now() + Duration::from_secs(60));
            tx.send(passed.is_some()).expect("send");
        });
        // Still held: the waiter has not passed.
        assert!(rx.recv_timeout(Duration::from_millis(20)).is_err());
        drop(first);
        assert_eq!(rx.recv_timeout(Duration::from_secs(60)), Ok(true));
        next.join().expect("thread");
    }

    #[test]
    fn a_thread_behind_another_of_its_process_waits_at_the_gate_and_says_so() {
        use crate::{Fs as _, LockFailure, RealFs};
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, lock) = (dir.path().join("t.json"), dir.path().join("t.json.lock"));
        let held = RealFs
            .lock(&lock, Duration::from_secs(5), &store)
            .unwrap_or_else(|_| panic!("the first lock"));
        let (lock2, store2) = (lock.clone(), store.clone());
        let second = std::thread::spawn(move || {
            match RealFs.lock(&lock2, Duration::from_millis(50), &store2) {
                Err(LockFailure::Timeout { holder, .. }) => holder,
                Err(LockFailure::Io(e)) => panic!("{e}"),
                Ok(_) => panic!("two threads held the lock"),
            }
        });
        let holder = second.join().expect("thread").expect("a holder");
        assert_eq!(holder, format!("pid {} (this process)", std::process::id()));
        drop(held);
        // Let go: the next thread gets the lock (and the gate) at once.
        let again =
            std::thread::spawn(move || RealFs.lock(&lock, Duration::from_secs(60), &store).is_ok());
        assert!(again.join().expect("thread"));
    }

    #[test]
    fn gates_of_different_paths_are_apart() {
        let _a = pass(Path::new("/nonexistent/gate-test-a.lock"), Instant::now()).expect("a");
        let b = pass(Path::new("/nonexistent/gate-test-b.lock"), Instant::now());
        assert!(b.is_some());
    }
}
