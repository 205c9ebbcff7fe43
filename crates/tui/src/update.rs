//! The update function: keys and mouse events change the [`App`] and may ask
//! for [`Effect`]s (store writes, clipboard, worker control), which the loop
//! runs and answers with an [`EffectResult`]. Nothing here touches a terminal,
//! so every behaviour is testable with plain key sequences.

use std::time::Duration;

use crossterm::event::{
    Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use tui_input::Input;

use crate::app::{App, DEFAULT_RECLAIM_AGE, Popup, Tone};
use crate::errors::error_line;
use crate::form::Form;
use crate::keys::{Action, Key, Scope};
use crate::reason::Answer;
use rudder_model::task::{Change, Status};
use rudder_model::text::sanitize;
use rudder_store::Outcome;
use rudder_store::{ReclaimReport, Store, StoreError};

/// Something the loop must do outside the state: a store call, the
/// clipboard, the demo worker.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Give input, only if the task is still at `revision`.
    ProvideInput {
        /// The task to answer.
        task_id: String,
        /// The validated input.
        value: serde_json::Value,
        /// The revision the form was opened at.
        revision: u64,
    },
    /// Cancel a task (after the y/n).
    Cancel {
        /// The task to cancel.
        task_id: String,
        /// Why, as the person gave it (recorded on the history).
        reason: Option<String>,
    },
    /// Cancel each of these tasks, one after the other (after one y/n).
    CancelMany {
        /// The tasks to cancel.
        task_ids: Vec<String>,
        /// Why, as the person gave it (recorded on each task's history).
        reason: Option<String>,
    },
    /// A dry run, for the preview.
    ReclaimPreview {
        /// Only tasks idle at least this long.
        older_than: Duration,
    },
    /// Fail the tasks the preview showed (after the y/n): each only if it
    /// is still at the revision the preview saw and still idle at least
    /// `older_than`. A task that went idle after the preview is not touched.
    Reclaim {
        /// The previewed tasks: id and the revision the preview saw.
        tasks: Vec<(String, u64)>,
        /// Only tasks idle at least this long.
        older_than: Duration,
        /// Why, as the person gave it (recorded on each task's history).
        reason: Option<String>,
    },
    /// Copy to the clipboard with OSC 52.
    Copy(String),
    /// Kill the demo worker (SIGKILL).
    KillWorker,
    /// Start a new demo worker.
    StartWorker,
}

/// The answer to a store [`Effect`].
#[derive(Debug)]
pub enum EffectResult {
    /// The answer to [`Effect::ProvideInput`].
    Input {
        /// The task that was answered.
        task_id: String,
        /// The task as it now is, or why not.
        result: Result<Outcome, StoreError>,
    },
    /// The answer to [`Effect::Cancel`].
    Cancel {
        /// The task cancelled.
        task_id: String,
        /// The task as it now is, or why not.
        result: Result<Outcome, StoreError>,
    },
    /// The answer to [`Effect::CancelMany`], task by task.
    CancelMany {
        /// Each task and how its cancel went.
        results: Vec<(String, Result<Outcome, StoreError>)>,
    },
    /// The answer to [`Effect::ReclaimPreview`].
    ReclaimPreview {
        /// The age asked for.
        older_than: Duration,
        /// The dry run's report, or why not.
        result: Result<Previewed, StoreError>,
    },
    /// The answer to [`Effect::Reclaim`].
    Reclaim {
        /// The report, or why not.
        result: Result<ReclaimReport, StoreError>,
    },
    /// The store call for `effect` panicked (a bug): there is no answer.
    Panicked {
        /// What was asked.
        effect: Effect,
        /// The panic's message.
        message: String,
    },
}

/// What the reclaim preview showed.
#[derive(Debug, Clone, PartialEq)]
pub struct Previewed {
    /// The dry run's report.
    pub report: ReclaimReport,
    /// The tasks it would reclaim, each with the revision the dry run saw;
    /// the confirmed reclaim is limited to exactly these.
    pub tasks: Vec<(String, u64)>,
}

/// The dry run of reclaim, with the revision at which it saw each task it
/// would reclaim: the confirmed reclaim is limited to exactly those.
fn reclaim_preview(store: &Store, older_than: Duration) -> Result<Previewed, StoreError> {
    let report = store.reclaim(older_than, true)?;
    let tasks = report
        .reclaimed
        .iter()
        .map(|r| (r.task_id.clone(), r.revision))
        .collect();
    Ok(Previewed { report, tasks })
}

