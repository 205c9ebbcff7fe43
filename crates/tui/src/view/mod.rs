//! Drawing: one module per pane or dialog. Drawing reads the [`App`] and
//! records only where the table and detail pane landed (for the mouse).

mod bulk;
mod confirm;
mod detail;
mod form;
mod header;
mod help;
mod log;
mod reclaim;
mod table;
mod task_view;
pub mod theme;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

use crate::app::{App, Popup, WatchState};
pub use theme::Theme;

/// The smallest terminal the full screen is drawn on.
pub const MIN_WIDTH: u16 = 60;
/// See [`MIN_WIDTH`].
pub const MIN_HEIGHT: u16 = 12;

/// Draw the whole screen.
pub fn draw(frame: &mut Frame, app: &mut App, theme: &Theme) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        too_small(frame, area);
        return;
    }
    if matches!(app.popup, Popup::View(_)) {
        // The task view is the whole screen.
        task_view::draw(frame, area, app, theme);
        return;
    }
    let banner = banner_text(app);
    let [head, banner_area, body, status] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(u16::from(banner.is_some())),
        Constraint::Min(4),
        Constraint::Length(1),
    ])
    .areas(area);
    header::draw(frame, head, app, theme);
    if let Some((text, error)) = banner {
        let text = rudder_model::text::clean(&text, usize::from(banner_area.width));
        frame.render_widget(Paragraph::new(text).style(theme.banner(error)), banner_area);
    }
    // The table takes what its rows need, up to a bit more than half; the
    // detail pane gets the rest.
    let rows = app
        .table_len()
        .unwrap_or(app.rows.len())
        .max(app.rows.len());
    let rows_h = u16::try_from(rows.saturating_add(2)).unwrap_or(u16::MAX);
    let table_h = rows_h.clamp(5, (body.height * 11 / 20).max(5));
    let [table_area, bottom] =
        Layout::vertical([Constraint::Length(table_h), Constraint::Min(0)]).areas(body);
    let [detail_area, log_area] =
        Layout::horizontal([Constraint::Percentage(62), Constraint::Percentage(38)]).areas(bottom);
    table::draw(frame, table_area, app, theme);
    detail::draw(frame, detail_area, app, theme);
    log::draw(frame, log_area, app, theme);
    status_line(frame, status, app, theme);

    if matches!(app.popup, Popup::Help { .. }) {
        help::draw(frame, area, app, theme);
    }
    match &app.popup {
        Popup::None | Popup::Help { .. } => {}
        Popup::Form(f) => form::draw(frame, area, f, &app.keys, theme),
        Popup::ConfirmCancel { label, reason, .. } => {
            confirm::draw(frame, area, label, reason.as_ref(), theme)
        }
        Popup::View(_) => {}
        Popup::ConfirmCancelMany {
            tasks,
            finished,
            reason,
        } => bulk::confirm(frame, area, tasks, finished, reason.as_ref(), theme),
        Popup::BulkDone { title, lines } => bulk::done(frame, area, title, lines, theme),
        Popup::ReclaimAge { .. }
        | Popup::ReclaimLoading { .. }
        | Popup::ReclaimPreview { .. }
        | Popup::ReclaimDone { .. } => reclaim::draw(frame, area, app, theme),
    }
}

fn banner_text(app: &App) -> Option<(String, bool)> {
    match &app.watch {
        WatchState::Missing => Some((
            format!(
                " waiting for {} to appear ({} does not exist)",
                app.store_name, app.store_label
            ),
            false,
        )),
        WatchState::Unreadable(reason) => Some((
            format!(" store unreadable, showing the last good tasks; nothing is written: {reason}"),
            true,
        )),
        WatchState::Unreachable(reason) => Some((
            format!(" store unreachable, writes refused until it is back: {reason}"),
            true,
        )),
        _ if app.paused => Some((
            format!(
                " paused: {} change(s) pending; press {} to resume",
                app.pending_changes,
                app.keys.first(crate::keys::Action::Pause)
            ),
            false,
        )),
        _ => None,
    }
}

fn too_small(frame: &mut Frame, area: Rect) {
    let text = format!(
        "terminal too small ({}×{}): rudder needs at least {MIN_WIDTH}×{MIN_HEIGHT}. q quits.",
        area.width, area.height
    );
    frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
}

fn status_line(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let width = usize::from(area.width);
    let line = if let Some(input) = &app.filter.editing {
        let prefix = "filter: /";
        let value = rudder_model::text::sanitize(input.value()).into_owned();
        let x = area.x + (prefix.len() + input.visual_cursor()).min(width.saturating_sub(1)) as u16;
        frame.set_cursor_position((x, area.y));
        Line::from(vec![
            Span::styled(prefix, theme.title()),
            Span::raw(value),
            Span::styled("   Enter keeps, Esc clears", theme.dim()),
        ])
    } else if let Some(s) = &app.status {
        Line::from(Span::styled(
            rudder_model::text::clean(&s.text, width),
            theme.tone(s.tone),
        ))
    } else {
        // What fits, whole hints only, most important first.
        let hints = app.keys.hints(crate::keys::LIST_HINTS);
        Line::from(Span::styled(crate::keys::fit(&hints, width), theme.dim()))
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// A rectangle of `width`×`height` centred in `area` (clamped to it).
pub(crate) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// Clear `area` for a dialog.
pub(crate) fn clear(frame: &mut Frame, area: Rect) {
    frame.render_widget(Clear, area);
}

pub use crate::shown::{absolute, relative};
