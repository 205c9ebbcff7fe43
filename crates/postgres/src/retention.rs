//! The change log's retention on PostgreSQL (`rudder_sql::retention`):
//! the trim, one `DELETE` of a range of `rudder_changes`' primary key,
//! run at the end of a write under the changes lock (see `txn.rs`).

use chrono::Utc;

use super::txn::PgTxn;
use rudder_core::StoreError;
use rudder_sql::retention::Retention;

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

    /// How many of the first changes of a load of `n` tasks into an empty
    /// store (one per task, in store order) the trim after it would
    /// remove: those before the last `keep`, up to the first young one.
    /// They are never written; the log's sequence is moved past them, so
    /// the log ends as the trim would leave it (every change after its
    /// first, a reader whose cursor was before them reset). Only when no
    /// change already in the log is young: one would stop the trim before
    /// the load's, and skipping them would leave a hole behind it.
    pub(crate) fn trimmed_in_advance(
        &self,
        retention: &Retention,
        n: i64,
    ) -> Result<i64, StoreError> {
        let Some(trim) = retention.trim(n, Utc::now()) else {
            return Ok(0);
        };
        let rows = self.query(
            "SELECT CASE WHEN EXISTS (SELECT 1 FROM rudder_changes \
                 WHERE at COLLATE \"C\" > $2 AND at COLLATE \"C\" <= $3) THEN 0 \
             ELSE coalesce((SELECT k - 1 FROM (\
                 SELECT row_number() OVER (ORDER BY seq) AS k, updated_at FROM rudder_tasks) r \
                 WHERE k <= $1 AND updated_at COLLATE \"C\" > $2 AND updated_at COLLATE \"C\" <= $3 \
                 ORDER BY k LIMIT 1), $1) END",
            &[&trim.through, &trim.young_after, &trim.young_until],
            "trim the change log",
        )?;
        let skip: i64 = rows.first().map_or(0, |r| r.get(0));
        if skip > 0 {
            // The next change is numbered as if the skipped ones were there.
            self.query(
                "SELECT setval(pg_get_serial_sequence('rudder_changes', 'seq'), \
                     nextval(pg_get_serial_sequence('rudder_changes', 'seq')) + $1, false)",
                &[&skip],
                "trim the change log",
            )?;
        }
        Ok(skip)
    }
}
