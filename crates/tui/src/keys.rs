//! Keys as data: one table ([`TABLE`]) of every action with its default
//! keys, where it applies and what it does. The dispatch
//! ([`crate::update`]), the help overlay, the footer hints and the
//! README's key list are all made from it, so they cannot drift apart; a
//! user's config file ([`crate::config`]) rebinds actions by name.

use std::fmt;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Where a key applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The task list (no dialog open).
    List,
    /// The full-screen view of one task (`v`).
    View,
    /// The input form (keys here never take a plain character, which a
    /// field would type).
    Form,
    /// The task list in `rudder demo` only.
    Demo,
}

impl Scope {
    /// The name shown in the help and the README.
    pub fn label(self) -> &'static str {
        match self {
            Scope::List => "list",
            Scope::View => "task view",
            Scope::Form => "input form",
            Scope::Demo => "demo",
        }
    }

    /// Whether a key in `self` and one in `other` could be pressed in the
    /// same place (the demo keys are list keys).
    fn overlaps(self, other: Scope) -> bool {
        let list = |s: Scope| matches!(s, Scope::List | Scope::Demo);
        self == other || (list(self) && list(other))
    }
}

/// Everything a key can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Move down.
    Down,
    /// Move up.
    Up,
    /// Go to the top.
    First,
    /// Go to the bottom.
    Last,
    /// One page down.
    PageDown,
    /// One page up.
    PageUp,
    /// Scroll the detail pane down.
    DetailDown,
    /// Scroll the detail pane up.
    DetailUp,
    /// Open the task: its form if it waits, else the full view.
    Open,
    /// Answer a waiting task (input form).
    Input,
    /// Read the whole task, full screen.
    View,
    /// Mark / unmark the task.
    Mark,
    /// Mark every task the filter shows (again: unmark).
    MarkAll,
    /// Cancel the task, or every marked task (y/n).
    Cancel,
    /// Reclaim idle tasks, or the marked ones (age, preview, y/n).
    Reclaim,
    /// Filter by text (Enter keeps, Esc clears).
    Filter,
    /// Clear every filter.
    ClearFilters,
    /// Toggle the status filter of [`rudder_model::task::Status::ALL`]`[n]`.
    StatusFilter(u8),
    /// Cycle the sort: created, title, id, last update.
    Sort,
    /// Put the rows held still back in the chosen order.
    Resort,
    /// Pause / resume live updates.
    Pause,
    /// Copy the task id (OSC 52).
    Copy,
    /// This help (any key closes it).
    Help,
    /// Quit (Ctrl-C always quits).
    Quit,
    /// Search the task (Enter keeps, Esc drops).
    Search,
    /// Next match.
    NextMatch,
    /// Previous match.
    PrevMatch,
    /// Back to the list.
    /// Back to the list.
    Back,
    /// Next field.
    FormNext,
    /// Previous field.
    FormPrev,
    /// Send (Enter on the last field too).
    FormSubmit,
    /// The whole input as JSON, and back.
    FormRaw,
    /// Close without sending.
    FormClose,
    /// Kill the worker with SIGKILL.
    KillWorker,
    /// Start a new worker.
    StartWorker,
}

/// One row of the key table.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    /// What the key does.
    pub action: Action,
    /// The action's name in the config file's `[keys]` table.
    pub name: &'static str,
    /// The default keys, as the config file writes them.
    pub keys: &'static [&'static str],
    /// Where the keys apply.
    pub scopes: &'static [Scope],
    /// What it does, for the help and the README.
    pub description: &'static str,
    /// Rows with the same group are one line of the help (e.g. `j / k`).
    pub group: Option<&'static str>,
}

const LIST: &[Scope] = &[Scope::List];
const LIST_VIEW: &[Scope] = &[Scope::List, Scope::View];
const VIEW: &[Scope] = &[Scope::View];
const FORM: &[Scope] = &[Scope::Form];
const DEMO: &[Scope] = &[Scope::Demo];

