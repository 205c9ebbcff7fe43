//! The SQL of the database backends' indexed reads, written once.
//!
//! SQLite and PostgreSQL run the same statements over the same columns;
//! they differ in how a statement names its parameters (`?1` or `$1`), in
//! the tasks table's name, and in how a text filter folds case. A
//! [`Sql`] builds the text and the parameters in one order, so a
//! placeholder can never name the wrong value; the functions below build
//! each query the backends share (`stale`, `prunable`, the claimable
//! tasks, a page). A backend only binds [`Value`]s and reads the rows.

use std::time::Duration;

use chrono::{DateTime, Utc};

use rudder_core::query::{PageQuery, SortKey, contains_text, like_pattern, time_text};
use rudder_model::task::Status;

/// How a statement names its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    /// `?1`, `?2`, … (SQLite).
    Question,
    /// `$1`, `$2`, … (PostgreSQL).
    Dollar,
}

/// What differs between the databases in the shared queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dialect {
    pub placeholder: Placeholder,
    /// The tasks table.
    pub tasks: &'static str,
    /// The operator that matches a [`like_pattern`] regardless of ASCII
    /// case (`LIKE` in SQLite, `ILIKE` in PostgreSQL).
    pub like: &'static str,
    /// Whether `ORDER BY` says where NULLs go. SQLite's default (first
    /// ascending, last descending) is the order wanted, and saying it may
    /// keep its planner off an index.
    pub nulls: bool,
}

impl Dialect {
    pub const SQLITE: Dialect = Dialect {
        placeholder: Placeholder::Question,
        tasks: "tasks",
        like: "LIKE",
        nulls: false,
    };
    pub const POSTGRES: Dialect = Dialect {
        placeholder: Placeholder::Dollar,
        tasks: "rudder_tasks",
        like: "ILIKE",
        nulls: true,
    };
}

/// A parameter of a shared query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Text(Option<String>),
    Int(i64),
}

/// A statement's text and its parameters, in placeholder order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sql {
    style: Placeholder,
    pub text: String,
    pub params: Vec<Value>,
}

impl Sql {
    pub fn new(style: Placeholder) -> Self {
        Sql {
            style,
            text: String::new(),
            params: Vec::new(),
        }
    }

    /// Append SQL text.
    pub fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Add the parameter `value`; its placeholder, to put in the text.
    pub fn arg(&mut self, value: Value) -> String {
        self.params.push(value);
        let n = self.params.len();
        match self.style {
            Placeholder::Question => format!("?{n}"),
            Placeholder::Dollar => format!("${n}"),
        }
    }

    /// A text parameter's placeholder.
    pub fn text_arg(&mut self, value: impl Into<String>) -> String {
        self.arg(Value::Text(Some(value.into())))
    }
}

/// The time `older_than` before `now`, as stored (none if out of range).
fn cutoff(now: DateTime<Utc>, older_than: Duration) -> Option<String> {
    chrono::TimeDelta::from_std(older_than)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .map(time_text)
}

/// The unfinished tasks that may be reclaim candidates
/// ([`rudder_core::query::reclaim_candidate`] refines them), in store order.
pub fn stale(d: Dialect, columns: &str, now: DateTime<Utc>, older_than: Duration) -> Sql {
    let mut q = Sql::new(d.placeholder);
    let cutoff = q.arg(Value::Text(cutoff(now, older_than)));
    let future = q.text_arg(time_text(now + chrono::TimeDelta::seconds(1)));
    let now = q.text_arg(time_text(now));
    q.push(&format!(
        "SELECT {columns} FROM {} WHERE status IN ('working', 'input_required') \
         AND (updated_at IS NULL OR updated_at <= {cutoff} OR updated_at > {future} \
         OR (claimed_by IS NOT NULL AND lease_expires_at > {now})) ORDER BY seq",
        d.tasks
    ));
    q
}

