//! The input form dialog: the task's question in full, then one block per
//! field (label, value, whole description, constraints, error). A long
//! form scrolls so the focused field is always on screen.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use unicode_width::UnicodeWidthChar;

use super::{Theme, centered, clear};
use crate::form::{Field, FieldKind, Form};
use rudder_model::text::{clean, truncate};

/// The most options of a choice or a multi-select drawn at once.
const SHOWN_OPTIONS: usize = 40;

/// `text` cut into lines of at most `width` columns, at spaces where it can.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out = Vec::new();
    for para in text.split('\n') {
        let mut line = String::new();
        let mut w = 0;
        for word in para.split(' ') {
            let ww: usize = word.chars().map(|c| c.width().unwrap_or(0)).sum();
            if w > 0 && w + 1 + ww <= width {
                line.push(' ');
                line.push_str(word);
                w += 1 + ww;
                continue;
            }
            if w > 0 {
                out.push(std::mem::take(&mut line));
                w = 0;
            }
            // A word longer than the line is cut.
            for c in word.chars() {
                let cw = c.width().unwrap_or(0);
                if w + cw > width {
                    out.push(std::mem::take(&mut line));
                    w = 0;
                }
                line.push(c);
                w += cw;
            }
        }
        out.push(line);
    }
    out
}

fn push_wrapped(
    lines: &mut Vec<Line<'static>>,
    text: &str,
    indent: &str,
    width: usize,
    style: Style,
) {
    for l in wrap(text, width.saturating_sub(indent.len()).max(8)) {
        lines.push(Line::styled(format!("{indent}{l}"), style));
    }
}

pub(super) fn draw(
    frame: &mut Frame,
    area: Rect,
    form: &Form,
    keys: &crate::keys::KeyMap,
    theme: &Theme,
) {
    use crate::keys::Action;
    let (next, submit, raw, close) = (
        keys.first(Action::FormNext),
        keys.first(Action::FormSubmit),
        keys.first(Action::FormRaw),
        keys.first(Action::FormClose),
    );
    let width = area.width.saturating_sub(4).min(100);
    let inner_w = usize::from(width.saturating_sub(2));
    let mut lines: Vec<Line<'static>> = Vec::new();
    // The label and the message were sanitized when the form was built.
    if let Some(m) = &form.message {
        push_wrapped(&mut lines, m, "", inner_w, theme.title());
    }
    lines.push(Line::styled(
        clean(
            &format!(
                "submitted only if the task is still at revision {}",
                form.revision
            ),
            inner_w,
        ),
        theme.dim(),
    ));
    if let Some(m) = &form.moved_on {
        push_wrapped(&mut lines, &format!("⚠ {m}"), "", inner_w, theme.error());
    }
    for e in &form.errors {
        push_wrapped(&mut lines, &format!("✖ {e}"), "", inner_w, theme.error());
    }
    for n in &form.notes {
        push_wrapped(&mut lines, n, "", inner_w, theme.dim());
    }
    lines.push(Line::raw(""));
    let mut cursor = None;
    let mut focus_range = (0, 0);
    let raw_mode = form.raw.is_some();
    let fields: Vec<(bool, &Field)> = match &form.raw {
        Some(raw) => vec![(true, raw)],
        None => form
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| (i == form.focus, f))
            .collect(),
    };
    for (focused, f) in fields {
        let start = lines.len();
        if let Some(c) = field_lines(&mut lines, f, focused, inner_w, theme)
            && focused
        {
            cursor = Some(c);
        }
        if focused {
            focus_range = (start, lines.len());
        }
    }
    lines.push(Line::raw(""));
    let footer = if form.submitting {
        "sending…".to_string()
    } else if raw_mode {
        format!("{raw} fields · {submit} or Enter sends · {close} closes")
    } else {
        format!("{next} move · Space/←→ choose · {submit} sends · {raw} JSON · {close} closes")
    };
    let height = u16::try_from(lines.len() + 2)
        .unwrap_or(u16::MAX)
        .min(area.height.saturating_sub(2))
        .max(5);
    let rect = centered(area, width, height);
    clear(frame, rect);
    let title = if raw_mode {
        format!(" input for {} (JSON) ", truncate(&form.label, inner_w))
    } else {
        format!(" input for {} ", truncate(&form.label, inner_w))
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(clean(&title, inner_w), theme.title()))
        .title_bottom(Span::styled(
            clean(&format!(" {footer} "), inner_w),
            theme.dim(),
        ));
    let inner = block.inner(rect);
    // Keep the whole focused field on screen (its top, if it is taller
    // than the screen), and the line after it when there is room.
    let visible = usize::from(inner.height).max(1);
    let (top, bottom) = focus_range;
    let mut scroll = (bottom + 1).saturating_sub(visible);
    if scroll > top {
        scroll = top;
    }
    scroll = scroll.min(lines.len().saturating_sub(visible));
    if let Some((line, col)) = cursor
        && line >= scroll
        && line - scroll < visible
    {
        let x = inner.x + (col as u16).min(inner.width.saturating_sub(1));
        frame.set_cursor_position((x, inner.y + (line - scroll) as u16));
    }
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .scroll((u16::try_from(scroll).unwrap_or(u16::MAX), 0)),
        rect,
    );
}

