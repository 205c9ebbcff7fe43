//! The TUI's update function driven by key sequences, without a terminal:
//! the state it ends in and the store calls it asks for.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use rudder_model::task::{Actor, Status, TaskMap};
use rudder_store::{NewTask, Store};
use rudder_testkit::tui::*;
use rudder_tui::app::{App, Popup, SortKey, Tone, WatchState};
use rudder_tui::form::FieldKind;
use rudder_tui::update::{Effect, EffectResult, execute};
use serde_json::json;

fn selected(app: &App) -> Option<&str> {
    app.selected.as_deref()
}

fn form(app: &App) -> &rudder_tui::form::Form {
    match &app.popup {
        Popup::Form(f) => f,
        other => panic!("expected the form, got {other:?}"),
    }
}

/// A real store in a temp dir with one waiting task; the app shows it.
fn store_with_waiting() -> (Arc<Fixture>, Arc<Store>, String, App) {
    let fx = Fixture::new(TaskMap::new());
    let store = fx.store();
    let created = store
        .create(NewTask {
            input_schema: Some(schema()),
            title: Some("INC-1 checkout".into()),
            ..NewTask::default()
        })
        .expect("create");
    let app = fx.app_now(Utc::now());
    (fx, store, created.task.task_id, app)
}

/// What the feed says after another writer changed the store.
fn reload(app: &mut App, fx: &Fixture) {
    app.on_feed(fx.reread());
}

/// Run every effect against the store and feed the answers back.
fn run(app: &mut App, store: &Store, effects: Vec<Effect>) {
    for e in effects {
        if let Some(r) = execute(store, e) {
            app.apply_result(r);
        }
    }
}

#[test]
fn the_form_is_built_from_the_schema() {
    each_store(|| {
        let mut app = app_with(fixture());
        assert_eq!(
            selected(&app),
            Some(id(1).as_str()),
            "waiting tasks come first"
        );
        assert!(app.handle_key(key(KeyCode::Enter)).is_empty());
        let f = form(&app);
        let names: Vec<_> = f.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["service", "window_minutes", "env", "deep", "tags"]);
        assert!(f.fields[0].required && !f.fields[1].required);
        assert_eq!(f.fields[0].hint.as_deref(), Some("the service to diagnose"));
        assert_eq!(f.fields[1].input.value(), "30", "the default is filled in");
        assert!(matches!(
            f.fields[2].kind,
            FieldKind::Choice { chosen: None, .. }
        ));
        assert_eq!(f.fields[3].kind, FieldKind::Toggle(None));
        assert_eq!(
            f.fields[4].kind,
            FieldKind::List(rudder_model::schema::Scalar::Text)
        );
        assert_eq!(f.revision, 2);
    });
}

#[test]
fn enter_on_a_task_that_is_not_waiting_opens_the_view_and_i_says_why() {
    each_store(|| {
        let mut app = app_with(fixture());
        app.handle_key(ch('j'));
        assert_eq!(selected(&app), Some(id(6).as_str()));
        // Enter on a task that waits for nothing opens it to read, not a form.
        app.handle_key(key(KeyCode::Enter));
        assert!(matches!(&app.popup, Popup::View(v) if v.task_id == id(6)));
        app.handle_key(key(KeyCode::Esc));
        assert!(matches!(app.popup, Popup::None));
        app.handle_key(ch('i'));
        assert!(matches!(app.popup, Popup::None));
        let status = app.status.as_ref().expect("a status line");
        assert!(
            status.text.contains("only a task waiting for input"),
            "{}",
            status.text
        );
    });
}

#[test]
fn form_navigation_typing_and_submit_from_the_last_field() {
    each_store(|| {
        let (_fx, store, task_id, mut app) = store_with_waiting();
        app.handle_key(ch('i'));
        type_text(&mut app, "checkout");
        app.handle_key(key(KeyCode::Tab));
        app.handle_key(ctrl('u'));
        type_text(&mut app, "45");
        app.handle_key(key(KeyCode::Tab));
        app.handle_key(key(KeyCode::Right)); // env: prod
        app.handle_key(key(KeyCode::Right)); // env: staging
        app.handle_key(key(KeyCode::Tab));
        app.handle_key(ch(' ')); // deep: yes
        app.handle_key(key(KeyCode::BackTab));
        assert_eq!(form(&app).focus, 2, "Shift-Tab goes back");
        app.handle_key(key(KeyCode::Tab));
        // Enter on a field that is not the last moves on.
        assert!(app.handle_key(key(KeyCode::Enter)).is_empty());
        assert_eq!(form(&app).focus, 4);
        type_text(&mut app, "[\"p1\"]");
        let effects = app.handle_key(key(KeyCode::Enter));
        let expected = json!({"service": "checkout", "window_minutes": 45, "env": "staging", "deep": true, "tags": ["p1"]});
        assert_eq!(
            effects,
            [Effect::ProvideInput {
                task_id: task_id.clone(),
                value: expected.clone(),
                revision: 1
            }]
        );
        run(&mut app, &store, effects);
        assert!(
            matches!(app.popup, Popup::None),
            "the form closes on success"
        );
        let status = app.status.clone().expect("status");
        assert_eq!(status.tone, Tone::Success);
        assert!(status.text.contains("now working"), "{}", status.text);
        let t = store.get(&task_id).expect("get");
        assert_eq!(t.status, Status::Working);
        assert_eq!(t.input_value, Some(expected));
    });
}