/// The finished tasks that may be prune candidates
/// ([`rudder_core::query::prune_candidate`] refines them), in store order.
pub fn prunable(d: Dialect, columns: &str, now: DateTime<Utc>, older_than: Duration) -> Sql {
    let mut q = Sql::new(d.placeholder);
    let cutoff = q.arg(Value::Text(cutoff(now, older_than)));
    q.push(&format!(
        "SELECT {columns} FROM {} WHERE status IN ('completed', 'failed', 'cancelled') \
         AND (updated_at IS NULL OR ttl_ms IS NOT NULL OR updated_at <= {cutoff}) ORDER BY seq",
        d.tasks
    ));
    q
}

/// How many rows one [`claimable`] statement reads.
pub const CLAIMABLE_BATCH: usize = 32;

/// `seq` and the summary `columns` of the next [`CLAIMABLE_BATCH`]
/// unleased or lapsed working tasks after `seq` `after`, of one of `kinds`
/// (any when empty), oldest first ([`rudder_core::query::claimable`] refines them): a
/// walk of the (status, kind, seq) index.
pub fn claimable(
    d: Dialect,
    columns: &str,
    now: DateTime<Utc>,
    kinds: &[String],
    after: i64,
) -> Sql {
    let mut q = Sql::new(d.placeholder);
    let now = q.text_arg(time_text(now));
    let after = q.arg(Value::Int(after));
    let of_kind = match kinds {
        [] => String::new(),
        [one] => format!("AND kind = {} ", q.text_arg(one.clone())),
        many => {
            let list: Vec<String> = many.iter().map(|k| q.text_arg(k.clone())).collect();
            format!("AND kind IN ({}) ", list.join(", "))
        }
    };
    q.push(&format!(
        "SELECT seq, {columns} FROM {} WHERE status = 'working' {of_kind}\
         AND seq > {after} AND (claimed_by IS NULL OR lease_expires_at IS NULL \
         OR lease_expires_at <= {now}) ORDER BY seq LIMIT {CLAIMABLE_BATCH}",
        d.tasks
    ));
    q
}

/// The statement that reads a page's anchor: `seq`, `updated_at`,
/// `created_at`, `title` of the task `id`.
pub fn anchor(d: Dialect, id: &str) -> Sql {
    let mut q = Sql::new(d.placeholder);
    let id = q.text_arg(id);
    q.push(&format!(
        "SELECT seq, updated_at, created_at, title FROM {} WHERE task_id = {id}",
        d.tasks
    ));
    q
}

/// Where a page starts: the anchor's row as [`anchor`] read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub seq: i64,
    pub updated_at: Option<String>,
    pub created_at: Option<String>,
    pub title: Option<String>,
}

/// Choices a backend makes for a page from what it knows of the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageHints {
    /// Keep the planner off the status index (SQLite's `+status`): when
    /// the status filter keeps most tasks, reading the order's index and
    /// skipping the others finds a page sooner than sorting every match.
    pub status_unindexed: bool,
}

