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
    out: io::BufWriter<io::StdoutLock<'static>>,
}

impl Default for Stream {
    fn default() -> Self {
        Stream {
            out: io::BufWriter::new(io::stdout().lock()),
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

/// The list view's header line.
pub fn task_table_header() -> String {
    format!(
        "{:<8}  {:<14}  {:<28}  {:<9}  {:<9}  {}\n",
        "ID", "STATUS", "TITLE/KEY", "AGE", "UPDATED", "MESSAGE"
    )
}

/// One line of the list view.
pub fn task_row(t: &Task, now: DateTime<Utc>) -> String {
    format!(
        "{:<8}  {:<14}  {:<28}  {:<9}  {:<9}  {}\n",
        clean(t.short_id(), 8),
        t.status.as_str(),
        clean(t.label().unwrap_or("-"), 28),
        ago(t.created_at, now).trim_end_matches(" ago"),
        ago(t.updated_at, now).trim_end_matches(" ago"),
        clean(t.current_message().unwrap_or(""), 60),
    )
}

/// The list view: one line per task.
pub fn task_table(tasks: &[Task], now: DateTime<Utc>) -> String {
    if tasks.is_empty() {
        return NO_TASKS.into();
    }
    let mut out = task_table_header();
    for t in tasks {
        out.push_str(&task_row(t, now));
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

/// Every field of one task.
pub fn task_detail(t: &Task, now: DateTime<Utc>) -> String {
    let mut o = String::new();
    let mut line = |k: &str, v: String| {
        let _ = writeln!(o, "{k:<10} {v}");
    };
    line("task", sanitize_line(&t.task_id));
    line("status", format!("{} (revision {})", t.status, t.revision));
    if let Some(v) = &t.title {
        line("title", sanitize_line(v));
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
    block("result", &t.result);
    block("error", &t.error);
    if let Some(schema) = &t.input_schema {
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
