//! The gateway in front of a server nobody here wrote: an MCP server on
//! the official Python SDK (`mcp` from PyPI), over stdio and over
//! Streamable HTTP. Each test has its own store and catalogue; they wait
//! on the store for exactly the state they assert.

mod common;

use std::time::Duration;

use common::{Gateway, bridge, call, notes, python, text_of, wait_file, wait_for};
use rudder_store::Store;
use rudder_store::task::{Face, Status};
use serde_json::json;

const LEASE: Duration = Duration::from_secs(3);

fn catalogue(extra: &str) -> String {
    format!(
        "[[upstream]]\nname = \"bridge\"\ncommand = [{:?}, {:?}]\ntools = \"*\"\n{extra}",
        python().display().to_string(),
        bridge().display().to_string()
    )
}

fn store(dir: &std::path::Path) -> Store {
    Store::connect(dir.join("tasks.db")).expect("a store")
}

#[test]
fn progress_and_a_question_reach_the_task_and_the_answer_goes_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let gw = Gateway::start(dir.path(), &catalogue(""), &store, LEASE);
    let id = call(&store, "diagnose", json!({"incident": "INC-7", "steps": 3}));
    let asked = wait_for(&store, &id, "input_required", |t| {
        t.status == Status::InputRequired
    });
    assert_eq!(
        asked.status_message.as_deref(),
        Some("Restart the service for INC-7?")
    );
    let schema = asked.input_schema.clone().expect("a schema");
    assert_eq!(
        schema.pointer("/properties/restart/type"),
        Some(&json!("boolean")),
        "{schema}"
    );
    assert_eq!(
        asked.progress.map(|p| (p.current, p.total)),
        Some((3, 3)),
        "the upstream's progress is the task's"
    );
    assert!(
        asked
            .claimed_by
            .as_deref()
            .is_some_and(|h| h.starts_with("gateway:bridge#")),
        "the holder names the gateway worker and the upstream: {:?}",
        asked.claimed_by
    );
    store
        .provide_input(&id, json!({"restart": true, "note": "go"}), None)
        .expect("an answer");
    let done = wait_for(&store, &id, "completed", |t| t.status.is_terminal());
    assert_eq!(done.status, Status::Completed);
    assert_eq!(text_of(&done), "INC-7: restart=True note=go");
    assert_ne!(
        done.result.as_ref().and_then(|r| r.get("isError")),
        Some(&json!(true))
    );
    assert!(
        done.history.iter().any(|e| e.face == Some(Face::Gateway)
            && e.note
                .as_deref()
                .is_some_and(|n| n.starts_with("gateway: attempt 1 of 1"))),
        "the attempt is in the history, by the gateway: {:?}",
        done.history
    );
    drop(gw);
}

#[test]
fn the_tools_are_listed_with_the_upstreams_names_descriptions_and_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let gw = Gateway::start(dir.path(), &catalogue(""), &store, LEASE);
    let mut watch = gw.directory.watch();
    let tools = gw.runtime.as_ref().unwrap().block_on(async {
        tokio::time::timeout(Duration::from_secs(60), watch.wait_for(|t| !t.is_empty()))
            .await
            .expect("listed in time")
            .expect("listed")
            .clone()
    });
    let greet = tools
        .iter()
        .find(|t| t.name == "greet")
        .expect("greet is served");
    assert_eq!(greet.description, "A short tool.");
    assert_eq!(greet.upstream, "bridge");
    assert_eq!(greet.kind, "greet");
    assert_eq!(
        greet.input_schema.pointer("/properties/name/type"),
        Some(&json!("string"))
    );
    assert!(tools.iter().any(|t| t.name == "diagnose"));
}