macro_rules! row {
    ($action:expr, $name:literal, [$($key:literal),*], $scopes:expr, $desc:literal) => {
        Binding { action: $action, name: $name, keys: &[$($key),*], scopes: $scopes, description: $desc, group: None }
    };
    ($action:expr, $name:literal, [$($key:literal),*], $scopes:expr, $desc:literal, $group:literal) => {
        Binding { action: $action, name: $name, keys: &[$($key),*], scopes: $scopes, description: $desc, group: Some($group) }
    };
}

/// Every action, its default keys, where it applies and what it does.
/// Ctrl-C always quits as well, whatever the config says.
pub const TABLE: &[Binding] = &[
    row!(
        Action::Down,
        "down",
        ["j", "Down"],
        LIST_VIEW,
        "move down",
        "move down / up"
    ),
    row!(
        Action::Up,
        "up",
        ["k", "Up"],
        LIST_VIEW,
        "move up",
        "move down / up"
    ),
    row!(
        Action::First,
        "first",
        ["g", "Home"],
        LIST_VIEW,
        "go to the top",
        "top / bottom"
    ),
    row!(
        Action::Last,
        "last",
        ["G", "End"],
        LIST_VIEW,
        "go to the bottom",
        "top / bottom"
    ),
    row!(
        Action::PageDown,
        "page_down",
        ["PgDn"],
        LIST_VIEW,
        "one page down",
        "page down / up"
    ),
    row!(
        Action::PageUp,
        "page_up",
        ["PgUp"],
        LIST_VIEW,
        "one page up",
        "page down / up"
    ),
    row!(
        Action::DetailDown,
        "detail_down",
        ["d"],
        LIST,
        "scroll the detail pane down",
        "scroll the detail pane"
    ),
    row!(
        Action::DetailUp,
        "detail_up",
        ["u"],
        LIST,
        "scroll the detail pane up",
        "scroll the detail pane"
    ),
    row!(
        Action::Open,
        "open",
        ["Enter"],
        LIST,
        "open: the form if it waits, else the view"
    ),
    row!(
        Action::Input,
        "input",
        ["i"],
        LIST,
        "answer a waiting task (input form)"
    ),
    row!(
        Action::View,
        "view",
        ["v"],
        LIST,
        "read the whole task, full screen"
    ),
    row!(
        Action::Mark,
        "mark",
        ["Space"],
        LIST,
        "mark / unmark the task"
    ),
    row!(
        Action::MarkAll,
        "mark_all",
        ["*"],
        LIST,
        "mark all shown (again: unmark them)"
    ),
    row!(
        Action::Cancel,
        "cancel",
        ["c"],
        LIST,
        "cancel the task, or the marked (y/n)"
    ),
    row!(
        Action::Reclaim,
        "reclaim",
        ["R"],
        LIST,
        "fail tasks idle longer than an age, or the marked"
    ),
    row!(
        Action::Filter,
        "filter",
        ["/"],
        LIST,
        "filter by text or kind:K (Enter keeps, Esc clears)"
    ),
    row!(
        Action::ClearFilters,
        "clear_filters",
        ["Esc"],
        LIST,
        "clear every filter"
    ),
    row!(
        Action::StatusFilter(0),
        "filter_input_required",
        ["1"],
        LIST,
        "show input_required (toggle)",
        "toggle status filters (header order)"
    ),
    row!(
        Action::StatusFilter(1),
        "filter_working",
        ["2"],
        LIST,
        "show working (toggle)",
        "toggle status filters (header order)"
    ),
    row!(
        Action::StatusFilter(2),
        "filter_completed",
        ["3"],
        LIST,
        "show completed (toggle)",
        "toggle status filters (header order)"
    ),
    row!(
        Action::StatusFilter(3),
        "filter_failed",
        ["4"],
        LIST,
        "show failed (toggle)",
        "toggle status filters (header order)"
    ),
    row!(
        Action::StatusFilter(4),
        "filter_cancelled",
        ["5"],
        LIST,
        "show cancelled (toggle)",
        "toggle status filters (header order)"
    ),
    row!(
        Action::Sort,
        "sort",
        ["s"],
        LIST,
        "sort: created, title, id, update"
    ),
    row!(
        Action::Resort,
        "resort",
        ["o"],
        LIST,
        "re-sort rows that changed (header ⇅ N)"
    ),
    row!(
        Action::Pause,
        "pause",
        ["p"],
        LIST,
        "pause / resume live updates"
    ),
    row!(
        Action::Copy,
        "copy",
        ["y"],
        LIST,
        "copy the task id (OSC 52)"
    ),
    row!(
        Action::Help,
        "help",
        ["?"],
        LIST,
        "this help (j/k scroll it)"
    ),
    row!(
        Action::Quit,
        "quit",
        ["q"],
        LIST,
        "quit (Ctrl-C always quits)"
    ),
    row!(
        Action::Search,
        "search",
        ["/"],
        VIEW,
        "search (Enter keeps, Esc drops)"
    ),
    row!(
        Action::NextMatch,
        "next_match",
        ["n"],
        VIEW,
        "next match",
        "next / previous match"
    ),
    row!(
        Action::PrevMatch,
        "prev_match",
        ["N"],
        VIEW,
        "previous match",
        "next / previous match"
    ),
    row!(Action::Back, "back", ["q", "Esc"], VIEW, "back to the list"),
    row!(
        Action::FormNext,
        "form_next",
        ["Tab", "Down"],
        FORM,
        "next field",
        "next / previous field"
    ),
    row!(
        Action::FormPrev,
        "form_prev",
        ["Shift-Tab", "Up"],
        FORM,
        "previous field",
        "next / previous field"
    ),
    row!(
        Action::FormSubmit,
        "form_submit",
        ["Ctrl-s"],
        FORM,
        "send (Enter on the last field too)"
    ),
    row!(
        Action::FormRaw,
        "form_raw",
        ["Ctrl-r"],
        FORM,
        "the whole input as JSON, and back"
    ),
    row!(
        Action::FormClose,
        "form_close",
        ["Esc"],
        FORM,
        "close without sending"
    ),
    row!(
        Action::KillWorker,
        "kill_worker",
        ["K"],
        DEMO,
        "kill the worker with SIGKILL"
    ),
    row!(
        Action::StartWorker,
        "start_worker",
        ["W"],
        DEMO,
        "start a new worker (it resumes stalled tasks)"
    ),
];

