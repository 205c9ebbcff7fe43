//! How much of the change log a database store keeps (docs/stores.md
//! "Change log retention").
//!
//! SQLite and PostgreSQL record every change in a `changes` table; the
//! feed and `rudder wait` read it after a cursor. Without a bound it grows
//! with every write (a `copy` of a million tasks leaves a million rows).
//! The rule, one for both backends:
//!
//! - the last [`KEEP_CHANGES`] changes are always kept;
//! - an older change is trimmed once it is also older than [`KEEP_FOR`]
//!   (by the time it records, the task's `updated_at`; a removal records
//!   none and counts as old), and only from the front: the log is always
//!   every change after its first, so a reader whose cursor is before the
//!   first gets `reset` (`watch::follow`), never a log with holes;
//! - a change dated further than [`KEEP_FOR`] in the future (a clock far
//!   off) counts as old, so that it cannot hold the log forever.
//!
//! Trimming is one `DELETE` of a range of the primary key, run by bulk
//! work (every `copy` batch, a migration) and by any write transaction
//! whose changes reach or pass a multiple of [`TRIM_EVERY`] (a large prune
//! always does), never on every write.

use std::time::Duration;

use chrono::{DateTime, Utc};

use rudder_core::query::time_text;

/// The changes always kept, newest first.
pub const KEEP_CHANGES: i64 = 100_000;

/// How long a change older than the last [`KEEP_CHANGES`] is still kept:
/// `rudder wait` finds how a task ended that a prune removed right after,
/// whatever the prune removed with it.
pub const KEEP_FOR: Duration = Duration::from_secs(60 * 60);

/// A writer trims when its changes reach or pass a multiple of this
/// sequence number: about once per this many changes.
pub const TRIM_EVERY: i64 = 1_000;

/// The retention of one backend: [`Retention::DEFAULT`] (the constants
/// above) unless a test asks for a smaller one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// The last changes always kept (at least 1: the feed's cursor is the
    /// last change).
    pub keep: i64,
    /// How long an older change is still kept.
    pub keep_for: Duration,
    /// Trim when a write's changes reach or pass a multiple of this.
    pub every: i64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention::DEFAULT
    }
}

/// What one trim may remove: changes up to `through` (by sequence
/// number), from the front, stopping before the first one dated in
/// `(young_after, young_until]` (times as the `at` column holds them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trim {
    pub through: i64,
    pub young_after: String,
    pub young_until: String,
}

impl Retention {
    /// [`KEEP_CHANGES`], [`KEEP_FOR`], [`TRIM_EVERY`].
    pub const DEFAULT: Retention = Retention {
        keep: KEEP_CHANGES,
        keep_for: KEEP_FOR,
        every: TRIM_EVERY,
    };

    /// Whether a write whose changes took the last sequence number from
    /// `before` to `after` should trim.
    pub fn due(&self, before: i64, after: i64) -> bool {
        let every = self.every.max(1);
        after > before && after.div_euclid(every) != before.div_euclid(every)
    }

    /// The trim for a log whose last change is `last`, at `now`; `None`
    /// when nothing can be old enough (the log is within `keep`).
    pub fn trim(&self, last: i64, now: DateTime<Utc>) -> Option<Trim> {
        let through = last.saturating_sub(self.keep.max(1));
        if through <= 0 {
            return None;
        }
        let age = chrono::Duration::from_std(self.keep_for).unwrap_or(chrono::Duration::MAX);
        let at = |t: Option<DateTime<Utc>>| time_text(t.unwrap_or(now));
        Some(Trim {
            through,
            young_after: at(now.checked_sub_signed(age)),
            young_until: at(now.checked_add_signed(age)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_is_due_when_a_write_reaches_or_passes_a_multiple() {
        let r = Retention::DEFAULT;
        assert!(!r.due(0, 999));
        assert!(r.due(999, 1000));
        assert!(!r.due(1000, 1999));
        assert!(r.due(1500, 2600));
        assert!(!r.due(5, 5), "no change, no trim");
    }

    #[test]
    fn the_last_changes_are_never_in_a_trim() {
        let r = Retention::DEFAULT;
        let now = Utc::now();
        assert_eq!(r.trim(KEEP_CHANGES, now), None);
        let t = r.trim(KEEP_CHANGES + 7, now).unwrap();
        assert_eq!(t.through, 7);
        assert!(t.young_after < time_text(now) && time_text(now) < t.young_until);
    }
}