#[test]
fn ctrl_s_submits_from_any_field_and_esc_closes() {
    each_store(|| {
        let (_fx, store, task_id, mut app) = store_with_waiting();
        app.handle_key(ch('i'));
        type_text(&mut app, "db");
        let effects = app.handle_key(ctrl('s'));
        assert_eq!(effects.len(), 1);
        run(&mut app, &store, effects);
        assert_eq!(store.get(&task_id).expect("get").status, Status::Working);

        let (_fx2, store2, task2, mut app2) = store_with_waiting();
        app2.handle_key(ch('i'));
        type_text(&mut app2, "db");
        assert!(app2.handle_key(key(KeyCode::Esc)).is_empty());
        assert!(matches!(app2.popup, Popup::None));
        assert_eq!(
            store2.get(&task2).expect("get").status,
            Status::InputRequired
        );
    });
}

#[test]
fn validation_errors_are_shown_at_their_fields_and_nothing_is_sent() {
    each_store(|| {
        let mut app = app_with(fixture());
        app.handle_key(ch('i'));
        app.handle_key(key(KeyCode::Tab));
        type_text(&mut app, "x"); // window_minutes: "30x"
        app.handle_key(key(KeyCode::Tab));
        app.handle_key(key(KeyCode::Tab));
        app.handle_key(key(KeyCode::Tab));
        type_text(&mut app, "[1]"); // tags: items must be strings
        let effects = app.handle_key(ctrl('s'));
        assert!(effects.is_empty(), "an invalid form sends nothing");
        let f = form(&app);
        let err = |i: usize| f.fields[i].error.clone().unwrap_or_default();
        assert!(err(0).contains("required"), "service: {}", err(0));
        assert!(err(1).contains("expected an integer"), "window: {}", err(1));
        assert!(err(4).contains("/0"), "tags: {}", err(4));
        assert!(f.fields[2].error.is_none() && f.fields[3].error.is_none());
        assert_eq!(f.focus, 0, "the focus goes to the first problem");
        // Fixing the field clears its error on the next submit.
        type_text(&mut app, "a");
        let effects = app.handle_key(ctrl('s'));
        assert!(effects.is_empty());
        let f = form(&app);
        assert!(
            f.fields[0]
                .error
                .as_deref()
                .unwrap_or_default()
                .contains("shorter"),
            "{:?}",
            f.fields[0].error
        );
    });
}

#[test]
fn a_task_that_moved_on_is_reported_and_what_was_typed_is_kept() {
    each_store(|| {
        let (_fx, store, task_id, mut app) = store_with_waiting();
        app.handle_key(ch('i'));
        type_text(&mut app, "checkout");
        // Someone else answers first.
        store
            .provide_input(&task_id, json!({"service": "payments"}), None)
            .expect("the other answer");
        let effects = app.handle_key(ctrl('s'));
        run(&mut app, &store, effects);
        let f = form(&app);
        assert_eq!(
            f.fields[0].input.value(),
            "checkout",
            "the typed value is kept"
        );
        let moved = f.moved_on.clone().expect("the form says the task moved on");
        assert!(moved.contains("working"), "{moved}");
        assert_eq!(app.status.as_ref().map(|s| s.tone), Some(Tone::Error));
        let t = store.get(&task_id).expect("get");
        assert_eq!(
            t.input_value,
            Some(json!({"service": "payments"})),
            "nothing overwritten"
        );
    });
}

#[test]
fn a_cancel_seen_by_the_feed_while_the_form_is_open_is_announced() {
    each_store(|| {
        let (fx, store, task_id, mut app) = store_with_waiting();
        app.handle_key(ch('i'));
        store.cancel(&task_id, None).expect("cancel");
        reload(&mut app, &fx);
        let moved = form(&app).moved_on.clone().expect("announced");
        assert!(moved.contains("cancelled"), "{moved}");
        type_text(&mut app, "db");
        let effects = app.handle_key(ctrl('s'));
        assert_eq!(effects.len(), 1);
        // Still refused by the store (revision), and said so.
        run(&mut app, &store, effects);
        assert_eq!(store.get(&task_id).expect("get").status, Status::Cancelled);
        let status = app.status.clone().expect("status");
        assert_eq!(status.tone, Tone::Error);
        assert!(status.text.contains("input not sent"), "{}", status.text);
        assert_eq!(form(&app).fields[0].input.value(), "db");
    });
}

