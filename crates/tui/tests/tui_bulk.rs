//! Marks and bulk actions, stalled tasks and the task view, driven through
//! the update function (real stores where the store answers).

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use rudder_model::task::{Status, TaskMap};
use rudder_store::{NewTask, Store};
use rudder_testkit::tui::*;
use rudder_tui::app::{App, Popup, Tone};
use rudder_tui::update::{Effect, execute};

fn marked(app: &App) -> Vec<String> {
    app.marks.ids().cloned().collect()
}

fn run(app: &mut App, store: &Store, effects: Vec<Effect>) {
    for e in effects {
        if let Some(r) = execute(store, e) {
            app.apply_result(r);
        }
    }
}

#[test]
fn space_marks_and_unmarks_and_marks_follow_the_task() {
    each_store(|| {
        let fx = Fixture::new(fixture());
        let mut app = fx.app();
        select(&mut app, &id(2));
        app.handle_key(ch(' '));
        select(&mut app, &id(4));
        app.handle_key(ch(' '));
        assert_eq!(marked(&app), [id(2), id(4)]);
        assert!(
            app.status
                .as_ref()
                .is_some_and(|s| s.text.contains("2 marked"))
        );
        // Re-sorting and filtering move rows, not marks.
        app.handle_key(ch('s'));
        app.handle_key(ch('s'));
        app.handle_key(ch('/'));
        type_text(&mut app, "dns");
        app.handle_key(key(KeyCode::Enter));
        assert_eq!(marked(&app), [id(2), id(4)]);
        // Space again unmarks.
        app.handle_key(ch(' '));
        assert_eq!(marked(&app), [id(2)]);
        // A task that vanishes loses its mark.
        let mut tasks = fixture();
        tasks.shift_remove(&id(2));
        app.on_feed(fx.set(tasks));
        assert!(app.marks.is_empty());
    });
}

#[test]
fn star_marks_what_the_filter_shows_and_again_unmarks_it() {
    each_store(|| {
        let mut app = app_with(fixture());
        select(&mut app, &id(5));
        app.handle_key(ch(' '));
        app.handle_key(ch('/'));
        type_text(&mut app, "INC-104");
        app.handle_key(key(KeyCode::Enter));
        app.handle_key(ch('*'));
        let mut m = marked(&app);
        m.sort();
        assert_eq!(m, [id(1), id(2), id(5)]);
        app.handle_key(ch('*'));
        assert_eq!(marked(&app), [id(5)], "the others stay as they were");
        // Nothing shown: nothing to mark, and it says so.
        app.handle_key(ch('/'));
        type_text(&mut app, "zzz");
        app.handle_key(key(KeyCode::Enter));
        app.handle_key(ch('*'));
        assert_eq!(app.status.as_ref().map(|s| s.tone), Some(Tone::Warning));
    });
}

#[test]
fn c_with_marks_asks_once_for_all_and_leaves_finished_ones_alone() {
    each_store(|| {
        let mut app = app_with(fixture());
        for n in [6, 3, 2] {
            select(&mut app, &id(n));
            app.handle_key(ch(' '));
        }
        select(&mut app, &id(1));
        app.handle_key(ch('c'));
        match &app.popup {
            Popup::ConfirmCancelMany {
                tasks, finished, ..
            } => {
                let ids: Vec<&str> = tasks.iter().map(|(i, _)| i.as_str()).collect();
                assert_eq!(
                    ids,
                    [id(6).as_str(), id(2).as_str()],
                    "the marked, not the selected"
                );
                assert_eq!(finished.len(), 1);
                assert!(finished[0].contains("00000003"), "{finished:?}");
            }
            other => panic!("expected the bulk confirmation, got {other:?}"),
        }
        // n keeps everything, marks included.
        assert!(app.handle_key(ch('n')).is_empty());
        assert_eq!(marked(&app).len(), 3);
        app.handle_key(ch('c'));
        assert!(
            app.handle_key(ch('x')).is_empty(),
            "other keys keep the dialog"
        );
        assert!(matches!(app.popup, Popup::ConfirmCancelMany { .. }));
        // r, a reason, Enter: one reason for every marked task.
        app.handle_key(ch('r'));
        for c in "maintenance window".chars() {
            app.handle_key(ch(c));
        }
        let effects = app.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert_eq!(
            effects,
            [Effect::CancelMany {
                task_ids: vec![id(6), id(2)],
                reason: Some("maintenance window".into()),
            }]
        );
        assert!(app.marks.is_empty());
    });
}

