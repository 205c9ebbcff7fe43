//! The header: store, counts per status (waiting tasks stand out), watch
//! state, and in demo mode the worker.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Theme;
use crate::WorkerState;
use crate::app::{App, WatchState};
use rudder_model::task::Status;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let width = usize::from(area.width);
    let mut first = vec![Span::styled(" rudder ", theme.title())];
    if app.read_only {
        first.push(Span::styled(
            "  [read-only]",
            theme.tone(crate::app::Tone::Warning),
        ));
    }
    let worker_at = first.len() + 1;
    if let Some(w) = &app.worker {
        first.push(Span::raw(format!("  {}: ", app.worker_role)));
        first.push(Span::styled(worker_text(w, &app.keys), theme.title()));
    }
    let sort_at = first.len();
    first.push(Span::styled(
        format!("  sort: {}", app.sort.label()),
        theme.dim(),
    ));
    if app.filter.active() {
        let mut f = String::from("  filter:");
        if !app.filter.text.is_empty() {
            f.push_str(&format!(
                " /{}",
                rudder_model::text::clean(&app.filter.text, 20)
            ));
        }
        for (i, on) in app.filter.statuses.iter().enumerate() {
            if *on {
                f.push_str(&format!(" {}", Status::ALL[i]));
            }
        }
        match app.table_len() {
            Some(n) => f.push_str(&format!(" ({n} of {})", app.store_len())),
            None => f.push_str(&format!(" (≥{} of {})", app.rows.len(), app.store_len())),
        }
        first.push(Span::styled(f, theme.tone(crate::app::Tone::Warning)));
    }
    // What does not fit gives way, least needed first: the worker's key
    // hint (the footer has it), then the sort while a filter is shown; the
    // store's name takes what is left (up to half the width). The filter
    // must stay in sight, or a filtered table passes for the whole store.
    const STORE_MIN: usize = 12;
    let used = |spans: &[Span]| spans.iter().map(Span::width).sum::<usize>() + STORE_MIN;
    if used(&first) > width
        && let Some(w) = &app.worker
    {
        let text = worker_text(w, &app.keys);
        let short = text
            .rsplit_once(" (")
            .map_or(text.as_str(), |(head, _)| head);
        first[worker_at] = Span::styled(short.to_string(), theme.title());
    }
    if used(&first) > width && app.filter.active() {
        first.remove(sort_at);
    }
    let rest: usize = first.iter().map(Span::width).sum();
    let room = width.saturating_sub(rest).min(width / 2).max(STORE_MIN);
    first.insert(
        1,
        Span::raw(rudder_model::text::clean(&app.store_label, room)),
    );

    let mut second = vec![Span::raw(" ")];
    for (i, status) in Status::ALL.iter().enumerate() {
        let n = app.counts[i];
        // On narrow terminals only the waiting count keeps its name: it is
        // the one that needs a human.
        let text = if area.width >= 100 || *status == Status::InputRequired {
            format!("{} {} {}", Theme::symbol(*status), n, status)
        } else {
            format!("{} {}", Theme::symbol(*status), n)
        };
        let style = if *status == Status::InputRequired && n > 0 {
            theme.attention()
        } else {
            theme.status(*status)
        };
        second.push(Span::styled(text, style));
        second.push(Span::raw("  "));
    }
    // Where the stalled count goes, and its hint, which gives way when the
    // line would not fit (the detail and the task view say it too).
    let stalled_at = second.len();
    // Nobody works on these though they say working (before anyone has,
    // they look like any other): say what resumes them. In the demo with
    // its worker running they only wait for one of its slots.
    let (stalled_sym, stalled_word) = if app.worker_will_resume() {
        ("◷", "queued")
    } else {
        ("⚠", "stalled")
    };
    if app.stalled > 0 {
        second.push(Span::styled(
            format!(
                "{stalled_sym} {} {stalled_word} ({})",
                app.stalled,
                app.resumes_stalled(false)
            ),
            theme.stalled(),
        ));
        second.push(Span::raw("  "));
    }
    if !app.marks.is_empty() {
        second.push(Span::styled(
            format!("✓ {} marked", app.marks.len()),
            theme.marked(),
        ));
        second.push(Span::raw("  "));
    }
    // The table holds still while changes come in; say when that leaves
    // rows out of the chosen order, and which key puts them back.
    let order_at = second.len();
    let resort = app.keys.first(crate::keys::Action::Resort);
    if app.out_of_order > 0 {
        second.push(Span::styled(
            format!("⇅ {} out of order ({resort} re-sorts)", app.out_of_order),
            theme.tone(crate::app::Tone::Warning),
        ));
        second.push(Span::raw("  "));
    }
    let (watch, error) = match (&app.watch, app.paused) {
        (WatchState::Starting, _) => ("○ starting".to_string(), false),
        (_, true) => (format!("⏸ paused, {} pending", app.pending_changes), false),
        (WatchState::Live, false) => ("● live".to_string(), false),
        (WatchState::Missing, false) => (format!("○ {} missing", app.store_name), true),
        (WatchState::Unreadable(_), false) => ("✖ unreadable".to_string(), true),
        (WatchState::Unreachable(_), false) => ("✖ unreachable".to_string(), true),
    };
    // A read that takes long (a slow or stopped database) is said; the
    // rows shown are the last ones read.
    let (watch, error) = match app.slow_read {
        Some(d) if !app.paused => (format!("◌ waiting for the store ({} s)", d.as_secs()), true),
        _ => (watch, error),
    };
    second.push(Span::styled(
        watch,
        if error { theme.error() } else { theme.title() },
    ));
    // Too long: the short hint, then none.
    if app.stalled > 0 && second.iter().map(Span::width).sum::<usize>() > width {
        second[stalled_at] = Span::styled(
            format!(
                "{stalled_sym} {} {stalled_word} ({})",
                app.stalled,
                app.resumes_stalled(true)
            ),
            theme.stalled(),
        );
    }
    if app.stalled > 0 && second.iter().map(Span::width).sum::<usize>() > width {
        second[stalled_at] = Span::styled(
            format!("{stalled_sym} {} {stalled_word}", app.stalled),
            theme.stalled(),
        );
    }
    // Still too long: the order's hint goes short (the key stays).
    if app.out_of_order > 0 && second.iter().map(Span::width).sum::<usize>() > width {
        second[order_at] = Span::styled(
            format!("⇅ {} ({resort} re-sorts)", app.out_of_order),
            theme.tone(crate::app::Tone::Warning),
        );
    }
    frame.render_widget(
        Paragraph::new(vec![Line::from(first), Line::from(second)]),
        area,
    );
}

fn worker_text(w: &WorkerState, keys: &crate::keys::KeyMap) -> String {
    use crate::keys::Action;
    let (start, kill) = (
        keys.first(Action::StartWorker),
        keys.first(Action::KillWorker),
    );
    match w {
        WorkerState::NotStarted => format!("not started ({start} starts)"),
        WorkerState::Running { pid } => format!("pid {pid} running ({kill} kills)"),
        WorkerState::Stopped { pid } => format!("pid {pid} stopped by a signal ({kill} kills)"),
        WorkerState::Killed { pid } => format!("pid {pid} killed ({start} restarts)"),
        WorkerState::Exited { pid, code } => match code {
            Some(c) => format!("pid {pid} exited {c} ({start} restarts)"),
            None => format!("pid {pid} ended by a signal ({start} restarts)"),
        },
    }
}
