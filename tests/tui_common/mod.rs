//! Fixtures shared by the TUI tests: fixed ids, fixed times, a fixed clock,
//! so snapshots are stable.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use rudder::task::{HistoryEntry, Progress, Status, Task, TaskMap};
use rudder::tui::app::App;
use rudder::tui::app::StoreUpdate as FeedEvent;
use rudder::tui::diff::Diff;
use serde_json::json;

/// The screen of a `TestBackend` terminal as text, one line per row,
/// trailing spaces trimmed.
pub fn screen_text(terminal: &ratatui::Terminal<ratatui::backend::TestBackend>) -> String {
    let buf = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The fixed "now" of every fixture.
pub fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-15T12:00:00Z")
        .expect("a valid time")
        .with_timezone(&Utc)
}

/// `minutes` before [`now`].
pub fn ago(minutes: i64) -> DateTime<Utc> {
    now() - TimeDelta::minutes(minutes)
}

/// A fixed id for fixture number `n`.
pub fn id(n: u32) -> String {
    format!("{n:08x}-0000-4000-8000-000000000000")
}

/// The schema the waiting fixture asks for.
pub fn schema() -> serde_json::Value {
    json!({
        "type": "object",
        "required": ["service"],
        "properties": {
            "service": {"type": "string", "description": "the service to diagnose", "minLength": 2},
            "window_minutes": {"type": "integer", "default": 30, "minimum": 1},
            "env": {"enum": ["prod", "staging"]},
            "deep": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}}
        }
    })
}

/// A task with the given status, created `age` minutes ago, updated `upd` minutes ago.
pub fn task(n: u32, status: Status, title: &str, age: i64, upd: i64) -> Task {
    let mut t = Task::new(id(n), status);
    t.title = Some(title.to_string());
    t.created_at = Some(ago(age));
    t.updated_at = Some(ago(upd));
    t.revision = 1;
    t.history.push(HistoryEntry {
        status: Status::Working,
        at: ago(age),
        note: Some("created".into()),
    });
    if status != Status::Working {
        t.history.push(HistoryEntry {
            status,
            at: ago(upd),
            note: None,
        });
        t.revision = 2;
    }
    t
}

/// Six tasks, one per status plus one whose message is hostile.
pub fn fixture() -> TaskMap {
    let mut tasks = Vec::new();
    let mut waiting = task(1, Status::InputRequired, "INC-1042 checkout latency", 20, 3);
    waiting.input_schema = Some(schema());
    waiting.status_message = Some("which service should I look at?".into());
    waiting.idempotency_key = Some("inc-1042".into());
    tasks.push(waiting);
    let mut working = task(2, Status::Working, "INC-1043 db replication lag", 45, 1);
    working.status_message = Some("comparing replica offsets".into());
    working.progress = Some(Progress {
        current: 3,
        total: 7,
    });
    working.claimed_by = Some("worker-7".into());
    working.lease_expires_at = Some(now() + TimeDelta::seconds(30));
    working.request = Some(json!({"incident": "INC-1043", "service": "db"}));
    tasks.push(working);
    let mut done = task(3, Status::Completed, "INC-1001 cache misses", 120, 60);
    done.result =
        Some(json!({"root_cause": "cache TTL set to 0 by deploy 4711", "confidence": 0.9}));
    done.input_value = Some(json!({"service": "cache"}));
    tasks.push(done);
    let mut failed = task(4, Status::Failed, "INC-0999 dns", 300, 200);
    failed.error = Some(json!({"message": "worker lost: no update for 17m 5s"}));
    tasks.push(failed);
    let mut cancelled = task(5, Status::Cancelled, "INC-0998 noise", 400, 390);
    cancelled.status_message = Some("cancelled from the TUI".into());
    tasks.push(cancelled);
    let mut hostile = task(6, Status::Working, "evil\u{1b}]0;pwned\u{7} title", 5, 0);
    hostile.status_message = Some(
        "msg\u{1b}[2J\u{1b}[1;1Hcleared?\u{202E}reversed\u{1b}]52;c;Zm9v\u{7} end\r\nnext".into(),
    );
    tasks.push(hostile);
    tasks.into_iter().map(|t| (t.task_id.clone(), t)).collect()
}

/// A snapshot event for `tasks` with no transitions.
pub fn snapshot(tasks: TaskMap) -> FeedEvent {
    FeedEvent::Snapshot {
        tasks: Arc::new(tasks),
        diff: Diff::default(),
    }
}

/// A snapshot event for `to`, with its diff from `from` at [`now`].
pub fn snapshot_after(from: &TaskMap, to: TaskMap) -> FeedEvent {
    let diff = rudder::tui::diff::diff(from, &to, now());
    FeedEvent::Snapshot {
        tasks: Arc::new(to),
        diff,
    }
}

/// The [`fixture`] after task 2 completed, as a snapshot event.
pub fn task_2_completed() -> FeedEvent {
    let mut tasks = fixture();
    tasks.get_mut(&id(2)).expect("fixture").status = Status::Completed;
    snapshot_after(&fixture(), tasks)
}

/// An app at [`now`] showing `tasks`.
pub fn app_with(tasks: TaskMap) -> App {
    let mut app = App::new(Path::new("/srv/rudder/tasks.json"), false, now());
    app.on_feed(snapshot(tasks));
    app
}

/// A plain key press.
pub fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// A character key press.
pub fn ch(c: char) -> KeyEvent {
    key(KeyCode::Char(c))
}

/// Ctrl + `c`.
pub fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

/// Type `text` into the app, one key per character.
pub fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        let effects = app.handle_key(ch(c));
        assert!(effects.is_empty(), "typing {c:?} asked for {effects:?}");
    }
}
