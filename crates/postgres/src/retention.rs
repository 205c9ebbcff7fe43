//! The change log's retention on PostgreSQL (`rudder_core::retention`):
//! the trim, one `DELETE` of a range of `rudder_changes`' primary key,
//! run at the end of a write under the changes lock (see `txn.rs`).

use chrono::Utc;

use super::txn::PgTxn;
use rudder_core::StoreError;
use rudder_core::retention::Retention;

impl PgTxn<'_> {
    /// Trim the log whose last change is `last` to `retention`. Returns
    /// how many changes went.
    ///
    /// The first change in range that is still young is found walking the
    /// primary key from the front (past only what is about to go), and
    /// everything before it goes: the log stays every change after its
    /// first. `at` is compared byte by byte (`C`), as it is written: RFC
    /// 3339 UTC with nine fraction digits, whose byte order is time order.
    pub(crate) fn trim_changes(&self, retention: &Retention, last: i64) -> Result<u64, StoreError> {
        let Some(trim) = retention.trim(last, Utc::now()) else {
            return Ok(0);
        };
        self.execute(
            "DELETE FROM rudder_changes WHERE seq <= coalesce(\
                 (SELECT seq - 1 FROM rudder_changes WHERE seq <= $1 \
                  AND at COLLATE \"C\" > $2 AND at COLLATE \"C\" <= $3 \
                  ORDER BY seq LIMIT 1), $1)",
            &[&trim.through, &trim.young_after, &trim.young_until],
            "trim the change log",
        )
    }
}
