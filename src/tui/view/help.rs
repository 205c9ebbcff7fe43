//! The help overlay: every key.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::{Theme, centered, clear};
use crate::tui::app::App;

const KEYS: &[(&str, &str)] = &[
    ("j / k / ↓ / ↑", "move the selection"),
    ("g / G", "first / last task"),
    ("PgUp / PgDn", "page up / down"),
    ("d / u", "scroll the detail pane down / up"),
    ("i / Enter", "answer a waiting task (input form)"),
    ("  Tab / Shift-Tab", "form: next / previous field"),
    ("  Space / ← →", "form: toggle a yes/no, pick a choice"),
    ("  Ctrl-R", "form: the whole input as JSON, and back"),
    (
        "  Enter / Ctrl-S",
        "form: submit (Enter from the last field)",
    ),
    ("  Esc", "form: close without sending"),
    ("c", "cancel the selected task (y/n)"),
    ("R", "reclaim idle tasks (age, preview, y/n)"),
    ("/", "filter by text (Enter keeps, Esc clears)"),
    (
        "1 – 5",
        "toggle status filters: input_required working completed failed cancelled",
    ),
    ("Esc", "clear all filters"),
    ("s", "cycle the sort: last update, created, title, id"),
    ("p", "pause / resume live updates"),
    ("y", "copy the task id (OSC 52)"),
    ("mouse", "scroll moves, click selects"),
    ("?", "this help"),
    ("q / Ctrl-C", "quit"),
];

const DEMO_KEYS: &[(&str, &str)] = &[
    ("K", "demo: kill the worker with SIGKILL"),
    ("W", "demo: start a new worker"),
];

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let demo = app.worker.is_some();
    let mut lines: Vec<Line> = KEYS
        .iter()
        .chain(if demo { DEMO_KEYS } else { &[] })
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!("{k:<20}"), theme.title()),
                Span::raw(*what),
            ])
        })
        .collect();
    if app.read_only {
        lines.push(Line::styled(
            "read-only: i, c and R are refused",
            theme.dim(),
        ));
    }
    let rect = centered(area, 96, lines.len() as u16 + 2);
    clear(frame, rect);
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(Span::styled(" keys ", theme.title()))
                .title_bottom(Span::styled(" any key closes ", theme.dim())),
        ),
        rect,
    );
}