/// An upstream of protocol 2026-07-28 tells of a change of its tools only
/// on a `subscriptions/listen`: the gateway's listing session opens one
/// (asking for `toolsListChanged`) and lists the tools again when told.
#[test]
fn a_2026_upstreams_tool_list_change_is_heard_on_a_listen() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let trigger = dir.path().join("grow");
    let changing = bridge().with_file_name("changing.py");
    let text = format!(
        "[[upstream]]\nname = \"changing\"\ncommand = [{:?}, {:?}, {:?}, \"--2026\"]\ntools = \"*\"\n",
        python().display().to_string(),
        changing.display().to_string(),
        trigger.display().to_string()
    );
    let gw = Gateway::start(dir.path(), &text, &store, LEASE);
    let mut watch = gw.directory.watch();
    let listed = |name: &'static str| {
        move |tools: &std::sync::Arc<Vec<rudder_gateway::UpstreamTool>>| {
            tools.iter().any(|t| t.name == name)
        }
    };
    let runtime = gw.runtime.as_ref().unwrap();
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), watch.wait_for(listed("first")))
            .await
            .expect("listed in time")
            .expect("listed");
    });
    std::fs::write(&trigger, "").unwrap();
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), watch.wait_for(listed("second")))
            .await
            .expect("the new tool was never listed: the change was not heard")
            .expect("listed");
    });
}

#[test]
fn a_tool_error_is_a_completed_task_with_is_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let _gw = Gateway::start(dir.path(), &catalogue(""), &store, LEASE);
    let id = call(&store, "broken", json!({"reason": "disk"}));
    let done = wait_for(&store, &id, "finished", |t| t.status.is_terminal());
    assert_eq!(
        done.status,
        Status::Completed,
        "a tool error is the tool's answer"
    );
    assert_eq!(
        done.result.as_ref().and_then(|r| r.get("isError")),
        Some(&json!(true))
    );
    // The SDK words the error its own way (mcp 2 does not pass the
    // exception's text on); the tool is named.
    assert!(text_of(&done).contains("broken"), "{}", text_of(&done));
}

#[test]
fn a_cancel_while_the_question_waits_ends_the_call_and_the_next_call_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let _gw = Gateway::start(dir.path(), &catalogue(""), &store, LEASE);
    let id = call(&store, "diagnose", json!({"incident": "INC-8", "steps": 1}));
    wait_for(&store, &id, "input_required", |t| {
        t.status == Status::InputRequired
    });
    store
        .cancel(&id, Some("not needed".into()))
        .expect("cancel");
    let next = call(&store, "greet", json!({"name": "Ada"}));
    let done = wait_for(&store, &next, "completed", |t| t.status.is_terminal());
    assert_eq!(text_of(&done), "Hello, Ada!");
    assert_eq!(store.get(&id).unwrap().status, Status::Cancelled);
}

#[test]
fn a_schema_that_is_not_a_flat_form_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let _gw = Gateway::start(dir.path(), &catalogue(""), &store, LEASE);
    let id = call(&store, "nested", json!({}));
    let done = wait_for(&store, &id, "finished", |t| t.status.is_terminal());
    assert!(
        notes(&done).iter().any(|n| n.contains("not a flat form")),
        "{:?} {}",
        notes(&done),
        serde_json::to_string(&done).unwrap_or_default()
    );
    assert_ne!(done.status, Status::InputRequired);
}

#[test]
fn sampling_gets_a_json_rpc_error_and_the_history_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let _gw = Gateway::start(dir.path(), &catalogue(""), &store, LEASE);
    let id = call(&store, "sample", json!({}));
    let done = wait_for(&store, &id, "finished", |t| t.status.is_terminal());
    assert!(
        text_of(&done).starts_with("sampling refused"),
        "{}",
        text_of(&done)
    );
    assert!(
        notes(&done)
            .iter()
            .any(|n| n.contains("sampling/createMessage, which the gateway does not serve")),
        "{:?}",
        notes(&done)
    );
}

fn kill(pid: &str) {
    let ok = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {pid}");
}

