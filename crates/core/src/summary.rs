//! A task's summary: what the store's scans read of it.

use chrono::{DateTime, Utc};

use rudder_model::task::{Status, Task};

/// What the store's scans read of a task (status, keys, times), without its
/// JSON payloads: enough to choose which tasks to read in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary<'a> {
    pub task_id: &'a str,
    pub status: Status,
    pub idempotency_key: Option<&'a str>,
    pub title: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub updated_at: Option<DateTime<Utc>>,
    pub claimed_by: Option<&'a str>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub ttl_ms: Option<u64>,
    pub revision: u64,
}

impl<'a> Summary<'a> {
    pub fn of(task: &'a Task) -> Self {
        Summary {
            task_id: &task.task_id,
            status: task.status,
            idempotency_key: task.idempotency_key.as_deref(),
            title: task.title.as_deref(),
            kind: task.kind.as_deref(),
            updated_at: task.updated_at,
            claimed_by: task.claimed_by.as_deref(),
            lease_expires_at: task.lease_expires_at,
            ttl_ms: task.ttl_ms,
            revision: task.revision,
        }
    }

    /// [`Task::lease_live`].
    pub fn lease_live(&self, now: DateTime<Utc>) -> bool {
        self.claimed_by.is_some() && self.lease_expires_at.is_some_and(|until| until > now)
    }

    /// [`Task::label`].
    pub fn label(&self) -> Option<&'a str> {
        self.title.or(self.idempotency_key)
    }
}