/// What the demo's keys do when its diagnosis runs as `role` rather than
/// as a rudder worker: under `rudder demo --gateway` K and W kill and
/// restart the MCP server behind the gateway (the header says `upstream`);
/// `None`: the key table's own words.
pub fn demo_words(action: Action, role: &str) -> Option<String> {
    match (action, role) {
        (_, "worker") => None,
        (Action::KillWorker, role) => Some(format!("kill the {role} with SIGKILL")),
        (Action::StartWorker, role) => Some(format!("start the {role} again")),
        _ => None,
    }
}

/// The row of `action` in [`TABLE`].
pub fn binding(action: Action) -> &'static Binding {
    TABLE
        .iter()
        .find(|b| b.action == action)
        .expect("every action has a row in the key table")
}

/// Ctrl-C, which always quits.
const CTRL_C: Key = Key {
    code: KeyCode::Char('c'),
    ctrl: true,
};

/// One key: a key code and whether Ctrl is held (Shift is part of the
/// character: `G`, `*`, or of the code: Shift-Tab).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    /// The key.
    pub code: KeyCode,
    /// Ctrl held.
    pub ctrl: bool,
}

impl Key {
    /// The key a terminal event stands for.
    pub fn of(event: KeyEvent) -> Key {
        let ctrl = event.modifiers.contains(KeyModifiers::CONTROL);
        let code = match event.code {
            // Ctrl-S arrives as 's' with Ctrl (some terminals send 'S').
            KeyCode::Char(c) if ctrl => KeyCode::Char(c.to_ascii_lowercase()),
            code => code,
        };
        Key { code, ctrl }
    }

