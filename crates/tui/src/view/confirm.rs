//! The y/n confirmation of a cancel, naming the task.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::{Theme, centered, clear};

pub(super) fn draw(frame: &mut Frame, area: Rect, label: &str, theme: &Theme) {
    let rect = centered(area, 64, 7);
    clear(frame, rect);
    let lines = vec![
        Line::raw(format!("Cancel task {label}?")),
        Line::raw("It becomes cancelled and never changes again."),
        Line::raw(""),
        Line::from(vec![
            Span::styled("y", theme.title()),
            Span::raw(" cancel it    "),
            Span::styled("n", theme.title()),
            Span::raw(" / Esc keep it"),
        ]),
    ];
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(Span::styled(" cancel ", theme.title())),
        ),
        rect,
    );
}
