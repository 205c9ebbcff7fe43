//! The detail pane: every field of the selected task, the schema as a field
//! list, JSON values pretty-printed, the history as a timeline. Scrollable.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use serde_json::Value;

use super::{Theme, absolute, relative};
use crate::store::{human_duration, ms};
use crate::task::Task;
use crate::text::clean;
use crate::tui::app::App;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App, theme: &Theme) {
    let block = Block::default()
        .borders(Borders::TOP)
        .title(Span::styled(" detail ", theme.title()));
    let inner = block.inner(area);
    app.detail_area = inner;
    let width = usize::from(inner.width);
    let lines = match app.selected_task() {
        Some(task) => lines(task, app.now, width, theme),
        None => vec![Line::styled("no task selected", theme.dim())],
    };
    // Do not scroll past the end.
    let max = lines.len().saturating_sub(usize::from(inner.height).max(1));
    let max = u16::try_from(max).unwrap_or(u16::MAX);
    if app.detail_scroll > max {
        app.detail_scroll = max;
    }
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .scroll((app.detail_scroll, 0)),
        area,
    );
}

fn when(now: DateTime<Utc>, at: Option<DateTime<Utc>>) -> String {
    match at {
        Some(t) => format!("{} ({} ago)", absolute(t), relative(now, Some(t))),
        None => "-".into(),
    }
}

/// The lines of the detail pane for `task`.
fn lines(task: &Task, now: DateTime<Utc>, width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = Vec::new();
    let key_w = 12;
    let value_w = width.saturating_sub(key_w + 1);
    let field = |out: &mut Vec<Line<'static>>, key: &str, value: String| {
        out.push(Line::from(vec![
            Span::styled(format!("{key:<key_w$} "), theme.dim()),
            Span::raw(clean(&value, value_w)),
        ]));
    };
    out.push(Line::from(vec![
        Span::styled(
            format!("{} {}", Theme::symbol(task.status), task.status),
            theme.status(task.status),
        ),
        Span::raw(format!(
            "  {}",
            clean(&task.task_id, width.saturating_sub(20))
        )),
    ]));
    if let Some(t) = &task.title {
        field(&mut out, "title", t.clone());
    }
    if let Some(k) = &task.idempotency_key {
        field(&mut out, "key", k.clone());
    }
    if let Some(m) = &task.status_message {
        field(&mut out, "message", m.clone());
    }
    if let Some(p) = task.progress {
        field(
            &mut out,
            "progress",
            format!("{}/{} steps", p.current, p.total),
        );
    }
    field(&mut out, "revision", task.revision.to_string());
    field(&mut out, "created", when(now, task.created_at));
    field(&mut out, "updated", when(now, task.updated_at));
    match &task.claimed_by {
        Some(holder) => {
            let lease = match task.lease_expires_at {
                Some(until) if until > now => {
                    format!(
                        "until {} (live, {} left)",
                        absolute(until),
                        human_duration(ms(until - now))
                    )
                }
                Some(until) => format!("expired {} ago", human_duration(ms(now - until))),
                None => "no expiry".into(),
            };
            field(&mut out, "lease", format!("{holder}, {lease}"));
        }
        None => field(&mut out, "lease", "none".into()),
    }
    if let Some(ttl) = task.ttl_ms {
        field(&mut out, "ttl", human_duration(ttl));
    }
    if let Some(p) = task.poll_interval_ms {
        field(&mut out, "poll every", human_duration(p));
    }
    if let Some(schema) = &task.input_schema {
        out.push(Line::styled("input schema", theme.title()));
        schema_lines(&mut out, schema, width);
    }
    for (name, value) in [
        ("request", &task.request),
        ("input", &task.input_value),
        ("result", &task.result),
        ("error", &task.error),
    ] {
        if let Some(v) = value {
            out.push(Line::styled(name.to_string(), theme.title()));
            json_lines(&mut out, v, width);
        }
    }
    for (name, v) in &task.extra {
        out.push(Line::styled(
            format!("{} (other field)", clean(name, width)),
            theme.title(),
        ));
        json_lines(&mut out, v, width);
    }
    if !task.history.is_empty() {
        out.push(Line::styled("history", theme.title()));
        for (i, h) in task.history.iter().enumerate() {
            let end = task.history.get(i + 1).map(|n| n.at);
            let lasted = match end {
                Some(e) => format!("for {}", human_duration(ms(e - h.at))),
                None if !h.status.is_terminal() => {
                    format!("for {} so far", human_duration(ms(now - h.at)))
                }
                None => String::new(),
            };
            let note = h
                .note
                .as_deref()
                .map(|n| format!(" · {n}"))
                .unwrap_or_default();
            let text = format!(
                " {} {:<15} {:<14}{}",
                h.at.format("%H:%M:%S"),
                h.status,
                lasted,
                note
            );
            out.push(Line::from(vec![
                Span::styled(
                    format!("{} ", Theme::symbol(h.status)),
                    theme.status(h.status),
                ),
                Span::raw(clean(&text, width.saturating_sub(2))),
            ]));
        }
    }
    out
}

fn schema_lines(out: &mut Vec<Line<'static>>, schema: &Value, width: usize) {
    let required = crate::tui::form::required(schema);
    let Some(props) = schema
        .get("properties")
        .and_then(Value::as_object)
        .filter(|p| !p.is_empty())
    else {
        json_lines(out, schema, width);
        return;
    };
    for (name, prop) in props {
        let ty = match prop.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(other) => other.to_string(),
            None if prop.get("enum").is_some() => "enum".into(),
            None => "any".into(),
        };
        let mut text = format!(
            " {}{} : {}",
            name,
            if required.contains(&name.as_str()) {
                " *"
            } else {
                ""
            },
            ty
        );
        if let Some(e) = prop.get("enum") {
            text.push_str(&format!(" {e}"));
        }
        if let Some(d) = prop.get("default") {
            text.push_str(&format!(" = {d}"));
        }
        if let Some(desc) = prop.get("description").and_then(Value::as_str) {
            text.push_str(&format!(" — {desc}"));
        }
        out.push(Line::raw(clean(&text, width)));
    }
}

fn json_lines(out: &mut Vec<Line<'static>>, value: &Value, width: usize) {
    let pretty = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    for l in pretty.lines() {
        // Escapes are already JSON-escaped, but bidi overrides are not.
        out.push(Line::raw(clean(&format!(" {l}"), width)));
    }
}
