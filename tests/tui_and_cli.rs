//! The TUI beside the binary: what the TUI's table shows and what
//! `rudder list` prints agree, `rudder watch --help` says where the TUI's
//! config file is, and the demo's worker asks its question first (as the
//! table's message column shows it). These run the built binary or the
//! demo (the binary's library), so they are end-to-end tests and stay at
//! the root; the TUI's own tests are in crates/tui/tests.

use rudder::task::{Status, TaskMap};
use rudder::tui::app::App;
use rudder_testkit::tui::*;

#[test]
fn a_message_is_never_stale_in_the_store_the_table_or_list() {
    each_store(|| {
        use rudder::store::{NewTask, Store};
        use rudder::task::Actor;
        let fx = Fixture::new(TaskMap::new());
        let path = fx.path().to_path_buf();
        let store = Store::connect(&path).expect("a store URL");
        let question = "which service should the diagnosis follow?";
        let waiting = store
            .create(NewTask {
                input_schema: Some(serde_json::json!({"type": "object", "required": ["service"]})),
                status_message: Some(question.into()),
                ..NewTask::default()
            })
            .expect("create")
            .task;
        let answered = store
            .provide_input(
                &waiting.task_id,
                serde_json::json!({"service": "payments"}),
                None,
            )
            .expect("input")
            .task;
        assert_eq!(answered.status, Status::Working);
        assert_eq!(
            answered.status_message, None,
            "the question no longer stands"
        );
        let note = answered.history.last().and_then(|h| h.note.clone());
        assert_eq!(
            note.as_deref(),
            Some(format!("input provided (asked: {question})").as_str()),
            "it stays in the history"
        );
        let failing = store
            .create(NewTask {
                status_message: Some("step 2/4: following call traces".into()),
                ..NewTask::default()
            })
            .expect("create")
            .task;
        let failed = store
            .fail(
                &failing.task_id,
                "no call traces for notifications",
                Actor::Anyone,
            )
            .expect("fail")
            .task;
        assert_eq!(
            failed.current_message(),
            Some("no call traces for notifications")
        );
        // The TUI's table and the CLI's list show the same.
        let app = fx.app_now(now());
        let row = (0..app.rows.len())
            .find(|&r| app.row_task(r).map(|t| t.task_id.clone()) == Some(failed.task_id.clone()))
            .expect("the failed row");
        assert_eq!(
            app.row_task(row).and_then(|t| t.current_message()),
            Some("no call traces for notifications")
        );
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
            .arg("--store")
            .arg(&path)
            .arg("list")
            .env("NO_COLOR", "1")
            .output()
            .expect("rudder list");
        let out = String::from_utf8_lossy(&out.stdout);
        assert!(out.contains("no call traces for notifications"), "{out}");
        assert!(!out.contains("following call traces"), "{out}");
        assert!(!out.contains(question), "{out}");
    });
}

/// Issue 30, item 12: an answer given while no worker runs leaves the task
/// working with no message of its own; its row says what it waits for
/// (in the table, in `rudder list`) until a worker claims it or writes.
#[test]
fn an_answered_task_says_it_waits_for_a_worker_until_one_writes() {
    each_store(|| {
        use rudder::store::{NewTask, Store};
        use rudder::task::{AWAITING_RESUME, Actor};
        let fx = Fixture::new(TaskMap::new());
        let path = fx.path().to_path_buf();
        let store = Store::connect(&path).expect("a store URL");
        let waiting = store
            .create(NewTask {
                title: Some("INC-1043 card payments".into()),
                input_schema: Some(serde_json::json!({"type": "object", "required": ["service"]})),
                status_message: Some("which service should the diagnosis follow?".into()),
                ..NewTask::default()
            })
            .expect("create")
            .task;
        let id = waiting.task_id.clone();
        store
            .provide_input(&id, serde_json::json!({"service": "payments"}), None)
            .expect("input");
        let row_message = |app: &App| {
            (0..app.rows.len())
                .filter_map(|r| app.row_task(r))
                .find(|t| t.task_id == id)
                .and_then(|t| t.current_message().map(str::to_string))
        };
        let list = || {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
                .arg("--store")
                .arg(&path)
                .arg("list")
                .env("NO_COLOR", "1")
                .env("COLUMNS", "200")
                .output()
                .expect("rudder list");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let mut app = fx.app_now(now());
        assert_eq!(row_message(&app).as_deref(), Some(AWAITING_RESUME));
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 30)).expect("terminal");
        terminal
            .draw(|f| rudder::tui::view::draw(f, &mut app, &rudder::tui::view::Theme::DEFAULT))
            .expect("draw");
        let screen = screen_text(&terminal);
        assert!(
            screen
                .lines()
                .any(|l| l.contains(&id[..8]) && l.contains(AWAITING_RESUME)),
            "{screen}"
        );
        assert!(list().contains(AWAITING_RESUME), "{}", list());

        // A worker claims it: someone now works on it.
        store
            .claim(&id, "worker-1", std::time::Duration::from_secs(30))
            .expect("claim");
        app.on_feed(fx.reread());
        assert_eq!(row_message(&app), None);
        // And what it writes is what the row says.
        store
            .heartbeat(
                &id,
                Some("resumed by worker-1".into()),
                None,
                Actor::Worker {
                    holder: "worker-1",
                    lease: Some(std::time::Duration::from_secs(30)),
                },
            )
            .expect("heartbeat");
        app.on_feed(fx.reread());
        assert_eq!(row_message(&app).as_deref(), Some("resumed by worker-1"));
        assert!(!list().contains(AWAITING_RESUME), "{}", list());
    });
}

#[test]
fn watch_help_says_where_the_config_file_is() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
        .args(["watch", "--help"])
        .output()
        .expect("rudder runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("$XDG_CONFIG_HOME/rudder/config.toml"),
        "{text}"
    );
    assert!(text.contains("~/.config/rudder/config.toml"), "{text}");
}

#[test]
fn the_demo_asks_its_question_first() {
    // The demo's worker words its question so that the table's message
    // column, beside the title, begins with it.
    let plan = rudder::demo::diagnosis::Plan::of(&{
        let mut t = task(1, Status::Working, "INC-1043 card payments", 10, 1);
        t.request = Some(serde_json::json!({"incident": "INC-1043"}));
        t
    });
    match rudder::demo::diagnosis::before_step(usize::MAX, &plan) {
        Err(rudder::demo::diagnosis::Stop::AskForService(q)) => {
            assert!(
                q.starts_with("Which service should the diagnosis follow?"),
                "{q}"
            )
        }
        other => panic!("no question: {other:?}"),
    }
}