#[test]
fn a_schema_without_properties_falls_back_to_one_json_field() {
    each_store(|| {
        let fx = Fixture::new(TaskMap::new());
        let store = fx.store();
        let schema = json!({"oneOf": [
            {"type": "object", "required": ["service"], "properties": {"service": {"type": "string"}}},
            {"type": "object", "required": ["incident"], "properties": {"incident": {"type": "integer"}}}
        ]});
        let t = store
            .create(NewTask {
                input_schema: Some(schema),
                ..NewTask::default()
            })
            .expect("create");
        let mut app = fx.app_now(Utc::now());
        app.handle_key(ch('i'));
        assert_eq!(form(&app).fields.len(), 1);
        assert_eq!(form(&app).fields[0].kind, FieldKind::Json);
        app.handle_key(ctrl('u'));
        type_text(&mut app, "{\"incident\": \"x\"}");
        assert!(app.handle_key(ctrl('s')).is_empty());
        assert!(form(&app).fields[0].error.is_some());
        app.handle_key(ctrl('u'));
        type_text(&mut app, "{\"incident\": 42}");
        let effects = app.handle_key(key(KeyCode::Enter));
        run(&mut app, &store, effects);
        let t = store.get(&t.task.task_id).expect("get");
        assert_eq!(t.input_value, Some(json!({"incident": 42})));
    });
}

/// `r` in the cancel's y/n opens a line for the reason; y and n typed
/// there are text; Enter cancels with it, and the history records it with
/// who cancelled (the TUI's author) through the TUI.
#[test]
fn a_cancel_records_the_reason_typed_and_who_gave_it() {
    each_store(|| {
        let (fx, store, task_id, mut app) = store_with_waiting();
        let ana =
            rudder_model::task::Author::new("ana", rudder_model::task::Face::Tui).expect("a name");
        let store = store.by(ana);
        app.handle_key(ch('c'));
        assert!(app.handle_key(ch('r')).is_empty());
        for c in "dup of INC-7, yes".chars() {
            assert!(app.handle_key(ch(c)).is_empty(), "{c} is text");
        }
        let effects = app.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert_eq!(
            effects,
            [Effect::Cancel {
                task_id: task_id.clone(),
                reason: Some("dup of INC-7, yes".into()),
            }]
        );
        run(&mut app, &store, effects);
        let t = store.get(&task_id).expect("get");
        assert_eq!(t.status, Status::Cancelled);
        let last = t.history.last().expect("history");
        assert_eq!(last.reason.as_deref(), Some("dup of INC-7, yes"));
        assert_eq!(last.actor.as_deref(), Some("ana"));
        assert_eq!(last.face, Some(rudder_model::task::Face::Tui));
        reload(&mut app, &fx);
        assert_eq!(
            app.log.front().map(|e| e.by.as_str()),
            Some("ana: dup of INC-7, yes")
        );
        // Esc on the line drops the reason, not the dialog.
        let (_fx, _store, _id, mut app) = store_with_waiting();
        app.handle_key(ch('c'));
        app.handle_key(ch('r'));
        app.handle_key(ch('x'));
        app.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        assert!(matches!(
            app.popup,
            Popup::ConfirmCancel { reason: None, .. }
        ));
    });
}

#[test]
fn cancel_asks_first_and_a_repeat_says_unchanged() {
    each_store(|| {
        let (_fx, store, task_id, mut app) = store_with_waiting();
        app.handle_key(ch('c'));
        match &app.popup {
            Popup::ConfirmCancel {
                task_id: t, label, ..
            } => {
                assert_eq!(t, &task_id);
                assert!(label.contains("INC-1 checkout"), "{label}");
            }
            other => panic!("expected a confirmation, got {other:?}"),
        }
        assert!(app.handle_key(ch('n')).is_empty());
        assert!(matches!(app.popup, Popup::None));
        assert_eq!(
            store.get(&task_id).expect("get").status,
            Status::InputRequired
        );

        app.handle_key(ch('c'));
        let effects = app.handle_key(ch('y'));
        assert_eq!(
            effects,
            [Effect::Cancel {
                task_id: task_id.clone(),
                reason: None,
            }]
        );
        run(&mut app, &store, effects);
        assert_eq!(store.get(&task_id).expect("get").status, Status::Cancelled);
        assert_eq!(app.status.as_ref().map(|s| s.tone), Some(Tone::Success));

        app.handle_key(ch('c'));
        let effects = app.handle_key(ch('y'));
        run(&mut app, &store, effects);
        let status = app.status.clone().expect("status");
        assert!(status.text.starts_with("unchanged"), "{}", status.text);
    });
}

