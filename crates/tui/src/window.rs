//! The rows around the selection, for a store too large to hold: fetched
//! through the seam's page query (statuses, text filter, sort), anchored at
//! the selected task so that the selection follows the task.
//!
//! The table's order is the status group (waiting, then working, then
//! finished) and, inside a group, the sort chosen with `s`. A group is one
//! page query with its statuses; the rows after the anchor continue into
//! the next groups, the rows before it (the query walked backwards) into
//! the previous ones. Ties are broken by task id (the store's order for
//! every sort), so rows never swap places between two fetches.

use std::sync::RwLock;

use chrono::{DateTime, Utc};

use rudder_model::task::{Status, Task, TaskMap};
use rudder_store::query::{self, PageQuery, StatusCounts};
use rudder_store::{Backend, SortKey as StoreSort, StoreError, StoreOf, Transaction};

/// The order of the table (waiting tasks always come first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Most recently updated first.
    Updated,
    /// Most recently created first.
    Created,
    /// By title (or key), then id.
    Title,
    /// By id.
    Id,
}

impl SortKey {
    /// The next sort in the `s` cycle.
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Updated => SortKey::Created,
            SortKey::Created => SortKey::Title,
            SortKey::Title => SortKey::Id,
            SortKey::Id => SortKey::Updated,
        }
    }

    /// The name shown in the header.
    pub fn label(self) -> &'static str {
        match self {
            SortKey::Updated => "last update",
            SortKey::Created => "created",
            SortKey::Title => "title",
            SortKey::Id => "id",
        }
    }
}

/// The position of `status` in [`Status::ALL`].
pub fn status_index(status: Status) -> usize {
    Status::ALL
        .iter()
        .position(|s| *s == status)
        .unwrap_or_default()
}

/// Whether a window fetched again keeps the order the rows were shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// The table's order (the person asked for the rows).
    Fresh,
    /// The rows shown keep their order; a row new to the window, or whose
    /// task changed status group, takes the place the table's order gives
    /// it after the rows around it.
    Held,
}

/// Where the TUI reads its rows from.
pub trait RowSource: Send + Sync {
    /// One page of tasks.
    fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError>;
    /// How many tasks have each status.
    fn counts(&self) -> Result<StatusCounts, StoreError>;
    /// One task by its full id.
    fn task(&self, id: &str) -> Result<Option<Task>, StoreError>;
    /// How many tasks of the whole store are stalled at `now`
    /// ([`Task::stalled`]), not only those of the window.
    fn stalled(&self, now: DateTime<Utc>) -> Result<usize, StoreError>;
}

impl<B: Backend> RowSource for StoreOf<B> {
    fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
        StoreOf::page(self, q)
    }
    fn counts(&self) -> Result<StatusCounts, StoreError> {
        StoreOf::counts(self)
    }
    fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        let mut task = None;
        self.backend().snapshot(&mut |tasks| {
            task = tasks.get(id)?;
            Ok(())
        })?;
        Ok(task)
    }
    fn stalled(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        StoreOf::stalled(self, now)
    }
}

/// A JSON file's rows, kept between changes by its feed
/// ([`rudder_store::watch::FileSource::with_rows`]).
impl RowSource for rudder_store::FileRows {
    fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
        rudder_store::FileRows::page(self, q)
    }
    fn counts(&self) -> Result<StatusCounts, StoreError> {
        Ok(rudder_store::FileRows::counts(self))
    }
    fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        rudder_store::FileRows::task(self, id)
    }
    fn stalled(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        Ok(rudder_store::FileRows::stalled(self, now))
    }
}

/// Tasks in memory (tests, and the reference the others agree with).
impl RowSource for RwLock<TaskMap> {
    fn page(&self, q: &PageQuery) -> Result<Vec<Task>, StoreError> {
        let tasks = self.read().unwrap_or_else(|p| p.into_inner());
        Transaction::page(&*tasks, q)
    }
    fn counts(&self) -> Result<StatusCounts, StoreError> {
        let tasks = self.read().unwrap_or_else(|p| p.into_inner());
        Transaction::counts(&*tasks)
    }
    fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        let tasks = self.read().unwrap_or_else(|p| p.into_inner());
        Ok(tasks.get(id).cloned())
    }
    fn stalled(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        let tasks = self.read().unwrap_or_else(|p| p.into_inner());
        Transaction::stalled(&*tasks, now)
    }
}

