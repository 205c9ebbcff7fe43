//! Marked tasks (Space, `*`): the tasks `c` and `R` act on together.
//! Marks follow task ids, so they survive re-sorting and filtering; a mark
//! whose task vanished from the store is dropped.

pub use crate::app::Marks;
use crate::app::{App, Tone};

impl App {
    /// The task `id` as last seen, if it is still in the store. (Marks and
    /// bulk actions look tasks up only through here.)
    pub fn task_by_id(&self, id: &str) -> Option<&rudder_model::task::Task> {
        self.tasks.get(id).or_else(|| self.marked_outside.get(id))
    }

    /// The ids of every row the filter shows, in table order.
    pub fn visible_ids(&self) -> Vec<String> {
        (0..self.rows.len())
            .filter_map(|row| self.row_task(row).map(|t| t.task_id.clone()))
            .collect()
    }

    /// Space: mark or unmark the selected task.
    pub fn toggle_mark(&mut self) {
        let Some(id) = self.selected.clone() else {
            self.say(Tone::Warning, "no task selected");
            return;
        };
        let marked = self.marks.toggle(&id);
        let short = rudder_model::text::clean(rudder_model::task::short_id(&id), 8);
        let n = self.marks.len();
        self.say(
            Tone::Info,
            if marked {
                format!("marked {short} ({n} marked)")
            } else {
                format!("unmarked {short} ({n} marked)")
            },
        );
    }

    /// `*`: mark every task the filter shows; when all of them are marked
    /// already, unmark them instead.
    pub fn mark_all(&mut self) {
        let visible = self.visible_ids();
        if visible.is_empty() {
            self.say(Tone::Warning, "no task to mark");
            return;
        }
        let all = visible.iter().all(|id| self.marks.contains(id));
        for id in &visible {
            if self.marks.contains(id) == all {
                self.marks.toggle(id);
            }
        }
        let n = self.marks.len();
        let shown = visible.len();
        self.say(
            Tone::Info,
            if all {
                format!("unmarked the {shown} task(s) shown ({n} marked)")
            } else {
                format!("marked the {shown} task(s) shown ({n} marked)")
            },
        );
    }

    /// Drop the marks of tasks no longer in the store.
    pub(crate) fn prune_marks(&mut self) {
        if self.marks.is_empty() {
            return;
        }
        let mut marks = std::mem::take(&mut self.marks);
        marks.ids.retain(|id| self.task_by_id(id).is_some());
        self.marks = marks;
    }
}

/// How many tasks a dialog names before "… and N more".
pub const NAMED: usize = 5;

/// How a dialog names a task: short id and title (sanitized, cut).
pub fn label(task: &rudder_model::task::Task) -> String {
    match task.label() {
        Some(l) => format!(
            "{} \"{}\"",
            rudder_model::text::clean(task.short_id(), 8),
            rudder_model::text::clean(crate::shown::head(l), 40)
        ),
        None => rudder_model::text::clean(task.short_id(), 8),
    }
}

impl App {
    /// `c` with marks: one y/n for every marked task that can still be
    /// cancelled; finished ones are named as left alone, and if none is
    /// left the cancel is refused at once.
    pub(crate) fn ask_cancel_marked(&mut self) {
        if self.read_only {
            self.say(Tone::Warning, self.read_only_note());
            return;
        }
        let mut tasks = Vec::new();
        let mut finished = Vec::new();
        for id in self.marks.ids() {
            match self.task_by_id(id) {
                Some(t) if t.status.is_terminal() => {
                    finished.push(format!("{} ({})", label(t), t.status));
                }
                Some(t) => tasks.push((id.clone(), label(t))),
                None => {}
            }
        }
        if tasks.is_empty() {
            self.say(
                Tone::Warning,
                format!(
                    "cannot cancel: all {} marked task(s) are finished, and a finished task never changes",
                    finished.len()
                ),
            );
            return;
        }
        self.popup = crate::app::Popup::ConfirmCancelMany {
            tasks,
            finished,
            reason: None,
        };
    }

    /// What a bulk cancel did, task by task: a dialog listing each, and a
    /// summary in the status line.
    pub(crate) fn cancelled_many(
        &mut self,
        results: Vec<(
            String,
            Result<rudder_store::Outcome, rudder_store::StoreError>,
        )>,
    ) {
        use rudder_model::task::Change;
        let (mut applied, mut unchanged, mut refused) = (0, 0, 0);
        let mut lines = Vec::new();
        for (id, result) in results {
            let short = rudder_model::text::clean(rudder_model::task::short_id(&id), 8);
            let (tone, text) = match result {
                Ok(o) if o.change == Change::Applied => {
                    applied += 1;
                    (Tone::Success, format!("✔ {short} cancelled"))
                }
                Ok(o) => {
                    unchanged += 1;
                    (
                        Tone::Info,
                        format!("= {short} unchanged: it was already {}", o.task.status),
                    )
                }
                Err(e) => {
                    refused += 1;
                    let what = if e.task().is_some() {
                        "refused"
                    } else {
                        "failed"
                    };
                    (
                        Tone::Error,
                        format!(
                            "✖ {short} {what}: {}",
                            rudder_model::text::truncate(&crate::errors::error_line(&e), 300)
                        ),
                    )
                }
            };
            lines.push((tone, text));
        }
        let total = applied + unchanged + refused;
        let tone = if refused > 0 {
            Tone::Error
        } else if unchanged > 0 {
            Tone::Warning
        } else {
            Tone::Success
        };
        self.say(
            tone,
            format!("cancel of {total} task(s): {applied} cancelled, {unchanged} unchanged, {refused} refused"),
        );
        self.popup = crate::app::Popup::BulkDone {
            title: format!("cancel {total} task(s)"),
            lines,
        };
    }
}
