//! The TUI holds still and its dialogs mean what they say: a heartbeat
//! neither moves nor flashes a row, a transition or a new message flashes,
//! help closes on any key without quitting, cancel on a finished task is
//! refused at once, and `y` never copies an id that is not what it shows.

use chrono::TimeDelta;
use rudder_model::task::{Status, TaskMap};
use rudder_testkit::tui::*;
use rudder_tui::app::{App, Popup, Tone};
use rudder_tui::update::Effect;

fn order(app: &App) -> Vec<String> {
    (0..app.rows.len())
        .filter_map(|r| app.row_task(r))
        .map(|t| t.task_id.clone())
        .collect()
}

fn last_status(app: &App) -> (Tone, String) {
    let m = app.status.as_ref().expect("a status line");
    (m.tone, m.text.clone())
}

#[test]
fn a_heartbeat_neither_moves_nor_flashes_a_row() {
    each_store(|| {
        let fx = Fixture::new(fixture());
        let mut app = fx.app();
        let before = order(&app);
        let mut tasks = fixture();
        // Task 6 is the most recently created working task; task 2 heartbeats.
        let t = tasks.get_mut(&id(2)).expect("task 2");
        t.updated_at = Some(now() + TimeDelta::seconds(1));
        t.revision += 1;
        app.on_feed(fx.set(tasks.clone()));
        assert_eq!(order(&app), before, "the rows held still");
        assert!(!app.flashing(&id(2)), "a heartbeat is not news");

        // A new message is news, and so is a transition.
        let mut next = tasks.clone();
        next.get_mut(&id(2)).expect("task 2").status_message = Some("step 4/7".into());
        app.on_feed(fx.set(next.clone()));
        assert!(app.flashing(&id(2)), "a new message flashes");
        assert_eq!(order(&app), before);

        let mut done = next.clone();
        done.get_mut(&id(6)).expect("task 6").status = Status::Completed;
        app.on_feed(fx.set(done));
        assert!(app.flashing(&id(6)), "a transition flashes");
    });
}

#[test]
fn help_closes_on_any_key_and_q_does_not_quit() {
    each_store(|| {
        let mut app = app_with(fixture());
        for k in [ch('q'), ch('x'), key(crossterm::event::KeyCode::Esc)] {
            app.handle_key(ch('?'));
            assert!(matches!(app.popup, Popup::Help { .. }));
            assert!(app.handle_key(k).is_empty());
            assert!(matches!(app.popup, Popup::None), "{k:?} closes help");
            assert!(!app.quit, "{k:?} in help does not quit");
        }
        app.handle_key(ch('q'));
        assert!(app.quit, "q quits from the table");
    });
}

#[test]
fn cancel_on_a_finished_task_is_refused_at_once() {
    each_store(|| {
        let mut app = app_with(fixture());
        let row = (0..app.rows.len())
            .find(|&r| app.row_task(r).map(|t| t.status) == Some(Status::Completed))
            .expect("a completed row");
        app.select_row(row);
        assert!(app.handle_key(ch('c')).is_empty());
        assert!(
            matches!(app.popup, Popup::None),
            "no y/n for a cancel that cannot happen"
        );
        let (tone, text) = last_status(&app);
        assert_eq!(tone, Tone::Warning);
        assert!(
            text.contains("cannot cancel") && text.contains("completed"),
            "{text}"
        );
        // A working task still asks first.
        let row = (0..app.rows.len())
            .find(|&r| app.row_task(r).map(|t| t.task_id.clone()) == Some(id(2)))
            .expect("task 2");
        app.select_row(row);
        app.handle_key(ch('c'));
        assert!(matches!(app.popup, Popup::ConfirmCancel { .. }));
    });
}

#[test]
fn y_copies_only_an_id_that_is_what_the_screen_shows() {
    each_store(|| {
        let mut tasks = fixture();
        let crafted = "abc\u{1b}]52;c;cm0gLXJmIH4=\u{7}\nrm -rf ~".to_string();
        let mut t = tasks.shift_remove(&id(5)).expect("task 5");
        t.task_id = crafted.clone();
        tasks.insert(crafted.clone(), t);
        let mut app = app_with(tasks);
        let row = (0..app.rows.len())
            .find(|&r| app.row_task(r).map(|t| t.task_id.clone()) == Some(crafted.clone()))
            .expect("the crafted row");
        app.select_row(row);
        let effects = app.handle_key(ch('y'));
        assert!(effects.is_empty(), "nothing copied: {effects:?}");
        let (tone, text) = last_status(&app);
        assert_eq!(tone, Tone::Warning);
        assert!(text.contains("not copied"), "{text}");
        assert!(!text.contains('\u{1b}') && !text.contains('\n'), "{text:?}");
        // A plain id is copied as it is.
        let row = (0..app.rows.len())
            .find(|&r| app.row_task(r).map(|t| t.task_id.clone()) == Some(id(2)))
            .expect("task 2");
        app.select_row(row);
        assert_eq!(app.handle_key(ch('y')), vec![Effect::Copy(id(2))]);
    });
}

