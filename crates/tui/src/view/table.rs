//! The task table. Only the visible rows are built: the index of rows is
//! kept sorted in the state, so a frame costs the same at 100 or 100k tasks.

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Row, Table};

use super::{Theme, relative};
use crate::app::App;
use rudder_model::text::{clean, truncate_words};
use unicode_width::UnicodeWidthStr;

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

/// How wide the texts of the rows on screen are (in columns): what the
/// title, message and kind columns would need to show them whole.
#[derive(Clone, Copy, Default)]
struct Needs {
    label: u16,
    message: u16,
    kind: u16,
}

/// The columns that fit `width`, with their widths (0: the message, which
/// takes what is left). Below 100 columns the status is its symbol alone
/// (the colour and the symbol still tell it); the kind shows only when a
/// row on screen has one; then, while the message would get fewer than 24
/// columns, the least important go: the kind (which the detail pane
/// shows), progress, age, a narrower title, the last update. Nothing is
/// cut mid-column. What the message does not need of the rest (its
/// longest text on screen shown whole) widens the title, up to twice its
/// width: a waiting task's question, the text a person must answer, comes
/// before its title.
fn columns(width: u16, needs: Needs) -> Vec<(Col, u16)> {
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
    if needs.kind == 0 {
        cols.retain(|c| c.0 != Col::Kind);
    }
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
    let spare = message(&cols).saturating_sub(needs.message.max(24));
    if let Some(c) = cols.iter_mut().find(|c| c.0 == Col::Label) {
        let wanted = needs.label.saturating_sub(c.1);
        c.1 += spare.min(wanted).min(c.1);
    }
    cols
}

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
    let end = (app.offset + page).min(app.rows.len());
    // The snapshot, apart from the app whose text cache is filled below.
    let tasks = Arc::clone(&app.tasks);
    let on_screen = || {
        (app.offset..end).filter_map(|row| app.rows.get(row).and_then(|&pos| tasks.get_index(pos)))
    };
    let mut needs = Needs::default();
    let wide = |s: &str| u16::try_from(s.width()).unwrap_or(u16::MAX);
    for (_, t) in on_screen().collect::<Vec<_>>() {
        let text = app.shown.row(t);
        needs.label = needs.label.max(wide(&text.label));
        needs.message = needs.message.max(wide(&text.message));
        needs.kind = needs.kind.max(wide(&text.kind));
    }
    let cols = columns(inner.width, needs);
    let narrow = inner.width < 100;
    let fixed: u16 = cols.iter().map(|c| c.1).sum::<u16>() + cols.len() as u16 - 1;
    let message_w = usize::from(inner.width.saturating_sub(fixed).max(8));
    let width_of = |col: Col| {
        cols.iter()
            .find(|c| c.0 == col)
            .map_or(0, |c| usize::from(c.1))
    };

    let mut rows = Vec::with_capacity(end.saturating_sub(app.offset));
    for row in app.offset..end {
        let Some((_, t)) = app.rows.get(row).and_then(|&pos| tasks.get_index(pos)) else {
            continue;
        };
        let stalled = t.stalled(app.now);
        let (symbol, word) = if stalled && app.worker_will_resume() {
            ("◷", "queued")
        } else if stalled {
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
        let kind = rudder_model::text::truncate(&text.kind, width_of(Col::Kind)).into_owned();
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
                app.keys.first(crate::keys::Action::ClearFilters)
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

    fn message_of(width: u16, needs: Needs) -> u16 {
        let cols = columns(width, needs);
        let fixed: u16 = cols.iter().map(|c| c.1).sum::<u16>() + cols.len() as u16 - 1;
        width - fixed
    }

    /// Long titles and messages, with kinds.
    const LONG: Needs = Needs {
        label: 60,
        message: 300,
        kind: 8,
    };

    #[test]
    fn the_message_takes_what_is_left_and_the_title_what_it_does_not_need() {
        // A long message: the title keeps its 24, however wide.
        for w in [80, 140, 220, 300] {
            assert_eq!(width_of(&columns(w, LONG), Col::Label), Some(24), "{w}");
        }
        // The demo's question (98 columns) beside a 43-column title at 200
        // columns, no kinds: both whole.
        let demo = Needs {
            label: 43,
            message: 98,
            kind: 0,
        };
        assert_eq!(width_of(&columns(200, demo), Col::Label), Some(43));
        assert!(message_of(200, demo) >= 98, "{}", message_of(200, demo));
        assert_eq!(width_of(&columns(200, demo), Col::Kind), None);
        // Short messages: the title grows up to twice its width.
        let short = Needs {
            label: 60,
            message: 30,
            kind: 8,
        };
        assert_eq!(width_of(&columns(220, short), Col::Label), Some(48));
        assert_eq!(width_of(&columns(110, short), Col::Label), Some(24));
        // The kind shows where the message keeps its 24 beside it, and a
        // row on screen has one.
        assert_eq!(width_of(&columns(140, LONG), Col::Kind), Some(10));
        assert_eq!(width_of(&columns(110, LONG), Col::Kind), Some(10));
        assert_eq!(width_of(&columns(100, LONG), Col::Kind), None);
        assert_eq!(width_of(&columns(80, LONG), Col::Kind), None);
        for w in 60..400 {
            for needs in [LONG, demo, short, Needs::default()] {
                assert!(message_of(w, needs) >= 24.min(w), "{w}");
            }
        }
    }
}