    /// Parse a key as the config file writes it: one character (`x`, `G`,
    /// `*`), a name (`Enter`, `Esc`, `Tab`, `Shift-Tab`, `Space`,
    /// `Backspace`, `Up`, `Down`, `Left`, `Right`, `PgUp`, `PgDn`, `Home`,
    /// `End`, `F1`–`F12`), or `Ctrl-` and a letter.
    pub fn parse(text: &str) -> Result<Key, String> {
        let plain = |code| Ok(Key { code, ctrl: false });
        let lower = text.to_ascii_lowercase();
        if let Some(rest) = lower
            .strip_prefix("ctrl-")
            .or_else(|| lower.strip_prefix("ctrl+"))
            .or_else(|| lower.strip_prefix("c-"))
        {
            let mut chars = rest.chars();
            return match (chars.next(), chars.next()) {
                (Some(c), None) if c.is_ascii_alphabetic() => Ok(Key {
                    code: KeyCode::Char(c),
                    ctrl: true,
                }),
                _ => Err(format!(
                    "\"{text}\" is not a key: after Ctrl- comes one letter (Ctrl-s)"
                )),
            };
        }
        let mut chars = text.chars();
        if let (Some(c), None) = (chars.next(), chars.next()) {
            if c.is_control() || rudder_model::text::sanitize(text) != text {
                return Err(format!("{text:?} is not a key one can type"));
            }
            return match c {
                ' ' => plain(KeyCode::Char(' ')),
                '↑' => plain(KeyCode::Up),
                '↓' => plain(KeyCode::Down),
                '←' => plain(KeyCode::Left),
                '→' => plain(KeyCode::Right),
                c => plain(KeyCode::Char(c)),
            };
        }
        match lower.as_str() {
            "enter" | "return" => plain(KeyCode::Enter),
            "esc" | "escape" => plain(KeyCode::Esc),
            "tab" => plain(KeyCode::Tab),
            "shift-tab" | "backtab" => plain(KeyCode::BackTab),
            "space" => plain(KeyCode::Char(' ')),
            "backspace" => plain(KeyCode::Backspace),
            "delete" | "del" => plain(KeyCode::Delete),
            "up" => plain(KeyCode::Up),
            "down" => plain(KeyCode::Down),
            "left" => plain(KeyCode::Left),
            "right" => plain(KeyCode::Right),
            "pgup" | "pageup" => plain(KeyCode::PageUp),
            "pgdn" | "pagedown" => plain(KeyCode::PageDown),
            "home" => plain(KeyCode::Home),
            "end" => plain(KeyCode::End),
            f if f.starts_with('f') => match f[1..].parse::<u8>() {
                Ok(n @ 1..=12) => plain(KeyCode::F(n)),
                _ => Err(format!("\"{text}\" is not a key")),
            },
            _ => Err(format!(
                "\"{text}\" is not a key: write one character (x), a name (Enter, Esc, Tab, Shift-Tab, Space, Up, Down, PgUp, PgDn, Home, End, F1–F12) or Ctrl- and a letter"
            )),
        }
    }

    /// Whether a text field would type this key.
    fn types(self) -> bool {
        matches!(self.code, KeyCode::Char(_)) && !self.ctrl
    }
}

