//! The two readers of a store file must agree: the writers' quick check of
//! every task (the store's index, which reads a task without building it)
//! and the full parse every reader uses. If the quick check accepted a value
//! the full parse refuses, a writer would copy it into a new file that every
//! reader then refuses. This test puts every field of a task, in turn, to
//! values of every JSON type and checks that a write either is refused with
//! nothing written, or leaves a file that loads.
use std::collections::BTreeSet;

use chrono::Utc;
use indexmap::IndexMap;
use rudder_store::task::{Actor, Answered, HistoryEntry, Origin, Progress, Status, Task};
use rudder_store::{NewTask, Store, StoreError};
use serde_json::{Value, json};

/// A task with every field set. Written as a struct literal without `..`,
/// so that a field added to `Task` fails to compile here until it is
/// covered by this test.
fn every_field() -> Task {
    let now = Utc::now();
    Task {
        task_id: "aaaaaaaa-0000-4000-8000-000000000001".into(),
        status: Status::InputRequired,
        input_schema: Some(json!({"type": "object", "required": ["service"]})),
        input_value: Some(json!({"service": "payments"})),
        result: Some(json!({"summary": "ok"})),
        idempotency_key: Some("incident-1".into()),
        created_at: Some(now),
        updated_at: Some(now),
        title: Some("INC-1 checkout".into()),
        kind: Some("diagnose".into()),
        request: Some(json!({"incident": "INC-1"})),
        status_message: Some("which service?".into()),
        progress: Some(Progress {
            current: 1,
            total: 4,
        }),
        claimed_by: Some("worker#1".into()),
        lease_expires_at: Some(now),
        lease_ms: Some(30_000),
        error: Some(json!({"message": "no"})),
        ttl_ms: Some(60_000),
        poll_interval_ms: Some(500),
        answered: vec![Answered {
            message: Some("which region?".into()),
            input_schema: json!({"type": "object"}),
            input_value: json!({"region": "eu"}),
        }],
        revision: 3,
        history: vec![HistoryEntry::new(
            Status::Working,
            now,
            Some("created".into()),
        )],
        origin: Some(Origin {
            tool: "diagnose".into(),
            client: None,
        }),
        owned_by: Some("alice".into()),
        extra: IndexMap::from([("owner".to_string(), json!({"team": "payments"}))]),
    }
}

/// Values of every JSON type, and a few that are nearly right for the
/// typed fields (a negative integer, a fraction, a huge number, a bad time,
/// an unknown status, a progress with a missing or mistyped part).
fn candidates() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(0),
        json!(-1),
        json!(1.5),
        json!(18446744073709551615u64),
        json!(1e300),
        json!(""),
        json!("working"),
        json!("paused"),
        json!("2026-01-01T00:00:00Z"),
        json!("yesterday"),
        json!([]),
        json!([{"status": "working", "at": "2026-01-01T00:00:00Z"}]),
        json!([{"status": "working"}]),
        json!({}),
        json!({"current": 1, "total": 2}),
        json!({"current": "1", "total": 2}),
        json!({"current": 1}),
        json!({"tool": "diagnose", "client": {"name": "cli"}}),
        json!({"tool": 1}),
        json!([{"status": "working", "at": "2026-01-01T00:00:00Z", "face": 5}]),
        json!([{"status": "working", "at": "2026-01-01T00:00:00Z", "fields": [1]}]),
        json!([{"status": "working", "at": "2026-01-01T00:00:00Z", "actor": {}}]),
        json!([{"input_schema": {}, "input_value": {}}]),
        json!([{"message": null, "input_schema": true, "input_value": [1]}]),
        json!([{"message": 5, "input_schema": {}, "input_value": {}}]),
        json!([{"input_schema": {}}]),
        json!([["q", {}, {}]]),
    ]
}

#[test]
fn the_writers_check_and_the_readers_parse_agree_on_every_field() {
    let base = serde_json::to_value(every_field()).expect("serialize");
    let fields: BTreeSet<String> = base.as_object().expect("object").keys().cloned().collect();
    // Every field of the struct literal above is written out.
    assert!(fields.len() >= 20, "{fields:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut written = 0;
    let mut refused = 0;
    for field in &fields {
        if field == "task_id" {
            continue;
        }
        for value in candidates() {
            let mut task = base.clone();
            task[field.as_str()] = value.clone();
            let id = "aaaaaaaa-0000-4000-8000-000000000001";
            let file = json!({ id: task });
            let path = dir.path().join(format!("{field}-{written}-{refused}.json"));
            let text = serde_json::to_string_pretty(&file).expect("encode");
            std::fs::write(&path, &text).expect("write");
            let store = Store::connect(&path).expect("a store URL");
            // A write that touches another task: the quick path copies this
            // task as it is, checked only by the index.
            let other = store.create(NewTask::default());
            match other {
                Ok(_) => {
                    written += 1;
                    let loaded = store.load().unwrap_or_else(|e| {
                        panic!("{field} = {value}: a write was accepted but the store no longer loads: {e}")
                    });
                    assert_eq!(loaded.len(), 2, "{field} = {value}");
                }
                Err(StoreError::Corrupt { .. }) => {
                    refused += 1;
                    assert_eq!(
                        std::fs::read_to_string(&path).expect("read"),
                        text,
                        "{field} = {value}: a refused write changed the file"
                    );
                    assert!(
                        store.load().is_err(),
                        "{field} = {value}: the writer refused a file that loads"
                    );
                }
                Err(e) => panic!("{field} = {value}: {e}"),
            }
            // And an operation on the task itself agrees too.
            let before = std::fs::read(&path).expect("read");
            match store.heartbeat(id, None, None, Actor::Anyone) {
                Ok(_) => {
                    store.load().unwrap_or_else(|e| {
                        panic!("{field} = {value}: heartbeat accepted, store unreadable: {e}")
                    });
                }
                Err(StoreError::Corrupt { .. }) => {
                    assert_eq!(std::fs::read(&path).expect("read"), before);
                }
                // The state machine may refuse (a terminal status).
                Err(_) => assert_eq!(std::fs::read(&path).expect("read"), before),
            }
        }
    }
    eprintln!("{written} accepted, {refused} refused");
    assert!(written > 0 && refused > 0);
}
