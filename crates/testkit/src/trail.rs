//! The trail's fixtures, shared by the store's trail tests
//! (`crates/store/tests/trail.rs`) and the binary's (`tests/trail_cli.rs`).

use std::time::Duration;

use rudder_model::task::{Actor, Author, Face};
use rudder_store::trail;
use rudder_store::{NewTask, Store, TrailEntry, TrailQuery};
use serde_json::json;

/// The schema of the night's question.
pub fn schema() -> serde_json::Value {
    json!({"type": "object", "required": ["service"],
           "properties": {"service": {"type": "string"}, "note": {"type": "string"}}})
}

/// An author named `name` writing through `face`.
pub fn person(name: &str, face: Face) -> Author {
    Author::new(name, face).expect("a valid name")
}

/// The reference: the trail read from the tasks in full.
pub fn reference(store: &Store, q: &TrailQuery) -> Vec<TrailEntry> {
    let tasks = store.load().expect("load");
    trail::in_memory(tasks.values(), q)
}

/// A night on call: a task asked, answered by ann in the TUI, another
/// cancelled by bob with a reason, a third completed by a worker.
pub fn night(store: &Store) -> (String, String, String) {
    let ops = store.by(person("ops-bot", Face::Cli));
    let asked = ops
        .create(NewTask {
            title: Some("diagnose payments".into()),
            input_schema: Some(schema()),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;
    let cancelled = ops.create(NewTask::default()).unwrap().task.task_id;
    let worked = ops.create(NewTask::default()).unwrap().task.task_id;
    store
        .by(person("ann", Face::Tui))
        .provide_input(&asked, json!({"service": "payments", "note": "p1"}), None)
        .unwrap();
    store
        .by(person("bob", Face::Cli))
        .cancel(&cancelled, Some("duplicate of INC-7".into()))
        .unwrap();
    store
        .claim(&worked, "w#1", Duration::from_secs(60))
        .unwrap();
    let holder = Actor::Worker {
        holder: "w#1",
        lease: None,
    };
    store
        .complete(&worked, json!({"ok": true}), holder)
        .unwrap();
    (asked, cancelled, worked)
}
