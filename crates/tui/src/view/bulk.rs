//! Bulk actions on the marked tasks: the one y/n naming how many and which,
//! and the report of what happened to each.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use tui_input::Input;

use super::confirm::{answer_line, reason_footer};
use super::{Theme, centered, clear};
use crate::app::Tone;
use crate::marks::NAMED;
use rudder_model::text::clean;

fn dialog(
    frame: &mut Frame,
    area: Rect,
    title: &str,
    footer: &str,
    lines: Vec<Line>,
    theme: &Theme,
) -> Rect {
    let width = area.width.saturating_sub(4).min(90);
    let height = (lines.len() as u16 + 2)
        .min(area.height.saturating_sub(2))
        .max(4);
    let rect = centered(area, width, height);
    clear(frame, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(format!(" {title} "), theme.title()))
        .title_bottom(Span::styled(format!(" {footer} "), theme.dim()));
    let inner = block.inner(rect);
    frame.render_widget(Paragraph::new(lines).block(block), rect);
    inner
}

/// The inner width of a dialog on `area`.
fn inner(area: Rect) -> usize {
    usize::from(area.width.saturating_sub(4).min(90).saturating_sub(2))
}

pub(super) fn confirm(
    frame: &mut Frame,
    area: Rect,
    tasks: &[(String, String)],
    finished: &[String],
    reason: Option<&Input>,
    theme: &Theme,
) {
    let w = inner(area);
    let mut lines = vec![
        Line::raw(clean(
            &format!("Cancel these {} marked task(s)?", tasks.len()),
            w,
        )),
        Line::raw(clean("They become cancelled and never change again.", w)),
    ];
    for (_, label) in tasks.iter().take(NAMED) {
        lines.push(Line::raw(clean(&format!("  {label}"), w)));
    }
    if tasks.len() > NAMED {
        lines.push(Line::styled(
            format!("  … and {} more", tasks.len() - NAMED),
            theme.dim(),
        ));
    }
    if !finished.is_empty() {
        lines.push(Line::styled(
            clean(
                &format!(
                    "{} marked task(s) are finished and left alone:",
                    finished.len()
                ),
                w,
            ),
            theme.tone(Tone::Warning),
        ));
        for label in finished.iter().take(3) {
            lines.push(Line::styled(clean(&format!("  {label}"), w), theme.dim()));
        }
        if finished.len() > 3 {
            lines.push(Line::styled(
                format!("  … and {} more", finished.len() - 3),
                theme.dim(),
            ));
        }
    }
    lines.push(Line::raw(""));
    let yes = format!("cancel all {}", tasks.len());
    let (answer, cursor) = answer_line(reason, &yes, "keep them", w, theme);
    lines.push(answer);
    let row = lines.len() - 1;
    let footer = match reason {
        Some(_) => reason_footer("cancels them"),
        None => "y / r / n".into(),
    };
    let inner = dialog(
        frame,
        area,
        "cancel marked tasks",
        footer.trim(),
        lines,
        theme,
    );
    if let Some(col) = cursor
        && let Ok(row) = u16::try_from(row)
        && row < inner.height
    {
        frame.set_cursor_position((
            inner.x + (col as u16).min(inner.width.saturating_sub(1)),
            inner.y + row,
        ));
    }
}

pub(super) fn done(
    frame: &mut Frame,
    area: Rect,
    title: &str,
    results: &[(Tone, String)],
    theme: &Theme,
) {
    let w = inner(area);
    // Refusals first: they are what a person must read.
    let mut sorted: Vec<&(Tone, String)> = results.iter().collect();
    sorted.sort_by_key(|(tone, _)| match tone {
        Tone::Error => 0,
        Tone::Warning => 1,
        Tone::Info => 2,
        Tone::Success => 3,
    });
    let room = usize::from(area.height.saturating_sub(6)).max(3);
    // Each wrapped, so that a refusal's reason is read whole.
    let mut lines: Vec<Line> = Vec::new();
    let mut shown = 0;
    for (tone, text) in &sorted {
        let text = rudder_model::text::sanitize(text);
        let rows = crate::task_view::wrap_text(&text, w, w.saturating_sub(2));
        if lines.len() + rows.len() > room {
            break;
        }
        for (i, (a, b)) in rows.into_iter().enumerate() {
            let indent = if i == 0 { "" } else { "  " };
            lines.push(Line::styled(
                format!("{indent}{}", &text[a..b]),
                theme.tone(*tone),
            ));
        }
        shown += 1;
    }
    if sorted.len() > shown {
        lines.push(Line::styled(
            format!(
                "… and {} more (the status line counts them all)",
                sorted.len() - shown
            ),
            theme.dim(),
        ));
    }
    dialog(frame, area, title, "any key closes", lines, theme);
}
