//! Reading a whole task: the text the detail pane and the full-screen task
//! view (`v`) show, as a document of lines that wrap to any width, and the
//! task view's state (scroll, search).
//!
//! The document is made of the task's text as [`crate::shown`] keeps
//! it (sanitized once per change of the task); only the layout (times,
//! wrapping) is made per frame.

use chrono::{DateTime, Utc};
use crossterm::event::KeyEvent;
use tui_input::Input;
use unicode_width::UnicodeWidthChar;

pub use crate::app::TaskView;
use crate::app::{App, Popup, Tone};
use crate::keys::{Action, Key, KeyMap, Scope};
use crate::shown::ShownDetail;
use rudder_model::task::{Status, Task};
use rudder_store::{human_duration, ms};

/// How a part of a line looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// Ordinary text.
    Plain,
    /// Secondary text (field names).
    Dim,
    /// A section heading.
    Heading,
    /// In the colour of a status.
    Status(Status),
    /// A warning that stands out (a stalled task).
    Alert,
}

/// One line of a task's document: a prefix (a field name, a status
/// symbol) and the text, which wraps under itself (`hang` columns in).
#[derive(Debug, Clone, PartialEq)]
pub struct DocLine {
    /// Drawn before the first row of the text.
    pub prefix: String,
    /// How the prefix looks.
    pub prefix_look: Look,
    /// The text (sanitized).
    pub text: String,
    /// How the text looks.
    pub look: Look,
    /// Columns the rows after the first are indented by.
    pub hang: usize,
}

impl DocLine {
    fn plain(text: impl Into<String>, look: Look) -> DocLine {
        let text = text.into();
        // A JSON line wraps under its own indentation, a bit further in.
        let hang = text.chars().take_while(|c| *c == ' ').count() + 2;
        DocLine {
            prefix: String::new(),
            prefix_look: Look::Plain,
            text,
            look,
            hang,
        }
    }

    fn field(key: &str, text: impl Into<String>) -> DocLine {
        DocLine {
            prefix: format!("{key:<KEY_W$} "),
            prefix_look: Look::Dim,
            text: text.into(),
            look: Look::Plain,
            hang: KEY_W + 1,
        }
    }
}

const KEY_W: usize = 12;

fn when(now: DateTime<Utc>, at: Option<DateTime<Utc>>) -> String {
    match at {
        Some(t) => format!(
            "{} ({} ago)",
            crate::shown::absolute(t),
            crate::shown::relative(now, Some(t))
        ),
        None => "-".into(),
    }
}