/// Run a store effect against `store` (blocking file I/O; the loop calls it
/// off the render path). Non-store effects return `None`.
pub fn execute(store: &Store, effect: Effect) -> Option<EffectResult> {
    Some(match effect {
        Effect::ProvideInput {
            task_id,
            value,
            revision,
        } => EffectResult::Input {
            result: store.provide_input(&task_id, value, Some(revision)),
            task_id,
        },
        // The history says who cancelled and through which face (the
        // author); the reason is the person's own, or none.
        Effect::Cancel { task_id, reason } => EffectResult::Cancel {
            result: store.cancel(&task_id, reason),
            task_id,
        },
        Effect::CancelMany { task_ids, reason } => EffectResult::CancelMany {
            // Each cancel is its own transaction: quitting half-way leaves
            // the ones done done and the others untouched.
            results: task_ids
                .into_iter()
                .map(|id| {
                    let r = store.cancel(&id, reason.clone());
                    (id, r)
                })
                .collect(),
        },
        Effect::ReclaimPreview { older_than } => EffectResult::ReclaimPreview {
            older_than,
            result: reclaim_preview(store, older_than),
        },
        Effect::Reclaim {
            tasks,
            older_than,
            reason,
        } => EffectResult::Reclaim {
            result: store.reclaim_tasks_because(&tasks, older_than, reason.as_deref()),
        },
        Effect::Copy(_) | Effect::KillWorker | Effect::StartWorker => return None,
    })
}

pub(crate) use crate::keys::text_request;

