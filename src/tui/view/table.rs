//! The task table. Only the visible rows are built: the index of rows is
//! kept sorted in the state, so a frame costs the same at 100 or 100k tasks.

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Row, Table};

use super::{Theme, relative};
use crate::text::{clean, truncate_words};
use crate::tui::app::App;

/// The columns, in the order drawn.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Col {
    Mark,
    Status,
    Id,
    Kind,
    Label,
    Message,
    Progress,
    Age,
    Updated,
}

/// The columns that fit `width`, with their widths (0: the message, which
/// takes what is left). Below 100 columns the status is its symbol alone
/// (the colour and the symbol still tell it); then, while the message would
/// get fewer than 24 columns, the least important go: the kind (which the
/// detail pane shows), progress, age, a narrower title, the last update. Nothing is cut mid-column. Past a
/// message of [`WIDE_MESSAGE`] columns, the title widens.
fn columns(width: u16) -> Vec<(Col, u16)> {
    let mut cols = vec![
        (Col::Mark, 1),
        (Col::Status, if width < 100 { 1 } else { 16 }),
        (Col::Id, 8),
        (Col::Kind, 10),
        (Col::Label, 24),
        (Col::Message, 0),
        (Col::Progress, 8),
        (Col::Age, 4),
        (Col::Updated, 4),
    ];
    let message = |cols: &[(Col, u16)]| {
        let fixed: u16 = cols.iter().map(|c| c.1).sum::<u16>() + cols.len() as u16 - 1;
        width.saturating_sub(fixed)
    };
    for step in [Col::Kind, Col::Progress, Col::Age, Col::Label, Col::Updated] {
        if message(&cols) >= 24 {
            break;
        }
        if step == Col::Label {
            if let Some(c) = cols.iter_mut().find(|c| c.0 == Col::Label) {
                c.1 = 16;
            }
        } else {
            cols.retain(|c| c.0 != step);
        }
    }
    // A wide terminal gives the title room too (up to twice its width),
    // rather than cutting it while the message has more than it needs.
    let spare = message(&cols).saturating_sub(WIDE_MESSAGE);
    if let Some(c) = cols.iter_mut().find(|c| c.0 == Col::Label) {
        c.1 += spare.min(c.1);
    }
    cols
}

