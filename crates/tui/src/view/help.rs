//! The help overlay: every key, made from the key table
//! ([`crate::keys`]) with the user's rebindings, in sections by where
//! the keys apply; in two columns when one does not fit the height.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::{Theme, centered, clear};
use crate::app::{App, Popup};
use crate::keys::Scope;
use rudder_model::text::clean;

/// One help line: a section heading, or keys and what they do.
enum Entry {
    Heading(String),
    Key(String, String),
    Note(String),
}

fn entries(app: &App) -> Vec<Entry> {
    let mut out = Vec::new();
    // Notes first: on a short terminal the key list is cut at the bottom,
    // and a config problem the status line sends the user here for must
    // still be on screen.
    if app.read_only {
        out.push(Entry::Note(
            "read-only: input, cancel and reclaim are refused".into(),
        ));
        if let Some(why) = &app.read_only_why {
            out.push(Entry::Note(format!("(read-only because {why})")));
        }
    }
    for p in &app.config_problems {
        out.push(Entry::Note(p.clone()));
    }
    let mut scopes = vec![Scope::List, Scope::View, Scope::Form];
    if app.worker.is_some() {
        scopes.push(Scope::Demo);
    }
    for scope in scopes {
        out.push(Entry::Heading(scope.label().to_string()));
        for (keys, what) in app.keys.help_lines(scope, app.worker_role) {
            out.push(Entry::Key(keys, what));
        }
        if scope == Scope::List {
            // What the header's `⚠ N stalled` asks of a person: R is not it.
            out.push(Entry::Key(
                "⚠ stalled".into(),
                "lease ran out: a live worker resumes it".into(),
            ));
            if app.worker.is_some() {
                out.push(Entry::Key(
                    "◷ queued".into(),
                    "the worker is busy: waits for a slot".into(),
                ));
            }
            out.push(Entry::Key(
                String::new(),
                format!(
                    "{} fails tasks idle past an age",
                    app.keys.first(crate::keys::Action::Reclaim)
                ),
            ));
        }
        if scope == Scope::Form {
            out.push(Entry::Key(
                "Space, ← →".into(),
                "toggle a yes/no, pick a choice".into(),
            ));
        }
    }
    out.push(Entry::Key(
        "mouse".into(),
        "wheel scrolls, click selects".into(),
    ));
    out
}

fn line(e: &Entry, width: usize, key_w: usize, theme: &Theme) -> Line<'static> {
    match e {
        Entry::Heading(h) => Line::styled(
            clean(h, width),
            theme
                .title()
                .add_modifier(ratatui::style::Modifier::UNDERLINED),
        ),
        Entry::Key(k, what) => {
            let k = clean(k, key_w);
            let pad = key_w.saturating_sub(unicode_width::UnicodeWidthStr::width(k.as_str()));
            Line::from(vec![
                Span::styled(format!("{k}{} ", " ".repeat(pad)), theme.title()),
                Span::raw(rudder_model::text::truncate_words(
                    what,
                    width.saturating_sub(key_w + 1),
                )),
            ])
        }
        Entry::Note(n) => Line::styled(clean(n, width), theme.tone(crate::app::Tone::Warning)),
    }
}

/// `entries` with each note wrapped to `width` (its continuation rows
/// indented), so that a config problem is read whole, not cut at the edge.
fn wrap_notes(entries: Vec<Entry>, width: usize) -> Vec<Entry> {
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        match e {
            Entry::Note(n) => {
                for (i, (start, end)) in
                    crate::task_view::wrap_text(&n, width, width.saturating_sub(2))
                        .into_iter()
                        .enumerate()
                {
                    let indent = if i == 0 { "" } else { "  " };
                    out.push(Entry::Note(format!("{indent}{}", &n[start..end])));
                }
            }
            other => out.push(other),
        }
    }
    out
}

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App, theme: &Theme) {
    let entries = entries(app);
    let room = usize::from(area.height.saturating_sub(2)).max(1);
    let columns = if entries.len() > room && area.width >= 100 {
        2
    } else {
        1
    };
    let width = area
        .width
        .saturating_sub(2)
        .min(if columns == 2 { 160 } else { 100 });
    let col_w = usize::from(width.saturating_sub(2)) / columns - usize::from(columns > 1);
    let entries = wrap_notes(entries, col_w);
    let per_col = entries.len().div_ceil(columns);
    // Each column's keys as wide as its widest, up to half the column.
    let key_w = |c: usize| {
        entries
            .iter()
            .skip(c * per_col)
            .take(per_col)
            .filter_map(|e| match e {
                Entry::Key(k, _) => Some(unicode_width::UnicodeWidthStr::width(k.as_str())),
                _ => None,
            })
            .max()
            .unwrap_or(0)
            .max(12)
            .min(col_w / 2)
    };
    // Scrolled, at most to where the last row is at the bottom.
    let top = per_col.saturating_sub(room);
    let scroll = match &mut app.popup {
        Popup::Help { scroll, page } => {
            *scroll = (*scroll).min(top);
            *page = room;
            *scroll
        }
        _ => 0,
    };
    let mut lines: Vec<Line> = Vec::new();
    for row in scroll..per_col.min(scroll + room) {
        let mut spans: Vec<Span> = Vec::new();
        for c in 0..columns {
            let Some(e) = entries.get(c * per_col + row) else {
                continue;
            };
            let l = line(e, col_w, key_w(c), theme);
            let used: usize = l.spans.iter().map(|s| s.width()).sum();
            spans.extend(l.spans);
            if c + 1 < columns {
                spans.push(Span::raw(" ".repeat(col_w.saturating_sub(used) + 1)));
            }
        }
        lines.push(Line::from(spans));
    }
    let rect = centered(area, width, (lines.len() as u16).saturating_add(2));
    clear(frame, rect);
    // Where the view is, and how to move it, when it does not all fit.
    let bottom = if per_col > room {
        let more = match (scroll > 0, scroll < top) {
            (true, true) => "↑↓ more",
            (false, _) => "↓ more",
            (true, false) => "↑ more",
        };
        format!(
            " {more}: j/k, PgUp/PgDn scroll · rows {}–{} of {per_col} · other keys close ",
            scroll + 1,
            (scroll + room).min(per_col)
        )
    } else {
        " any key closes ".to_string()
    };
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(Span::styled(" keys ", theme.title()))
                .title_bottom(Span::styled(bottom, theme.dim())),
        ),
        rect,
    );
}