impl App {
    /// Handle one terminal event; returns what the loop must do.
    pub fn handle_event(&mut self, event: &Event) -> Vec<Effect> {
        match event {
            Event::Key(key) if key.kind != KeyEventKind::Release => self.handle_key(*key),
            Event::Mouse(m) => {
                self.handle_mouse(*m);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// Handle one key press.
    pub fn handle_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            self.quit = true;
            return Vec::new();
        }
        if self.filter.editing.is_some() {
            self.filter_key(key);
            return Vec::new();
        }
        match std::mem::take(&mut self.popup) {
            Popup::None => self.main_key(key),
            // The scroll keys scroll it; any other key closes it, as it
            // says (q too, without quitting).
            Popup::Help { scroll, page } => {
                let demo = self.worker.is_some();
                let scroll = match self.keys.action(Scope::View, demo, Key::of(key)) {
                    Some(Action::Down) => Some(scroll.saturating_add(1)),
                    Some(Action::Up) => Some(scroll.saturating_sub(1)),
                    Some(Action::PageDown) => Some(scroll.saturating_add(page.max(1))),
                    Some(Action::PageUp) => Some(scroll.saturating_sub(page.max(1))),
                    Some(Action::First) => Some(0),
                    // Drawing clamps it to the last row.
                    Some(Action::Last) => Some(usize::MAX),
                    _ => None,
                };
                if let Some(scroll) = scroll {
                    self.popup = Popup::Help { scroll, page };
                }
                Vec::new()
            }
            Popup::Form(form) => self.form_key(form, key),
            Popup::View(view) => {
                self.view_key(view, key);
                Vec::new()
            }
            Popup::ConfirmCancelMany {
                tasks,
                finished,
                mut reason,
            } => match crate::reason::key(&mut reason, key, true, false) {
                Answer::Yes(reason) => {
                    self.say(Tone::Info, format!("cancelling {} task(s)…", tasks.len()));
                    // The marks were acted on; what happened to each is
                    // reported when the store answers.
                    self.marks.clear();
                    vec![Effect::CancelMany {
                        task_ids: tasks.into_iter().map(|(id, _)| id).collect(),
                        reason,
                    }]
                }
                Answer::No => {
                    self.say(Tone::Info, "cancel: nothing done (the marks stay)");
                    Vec::new()
                }
                Answer::Stay => {
                    self.popup = Popup::ConfirmCancelMany {
                        tasks,
                        finished,
                        reason,
                    };
                    Vec::new()
                }
            },
            Popup::BulkDone { .. } => Vec::new(),
            Popup::ConfirmCancel {
                task_id,
                label,
                mut reason,
            } => match crate::reason::key(&mut reason, key, true, false) {
                Answer::Yes(reason) => {
                    self.say(Tone::Info, format!("cancelling {label}…"));
                    vec![Effect::Cancel { task_id, reason }]
                }
                Answer::No => {
                    self.say(Tone::Info, "cancel: nothing done");
                    Vec::new()
                }
                Answer::Stay => {
                    self.popup = Popup::ConfirmCancel {
                        task_id,
                        label,
                        reason,
                    };
                    Vec::new()
                }
            },
            Popup::ReclaimAge {
                mut input,
                error,
                only,
            } => match key.code {
                KeyCode::Esc => {
                    self.say(Tone::Info, "reclaim: nothing done");
                    Vec::new()
                }
                KeyCode::Enter => match rudder_model::duration::parse_duration(input.value()) {
                    Ok(older_than) => {
                        let age = input.value().trim().to_string();
                        self.popup = Popup::ReclaimLoading {
                            older_than,
                            age,
                            only,
                        };
                        vec![Effect::ReclaimPreview { older_than }]
                    }
                    Err(e) => {
                        self.popup = Popup::ReclaimAge {
                            input,
                            error: Some(e),
                            only,
                        };
                        Vec::new()
                    }
                },
                _ => {
                    if let Some(req) = text_request(key) {
                        input.handle(req);
                    }
                    self.popup = Popup::ReclaimAge { input, error, only };
                    Vec::new()
                }
            },
            Popup::ReclaimLoading {
                older_than,
                age,
                only,
            } => {
                if key.code == KeyCode::Esc {
                    self.say(Tone::Info, "reclaim: nothing done");
                } else if key.code == KeyCode::Char('q') {
                    // Nothing is written before the preview's y/n.
                    self.quit = true;
                } else {
                    self.popup = Popup::ReclaimLoading {
                        older_than,
                        age,
                        only,
                    };
                }
                Vec::new()
            }
            Popup::ReclaimPreview {
                older_than,
                age,
                report,
                tasks,
                mut reason,
            } => match crate::reason::key(&mut reason, key, !tasks.is_empty(), true) {
                Answer::Yes(reason) => {
                    self.say(Tone::Info, format!("reclaiming {} task(s)…", tasks.len()));
                    // With marks, the preview was of the marked tasks: they
                    // were acted on (the report says how each went).
                    self.marks.clear();
                    // Only the tasks shown, at the revisions shown: the
                    // store skips any that changed since.
                    vec![Effect::Reclaim {
                        tasks,
                        older_than,
                        reason,
                    }]
                }
                Answer::No => {
                    self.say(Tone::Info, "reclaim: nothing done");
                    Vec::new()
                }
                Answer::Stay => {
                    self.popup = Popup::ReclaimPreview {
                        older_than,
                        age,
                        report,
                        tasks,
                        reason,
                    };
                    Vec::new()
                }
            },
            Popup::ReclaimDone { .. } => Vec::new(),
        }
    }

    fn main_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let page = self.page.max(1);
        let demo = self.worker.is_some();
        let Some(action) = self.keys.action(Scope::List, demo, Key::of(key)) else {
            return Vec::new();
        };
        match action {
            Action::Quit => self.quit = true,
            Action::Down => self.select_row(self.cursor.saturating_add(1)),
            Action::Up => self.select_row(self.cursor.saturating_sub(1)),
            Action::First => self.select_row(0),
            Action::Last => self.select_row(usize::MAX),
            Action::PageDown => self.select_row(self.cursor.saturating_add(page)),
            Action::PageUp => self.select_row(self.cursor.saturating_sub(page)),
            Action::DetailDown => self.detail_scroll = self.detail_scroll.saturating_add(3),
            Action::DetailUp => self.detail_scroll = self.detail_scroll.saturating_sub(3),
            Action::Help => self.popup = Popup::Help { scroll: 0, page: 0 },
            Action::Input => self.open_form(true),
            Action::Open => {
                if self
                    .selected_task()
                    .is_some_and(|t| t.status == Status::InputRequired)
                {
                    self.open_form(false);
                } else {
                    self.open_view();
                }
            }
            Action::View => self.open_view(),
            Action::Mark => self.toggle_mark(),
            Action::MarkAll => self.mark_all(),
            Action::Cancel => self.ask_cancel(),
            Action::Reclaim => {
                if self.read_only {
                    self.say(Tone::Warning, self.read_only_note());
                } else {
                    let only = (!self.marks.is_empty())
                        .then(|| self.marks.ids().cloned().collect::<Vec<_>>());
                    self.popup = Popup::ReclaimAge {
                        input: Input::new(DEFAULT_RECLAIM_AGE.into()),
                        error: None,
                        only,
                    };
                }
            }
            Action::Filter => {
                self.filter.editing = Some(Input::new(self.filter.text.clone()));
            }
            Action::ClearFilters => {
                if self.filter.active() {
                    self.filter.text.clear();
                    self.filter.statuses = [false; 5];
                    self.rebuild();
                    self.say(Tone::Info, "filters cleared");
                }
            }
            Action::StatusFilter(i) => {
                let i = usize::from(i).min(4);
                self.filter.statuses[i] = !self.filter.statuses[i];
                self.rebuild();
            }
            Action::Sort => {
                self.sort = self.sort.next();
                self.rebuild();
                self.say(Tone::Info, format!("sorted by {}", self.sort.label()));
            }
            Action::Resort => {
                let moved = self.out_of_order;
                let off = self.resort();
                // Where the selection leaves no room for them on screen,
                // say where the tasks that moved went.
                let off = match off.first() {
                    Some(first) => format!(
                        ", {} of them off screen (the first at row {})",
                        off.len(),
                        first + 1
                    ),
                    None => String::new(),
                };
                self.say(
                    Tone::Info,
                    match moved {
                        0 => format!("rows already sorted by {}", self.sort.label()),
                        n => format!("re-sorted by {}: {n} row(s) moved{off}", self.sort.label()),
                    },
                );
            }
            Action::Pause => self.toggle_pause(),
            Action::Copy => match self.selected.clone() {
                // Only what the screen shows goes to the clipboard: an id
                // holding control characters or escapes (a crafted store) is
                // refused rather than pasted into someone's shell.
                Some(id) if rudder_model::text::sanitize(&id) != id.as_str() => self.say(
                    Tone::Warning,
                    format!(
                        "not copied: this task id holds control characters or escape sequences ({})",
                        rudder_model::text::clean(&id, 60)
                    ),
                ),
                Some(id) => {
                    self.say(Tone::Success, format!("copied {id} (OSC 52)"));
                    return vec![Effect::Copy(id)];
                }
                None => self.say(Tone::Warning, "no task selected"),
            },
            Action::KillWorker => return vec![Effect::KillWorker],
            Action::StartWorker => return vec![Effect::StartWorker],
            // Keys of the task view and the form do nothing on the list.
            Action::Search
            | Action::NextMatch
            | Action::PrevMatch
            | Action::Back
            | Action::FormNext
            | Action::FormPrev
            | Action::FormSubmit
            | Action::FormRaw
            | Action::FormClose => {}
        }
        Vec::new()
    }

