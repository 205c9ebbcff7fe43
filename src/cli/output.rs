//! Human-readable output of the CLI. Every string from the store is passed
//! through [`crate::text::sanitize`] before it reaches the terminal.

use std::fmt::Write;
use std::io::{self, Write as _};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

use crate::store::{Outcome, PruneReport, ReclaimReport, human_duration, ms};
use crate::task::{Change, Status, Task};
use crate::text::{clean, sanitize};

/// Writing the command's answer failed (a full disk, a closed or read-only
/// file as stdout). Whatever the command changed in the store stands.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the output to {stream}: {source}")]
pub struct OutputError {
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    /// Why.
    #[source]
    pub source: io::Error,
}

/// Write `text` to stdout and flush it, reporting a failure instead of
/// panicking as `print!` does. (A reader that went away ends the process
/// quietly with SIGPIPE before this sees an error, like every Unix tool.)
pub fn emit(text: &str) -> Result<(), OutputError> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|source| OutputError {
            stream: "stdout",
            source,
        })
}

/// Stdout for an answer written piece by piece (a streamed `list`),
/// buffered; any failure is reported as the [`OutputError`] it is.
pub struct Stream {
    out: io::BufWriter<Box<dyn io::Write>>,
}

impl Default for Stream {
    /// Straight to stdout's file descriptor when it can be had (Rust's
    /// stdout looks for the last line break of every write, which costs a
    /// read of each 64 KiB run of `list --json` that holds none), else
    /// through stdout.
    fn default() -> Self {
        use std::os::fd::AsFd;
        let mut stdout = io::stdout();
        // Nothing of this answer is in stdout's own buffer yet; what an
        // earlier write left there goes first.
        let raw: Box<dyn io::Write> = match stdout
            .flush()
            .and_then(|()| stdout.as_fd().try_clone_to_owned())
        {
            Ok(fd) => Box::new(std::fs::File::from(fd)),
            Err(_) => Box::new(stdout.lock()),
        };
        Stream {
            out: io::BufWriter::with_capacity(64 * 1024, raw),
        }
    }
}

impl Stream {
    fn failed(source: io::Error) -> OutputError {
        OutputError {
            stream: "stdout",
            source,
        }
    }

    /// Write `text`.
    pub fn text(&mut self, text: &str) -> Result<(), OutputError> {
        self.out.write_all(text.as_bytes()).map_err(Self::failed)
    }

    /// Write `bytes` as they are.
    pub fn bytes(&mut self, bytes: &[u8]) -> Result<(), OutputError> {
        self.out.write_all(bytes).map_err(Self::failed)
    }

    /// Write `value` as compact JSON.
    pub fn json<T: serde::Serialize>(&mut self, value: &T) -> Result<(), OutputError> {
        serde_json::to_writer(&mut self.out, value).map_err(|e| Self::failed(io::Error::other(e)))
    }

    /// Flush everything written.
    pub fn finish(mut self) -> Result<(), OutputError> {
        self.out.flush().map_err(Self::failed)
    }
}

/// [`emit`] `text` and a line break.
pub fn emit_line(text: &str) -> Result<(), OutputError> {
    emit(&format!("{text}\n"))
}

/// Write one line to stderr, best effort: when even stderr cannot be
/// written there is nobody left to tell, and the exit code still says how
/// the command ended.
pub fn note(text: &str) {
    // One write of the whole line, so that lines of several threads or
    // processes sharing a log never interleave.
    let line = format!("{text}\n");
    let mut err = io::stderr().lock();
    let _ = err.write_all(line.as_bytes()).and_then(|()| err.flush());
}

pub fn sanitize_line(s: &str) -> String {
    sanitize(s).into_owned()
}

