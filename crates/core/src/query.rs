//! The indexed reads of the seam: what the policy asks a backend for, with
//! the shapes of their answers, and the predicates that define them.
//!
//! Each query has a default implementation over [`Transaction::summaries`]
//! (see `txn.rs`), which is what the JSON file backend uses; a database
//! answers them from its indexes. A database may answer with a superset
//! (say, timestamps compared at microsecond rather than nanosecond
//! precision): the policy always refines the answer with the exact
//! predicate below, so both backends decide alike.
//!
//! [`Transaction::summaries`]: super::Transaction::summaries

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Summary;
use super::report::ms;
use rudder_model::task::{Status, Task};

/// A time as a database stores it: RFC 3339 UTC with nine fraction digits,
/// whose text order (byte order) is time order.
pub fn time_text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// A stored time read back (`None` for none, or for text that is not one).
pub fn parse_time(text: Option<String>) -> Option<DateTime<Utc>> {
    text.and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// A task's summary fields, held as `S`: owned ([`SummaryBuf`]), or
/// borrowed from a store file's text where it can be (the file backend's
/// index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryFields<S> {
    pub task_id: S,
    pub status: Status,
    pub idempotency_key: Option<S>,
    pub title: Option<S>,
    pub updated_at: Option<DateTime<Utc>>,
    pub claimed_by: Option<S>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub ttl_ms: Option<u64>,
    pub revision: u64,
    pub kind: Option<S>,
}

/// An owned [`Summary`], for answers that outlive the transaction's borrows.
pub type SummaryBuf = SummaryFields<String>;

impl<S: AsRef<str>> SummaryFields<S> {
    /// The borrowed view the reports are made from.
    pub fn summary(&self) -> Summary<'_> {
        Summary {
            task_id: self.task_id.as_ref(),
            status: self.status,
            idempotency_key: self.idempotency_key.as_ref().map(AsRef::as_ref),
            title: self.title.as_ref().map(AsRef::as_ref),
            updated_at: self.updated_at,
            claimed_by: self.claimed_by.as_ref().map(AsRef::as_ref),
            lease_expires_at: self.lease_expires_at,
            ttl_ms: self.ttl_ms,
            revision: self.revision,
            kind: self.kind.as_ref().map(AsRef::as_ref),
        }
    }
}

impl SummaryBuf {
    /// The owned copy of `s`.
    pub fn of(s: &Summary<'_>) -> Self {
        SummaryBuf {
            task_id: s.task_id.to_string(),
            status: s.status,
            idempotency_key: s.idempotency_key.map(str::to_string),
            title: s.title.map(str::to_string),
            updated_at: s.updated_at,
            claimed_by: s.claimed_by.map(str::to_string),
            lease_expires_at: s.lease_expires_at,
            ttl_ms: s.ttl_ms,
            revision: s.revision,
            kind: s.kind.map(str::to_string),
        }
    }
}

/// The unfinished tasks `reclaim` must look at: every one it would not
/// merely count as active, and how many unfinished tasks there are in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stale {
    pub candidates: Vec<SummaryBuf>,
    /// Every unfinished task, candidate or not.
    pub unfinished: usize,
}

/// How a page of tasks is ordered. Every order ends with the task id, so
/// that it is total and a page can start right after any task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SortKey {
    /// Store order: creation order for tasks rudder created (the file's
    /// position, a database's sequence number).
    #[default]
    Store,
    /// Most recently updated first (ties by id, descending); tasks without
    /// `updated_at` last: exactly the reverse of (`updated_at`, id), so
    /// that a database reads it backwards off one index.
    Updated,
    /// Oldest first; tasks without `created_at` first.
    Created,
    /// By title, byte order; tasks without a title first.
    Title,
    /// By task id.
    Id,
}

impl SortKey {
    /// The names `--sort` accepts.
    pub const NAMES: [&'static str; 5] = ["store", "updated", "created", "title", "id"];

    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Store => "store",
            SortKey::Updated => "updated",
            SortKey::Created => "created",
            SortKey::Title => "title",
            SortKey::Id => "id",
        }
    }
}

impl std::str::FromStr for SortKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "store" => SortKey::Store,
            "updated" => SortKey::Updated,
            "created" => SortKey::Created,
            "title" => SortKey::Title,
            "id" => SortKey::Id,
            other => {
                return Err(format!(
                    "unknown sort {other:?} (expected one of {})",
                    SortKey::NAMES.join(", ")
                ));
            }
        })
    }
}