/// What the table shows: the filters and the order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// Status filters in [`Status::ALL`] order; none set shows all.
    pub statuses: [bool; 5],
    /// The text filter (empty: none).
    pub text: String,
    /// The order inside each status group.
    pub sort: SortKey,
}

/// What the text filter `text` asks for: `kind:NAME` as its first word
/// (`kind:a,b` for several) keeps the tasks of those kinds, and the rest is
/// matched as text (as [`query::text_matches`]); any other filter is all
/// text. The kinds are the store's indexed filter, not a text match.
pub fn filter_parts(text: &str) -> (Vec<String>, &str) {
    let Some(rest) = text.strip_prefix(KIND_PREFIX) else {
        return (Vec::new(), text);
    };
    let (names, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let kinds: Vec<String> = names
        .split(',')
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .collect();
    if kinds.is_empty() {
        // `kind:` alone (still being typed): no kind filter yet.
        return (Vec::new(), rest.trim_start());
    }
    (kinds, rest.trim_start())
}

/// The word that starts a kind filter in the text filter.
pub const KIND_PREFIX: &str = "kind:";

impl View {
    /// Whether the table shows `task`.
    pub fn shows(&self, task: &Task) -> bool {
        let any = self.statuses.iter().any(|s| *s);
        let (kinds, text) = filter_parts(&self.text);
        (!any || self.statuses[status_index(task.status)])
            && query::wants_kind(&kinds, task.kind.as_deref())
            && (text.is_empty() || query::text_matches(task, text))
    }

    /// The statuses of group `g` that the filter keeps.
    fn statuses(&self, g: usize) -> Vec<Status> {
        let any = self.statuses.iter().any(|s| *s);
        GROUPS[g]
            .iter()
            .copied()
            .filter(|s| !any || self.statuses[status_index(*s)])
            .collect()
    }

    /// The query for group `g`: after `after`, forwards or backwards.
    fn query(&self, g: usize, after: Option<String>, backwards: bool, limit: usize) -> PageQuery {
        let (sort, descending) = match self.sort {
            SortKey::Updated => (StoreSort::Updated, false),
            SortKey::Created => (StoreSort::Created, true),
            SortKey::Title => (StoreSort::Title, false),
            SortKey::Id => (StoreSort::Id, false),
        };
        let (kinds, text) = filter_parts(&self.text);
        PageQuery {
            statuses: self.statuses(g),
            kinds,
            sort,
            limit: Some(limit),
            after,
            descending: descending != backwards,
            text: (!text.is_empty()).then(|| text.to_string()),
        }
    }
}

/// The status groups, in the table's order.
const GROUPS: [&[Status]; 3] = [
    &[Status::InputRequired],
    &[Status::Working],
    &[Status::Completed, Status::Failed, Status::Cancelled],
];

/// The status group of `status`, in the table's order (0: waiting).
pub fn group_of(status: Status) -> usize {
    GROUPS
        .iter()
        .position(|g| g.contains(&status))
        .unwrap_or(GROUPS.len() - 1)
}

impl View {
    /// The table's order between two tasks, as the page queries walk it:
    /// the status group, then the sort inside it, ties broken by id.
    pub fn order(&self, a: &Task, b: &Task) -> std::cmp::Ordering {
        let q = self.query(0, None, false, 0);
        group_of(a.status)
            .cmp(&group_of(b.status))
            .then_with(|| match q.descending {
                false => query::compare(q.sort, a, b),
                true => query::compare(q.sort, b, a),
            })
    }
}

/// Where a window is anchored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anchor {
    /// The first of these tasks that still exists and is shown: the
    /// selection, then its neighbours (for when it vanished).
    Tasks(Vec<String>),
    /// The top of the table.
    Start,
    /// The bottom of the table.
    End,
}

