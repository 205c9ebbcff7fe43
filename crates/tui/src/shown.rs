//! A task's text as the screen shows it, made safe once per change of the
//! task rather than on every frame.
//!
//! Every string from the store is sanitized before it is drawn
//! ([`rudder_model::text::sanitize`]), which reads the whole string. Done per frame,
//! a task with a 25 MB title costs seconds of CPU per minute of an idle
//! screen (a frame a second for the relative times). [`ShownCache`] keeps
//! each task's sanitized text, keyed by task id and revision, and the app
//! drops an entry when the change feed says the task changed, appeared or
//! vanished (so a writer that keeps no revisions is covered too). Drawing a
//! frame then only cuts the cached text to the width of its column.
//!
//! The cached text is capped: a table cell keeps at most [`MAX_CHARS`]
//! characters (more than any terminal is wide); the detail pane and the
//! task view, which wrap text to be read whole, keep [`MAX_TEXT_CHARS`] of
//! one text (a message, a note, a line of JSON: a stack trace fits), a
//! JSON value at most [`MAX_LINES`] lines and [`MAX_JSON_CHARS`]
//! characters. What is cut says how much is missing, and `rudder get ID`
//! prints everything.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

use rudder_model::task::Task;
use rudder_model::text::sanitize;

/// The most characters of one line kept for the screen.
pub const MAX_CHARS: usize = 2_000;
/// The most lines of one pretty-printed JSON value kept for the screen.
pub const MAX_LINES: usize = 5_000;
/// The most characters of one text kept for the detail pane and the task
/// view.
pub const MAX_TEXT_CHARS: usize = 64 * 1024;
/// The most characters of one pretty-printed JSON value kept for the
/// detail pane and the task view (all its lines together).
pub const MAX_JSON_CHARS: usize = 1024 * 1024;

/// `text`, sanitized and capped at [`MAX_CHARS`] characters (then ending
/// in `…`).
pub fn shown(text: &str) -> String {
    cap(sanitize(text))
}

/// The first few thousand characters of `text` (twice [`MAX_CHARS`]), for
/// text drawn straight from the store in a dialog: cleaning that prefix
/// costs the same whatever the length of the whole. (An escape sequence
/// longer than the prefix leaves less to show, never anything unsafe.)
pub fn head(text: &str) -> &str {
    match text.char_indices().nth(2 * MAX_CHARS) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

/// `text`, sanitized and capped at [`MAX_TEXT_CHARS`] characters, for the
/// detail pane and the task view: when cut, it ends saying how many
/// characters are left out and where to read them.
pub fn shown_whole(text: &str) -> String {
    cap_whole(sanitize(text), MAX_TEXT_CHARS)
}

fn cap_whole(text: Cow<'_, str>, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.into_owned(),
        Some((cut, _)) => {
            let rest = text[cut..].chars().count();
            format!(
                "{}… ({rest} more characters: `rudder get ID` shows them all)",
                &text[..cut]
            )
        }
    }
}

fn cap(text: Cow<'_, str>) -> String {
    match text.char_indices().nth(MAX_CHARS) {
        None => text.into_owned(),
        Some((cut, _)) => {
            let mut s = String::with_capacity(cut + '…'.len_utf8());
            s.push_str(&text[..cut]);
            s.push('…');
            s
        }
    }
}

/// A JSON value as the detail pane shows it: pretty-printed, one sanitized
/// line each, indented by a space, at most [`MAX_LINES`] lines.
pub fn json_lines(value: &Value) -> Vec<String> {
    let pretty = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    let mut lines = Vec::new();
    let mut all = pretty.lines().peekable();
    let mut budget = MAX_JSON_CHARS;
    while lines.len() < MAX_LINES && budget > 0 {
        let Some(l) = all.next() else { break };
        // Escapes are already JSON-escaped, but bidi overrides are not.
        let line = cap_whole(sanitize(&format!(" {l}")), budget.min(MAX_TEXT_CHARS));
        budget = budget.saturating_sub(line.chars().count());
        lines.push(line);
    }
    let rest = all.count();
    if rest > 0 {
        lines.push(format!(
            " … {rest} more lines (`rudder get ID` shows them all)"
        ));
    }
    lines
}