    fn filter_key(&mut self, key: KeyEvent) {
        let Some(input) = self.filter.editing.as_mut() else {
            return;
        };
        // Rows are rebuilt only when the filter changed: Enter and cursor
        // moves leave them as they are (a rebuild sorts every task).
        match key.code {
            KeyCode::Enter => {
                self.filter.editing = None;
                return;
            }
            KeyCode::Esc => {
                self.filter.editing = None;
                if self.filter.text.is_empty() {
                    return;
                }
                self.filter.text.clear();
            }
            _ => {
                if let Some(req) = text_request(key) {
                    input.handle(req);
                }
                let text = input.value().to_lowercase();
                if text == self.filter.text {
                    return;
                }
                self.filter.text = text;
            }
        }
        self.rebuild();
    }

    /// Open the form on the selected task. `explicit` is `i`, which says why
    /// it cannot; Enter on a task that is not waiting does nothing.
    fn open_form(&mut self, explicit: bool) {
        let Some(task) = self.selected_task() else {
            if explicit {
                self.say(Tone::Warning, "no task selected");
            }
            return;
        };
        if task.status != Status::InputRequired {
            if explicit {
                let msg = format!(
                    "{} is {}: only a task waiting for input takes input",
                    task.short_id(),
                    task.status
                );
                self.say(Tone::Warning, msg);
            }
            return;
        }
        if self.read_only {
            self.say(Tone::Warning, self.read_only_note());
            return;
        }
        self.popup = Popup::Form(Box::new(Form::for_task(task)));
    }

