//! What changed between two snapshots of the tasks the TUI shows, computed
//! by comparing them.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::task::{Status, TaskMap};

/// A status change observed between two snapshots. `from` is `None` for a
/// task that appeared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Transition {
    /// The task.
    pub task_id: String,
    /// The status before.
    pub from: Option<Status>,
    /// The status after.
    pub to: Status,
    /// When the writer says it happened (`updated_at`), else when it was seen.
    pub at: DateTime<Utc>,
}

/// The difference between two snapshots.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Diff {
    /// Status changes and new tasks, in file order.
    pub transitions: Vec<Transition>,
    /// Ids of tasks that appeared.
    pub appeared: Vec<String>,
    /// Ids of tasks that are gone.
    pub vanished: Vec<String>,
    /// Ids of tasks present in both whose content changed (status or not).
    pub changed: Vec<String>,
}

impl Diff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.appeared.is_empty() && self.vanished.is_empty() && self.changed.is_empty()
    }
}

/// Compare `old` with `new`; `seen_at` stands in for tasks without `updated_at`.
pub fn diff(old: &TaskMap, new: &TaskMap, seen_at: DateTime<Utc>) -> Diff {
    let mut d = Diff::default();
    for (id, task) in new {
        let at = task.updated_at.unwrap_or(seen_at);
        match old.get(id) {
            None => {
                d.appeared.push(id.clone());
                d.transitions.push(Transition {
                    task_id: id.clone(),
                    from: None,
                    to: task.status,
                    at,
                });
            }
            Some(before) if before != task => {
                d.changed.push(id.clone());
                if before.status != task.status {
                    d.transitions.push(Transition {
                        task_id: id.clone(),
                        from: Some(before.status),
                        to: task.status,
                        at,
                    });
                }
            }
            Some(_) => {}
        }
    }
    d.vanished = old
        .keys()
        .filter(|id| !new.contains_key(*id))
        .cloned()
        .collect();
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Task;

    fn map(tasks: &[(&str, Status, u64)]) -> TaskMap {
        tasks
            .iter()
            .map(|(id, st, rev)| {
                let mut t = Task::new(*id, *st);
                t.revision = *rev;
                (id.to_string(), t)
            })
            .collect()
    }

    #[test]
    fn transitions_appearances_and_removals() {
        let old = map(&[
            ("a", Status::Working, 1),
            ("b", Status::InputRequired, 1),
            ("c", Status::Working, 1),
        ]);
        let new = map(&[
            ("a", Status::Working, 2),
            ("b", Status::Working, 2),
            ("d", Status::InputRequired, 1),
        ]);
        let d = diff(&old, &new, Utc::now());
        assert_eq!(d.appeared, ["d"]);
        assert_eq!(d.vanished, ["c"]);
        assert_eq!(d.changed, ["a", "b"]);
        let t: Vec<_> = d
            .transitions
            .iter()
            .map(|t| (t.task_id.as_str(), t.from, t.to))
            .collect();
        assert_eq!(
            t,
            [
                ("b", Some(Status::InputRequired), Status::Working),
                ("d", None, Status::InputRequired)
            ]
        );
        assert!(diff(&new, &new, Utc::now()).is_empty());
    }
}