/// The document of `task`, whose text from the store is `text`: every
/// field, the question, the schema, request, input, result and error, and
/// the history as a timeline with durations.
pub fn document(
    task: &Task,
    text: &ShownDetail,
    now: DateTime<Utc>,
    keys: &KeyMap,
) -> Vec<DocLine> {
    let mut out = Vec::new();
    out.push(DocLine {
        prefix: String::new(),
        prefix_look: Look::Plain,
        text: format!("{} {}", crate::shown::symbol(task.status), task.status),
        look: Look::Status(task.status),
        hang: 2,
    });
    if task.stalled(now) {
        let lapsed = task
            .lease_expires_at
            .map(|until| human_duration(ms(now - until)))
            .unwrap_or_default();
        out.push(DocLine {
            prefix: format!("{:<KEY_W$} ", "stalled"),
            prefix_look: Look::Alert,
            text: format!(
                "its lease lapsed {lapsed} ago: a live worker resumes it ({} starts one \
                 in the demo); {} fails it instead once idle past an age",
                keys.first(Action::StartWorker),
                keys.first(Action::Reclaim)
            ),
            look: Look::Alert,
            hang: KEY_W + 1,
        });
    }
    out.push(DocLine::field("id", text.id.clone()));
    if let Some(t) = &text.title {
        out.push(DocLine::field("title", t.clone()));
    }
    if let Some(k) = &text.kind {
        out.push(DocLine::field("kind", k.clone()));
    }
    if let Some(k) = &text.key {
        out.push(DocLine::field("key", k.clone()));
    }
    if let Some(m) = &text.message {
        // The question of a waiting task is what a person must answer.
        let name = if task.status == Status::InputRequired {
            "question"
        } else {
            "message"
        };
        out.push(DocLine::field(name, m.clone()));
    }
    if let Some(p) = task.progress {
        out.push(DocLine::field(
            "progress",
            format!("{}/{} steps", p.current, p.total),
        ));
    }
    out.push(DocLine::field("revision", task.revision.to_string()));
    out.push(DocLine::field("created", when(now, task.created_at)));
    out.push(DocLine::field("updated", when(now, task.updated_at)));
    let lease = match &text.holder {
        Some(holder) => {
            let lease = match task.lease_expires_at {
                Some(until) if until > now => format!(
                    "until {} (live, {} left)",
                    crate::shown::absolute(until),
                    human_duration(ms(until - now))
                ),
                Some(until) => format!("expired {} ago", human_duration(ms(now - until))),
                None => "no expiry".into(),
            };
            format!("{holder}, {lease}")
        }
        None => "none".into(),
    };
    out.push(DocLine::field("lease", lease));
    if let Some(origin) = &task.origin {
        out.push(DocLine::field(
            "origin",
            rudder_model::text::sanitize(&origin.line()).into_owned(),
        ));
    }
    // The MCP principal whose task it is (only it reaches it over MCP).
    if let Some(owner) = &task.owned_by {
        out.push(DocLine::field(
            "owner",
            rudder_model::text::sanitize(owner).into_owned(),
        ));
    }
    if let Some(ttl) = task.ttl_ms {
        out.push(DocLine::field("ttl", human_duration(ttl)));
    }
    if let Some(p) = task.poll_interval_ms {
        out.push(DocLine::field("poll every", human_duration(p)));
    }
    if let Some(schema) = &text.schema {
        out.push(DocLine::plain("input schema", Look::Heading));
        out.extend(
            schema
                .iter()
                .map(|l| DocLine::plain(l.clone(), Look::Plain)),
        );
    }
    for (name, lines) in &text.blocks {
        out.push(DocLine::plain(name.clone(), Look::Heading));
        out.extend(lines.iter().map(|l| DocLine::plain(l.clone(), Look::Plain)));
    }
    if !task.history.is_empty() {
        out.push(DocLine::plain("history", Look::Heading));
        for (i, h) in task.history.iter().enumerate() {
            let lasted = match task.history.get(i + 1).map(|n| n.at) {
                Some(end) => format!("for {}", human_duration(ms(end - h.at))),
                None if !h.status.is_terminal() => {
                    format!("for {} so far", human_duration(ms(now - h.at)))
                }
                None => String::new(),
            };
            let note = text
                .notes
                .get(i)
                .filter(|n| !n.is_empty())
                .map(|n| format!(" · {n}"))
                .unwrap_or_default();
            out.push(DocLine {
                prefix: format!("{} ", crate::shown::symbol(h.status)),
                prefix_look: Look::Status(h.status),
                text: format!(
                    "{} {:<14} {:<14}{note}",
                    h.at.format("%H:%M:%S"),
                    h.status,
                    lasted
                ),
                look: Look::Plain,
                hang: 11,
            });
        }
    }
    out
}

/// One row on screen: a piece of a document line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The document line.
    pub line: usize,
    /// Where the piece starts and ends in the line's text (bytes).
    pub start: usize,
    /// See `start`.
    pub end: usize,
    /// Whether this is the line's first row (which carries the prefix).
    pub first: bool,
}

/// The widths of the prefix and of the text of `line` at `width`.
pub fn indent(line: &DocLine, width: usize, first: bool) -> usize {
    let w = if first {
        line.prefix.chars().count()
    } else {
        line.hang
    };
    // Below a dozen columns of text, drop the indent rather than the text.
    if width.saturating_sub(w) < 12 { 0 } else { w }
}

