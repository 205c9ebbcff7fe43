//! A task's summary read from a database row: the columns both database
//! backends' task tables have, and the driver-neutral row it is read from.

use rudder_core::query::{SummaryBuf, parse_time};
use rudder_model::task::Status;

/// The columns a [`SummaryBuf`] is read from, in [`summary_of_row`]'s
/// order: both database backends' task tables have them.
pub const SUMMARY_COLUMNS: &str = "task_id, status, idempotency_key, title, updated_at, \
                                          claimed_by, lease_expires_at, ttl_ms, revision, kind";

/// [`SUMMARY_COLUMNS`] of tables from before kinds (a reader's of a store
/// no writer has migrated yet): no task there has a kind.
pub const SUMMARY_COLUMNS_BEFORE_KINDS: &str = "task_id, status, idempotency_key, title, updated_at, \
     claimed_by, lease_expires_at, ttl_ms, revision, NULL";

/// A database row as [`summary_of_row`] reads it, whatever the driver.
pub trait SummaryRow {
    type Error;
    fn text(&self, i: usize) -> Result<String, Self::Error>;
    fn opt_text(&self, i: usize) -> Result<Option<String>, Self::Error>;
    fn int(&self, i: usize) -> Result<i64, Self::Error>;
    fn opt_int(&self, i: usize) -> Result<Option<i64>, Self::Error>;
    /// The `status` column's text as a status (each backend says what an
    /// unknown one is).
    fn status(&self, text: &str) -> Result<Status, Self::Error>;
}

/// The summary in the [`SUMMARY_COLUMNS`] of `row` starting at column `at`.
pub fn summary_of_row<R: SummaryRow>(row: &R, at: usize) -> Result<SummaryBuf, R::Error> {
    Ok(SummaryBuf {
        task_id: row.text(at)?,
        status: row.status(&row.text(at + 1)?)?,
        idempotency_key: row.opt_text(at + 2)?,
        title: row.opt_text(at + 3)?,
        updated_at: parse_time(row.opt_text(at + 4)?),
        claimed_by: row.opt_text(at + 5)?,
        lease_expires_at: parse_time(row.opt_text(at + 6)?),
        ttl_ms: row.opt_int(at + 7)?.map(|v| v.max(0) as u64),
        revision: row.int(at + 8)?.max(0) as u64,
        kind: row.opt_text(at + 9)?,
    })
}