    fn ask_cancel(&mut self) {
        if !self.marks.is_empty() {
            self.ask_cancel_marked();
            return;
        }
        let Some(task) = self.selected_task() else {
            self.say(Tone::Warning, "no task selected");
            return;
        };
        if self.read_only {
            self.say(Tone::Warning, self.read_only_note());
            return;
        }
        if task.status.is_terminal() {
            // Refused now, not after a y that could change nothing.
            let message = format!(
                "cannot cancel {}: it is {}, and a finished task never changes",
                task.short_id(),
                task.status
            );
            self.say(Tone::Warning, rudder_model::text::clean(&message, 200));
            return;
        }
        let label = match task.label() {
            Some(l) => format!(
                "{} \"{}\"",
                task.short_id(),
                rudder_model::text::clean(l, 40)
            ),
            None => task.short_id().to_string(),
        };
        self.popup = Popup::ConfirmCancel {
            task_id: task.task_id.clone(),
            label,
            reason: None,
        };
    }

    fn form_key(&mut self, mut form: Box<Form>, key: KeyEvent) -> Vec<Effect> {
        let action = self.keys.action(Scope::Form, false, Key::of(key));
        let submit = match (action, key.code) {
            // A send under way cannot be called back (it may be waiting
            // for the store lock, and then lands): say so, and keep the
            // form until the store answers.
            (Some(Action::FormClose), _) if form.submitting => {
                self.say(
                    Tone::Warning,
                    "the input is being sent and cannot be called back; the form closes when the store answers",
                );
                self.popup = Popup::Form(form);
                return Vec::new();
            }
            (Some(Action::FormClose), _) => {
                self.say(Tone::Info, "input form closed: nothing sent");
                return Vec::new();
            }
            (Some(Action::FormSubmit), _) => true,
            (Some(Action::FormRaw), _) => {
                match form.toggle_raw() {
                    Ok(()) if form.raw.is_some() => self.say(
                        Tone::Info,
                        "the whole input as JSON (Ctrl-R: back to the fields)",
                    ),
                    Ok(()) => self.say(Tone::Info, "back to the fields"),
                    Err(e) => self.say(Tone::Warning, sanitize(&e).into_owned()),
                }
                false
            }
            (Some(Action::FormNext), _) => {
                form.move_focus(1);
                false
            }
            (Some(Action::FormPrev), _) => {
                form.move_focus(-1);
                false
            }
            (_, KeyCode::Enter) => {
                if form.on_last() {
                    true
                } else {
                    form.move_focus(1);
                    false
                }
            }
            _ => {
                if let Some(field) = form.focused() {
                    // Toggles and choices are the fields that take no text.
                    match key.code {
                        _ if field.is_text() => {
                            if let Some(req) = text_request(key) {
                                let before = field.input.value().len();
                                field.input.handle(req);
                                field.error = None;
                                // Editing a default makes it the person's.
                                if field.input.value().len() != before {
                                    field.is_default = false;
                                }
                            }
                        }
                        KeyCode::Char(' ') => {
                            field.space();
                            field.error = None;
                        }
                        KeyCode::Right => {
                            field.cycle(1);
                            field.error = None;
                        }
                        KeyCode::Left => {
                            field.cycle(-1);
                            field.error = None;
                        }
                        _ => {}
                    }
                }
                false
            }
        };
        let mut effects = Vec::new();
        if submit && !form.submitting {
            if let Some(value) = form.validate() {
                form.submitting = true;
                effects.push(Effect::ProvideInput {
                    task_id: form.task_id.clone(),
                    value,
                    revision: form.revision,
                });
            } else {
                self.say(
                    Tone::Error,
                    "the input does not match the schema: see the fields",
                );
            }
        }
        self.popup = Popup::Form(form);
        effects
    }

    fn handle_mouse(&mut self, m: MouseEvent) {
        if let Popup::View(view) = &mut self.popup {
            // The wheel scrolls the task view (drawing keeps it in range).
            match m.kind {
                MouseEventKind::ScrollDown => view.scroll = view.scroll.saturating_add(3),
                MouseEventKind::ScrollUp => view.scroll = view.scroll.saturating_sub(3),
                _ => {}
            }
            return;
        }
        if !matches!(self.popup, Popup::None) {
            return;
        }
        let inside = |r: ratatui::layout::Rect| {
            m.column >= r.x && m.column < r.x + r.width && m.row >= r.y && m.row < r.y + r.height
        };
        match m.kind {
            MouseEventKind::ScrollDown if inside(self.detail_area) => {
                self.detail_scroll = self.detail_scroll.saturating_add(3);
            }
            MouseEventKind::ScrollUp if inside(self.detail_area) => {
                self.detail_scroll = self.detail_scroll.saturating_sub(3);
            }
            MouseEventKind::ScrollDown => self.select_row(self.cursor.saturating_add(3)),
            MouseEventKind::ScrollUp => self.select_row(self.cursor.saturating_sub(3)),
            MouseEventKind::Down(MouseButton::Left) if inside(self.table_area) => {
                let row = self.offset + usize::from(m.row - self.table_area.y);
                if row < self.rows.len() {
                    self.select_row(row);
                }
            }
            _ => {}
        }
    }

