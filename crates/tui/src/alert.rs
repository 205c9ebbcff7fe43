//! Telling the person at the TUI that a task started waiting for input
//! (issue 34, docs/notify.md "In the TUI"): the terminal bell, or a desktop
//! notification through the terminal (OSC 777 where the terminal is known
//! to take it, OSC 9 elsewhere), as the config file's `notify` says; once
//! per task and round. A round is the revision at which the task entered
//! `input_required`, as the change feed reports the transition: a second
//! question is a new round, the writes between are none.

use std::collections::HashSet;
use std::io::{self, Write};

use rudder_model::task::{Status, TaskMap};
use rudder_model::text::clean;
use rudder_store::watch::TaskChange;

/// The config's `notify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NotifyMode {
    /// The terminal bell (BEL).
    #[default]
    Bell,
    /// A desktop notification through the terminal (OSC 9 / OSC 777).
    Desktop,
    /// Nothing.
    Off,
}

impl NotifyMode {
    /// The mode a config value names, if any.
    pub fn named(name: &str) -> Option<NotifyMode> {
        match name {
            "bell" => Some(NotifyMode::Bell),
            "desktop" => Some(NotifyMode::Desktop),
            "off" => Some(NotifyMode::Off),
            _ => None,
        }
    }

    /// The names a config may give, for its message.
    pub const NAMES: &'static str = "bell, desktop, off";
}

/// A task that started waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// What the notification says: the task's label or short id.
    pub label: String,
}

/// The rounds told of, and what is still to tell.
#[derive(Debug, Default)]
pub struct Alerts {
    rung: HashSet<(String, u64)>,
    pending: Vec<Alert>,
}

impl Alerts {
    /// Take in the feed's changes: each task that entered `input_required`
    /// (a new task with a schema too) in a round not told of yet is to be
    /// told of. `tasks` gives the label of those the TUI holds.
    pub fn see(&mut self, changes: &[TaskChange], tasks: &TaskMap) {
        for c in changes {
            let entered = c.to == Some(Status::InputRequired) && c.from != c.to;
            if !entered || !self.rung.insert((c.task_id.clone(), c.revision)) {
                continue;
            }
            let label = tasks
                .get(&c.task_id)
                .and_then(|t| t.label().map(str::to_string))
                .unwrap_or_else(|| rudder_model::task::short_id(&c.task_id).to_string());
            self.pending.push(Alert { label });
        }
    }

    /// What is to be told now (emptied).
    pub fn take(&mut self) -> Vec<Alert> {
        std::mem::take(&mut self.pending)
    }
}

/// Whether the terminal is known to turn OSC 777 into a desktop
/// notification (VTE-based terminals, foot); others get OSC 9, which
/// iTerm2, WezTerm, kitty, Windows Terminal and Ghostty take. One of the
/// two, never both, so that a terminal that knows both shows one.
pub fn prefers_777() -> bool {
    std::env::var_os("VTE_VERSION").is_some_and(|v| !v.is_empty())
        || std::env::var("TERM").is_ok_and(|t| t.starts_with("foot"))
}

/// Tell of `alerts` on `out` as `mode` says: one bell for any number, or
/// one desktop notification each. Task text is cleaned of escapes and
/// control characters first, so a title cannot end the sequence early.
pub fn write(
    out: &mut impl Write,
    mode: NotifyMode,
    osc777: bool,
    alerts: &[Alert],
) -> io::Result<()> {
    if alerts.is_empty() {
        return Ok(());
    }
    match mode {
        NotifyMode::Off => return Ok(()),
        NotifyMode::Bell => out.write_all(b"\x07")?,
        NotifyMode::Desktop => {
            for a in alerts {
                let body = format!("needs input: {}", clean(&a.label, 120).replace(';', ","));
                if osc777 {
                    write!(out, "\x1b]777;notify;rudder;{body}\x07")?;
                } else {
                    write!(out, "\x1b]9;rudder: {body}\x07")?;
                }
            }
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rudder_model::task::Task;

    fn change(id: &str, revision: u64, from: Option<Status>, to: Option<Status>) -> TaskChange {
        TaskChange {
            task_id: id.into(),
            revision,
            from,
            to,
            at: None,
        }
    }

    #[test]
    fn once_per_task_and_round() {
        let mut a = Alerts::default();
        let mut tasks = TaskMap::new();
        let mut t = Task::new("t1", Status::InputRequired);
        t.title = Some("deploy".into());
        tasks.insert("t1".into(), t);
        let asks = change("t1", 3, Some(Status::Working), Some(Status::InputRequired));
        a.see(std::slice::from_ref(&asks), &tasks);
        // The same transition reported again (a feed that re-read) and a
        // write while it waits: no second alert.
        a.see(&[asks], &tasks);
        a.see(
            &[change(
                "t1",
                4,
                Some(Status::InputRequired),
                Some(Status::InputRequired),
            )],
            &tasks,
        );
        assert_eq!(
            a.take(),
            vec![Alert {
                label: "deploy".into()
            }]
        );
        // Answered, then a second question: a new round.
        a.see(
            &[
                change("t1", 5, Some(Status::InputRequired), Some(Status::Working)),
                change("t1", 6, Some(Status::Working), Some(Status::InputRequired)),
            ],
            &tasks,
        );
        assert_eq!(a.take().len(), 1);
        // A new task created waiting counts; one created working does not.
        a.see(
            &[
                change("t2abcdefgh", 1, None, Some(Status::InputRequired)),
                change("t3", 1, None, Some(Status::Working)),
            ],
            &tasks,
        );
        assert_eq!(
            a.take(),
            vec![Alert {
                label: "t2abcdef".into()
            }]
        );
    }

    #[test]
    fn each_mode_writes_what_it_says_and_task_text_stays_inert() {
        let alerts = [Alert {
            label: "x\u{1b}]0;pwned\u{7};y".into(),
        }];
        let out = |mode, osc777| {
            let mut v = Vec::new();
            write(&mut v, mode, osc777, &alerts).unwrap();
            String::from_utf8(v).unwrap()
        };
        assert_eq!(out(NotifyMode::Bell, false), "\x07");
        assert_eq!(out(NotifyMode::Off, false), "");
        let nine = out(NotifyMode::Desktop, false);
        assert!(
            nine.starts_with("\x1b]9;rudder: needs input: x"),
            "{nine:?}"
        );
        assert_eq!(nine.matches('\x07').count(), 1, "{nine:?}");
        assert_eq!(nine.matches('\x1b').count(), 1, "{nine:?}");
        let sss = out(NotifyMode::Desktop, true);
        assert!(
            sss.starts_with("\x1b]777;notify;rudder;needs input: x"),
            "{sss:?}"
        );
        assert_eq!(sss.matches(';').count(), 3, "{sss:?}");
        let mut none = Vec::new();
        write(&mut none, NotifyMode::Bell, false, &[]).unwrap();
        assert!(none.is_empty());
    }
}