impl fmt::Display for Key {
    /// The key as the help and the footer show it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let (true, KeyCode::Char(c)) = (self.ctrl, self.code) {
            return write!(f, "Ctrl-{}", c.to_ascii_uppercase());
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("Space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::Enter => f.write_str("Enter"),
            KeyCode::Esc => f.write_str("Esc"),
            KeyCode::Tab => f.write_str("Tab"),
            KeyCode::BackTab => f.write_str("Shift-Tab"),
            KeyCode::Backspace => f.write_str("Backspace"),
            KeyCode::Delete => f.write_str("Delete"),
            KeyCode::Up => f.write_str("↑"),
            KeyCode::Down => f.write_str("↓"),
            KeyCode::Left => f.write_str("←"),
            KeyCode::Right => f.write_str("→"),
            KeyCode::PageUp => f.write_str("PgUp"),
            KeyCode::PageDown => f.write_str("PgDn"),
            KeyCode::Home => f.write_str("Home"),
            KeyCode::End => f.write_str("End"),
            KeyCode::F(n) => write!(f, "F{n}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// The keys in force: the table's defaults with the user's rebindings.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyMap {
    /// The keys of each row of [`TABLE`], in its order.
    keys: Vec<Vec<Key>>,
}

impl Default for KeyMap {
    fn default() -> KeyMap {
        KeyMap {
            keys: TABLE
                .iter()
                .map(|b| {
                    b.keys
                        .iter()
                        .map(|k| Key::parse(k).expect("the default keys parse"))
                        .collect()
                })
                .collect(),
        }
    }
}

/// A rebinding the key map refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The action's name as written.
    pub name: String,
    /// Why.
    pub reason: String,
}

impl KeyMap {
    /// The action `key` does in `scope` (the list includes the demo keys
    /// when `demo`).
    pub fn action(&self, scope: Scope, demo: bool, key: Key) -> Option<Action> {
        TABLE.iter().zip(&self.keys).find_map(|(b, keys)| {
            let here = b
                .scopes
                .iter()
                .any(|s| *s == scope || (demo && scope == Scope::List && *s == Scope::Demo));
            (here && keys.contains(&key)).then_some(b.action)
        })
    }

    /// The keys of `action`.
    pub fn keys(&self, action: Action) -> &[Key] {
        let i = TABLE
            .iter()
            .position(|b| b.action == action)
            .expect("every action has a row in the key table");
        &self.keys[i]
    }

    /// The keys of `action` as the help shows them (`j, ↓`).
    pub fn shown(&self, action: Action) -> String {
        let keys: Vec<String> = self.keys(action).iter().map(Key::to_string).collect();
        keys.join(", ")
    }

    /// The first key of `action`, for hints (`R reclaims`).
    pub fn first(&self, action: Action) -> String {
        self.keys(action)
            .first()
            .map(Key::to_string)
            .unwrap_or_else(|| "(unbound)".into())
    }

    /// Rebind actions by name, each to one key or several; rebindings are
    /// taken together (so two actions can swap keys). A rebinding is
    /// refused, and the action keeps its default keys, when the name is no
    /// action, a key does not parse, a form key is a plain character (a
    /// field would type it), or a key is already another action's where
    /// both apply. Returns the refusals.
    pub fn rebind(&mut self, wanted: &[(String, Vec<String>)]) -> Vec<Refused> {
        let mut refused = Vec::new();
        let mut taken: Vec<(usize, Vec<Key>, &str)> = Vec::new();
        for (name, keys) in wanted {
            let Some(i) = TABLE.iter().position(|b| b.name == name) else {
                refused.push(Refused {
                    name: name.clone(),
                    reason: format!(
                        "no action is called \"{}\"",
                        rudder_model::text::clean(name, 40)
                    ),
                });
                continue;
            };
            let parsed: Result<Vec<Key>, String> = keys.iter().map(|k| Key::parse(k)).collect();
            let parsed = match parsed {
                Ok(p) if p.is_empty() => Err("no key given".to_string()),
                other => other,
            };
            match parsed {
                Err(reason) => refused.push(Refused {
                    name: name.clone(),
                    reason,
                }),
                // Ctrl-C quits before any table is asked: bound to
                // something else, the key would silently do nothing.
                Ok(p) if TABLE[i].action != Action::Quit && p.contains(&CTRL_C) => {
                    refused.push(Refused {
                        name: name.clone(),
                        reason: "Ctrl-C always quits; pick another key".into(),
                    })
                }
                Ok(p) if TABLE[i].scopes == FORM && p.iter().any(|k| k.types()) => {
                    refused.push(Refused {
                        name: name.clone(),
                        reason: "a form key cannot be a plain character: the field would type it (use Ctrl-, Tab, F1…)".into(),
                    })
                }
                Ok(p) => taken.push((i, p, name.as_str())),
            }
        }
        // Apply, then refuse rebindings that collide until none do. A
        // refused action gets its defaults back, which may collide with
        // another rebinding in turn: hence the loop.
        loop {
            let mut next = KeyMap::default();
            for (i, keys, _) in &taken {
                next.keys[*i] = keys.clone();
            }
            let clash = taken.iter().enumerate().find_map(|(t, (i, keys, _))| {
                let other = next.clash(*i, keys)?;
                Some((t, other))
            });
            match clash {
                None => {
                    *self = next;
                    return refused;
                }
                Some((t, (other, key))) => {
                    let (i, _, name) = taken.remove(t);
                    refused.push(Refused {
                        name: name.to_string(),
                        reason: format!(
                            "{key} already does \"{}\" ({}); {name} keeps {}",
                            TABLE[other].description,
                            TABLE[other].name,
                            KeyMap::default().shown(TABLE[i].action)
                        ),
                    });
                }
            }
        }
    }