fn ago(at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match at {
        Some(at) => format!("{} ago", human_duration(ms(now - at))),
        None => "-".into(),
    }
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `cancelled: task 1a2b… is now cancelled` / `unchanged: task … is already cancelled`.
pub fn outcome_line(o: &Outcome, verb: &str) -> String {
    let t = &o.task;
    match o.change {
        Change::Applied => format!(
            "{verb}: task {} is now {} (revision {})",
            sanitize(&t.task_id),
            t.status,
            t.revision
        ),
        Change::Unchanged => format!(
            "unchanged: task {} is already {} (revision {}); nothing was written",
            sanitize(&t.task_id),
            t.status,
            t.revision
        ),
    }
}

/// What `claim` prints for a person: the task and who holds it until when.
pub fn claim_line(t: &Task, holder: &str) -> String {
    let until = t
        .lease_expires_at
        .map(|at| {
            format!(
                " until {}",
                at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            )
        })
        .unwrap_or_default();
    format!(
        "claimed: task {} (revision {}) is held by {}{until}",
        sanitize(&t.task_id),
        t.revision,
        sanitize(holder)
    )
}

/// The snapshot a refusal carries, in one line for stderr.
pub fn current_state(t: &Task) -> String {
    let mut s = format!(
        "current state: {} is {} at revision {}",
        sanitize(&t.task_id),
        t.status,
        t.revision
    );
    if let Some(m) = t.error_message() {
        let _ = write!(s, ", error: {}", clean(m, 200));
    }
    if let Some(h) = &t.claimed_by {
        let _ = write!(s, ", lease held by {}", clean(h, 60));
    }
    s
}

/// What the list view says for no tasks.
pub const NO_TASKS: &str = "no tasks\n";

/// The columns of the list view, fitted to a terminal's width so that a
/// row never wraps: the message takes what is left, the title gives way
/// next, and a terminal narrower than that cuts each row at its edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableLayout {
    title: usize,
    message: usize,
    width: Option<usize>,
}

impl TableLayout {
    /// Every column but the title and the message, with the gaps.
    const FIXED: usize = 8 + 2 + 14 + 2 + Self::KIND + 2 + 2 + 9 + 2 + 9 + 2;
    /// The kind's column: most kinds are one short word (longer ones are
    /// cut, `get` and `--json` show them whole).
    const KIND: usize = 10;
    const TITLE: usize = 28;
    const NARROWEST_TITLE: usize = 10;
    const MESSAGE: usize = 60;

    /// The layout for a terminal `width` columns wide, or (`None`: not a
    /// terminal, such as a pipe or a file) the full one.
    pub fn fit(width: Option<usize>) -> Self {
        let Some(width) = width else {
            return TableLayout {
                title: Self::TITLE,
                message: Self::MESSAGE,
                width: None,
            };
        };
        let room = width.saturating_sub(Self::FIXED);
        let title = room.clamp(Self::NARROWEST_TITLE, Self::TITLE);
        TableLayout {
            title,
            message: room.saturating_sub(title).min(Self::MESSAGE),
            width: Some(width),
        }
    }

    /// The list view's header line.
    pub fn header(&self) -> String {
        self.line([
            "ID".into(),
            "STATUS".into(),
            "KIND".into(),
            "TITLE/KEY".into(),
            "AGE".into(),
            "UPDATED".into(),
            "MESSAGE".into(),
        ])
    }

    /// One line of the list view.
    pub fn row(&self, t: &Task, now: DateTime<Utc>) -> String {
        self.line([
            clean(t.short_id(), 8),
            t.status.as_str().into(),
            clean(t.kind.as_deref().unwrap_or("-"), Self::KIND),
            clean(t.label().unwrap_or("-"), self.title),
            ago(t.created_at, now).trim_end_matches(" ago").into(),
            ago(t.updated_at, now).trim_end_matches(" ago").into(),
            clean(t.current_message().unwrap_or(""), self.message),
        ])
    }

    fn line(&self, cells: [String; 7]) -> String {
        let widths = [8, 14, Self::KIND, self.title, 9, 9, 0];
        let mut line = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            // Pad by terminal columns, not characters: a wide character
            // takes two.
            let used = unicode_width::UnicodeWidthStr::width(cell.as_str());
            if i + 1 < cells.len() {
                line.extend(std::iter::repeat_n(' ', width.saturating_sub(used)));
            }
        }
        let line = line.trim_end();
        let line = match self.width {
            Some(w) => crate::text::truncate(line, w).into_owned(),
            None => line.to_string(),
        };
        line + "\n"
    }
}

/// The list view for a pipe or a file: a header and one line per task.
pub fn task_table(tasks: &[Task], now: DateTime<Utc>) -> String {
    if tasks.is_empty() {
        return NO_TASKS.into();
    }
    let layout = TableLayout::fit(None);
    let mut out = layout.header();
    for t in tasks {
        out.push_str(&layout.row(t, now));
    }
    out
}