/// The message's width past which the title grows too.
const WIDE_MESSAGE: u16 = 96;

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
    let cols = columns(inner.width);
    let narrow = inner.width < 100;
    let fixed: u16 = cols.iter().map(|c| c.1).sum::<u16>() + cols.len() as u16 - 1;
    let message_w = usize::from(inner.width.saturating_sub(fixed).max(8));
    let width_of = |col: Col| {
        cols.iter()
            .find(|c| c.0 == col)
            .map_or(0, |c| usize::from(c.1))
    };

    let end = (app.offset + page).min(app.rows.len());
    let mut rows = Vec::with_capacity(end.saturating_sub(app.offset));
    // The snapshot, apart from the app whose text cache is filled below.
    let tasks = Arc::clone(&app.tasks);
    for row in app.offset..end {
        let Some((_, t)) = app.rows.get(row).and_then(|&pos| tasks.get_index(pos)) else {
            continue;
        };
        let stalled = t.stalled(app.now);
        let (symbol, word) = if stalled {
            ("⚠", "stalled")
        } else {
            (Theme::symbol(t.status), t.status.as_str())
        };
        let status = if narrow {
            symbol.to_string()
        } else {
            format!("{symbol} {word}")
        };
        let marked = app.marks.contains(&t.task_id);
        // Sanitized once per change of the task, only cut to width here.
        let text = app.shown.row(t);
        let label = truncate_words(&text.label, width_of(Col::Label));
        let message = truncate_words(&text.message, message_w);
        let kind = crate::text::truncate(&text.kind, width_of(Col::Kind)).into_owned();
        let progress = t
            .progress
            .map(|p| format!("{}/{}", p.current, p.total))
            .unwrap_or_default();
        let selected = row == app.cursor;
        let style = if selected {
            theme.selected()
        } else if app.flashing(&t.task_id) {
            theme.flash()
        } else {
            Style::new()
        };
        let cells = cols.iter().map(|(col, _)| match col {
            Col::Mark => Cell::from(Span::styled(
                if marked { "✓" } else { " " },
                if selected {
                    Style::new()
                } else {
                    theme.marked()
                },
            )),
            // On the highlighted row the status colour would clash
            // with the highlight; the symbol still tells the status.
            Col::Status => Cell::from(Span::styled(
                status.clone(),
                match (selected, stalled) {
                    (true, _) => Style::new(),
                    (false, true) => theme.stalled(),
                    (false, false) => theme.status(t.status),
                },
            )),
            Col::Id => Cell::from(clean(t.short_id(), 8)),
            Col::Kind => Cell::from(kind.clone()),
            Col::Label => Cell::from(label.clone()),
            Col::Message => Cell::from(message.clone()),
            Col::Progress => Cell::from(clean(&progress, 8)),
            Col::Age => Cell::from(relative(app.now, t.created_at)),
            Col::Updated => Cell::from(relative(app.now, t.updated_at)),
        });
        rows.push(Row::new(cells.collect::<Vec<_>>()).style(style));
    }
    let header = Row::new(
        cols.iter()
            .map(|(col, _)| match col {
                Col::Mark => "",
                Col::Status if narrow => "",
                Col::Status => "status",
                Col::Id => "id",
                Col::Kind => "kind",
                Col::Label => "title / key",
                Col::Message => "message",
                Col::Progress => "progress",
                Col::Age => "age",
                Col::Updated => "upd",
            })
            .collect::<Vec<_>>(),
    )
    .style(theme.dim());
    let widths: Vec<Constraint> = cols
        .iter()
        .map(|&(_, w)| {
            if w == 0 {
                Constraint::Fill(1)
            } else {
                Constraint::Length(w)
            }
        })
        .collect();
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    frame.render_widget(table, inner);
    if app.rows.is_empty() {
        let text = if app.store_len() == 0 {
            "no tasks"
        } else {
            &format!(
                "no task matches the filter ({} clears it)",
                app.keys.first(crate::tui::keys::Action::ClearFilters)
            )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn width_of(cols: &[(Col, u16)], col: Col) -> Option<u16> {
        cols.iter().find(|c| c.0 == col).map(|c| c.1)
    }

    fn message_of(width: u16) -> u16 {
        let cols = columns(width);
        let fixed: u16 = cols.iter().map(|c| c.1).sum::<u16>() + cols.len() as u16 - 1;
        width - fixed
    }

    #[test]
    fn a_wide_terminal_widens_the_title_not_only_the_message() {
        // At 80 and 140 columns the title keeps its 24 (the snapshots).
        assert_eq!(width_of(&columns(140), Col::Label), Some(24));
        assert_eq!(width_of(&columns(80), Col::Label), Some(24));
        // At 220 the title grows to 48 and the message still has 96+.
        assert_eq!(width_of(&columns(220), Col::Label), Some(48));
        assert!(message_of(220) >= WIDE_MESSAGE, "{}", message_of(220));
        // The kind shows where the message keeps its 24 beside it.
        assert_eq!(width_of(&columns(140), Col::Kind), Some(10));
        assert_eq!(width_of(&columns(110), Col::Kind), Some(10));
        assert_eq!(width_of(&columns(100), Col::Kind), None);
        assert_eq!(width_of(&columns(80), Col::Kind), None);
        // Never past twice its width, however wide.
        assert_eq!(width_of(&columns(500), Col::Label), Some(48));
        for w in 60..400 {
            assert!(message_of(w) >= 24.min(w), "{w}");
        }
    }
}