    /// Another row whose keys include one of `keys` where both apply.
    fn clash(&self, row: usize, keys: &[Key]) -> Option<(usize, Key)> {
        TABLE.iter().enumerate().find_map(|(j, b)| {
            if j == row {
                return None;
            }
            let overlap = b
                .scopes
                .iter()
                .any(|s| TABLE[row].scopes.iter().any(|r| r.overlaps(*s)));
            if !overlap {
                return None;
            }
            keys.iter()
                .find(|k| self.keys[j].contains(k))
                .map(|k| (j, *k))
        })
    }

    /// The help's lines for `scope`: (keys, what they do), one line per
    /// group of rows; the demo's keys in the words of what the demo's
    /// diagnosis runs as (`role`: see [`demo_words`]).
    pub fn help_lines(&self, scope: Scope, role: &str) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut last_group = None;
        for b in TABLE.iter().filter(|b| b.scopes.contains(&scope)) {
            let keys = self.shown(b.action);
            if let Some(words) = demo_words(b.action, role) {
                out.push((keys, words));
                last_group = b.group;
                continue;
            }
            match b.group {
                Some(g) if last_group == Some(g) => {
                    if let Some(line) = out.last_mut() {
                        line.0.push_str(" / ");
                        line.0.push_str(&keys);
                    }
                }
                Some(g) => out.push((keys, g.to_string())),
                None => out.push((keys, b.description.to_string())),
            }
            last_group = b.group;
        }
        out
    }

    /// Footer hints: for each item, the first key of each of its actions
    /// joined by `/`, then its word (`j/k move`).
    pub fn hints(&self, items: &[(&[Action], &str)]) -> Vec<String> {
        items
            .iter()
            .map(|(actions, word)| {
                let keys: Vec<String> = actions.iter().map(|a| self.first(*a)).collect();
                format!("{} {word}", keys.join("/"))
            })
            .collect()
    }
}

/// The footer of the list, most important first (what does not fit the
/// width is left out whole).
pub const LIST_HINTS: &[(&[Action], &str)] = &[
    (&[Action::Down, Action::Up], "move"),
    (&[Action::View], "view"),
    (&[Action::Input], "input"),
    (&[Action::Mark], "mark"),
    (&[Action::Cancel], "cancel"),
    (&[Action::Reclaim], "reclaim"),
    (&[Action::Filter], "filter"),
    (&[Action::Help], "help"),
    (&[Action::Quit], "quit"),
    (&[Action::MarkAll], "mark all"),
    (&[Action::Sort], "sort"),
    (&[Action::Pause], "pause"),
    (&[Action::Copy], "copy id"),
];

