//! The task table. Only the visible rows are built: the index of rows is
//! kept sorted in the state, so a frame costs the same at 100 or 100k tasks.

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Row, Table};

use super::{Theme, relative};
use crate::text::{clean, truncate};
use crate::tui::app::App;

const WIDTHS: [u16; 7] = [16, 8, 24, 0, 8, 4, 4];

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App, theme: &Theme) {
    let title = match app.table_len() {
        Some(n) => format!(" tasks {n} "),
        None => format!(" tasks ≥{} ", app.rows.len()),
    };
    let block = Block::default()
        .borders(Borders::TOP)
        .title(Span::styled(title, theme.title()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    // One line for the column names.
    let page = usize::from(inner.height.saturating_sub(1)).max(1);
    app.page = page;
    app.scroll_to_cursor();
    app.table_area = Rect {
        y: inner.y + 1,
        height: inner.height.saturating_sub(1),
        ..inner
    };
    // Below 100 columns the status is its symbol alone (the colour and the
    // symbol still tell it) and the title column narrows, so the message
    // keeps some room.
    let mut widths = WIDTHS;
    let narrow = inner.width < 100;
    if narrow {
        widths[0] = 1;
        widths[2] = 20;
    }
    let fixed: u16 = widths.iter().sum::<u16>() + widths.len() as u16 - 1;
    let message_w = usize::from(inner.width.saturating_sub(fixed).max(8));
    let w = |i: usize| usize::from(widths[i]);

    let end = (app.offset + page).min(app.rows.len());
    let mut rows = Vec::with_capacity(end.saturating_sub(app.offset));
    // The snapshot, apart from the app whose text cache is filled below.
    let tasks = Arc::clone(&app.tasks);
    for row in app.offset..end {
        let Some((_, t)) = app.rows.get(row).and_then(|&pos| tasks.get_index(pos)) else {
            continue;
        };
        let status = if narrow {
            Theme::symbol(t.status).to_string()
        } else {
            format!("{} {}", Theme::symbol(t.status), t.status)
        };
        // Sanitized once per change of the task, only cut to width here.
        let text = app.shown.row(t);
        let label = truncate(&text.label, w(2)).into_owned();
        let message = truncate(&text.message, message_w).into_owned();
        let progress = t
            .progress
            .map(|p| format!("{}/{}", p.current, p.total))
            .unwrap_or_default();
        let style = if row == app.cursor {
            theme.selected()
        } else if app.flashing(&t.task_id) {
            theme.flash()
        } else {
            Style::new()
        };
        rows.push(
            Row::new(vec![
                // On the highlighted row the status colour would clash
                // with the highlight; the symbol still tells the status.
                Cell::from(Span::styled(
                    status,
                    if row == app.cursor {
                        Style::new()
                    } else {
                        theme.status(t.status)
                    },
                )),
                Cell::from(clean(t.short_id(), w(1))),
                Cell::from(label),
                Cell::from(message),
                Cell::from(clean(&progress, w(4))),
                Cell::from(relative(app.now, t.created_at)),
                Cell::from(relative(app.now, t.updated_at)),
            ])
            .style(style),
        );
    }
    let header = Row::new(vec![
        if narrow { "" } else { "status" },
        "id",
        "title / key",
        "message",
        "progress",
        "age",
        "upd",
    ])
    .style(theme.dim());
    let widths = widths.map(|w| {
        if w == 0 {
            Constraint::Fill(1)
        } else {
            Constraint::Length(w)
        }
    });
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    frame.render_widget(table, inner);
    if app.rows.is_empty() {
        let text = if app.store_len() == 0 {
            "no tasks"
        } else {
            "no task matches the filter (Esc clears it)"
        };
        let y = inner.y + 1;
        if y < inner.y + inner.height {
            frame.render_widget(
                Line::styled(text, theme.dim()),
                Rect {
                    y,
                    height: 1,
                    ..inner
                },
            );
        }
    }
}
