//! Types the backends share: the recorded change log the database feeds
//! read, and the counts of a bulk copy.

use chrono::{DateTime, Utc};

use rudder_model::task::Status;

/// One row of the `changes` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedChange {
    /// Its place in commit order.
    pub seq: i64,
    pub task_id: String,
    /// The task's revision after the change (before it, for a removal).
    pub revision: u64,
    /// `None` for a task that was added.
    pub before: Option<Status>,
    /// `None` for a task that was removed.
    pub after: Option<Status>,
    /// The task's `updated_at` as written (none for a removal, and for
    /// changes recorded by schema version 1).
    pub at: Option<DateTime<Utc>>,
}

/// What the change feed reads: the recorded changes after a cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeLog {
    /// The first change still recorded (`None`: none is).
    pub first: Option<i64>,
    /// The last change recorded (0 for none).
    pub last: i64,
    /// The changes after the cursor, in commit order, at most the limit
    /// asked for (of one task only, if asked).
    pub changes: Vec<RecordedChange>,
}

/// What one batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyCounts {
    /// Tasks that were not in the store.
    pub copied: usize,
    /// Tasks the store had at an older revision (or the same revision with
    /// other content), replaced.
    pub updated: usize,
    /// Tasks the store already had as they are.
    pub unchanged: usize,
}

/// A batch refused: the store holds a newer revision of one of its tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewerInStore {
    pub task_id: String,
    pub revision: u64,
}