#[test]
fn a_server_killed_mid_call_fails_a_tool_not_marked_idempotent_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let _gw = Gateway::start(dir.path(), &catalogue(""), &store, LEASE);
    let marker = dir.path().join("fragile.pid");
    let id = call(&store, "fragile", json!({"marker": marker}));
    let pid = wait_file(&marker);
    kill(&pid);
    let done = wait_for(&store, &id, "failed", |t| t.status.is_terminal());
    assert_eq!(done.status, Status::Failed);
    let message = done.error_message().unwrap_or_default().to_string();
    assert!(message.contains("closed the connection"), "{message}");
    assert!(
        message.contains("not retried because the tool is not marked idempotent"),
        "{message}"
    );
}

#[test]
fn a_server_killed_mid_call_retries_an_idempotent_tool_each_attempt_in_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let extra = "[upstream.tool.flaky]\nidempotent = true\nattempts = 3\n";
    let _gw = Gateway::start(dir.path(), &catalogue(extra), &store, LEASE);
    let marker = dir.path().join("flaky.pid");
    let id = call(&store, "flaky", json!({"marker": marker}));
    let pid = wait_file(&marker);
    kill(&pid);
    let done = wait_for(&store, &id, "completed", |t| t.status.is_terminal());
    assert_eq!(done.status, Status::Completed, "{:?}", done.error);
    assert!(
        text_of(&done).starts_with("done after a restart"),
        "{}",
        text_of(&done)
    );
    let notes = notes(&done);
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("gateway: attempt 1 of 3")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("gateway: attempt 1 of 3 was lost")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("gateway: attempt 2 of 3")),
        "{notes:?}"
    );
}

#[test]
fn a_takeover_replays_the_answer_already_given_to_an_idempotent_call() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let extra = "[upstream.tool.diagnose]\nidempotent = true\n";
    let text = catalogue(extra);
    let first = Gateway::start(dir.path(), &text, &store, LEASE);
    let id = call(&store, "diagnose", json!({"incident": "INC-9", "steps": 1}));
    wait_for(&store, &id, "input_required", |t| {
        t.status == Status::InputRequired
    });
    // rudder stops while the question waits; the engineer answers anyway.
    first.kill();
    store
        .provide_input(&id, json!({"restart": false, "note": "later"}), None)
        .expect("an answer");
    let _second = Gateway::start(dir.path(), &text, &store, LEASE);
    let done = wait_for(&store, &id, "completed", |t| t.status.is_terminal());
    assert_eq!(text_of(&done), "INC-9: restart=False note=later");
    let asked = done
        .history
        .iter()
        .filter(|e| e.status == Status::InputRequired)
        .count();
    assert_eq!(asked, 1, "the engineer was asked once: {:#?}", done.history);
    assert!(
        notes(&done)
            .iter()
            .any(|n| n.contains("the stored answer was given at once")),
        "{:?}",
        notes(&done)
    );
    assert!(
        notes(&done)
            .iter()
            .any(|n| n.starts_with("gateway: attempt 2 of 3"))
    );
}

