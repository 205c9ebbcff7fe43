//! The detail pane: every field of the selected task, the schema as a field
//! list, JSON values pretty-printed, the history as a timeline; every text
//! wrapped to the pane's width ([`crate::task_view`], the same document
//! as the full-screen view). Scrollable.

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::Theme;
use crate::app::App;
use crate::task_view::{document, wrap};

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App, theme: &Theme) {
    let block = Block::default()
        .borders(Borders::TOP)
        .title(Span::styled(" detail ", theme.title()));
    let inner = block.inner(area);
    app.detail_area = inner;
    let width = usize::from(inner.width);
    let height = usize::from(inner.height).max(1);
    // The snapshot, apart from the app whose text cache is filled here.
    let tasks = Arc::clone(&app.tasks);
    let now = app.now;
    let lines = match app.selected.as_deref().and_then(|id| tasks.get(id)) {
        Some(task) => {
            let doc = document(task, app.shown.detail(task), now, &app.keys);
            let rows = wrap(&doc, width);
            // Do not scroll past the end.
            let max = rows.len().saturating_sub(height);
            let scroll = usize::from(app.detail_scroll).min(max);
            app.detail_scroll = u16::try_from(scroll).unwrap_or(u16::MAX);
            let end = (scroll + height).min(rows.len());
            super::task_view::lines(&doc, &rows[scroll..end], width, &[], theme)
        }
        None => vec![Line::styled("no task selected", theme.dim())],
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
