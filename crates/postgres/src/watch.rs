//! The change feed of a PostgreSQL store: `rudder_changes` read after a
//! cursor, woken by `LISTEN` on a connection of its own (see
//! `PostgresBackend::listen`: every commit notifies, and so does the
//! listener when it connects again), with `max(seq)` as the safety net.
//! The cursor is safe in commit order (see `store/postgres/txn.rs`). A
//! server that cannot be reached is [`super::Unavailable::Unreachable`]; when it
//! is back, the loop reports a reset and the changes since.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::PostgresBackend;
use rudder_core::url::PgUrl;
use rudder_core::watch::{Catchup, FeedSource, MAX_BATCH, Wake, follow};

/// The feed of a PostgreSQL store.
pub struct PostgresSource {
    backend: PostgresBackend,
    task: Option<String>,
    /// The last change reported, in the changes table it was read from
    /// (its oid: a store dropped and created again is another table).
    cursor: Option<(i64, i64)>,
    reads: u64,
}

impl PostgresSource {
    /// The feed of the store at `url`, of the task `task` only if given.
    pub fn new(url: PgUrl, task: Option<String>) -> Self {
        PostgresSource::of(PostgresBackend::new(url), task)
    }

    /// The feed of the store `backend` connects to (its own connection).
    pub fn of(backend: PostgresBackend, task: Option<String>) -> Self {
        PostgresSource {
            backend,
            task,
            cursor: None,
            reads: 0,
        }
    }

    /// The backend's lock timeout from `settings`.
    pub fn with_settings(mut self, settings: &rudder_core::Settings) -> Self {
        self.backend = self.backend.with_settings(settings);
        self
    }
}

/// Stops the listener when dropped (it ends within a second).
struct Listening(Arc<AtomicBool>);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl FeedSource for PostgresSource {
    fn arm(&mut self, wake: Wake) -> Option<Box<dyn Send>> {
        let stopped = Arc::new(AtomicBool::new(false));
        let listener = PostgresBackend::new(self.backend.url().clone())
            .with_lock_timeout(self.backend.lock_timeout());
        let stop = Arc::clone(&stopped);
        std::thread::spawn(move || {
            let alive = || !stop.load(Ordering::Relaxed);
            listener.listen(
                &mut || {
                    wake();
                    alive()
                },
                &alive,
            );
        });
        Some(Box::new(Listening(stopped)))
    }

    fn may_have_changed(&mut self) -> bool {
        self.backend.forget_schema();
        // Against the cursor (what the reader was last told), not against
        // the previous look: a store dropped before the first look would
        // otherwise read "missing" twice, as "no change", and never be
        // reported (`rudder wait` waited to its timeout). The cursor's
        // `seq` is the table's last one whatever the task filter.
        match self.backend.last_change_at() {
            Ok(now) => now != self.cursor,
            Err(_) => true,
        }
    }

    fn catch_up(&mut self) -> Catchup {
        self.reads += 1;
        self.backend.forget_schema();
        let (backend, task) = (&self.backend, self.task.as_deref());
        follow(&mut self.cursor, |after| {
            backend.changes_after(after, task, MAX_BATCH + 1)
        })
    }

    fn reads(&self) -> u64 {
        self.reads
    }
}