/// One page of tasks: a filter, an order, and where to start (keyset
/// paging: right after the task `after`, so that pages stay stable while
/// tasks are added).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageQuery {
    /// Only tasks with one of these statuses (every task when empty).
    pub statuses: Vec<Status>,
    /// Only tasks of one of these kinds (every task, with a kind or not,
    /// when empty).
    pub kinds: Vec<String>,
    pub sort: SortKey,
    /// At most this many tasks (all when `None`).
    pub limit: Option<usize>,
    /// Start after this task (a full id) in the order, whether or not the
    /// filter keeps it; from the start when `None`. An id that is not in
    /// the store starts where it would stand in `Id` order, and from the
    /// start in the others.
    pub after: Option<String>,
    /// Walk the order backwards: from its end, or from the task just
    /// before `after` towards the start (the rows above an anchor).
    pub descending: bool,
    /// Only tasks whose id, title, idempotency key, status message or
    /// status contains this text, ASCII letters matched regardless of case
    /// (every other character exactly): see [`text_matches`].
    pub text: Option<String>,
}

impl PageQuery {
    /// Whether the filter keeps `t` (its statuses, kinds and text).
    pub fn keeps(&self, t: &Task) -> bool {
        (self.statuses.is_empty() || self.statuses.contains(&t.status))
            && self.wants_kind(t.kind.as_deref())
            && self.text.as_deref().is_none_or(|n| text_matches(t, n))
    }

    /// Whether the kind filter keeps a task of kind `kind`.
    pub fn wants_kind(&self, kind: Option<&str>) -> bool {
        wants_kind(&self.kinds, kind)
    }
}

/// Whether a task of kind `kind` is among `kinds` (any task when empty):
/// the kind filter of a page and of a claim.
pub fn wants_kind(kinds: &[String], kind: Option<&str>) -> bool {
    kinds.is_empty() || kind.is_some_and(|k| kinds.iter().any(|w| w == k))
}