/// The input schema as the detail pane shows it: one line per field of the
/// form it asks for ([`rudder_model::schema::form_spec`]: name as `--set` takes
/// it, required mark, kind, choices, default, description), or the schema
/// as JSON when the form is one JSON field.
fn schema_lines(schema: &Value) -> Vec<String> {
    use rudder_model::schema::{Kind, Scalar};
    let spec = rudder_model::schema::form_spec(schema);
    if spec.whole() {
        return json_lines(schema);
    }
    let scalar = |s: &Scalar| match s {
        Scalar::Text => "text",
        Scalar::Integer => "integer",
        Scalar::Number => "number",
    };
    let values = |o: &[rudder_model::schema::Choice]| {
        let mut v: Vec<String> = o
            .iter()
            .take(10)
            .map(|c| rudder_model::schema::form_spec::value_label(&c.value))
            .collect();
        if o.len() > 10 {
            v.push("…".into());
        }
        v.join("|")
    };
    spec.fields
        .iter()
        .take(MAX_LINES)
        .map(|f| {
            let kind = match &f.kind {
                Kind::Scalar { of } => match &f.format {
                    Some(fmt) => format!("{} ({fmt})", scalar(of)),
                    None => scalar(of).to_string(),
                },
                Kind::Boolean => "yes/no".into(),
                Kind::Choice { options } => format!("choice {}", values(options)),
                Kind::Multi { options, .. } => format!("any of {}", values(options)),
                Kind::List { of, .. } => format!("list of {}", scalar(of)),
                Kind::Json => "JSON".into(),
            };
            let mut text = format!(
                " {}{} : {kind}",
                f.path.join("."),
                if f.required { " *" } else { "" }
            );
            if f.secret {
                // Its value is masked below; its default would tell it.
                text.push_str(" · secret");
            } else if let Some(d) = &f.default {
                text.push_str(&format!(" = {d}"));
            }
            if let Some(desc) = &f.hint {
                text.push_str(&format!(" — {desc}"));
            }
            shown(&text)
        })
        .collect()
}

/// One task's text, sanitized and capped ([`shown`]), at one revision: what
/// its table row shows, and (made when first asked for) what the detail
/// pane shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ShownTask {
    /// The revision it was made from.
    pub revision: u64,
    /// The title, else the idempotency key, else empty: the table's label.
    pub label: String,
    /// The status message, or empty.
    pub message: String,
    /// The kind, or empty.
    pub kind: String,
    detail: Option<ShownDetail>,
}

/// The detail pane's text of one task ([`ShownTask`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ShownDetail {
    /// The full id.
    pub id: String,
    /// The title.
    pub title: Option<String>,
    /// The idempotency key.
    pub key: Option<String>,
    /// The kind.
    pub kind: Option<String>,
    /// The status message.
    pub message: Option<String>,
    /// The lease holder.
    pub holder: Option<String>,
    /// The input schema's lines ([`schema_lines`]).
    pub schema: Option<Vec<String>>,
    /// Request, input, result and error, then every field rudder does not
    /// know (named "NAME (other field)"), each with its JSON lines.
    pub blocks: Vec<(String, Vec<String>)>,
    /// Each history entry's who, why and note ([`history_note`]), or empty.
    pub notes: Vec<String>,
}

/// `message` without a leading repeat of the row's `label` (`INC-1042
/// checkout latency: which service?`): the table shows both side by side,
/// and at 80 columns the repeat would push the question out of sight.
fn without_label<'a>(message: &'a str, label: &str) -> &'a str {
    if label.is_empty() {
        return message;
    }
    let Some(rest) = message.strip_prefix(label) else {
        return message;
    };
    // Only a whole repeat followed by a separator, never a longer word.
    let stripped = rest.trim_start_matches([':', ' ', '-', '—', '–', ',', ';']);
    if stripped.len() == rest.len() || stripped.is_empty() {
        return message;
    }
    stripped
}

impl ShownTask {
    /// What the table row of `task` shows.
    pub fn of(task: &Task) -> ShownTask {
        let label = task.label().unwrap_or("");
        let message = task.current_message().unwrap_or("");
        ShownTask {
            revision: task.revision,
            label: shown(label),
            message: shown(without_label(message, label)),
            kind: shown(task.kind.as_deref().unwrap_or("")),
            detail: None,
        }
    }
}