/// The statements of one page of `task_id, doc` rows, run one after the
/// other until `q.limit` rows are read (`done` says how many are, to cut
/// the next statement's limit): one or two segments of the page's order,
/// each a range of an index (a row comparison, not an OR, which would make
/// it a filter over the whole index). `anchor` is what [`anchor`] read of
/// `q.after` (none: not in the store, or no `after`).
pub fn page<'q>(
    d: Dialect,
    q: &'q PageQuery,
    anchor: Option<&Anchor>,
    hints: PageHints,
) -> Vec<Segment<'q>> {
    // Every order but the store's and the id's is (column NULLS FIRST,
    // task_id) walked forwards or backwards (`Updated` is it backwards),
    // as `query::compare` orders.
    let backwards = q.descending != (q.sort == SortKey::Updated);
    let (lt, dir) = if backwards {
        ("<", "DESC")
    } else {
        (">", "ASC")
    };
    let column = match q.sort {
        SortKey::Store | SortKey::Id => None,
        SortKey::Updated => Some("updated_at"),
        SortKey::Created => Some("created_at"),
        SortKey::Title => Some("title"),
    };
    let nulls = match (d.nulls, backwards) {
        (false, _) => "",
        (true, true) => " NULLS LAST",
        (true, false) => " NULLS FIRST",
    };
    let order = match (q.sort, column) {
        (SortKey::Store, _) => format!("seq {dir}"),
        (_, Some(col)) => format!("{col} {dir}{nulls}, task_id {dir}"),
        _ => format!("task_id {dir}"),
    };
    let value = anchor.and_then(|a| match q.sort {
        SortKey::Updated => a.updated_at.clone(),
        SortKey::Created => a.created_at.clone(),
        SortKey::Title => a.title.clone(),
        SortKey::Store | SortKey::Id => None,
    });
    let segments: Vec<Option<SegmentClause>> = match (&q.after, q.sort, column, anchor) {
        (None, ..) => vec![None],
        (Some(after), SortKey::Id, ..) => vec![Some(SegmentClause::IdAfter(after.clone()))],
        (Some(_), _, _, None) => vec![None],
        (Some(_), SortKey::Store, _, Some(a)) => vec![Some(SegmentClause::SeqAfter(a.seq))],
        (Some(after), _, Some(col), Some(_)) => match value {
            Some(v) => {
                let range = SegmentClause::Range(col, v, after.clone());
                if backwards {
                    // Below the anchor's value, then every NULL.
                    vec![Some(range), Some(SegmentClause::Null(col))]
                } else {
                    vec![Some(range)]
                }
            }
            None => {
                let nulls = SegmentClause::NullAfter(col, after.clone());
                if backwards {
                    vec![Some(nulls)]
                } else {
                    // The NULLs after the anchor, then every value.
                    vec![Some(nulls), Some(SegmentClause::NotNull(col))]
                }
            }
        },
        (Some(_), _, None, Some(_)) => vec![None],
    };
    segments
        .into_iter()
        .map(|segment| {
            let (q2, order) = (q, order.clone());
            Segment {
                build: Box::new(move |left: Option<usize>| {
                    let mut s = Sql::new(d.placeholder);
                    let mut clauses = filter_clauses(&mut s, d, q2, hints);
                    if let Some(seg) = &segment {
                        clauses.push(seg.sql(&mut s, lt));
                    }
                    let filter = if clauses.is_empty() {
                        String::new()
                    } else {
                        format!("WHERE {} ", clauses.join(" AND "))
                    };
                    let limit = left.map_or(String::new(), |l| {
                        format!(" LIMIT {}", l.min(i64::MAX as usize))
                    });
                    s.push(&format!(
                        "SELECT task_id, doc FROM {} {filter}ORDER BY {order}{limit}",
                        d.tasks
                    ));
                    s
                }),
            }
        })
        .collect()
}

/// One statement of a [`page`]: built with the number of rows still
/// wanted (none: no limit).
pub struct Segment<'q> {
    build: Box<dyn Fn(Option<usize>) -> Sql + 'q>,
}

impl Segment<'_> {
    pub fn sql(&self, left: Option<usize>) -> Sql {
        (self.build)(left)
    }
}