/// The document wrapped to `width` columns: words move to the next row
/// whole; only a word longer than the row is cut.
pub fn wrap(doc: &[DocLine], width: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    for (n, line) in doc.iter().enumerate() {
        let first_w = width.saturating_sub(indent(line, width, true)).max(1);
        let rest_w = width.saturating_sub(indent(line, width, false)).max(1);
        let mut first = true;
        for (start, end) in wrap_text(&line.text, first_w, rest_w) {
            rows.push(Row {
                line: n,
                start,
                end,
                first,
            });
            first = false;
        }
    }
    rows
}

/// Byte ranges of the rows of `text`, the first `first_w` columns wide,
/// the others `rest_w`. The space a row breaks at belongs to no row.
pub fn wrap_text(text: &str, first_w: usize, rest_w: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut used = 0;
    let mut space: Option<usize> = None;
    let mut limit = first_w.max(1);
    for (i, c) in text.char_indices() {
        let cw = c.width().unwrap_or(0);
        if used + cw > limit && i > start {
            limit = rest_w.max(1);
            if c == ' ' {
                // The row ends just before this space, which no row keeps.
                out.push((start, i));
                start = i + 1;
                used = 0;
                space = None;
                continue;
            }
            match space.filter(|&s| s > start) {
                Some(s) => {
                    out.push((start, s));
                    start = s + 1;
                    used = text[start..i].chars().map(|c| c.width().unwrap_or(0)).sum();
                }
                None => {
                    out.push((start, i));
                    start = i;
                    used = 0;
                }
            }
            space = None;
        }
        if c == ' ' {
            space = Some(i);
        }
        used += cw;
    }
    out.push((start, text.len()));
    out
}

/// Where `query` occurs in the document (case-insensitive for ASCII): the
/// line and byte offset of each match, in document order.
pub fn find(doc: &[DocLine], query: &str) -> Vec<(usize, usize)> {
    if query.is_empty() {
        return Vec::new();
    }
    let q = query.to_ascii_lowercase();
    let mut out = Vec::new();
    for (n, line) in doc.iter().enumerate() {
        let hay = line.text.to_ascii_lowercase();
        let mut from = 0;
        while let Some(at) = hay[from..].find(&q) {
            out.push((n, from + at));
            from += at + q.len().max(1);
        }
    }
    out
}

/// The row holding byte `at` of line `line`.
pub fn row_of(rows: &[Row], line: usize, at: usize) -> usize {
    rows.iter()
        .rposition(|r| r.line == line && r.start <= at)
        .unwrap_or(0)
}

impl App {
    /// `v`, or Enter on a task that is not waiting: open the task view.
    pub fn open_view(&mut self) {
        match self.selected.clone() {
            Some(id) => self.popup = Popup::View(Box::new(TaskView::new(id))),
            None => self.say(Tone::Warning, "no task selected"),
        }
    }

    /// A key in the task view.
    pub(crate) fn view_key(&mut self, mut view: Box<TaskView>, key: KeyEvent) {
        if let Some(input) = view.search.as_mut() {
            use crossterm::event::KeyCode;
            match key.code {
                KeyCode::Enter => view.search = None,
                KeyCode::Esc => {
                    view.search = None;
                    view.query.clear();
                }
                _ => {
                    if let Some(req) = crate::keys::text_request(key) {
                        input.handle(req);
                    }
                    if input.value() != view.query {
                        view.query = input.value().to_string();
                        view.current = 0;
                        view.jump = true;
                    }
                }
            }
            self.popup = Popup::View(view);
            return;
        }
        let page = view.height.saturating_sub(1).max(1);
        match self.keys.action(Scope::View, false, Key::of(key)) {
            Some(Action::Back) => return,
            // Drawing keeps the scroll within the rows (their number
            // depends on the width).
            Some(Action::Down) => {
                view.scroll = view.scroll.saturating_add(1).min(view.max_scroll())
            }
            Some(Action::Up) => view.scroll = view.scroll.saturating_sub(1),
            Some(Action::PageDown) => {
                view.scroll = view.scroll.saturating_add(page).min(view.max_scroll())
            }
            Some(Action::PageUp) => view.scroll = view.scroll.saturating_sub(page),
            Some(Action::First) => view.scroll = 0,
            Some(Action::Last) => view.scroll = usize::MAX,
            Some(Action::Search) => view.search = Some(Input::new(view.query.clone())),
            Some(a @ (Action::NextMatch | Action::PrevMatch)) => {
                if view.query.is_empty() {
                    let search = self.keys.first(Action::Search);
                    self.say(Tone::Info, format!("no search: {search} searches the task"));
                } else if view.matches == 0 {
                    self.say(Tone::Warning, "no match");
                } else {
                    view.current = if a == Action::NextMatch {
                        (view.current + 1) % view.matches
                    } else {
                        (view.current + view.matches - 1) % view.matches
                    };
                    view.jump = true;
                }
            }
            _ => {}
        }
        self.popup = Popup::View(view);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str, first: usize, rest: usize) -> Vec<&str> {
        wrap_text(text, first, rest)
            .into_iter()
            .map(|(a, b)| &text[a..b])
            .collect()
    }

