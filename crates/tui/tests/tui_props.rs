//! Any key sequence, store change and terminal size: the TUI never panics and
//! its selection always names a task on screen.

use crossterm::event::{KeyCode, KeyEvent};
use proptest::prelude::*;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use rudder_model::task::Status;
use rudder_testkit::tui::*;
use rudder_tui::view::{self, Theme};

#[derive(Debug, Clone)]
enum Step {
    Key(KeyEvent),
    /// Change task `n`'s status (or remove it when the status is `None`).
    Store(u32, Option<Status>),
    Missing,
    Unreadable,
    Resize(u16, u16),
}

fn keys() -> impl Strategy<Value = KeyEvent> {
    prop_oneof![
        prop::sample::select(vec![
            'j', 'k', 'g', 'G', 'i', 'c', 'y', 'n', 'R', '/', '1', '2', '3', '4', '5', 's', 'p',
            '?', 'd', 'u', ' ', 'a', '0', '[', '"',
        ])
        .prop_map(ch),
        prop::sample::select(vec![
            KeyCode::Enter,
            KeyCode::Esc,
            KeyCode::Tab,
            KeyCode::BackTab,
            KeyCode::Up,
            KeyCode::Down,
            KeyCode::Left,
            KeyCode::Right,
            KeyCode::PageUp,
            KeyCode::PageDown,
            KeyCode::Backspace,
        ])
        .prop_map(key),
        Just(ctrl('s')),
        Just(ctrl('u')),
    ]
}

fn steps() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => keys().prop_map(Step::Key),
        2 => (1u32..=6, prop::option::of(prop::sample::select(Status::ALL.to_vec())))
            .prop_map(|(n, s)| Step::Store(n, s)),
        1 => Just(Step::Missing),
        1 => Just(Step::Unreadable),
        1 => (0u16..140, 0u16..45).prop_map(|(w, h)| Step::Resize(w, h)),
    ]
}

/// Run `seq` over a store of `kind`: the app never panics and its
/// selection is always a row it shows.
fn check(kind: Kind, seq: Vec<Step>) -> Result<(), TestCaseError> {
    rudder_testkit::stores::set_kind(kind);
    let mut tasks = fixture();
    let fx = Fixture::new(tasks.clone());
    let mut app = fx.app();
    let mut terminal = Terminal::new(TestBackend::new(120, 35)).expect("terminal");
    for step in seq {
        match step {
            Step::Key(k) => {
                // 'q' is not generated: the sequence goes on.
                let _ = app.handle_key(k);
            }
            Step::Store(n, status) => {
                match status {
                    Some(s) => {
                        let t = tasks
                            .entry(id(n))
                            .or_insert_with(|| task(n, s, "back", 1, 0));
                        t.status = s;
                        t.revision += 1;
                    }
                    None => {
                        tasks.shift_remove(&id(n));
                    }
                }
                app.on_feed(fx.set(tasks.clone()));
            }
            Step::Missing => {
                app.on_feed(fx.remove());
                tasks.clear();
            }
            Step::Unreadable => app.on_feed(unreadable("bad")),
            Step::Resize(w, h) => terminal.backend_mut().resize(w, h),
        }
        terminal
            .draw(|f| view::draw(f, &mut app, &Theme::DEFAULT))
            .expect("draw");
        match &app.selected {
            Some(sel) => {
                let row = app.row_task(app.cursor).map(|t| t.task_id.clone());
                prop_assert_eq!(row.as_deref(), Some(sel.as_str()));
            }
            None => prop_assert!(app.rows.is_empty()),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn never_panics_and_the_selection_is_always_a_shown_task(seq in prop::collection::vec(steps(), 1..60)) {
        check(Kind::File, seq)?;
    }

    #[test]
    fn over_sqlite_never_panics_and_the_selection_is_always_a_shown_task(seq in prop::collection::vec(steps(), 1..60)) {
        check(Kind::Sqlite, seq)?;
    }
}
