//! The worker of the MCP conformance suite's seven fixture tools
//! (`tests/fixtures/mcp-conformance.toml`), written on the store's own
//! calls: claim, heartbeat, request input, complete, fail.
//!
//! ```sh
//! cargo run --release --example mcp_fixture_worker -- --store URL
//! rudder --store URL mcp --http 127.0.0.1:8765 --tools tests/fixtures/mcp-conformance.toml
//! ```
//!
//! Each claimed task runs on its own thread, so a 60-second `slow_compute`
//! never holds the others up; a task cancelled meanwhile is let go at the
//! next heartbeat (which the store then refuses).

use rudder::store::Open as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rudder::store::Store;
use rudder::task::{Actor, Op, Task};
use serde_json::{Value, json};

const LEASE: Duration = Duration::from_secs(30);
const TOOLS: &[&str] = &[
    "greet",
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
];

fn main() {
    let mut args = std::env::args().skip(1);
    let mut store = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--store" => store = args.next(),
            other => {
                let _ = usage(&format!("unknown argument {other:?}"));
                std::process::exit(2);
            }
        }
    }
    let Some(url) = store else {
        let _ = usage("--store URL is required");
        std::process::exit(2);
    };
    let store = Arc::new(Store::open(&url));
    let holder = format!("mcp-fixture-worker-{}", std::process::id());
    // The catalogue gives each tool its own kind (the tool's name).
    let kinds: Vec<String> = TOOLS.iter().map(|t| t.to_string()).collect();
    loop {
        match store.claim_next(&holder, LEASE, &kinds) {
            Ok(Some(task)) => {
                let store = Arc::clone(&store);
                let holder = holder.clone();
                std::thread::spawn(move || {
                    if let Err(e) = work(&store, &holder, &task) {
                        let _ = say(&format!("{}: {e}", task.task_id));
                    }
                });
            }
            // Nothing to do: look again soon (the suite's tasks are short).
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                let _ = say(&format!("claim: {e}"));
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

fn usage(why: &str) -> std::io::Result<()> {
    say(&format!("{why}\nusage: mcp_fixture_worker --store URL"))
}

fn say(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    writeln!(std::io::stderr(), "mcp_fixture_worker: {text}")
}

fn text_result(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// Sleep `d` in heartbeat steps; `Err` once the task is cancelled (the
/// heartbeat is refused).
fn busy(store: &Store, id: &str, actor: Actor<'_>, d: Duration) -> Result<(), String> {
    let until = Instant::now() + d;
    loop {
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        std::thread::sleep((until - now).min(Duration::from_millis(100)));
        store
            .heartbeat(id, None, None, actor)
            .map_err(|e| e.to_string())?;
    }
}

fn work(store: &Store, holder: &str, task: &Task) -> Result<(), String> {
    let actor = Actor::Worker {
        holder,
        lease: Some(LEASE),
    };
    let id = task.task_id.as_str();
    let tool = task.kind.as_deref().unwrap_or("");
    let args = task.request.clone().unwrap_or(json!({}));
    let str_arg = |k: &str, default: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_string()
    };
    let e = |e: rudder::StoreError| e.to_string();
    match tool {
        "greet" => {
            let name = str_arg("name", "friend");
            store
                .complete(id, text_result(format!("Hello, {name}!")), actor)
                .map_err(e)?;
        }
        "slow_compute" => {
            let seconds = args.get("seconds").and_then(Value::as_f64).unwrap_or(1.0);
            let label = str_arg("label", "compute");
            busy(
                store,
                id,
                actor,
                Duration::from_secs_f64(seconds.clamp(0.0, 3600.0)),
            )?;
            store
                .complete(
                    id,
                    text_result(format!("slow_compute({label}) done after {seconds}s")),
                    actor,
                )
                .map_err(e)?;
        }
        "failing_job" => {
            busy(store, id, actor, Duration::from_secs(1))?;
            store
                .fail(id, "failing_job: intentional tool execution error", actor)
                .map_err(e)?;
        }
        "protocol_error_job" => {
            busy(store, id, actor, Duration::from_millis(200))?;
            let error = json!({
                "code": -32603,
                "message": "protocol_error_job: intentional protocol-level failure",
            });
            store.apply(id, &Op::Fail { error }, actor).map_err(e)?;
        }
        "confirm_delete" => {
            let filename = str_arg("filename", "file.txt");
            match &task.input_value {
                None => {
                    let schema = json!({
                        "type": "object",
                        "properties": {"confirm": {"type": "boolean"}},
                        "required": ["confirm"],
                    });
                    store
                        .request_input(id, schema, Some(format!("Delete {filename}?")), actor)
                        .map_err(e)?;
                }
                Some(answer) => {
                    let confirmed = answer.get("confirm").and_then(Value::as_bool) == Some(true);
                    store
                        .complete(
                            id,
                            text_result(format!(
                                "confirm_delete({filename}): confirmed = {confirmed}"
                            )),
                            actor,
                        )
                        .map_err(e)?;
                }
            }
        }
        "multi_input" => match &task.input_value {
            None => {
                // Two questions at once, each its own elicitation.
                let part = json!({"type": "object", "properties": {"value": {"type": "string"}}});
                let schema = json!({
                    "type": "object",
                    "properties": {"input-a": part, "input-b": part},
                    "required": ["input-a", "input-b"],
                    "x-mcp-input-requests": {
                        "input-a": {"message": "Provide value A"},
                        "input-b": {"message": "Provide value B"},
                    },
                });
                store
                    .request_input(id, schema, Some("Provide values A and B".into()), actor)
                    .map_err(e)?;
            }
            Some(answer) => {
                let get = |k: &str| {
                    answer
                        .pointer(&format!("/{k}/value"))
                        .and_then(Value::as_str)
                        .unwrap_or("(none)")
                        .to_string()
                };
                store
                    .complete(
                        id,
                        text_result(format!(
                            "multi_input: a = {}, b = {}",
                            get("input-a"),
                            get("input-b")
                        )),
                        actor,
                    )
                    .map_err(e)?;
            }
        },
        "test_tool_with_task" => {
            let name = args
                .pointer("/_inputs/user_name/name")
                .and_then(Value::as_str)
                .unwrap_or("friend")
                .to_string();
            busy(store, id, actor, Duration::from_millis(200))?;
            store
                .complete(id, text_result(format!("Hello, {name}! (async)")), actor)
                .map_err(e)?;
        }
        other => {
            store
                .fail(id, &format!("no fixture tool {other:?}"), actor)
                .map_err(e)?;
        }
    }
    Ok(())
}