#[test]
fn c_with_only_finished_tasks_marked_is_refused_at_once() {
    each_store(|| {
        let mut app = app_with(fixture());
        for n in [3, 4] {
            select(&mut app, &id(n));
            app.handle_key(ch(' '));
        }
        assert!(app.handle_key(ch('c')).is_empty());
        assert!(matches!(app.popup, Popup::None));
        let status = app.status.clone().expect("said why");
        assert!(
            status.text.contains("all 2 marked task(s) are finished"),
            "{}",
            status.text
        );
        let mut ro =
            Fixture::new(fixture()).app_at(std::path::Path::new("/srv/rudder/tasks.json"), true);
        select(&mut ro, &id(2));
        ro.handle_key(ch(' '));
        assert!(ro.handle_key(ch('c')).is_empty());
        assert!(
            ro.status
                .as_ref()
                .is_some_and(|s| s.text.contains("read-only"))
        );
    });
}

#[test]
fn a_bulk_cancel_reports_each_task_from_the_store() {
    each_store(|| {
        let fx = Fixture::new(TaskMap::new());
        let store = fx.store();
        let new = |title: &str| {
            store
                .create(NewTask {
                    title: Some(title.into()),
                    ..NewTask::default()
                })
                .expect("create")
                .task
                .task_id
        };
        let (a, b, c) = (new("A"), new("B"), new("C"));
        let mut app = fx.app_now(Utc::now());
        for t in [&a, &b, &c] {
            select(&mut app, t);
            app.handle_key(ch(' '));
        }
        app.handle_key(ch('c'));
        let effects = app.handle_key(ch('y'));
        // Between the y and the write, B finishes and C was cancelled by
        // someone else: each answer is its own.
        store
            .complete(
                &b,
                serde_json::json!({"ok": true}),
                rudder_model::task::Actor::Anyone,
            )
            .expect("complete");
        store.cancel(&c, None).expect("cancel");
        run(&mut app, &store, effects);
        assert_eq!(store.get(&a).expect("get").status, Status::Cancelled);
        assert_eq!(store.get(&b).expect("get").status, Status::Completed);
        let Popup::BulkDone { lines, .. } = &app.popup else {
            panic!("expected the report, got {:?}", app.popup);
        };
        let find = |id: &str| {
            lines
                .iter()
                .find(|(_, l)| l.contains(&id[..8]))
                .cloned()
                .expect("a line per task")
        };
        assert_eq!(find(&a).0, Tone::Success);
        assert_eq!(find(&b).0, Tone::Error);
        assert!(find(&b).1.contains("refused"), "{:?}", find(&b));
        assert_eq!(find(&c).0, Tone::Info);
        assert!(find(&c).1.contains("unchanged"), "{:?}", find(&c));
        let status = app.status.clone().expect("a summary");
        assert_eq!(
            status.text,
            "cancel of 3 task(s): 1 cancelled, 1 unchanged, 1 refused"
        );
        app.handle_key(ch('j'));
        assert!(
            matches!(app.popup, Popup::None),
            "any key closes the report"
        );
    });
}

#[test]
fn r_with_marks_previews_and_reclaims_only_the_marked_tasks() {
    each_store(|| {
        let fx = Fixture::new(TaskMap::new());
        let path = fx.path().to_path_buf();
        let past = Store::connect(&path)
            .expect("a store URL")
            .with_clock(Arc::new(|| Utc::now() - TimeDelta::hours(1)));
        let store = Store::connect(&path).expect("a store URL");
        let new = |s: &Store, title: &str| {
            s.create(NewTask {
                title: Some(title.into()),
                ..NewTask::default()
            })
            .expect("create")
            .task
            .task_id
        };
        let idle_marked = new(&past, "idle, marked");
        let idle_unmarked = new(&past, "idle, not marked");
        let fresh_marked = new(&store, "fresh, marked");
        let mut app = fx.app_now(Utc::now());
        for t in [&idle_marked, &fresh_marked] {
            select(&mut app, t);
            app.handle_key(ch(' '));
        }
        app.handle_key(ch('R'));
        let effects = app.handle_key(key(KeyCode::Enter));
        assert_eq!(
            effects,
            [Effect::ReclaimPreview {
                older_than: Duration::from_secs(900)
            }]
        );
        run(&mut app, &store, effects);
        match &app.popup {
            Popup::ReclaimPreview { report, tasks, .. } => {
                let ids: Vec<&str> = tasks.iter().map(|(i, _)| i.as_str()).collect();
                assert_eq!(ids, [idle_marked.as_str()]);
                assert_eq!(report.reclaimed.len(), 1);
                assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
                assert_eq!(report.skipped[0].task_id, fresh_marked);
                assert!(report.skipped[0].reason.contains("not idle long enough"));
            }
            other => panic!("expected the preview, got {other:?}"),
        }
        let effects = app.handle_key(ch('y'));
        run(&mut app, &store, effects);
        assert_eq!(store.get(&idle_marked).expect("get").status, Status::Failed);
        assert_eq!(
            store.get(&idle_unmarked).expect("get").status,
            Status::Working
        );
        assert_eq!(
            store.get(&fresh_marked).expect("get").status,
            Status::Working
        );
        assert!(app.marks.is_empty());
    });
}