fn pretty(v: &Value) -> String {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    text.lines()
        .map(|l| format!("    {}", sanitize(l)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every field of one task; `revealed`: its secret answers are in clear
/// (`get --reveal`), else masked.
pub fn task_detail(t: &Task, now: DateTime<Utc>, revealed: bool) -> String {
    let mut o = String::new();
    let mut line = |k: &str, v: String| {
        let _ = writeln!(o, "{k:<10} {v}");
    };
    line("task", sanitize_line(&t.task_id));
    line("status", format!("{} (revision {})", t.status, t.revision));
    if let Some(v) = &t.title {
        line("title", sanitize_line(v));
    }
    if let Some(v) = &t.kind {
        line("kind", sanitize_line(v));
    }
    if let Some(v) = &t.idempotency_key {
        line("key", sanitize_line(v));
    }
    if let Some(at) = t.created_at {
        line("created", format!("{} ({})", stamp(at), ago(Some(at), now)));
    }
    if let Some(at) = t.updated_at {
        line("updated", format!("{} ({})", stamp(at), ago(Some(at), now)));
    }
    if let Some(v) = &t.status_message {
        line("message", sanitize_line(v));
    }
    if let Some(p) = t.progress {
        line("progress", format!("{}/{}", p.current, p.total));
    }
    if let Some(h) = &t.claimed_by {
        let until = t
            .lease_expires_at
            .map(|u| {
                if u > now {
                    format!("lease until {}", stamp(u))
                } else {
                    format!("lease expired {}", ago(Some(u), now))
                }
            })
            .unwrap_or_default();
        line("worker", format!("{} {until}", sanitize_line(h)));
    }
    if let Some(o) = &t.origin {
        line("origin", sanitize_line(&o.line()));
    }
    // The MCP principal whose task it is (only it reaches it over MCP).
    if let Some(owner) = &t.owned_by {
        line("owner", sanitize_line(owner));
    }
    if let Some(v) = t.ttl_ms {
        line("ttl", human_duration(v));
    }
    let mut block = |k: &str, v: &Option<Value>| {
        if let Some(v) = v {
            let _ = writeln!(o, "{k}:\n{}", pretty(v));
        }
    };
    block("request", &t.request);
    block("input schema", &t.input_schema);

    block("input", &t.input_value);
    // Earlier answers, oldest first, each with its question; `get` masks
    // their secrets like the input's (unless revealed).
    for a in &t.answered {
        let question = a.message.as_deref().unwrap_or("asked without a message");
        let heading = format!("earlier answer ({})", sanitize_line(question));
        block(&heading, &Some(a.input_value.clone()));
    }
    block("result", &t.result);
    block("error", &t.error);
    if let Some(schema) = &t.input_schema {
        // Names the secret fields, so a masked value is not taken for the
        // answer itself (names are not secret).
        let secret: Vec<String> = crate::schema::secret_fields(schema)
            .iter()
            .map(|p| match p.is_empty() {
                true => "(the whole input)".to_string(),
                false => p.join("."),
            })
            .collect();
        if !secret.is_empty() {
            let how = match revealed {
                true => "shown in clear: --reveal".to_string(),
                false => format!(
                    "shown as {}; `rudder get --reveal` shows them",
                    crate::schema::MASK
                ),
            };
            let _ = writeln!(
                o,
                "secret fields: {} ({how})",
                sanitize_line(&secret.join(", "))
            );
        }
        let fit = crate::schema::mcp_fit(schema).line();
        let _ = writeln!(o, "MCP elicitation: {fit}");
    }
    if !t.extra.is_empty() {
        let extra = Value::Object(t.extra.clone().into_iter().collect());
        let _ = writeln!(o, "other fields:\n{}", pretty(&extra));
    }
    if !t.history.is_empty() {
        let _ = writeln!(o, "history:");
        let mut prev: Option<DateTime<Utc>> = None;
        for h in &t.history {
            let took = prev
                .map(|p| format!("+{}", human_duration(ms(h.at - p))))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "    {}  {:<14} {:<9} {}",
                stamp(h.at),
                h.status.as_str(),
                took,
                sanitize_line(h.note.as_deref().unwrap_or(""))
            );
            prev = Some(h.at);
        }
    }
    o
}

/// The reclaim report, for a person at 3 a.m.
pub fn reclaim_report(r: &ReclaimReport) -> String {
    let mut o = String::new();
    let threshold = human_duration(r.older_than_ms);
    let verb = if r.dry_run {
        "Would reclaim"
    } else {
        "Reclaimed"
    };
    if r.reclaimed.is_empty() {
        let _ = writeln!(
            o,
            "No task has been idle for {threshold} or more; nothing to reclaim."
        );
    } else {
        let _ = writeln!(
            o,
            "{verb} {} task(s) idle for {threshold} or more (as of {}):",
            r.reclaimed.len(),
            stamp(r.at)
        );
        for t in &r.reclaimed {
            let _ = writeln!(
                o,
                "  {}  was {:<14}  idle {:<8}  last update {}  {}{}",
                sanitize(&t.task_id),
                t.status_before.as_str(),
                human_duration(t.idle_ms),
                stamp(t.last_update),
                clean(t.title.as_deref().unwrap_or(""), 40),
                t.claimed_by
                    .as_deref()
                    .map(|w| format!("  (worker {} stopped renewing)", clean(w, 40)))
                    .unwrap_or_default(),
            );
        }
        if !r.dry_run {
            let _ = writeln!(o, "Each is now failed with an error saying why.");
        }
    }
    if r.active > 0 {
        let _ = writeln!(
            o,
            "{} unfinished task(s) updated within {} left alone.",
            r.active,
            human_duration(r.older_than_ms)
        );
    }
    if !r.skipped.is_empty() {
        let _ = writeln!(o, "Left alone ({}):", r.skipped.len());
        for s in &r.skipped {
            let _ = writeln!(
                o,
                "  {}  {:<14}  {}",
                sanitize(&s.task_id),
                s.status.as_str(),
                sanitize(&s.reason)
            );
        }
    }
    if r.dry_run {
        let _ = writeln!(o, "Dry run: nothing was changed.");
    }
    o
}

pub fn prune_report(r: &PruneReport) -> String {
    let mut o = String::new();
    if r.removed.is_empty() {
        let _ = writeln!(o, "Nothing to prune.");
    } else {
        let _ = writeln!(o, "Removed {} finished task(s):", r.removed.len());
        for p in &r.removed {
            let rule = if p.rule == "ttl" {
                "its ttl expired"
            } else {
                "older than the limit"
            };
            let _ = writeln!(
                o,
                "  {}  {:<9}  age {:<8}  {}  {}",
                sanitize(&p.task_id),
                p.status.as_str(),
                human_duration(p.age_ms),
                rule,
                clean(p.title.as_deref().unwrap_or(""), 40)
            );
        }
    }
    for s in &r.skipped {
        let _ = writeln!(
            o,
            "  kept {}  {}  {}",
            sanitize(&s.task_id),
            s.status.as_str(),
            s.reason
        );
    }
    o
}

pub fn wait_line(t: &Task) -> String {
    match t.status {
        Status::InputRequired => format!(
            "{} is input_required: {}",
            sanitize(&t.task_id),
            sanitize(t.status_message.as_deref().unwrap_or("it waits for input"))
        ),
        Status::Failed => format!(
            "{} failed: {}",
            sanitize(&t.task_id),
            sanitize(t.error_message().unwrap_or("no error message"))
        ),
        s => format!("{} is {s}", sanitize(&t.task_id)),
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;

    fn task(title: &str, message: &str) -> Task {
        let mut t = Task::new("0123456789abcdef", Status::InputRequired);
        t.title = Some(title.into());
        t.status_message = Some(message.into());
        t
    }

    #[test]
    fn rows_fit_the_terminal_and_never_wrap() {
        let now = Utc::now();
        let tasks = [
            task(
                "INC-1043 card payments declined with 502",
                &"which service? ".repeat(10),
            ),
            task("日本語のタイトルはとても長いです、本当に", "短い"),
            task("t", ""),
        ];
        for width in [1, 20, 40, 79, 80, 100, 132, 300] {
            let layout = TableLayout::fit(Some(width));
            let lines =
                std::iter::once(layout.header()).chain(tasks.iter().map(|t| layout.row(t, now)));
            for line in lines {
                let used = unicode_width::UnicodeWidthStr::width(line.trim_end_matches('\n'));
                assert!(used <= width, "{used} > {width}: {line:?}");
            }
        }
        // Wide enough, nothing is cut but the message at its 60 columns.
        let row = TableLayout::fit(Some(300)).row(&tasks[0], now);
        assert!(row.contains("INC-1043 card payments decl"), "{row}");
        // The kind has its column, cut to it; none shows as `-`.
        let mut kinded = tasks[2].clone();
        kinded.kind = Some("diagnose-payments".into());
        let layout = TableLayout::fit(None);
        assert!(layout.header().contains("  KIND  "));
        assert!(layout.row(&kinded, now).contains("  diagnose-…  "));
        assert!(layout.row(&tasks[2], now).contains("  -  "));
        // The columns line up whatever the characters' widths: the
        // message starts at the same column.
        let layout = TableLayout::fit(Some(120));
        let start = |t: &Task, message: &str| {
            let row = layout.row(t, now);
            let cut = row.find(message).expect("the message is shown");
            unicode_width::UnicodeWidthStr::width(&row[..cut])
        };
        assert_eq!(start(&tasks[0], "which"), start(&tasks[1], "短い"));
    }

    #[test]
    fn a_pipe_gets_the_full_table() {
        let now = Utc::now();
        let t = task("title", "message");
        assert_eq!(
            task_table(std::slice::from_ref(&t), now),
            TableLayout::fit(None).header() + &TableLayout::fit(None).row(&t, now)
        );
        assert_eq!(task_table(&[], now), NO_TASKS);
    }
}
