//! The y/n confirmation of a cancel, naming the task, and the keys line
//! every y/n that takes a reason ends with (cancel, cancel of the marked
//! tasks, reclaim).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use tui_input::Input;

use super::{Theme, centered, clear};
use rudder_model::text::clean;

/// The last line of a y/n dialog that takes a reason: its keys (`yes` and
/// `no` say what y and n do), or, once `r` opened it, the reason being
/// typed. With the reason, the cursor's column on that line.
pub(super) fn answer_line(
    reason: Option<&Input>,
    yes: &str,
    no: &str,
    w: usize,
    theme: &Theme,
) -> (Line<'static>, Option<usize>) {
    match reason {
        None => (
            Line::from(vec![
                Span::styled("y", theme.title()),
                Span::raw(format!(" {yes}    ")),
                Span::styled("r", theme.title()),
                Span::raw(" …with a reason    "),
                Span::styled("n", theme.title()),
                Span::raw(format!(" / Esc {no}")),
            ]),
            None,
        ),
        Some(input) => {
            const LABEL: &str = "reason: ";
            let room = w.saturating_sub(LABEL.len() + 1);
            // The end of a long reason stays in sight, where it is typed.
            let value = input.value();
            let skip = value.chars().count().saturating_sub(room);
            let tail: String = value.chars().skip(skip).collect();
            let col = LABEL.len() + input.visual_cursor().saturating_sub(skip).min(room);
            (
                Line::from(vec![
                    Span::styled(LABEL, theme.title()),
                    Span::raw(clean(&tail, room + 1)),
                ]),
                Some(col),
            )
        }
    }
}

/// What the footer of such a dialog says while a reason is typed.
pub(super) fn reason_footer(yes: &str) -> String {
    format!(" Enter {yes} with this reason · Esc drops the reason ")
}

pub(super) fn draw(
    frame: &mut Frame,
    area: Rect,
    label: &str,
    reason: Option<&Input>,
    theme: &Theme,
) {
    let rect = centered(area, 64, 7);
    clear(frame, rect);
    let w = usize::from(rect.width.saturating_sub(2));
    let (answer, cursor) = answer_line(reason, "cancel it", "keep it", w, theme);
    let lines = vec![
        Line::raw(format!("Cancel task {label}?")),
        Line::raw("It becomes cancelled and never changes again."),
    ];
    let mut block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(" cancel ", theme.title()));
    if reason.is_some() {
        block = block.title_bottom(Span::styled(reason_footer("cancels it"), theme.dim()));
    }
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    // The answer keeps the last row whatever the label's wrapping.
    let last = inner.height.saturating_sub(1);
    let text = Rect {
        height: last.saturating_sub(1),
        ..inner
    };
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: true }), text);
    let row = Rect {
        y: inner.y + last,
        height: inner.height.min(1),
        ..inner
    };
    frame.render_widget(Paragraph::new(answer), row);
    if let Some(col) = cursor {
        frame.set_cursor_position((row.x + (col as u16).min(row.width.saturating_sub(1)), row.y));
    }
}