/// A call that asked two different questions, both answered, is taken
/// over after rudder stops: the upstream asks both again and both get
/// their stored answers at once (the first from the task's earlier
/// answers, the second from its current one); the engineer is asked
/// nothing more.
#[test]
fn a_takeover_replays_every_answer_already_given_not_only_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let extra = "[upstream.tool.failover]\nidempotent = true\n";
    let text = catalogue(extra);
    let first = Gateway::start(dir.path(), &text, &store, LEASE);
    let marker = dir.path().join("failover.pid");
    let id = call(
        &store,
        "failover",
        json!({"incident": "INC-11", "marker": marker}),
    );
    let answers = [
        (
            "Which region takes the traffic of INC-11?",
            json!({"region": "eu-west"}),
        ),
        ("Fail INC-11 over to it now?", json!({"confirm": true})),
    ];
    for (round, (question, answer)) in answers.iter().enumerate() {
        let asked = wait_for(&store, &id, "input_required", |t| {
            t.status == Status::InputRequired && t.answered.len() == round
        });
        assert_eq!(asked.status_message.as_deref(), Some(*question));
        store
            .provide_input(&id, answer.clone(), None)
            .expect("an answer");
    }
    // Both answers reached the upstream, which now works on (and hangs):
    // rudder stops before the tool returns.
    wait_file(&marker);
    first.kill();
    let _second = Gateway::start(dir.path(), &text, &store, LEASE);
    let done = wait_for(&store, &id, "completed or asking again", |t| {
        t.status.is_terminal() || t.status == Status::InputRequired
    });
    assert_eq!(
        done.status,
        Status::Completed,
        "the engineer was asked again: {:?} {:#?}",
        done.status_message,
        done.history
    );
    assert_eq!(text_of(&done), "INC-11: region=eu-west confirm=True");
    let asked = done
        .history
        .iter()
        .filter(|e| e.status == Status::InputRequired)
        .count();
    assert_eq!(
        asked, 2,
        "each question was asked once: {:#?}",
        done.history
    );
    let replayed = notes(&done)
        .iter()
        .filter(|n| n.contains("the stored answer was given at once"))
        .count();
    assert_eq!(replayed, 2, "{:#?}", notes(&done));
    assert!(
        notes(&done)
            .iter()
            .any(|n| n.starts_with("gateway: attempt 2 of 3"))
    );
}

#[test]
fn a_takeover_of_a_call_not_idempotent_fails_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let text = catalogue("");
    let first = Gateway::start(dir.path(), &text, &store, LEASE);
    let id = call(
        &store,
        "diagnose",
        json!({"incident": "INC-10", "steps": 1}),
    );
    wait_for(&store, &id, "input_required", |t| {
        t.status == Status::InputRequired
    });
    first.kill();
    store
        .provide_input(&id, json!({"restart": true}), None)
        .expect("an answer");
    let _second = Gateway::start(dir.path(), &text, &store, LEASE);
    let done = wait_for(&store, &id, "failed", |t| t.status.is_terminal());
    assert_eq!(done.status, Status::Failed);
    let message = done.error_message().unwrap_or_default().to_string();
    assert!(message.contains("was interrupted"), "{message}");
    assert!(message.contains("not marked idempotent"), "{message}");
}

#[test]
fn an_http_upstream_is_called_with_its_token_which_no_task_holds() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let port_file = dir.path().join("port");
    let mut server = std::process::Command::new(python())
        .arg(bridge())
        .arg("--http")
        .arg(&port_file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the HTTP bridge starts");
    let port = wait_file(&port_file);
    // Listening once a connection is taken.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port.trim().parse::<u16>().unwrap())).is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the HTTP bridge never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let token = format!("tok-{}", uuid::Uuid::new_v4());
    std::fs::write(dir.path().join("bridge.token"), &token).unwrap();
    let text = format!(
        "[[upstream]]\nname = \"web\"\nurl = \"http://127.0.0.1:{}/mcp\"\ntoken_file = \"bridge.token\"\ntools = [\"greet\"]\n",
        port.trim()
    );
    let gw = Gateway::start(dir.path(), &text, &store, LEASE);
    let id = call(&store, "greet", json!({"name": "Grace"}));
    let done = wait_for(&store, &id, "completed", |t| t.status.is_terminal());
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(text_of(&done), "Hello, Grace!", "{:?}", done.error);
    let stored = serde_json::to_string(&done).unwrap();
    assert!(!stored.contains(&token), "the token is in the task");
    assert!(gw.said.lock().unwrap().iter().all(|s| !s.contains(&token)));
}

#[test]
fn an_upstream_that_does_not_answer_is_told_and_listed_once_it_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    // A command that cannot start: told; the directory stays empty.
    let text =
        "[[upstream]]\nname = \"gone\"\ncommand = [\"/nonexistent/mcp-server\"]\ntools = \"*\"\n";
    let gw = Gateway::start(dir.path(), text, &store, LEASE);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !gw
        .said
        .lock()
        .unwrap()
        .iter()
        .any(|s| s.contains("upstream \"gone\" does not answer"))
    {
        assert!(std::time::Instant::now() < deadline, "never told");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gw.directory.tools().is_empty());
}

