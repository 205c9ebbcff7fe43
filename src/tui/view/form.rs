//! The input form dialog.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::{Theme, centered, clear};
use crate::text::{clean, truncate};
use crate::tui::form::{FieldKind, Form, option_label};

pub(super) fn draw(frame: &mut Frame, area: Rect, form: &Form, theme: &Theme) {
    let width = area.width.saturating_sub(4).min(90);
    let inner_w = usize::from(width.saturating_sub(2));
    let mut lines: Vec<Line> = Vec::new();
    // The label and the message were sanitized when the form was built:
    // only cut here, so a huge one costs nothing per frame.
    if let Some(m) = &form.message {
        lines.push(Line::raw(truncate(m, inner_w).into_owned()));
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
        lines.push(Line::styled(
            clean(&format!("⚠ {m}"), inner_w),
            theme.error(),
        ));
    }
    for e in &form.errors {
        lines.push(Line::styled(
            clean(&format!("✖ {e}"), inner_w),
            theme.error(),
        ));
    }
    lines.push(Line::raw(""));
    let mut cursor = None;
    let mut focus_line = 0;
    for (i, f) in form.fields.iter().enumerate() {
        let focused = i == form.focus;
        if focused {
            focus_line = lines.len();
        }
        let marker = if focused { "▸ " } else { "  " };
        let req = if f.required { " *" } else { "" };
        lines.push(Line::from(vec![
            Span::styled(
                clean(
                    &format!("{marker}{}{req}", f.label()),
                    inner_w.saturating_sub(12),
                ),
                if focused {
                    theme.focus()
                } else {
                    theme.title()
                },
            ),
            Span::styled(format!(" ({})", f.type_label()), theme.dim()),
        ]));
        let value_w = inner_w.saturating_sub(6);
        let value = match &f.kind {
            FieldKind::Text(_) | FieldKind::Json => {
                let scroll = f.input.visual_scroll(value_w);
                if focused {
                    cursor = Some((
                        lines.len(),
                        4 + f.input.visual_cursor().saturating_sub(scroll),
                    ));
                }
                let shown: String = crate::text::sanitize(f.input.value())
                    .chars()
                    .skip(scroll)
                    .take(value_w)
                    .collect();
                format!("  [ {shown:<value_w$} ]")
            }
            FieldKind::Toggle(v) => match v {
                Some(true) => "  [x] yes   (Space toggles)".into(),
                Some(false) => "  [ ] no    (Space toggles)".into(),
                None => "  [-] not given   (Space toggles)".into(),
            },
            FieldKind::Choice { options, chosen } => {
                let current = chosen
                    .and_then(|c| options.get(c))
                    .map(option_label)
                    .unwrap_or_else(|| "(not given)".into());
                let all: Vec<String> = options.iter().map(option_label).collect();
                format!("  ◀ {current} ▶   of {}", all.join(" | "))
            }
        };
        lines.push(Line::raw(clean(&value, inner_w)));
        if let Some(h) = &f.hint {
            lines.push(Line::styled(
                clean(&format!("    {h}"), inner_w),
                theme.dim(),
            ));
        }
        if let Some(e) = &f.error {
            lines.push(Line::styled(
                clean(&format!("    ✖ {e}"), inner_w),
                theme.error(),
            ));
        }
    }
    lines.push(Line::raw(""));
    let footer = if form.submitting {
        "sending…".to_string()
    } else {
        "Tab/Shift-Tab move · Space/←→ choose · Ctrl-S (or Enter on the last) submits · Esc closes"
            .into()
    };
    let height = (lines.len() as u16 + 3)
        .min(area.height.saturating_sub(2))
        .max(5);
    let rect = centered(area, width, height);
    clear(frame, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(
            clean(
                &format!(" input for {} ", truncate(&form.label, inner_w)),
                inner_w,
            ),
            theme.title(),
        ))
        .title_bottom(Span::styled(
            clean(&format!(" {footer} "), inner_w),
            theme.dim(),
        ));
    let inner = block.inner(rect);
    // Keep the focused field on screen.
    let visible = usize::from(inner.height);
    let scroll = (focus_line + 4).saturating_sub(visible);
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
            .wrap(Wrap { trim: false })
            .scroll((scroll as u16, 0)),
        rect,
    );
}
