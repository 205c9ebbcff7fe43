//! What the screen looks like, drawn on ratatui's `TestBackend` at a fixed
//! clock with fixed ids, compared with `insta` snapshots.

#[path = "tui_common/mod.rs"]
mod common;

use common::*;
use crossterm::event::KeyCode;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use rudder::store::{ReclaimReport, Reclaimed, Skipped};
use rudder::task::Status;
use rudder::tui::app::StoreUpdate as FeedEvent;
use rudder::tui::app::{App, Popup};
use rudder::tui::view::{self, Theme};

const COLOR: Theme = Theme { color: true };

fn render_with(app: &mut App, width: u16, height: u16, theme: Theme) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    terminal.draw(|f| view::draw(f, app, &theme)).expect("draw");
    terminal
}

/// The screen as text, one line per row, trailing spaces trimmed.
fn screen(terminal: &Terminal<TestBackend>) -> String {
    screen_text(terminal)
}

fn render(app: &mut App) -> String {
    screen(&render_with(app, 120, 35, COLOR))
}

#[test]
fn list() {
    let mut app = app_with(fixture());
    // A second snapshot with a transition fills the log and flashes a row.
    let mut tasks = fixture();
    tasks.get_mut(&id(5)).expect("fixture").status = Status::Cancelled;
    let t = tasks.get_mut(&id(2)).expect("fixture");
    t.status_message = Some("checking lag on replica 3".into());
    app.on_feed(snapshot_after(&fixture(), tasks.clone()));
    let mut later = tasks.clone();
    later.get_mut(&id(6)).expect("fixture").status = Status::Failed;
    app.on_feed(snapshot_after(&tasks, later));
    insta::assert_snapshot!(render(&mut app));
}

#[test]
fn detail_of_a_finished_task() {
    let mut app = app_with(fixture());
    app.handle_key(ch('/'));
    type_text(&mut app, "cache");
    app.handle_key(key(KeyCode::Enter));
    insta::assert_snapshot!(render(&mut app));
}

#[test]
fn detail_of_a_working_task_with_a_lease() {
    let mut app = app_with(fixture());
    app.handle_key(ch('j'));
    app.handle_key(ch('j'));
    insta::assert_snapshot!(render(&mut app));
}

#[test]
fn form_with_inline_errors() {
    let mut app = app_with(fixture());
    app.handle_key(ch('i'));
    app.handle_key(key(KeyCode::Tab));
    type_text(&mut app, "x");
    app.handle_key(key(KeyCode::Tab));
    app.handle_key(key(KeyCode::Right));
    app.handle_key(key(KeyCode::Tab));
    app.handle_key(ch(' '));
    app.handle_key(key(KeyCode::Tab));
    type_text(&mut app, "[1, \"a\"]");
    assert!(app.handle_key(ctrl('s')).is_empty());
    insta::assert_snapshot!(render(&mut app));
}

#[test]
fn cancel_confirmation() {
    let mut app = app_with(fixture());
    app.handle_key(ch('c'));
    insta::assert_snapshot!(render(&mut app));
}

fn report(dry_run: bool) -> ReclaimReport {
    ReclaimReport {
        dry_run,
        older_than_ms: 15 * 60_000,
        at: now(),
        reclaimed: vec![
            Reclaimed {
                task_id: id(2),
                title: Some("INC-1043 db replication lag".into()),
                status_before: Status::Working,
                idle_ms: 17 * 60_000 + 5_000,
                last_update: ago(17),
                claimed_by: Some("worker-7".into()),
                revision: 5,
            },
            Reclaimed {
                task_id: id(1),
                title: Some("INC-1042 \u{1b}[2Jcheckout latency".into()),
                status_before: Status::InputRequired,
                idle_ms: 3 * 3_600_000,
                last_update: ago(180),
                claimed_by: None,
                revision: 3,
            },
        ],
        skipped: vec![Skipped {
            task_id: id(6),
            status: Status::Working,
            reason: "lease held by worker-2 for another 6s".into(),
        }],
        active: 2,
    }
}

#[test]
fn reclaim_age_prompt() {
    let mut app = app_with(fixture());
    app.handle_key(ch('R'));
    insta::assert_snapshot!(render(&mut app));
}

#[test]
fn reclaim_preview_confirmation() {
    let mut app = app_with(fixture());
    app.popup = Popup::ReclaimPreview {
        older_than: std::time::Duration::from_secs(900),
        age: "15m".into(),
        report: report(true),
        tasks: vec![(id(2), 2), (id(1), 2)],
    };
    insta::assert_snapshot!(render(&mut app));
}

