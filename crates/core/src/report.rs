//! The explainable reports of `reclaim` and `prune`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use super::Summary;
use rudder_model::task::Status;

/// A task that `reclaim` failed (or, in a dry run, would fail).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reclaimed {
    pub task_id: String,
    pub title: Option<String>,
    pub status_before: Status,
    /// Time since the last update, in milliseconds.
    pub idle_ms: u64,
    pub last_update: DateTime<Utc>,
    /// The worker whose (expired) lease the task still named, if any.
    pub claimed_by: Option<String>,
    /// The task's revision when the report was made (before a reclaim
    /// changed it): what a confirmed reclaim of a preview must still find.
    pub revision: u64,
}

/// A task an operation looked at and left alone, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    pub task_id: String,
    pub status: Status,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReclaimReport {
    pub dry_run: bool,
    pub older_than_ms: u64,
    pub at: DateTime<Utc>,
    pub reclaimed: Vec<Reclaimed>,
    /// Unfinished tasks left alone for a reason a person needs to see (a
    /// live lease, no `updated_at`, an update in the future).
    pub skipped: Vec<Skipped>,
    /// Unfinished tasks left alone because they were updated within the
    /// threshold: only counted, as there may be thousands.
    pub active: usize,
}

/// A terminal task that `prune` removed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pruned {
    pub task_id: String,
    pub title: Option<String>,
    pub status: Status,
    pub age_ms: u64,
    /// `"ttl"` when the task's own `ttl_ms` expired, else `"older_than"`.
    pub rule: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PruneReport {
    pub older_than_ms: u64,
    pub at: DateTime<Utc>,
    pub removed: Vec<Pruned>,
    pub skipped: Vec<Skipped>,
}

/// A non-negative time span in whole milliseconds (negative spans, from
/// clocks that disagree, count as zero).
pub fn ms(d: chrono::TimeDelta) -> u64 {
    d.num_milliseconds().max(0) as u64
}

/// A duration as people read it at 3 a.m.: `17m 5s`, `2h 3m`, `45s`.
pub fn human_duration(ms: u64) -> String {
    let s = ms / 1000;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) if s == 0 => format!("{ms}ms"),
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) if sec == 0 => format!("{m}m"),
        (0, 0, _) => format!("{m}m {sec}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// Decide what `reclaim` does, without changing anything.
pub fn plan_reclaim<'a>(
    tasks: impl IntoIterator<Item = Summary<'a>>,
    older_than: Duration,
    now: DateTime<Utc>,
    dry_run: bool,
) -> ReclaimReport {
    let threshold = older_than.as_millis() as u64;
    let mut reclaimed = Vec::new();
    let mut skipped = Vec::new();
    let mut active = 0;
    for t in tasks.into_iter().filter(|t| !t.status.is_terminal()) {
        let skip = |reason: String| Skipped {
            task_id: t.task_id.to_string(),
            status: t.status,
            reason,
        };
        let Some(updated) = t.updated_at else {
            skipped.push(skip(
                "no updated_at recorded, so its idle time is unknown".into(),
            ));
            continue;
        };
        let idle = ms(now - updated);
        if updated > now + chrono::TimeDelta::seconds(1) {
            // Beyond what clocks that nearly agree explain.
            skipped.push(skip(format!(
                "its last update is {} in the future (a clock is wrong), so its idle time is unknown",
                human_duration(ms(updated - now))
            )));
        } else if t.revision == u64::MAX {
            // Failing it would need one more revision: skip it rather than
            // refuse the whole reclaim.
            skipped.push(skip(format!(
                "its revision is already {}, the largest a revision can be, so it can record no further change",
                t.revision
            )));
        } else if t.lease_live(now) {
            let until = t.lease_expires_at.expect("a live lease has an expiry");
            skipped.push(skip(format!(
                "lease held by {} for another {}",
                t.claimed_by.unwrap_or("?"),
                human_duration(ms(until - now))
            )));
        } else if idle < threshold {
            active += 1;
        } else {
            reclaimed.push(Reclaimed {
                task_id: t.task_id.to_string(),
                title: t.label().map(str::to_string),
                status_before: t.status,
                idle_ms: idle,
                last_update: updated,
                claimed_by: t.claimed_by.map(str::to_string),
                revision: t.revision,
            });
        }
    }
    ReclaimReport {
        dry_run,
        older_than_ms: threshold,
        at: now,
        reclaimed,
        skipped,
        active,
    }
}

/// The `error` a reclaimed task is failed with.
pub fn reclaim_error(r: &Reclaimed, older_than: Duration) -> Value {
    let mut message = format!(
        "reclaimed: no update for {} (threshold {}) while {}; last update at {}",
        human_duration(r.idle_ms),
        human_duration(older_than.as_millis() as u64),
        r.status_before,
        r.last_update
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    );
    if let Some(worker) = &r.claimed_by {
        message.push_str(&format!("; its worker {worker} stopped renewing its lease"));
    }
    json!({
        "message": message,
        "reclaimed": true,
        "idle_ms": r.idle_ms,
        "status_before": r.status_before,
    })
}

/// Decide what `prune` removes.
pub fn plan_prune<'a>(
    tasks: impl IntoIterator<Item = Summary<'a>>,
    older_than: Duration,
    now: DateTime<Utc>,
) -> PruneReport {
    let threshold = older_than.as_millis() as u64;
    let mut removed = Vec::new();
    let mut skipped = Vec::new();
    for t in tasks.into_iter().filter(|t| t.status.is_terminal()) {
        let Some(updated) = t.updated_at else {
            skipped.push(Skipped {
                task_id: t.task_id.to_string(),
                status: t.status,
                reason: "no updated_at recorded, so its age is unknown".into(),
            });
            continue;
        };
        let age = ms(now - updated);
        let (limit, rule) = match t.ttl_ms {
            Some(ttl) => (ttl, "ttl"),
            None => (threshold, "older_than"),
        };
        if age >= limit {
            removed.push(Pruned {
                task_id: t.task_id.to_string(),
                title: t.label().map(str::to_string),
                status: t.status,
                age_ms: age,
                rule,
            });
        }
    }
    PruneReport {
        older_than_ms: threshold,
        at: now,
        removed,
        skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::human_duration;

    #[test]
    fn durations_read_like_a_person_would_say_them() {
        assert_eq!(human_duration(250), "250ms");
        assert_eq!(human_duration(45_000), "45s");
        assert_eq!(human_duration(15 * 60_000), "15m");
        assert_eq!(human_duration(17 * 60_000 + 5_000), "17m 5s");
        assert_eq!(human_duration(2 * 3_600_000 + 3 * 60_000), "2h 3m");
        assert_eq!(human_duration(50 * 3_600_000), "2d 2h");
    }
}
