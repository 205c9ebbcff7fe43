//! The TUI's texts at 80×24 as a user on a small terminal reads them: what
//! resumes a stalled task, a waiting task's question in the table, titles
//! in the transition log cut at a word, the help overlay scrolled, and
//! errors that lead with the reason and end with the path.

use crossterm::event::KeyCode;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use rudder_model::task::Status;
use rudder_store::{Location, StoreError};
use rudder_testkit::tui::*;
use rudder_tui::WorkerState;
use rudder_tui::app::{App, Popup};
use rudder_tui::update::EffectResult;
use rudder_tui::view::{self, Theme};

fn at_80x24(app: &mut App) -> String {
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("test terminal");
    terminal
        .draw(|f| view::draw(f, app, &Theme::DEFAULT))
        .expect("draw");
    screen_text(&terminal)
}

/// The fixture with task 2's worker gone: its lease lapsed 4 minutes ago.
fn with_a_stalled_task() -> rudder_model::task::TaskMap {
    let mut tasks = fixture();
    tasks.get_mut(&id(2)).expect("fixture").lease_expires_at = Some(ago(4));
    tasks
}

#[test]
fn the_stalled_hint_says_what_resumes_a_task_and_help_what_r_does() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(with_a_stalled_task());
            let text = at_80x24(&mut app);
            assert!(text.contains("⚠ 1 stalled (awaits a worker)"), "{text}");
            assert!(!text.contains("R reclaims"), "{text}");
            // In the demo with its worker gone: W is the key.
            app.worker = Some(WorkerState::Killed { pid: 4242 });
            let text = at_80x24(&mut app);
            assert!(text.contains("⚠ 1 stalled (W resumes)"), "{text}");
            insta::assert_snapshot!("stalled_hint_demo_killed_80x24", text);
            app.handle_key(ch('?'));
            at_80x24(&mut app);
            // A few rows down, past the list's keys.
            for _ in 0..4 {
                app.handle_key(ch('j'));
            }
            let help = at_80x24(&mut app);
            assert!(help.contains("a live worker resumes it"), "{help}");
            assert!(help.contains("R fails tasks idle past an age"), "{help}");
        }
    });
}

#[test]
fn after_w_a_stalled_task_waits_for_a_free_worker_slot() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(with_a_stalled_task());
            app.worker = Some(WorkerState::Running { pid: 4242 });
            let text = at_80x24(&mut app);
            assert!(text.contains("◷ 1 queued (worker busy)"), "{text}");
            assert!(!text.contains("stalled"), "{text}");
            insta::assert_snapshot!("queued_for_a_slot_80x24", text);
        }
    });
}

#[test]
fn a_waiting_tasks_question_shows_in_the_table_not_its_title_again() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut tasks = fixture();
            let t = tasks.get_mut(&id(1)).expect("fixture");
            t.status_message =
                Some("INC-1042 checkout latency: which service should I look at?".into());
            let mut app = app_with(tasks);
            let text = at_80x24(&mut app);
            let row = text
                .lines()
                .find(|l| l.contains("00000001"))
                .expect("the row of task 1");
            assert!(row.contains("which service"), "{row}");
            insta::assert_snapshot!("question_not_title_80x24", text);
        }
    });
}

#[test]
fn the_transition_log_cuts_a_title_at_a_word() {
    each_store(|| {
        insta::allow_duplicates! {
            let fx = Fixture::new(fixture());
            let mut app = fx.app();
            let mut tasks = fixture();
            tasks.get_mut(&id(1)).expect("fixture").status = Status::Completed;
            app.on_feed(fx.set(tasks));
            let text = at_80x24(&mut app);
            let line = text
                .lines()
                .find(|l| l.contains("◆→✔ completed"))
                .expect("the transition");
            assert!(!line.contains("INC-1…"), "{line}");
            insta::assert_snapshot!("log_cut_at_a_word_80x24", text);
        }
    });
}

#[test]
fn the_help_overlay_scrolls_at_80x24_and_says_so() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            app.worker = Some(WorkerState::Running { pid: 4242 });
            app.handle_key(ch('?'));
            let top = at_80x24(&mut app);
            assert!(top.contains("↓ more: j/k, PgUp/PgDn scroll"), "{top}");
            insta::assert_snapshot!("help_top_80x24", top);
            app.handle_key(ch('j'));
            let one = at_80x24(&mut app);
            assert!(one.contains("↑↓ more"), "{one}");
            assert!(one.contains("rows 2–"), "{one}");
            app.handle_key(key(KeyCode::PageDown));
            app.handle_key(key(KeyCode::PageDown));
            app.handle_key(key(KeyCode::PageDown));
            let end = at_80x24(&mut app);
            assert!(end.contains("↑ more"), "{end}");
            // The last rows: the form's keys, the demo's K and W, the mouse.
            assert!(end.contains("mouse"), "{end}");
            assert!(end.contains("start a new worker"), "{end}");
            insta::assert_snapshot!("help_end_80x24", end);
            app.handle_key(key(KeyCode::PageUp));
            assert!(matches!(app.popup, Popup::Help { .. }));
            // Any other key closes it, as it says.
            app.handle_key(ch('x'));
            assert!(matches!(app.popup, Popup::None));
        }
    });
}

#[test]
fn an_error_line_leads_with_the_reason_and_ends_with_the_path() {
    each_store(|| {
        insta::allow_duplicates! {
            let mut app = app_with(fixture());
            let path = "/tmp/rudder-hostile-pass/a/rather/long/directory/tasks.json";
            app.apply_result(EffectResult::Cancel {
                task_id: id(2),
                result: Err(StoreError::Io {
                    location: Location::file(path),
                    file: path.into(),
                    action: "rename the temporary file over the store",
                    source: std::io::Error::from_raw_os_error(libc::ENOSPC),
                }),
            });
            let text = at_80x24(&mut app);
            let line = text.lines().last().expect("the status line");
            assert!(
                line.starts_with("cancel failed: No space left on device; free some space, then retry"),
                "{line}"
            );
            insta::assert_snapshot!("cancel_failed_disk_full_80x24", text);
        }
    });
}

/// Issue 30, item 11: the demo's question, as its worker asks it, in the
/// table's message column: cut at 80 columns (at the end of a word), whole
/// wherever the row has room for it, the title and the other columns
/// taking only what is left.
#[test]
fn a_waiting_tasks_question_takes_the_width_that_is_left() {
    let question = "Which service should the diagnosis follow? INC-1043 (card payments declined with 502) names none.";
    each_store(|| {
        let mut tasks = fixture();
        let t = tasks.get_mut(&id(1)).expect("fixture");
        t.title = Some("INC-1043 card payments declined with 502".into());
        t.status_message = Some(question.into());
        let mut app = app_with(tasks);
        let mut failed = Vec::new();
        for (width, whole) in [(80, false), (140, false), (200, true), (300, true)] {
            let mut terminal = Terminal::new(TestBackend::new(width, 30)).expect("terminal");
            terminal
                .draw(|f| view::draw(f, &mut app, &Theme::DEFAULT))
                .expect("draw");
            let text = screen_text(&terminal);
            let row = text
                .lines()
                .find(|l| l.contains("00000001"))
                .expect("the row of task 1");
            // Whole where the row has room; else cut at a word, the title
            // never longer than the question beside it.
            let fits = if whole {
                row.contains(question)
            } else {
                row.contains("Which service should the") && row.contains('…')
            };
            if !fits {
                failed.push(format!("{width} columns:\n{text}"));
            }
        }
        assert!(failed.is_empty(), "{}", failed.join("\n"));
    });
}