#[test]
fn reclaim_asks_the_age_previews_and_reports() {
    each_store(|| {
        let fx = Fixture::new(TaskMap::new());
        let path = fx.path().to_path_buf();
        let old = Store::connect(&path)
            .expect("a store URL")
            .with_clock(Arc::new(|| Utc::now() - TimeDelta::hours(1)));
        let stale = old
            .create(NewTask {
                title: Some("stale".into()),
                ..NewTask::default()
            })
            .expect("create");
        let store = Store::connect(&path).expect("a store URL");
        let fresh = store.create(NewTask::default()).expect("create");
        let mut app = fx.app_now(Utc::now());

        app.handle_key(ch('R'));
        match &app.popup {
            Popup::ReclaimAge { input, .. } => assert_eq!(input.value(), "15m"),
            other => panic!("expected the age prompt, got {other:?}"),
        }
        app.handle_key(ctrl('u'));
        type_text(&mut app, "soon");
        assert!(app.handle_key(key(KeyCode::Enter)).is_empty());
        assert!(matches!(
            &app.popup,
            Popup::ReclaimAge { error: Some(_), .. }
        ));
        app.handle_key(ctrl('u'));
        type_text(&mut app, "30m");
        let effects = app.handle_key(key(KeyCode::Enter));
        assert_eq!(
            effects,
            [Effect::ReclaimPreview {
                older_than: Duration::from_secs(1800)
            }]
        );
        run(&mut app, &store, effects);
        match &app.popup {
            Popup::ReclaimPreview { report, .. } => {
                let ids: Vec<_> = report
                    .reclaimed
                    .iter()
                    .map(|r| r.task_id.as_str())
                    .collect();
                assert_eq!(ids, [stale.task.task_id.as_str()]);
                assert!(report.reclaimed[0].idle_ms >= 3_500_000);
            }
            other => panic!("expected the preview, got {other:?}"),
        }
        assert_eq!(
            store.get(&stale.task.task_id).expect("get").status,
            Status::Working,
            "a preview writes nothing"
        );
        let effects = app.handle_key(ch('y'));
        run(&mut app, &store, effects);
        assert!(matches!(app.popup, Popup::ReclaimDone { .. }));
        assert_eq!(
            store.get(&stale.task.task_id).expect("get").status,
            Status::Failed
        );
        assert_eq!(
            store.get(&fresh.task.task_id).expect("get").status,
            Status::Working
        );
        app.handle_key(ch('x'));
        assert!(matches!(app.popup, Popup::None));
    });
}

#[test]
fn reclaim_fails_only_the_previewed_tasks_still_at_the_revision_shown() {
    each_store(|| {
        let fx = Fixture::new(TaskMap::new());
        let path = fx.path().to_path_buf();
        let past = Store::connect(&path)
            .expect("a store URL")
            .with_clock(Arc::new(|| Utc::now() - TimeDelta::hours(1)));
        let store = Store::connect(&path).expect("a store URL");
        let create = |s: &Store, title: &str| {
            s.create(NewTask {
                title: Some(title.into()),
                ..NewTask::default()
            })
            .expect("create")
            .task
        };
        let a = create(&past, "A: idle, then changes");
        let c = create(&past, "C: idle, unchanged");
        let b = create(&store, "B: goes idle after the preview");
        let mut app = fx.app_now(Utc::now());

        app.handle_key(ch('R'));
        app.handle_key(ctrl('u'));
        type_text(&mut app, "30m");
        let effects = app.handle_key(key(KeyCode::Enter));
        run(&mut app, &store, effects);
        match &app.popup {
            Popup::ReclaimPreview { report, tasks, .. } => {
                let ids: Vec<_> = report.reclaimed.iter().map(|r| &r.task_id).collect();
                assert_eq!(ids, [&a.task_id, &c.task_id], "B is not idle yet");
                assert_eq!(
                    tasks,
                    &[
                        (a.task_id.clone(), a.revision),
                        (c.task_id.clone(), c.revision)
                    ]
                );
            }
            other => panic!("expected the preview, got {other:?}"),
        }

        // After the preview: A changes (but is still idle by its clock) and,
        // an hour later, B is idle too.
        let beat = past
            .heartbeat(&a.task_id, Some("still here".into()), None, Actor::Anyone)
            .expect("heartbeat");
        assert!(beat.task.revision > a.revision);
        let later = Store::connect(&path)
            .expect("a store URL")
            .with_clock(Arc::new(|| Utc::now() + TimeDelta::hours(1)));

        let effects = app.handle_key(ch('y'));
        assert_eq!(
            effects,
            [Effect::Reclaim {
                tasks: vec![
                    (a.task_id.clone(), a.revision),
                    (c.task_id.clone(), c.revision)
                ],
                older_than: Duration::from_secs(1800),
                reason: None,
            }],
            "the confirmation carries exactly what was previewed"
        );
        run(&mut app, &later, effects);

        let status = |id: &str| store.get(id).expect("get").status;
        assert_eq!(
            status(&c.task_id),
            Status::Failed,
            "previewed and unchanged"
        );
        assert_eq!(
            status(&a.task_id),
            Status::Working,
            "changed since the preview"
        );
        assert_eq!(status(&b.task_id), Status::Working, "never previewed");
        match &app.popup {
            Popup::ReclaimDone { report } => {
                let ids: Vec<_> = report.reclaimed.iter().map(|r| &r.task_id).collect();
                assert_eq!(ids, [&c.task_id]);
                let skipped: Vec<_> = report.skipped.iter().map(|s| &s.task_id).collect();
                assert_eq!(skipped, [&a.task_id], "only previewed tasks are reported");
                assert!(
                    report.skipped[0]
                        .reason
                        .contains("changed since the preview"),
                    "{}",
                    report.skipped[0].reason
                );
            }
            other => panic!("expected the report, got {other:?}"),
        }
        let line = app.status.clone().expect("a status line");
        assert_eq!(line.tone, Tone::Warning);
        assert!(line.text.contains("reclaimed 1 task(s)"), "{}", line.text);
        assert!(
            line.text.contains("1 previewed task(s) left alone"),
            "{}",
            line.text
        );
    });
}