#[test]
fn an_upstream_that_answers_with_something_not_a_result_fails_the_task_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let liar = bridge().with_file_name("liar.py");
    let text = format!(
        "[[upstream]]\nname = \"liar\"\ncommand = [{:?}, {:?}]\ntools = [\"lie\"]\n",
        python().display().to_string(),
        liar.display().to_string()
    );
    let _gw = Gateway::start(dir.path(), &text, &store, LEASE);
    let id = call(&store, "lie", json!({}));
    let done = wait_for(&store, &id, "failed", |t| t.status.is_terminal());
    assert_eq!(done.status, Status::Failed);
    let message = done.error_message().unwrap_or_default().to_string();
    assert!(message.contains("upstream \"liar\""), "{message}");
    assert!(message.contains("not a CallToolResult"), "{message}");
}

#[test]
fn a_2026_upstream_asks_with_input_required_and_the_call_is_made_again_with_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let modern = bridge().with_file_name("modern.py");
    let text = format!(
        "[[upstream]]\nname = \"modern\"\ncommand = [{:?}, {:?}]\ntools = [\"failover\"]\n",
        python().display().to_string(),
        modern.display().to_string()
    );
    let _gw = Gateway::start(dir.path(), &text, &store, LEASE);
    let id = call(&store, "failover", json!({}));
    let asked = wait_for(&store, &id, "input_required", |t| {
        t.status == Status::InputRequired || t.status.is_terminal()
    });
    assert_eq!(
        asked.status_message.as_deref(),
        Some("Proceed with the failover?"),
        "{:?}",
        asked.error
    );
    store
        .provide_input(&id, json!({"ok": true}), None)
        .expect("an answer");
    let done = wait_for(&store, &id, "completed", |t| t.status.is_terminal());
    assert_eq!(
        text_of(&done),
        "failover accept ok=True",
        "{:?}",
        done.error
    );
}

fn tasks_upstream(dir: &std::path::Path) -> String {
    let tasks = bridge().with_file_name("tasks.py");
    format!(
        "[[upstream]]\nname = \"tasky\"\ncommand = [{:?}, {:?}, {:?}]\ntools = [\"migrate\"]\n",
        python().display().to_string(),
        tasks.display().to_string(),
        dir.join("cancelled").display().to_string()
    )
}

#[test]
fn an_upstreams_own_task_is_mirrored_its_question_answered_with_tasks_update() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let _gw = Gateway::start(dir.path(), &tasks_upstream(dir.path()), &store, LEASE);
    let id = call(&store, "migrate", json!({}));
    let asked = wait_for(&store, &id, "input_required", |t| {
        t.status == Status::InputRequired || t.status.is_terminal()
    });
    assert_eq!(
        asked.status_message.as_deref(),
        Some("Switch traffic to the new database?"),
        "{:?}",
        asked.error
    );
    assert!(
        notes(&asked)
            .iter()
            .any(|n| n.contains("with a task of its own (up-1)")),
        "{:?}",
        notes(&asked)
    );
    store
        .provide_input(&id, json!({"go": true}), None)
        .expect("an answer");
    let done = wait_for(&store, &id, "completed", |t| t.status.is_terminal());
    assert_eq!(text_of(&done), "migrated: go=True", "{:?}", done.error);
}

#[test]
fn a_rudder_cancel_cancels_the_upstreams_own_task() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let _gw = Gateway::start(dir.path(), &tasks_upstream(dir.path()), &store, LEASE);
    let id = call(&store, "migrate", json!({}));
    wait_for(&store, &id, "input_required", |t| {
        t.status == Status::InputRequired
    });
    store
        .cancel(&id, Some("wrong database".into()))
        .expect("cancel");
    assert_eq!(wait_file(&dir.path().join("cancelled")), "up-1");
}
