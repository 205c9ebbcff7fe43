//! Reclaim: the age prompt, the preview of what would be reclaimed (and how
//! long each task has been idle), the y/n, and the report.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::confirm::{answer_line, reason_footer};
use super::{Theme, absolute, centered, clear};
use crate::app::{App, Popup, Tone};
use crate::shown::head;
use rudder_model::text::clean;
use rudder_store::{ReclaimReport, human_duration};

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let width = area.width.saturating_sub(4).min(100);
    let w = usize::from(width.saturating_sub(2));
    let mut lines: Vec<Line> = Vec::new();
    let mut cursor = None;
    let footer: &str;
    let reason_text: String;
    match &app.popup {
        Popup::ReclaimAge { input, error, only } => {
            // With marks, only the marked tasks are considered: say so.
            lines.push(Line::raw(match only {
                Some(ids) => format!(
                    "Fail those of the {} marked task(s) unfinished and not updated for at least:",
                    ids.len()
                ),
                None => "Fail every unfinished task not updated for at least:".into(),
            }));
            cursor = Some((1, 2 + input.visual_cursor()));
            lines.push(Line::raw(format!(
                "  {}",
                clean(input.value(), w.saturating_sub(3))
            )));
            if let Some(e) = error {
                lines.push(Line::styled(clean(&format!("✖ {e}"), w), theme.error()));
            }
            lines.push(Line::styled("e.g. 90s, 15m, 2h", theme.dim()));
            footer = " Enter previews · Esc closes ";
        }
        Popup::ReclaimLoading { age, .. } => {
            lines.push(Line::raw(format!(
                "looking for tasks idle for {age} or more…"
            )));
            footer = " Esc closes ";
        }
        Popup::ReclaimPreview {
            age,
            report,
            reason,
            ..
        } => {
            if report.reclaimed.is_empty() {
                lines.push(Line::raw(format!(
                    "No unfinished task has been idle for {age} or more."
                )));
            } else {
                lines.push(Line::raw(format!(
                    "Reclaim these {} task(s), idle for {age} or more? They become failed.",
                    report.reclaimed.len()
                )));
            }
            report_lines(&mut lines, report, w, theme, area.height, false);
            footer = if report.reclaimed.is_empty() {
                " Esc closes "
            } else {
                let (answer, col) =
                    answer_line(reason.as_ref(), "reclaim them", "keep them", w, theme);
                lines.push(Line::raw(""));
                lines.push(answer);
                match col {
                    Some(col) => {
                        cursor = Some((lines.len() - 1, col));
                        reason_text = reason_footer("reclaims them");
                        &reason_text
                    }
                    None => " y / r / n ",
                }
            };
        }
        Popup::ReclaimDone { report } => {
            lines.push(Line::raw(format!(
                "Reclaimed {} task(s) at {}.",
                report.reclaimed.len(),
                absolute(report.at)
            )));
            report_lines(&mut lines, report, w, theme, area.height, true);
            footer = " any key closes ";
        }
        _ => return,
    }
    let height = (lines.len() as u16 + 2)
        .min(area.height.saturating_sub(2))
        .max(4);
    let rect = centered(area, width, height);
    clear(frame, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(" reclaim ", theme.title()))
        .title_bottom(Span::styled(footer, theme.dim()));
    let inner = block.inner(rect);
    if let Some((line, col)) = cursor {
        frame.set_cursor_position((
            inner.x + (col as u16).min(inner.width.saturating_sub(1)),
            inner.y + line as u16,
        ));
    }
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}

fn report_lines(
    lines: &mut Vec<Line>,
    report: &ReclaimReport,
    w: usize,
    theme: &Theme,
    max_h: u16,
    done: bool,
) {
    // Leave room for the frame and the other lines.
    let room = usize::from(max_h.saturating_sub(10)).max(3);
    lines.push(Line::raw(""));
    // Narrow, the last update is its time of day (the day is today's or
    // the idle time says it), so the title keeps its room.
    let (time_fmt, time_w) = if w < 90 {
        ("%H:%M:%S", 10)
    } else {
        ("%Y-%m-%d %H:%M:%S", 21)
    };
    if !report.reclaimed.is_empty() {
        lines.push(Line::styled(
            format!(
                "{:<10}{:<16}{:<10}{:<time_w$}{}",
                "id", "was", "idle", "updated", "title / worker"
            ),
            theme.dim(),
        ));
    }
    for r in report.reclaimed.iter().take(room) {
        let (title, claimed_by) = (
            r.title.as_deref().map(head),
            r.claimed_by.as_deref().map(head),
        );
        let who = match (title, claimed_by) {
            (Some(t), Some(c)) => format!("{t} (lease: {c})"),
            (Some(t), None) => t.to_string(),
            (None, Some(c)) => format!("(lease: {c})"),
            (None, None) => String::new(),
        };
        let text = format!(
            "{:<10}{:<16}{:<10}{:<time_w$}{}",
            rudder_model::task::short_id(&r.task_id),
            r.status_before.as_str(),
            human_duration(r.idle_ms),
            r.last_update.format(time_fmt).to_string(),
            who
        );
        let text = rudder_model::text::sanitize(&text);
        lines.push(Line::raw(rudder_model::text::truncate_words(&text, w)));
    }
    if report.reclaimed.len() > room {
        lines.push(Line::styled(
            format!("… and {} more", report.reclaimed.len() - room),
            theme.dim(),
        ));
    }
    if report.active > 0 && !done {
        lines.push(Line::styled(
            format!(
                "{} unfinished task(s) updated more recently are left alone.",
                report.active
            ),
            theme.dim(),
        ));
    }
    if !report.skipped.is_empty() {
        // After the y, every skipped task is one the user confirmed: say
        // why each was left alone, as many as fit.
        let (heading, style, shown) = if done {
            let room = room.saturating_sub(report.reclaimed.len().min(room)).max(3);
            (
                format!("{} previewed task(s) not reclaimed:", report.skipped.len()),
                theme.tone(Tone::Warning),
                room,
            )
        } else {
            (
                // A marked task may have finished since: then not
                // "unfinished".
                format!(
                    "{} {}task(s) left alone:",
                    report.skipped.len(),
                    if report.skipped.iter().any(|s| s.status.is_terminal()) {
                        ""
                    } else {
                        "unfinished "
                    }
                ),
                theme.dim(),
                3,
            )
        };
        lines.push(Line::styled(heading, style));
        for s in report.skipped.iter().take(shown) {
            let text = format!(
                "  {} {}: {}",
                rudder_model::task::short_id(&s.task_id),
                s.status,
                head(&s.reason)
            );
            lines.push(Line::styled(clean(&text, w), style));
        }
        if report.skipped.len() > shown {
            lines.push(Line::styled(
                format!("  … and {} more", report.skipped.len() - shown),
                theme.dim(),
            ));
        }
    }
}