#[test]
fn a_panicking_store_call_is_reported_and_its_dialog_put_right() {
    each_store(|| {
        let (_fx, _store, task_id, mut app) = store_with_waiting();
        app.handle_key(ch('i'));
        type_text(&mut app, "checkout");
        let effects = app.handle_key(ctrl('s'));
        assert_eq!(effects.len(), 1);
        assert!(form(&app).submitting);
        app.apply_result(EffectResult::Panicked {
            effect: effects[0].clone(),
            message: "boom\u{1b}[2J".into(),
        });
        let f = form(&app);
        assert_eq!(f.task_id, task_id);
        assert!(!f.submitting, "the form can be sent again");
        assert_eq!(
            f.fields[0].input.value(),
            "checkout",
            "what was typed is kept"
        );
        assert!(
            f.errors.iter().any(|e| e.contains("boom")),
            "{:?}",
            f.errors
        );
        let line = app.status.clone().expect("a status line");
        assert_eq!(line.tone, Tone::Error);
        assert!(line.text.contains("internal error"), "{}", line.text);
        assert!(!line.text.contains('\u{1b}'), "{}", line.text);

        app.handle_key(key(KeyCode::Esc));
        app.handle_key(ch('R'));
        let effects = app.handle_key(key(KeyCode::Enter));
        assert!(matches!(app.popup, Popup::ReclaimLoading { .. }));
        app.apply_result(EffectResult::Panicked {
            effect: effects[0].clone(),
            message: "boom".into(),
        });
        assert!(
            matches!(app.popup, Popup::None),
            "no dialog waits forever for an answer that will not come"
        );
    });
}

/// `q` and Ctrl-C quit whatever the store is busy with: after a cancel was
/// sent (its answer still to come) and while the reclaim preview loads.
#[test]
fn q_and_ctrl_c_quit_while_an_answer_from_the_store_is_pending() {
    each_store(|| {
        for quit in [ch('q'), ctrl('c')] {
            let mut app = app_with(fixture());
            app.handle_key(ch('c'));
            assert_eq!(app.handle_key(ch('y')).len(), 1, "the cancel is sent");
            assert!(app.handle_key(quit).is_empty());
            assert!(app.quit, "{quit:?} after a cancel was sent");

            let mut app = app_with(fixture());
            app.handle_key(ch('R'));
            app.handle_key(key(KeyCode::Enter));
            assert!(matches!(app.popup, Popup::ReclaimLoading { .. }));
            assert!(app.handle_key(quit).is_empty());
            assert!(app.quit, "{quit:?} while the reclaim preview loads");
        }
    });
}

#[test]
fn read_only_refuses_every_write_with_a_message() {
    each_store(|| {
        let mut app = Fixture::new(fixture()).app_at(Path::new("/srv/tasks.json"), true);
        for k in ['i', 'c', 'R'] {
            app.status = None;
            assert!(app.handle_key(ch(k)).is_empty());
            assert!(matches!(app.popup, Popup::None), "{k} opened a dialog");
            let s = app.status.clone().expect("a message");
            assert!(s.text.contains("read-only"), "{k}: {}", s.text);
        }
    });
}