#[test]
fn a_working_task_whose_lease_lapsed_is_counted_stalled_until_it_changes() {
    each_store(|| {
        let mut tasks = fixture();
        let t = tasks.get_mut(&id(2)).expect("fixture");
        t.lease_expires_at = Some(now() + TimeDelta::seconds(30));
        let fx = Fixture::new(tasks.clone());
        let mut app = fx.app();
        assert_eq!(app.stalled, 0, "the lease is live");
        app.tick(now() + TimeDelta::seconds(31));
        assert_eq!(
            app.stalled, 1,
            "no renewal: stalled, before anyone reclaims it"
        );
        assert!(tasks[&id(2)].stalled(now() + TimeDelta::seconds(30)));
        // A heartbeat renews the lease.
        let mut renewed = tasks.clone();
        renewed.get_mut(&id(2)).expect("fixture").lease_expires_at =
            Some(now() + TimeDelta::seconds(90));
        app.on_feed(fx.set(renewed.clone()));
        assert_eq!(app.stalled, 0);
        // A finished task is never stalled, whatever its lease said.
        let mut done = renewed.clone();
        let d = done.get_mut(&id(2)).expect("fixture");
        d.status = Status::Failed;
        d.lease_expires_at = Some(now() - TimeDelta::hours(1));
        app.on_feed(fx.set(done));
        assert_eq!(app.stalled, 0);
    });
}

#[test]
fn the_task_view_opens_on_the_selected_task_and_list_keys_do_nothing_in_it() {
    each_store(|| {
        let mut app = app_with(fixture());
        select(&mut app, &id(2));
        app.handle_key(ch('v'));
        assert!(matches!(&app.popup, Popup::View(v) if v.task_id == id(2)));
        // c, Space and q mean other things on the list: here c and Space do
        // nothing and q goes back.
        assert!(app.handle_key(ch('c')).is_empty());
        app.handle_key(ch(' '));
        assert!(app.marks.is_empty());
        assert!(matches!(app.popup, Popup::View(_)));
        // G before any frame, then further down: no overflow, and g is the top.
        for k in ['j', 'j', 'k', 'G', 'j'] {
            app.handle_key(ch(k));
        }
        app.handle_key(key(KeyCode::PageDown));
        app.handle_key(ch('g'));
        // The wheel scrolls it too.
        let wheel = |kind| {
            crossterm::event::Event::Mouse(crossterm::event::MouseEvent {
                kind,
                column: 10,
                row: 10,
                modifiers: crossterm::event::KeyModifiers::NONE,
            })
        };
        app.handle_event(&wheel(crossterm::event::MouseEventKind::ScrollDown));
        assert!(matches!(&app.popup, Popup::View(v) if v.scroll == 3));
        app.handle_event(&wheel(crossterm::event::MouseEventKind::ScrollUp));
        assert!(matches!(&app.popup, Popup::View(v) if v.scroll == 0));
        app.handle_key(ch('n'));
        assert!(
            app.status
                .as_ref()
                .is_some_and(|s| s.text.contains("no search"))
        );
        app.handle_key(ch('q'));
        assert!(matches!(app.popup, Popup::None));
        assert!(!app.quit);
        // Enter opens a waiting task's form, any other task's view.
        select(&mut app, &id(1));
        app.handle_key(key(KeyCode::Enter));
        assert!(matches!(app.popup, Popup::Form(_)));
        app.handle_key(key(KeyCode::Esc));
        select(&mut app, &id(3));
        app.handle_key(key(KeyCode::Enter));
        assert!(matches!(&app.popup, Popup::View(v) if v.task_id == id(3)));
        app.handle_key(key(KeyCode::Esc));
        assert!(matches!(app.popup, Popup::None));
    });
}

#[test]
fn the_search_in_the_task_view_is_typed_kept_and_dropped() {
    each_store(|| {
        let mut app = app_with(fixture());
        select(&mut app, &id(3));
        app.handle_key(ch('v'));
        app.handle_key(ch('/'));
        type_text(&mut app, "ttl");
        // q while typing is text, not back.
        app.handle_key(ch('q'));
        match &app.popup {
            Popup::View(v) => assert_eq!(v.query, "ttlq"),
            other => panic!("expected the view, got {other:?}"),
        }
        app.handle_key(key(KeyCode::Backspace));
        app.handle_key(key(KeyCode::Enter));
        assert!(matches!(&app.popup, Popup::View(v) if v.query == "ttl" && v.search.is_none()));
        app.handle_key(ch('/'));
        app.handle_key(key(KeyCode::Esc));
        assert!(matches!(&app.popup, Popup::View(v) if v.query.is_empty()));
    });
}

