//! The detail pane: every field of the selected task, the schema as a field
//! list, JSON values pretty-printed, the history as a timeline. Scrollable.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::{Theme, absolute, relative};
use crate::store::{human_duration, ms};
use crate::task::Task;
use crate::text::truncate;
use crate::tui::app::App;
use crate::tui::shown::ShownDetail;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App, theme: &Theme) {
    let block = Block::default()
        .borders(Borders::TOP)
        .title(Span::styled(" detail ", theme.title()));
    let inner = block.inner(area);
    app.detail_area = inner;
    let width = usize::from(inner.width);
    // The snapshot, apart from the app whose text cache is filled here.
    let tasks = Arc::clone(&app.tasks);
    let now = app.now;
    let lines = match app.selected.as_deref().and_then(|id| tasks.get(id)) {
        Some(task) => lines(task, app.shown.detail(task), now, width, theme),
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

/// The lines of the detail pane for `task`, whose text from the store is
/// `text` (sanitized once per change of the task; only cut to width here).
fn lines(
    task: &Task,
    text: &ShownDetail,
    now: DateTime<Utc>,
    width: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = Vec::new();
    let key_w = 12;
    let value_w = width.saturating_sub(key_w + 1);
    // `value` is sanitized already (from `text`) or made here of numbers
    // and times.
    let field = |out: &mut Vec<Line<'static>>, key: &str, value: &str| {
        out.push(Line::from(vec![
            Span::styled(format!("{key:<key_w$} "), theme.dim()),
            Span::raw(truncate(value, value_w).into_owned()),
        ]));
    };
    out.push(Line::from(vec![
        Span::styled(
            format!("{} {}", Theme::symbol(task.status), task.status),
            theme.status(task.status),
        ),
        Span::raw(format!(
            "  {}",
            truncate(&text.id, width.saturating_sub(20))
        )),
    ]));
    if let Some(t) = &text.title {
        field(&mut out, "title", t);
    }
    if let Some(k) = &text.key {
        field(&mut out, "key", k);
    }
    if let Some(m) = &text.message {
        field(&mut out, "message", m);
    }
    if let Some(p) = task.progress {
        field(
            &mut out,
            "progress",
            &format!("{}/{} steps", p.current, p.total),
        );
    }
    field(&mut out, "revision", &task.revision.to_string());
    field(&mut out, "created", &when(now, task.created_at));
    field(&mut out, "updated", &when(now, task.updated_at));
    match &text.holder {
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
            field(&mut out, "lease", &format!("{holder}, {lease}"));
        }
        None => field(&mut out, "lease", "none"),
    }
    if let Some(ttl) = task.ttl_ms {
        field(&mut out, "ttl", &human_duration(ttl));
    }
    if let Some(p) = task.poll_interval_ms {
        field(&mut out, "poll every", &human_duration(p));
    }
    if let Some(schema) = &text.schema {
        out.push(Line::styled("input schema", theme.title()));
        cut_lines(&mut out, schema, width);
    }
    for (name, lines) in &text.blocks {
        out.push(Line::styled(
            truncate(name, width).into_owned(),
            theme.title(),
        ));
        cut_lines(&mut out, lines, width);
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
            let note = text
                .notes
                .get(i)
                .filter(|n| !n.is_empty())
                .map(|n| format!(" · {n}"))
                .unwrap_or_default();
            let line = format!(
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
                Span::raw(truncate(&line, width.saturating_sub(2)).into_owned()),
            ]));
        }
    }
    out
}

/// Lines made by [`crate::tui::shown`], cut to `width`.
fn cut_lines(out: &mut Vec<Line<'static>>, lines: &[String], width: usize) {
    for l in lines {
        out.push(Line::raw(truncate(l, width).into_owned()));
    }
}