#[test]
fn text_and_status_filters_and_esc_clears_them() {
    each_store(|| {
        let mut app = app_with(fixture());
        assert_eq!(app.rows.len(), 6);
        app.handle_key(ch('/'));
        type_text(&mut app, "INC-10");
        assert_eq!(app.rows.len(), 3, "filters while typing");
        app.handle_key(key(KeyCode::Enter));
        assert!(app.filter.editing.is_none());
        assert_eq!(app.filter.text, "inc-10");
        assert_eq!(app.rows.len(), 3, "Enter keeps the filter");
        app.handle_key(ch('2')); // working
        assert_eq!(app.rows.len(), 1);
        assert_eq!(selected(&app), Some(id(2).as_str()));
        app.handle_key(ch('3')); // + completed
        assert_eq!(app.rows.len(), 2);
        app.handle_key(key(KeyCode::Esc));
        assert_eq!(app.rows.len(), 6);
        // Esc while typing clears the text filter.
        app.handle_key(ch('/'));
        type_text(&mut app, "zzz");
        assert_eq!(app.rows.len(), 0);
        assert_eq!(selected(&app), None);
        app.handle_key(key(KeyCode::Esc));
        assert_eq!(app.rows.len(), 6);
        assert!(app.filter.text.is_empty());
    });
}

/// `/kind:K` keeps the tasks of that kind (the store's kind filter, not a
/// text match), the rest of the filter matching as text.
#[test]
fn a_kind_word_in_the_text_filter_keeps_that_kind() {
    each_store(|| {
        let mut app = app_with(fixture());
        app.handle_key(ch('/'));
        type_text(&mut app, "kind:diagnose");
        app.handle_key(key(KeyCode::Enter));
        assert_eq!(app.rows.len(), 2, "tasks 1 and 2 are of kind diagnose");
        app.handle_key(key(KeyCode::Esc));
        app.handle_key(ch('/'));
        type_text(&mut app, "kind:diagnose,cache-flush-nightly 10");
        app.handle_key(key(KeyCode::Enter));
        assert_eq!(app.rows.len(), 3, "INC-1042, INC-1043 and INC-1001");
        app.handle_key(key(KeyCode::Esc));
        app.handle_key(ch('/'));
        type_text(&mut app, "kind:dia");
        assert_eq!(app.rows.len(), 0, "a kind is matched whole");
        app.handle_key(key(KeyCode::Esc));
        assert_eq!(app.rows.len(), 6);
    });
}

#[test]
fn selection_follows_the_task_id_when_rows_move() {
    each_store(|| {
        let fx = Fixture::new(fixture());
        let mut app = fx.app();
        app.handle_key(ch('j'));
        app.handle_key(ch('j'));
        assert_eq!(selected(&app), Some(id(2).as_str()));
        let row = app.cursor;
        // Another task starts waiting: it jumps to the top, rows shift down.
        let mut tasks = fixture();
        let t = tasks.get_mut(&id(3)).expect("fixture");
        t.status = Status::InputRequired;
        app.on_feed(fx.set(tasks.clone()));
        assert_eq!(selected(&app), Some(id(2).as_str()));
        assert_eq!(app.cursor, row + 1);
        // The selected task vanishes: the cursor stays on the same row.
        tasks.shift_remove(&id(2));
        app.on_feed(fx.set(tasks));
        assert!(selected(&app).is_some());
        assert_eq!(app.cursor, row + 1);
    });
}

#[test]
fn movement_keys() {
    each_store(|| {
        let mut app = app_with(fixture());
        app.handle_key(ch('G'));
        assert_eq!(app.cursor, 5);
        app.handle_key(ch('g'));
        assert_eq!(app.cursor, 0);
        app.handle_key(key(KeyCode::PageDown));
        assert_eq!(app.cursor, 5, "clamped to the last row");
        app.handle_key(key(KeyCode::Up));
        assert_eq!(app.cursor, 4);
        app.handle_key(key(KeyCode::PageUp));
        assert_eq!(app.cursor, 0);
    });
}

#[test]
fn sort_cycles_and_waiting_tasks_stay_first() {
    each_store(|| {
        let mut app = app_with(fixture());
        // The default holds still: creation order never changes on a heartbeat.
        assert_eq!(app.sort, SortKey::Created);
        app.handle_key(ch('s'));
        assert_eq!(app.sort, SortKey::Title);
        assert_eq!(
            app.row_task(0).map(|t| t.status),
            Some(Status::InputRequired)
        );
        let titles: Vec<_> = (1..3)
            .filter_map(|r| app.row_task(r))
            .map(|t| t.task_id.clone())
            .collect();
        assert_eq!(titles, [id(2), id(6)], "working tasks by title");
        app.handle_key(ch('s'));
        assert_eq!(app.sort, SortKey::Id);
        app.handle_key(ch('s'));
        assert_eq!(app.sort, SortKey::Updated);
        app.handle_key(ch('s'));
        assert_eq!(app.sort, SortKey::Created);
    });
}