#[test]
fn reclaim_report() {
    let mut app = app_with(fixture());
    // After the y: one previewed task changed meanwhile and was left alone.
    let mut done = report(false);
    let changed = done.reclaimed.remove(1);
    done.skipped = vec![Skipped {
        task_id: changed.task_id,
        status: Status::InputRequired,
        reason: "changed since the preview (revision 5, now 7)".into(),
    }];
    app.popup = Popup::ReclaimDone { report: done };
    let text = render(&mut app);
    assert!(
        text.contains("1 previewed task(s) not reclaimed:"),
        "{text}"
    );
    assert!(
        text.contains("changed since the preview (revision 5, now 7)"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn help() {
    let mut app = app_with(fixture());
    app.handle_key(ch('?'));
    insta::assert_snapshot!(render(&mut app));
}

#[test]
fn help_in_demo_mode_lists_the_worker_keys() {
    let mut app = app_with(fixture());
    app.worker = Some(rudder::tui::WorkerState::Killed { pid: 4242 });
    app.handle_key(ch('?'));
    insta::assert_snapshot!(render(&mut app));
}

#[test]
fn missing_store_banner() {
    let mut app = App::new(std::path::Path::new("/srv/rudder/tasks.json"), false, now());
    app.on_feed(FeedEvent::Missing);
    insta::assert_snapshot!(render(&mut app));
}

#[test]
fn unreadable_store_banner() {
    let mut app = app_with(fixture());
    app.on_feed(FeedEvent::Unreadable {
        message: "/srv/rudder/tasks.json: store file is corrupt at line 3 column 7: expected `,` or `}`; it was left untouched".into(),
    });
    insta::assert_snapshot!(render(&mut app));
}

#[test]
fn paused_with_changes_pending() {
    let mut app = app_with(fixture());
    app.handle_key(ch('p'));
    app.on_feed(task_2_completed());
    insta::assert_snapshot!(render(&mut app));
}

#[test]
fn too_small_terminal() {
    let mut app = app_with(fixture());
    let t = render_with(&mut app, 20, 5, COLOR);
    insta::assert_snapshot!(screen(&t));
    // Every size down to nothing draws without panicking.
    for (w, h) in [(0, 0), (1, 1), (59, 40), (60, 12), (61, 13), (200, 12)] {
        render_with(&mut app, w, h, COLOR);
    }
    app.handle_key(ch('i'));
    for (w, h) in [(60, 12), (70, 14)] {
        render_with(&mut app, w, h, COLOR);
    }
}

#[test]
fn hostile_task_text_is_drawn_inert() {
    let mut app = app_with(fixture());
    app.handle_key(ch('j'));
    let t = render_with(&mut app, 120, 35, COLOR);
    let text = screen(&t);
    for bad in ['\u{1b}', '\u{7}', '\u{202E}', '\r', '\u{9b}'] {
        assert!(!text.contains(bad), "{bad:?} reached the screen");
    }
    assert!(text.contains("msgcleared?reversed end next"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn no_color_draws_no_colours_but_keeps_the_symbols() {
    let mut app = app_with(fixture());
    let t = render_with(&mut app, 120, 35, Theme { color: false });
    let buf = t.backend().buffer();
    for cell in buf.content() {
        assert_eq!(
            cell.fg,
            Color::Reset,
            "a foreground colour at {:?}",
            cell.symbol()
        );
        assert_eq!(
            cell.bg,
            Color::Reset,
            "a background colour at {:?}",
            cell.symbol()
        );
    }
    let text = screen(&t);
    for sym in ["◆", "▶", "✔", "✖", "⊘"] {
        assert!(text.contains(sym), "{sym} missing");
    }
    // With colour, waiting tasks stand out in the header.
    let t = render_with(&mut app, 120, 35, COLOR);
    let buf = t.backend().buffer();
    let x = (0..120u16)
        .find(|&x| buf[(x, 1)].symbol() == "◆")
        .expect("the input_required count");
    assert_eq!(buf[(x, 1)].bg, Color::Yellow);
}

#[test]
fn only_visible_rows_are_drawn_and_selection_scrolls_into_view() {
    let mut tasks = rudder::task::TaskMap::new();
    for n in 0..5_000u32 {
        let t = task(
            100 + n,
            Status::Working,
            &format!("task {n:05}"),
            10,
            i64::from(n % 60),
        );
        tasks.insert(t.task_id.clone(), t);
    }
    let mut app = app_with(tasks);
    render_with(&mut app, 120, 35, COLOR);
    app.handle_key(ch('G'));
    let text = screen(&render_with(&mut app, 120, 35, COLOR));
    let last = app
        .row_task(app.rows.len() - 1)
        .expect("a last row")
        .short_id()
        .to_string();
    assert!(text.contains(&last), "the last row is on screen");
    assert!(app.offset > 0 && app.offset + app.page >= app.rows.len());
}

#[test]
fn list_on_an_80x24_terminal() {
    let mut app = app_with(fixture());
    insta::assert_snapshot!(screen(&render_with(&mut app, 80, 24, COLOR)));
}

#[test]
fn form_with_hostile_defaults_shows_what_it_submits() {
    let mut tasks = fixture();
    let waiting = tasks.get_mut(&id(1)).expect("fixture");
    waiting.input_schema = Some(serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "x\u{1b}[2Jy\u{202E}z"},
            "mode": {"enum": ["a\u{1b}[31m", "b"], "default": "a\u{1b}[31m"},
            "blob": {"type": "object", "default": {"k": "v\u{9b}1m"}}
        }
    }));
    let mut app = app_with(tasks);
    app.handle_key(ch('i'));
    let text = render(&mut app);
    for bad in ['\u{1b}', '\u{202E}', '\u{9b}'] {
        assert!(!text.contains(bad), "{bad:?} reached the screen");
    }
    assert!(text.contains("[ xyz "), "{text}");
    assert!(text.contains(r"◀ a\u001b[31m ▶"), "{text}");
    assert!(text.contains(r#"{"k":"v\u009b1m"}"#), "{text}");
    insta::assert_snapshot!(text);
}

/// A task with huge texts (title, message, result, a history note, a field
/// rudder does not know) costs its sanitizing once per change of the task,
/// not once per frame: an idle screen redraws every second for the
/// relative times, and sanitizing 25 MB each time cost seconds of CPU.
#[test]
fn huge_texts_are_sanitized_once_per_change_not_per_frame() {
    const HUGE: usize = 2 << 20;
    let mut tasks = fixture();
    let big = tasks.get_mut(&id(2)).expect("fixture");
    big.title = Some(format!("HUGE-TITLE {}", "t\u{1b}[31m".repeat(HUGE / 6)));
    big.status_message = Some("m".repeat(HUGE));
    big.result = Some(serde_json::json!({ "log": "r".repeat(HUGE) }));
    big.history[0].note = Some("n".repeat(HUGE));
    big.extra
        .insert("trace".into(), serde_json::json!("x".repeat(HUGE)));
    let mut app = app_with(tasks.clone());
    let row = app
        .rows
        .iter()
        .position(|&pos| app.tasks.get_index(pos).is_some_and(|(k, _)| k == &id(2)))
        .expect("the task has a row");
    app.select_row(row);
    let mut terminal = Terminal::new(TestBackend::new(120, 35)).expect("test terminal");
    let mut frame = |app: &mut App| {
        terminal.draw(|f| view::draw(f, app, &COLOR)).expect("draw");
        screen(&terminal)
    };
    let first = frame(&mut app);
    assert!(first.contains("HUGE-TITLE tttt"), "{first}");
    assert!(!first.contains('\u{1b}'), "{first}");

    let before = rudder::text::sanitized_bytes();
    for s in 1..=10 {
        app.tick(now() + chrono::TimeDelta::seconds(s));
        frame(&mut app);
    }
    let per_frame = (rudder::text::sanitized_bytes() - before) / 10;
    assert!(
        per_frame < 64 << 10,
        "{per_frame} bytes sanitized per idle frame"
    );

    // A change of the task is sanitized (once) and shown.
    let mut changed = tasks.clone();
    let t = changed.get_mut(&id(2)).expect("fixture");
    t.title = Some("RENAMED \u{1b}]0;pwned\u{7}incident".into());
    t.revision += 1;
    app.on_feed(snapshot_after(&tasks, changed));
    let before = rudder::text::sanitized_bytes();
    let shown = frame(&mut app);
    assert!(shown.contains("RENAMED incident"), "{shown}");
    assert!(
        rudder::text::sanitized_bytes() - before >= HUGE as u64,
        "the changed task was not sanitized again"
    );
    let before = rudder::text::sanitized_bytes();
    frame(&mut app);
    assert!(rudder::text::sanitized_bytes() - before < 64 << 10);
}
