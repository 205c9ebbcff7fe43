//! The transition log, newest first.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::Theme;
use crate::tui::app::App;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let block = Block::default()
        .borders(Borders::TOP | Borders::LEFT)
        .title(Span::styled(" transitions ", theme.title()));
    let inner = block.inner(area);
    let width = usize::from(inner.width);
    let lines: Vec<Line> = app
        .log
        .iter()
        .take(usize::from(inner.height))
        .map(|e| {
            let from = e.from.map(|s| s.as_str()).unwrap_or("new");
            let (to, style) = match e.to {
                Some(s) => (s.as_str(), theme.status(s)),
                None => ("gone", theme.dim()),
            };
            let sym = e.to.map(Theme::symbol).unwrap_or(" ");
            let head = format!(
                "{} {} ",
                e.at.format("%H:%M:%S"),
                crate::task::short_id(&e.task_id)
            );
            let arrow = format!("{from}→");
            let used = head.chars().count() + arrow.chars().count() + to.len() + 3;
            let label = crate::text::clean(&e.label, width.saturating_sub(used));
            Line::from(vec![
                Span::styled(head, theme.dim()),
                Span::raw(arrow),
                Span::styled(format!("{sym} {to}"), style),
                Span::raw(format!(" {label}")),
            ])
        })
        .collect();
    let body = if lines.is_empty() {
        Paragraph::new(Line::styled("no transitions seen yet", theme.dim()))
    } else {
        Paragraph::new(lines)
    };
    frame.render_widget(body.block(block), area);
}