#[test]
fn esc_while_the_input_is_being_sent_says_it_cannot_call_it_back() {
    each_store(|| {
        use rudder_store::NewTask;
        use rudder_tui::update::{EffectResult, execute};
        let fx = Fixture::new(TaskMap::new());
        let store = fx.store();
        let task = store
            .create(NewTask {
                input_schema: Some(serde_json::json!({
                    "type": "object",
                    "properties": {"service": {"type": "string"}}
                })),
                ..NewTask::default()
            })
            .expect("create")
            .task;
        let mut app = fx.app_now(now());
        app.handle_key(ch('i'));
        type_text(&mut app, "payments");
        let effects = app.handle_key(ctrl('s'));
        assert!(matches!(effects.as_slice(), [Effect::ProvideInput { .. }]));
        // The store has not answered yet (say it waits for the lock): Esc.
        assert!(
            app.handle_key(key(crossterm::event::KeyCode::Esc))
                .is_empty()
        );
        assert!(matches!(app.popup, Popup::Form(_)), "the form stays");
        let (tone, text) = last_status(&app);
        assert_eq!(tone, Tone::Warning);
        assert!(text.contains("cannot be called back"), "{text}");
        assert!(!text.contains("nothing sent"), "{text}");
        // The answer lands and closes the form, saying what happened.
        for e in effects {
            if let Some(r @ EffectResult::Input { .. }) = execute(&store, e) {
                app.apply_result(r);
            }
        }
        assert!(matches!(app.popup, Popup::None));
        assert!(last_status(&app).1.contains("input sent"));
        assert_eq!(
            store.get(&task.task_id).expect("get").input_value,
            Some(serde_json::json!({"service": "payments"}))
        );
    });
}

/// Issue 30, item 13: sorted by last update, a heartbeat would move its
/// task to the top; the table holds still (the task keeps its row), the
/// header says how many rows are out of order and which key re-sorts, and
/// that key puts them in order, the selection on its task.
#[test]
fn rows_held_still_are_counted_in_the_header_until_o_re_sorts() {
    each_store(|| {
        let tasks: TaskMap = (1..=50)
            .map(|n| {
                let t = task(
                    n,
                    Status::Working,
                    &format!("INC-{n:04} seed task"),
                    100,
                    i64::from(n),
                );
                (t.task_id.clone(), t)
            })
            .collect();
        let fx = Fixture::new(tasks.clone());
        let mut app = fx.app();
        // created → title → id → last update
        for _ in 0..3 {
            app.handle_key(ch('s'));
        }
        assert_eq!(app.sort.label(), "last update");
        // Near the top, the table scrolled a little past it.
        app.select_row(30);
        app.select_row(5);
        let selected = app.selected.clone().expect("a selection");
        let before = order(&app);
        let header = |app: &mut App, width: u16| {
            let mut terminal =
                ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, 24))
                    .expect("terminal");
            terminal
                .draw(|f| rudder_tui::view::draw(f, app, &rudder_tui::view::Theme::DEFAULT))
                .expect("draw");
            screen_text(&terminal)
                .lines()
                .take(2)
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(!header(&mut app, 120).contains('⇅'));

        // The task updated longest ago, at the bottom, heartbeats.
        let last = before.last().expect("rows").clone();
        let mut next = tasks.clone();
        let t = next.get_mut(&last).expect("the last task");
        t.updated_at = Some(now());
        t.revision += 1;
        app.on_feed(fx.set(next));
        assert_eq!(order(&app), before, "the rows held still");
        assert_eq!(app.selected.as_ref(), Some(&selected));
        assert_eq!(app.out_of_order, 1);
        let wide = header(&mut app, 120);
        assert!(wide.contains("⇅ 1 out of order (o re-sorts)"), "{wide}");
        let narrow = header(&mut app, 80);
        assert!(
            narrow.contains("⇅ 1") && narrow.contains("o re-sorts"),
            "{narrow}"
        );

        app.handle_key(ch('o'));
        let after = order(&app);
        assert_eq!(after[0], last, "re-sorted: the newest update first");
        assert_eq!(after[1..], before[..before.len() - 1]);
        assert_eq!(app.out_of_order, 0);
        assert_eq!(
            app.selected.as_ref(),
            Some(&selected),
            "the selection stays"
        );
        // The task re-sorted to the top is on screen with the selection.
        assert_eq!(app.offset, 0, "the task that moved is shown");
        assert_eq!(
            last_status(&app),
            (
                Tone::Info,
                "re-sorted by last update: 1 row(s) moved".into()
            )
        );
        assert!(!header(&mut app, 120).contains('⇅'));
    });
}