    #[test]
    fn the_detail_shows_where_a_task_came_from() {
        let mut task = Task::new("t-1", rudder_model::task::Status::Working);
        task.origin = Some(rudder_model::task::Origin {
            tool: "diagnose".into(),
            client: Some(rudder_model::task::ClientInfo {
                name: "claude\u{1b}[31m".into(),
                version: Some("1.0".into()),
            }),
        });
        task.owned_by = Some("triage-bot".into());
        let doc = document(
            &task,
            &ShownDetail::of(&task),
            chrono::Utc::now(),
            &crate::keys::KeyMap::default(),
        );
        let owner = doc
            .iter()
            .find(|l| l.prefix.starts_with("owner"))
            .expect("an owner line");
        assert_eq!(owner.text, "triage-bot");
        let line = doc
            .iter()
            .find(|l| l.prefix.starts_with("origin"))
            .expect("an origin line");
        assert!(
            line.text.starts_with("tool diagnose, client claude") && line.text.ends_with(" 1.0"),
            "{}",
            line.text
        );
        assert!(
            !line.text.contains('\u{1b}'),
            "escape sequences are stripped"
        );
    }

    #[test]
    fn words_wrap_whole_and_only_long_words_are_cut() {
        assert_eq!(
            pieces("which service should the diagnosis follow?", 14, 14),
            ["which service", "should the", "diagnosis", "follow?"]
        );
        assert_eq!(pieces("abcdefghij", 4, 4), ["abcd", "efgh", "ij"]);
        assert_eq!(pieces("", 4, 4), [""]);
        assert_eq!(pieces("a b", 10, 10), ["a b"]);
        // Wide characters count two columns.
        assert_eq!(pieces("支付平台 ok", 4, 4), ["支付", "平台", "ok"]);
    }

    #[test]
    fn every_character_lands_in_exactly_one_row() {
        let text = "  \"root_cause\": \"v4.18.2 (deploy-8812), deployed 12 minutes before\"";
        for w in 1..40 {
            let rows = wrap_text(text, w, w.saturating_sub(3).max(1));
            let mut joined = String::new();
            for (i, (a, b)) in rows.iter().enumerate() {
                if i > 0 && text.as_bytes()[rows[i - 1].1] == b' ' && rows[i - 1].1 + 1 == *a {
                    joined.push(' ');
                }
                joined.push_str(&text[*a..*b]);
            }
            assert_eq!(joined, text, "width {w}");
        }
    }

    #[test]
    fn matches_are_found_case_insensitively_and_mapped_to_rows() {
        let doc = vec![
            DocLine::plain("The Deploy caused it; deploy again", Look::Plain),
            DocLine::plain("nothing", Look::Plain),
        ];
        let found = find(&doc, "DEPLOY");
        assert_eq!(found, [(0, 4), (0, 22)]);
        let rows = wrap(&doc, 14);
        let r = row_of(&rows, 0, 22);
        assert!(rows[r].start <= 22 && 22 < rows[r].end, "{rows:?}");
        assert!(find(&doc, "").is_empty());
    }
}
