//! The change log's retention on SQLite (`rudder_sql::retention`): the
//! last sequence number handed out, and the trim, one `DELETE` of a range
//! of `changes`' primary key.

use chrono::Utc;
use rusqlite::{Connection, OptionalExtension, params};

use rudder_sql::retention::Retention;

/// The last sequence number `changes` handed out (0 for none): its
/// `AUTOINCREMENT` counter, which a trim never lowers (so the feed's
/// cursor stays meaningful across trims), read from a table of one row
/// per such table rather than from `changes` itself.
pub(crate) fn last_seq(conn: &Connection) -> rusqlite::Result<i64> {
    Ok(conn
        .prepare_cached("SELECT seq FROM sqlite_sequence WHERE name = 'changes'")?
        .query_row([], |r| r.get::<_, i64>(0))
        .optional()?
        .unwrap_or(0))
}

/// Trim the log whose last change is `last` to `retention`, inside the
/// caller's write transaction. Returns how many changes went.
///
/// The first change in range that is still young is found walking the
/// primary key from the front (past only what is about to go), and
/// everything before it goes: the log stays every change after its first.
pub(crate) fn trim(conn: &Connection, retention: &Retention, last: i64) -> rusqlite::Result<usize> {
    let Some(trim) = retention.trim(last, Utc::now()) else {
        return Ok(0);
    };
    conn.prepare_cached(
        "DELETE FROM changes WHERE seq <= coalesce(\
             (SELECT seq - 1 FROM changes WHERE seq <= ?1 AND at > ?2 AND at <= ?3 \
              ORDER BY seq LIMIT 1), ?1)",
    )?
    .execute(params![trim.through, trim.young_after, trim.young_until])
}