fn drawn(app: &mut App) -> String {
    let mut terminal =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 30)).expect("test terminal");
    terminal
        .draw(|f| rudder_tui::view::draw(f, app, &rudder_tui::view::Theme::DEFAULT))
        .expect("draw");
    screen_text(&terminal)
}

#[test]
fn r_with_marks_says_it_is_about_the_marked_and_a_finished_one_is_not_called_unfinished() {
    each_store(|| {
        let fx = Fixture::new(TaskMap::new());
        let path = fx.path().to_path_buf();
        let past = Store::connect(&path)
            .expect("a store URL")
            .with_clock(Arc::new(|| Utc::now() - TimeDelta::hours(1)));
        let store = Store::connect(&path).expect("a store URL");
        let new = |title: &str| {
            past.create(NewTask {
                title: Some(title.into()),
                ..NewTask::default()
            })
            .expect("create")
            .task
            .task_id
        };
        let (a, b, c) = (new("a"), new("b"), new("c"));
        let mut app = fx.app_now(Utc::now());
        for t in [&a, &b] {
            select(&mut app, t);
            app.handle_key(ch(' '));
        }
        // One marked task finishes before R.
        store
            .complete(&b, serde_json::json!({}), rudder_model::task::Actor::Anyone)
            .expect("complete");
        app.on_feed(fx.reread());
        app.handle_key(ch('R'));
        let prompt = drawn(&mut app);
        assert!(prompt.contains("of the 2 marked task(s)"), "{prompt}");
        assert!(!prompt.contains("Fail every"), "{prompt}");
        let effects = app.handle_key(key(KeyCode::Enter));
        run(&mut app, &store, effects);
        let preview = drawn(&mut app);
        assert!(preview.contains("1 task(s) left alone:"), "{preview}");
        assert!(
            !preview.contains("unfinished task(s) left alone"),
            "{preview}"
        );
        assert_eq!(store.get(&c).expect("get").status, Status::Working);
    });
}

#[test]
fn at_80_columns_the_header_keeps_the_filter_and_the_watch_state_in_sight() {
    each_store(|| {
        let mut tasks = fixture();
        tasks.get_mut(&id(2)).expect("fixture").lease_expires_at =
            Some(now() - TimeDelta::seconds(30));
        tasks.get_mut(&id(6)).expect("fixture").lease_expires_at =
            Some(now() - TimeDelta::seconds(30));
        let deep = "/home/oncall/incidents/2026/december/rudder-demo-store.json";
        let mut app = Fixture::new(tasks).app_at(std::path::Path::new(deep), false);
        app.worker = Some(rudder_tui::WorkerState::Running { pid: 4242 });
        assert_eq!(app.stalled, 2);
        for _ in 0..3 {
            app.handle_key(ch(' '));
            app.handle_key(ch('j'));
        }
        app.handle_key(ch('/'));
        type_text(&mut app, "INC");
        app.handle_key(key(KeyCode::Enter));
        let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24))
            .expect("test terminal");
        terminal
            .draw(|f| rudder_tui::view::draw(f, &mut app, &rudder_tui::view::Theme::DEFAULT))
            .expect("draw");
        let screen = screen_text(&terminal);
        let mut lines = screen.lines();
        let (first, second) = (lines.next().expect("line 1"), lines.next().expect("line 2"));
        // The long store name, the worker's key hint and the sort gave way,
        // not the filter.
        assert!(first.contains("worker: pid 4242 running"), "{first}");
        assert!(first.contains("filter: /inc ("), "{first}");
        assert!(first.contains("of 6)"), "{first}");
        // With stalled tasks and marks, the watch state still shows.
        // (With the demo's worker running, they wait for a free slot.)
        assert!(second.contains("◷ 2 queued"), "{second}");
        assert!(second.contains("marked"), "{second}");
        assert!(second.contains("● live"), "{second}");
        // Without a filter the sort is back.
        app.handle_key(key(KeyCode::Esc));
        terminal
            .draw(|f| rudder_tui::view::draw(f, &mut app, &rudder_tui::view::Theme::DEFAULT))
            .expect("draw");
        let screen = screen_text(&terminal);
        let first = screen.lines().next().expect("line 1");
        assert!(first.contains("sort: created"), "{first}");
        assert!(!first.contains("filter"), "{first}");
    });
}