/// The lines of one field; returns where the cursor goes in a text field.
fn field_lines(
    lines: &mut Vec<Line<'static>>,
    f: &Field,
    focused: bool,
    inner_w: usize,
    theme: &Theme,
) -> Option<(usize, usize)> {
    let marker = if focused { "▸ " } else { "  " };
    let req = if f.required { " *" } else { "" };
    let mut head = vec![
        Span::styled(
            clean(
                &format!("{marker}{}{req}", f.label()),
                inner_w.saturating_sub(24),
            ),
            if focused {
                theme.focus()
            } else {
                theme.title()
            },
        ),
        Span::styled(format!(" ({})", f.type_label()), theme.dim()),
    ];
    if f.is_default {
        head.push(Span::styled(" · default", theme.dim()));
    }
    if f.spec.secret {
        head.push(Span::styled(" · secret", theme.dim()));
    }
    lines.push(Line::from(head));
    let value_w = inner_w.saturating_sub(6);
    let mut cursor = None;
    match &f.kind {
        FieldKind::Text(_) | FieldKind::List(_) | FieldKind::Json => {
            let scroll = f.input.visual_scroll(value_w);
            if focused {
                cursor = Some((
                    lines.len(),
                    4 + f.input.visual_cursor().saturating_sub(scroll),
                ));
            }
            let value = f.input.value();
            if value.is_empty()
                && let Some(p) = &f.spec.placeholder
            {
                let p = clean(&format!("e.g. {p}"), value_w);
                lines.push(Line::from(vec![
                    Span::raw("  [ "),
                    Span::styled(format!("{p:<value_w$}"), theme.dim()),
                    Span::raw(" ]"),
                ]));
            } else if f.spec.secret {
                // A password field: one bullet per character typed, so
                // the cursor still lands where the next one goes.
                let shown: String =
                    "•".repeat(value.chars().count().saturating_sub(scroll).min(value_w));
                lines.push(Line::raw(format!("  [ {shown:<value_w$} ]")));
            } else {
                let shown: String = rudder_model::text::sanitize(value)
                    .chars()
                    .skip(scroll)
                    .take(value_w)
                    .collect();
                lines.push(Line::raw(clean(
                    &format!("  [ {shown:<value_w$} ]"),
                    inner_w,
                )));
            }
        }
        FieldKind::Toggle(v) => {
            let text = match v {
                Some(true) => "  [x] yes   (Space toggles)",
                Some(false) => "  [ ] no    (Space toggles)",
                None if f.required => "  [?] not chosen yet   (Space chooses)",
                None => "  [-] not given   (Space toggles)",
            };
            lines.push(Line::raw(text));
        }
        FieldKind::Choice { labels, chosen, .. } => {
            let current = chosen
                .and_then(|c| labels.get(c))
                .cloned()
                .unwrap_or_else(|| {
                    if f.required {
                        "(not chosen yet)".into()
                    } else {
                        "(not given)".into()
                    }
                });
            let text = if labels.len() > 1 {
                let mut all = labels[..labels.len().min(SHOWN_OPTIONS)].join(" | ");
                if labels.len() > SHOWN_OPTIONS {
                    all.push_str(&format!(" | … {} more", labels.len() - SHOWN_OPTIONS));
                }
                format!("◀ {current} ▶   of {all}")
            } else {
                format!("◀ {current} ▶")
            };
            push_wrapped(lines, &text, "  ", inner_w, Style::default());
        }
        FieldKind::Multi {
            labels,
            chosen,
            cursor: at,
            ..
        } => {
            // A window of options around the cursor, when there are many.
            let from = at
                .saturating_sub(SHOWN_OPTIONS / 2)
                .min(labels.len().saturating_sub(SHOWN_OPTIONS));
            let mut parts: Vec<String> = labels
                .iter()
                .zip(chosen)
                .enumerate()
                .skip(from)
                .take(SHOWN_OPTIONS)
                .map(|(i, (l, c))| {
                    let mark = if *c { "[x]" } else { "[ ]" };
                    let pointer = if focused && i == *at { "›" } else { "" };
                    format!("{pointer}{mark} {l}")
                })
                .collect();
            if from > 0 {
                parts.insert(0, format!("… {from} before"));
            }
            let after = labels.len().saturating_sub(from + SHOWN_OPTIONS);
            if after > 0 {
                parts.push(format!("… {after} more"));
            }
            push_wrapped(lines, &parts.join("  "), "  ", inner_w, Style::default());
            if focused {
                lines.push(Line::styled("    ←/→ move · Space toggles", theme.dim()));
            }
        }
    }
    if let Some(h) = &f.hint {
        push_wrapped(lines, h, "    ", inner_w, theme.dim());
    }
    let mut rules: Vec<String> = f
        .spec
        .constraints
        .iter()
        .map(|c| rudder_model::text::sanitize(c).into_owned())
        .collect();
    match &f.kind {
        FieldKind::List(_) => rules.insert(0, "comma-separated, or a JSON array".into()),
        FieldKind::Text(_) | FieldKind::Json if f.spec.nullable && f.required => {
            rules.push("empty sends null".into());
        }
        _ => {}
    }
    if !rules.is_empty() {
        push_wrapped(lines, &rules.join(" · "), "    ", inner_w, theme.dim());
    }
    if let Some(n) = &f.spec.note {
        push_wrapped(
            lines,
            &rudder_model::text::sanitize(n),
            "    ",
            inner_w,
            theme.dim(),
        );
    }
    if let Some(e) = &f.error {
        push_wrapped(lines, &format!("✖ {e}"), "    ", inner_w, theme.error());
    }
    cursor
}