#[test]
fn pause_holds_changes_back_and_resume_applies_them() {
    each_store(|| {
        let fx = Fixture::new(fixture());
        let mut app = fx.app();
        app.handle_key(ch('p'));
        assert!(app.paused);
        app.on_feed(fx.set(task_2_completed()));
        assert_eq!(app.pending_changes, 1);
        assert_eq!(app.tasks[&id(2)].status, Status::Working, "held back");
        app.handle_key(ch('p'));
        assert!(!app.paused);
        assert_eq!(app.tasks[&id(2)].status, Status::Completed);
        assert_eq!(app.log.len(), 1);
        assert!(app.flashing(&id(2)));
        app.tick(now() + TimeDelta::seconds(5));
        assert!(!app.flashing(&id(2)), "flashes are brief");
    });
}

#[test]
fn changed_rows_flash_for_two_seconds() {
    each_store(|| {
        // docs/tui.md: "changed rows flash for two seconds".
        let fx = Fixture::new(fixture());
        let mut app = fx.app();
        assert!(app.flashes.is_empty(), "the first read is not news");
        app.on_feed(fx.set(task_2_completed()));
        assert!(app.flashing(&id(2)));
        assert!(!app.flashing(&id(1)), "only changed rows flash");
        app.tick(now() + TimeDelta::milliseconds(1999));
        assert!(
            app.flashing(&id(2)),
            "still flashing just before two seconds"
        );
        app.tick(now() + TimeDelta::seconds(2));
        assert!(!app.flashing(&id(2)), "over after two seconds");
        assert!(app.flashes.is_empty(), "expired flashes are dropped");
    });
}

#[test]
fn a_missing_or_unreadable_file_while_paused_loses_no_transition() {
    each_store(|| {
        for missing in [false, true] {
            let fx = Fixture::new(fixture());
            let mut app = fx.app();
            app.handle_key(ch('p'));
            app.on_feed(fx.set(task_2_completed()));
            app.on_feed(if missing {
                fx.remove()
            } else {
                unreadable("truncated")
            });
            assert_eq!(app.watch, WatchState::Live, "held back");
            app.handle_key(ch('p'));
            assert_eq!(
                app.log.len(),
                1,
                "missing {missing}: the transition is logged"
            );
            assert_eq!(app.log[0].task_id, id(2));
            assert_eq!(app.log[0].to, Some(Status::Completed));
            match missing {
                true => {
                    assert_eq!(app.watch, WatchState::Missing);
                    assert!(app.rows.is_empty(), "then the file is gone");
                }
                _ => {
                    assert_eq!(app.watch, WatchState::Unreadable("truncated".into()));
                    assert_eq!(
                        app.tasks[&id(2)].status,
                        Status::Completed,
                        "the last good snapshot is shown"
                    );
                }
            }
        }
        // A change after the bad state is the latest word: live again.
        let fx = Fixture::new(fixture());
        let mut app = fx.app();
        app.handle_key(ch('p'));
        app.on_feed(fx.remove());
        app.on_feed(fx.set(fixture()));
        app.handle_key(ch('p'));
        assert_eq!(app.watch, WatchState::Live);
        assert_eq!(app.rows.len(), 6);
    });
}

#[test]
fn missing_and_unreadable_stores() {
    each_store(|| {
        let fx = Fixture::new(fixture());
        let mut app = fx.app();
        app.on_feed(unreadable("bad \u{1b}[31mjson"));
        assert_eq!(app.watch, WatchState::Unreadable("bad json".into()));
        assert_eq!(app.tasks.len(), 6, "the last good tasks stay");
        app.on_feed(fx.remove());
        assert_eq!(app.watch, WatchState::Missing);
        assert!(app.rows.is_empty());
        app.on_feed(fx.set(fixture()));
        assert_eq!(app.watch, WatchState::Live);
        assert_eq!(app.rows.len(), 6);
    });
}

#[test]
fn copy_quit_help_and_demo_keys() {
    each_store(|| {
        let mut app = app_with(fixture());
        assert_eq!(app.handle_key(ch('y')), [Effect::Copy(id(1))]);
        assert!(app.handle_key(ch('K')).is_empty(), "no worker, no kill");
        app.worker = Some(rudder_tui::WorkerState::Running { pid: 42 });
        assert_eq!(app.handle_key(ch('K')), [Effect::KillWorker]);
        assert_eq!(app.handle_key(ch('W')), [Effect::StartWorker]);
        app.handle_key(ch('?'));
        assert!(matches!(app.popup, Popup::Help { .. }));
        app.handle_key(ch('x'));
        assert!(
            matches!(app.popup, Popup::None),
            "any other key closes help"
        );
        assert!(!app.quit);
        app.handle_key(crossterm::event::KeyEvent::new(
            KeyCode::Char('c'),
            KeyModifiers::CONTROL,
        ));
        assert!(app.quit);
    });
}

