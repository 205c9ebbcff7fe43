//! The store's trail: every task's history entries as one record, oldest
//! first (`rudder log`).
//!
//! The history entries inside each task are the truth; a database keeps a
//! copy of them, one row per entry, indexed by time and by actor, so that
//! `--since` and `--actor` read a range of an index instead of every task.
//! [`in_memory`] is the reference every backend's answer must agree with.

use chrono::{DateTime, Utc};
use serde::Serialize;

use rudder_model::task::{HistoryEntry, Status, Task};

/// Which entries of the trail to read, and where a page starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrailQuery {
    /// Only this task's entries (a whole id).
    pub task: Option<String>,
    /// Only entries at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only entries written by this actor (exactly).
    pub actor: Option<String>,
    /// Only entries after this one in trail order (the last of the page
    /// before).
    pub after: Option<TrailKey>,
    /// At most this many entries.
    pub limit: Option<usize>,
}

/// Where an entry stands in the trail: by time, then task id, then its
/// place in the task's history.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TrailKey {
    pub at: DateTime<Utc>,
    pub task_id: String,
    pub index: usize,
}

/// One entry of the trail.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrailEntry {
    pub task_id: String,
    /// Its place in the task's history (0: the creation).
    pub index: usize,
    /// The status the task had before (none for the creation).
    pub before: Option<Status>,
    #[serde(flatten)]
    pub entry: HistoryEntry,
}

impl TrailEntry {
    pub fn key(&self) -> TrailKey {
        TrailKey {
            at: self.entry.at,
            task_id: self.task_id.clone(),
            index: self.index,
        }
    }
}

impl TrailQuery {
    /// Whether `e` is an entry this query asks for (the page's start and
    /// length aside).
    pub fn keeps(&self, e: &TrailEntry) -> bool {
        self.task.as_ref().is_none_or(|t| *t == e.task_id)
            && self.since.is_none_or(|s| e.entry.at >= s)
            && self
                .actor
                .as_ref()
                .is_none_or(|a| e.entry.actor.as_ref() == Some(a))
            && self.after.as_ref().is_none_or(|k| e.key() > *k)
    }
}

/// The entries of one task, in its history's order.
pub fn of_task(task: &Task) -> impl Iterator<Item = TrailEntry> + '_ {
    task.history
        .iter()
        .enumerate()
        .map(|(index, entry)| TrailEntry {
            task_id: task.task_id.clone(),
            index,
            before: index
                .checked_sub(1)
                .and_then(|i| task.history.get(i))
                .map(|h| h.status),
            entry: entry.clone(),
        })
}

/// The page of the trail `q` asks for, from `tasks`: the reference
/// answer.
pub fn in_memory<'a>(tasks: impl IntoIterator<Item = &'a Task>, q: &TrailQuery) -> Vec<TrailEntry> {
    let mut all: Vec<TrailEntry> = tasks
        .into_iter()
        .flat_map(of_task)
        .filter(|e| q.keeps(e))
        .collect();
    all.sort_by_key(TrailEntry::key);
    all.truncate(q.limit.unwrap_or(usize::MAX));
    all
}

/// Order and cut a backend's candidates (entries it read from an index,
/// at least those `q` asks for): what every backend answers.
pub fn refine(mut found: Vec<TrailEntry>, q: &TrailQuery) -> Vec<TrailEntry> {
    found.retain(|e| q.keeps(e));
    found.sort_by_key(TrailEntry::key);
    found.dedup_by(|a, b| a.key() == b.key());
    found.truncate(q.limit.unwrap_or(usize::MAX));
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    fn task(id: &str, entries: &[(Status, i64, Option<&str>)]) -> Task {
        let mut t = Task::new(id, entries.last().map_or(Status::Working, |e| e.0));
        for (status, s, actor) in entries {
            let mut h = HistoryEntry::new(*status, at(*s), None);
            h.actor = actor.map(str::to_string);
            t.history.push(h);
        }
        t
    }

    #[test]
    fn the_trail_is_every_entry_oldest_first_with_its_before() {
        let a = task(
            "a",
            &[
                (Status::Working, 0, Some("ann")),
                (Status::InputRequired, 5, Some("w#1")),
                (Status::Working, 9, Some("bob")),
            ],
        );
        let b = task(
            "b",
            &[
                (Status::Working, 3, None),
                (Status::Cancelled, 5, Some("ann")),
            ],
        );
        let all = in_memory([&a, &b], &TrailQuery::default());
        let order: Vec<(&str, usize)> = all.iter().map(|e| (e.task_id.as_str(), e.index)).collect();
        assert_eq!(order, [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2)]);
        assert_eq!(all[4].before, Some(Status::InputRequired));
        assert_eq!(all[0].before, None);

        let ann = TrailQuery {
            actor: Some("ann".into()),
            ..Default::default()
        };
        assert_eq!(in_memory([&a, &b], &ann).len(), 2);
        let since = TrailQuery {
            since: Some(at(5)),
            ..Default::default()
        };
        assert_eq!(in_memory([&a, &b], &since).len(), 3);
        // Pages follow on from their last entry's key, none lost or twice.
        let mut q = TrailQuery {
            limit: Some(2),
            ..Default::default()
        };
        let mut paged = Vec::new();
        loop {
            let page = in_memory([&a, &b], &q);
            let Some(last) = page.last() else { break };
            q.after = Some(last.key());
            paged.extend(page);
        }
        assert_eq!(paged, all);
    }
}