/// The rows around an anchor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Window {
    /// The rows, in the table's order.
    pub rows: Vec<Task>,
    /// The anchor's row, if the window was anchored at a task.
    pub anchor: Option<usize>,
    /// No row comes before the first one.
    pub at_start: bool,
    /// No row comes after the last one.
    pub at_end: bool,
    /// Tasks per status in the whole store.
    pub counts: StatusCounts,
}

/// The rows after (or, `backwards`, before) the task `from` of group `g`
/// (from the start, or the end, of the table when `None`), at most `limit`,
/// nearest first; and whether that is all of them.
fn walk(
    source: &dyn RowSource,
    view: &View,
    from: Option<(usize, String)>,
    backwards: bool,
    limit: usize,
) -> Result<(Vec<Task>, bool), StoreError> {
    let mut out = Vec::new();
    let (mut g, mut after) = match from {
        Some((g, id)) => (g as isize, Some(id)),
        None if backwards => (GROUPS.len() as isize - 1, None),
        None => (0, None),
    };
    while (0..GROUPS.len() as isize).contains(&g) {
        // One more than wanted says whether there are more.
        let want = limit + 1 - out.len();
        if !view.statuses(g as usize).is_empty() {
            out.extend(source.page(&view.query(g as usize, after.take(), backwards, want))?);
            if out.len() > limit {
                out.truncate(limit);
                return Ok((out, false));
            }
        }
        after = None;
        g += if backwards { -1 } else { 1 };
    }
    Ok((out, true))
}