impl ShownDetail {
    /// What the detail pane of `task` shows.
    pub fn of(task: &Task) -> ShownDetail {
        let mut blocks = Vec::new();
        // Secret answers are masked here, once, for the detail pane and
        // the task view alike.
        let input = rudder_model::schema::masked_input(task);
        for (name, value) in [
            ("request", &task.request),
            ("input", &input),
            ("result", &task.result),
            ("error", &task.error),
        ] {
            if let Some(v) = value {
                blocks.push((name.to_string(), json_lines(v)));
            }
        }
        for (name, v) in &task.extra {
            blocks.push((shown(&format!("{name} (other field)")), json_lines(v)));
        }
        ShownDetail {
            id: shown(&task.task_id),
            title: task.title.as_deref().map(shown_whole),
            key: task.idempotency_key.as_deref().map(shown_whole),
            kind: task.kind.as_deref().map(shown_whole),
            message: task.status_message.as_deref().map(shown_whole),
            holder: task.claimed_by.as_deref().map(shown),
            schema: task.input_schema.as_ref().map(|s| {
                let mut lines = schema_lines(s);
                lines.push(shown(&format!(
                    " MCP elicitation: {}",
                    rudder_model::schema::mcp_fit(s).line()
                )));
                lines
            }),
            blocks,
            notes: task.history.iter().map(history_note).collect(),
        }
    }
}

/// What a history entry says besides its status and time, as shown: who
/// made the change and through which face (`ana (tui)`), the reason a
/// cancel, failure or reclaim gave, the fields an answer gave (their names
/// only: a value may be secret), and rudder's own note; empty for none.
fn history_note(h: &rudder_model::task::HistoryEntry) -> String {
    let mut parts = Vec::new();
    match (&h.actor, &h.face) {
        (Some(a), Some(f)) => parts.push(format!("{} ({f})", shown(a))),
        (Some(a), None) => parts.push(shown(a)),
        (None, _) => {}
    }
    if let Some(r) = &h.reason {
        parts.push(format!("reason: {}", shown_whole(r)));
    }
    if !h.fields.is_empty() {
        let fields: Vec<String> = h.fields.iter().map(|f| shown(f)).collect();
        parts.push(format!("answered {}", fields.join(", ")));
    }
    if let Some(n) = &h.note {
        parts.push(shown_whole(n));
    }
    parts.join(" · ")
}

/// [`ShownTask`]s by task id; see the module docs.
#[derive(Debug, Default)]
pub struct ShownCache {
    entries: HashMap<String, ShownTask>,
    /// How many times text of a task was made (sanitized) so far.
    made: u64,
}

impl ShownCache {
    /// The cached entry of `task`, made anew if missing or of another revision.
    fn entry(&mut self, task: &Task) -> &mut ShownTask {
        let fresh = self
            .entries
            .get(&task.task_id)
            .is_some_and(|s| s.revision == task.revision);
        if !fresh {
            self.made += 1;
            self.entries
                .insert(task.task_id.clone(), ShownTask::of(task));
        }
        self.entries
            .get_mut(&task.task_id)
            .expect("the entry was just made")
    }

    /// What the table row of `task` shows.
    pub fn row(&mut self, task: &Task) -> &ShownTask {
        self.entry(task)
    }

    /// What the detail pane of `task` shows.
    pub fn detail(&mut self, task: &Task) -> &ShownDetail {
        self.entry(task);
        let entry = self
            .entries
            .get_mut(&task.task_id)
            .expect("the entry was just made");
        if entry.detail.is_none() {
            self.made += 1;
        }
        entry.detail.get_or_insert_with(|| ShownDetail::of(task))
    }

    /// Forget `id`: it changed, appeared or vanished.
    pub fn forget(&mut self, id: &str) {
        self.entries.remove(id);
    }

    /// Keep only the tasks `keep` accepts (those still held).
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.entries.retain(|id, _| keep(id));
    }

    /// Forget every task (the store is gone).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// How many tasks are cached.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many times text of a task was made (sanitized) so far: a row's,
    /// or a detail pane's.
    pub fn made(&self) -> u64 {
        self.made
    }
}