/// The SQL `LIKE` pattern of the text filter `text`: `%text%` with `%`,
/// `_` and `\` escaped by a backslash (`ESCAPE '\'`, PostgreSQL's default).
pub fn like_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// Whether `haystack` contains `needle`, ASCII letters compared regardless
/// of case and every other byte exactly (what SQLite's `LIKE` does).
pub fn contains_text(haystack: &str, needle: &str) -> bool {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    n.is_empty() || h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

/// The text filter of [`PageQuery::text`] on one task.
pub fn text_matches(t: &Task, needle: &str) -> bool {
    let hit = |s: &str| contains_text(s, needle);
    hit(&t.task_id)
        || t.title.as_deref().is_some_and(hit)
        || t.idempotency_key.as_deref().is_some_and(hit)
        || t.status_message.as_deref().is_some_and(hit)
        || hit(t.status.as_str())
}

/// How many tasks have each status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatusCounts(pub BTreeMap<Status, usize>);

impl StatusCounts {
    pub fn get(&self, status: Status) -> usize {
        self.0.get(&status).copied().unwrap_or(0)
    }
    pub fn total(&self) -> usize {
        self.0.values().sum()
    }
}

/// Whether a worker may claim the task at `now`: working, and no live lease
/// (a lapsed lease is free again, also for the holder that let it lapse).
pub fn claimable(t: &Summary<'_>, now: DateTime<Utc>) -> bool {
    t.status == Status::Working && !t.lease_live(now)
}

/// Whether `reclaim` must look at an unfinished task rather than count it
/// as active: no `updated_at`, an update in the future, a live lease (all
/// reported as skipped), or idle for at least `older_than`.
pub fn reclaim_candidate(t: &Summary<'_>, now: DateTime<Utc>, older_than: Duration) -> bool {
    if t.status.is_terminal() {
        return false;
    }
    let Some(updated) = t.updated_at else {
        return true;
    };
    updated > now + chrono::TimeDelta::seconds(1)
        || t.lease_live(now)
        || ms(now - updated) >= older_than.as_millis() as u64
}

/// Whether a task is stalled at `now`: working, with a lease that lapsed
/// (its worker stopped renewing it), as [`Task::stalled`] says of a whole
/// task. A working task never claimed (no lease) is not stalled.
pub fn stalled(t: &Summary<'_>, now: DateTime<Utc>) -> bool {
    t.status == Status::Working && t.lease_expires_at.is_some_and(|until| until <= now)
}

/// Whether `prune` must look at a finished task: no `updated_at` (reported
/// as skipped), or past its retention (`ttl_ms`, else `older_than`).
pub fn prune_candidate(t: &Summary<'_>, now: DateTime<Utc>, older_than: Duration) -> bool {
    if !t.status.is_terminal() {
        return false;
    }
    let Some(updated) = t.updated_at else {
        return true;
    };
    let limit = t.ttl_ms.unwrap_or(older_than.as_millis() as u64);
    ms(now - updated) >= limit
}

/// Order `tasks` (given in store order) as `q` asks, and cut out the page.
/// The in-memory implementation of [`PageQuery`], for backends without
/// indexes and as the reference the others must agree with.
pub fn page_in_memory(mut tasks: Vec<Task>, q: &PageQuery) -> Vec<Task> {
    if q.sort != SortKey::Store {
        tasks.sort_by(|a, b| compare(q.sort, a, b));
    }
    if q.descending {
        tasks.reverse();
    }
    // The anchor's place is found among all tasks, so that a page can
    // start after a task the filter leaves out (one whose status changed).
    let start = match &q.after {
        None => 0,
        Some(a) => match tasks.iter().position(|t| &t.task_id == a) {
            Some(i) => i + 1,
            None if q.sort == SortKey::Id && q.descending => {
                tasks.partition_point(|t| &t.task_id >= a)
            }
            None if q.sort == SortKey::Id => tasks.partition_point(|t| &t.task_id <= a),
            None => 0,
        },
    };
    let keep = |t: &Task| q.keeps(t);
    let limit = q.limit.unwrap_or(usize::MAX);
    tasks.drain(..start);
    tasks.retain(keep);
    tasks.truncate(limit);
    tasks
}

/// The order of [`SortKey`] (other than `Store`) between two tasks.
pub fn compare(sort: SortKey, a: &Task, b: &Task) -> std::cmp::Ordering {
    let by = match sort {
        SortKey::Store | SortKey::Id => std::cmp::Ordering::Equal,
        // Newest first, none last (`None` is the smallest), ties by id
        // descending.
        SortKey::Updated => {
            return (b.updated_at, &b.task_id).cmp(&(a.updated_at, &a.task_id));
        }
        SortKey::Created => a.created_at.cmp(&b.created_at),
        SortKey::Title => a.title.cmp(&b.title),
    };
    by.then_with(|| a.task_id.cmp(&b.task_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_escape_the_wildcards_and_the_escape() {
        assert_eq!(like_pattern("db-3"), "%db-3%");
        assert_eq!(like_pattern(r"50%_a\b"), r"%50\%\_a\\b%");
        assert_eq!(like_pattern(""), "%%");
    }

    fn task(id: &str, minutes: Option<i64>, title: Option<&str>) -> Task {
        let mut t = Task::new(id, Status::Working);
        let base = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        t.updated_at = minutes.map(|m| base + chrono::TimeDelta::minutes(m));
        t.created_at = t.updated_at;
        t.title = title.map(str::to_string);
        t
    }

    fn ids(tasks: &[Task]) -> Vec<&str> {
        tasks.iter().map(|t| t.task_id.as_str()).collect()
    }

    #[test]
    fn pages_follow_the_order_and_start_after_the_anchor() {
        let tasks = vec![
            task("c", Some(1), Some("b")),
            task("a", Some(3), None),
            task("b", None, Some("a")),
            task("d", Some(2), Some("b")),
        ];
        let q = |sort, after: Option<&str>, limit| PageQuery {
            sort,
            limit,
            after: after.map(str::to_string),
            ..PageQuery::default()
        };
        let page = |q| page_in_memory(tasks.clone(), &q);
        assert_eq!(
            ids(&page(q(SortKey::Store, None, None))),
            ["c", "a", "b", "d"]
        );
        assert_eq!(ids(&page(q(SortKey::Store, Some("a"), Some(1)))), ["b"]);
        assert_eq!(
            ids(&page(q(SortKey::Updated, None, None))),
            ["a", "d", "c", "b"]
        );
        assert_eq!(
            ids(&page(q(SortKey::Created, None, None))),
            ["b", "c", "d", "a"]
        );
        assert_eq!(
            ids(&page(q(SortKey::Title, None, None))),
            ["a", "b", "c", "d"]
        );
        assert_eq!(
            ids(&page(q(SortKey::Title, Some("b"), Some(2)))),
            ["c", "d"]
        );
        assert_eq!(ids(&page(q(SortKey::Id, Some("bb"), None))), ["c", "d"]);
        assert_eq!(
            ids(&page(q(SortKey::Id, Some("d"), None))),
            Vec::<&str>::new()
        );
        // Backwards: the rows before the anchor, nearest first.
        let back = |sort, after: Option<&str>| PageQuery {
            descending: true,
            ..q(sort, after, None)
        };
        assert_eq!(ids(&page(back(SortKey::Store, Some("b")))), ["a", "c"]);
        assert_eq!(
            ids(&page(back(SortKey::Updated, None))),
            ["b", "c", "d", "a"]
        );
        assert_eq!(ids(&page(back(SortKey::Id, Some("bb")))), ["b", "a"]);
        let text = PageQuery {
            text: Some("B".into()),
            ..q(SortKey::Id, None, None)
        };
        // "b" by id, and the titles "b" (of c and d).
        assert_eq!(ids(&page(text)), ["b", "c", "d"]);
    }

    #[test]
    fn text_matches_ascii_letters_in_any_case_and_the_rest_exactly() {
        assert!(contains_text("Disk FULL on db-3", "full on"));
        assert!(contains_text("anything", ""));
        assert!(!contains_text("ÉTÉ", "été"));
        assert!(contains_text("été", "été"));
        assert!(!contains_text("ab", "abc"));
    }
}
