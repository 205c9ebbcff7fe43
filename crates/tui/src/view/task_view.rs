//! The full-screen task view (`v`): the whole task wrapped to the width,
//! scrollable, searchable with matches highlighted. Also the drawing of a
//! task document's rows, which the detail pane shares.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::Theme;
use crate::app::{App, Popup};
use crate::keys::{Action, VIEW_HINTS, fit};
use crate::task_view::{DocLine, Look, Row, document, find, indent, row_of, wrap};

/// The style of `look`.
fn style(look: Look, theme: &Theme) -> Style {
    match look {
        Look::Plain => Style::new(),
        Look::Dim => theme.dim(),
        Look::Heading => theme.title(),
        Look::Status(s) => theme.status(s),
        Look::Alert => theme.stalled(),
    }
}

/// A search match: document line, byte range, whether it is the current one.
pub(super) type Match = (usize, usize, usize, bool);

/// The screen lines of `rows` of `doc`, with `matches` highlighted.
pub(super) fn lines(
    doc: &[DocLine],
    rows: &[Row],
    width: usize,
    matches: &[Match],
    theme: &Theme,
) -> Vec<Line<'static>> {
    rows.iter()
        .map(|r| {
            let line = &doc[r.line];
            let pad = indent(line, width, r.first);
            let mut spans = Vec::new();
            if r.first {
                if pad > 0 {
                    spans.push(Span::styled(
                        line.prefix.clone(),
                        style(line.prefix_look, theme),
                    ));
                }
            } else {
                spans.push(Span::raw(" ".repeat(pad)));
            }
            let base = style(line.look, theme);
            // Cut the row at the matches that fall in it.
            let mut at = r.start;
            for &(_, from, to, current) in matches.iter().filter(|m| m.0 == r.line) {
                let (from, to) = (from.max(r.start), to.min(r.end));
                if from >= to || from < at {
                    continue;
                }
                spans.push(Span::styled(line.text[at..from].to_string(), base));
                let look = if current {
                    theme.current_match()
                } else {
                    theme.matched()
                };
                spans.push(Span::styled(line.text[from..to].to_string(), look));
                at = to;
            }
            spans.push(Span::styled(line.text[at..r.end].to_string(), base));
            Line::from(spans)
        })
        .collect()
}

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App, theme: &Theme) {
    let Popup::View(view) = &app.popup else {
        return;
    };
    let id = view.task_id.clone();
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let width = usize::from(body.width);
    let now = app.now;
    // The snapshot, apart from the app whose text cache is filled here.
    let tasks = std::sync::Arc::clone(&app.tasks);
    let Some(task) = tasks.get(&id) else {
        frame.render_widget(
            Paragraph::new(vec![
                Line::styled(
                    format!(
                        "task {} is no longer in the store",
                        rudder_model::text::clean(rudder_model::task::short_id(&id), 8)
                    ),
                    theme.title(),
                ),
                Line::styled(
                    format!("{} goes back to the list", app.keys.first(Action::Back)),
                    theme.dim(),
                ),
            ]),
            body,
        );
        return;
    };
    let doc = document(task, app.shown.detail(task), now, &app.keys);
    let rows = wrap(&doc, width);
    let Popup::View(view) = &mut app.popup else {
        return;
    };
    let found = find(&doc, &view.query);
    view.matches = found.len();
    if !found.is_empty() {
        view.current %= found.len();
    }
    view.rows = rows.len();
    view.height = usize::from(body.height).max(1);
    if view.jump {
        view.jump = false;
        if let Some(&(line, at)) = found.get(view.current) {
            // The match a third of the way down, with what leads to it.
            let row = row_of(&rows, line, at);
            view.scroll = row.saturating_sub(view.height / 3);
        }
    }
    view.scroll = view.scroll.min(rows.len().saturating_sub(view.height));
    let len = view.query.len();
    let matches: Vec<Match> = found
        .iter()
        .enumerate()
        .map(|(i, &(line, at))| (line, at, at + len, i == view.current))
        .collect();
    let end = (view.scroll + view.height).min(rows.len());
    let shown = lines(&doc, &rows[view.scroll..end], width, &matches, theme);

    let title = task
        .label()
        .map(|l| format!(" · {}", crate::shown::shown(l)))
        .unwrap_or_default();
    let position = format!(
        " {}–{} of {} ",
        (view.scroll + 1).min(rows.len()),
        end,
        rows.len()
    );
    let head_text = rudder_model::text::clean(
        &format!(" task {}{title}", crate::shown::shown(task.short_id())),
        width.saturating_sub(position.chars().count()),
    );
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(head_text, theme.title()),
            Span::styled(position, theme.dim()),
        ]))
        .block(Block::default().borders(Borders::NONE)),
        head,
    );
    frame.render_widget(Paragraph::new(shown), body);

    let foot_line = if let Some(input) = &view.search {
        let prefix = "search: /";
        let value = rudder_model::text::sanitize(input.value()).into_owned();
        let x = foot.x
            + u16::try_from(prefix.len() + input.visual_cursor())
                .unwrap_or(u16::MAX)
                .min(foot.width.saturating_sub(1));
        frame.set_cursor_position((x, foot.y));
        Line::from(vec![
            Span::styled(prefix, theme.title()),
            Span::raw(value),
            Span::styled(
                format!("   {} match(es)  Enter keeps, Esc drops", found.len()),
                theme.dim(),
            ),
        ])
    } else {
        let mut text = String::new();
        if !view.query.is_empty() {
            text = if found.is_empty() {
                format!(
                    "/{}: no match  ",
                    rudder_model::text::clean(&view.query, 30)
                )
            } else {
                format!(
                    "/{}: match {} of {}  ",
                    rudder_model::text::clean(&view.query, 30),
                    view.current + 1,
                    found.len()
                )
            };
        }
        let hints = app.keys.hints(VIEW_HINTS);
        text.push_str(&fit(&hints, width.saturating_sub(text.chars().count())));
        Line::styled(text, theme.dim())
    };
    frame.render_widget(Paragraph::new(foot_line), foot);
}