    /// Take in the answer to a store effect.
    pub fn apply_result(&mut self, result: EffectResult) {
        match result {
            EffectResult::Panicked { effect, message } => self.effect_panicked(effect, &message),
            EffectResult::Input { task_id, result } => self.input_done(&task_id, result),
            EffectResult::Cancel { task_id, result } => {
                let short = rudder_model::task::short_id(&task_id).to_string();
                match result {
                    Ok(o) if o.change == Change::Applied => {
                        self.say(Tone::Success, format!("cancelled {short}"))
                    }
                    Ok(_) => self.say(
                        Tone::Info,
                        format!("unchanged: {short} was already cancelled"),
                    ),
                    Err(e) => {
                        let what = if e.task().is_some() {
                            "refused"
                        } else {
                            "cancel failed"
                        };
                        self.say(Tone::Error, format!("{what}: {}", error_line(&e)))
                    }
                }
            }
            EffectResult::CancelMany { results } => self.cancelled_many(results),
            EffectResult::ReclaimPreview { older_than, result } => {
                let Popup::ReclaimLoading { age, only, .. } = std::mem::take(&mut self.popup)
                else {
                    // The user closed the dialog meanwhile.
                    return;
                };
                match result.map(|p| match &only {
                    Some(ids) => only_marked(p, ids, self),
                    None => p,
                }) {
                    Ok(Previewed { report, tasks }) => {
                        if report.reclaimed.is_empty() {
                            self.say(
                                Tone::Info,
                                format!("reclaim: no task idle for {age} or more; nothing to do"),
                            );
                        }
                        self.popup = Popup::ReclaimPreview {
                            older_than,
                            age,
                            report,
                            tasks,
                            reason: None,
                        };
                    }
                    Err(e) => self.say(
                        Tone::Error,
                        format!("reclaim preview failed: {}", error_line(&e)),
                    ),
                }
            }
            EffectResult::Reclaim { result } => match result {
                Ok(report) => {
                    let n = report.reclaimed.len();
                    let skipped = report.skipped.len();
                    match (n, skipped) {
                        (0, _) => self.say(
                            Tone::Warning,
                            "unchanged: none of the previewed tasks qualifies any more (see why)",
                        ),
                        (_, 0) => {
                            self.say(Tone::Success, format!("reclaimed {n} task(s): now failed"))
                        }
                        _ => self.say(
                            Tone::Warning,
                            format!(
                                "reclaimed {n} task(s); {skipped} previewed task(s) left alone (see why)"
                            ),
                        ),
                    }
                    self.popup = Popup::ReclaimDone { report };
                }
                Err(e) => self.say(Tone::Error, format!("reclaim refused: {}", error_line(&e))),
            },
        }
    }

    /// A store call panicked: say so, and put right the dialog that waits
    /// for its answer. Whether the store changed is unknown (a panic inside
    /// the transaction writes nothing, one after it does), so the user is
    /// told to look rather than told "nothing happened".
    fn effect_panicked(&mut self, effect: Effect, message: &str) {
        let message = rudder_model::text::clean(message, 200);
        let what = match &effect {
            Effect::ProvideInput { .. } => "sending the input",
            Effect::Cancel { .. } | Effect::CancelMany { .. } => "the cancel",
            Effect::ReclaimPreview { .. } => "the reclaim preview",
            Effect::Reclaim { .. } => "the reclaim",
            Effect::Copy(_) | Effect::KillWorker | Effect::StartWorker => "the action",
        };
        let text = format!(
            "internal error: {what} failed with a panic ({message}); the table shows what the store holds"
        );
        match (effect, std::mem::take(&mut self.popup)) {
            (Effect::ProvideInput { task_id, .. }, Popup::Form(mut form))
                if form.task_id == task_id =>
            {
                form.submitting = false;
                form.errors = vec![format!(
                    "internal error: {message}; check the task before sending again"
                )];
                self.popup = Popup::Form(form);
            }
            (Effect::ReclaimPreview { .. }, Popup::ReclaimLoading { .. }) => {}
            (_, other) => self.popup = other,
        }
        self.say(Tone::Error, text);
    }

