//! The transition log, newest first.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::Theme;
use crate::app::App;

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
            let (to, style) = match e.to {
                Some(s) => (s.as_str(), theme.status(s)),
                None => ("gone", theme.dim()),
            };
            let sym = e.to.map(Theme::symbol).unwrap_or("∅");
            let head = format!(
                "{} {} ",
                e.at.format("%H:%M:%S"),
                rudder_model::task::short_id(&e.task_id)
            );
            // Wide: `working→✔ completed`. Narrow, the symbols alone say
            // where the task came from and went (`▶→✔ completed`), and the
            // status is never cut; what is left goes to the label, cut at
            // a word, or not shown when too little is left.
            let from_word = e.from.map(|s| s.as_str()).unwrap_or("new");
            let full = head.chars().count() + from_word.len() + 1 + 2 + to.len();
            let arrow = if full + 12 <= width {
                format!("{from_word}→")
            } else {
                format!("{}→", e.from.map(Theme::symbol).unwrap_or("+"))
            };
            let used = head.chars().count() + arrow.chars().count() + 2 + to.len();
            let (head, used) = if used > width {
                // Too narrow even for that: the time goes first.
                let short = format!("{} ", rudder_model::task::short_id(&e.task_id));
                let used = used - head.chars().count() + short.chars().count();
                (short, used)
            } else {
                (head, used)
            };
            let room = width.saturating_sub(used + 1);
            // Who and why take up to half of what is left: the label
            // names the task, the id already tells it apart.
            let by_room = match e.by.is_empty() {
                true => 0,
                false => (e.by.chars().count() + 3).min(room / 2),
            };
            // At a word only: `INC-1…` names no incident.
            let label = match rudder_model::text::truncate_at_word(&e.label, room - by_room) {
                cut if cut.is_empty() => String::new(),
                cut => format!(" {cut}"),
            };
            // Who and why, in what the label left.
            let room = room.saturating_sub(label.chars().count() + 3);
            // Cut anywhere (a name has no spaces to cut at), but not to
            // a lone `…`.
            let by = match rudder_model::text::truncate(&e.by, room) {
                cut if cut.chars().count() < 2 => String::new(),
                cut => format!(" · {cut}"),
            };
            Line::from(vec![
                Span::styled(head, theme.dim()),
                Span::raw(arrow),
                Span::styled(format!("{sym} {to}"), style),
                Span::raw(label),
                Span::styled(by, theme.dim()),
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