/// A compact relative time: `12s`, `5m`, `3h`, `4d` (`-` when unknown).
pub fn relative(
    now: chrono::DateTime<chrono::Utc>,
    at: Option<chrono::DateTime<chrono::Utc>>,
) -> String {
    let Some(at) = at else {
        return "-".into();
    };
    let s = (now - at).num_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// An absolute time as shown in the detail pane.
pub fn absolute(at: chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A status's symbol, as every pane draws it.
pub fn symbol(status: rudder_model::task::Status) -> &'static str {
    use rudder_model::task::Status;
    match status {
        Status::InputRequired => "◆",
        Status::Working => "▶",
        Status::Completed => "✔",
        Status::Failed => "✖",
        Status::Cancelled => "⊘",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rudder_model::task::Status;

    #[test]
    fn text_is_sanitized_and_capped_with_an_ellipsis() {
        assert_eq!(shown("a\u{1b}[2Jb"), "ab");
        let long = "x".repeat(MAX_CHARS + 10);
        let s = shown(&long);
        assert_eq!(s.chars().count(), MAX_CHARS + 1);
        assert!(s.ends_with('…'));
        assert_eq!(shown(&"é".repeat(MAX_CHARS)), "é".repeat(MAX_CHARS));
    }

    #[test]
    fn a_task_is_made_once_per_revision() {
        let mut cache = ShownCache::default();
        let mut task = Task::new("t-1", Status::Working);
        task.title = Some("evil\u{1b}]0;pwned\u{7} title".into());
        task.revision = 1;
        assert_eq!(cache.row(&task).label, "evil title");
        assert_eq!(cache.row(&task).label, "evil title");
        assert_eq!(cache.made(), 1);
        assert_eq!(cache.detail(&task).title.as_deref(), Some("evil title"));
        assert_eq!(cache.detail(&task).title.as_deref(), Some("evil title"));
        assert_eq!(cache.made(), 2, "the detail is made once, on demand");
        task.title = Some("new".into());
        task.revision = 2;
        assert_eq!(cache.detail(&task).title.as_deref(), Some("new"));
        assert_eq!(cache.row(&task).label, "new");
        assert_eq!(cache.made(), 4);
        // Forgotten (the feed saw it change): made again even at the same
        // revision, for writers that keep none.
        task.title = Some("same revision".into());
        cache.forget("t-1");
        assert_eq!(cache.row(&task).label, "same revision");
        assert_eq!(cache.made(), 5);
    }

    #[test]
    fn the_detail_keeps_a_long_message_whole() {
        // A 5 kB stack trace is read whole in the task view, not cut at
        // a table cell's length.
        let mut task = Task::new("t-1", Status::Failed);
        let trace: String = (0..250)
            .map(|i| format!("at frame {i:04} in x.rs\n"))
            .collect();
        assert!(trace.len() > 2 * MAX_CHARS);
        task.status_message = Some(trace.clone());
        task.error = Some(serde_json::json!({ "trace": trace }));
        let d = ShownDetail::of(&task);
        assert_eq!(d.message.as_deref(), Some(sanitize(&trace).as_ref()));
        let error = &d
            .blocks
            .iter()
            .find(|(n, _)| n == "error")
            .expect("error")
            .1;
        assert!(error.iter().any(|l| l.contains("frame 0249")), "{error:?}");
        // Past the cap, the cut says how much is missing.
        let huge = "y".repeat(MAX_TEXT_CHARS + 7);
        task.status_message = Some(huge);
        let m = ShownDetail::of(&task).message.expect("message");
        assert!(
            m.ends_with("… (7 more characters: `rudder get ID` shows them all)"),
            "{}",
            &m[m.len() - 80..]
        );
    }

    #[test]
    fn long_json_values_keep_their_first_lines() {
        let v = Value::Array((0..MAX_LINES + 10).map(Value::from).collect());
        let lines = json_lines(&v);
        assert_eq!(lines.len(), MAX_LINES + 1);
        assert!(
            lines[MAX_LINES].contains("more lines"),
            "{}",
            lines[MAX_LINES]
        );
    }
}