    fn input_done(&mut self, task_id: &str, result: Result<Outcome, StoreError>) {
        let short = rudder_model::task::short_id(task_id).to_string();
        let form = match std::mem::take(&mut self.popup) {
            Popup::Form(f) if f.task_id == task_id => Some(f),
            other => {
                self.popup = other;
                None
            }
        };
        match result {
            Ok(o) => {
                let msg = match o.change {
                    Change::Applied => format!("input sent: {short} is now {}", o.task.status),
                    Change::Unchanged => {
                        format!("unchanged: {short} already had this input")
                    }
                };
                self.say(Tone::Success, msg);
            }
            Err(e) => {
                let text = error_line(&e);
                self.say(Tone::Error, format!("input not sent: {text}"));
                if let Some(mut form) = form {
                    // Keep the form and what was typed; say why at the right place.
                    form.submitting = false;
                    match &e {
                        StoreError::InvalidInput { violations, .. } => {
                            form.show_violations(violations)
                        }
                        StoreError::StaleRevision { task, .. }
                        | StoreError::Refused { task, .. } => {
                            form.moved_on = Some(format!(
                                "the task moved on since the form was opened: it is now {} (revision {}); nothing was sent, your input is kept",
                                task.status, task.revision
                            ));
                        }
                        _ => form.errors = vec![text],
                    }
                    self.popup = Popup::Form(form);
                }
            }
        }
    }

    /// Take in the demo worker's state, polled on the tick; a worker that
    /// ended on its own is announced, since nobody asked for it.
    pub fn worker_polled(&mut self, state: crate::WorkerState) {
        use crate::WorkerState;
        if self.worker.as_ref() == Some(&state) {
            return;
        }
        if let WorkerState::Exited { pid, code } = &state
            && matches!(self.worker, Some(WorkerState::Running { pid: p } | WorkerState::Stopped { pid: p }) if p == *pid)
        {
            let how = match code {
                Some(c) => format!("with code {c}"),
                None => "by a signal".into(),
            };
            let start = self.keys.first(crate::keys::Action::StartWorker);
            self.say(
                Tone::Warning,
                format!("worker pid {pid} exited {how} ({start} starts a new one)"),
            );
        }
        self.worker = Some(state);
    }

    /// Say how a worker action (kill, start) went.
    pub fn worker_result(&mut self, action: &str, result: Result<(), String>) {
        match result {
            Ok(()) => self.say(Tone::Success, format!("worker: {action}")),
            Err(e) => self.say(
                Tone::Error,
                format!("worker: {action} failed: {}", sanitize(&e)),
            ),
        }
    }
}

/// The reclaim preview cut down to the marked tasks `ids`: the others are
/// left out, and each marked task the dry run would not reclaim is listed
/// with why (finished, updated too recently, gone).
pub(crate) fn only_marked(mut p: Previewed, ids: &[String], app: &App) -> Previewed {
    let now = app.now;
    use rudder_store::Skipped;
    let marked = |id: &String| ids.contains(id);
    p.report.reclaimed.retain(|r| marked(&r.task_id));
    p.report.skipped.retain(|s| marked(&s.task_id));
    p.tasks.retain(|(id, _)| marked(id));
    p.report.active = 0;
    for id in ids {
        let listed = p.report.reclaimed.iter().any(|r| &r.task_id == id)
            || p.report.skipped.iter().any(|s| &s.task_id == id);
        if listed {
            continue;
        }
        let Some(t) = app.task_by_id(id) else {
            continue;
        };
        let reason = if t.status.is_terminal() {
            format!("it is {}: a finished task is never reclaimed", t.status)
        } else {
            let since = t
                .updated_at
                .map(|u| rudder_store::human_duration(rudder_store::ms(now - u)))
                .unwrap_or_else(|| "?".into());
            format!("updated {since} ago: not idle long enough")
        };
        p.report.skipped.push(Skipped {
            task_id: id.clone(),
            status: t.status,
            reason,
        });
    }
    p
}