/// Where one segment of a page's order starts.
enum SegmentClause {
    IdAfter(String),
    SeqAfter(i64),
    /// (column, task_id) after (value, id).
    Range(&'static str, String, String),
    Null(&'static str),
    NotNull(&'static str),
    /// column IS NULL and task_id after id.
    NullAfter(&'static str, String),
}

impl SegmentClause {
    fn sql(&self, s: &mut Sql, lt: &str) -> String {
        match self {
            SegmentClause::IdAfter(id) => format!("task_id {lt} {}", s.text_arg(id.clone())),
            SegmentClause::SeqAfter(seq) => format!("seq {lt} {seq}"),
            SegmentClause::Range(col, v, id) => {
                let (v, id) = (s.text_arg(v.clone()), s.text_arg(id.clone()));
                format!("({col}, task_id) {lt} ({v}, {id})")
            }
            SegmentClause::Null(col) => format!("{col} IS NULL"),
            SegmentClause::NotNull(col) => format!("{col} IS NOT NULL"),
            SegmentClause::NullAfter(col, id) => {
                format!("{col} IS NULL AND task_id {lt} {}", s.text_arg(id.clone()))
            }
        }
    }
}

/// The page's filter: statuses, kinds and text.
fn filter_clauses(s: &mut Sql, d: Dialect, q: &PageQuery, hints: PageHints) -> Vec<String> {
    let mut clauses = Vec::new();
    if !q.statuses.is_empty() {
        let list: Vec<String> = q
            .statuses
            .iter()
            .map(|st| s.text_arg(st.as_str()))
            .collect();
        let column = if hints.status_unindexed {
            "+status"
        } else {
            "status"
        };
        clauses.push(format!("{column} IN ({})", list.join(", ")));
    }
    if !q.kinds.is_empty() {
        let list: Vec<String> = q.kinds.iter().map(|k| s.text_arg(k.clone())).collect();
        clauses.push(format!("kind IN ({})", list.join(", ")));
    }
    if let Some(text) = q.text.as_deref().filter(|t| !t.is_empty()) {
        clauses.push(text_clause(s, d, text));
    }
    clauses
}

/// The text filter (`query::text_matches`): the case-folding `LIKE` of
/// the dialect folds ASCII letters only and matches every other character
/// exactly, as the reference does (PostgreSQL's under the `C` collation).
/// The status, one of five words, is matched here and asked as a list,
/// so that every arm is an index scan where there is an index (the
/// trigram indexes of PostgreSQL's schema version 3).
fn text_clause(s: &mut Sql, d: Dialect, text: &str) -> String {
    let pattern = s.text_arg(like_pattern(text));
    let like = d.like;
    let mut arms: Vec<String> = ["task_id", "title", "idempotency_key", "status_message"]
        .iter()
        .map(|col| format!("{col} {like} {pattern} ESCAPE '\\'"))
        .collect();
    let statuses: Vec<String> = Status::ALL
        .iter()
        .filter(|st| contains_text(st.as_str(), text))
        .map(|st| format!("'{}'", st.as_str()))
        .collect();
    if !statuses.is_empty() {
        arms.push(format!("status IN ({})", statuses.join(", ")));
    }
    format!("({})", arms.join(" OR "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn the_same_query_numbers_its_placeholders_in_either_style() {
        let a = prunable(Dialect::SQLITE, "task_id", now(), Duration::from_secs(60));
        let b = prunable(Dialect::POSTGRES, "task_id", now(), Duration::from_secs(60));
        assert!(a.text.contains("updated_at <= ?1") && a.text.contains("FROM tasks "));
        assert!(b.text.contains("updated_at <= $1") && b.text.contains("FROM rudder_tasks "));
        assert_eq!(a.params, b.params);
        assert_eq!(
            a.text
                .replace("?1", "$1")
                .replace("FROM tasks", "FROM rudder_tasks"),
            b.text
        );
    }

    #[test]
    fn parameters_follow_their_placeholders() {
        let kinds = vec!["a".to_string(), "b".to_string()];
        let q = claimable(Dialect::POSTGRES, "task_id", now(), &kinds, 7);
        assert!(q.text.contains("kind IN ($3, $4)"));
        assert!(q.text.contains("seq > $2") && q.text.contains("lease_expires_at <= $1"));
        assert_eq!(q.params[1], Value::Int(7));
        assert_eq!(q.params[3], Value::Text(Some("b".into())));
    }

    #[test]
    fn every_segment_binds_only_what_it_names() {
        let q = PageQuery {
            statuses: vec![Status::Working],
            sort: SortKey::Updated,
            after: Some("t1".into()),
            limit: Some(5),
            ..PageQuery::default()
        };
        let anchor = Anchor {
            seq: 3,
            updated_at: Some("2026".into()),
            created_at: None,
            title: None,
        };
        let segments = page(Dialect::SQLITE, &q, Some(&anchor), PageHints::default());
        // Newest first is backwards by update: below the anchor, then the
        // NULLs.
        assert_eq!(segments.len(), 2);
        let s = segments[0].sql(Some(5));
        assert_eq!(s.params.len(), 3);
        assert!(
            s.text.contains("(updated_at, task_id) < (?2, ?3)"),
            "{}",
            s.text
        );
        assert!(s.text.ends_with("LIMIT 5"));
        let s = segments[1].sql(Some(2));
        assert_eq!(s.params.len(), 1);
        assert!(s.text.contains("updated_at IS NULL"), "{}", s.text);
    }
}