/// The footer of the task view.
pub const VIEW_HINTS: &[(&[Action], &str)] = &[
    (&[Action::Down, Action::Up], "scroll"),
    (&[Action::Search], "search"),
    (&[Action::NextMatch, Action::PrevMatch], "next/prev"),
    (&[Action::Back], "back"),
    (&[Action::PageDown, Action::PageUp], "page"),
    (&[Action::First, Action::Last], "top/end"),
];

/// As many of `hints` as fit in `width`, two spaces apart.
pub fn fit(hints: &[String], width: usize) -> String {
    let mut out = String::new();
    for h in hints {
        let more = if out.is_empty() { 0 } else { 2 } + h.chars().count();
        if out.chars().count() + more > width {
            break;
        }
        if !out.is_empty() {
            out.push_str("  ");
        }
        out.push_str(h);
    }
    out
}

/// docs/tui.md's key table, made from [`TABLE`] (a test checks that the
/// page holds exactly this between its markers).
pub fn markdown() -> String {
    let map = KeyMap::default();
    let mut out =
        String::from("| keys | action (config name) | where | does |\n|---|---|---|---|\n");
    for b in TABLE {
        let keys: Vec<String> = map
            .keys(b.action)
            .iter()
            .map(|k| format!("`{k}`").replace("`|`", "`\\|`"))
            .collect();
        let scopes: Vec<&str> = b.scopes.iter().map(|s| s.label()).collect();
        out.push_str(&format!(
            "| {} | `{}` | {} | {} |\n",
            keys.join(", "),
            b.name,
            scopes.join(", "),
            b.description
        ));
    }
    out.push_str("| Ctrl-C | (always) | everywhere | quit, at once even while a write waits for the store lock |\n");
    out
}

/// What a key does to a text input. Characters that cannot be drawn
/// (control, C1 and bidi characters, which a paste can deliver as keys) are
/// not taken, so a field only ever holds what is shown.
pub(crate) fn text_request(key: KeyEvent) -> Option<tui_input::InputRequest> {
    if let KeyCode::Char(c) = key.code {
        let mut buf = [0u8; 4];
        let one: &str = c.encode_utf8(&mut buf);
        if rudder_model::text::sanitize(one) != one {
            return None;
        }
    }
    tui_input::backend::crossterm::to_input_request(&crossterm::event::Event::Key(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_key_parses_and_no_two_actions_share_one() {
        let map = KeyMap::default();
        for (i, b) in TABLE.iter().enumerate() {
            assert!(!map.keys[i].is_empty(), "{} has no key", b.name);
            assert_eq!(map.clash(i, &map.keys[i]), None, "{}", b.name);
            assert!(
                TABLE.iter().filter(|o| o.name == b.name).count() == 1,
                "{} twice",
                b.name
            );
        }
    }

    #[test]
    fn keys_parse_and_print() {
        for (text, shown) in [
            ("x", "x"),
            ("G", "G"),
            ("Ctrl-s", "Ctrl-S"),
            ("ctrl+R", "Ctrl-R"),
            ("Space", "Space"),
            (" ", "Space"),
            ("PgDn", "PgDn"),
            ("pagedown", "PgDn"),
            ("Shift-Tab", "Shift-Tab"),
            ("F5", "F5"),
            ("↓", "↓"),
        ] {
            assert_eq!(Key::parse(text).map(|k| k.to_string()), Ok(shown.into()));
        }
        for bad in ["", "xy", "Ctrl-", "Ctrl-12", "F13", "\u{1b}", "Hyper-x"] {
            assert!(Key::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn ctrl_keys_match_either_case() {
        let map = KeyMap::default();
        let ev = KeyEvent::new(KeyCode::Char('S'), KeyModifiers::CONTROL);
        assert_eq!(
            map.action(Scope::Form, false, Key::of(ev)),
            Some(Action::FormSubmit)
        );
    }
}