#[test]
fn mouse_click_selects_and_scroll_moves() {
    each_store(|| {
        let mut app = app_with(fixture());
        app.table_area = ratatui::layout::Rect::new(0, 4, 100, 10);
        let click = MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column: 5,
            row: 6,
            modifiers: KeyModifiers::NONE,
        };
        app.handle_event(&crossterm::event::Event::Mouse(click));
        assert_eq!(app.cursor, 2);
        let scroll = MouseEvent {
            kind: MouseEventKind::ScrollDown,
            ..click
        };
        app.handle_event(&crossterm::event::Event::Mouse(scroll));
        assert_eq!(app.cursor, 5);
    });
}

#[test]
fn d_u_and_the_wheel_over_the_detail_pane_scroll_it() {
    each_store(|| {
        // docs/tui.md: "scroll with `d`/`u` or the wheel".
        let mut app = app_with(fixture());
        app.handle_key(ch('d'));
        app.handle_key(ch('d'));
        assert_eq!(app.detail_scroll, 6);
        app.handle_key(ch('u'));
        assert_eq!(app.detail_scroll, 3);
        app.detail_area = ratatui::layout::Rect::new(0, 20, 70, 10);
        let wheel = MouseEvent {
            kind: MouseEventKind::ScrollDown,
            column: 5,
            row: 25,
            modifiers: KeyModifiers::NONE,
        };
        app.handle_event(&crossterm::event::Event::Mouse(wheel));
        assert_eq!(app.detail_scroll, 6);
        assert_eq!(app.cursor, 0, "the wheel over the pane keeps the selection");
        let up = MouseEvent {
            kind: MouseEventKind::ScrollUp,
            ..wheel
        };
        app.handle_event(&crossterm::event::Event::Mouse(up));
        assert_eq!(app.detail_scroll, 3);
        app.handle_key(ch('j'));
        assert_eq!(app.detail_scroll, 0, "another task is shown from the top");
    });
}

#[test]
fn a_worker_that_exits_on_its_own_is_announced() {
    each_store(|| {
        use rudder_tui::WorkerState;
        let mut app = app_with(fixture());
        app.worker_polled(WorkerState::Running { pid: 7 });
        assert!(app.status.is_none());
        app.worker_polled(WorkerState::Exited {
            pid: 7,
            code: Some(1),
        });
        let s = app.status.clone().expect("announced");
        assert!(s.text.contains("pid 7 exited with code 1"), "{}", s.text);
        assert_eq!(
            app.worker,
            Some(WorkerState::Exited {
                pid: 7,
                code: Some(1)
            })
        );
        app.status = None;
        app.worker_polled(WorkerState::Exited {
            pid: 7,
            code: Some(1),
        });
        assert!(app.status.is_none(), "said once");
    });
}

#[test]
fn the_form_submits_exactly_what_it_shows() {
    each_store(|| {
        let fx = Fixture::new(TaskMap::new());
        let store = fx.store();
        let blob = json!({"k": "v\u{9b}1m\u{202E}\u{7f}"});
        let created = store
            .create(NewTask {
                input_schema: Some(json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "default": "x\u{1b}[2Jy\u{202E}z"},
                        "mode": {"enum": ["a\u{1b}[31m", "b"], "default": "a\u{1b}[31m"},
                        "blob": {"type": "object", "default": blob}
                    }
                })),
                ..NewTask::default()
            })
            .expect("create");
        let mut app = fx.app_now(Utc::now());
        app.handle_key(ch('i'));
        let f = form(&app);
        assert_eq!(
            f.fields[0].input.value(),
            "xyz",
            "the default is cleaned once, up front"
        );
        let blob_text = f.fields[2].input.value();
        assert_eq!(
            blob_text, r#"{"k":"v\u009b1m\u202e\u007f"}"#,
            "a JSON default keeps its value, written with visible escapes"
        );
        assert_eq!(rudder_model::text::sanitize(blob_text), blob_text);
        match &f.fields[1].kind {
            FieldKind::Choice {
                options, chosen, ..
            } => {
                assert_eq!(*chosen, Some(0));
                assert_eq!(
                    rudder_tui::form::option_label(&options[0]),
                    r"a\u001b[31m",
                    "a choice shows the characters it submits, inert"
                );
            }
            other => panic!("expected a choice, got {other:?}"),
        }

        // Characters that cannot be shown (a paste can send them as keys) are
        // not taken into a field.
        app.handle_key(key(KeyCode::End));
        for c in ['\u{202E}', '\u{9b}', '\u{7f}', '\u{0}'] {
            app.handle_key(ch(c));
        }
        type_text(&mut app, "!");
        assert_eq!(form(&app).fields[0].input.value(), "xyz!");

        let effects = app.handle_key(ctrl('s'));
        assert_eq!(
            effects,
            [Effect::ProvideInput {
                task_id: created.task.task_id.clone(),
                value: json!({"name": "xyz!", "mode": "a\u{1b}[31m", "blob": blob}),
                revision: created.task.revision,
            }]
        );
    });
}