/// Fetch the window: `side` rows on each side of the anchor (or twice as
/// many from the start or the end).
pub fn fetch(
    source: &dyn RowSource,
    view: &View,
    anchor: &Anchor,
    side: usize,
) -> Result<Window, StoreError> {
    let counts = source.counts()?;
    let mut found = None;
    if let Anchor::Tasks(ids) = anchor {
        for id in ids {
            if let Some(t) = source.task(id)?
                && view.shows(&t)
            {
                found = Some(t);
                break;
            }
        }
    }
    let window = match (found, anchor) {
        (Some(task), _) => {
            let from = || Some((group_of(task.status), task.task_id.clone()));
            let (mut before, at_start) = walk(source, view, from(), true, side)?;
            let (after, at_end) = walk(source, view, from(), false, side)?;
            before.reverse();
            let at = before.len();
            before.push(task);
            before.extend(after);
            Window {
                rows: before,
                anchor: Some(at),
                at_start,
                at_end,
                counts,
            }
        }
        (None, Anchor::End) => {
            let (mut rows, at_start) = walk(source, view, None, true, 2 * side + 1)?;
            rows.reverse();
            Window {
                rows,
                anchor: None,
                at_start,
                at_end: true,
                counts,
            }
        }
        (None, _) => {
            let (rows, at_end) = walk(source, view, None, false, 2 * side + 1)?;
            Window {
                rows,
                anchor: None,
                at_start: true,
                at_end,
                counts,
            }
        }
    };
    Ok(window)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    fn store(n: usize) -> RwLock<TaskMap> {
        let base = DateTime::from_timestamp(1_700_000_000, 0).expect("a time");
        let tasks = (0..n)
            .map(|i| {
                let status = [Status::Working, Status::InputRequired, Status::Completed][i % 3];
                let mut t = Task::new(format!("t{i:04}"), status);
                t.created_at = Some(base + TimeDelta::minutes(i as i64));
                t.updated_at = Some(base + TimeDelta::minutes((i * 7 % n) as i64));
                t.title = Some(format!("title {}", i % 13));
                t.kind = match i % 3 {
                    0 => Some("diagnose".to_string()),
                    1 => Some("backup".to_string()),
                    _ => None,
                };
                t.revision = 1;
                (t.task_id.clone(), t)
            })
            .collect();
        RwLock::new(tasks)
    }

    fn view(sort: SortKey) -> View {
        View {
            statuses: [false; 5],
            text: String::new(),
            sort,
        }
    }

    /// The whole table, in order, from the start.
    fn whole(source: &dyn RowSource, view: &View) -> Vec<String> {
        let w = fetch(source, view, &Anchor::Start, 10_000).expect("fetch");
        assert!(w.at_start && w.at_end);
        w.rows.into_iter().map(|t| t.task_id).collect()
    }

    #[test]
    fn a_window_is_the_slice_of_the_table_around_its_anchor() {
        let source = store(100);
        for sort in [
            SortKey::Created,
            SortKey::Updated,
            SortKey::Title,
            SortKey::Id,
        ] {
            let v = view(sort);
            let all = whole(&source, &v);
            assert_eq!(all.len(), 100);
            // Waiting first, then working, then finished.
            let groups: Vec<usize> = all
                .iter()
                .map(|id| group_of(source.task(id).unwrap().unwrap().status))
                .collect();
            assert!(groups.is_sorted(), "{sort:?}");
            for at in [0, 1, 33, 34, 50, 66, 67, 98, 99] {
                let w =
                    fetch(&source, &v, &Anchor::Tasks(vec![all[at].clone()]), 5).expect("fetch");
                let lo = at.saturating_sub(5);
                let hi = (at + 6).min(100);
                let ids: Vec<_> = w.rows.iter().map(|t| t.task_id.clone()).collect();
                assert_eq!(ids, all[lo..hi], "{sort:?} at {at}");
                assert_eq!(w.anchor, Some(at - lo));
                assert_eq!((w.at_start, w.at_end), (lo == 0, hi == 100));
            }
            let end = fetch(&source, &v, &Anchor::End, 5).expect("fetch");
            let ids: Vec<_> = end.rows.iter().map(|t| t.task_id.clone()).collect();
            assert_eq!(ids, all[100 - 11..]);
        }
    }

    #[test]
    fn filters_narrow_the_window_and_an_anchor_they_hide_is_passed_over() {
        let source = store(60);
        let mut v = view(SortKey::Created);
        v.statuses[status_index(Status::Completed)] = true;
        v.text = "TITLE 1".into();
        let all = whole(&source, &v);
        let expected: Vec<_> = {
            let tasks = source.read().unwrap();
            let mut list: Vec<&Task> = tasks
                .values()
                .filter(|t| t.status == Status::Completed)
                .filter(|t| t.title.as_deref().unwrap_or("").contains("title 1"))
                .collect();
            list.sort_by_key(|t| std::cmp::Reverse(t.created_at));
            list.into_iter().map(|t| t.task_id.clone()).collect()
        };
        assert_eq!(all, expected);
        // A working task is not shown: the next candidate anchors.
        let w = fetch(
            &source,
            &v,
            &Anchor::Tasks(vec!["t0000".into(), all[1].clone()]),
            1,
        )
        .expect("fetch");
        assert_eq!(w.anchor, Some(1));
        assert_eq!(w.rows[1].task_id, all[1]);
    }

    #[test]
    fn a_kind_word_leads_the_text_filter_and_the_rest_is_text() {
        assert_eq!(filter_parts("payments"), (vec![], "payments"));
        assert_eq!(filter_parts("kind:diagnose"), (vec!["diagnose".into()], ""));
        assert_eq!(
            filter_parts("kind:diagnose,backup  slow db"),
            (vec!["diagnose".into(), "backup".into()], "slow db")
        );
        assert_eq!(filter_parts("kind:"), (vec![], ""));
        // Not the first word: plain text.
        assert_eq!(filter_parts("slow kind:x"), (vec![], "slow kind:x"));

        let source = store(60);
        let mut v = view(SortKey::Created);
        v.text = "kind:backup title 1".into();
        let all = whole(&source, &v);
        let expected: Vec<_> = {
            let tasks = source.read().unwrap();
            let mut list: Vec<&Task> = tasks
                .values()
                .filter(|t| t.kind.as_deref() == Some("backup"))
                .filter(|t| t.title.as_deref().unwrap_or("").contains("title 1"))
                .collect();
            list.sort_by_key(|t| (group_of(t.status), std::cmp::Reverse(t.created_at)));
            list.into_iter().map(|t| t.task_id.clone()).collect()
        };
        assert!(!expected.is_empty());
        assert_eq!(all, expected);
    }
}
