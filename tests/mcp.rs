//! `rudder mcp` with rmcp's own client, over stdio and Streamable HTTP: every
//! method, status and error of the Tasks extension, the restart of the
//! server, and the guards of the HTTP face. The test plays the worker with
//! the store's calls, so every status is reached exactly when asserted.

mod common;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolResponse, CancelTaskParams, ClientRequest, CustomRequest, ErrorCode, GetTaskParams,
    TaskPayload, TaskStatus,
};
use rmcp::transport::TokioChildProcess;
use rudder::store::Store;
use rudder::task::{Actor, Op, Status};
use rudder_testkit::mcp::{
    self, Client, HttpServer, RawStdio, SseEvents, call, code, get, is_notification, post, update,
};
use serde_json::{Value, json};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/mcp-conformance.toml"
);
const WORKER: Actor<'static> = Actor::Anyone;

fn store_url(dir: &Path) -> PathBuf {
    dir.join("mcp.db")
}

fn sqlite(dir: &Path) -> String {
    format!("sqlite:{}", store_url(dir).display())
}

async fn stdio_client(dir: &Path, tasks: bool) -> Client {
    stdio_client_of(dir, FIXTURES, tasks).await
}

/// [`stdio_client`] of a server of the catalogue `tools`.
async fn stdio_client_of(dir: &Path, tools: &str, tasks: bool) -> Client {
    mcp::stdio(rudder_mcp(dir, tools), tasks).await
}

/// `rudder mcp --tools TOOLS` over stdio on the store of `dir`.
fn rudder_mcp(dir: &Path, tools: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.env_remove("RUDDER_STORE")
        .args(["--store", &sqlite(dir), "mcp", "--tools", tools]);
    cmd
}

async fn http_server(dir: &Path, addr: &str, env: &[(&str, &str)]) -> HttpServer {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.env_remove("RUDDER_STORE")
        .env_remove("RUDDER_MCP_TOKEN")
        .args([
            "--store",
            &sqlite(dir),
            "mcp",
            "--tools",
            FIXTURES,
            "--http",
            addr,
        ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    mcp::listen(cmd).await
}

async fn http_client(url: &str, tasks: bool) -> Client {
    mcp::http(url, tasks).await
}

/// The id of the task a `tools/call` of `name` created, working.
async fn create(client: &Client, name: &str, args: Value) -> String {
    let task = mcp::call_task(client, name, args).await;
    assert_eq!(task.status, TaskStatus::Working);
    task.task_id
}

fn open(dir: &Path) -> Store {
    Store::connect(sqlite(dir)).expect("a store URL")
}

/// Every method, status and error, over one transport.
async fn the_whole_surface(client: &Client, plain: &Client, dir: &Path) {
    let store = open(dir);
    // working, then completed with the tool's CallToolResult.
    let id = create(client, "slow_compute", json!({"seconds": 5, "label": "x"})).await;
    let t = get(client, &id).await;
    assert_eq!(t.status(), TaskStatus::Working);
    assert_eq!(
        t.task.poll_interval_ms,
        Some(200),
        "the catalogue's poll interval"
    );
    assert_eq!(t.task.ttl_ms, Some(3_600_000));
    let stored = store.get(&id).unwrap();
    let origin = stored.origin.clone().expect("origin recorded");
    assert_eq!(origin.tool, "slow_compute");
    assert_eq!(
        stored.kind.as_deref(),
        Some("slow_compute"),
        "the tool's kind"
    );
    let client_info = origin.client.expect("client recorded");
    assert_eq!(client_info.name, "rudder-test-client");
    assert_eq!(client_info.version.as_deref(), Some("7.1"));
    assert_eq!(stored.request, Some(json!({"seconds": 5, "label": "x"})));
    store.complete(&id, json!({"answer": 42}), WORKER).unwrap();
    let t = get(client, &id).await;
    let TaskPayload::Completed { result } = &t.payload else {
        panic!("{t:?}")
    };
    assert_eq!(result["structuredContent"], json!({"answer": 42}));
    assert_eq!(result["content"][0]["type"], "text");
    // tasks/cancel of a finished task: an ack, nothing changes.
    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .expect("cancel acks on a finished task");
    assert_eq!(store.get(&id).unwrap().status, Status::Completed);

    // A worker's fail is a tool error: completed, isError.
    let id = create(client, "slow_compute", json!({})).await;
    store.fail(&id, "disk full", WORKER).unwrap();
    let t = get(client, &id).await;
    let TaskPayload::Completed { result } = &t.payload else {
        panic!("{t:?}")
    };
    assert_eq!(result["isError"], true);
    assert_eq!(result["content"][0]["text"], "disk full");

    // A protocol-level failure: failed, with the error.
    let id = create(client, "protocol_error_job", json!({})).await;
    let error = json!({"code": -32603, "message": "boom"});
    store.apply(&id, &Op::Fail { error }, WORKER).unwrap();
    let t = get(client, &id).await;
    let TaskPayload::Failed { error } = &t.payload else {
        panic!("{t:?}")
    };
    assert_eq!(error["code"], -32603);
    assert_eq!(error["message"], "boom");

    // input_required: the question as a form elicitation under a key of
    // its round; an invalid answer keeps it waiting with the reason; a
    // valid one goes through the store's validation to the task.
    let id = create(client, "confirm_delete", json!({"filename": "a.txt"})).await;
    let schema = json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]});
    store
        .request_input(&id, schema.clone(), Some("Delete a.txt?".into()), WORKER)
        .unwrap();
    let t = get(client, &id).await;
    let TaskPayload::InputRequired { input_requests } = &t.payload else {
        panic!("{t:?}")
    };
    let keys: Vec<&String> = input_requests.keys().collect();
    assert_eq!(keys, ["input-1"]);
    let request = serde_json::to_value(&input_requests["input-1"]).unwrap();
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["mode"], "form");
    assert_eq!(request["params"]["message"], "Delete a.txt?");
    assert_eq!(
        request["params"]["requestedSchema"]["properties"]["confirm"]["type"],
        "boolean"
    );
    update(
        client,
        &id,
        json!({"input-1": {"action": "accept", "content": {"confirm": "yes"}}}),
    )
    .await;
    let after = store.get(&id).unwrap();
    assert_eq!(
        after.status,
        Status::InputRequired,
        "an invalid answer is not taken"
    );
    let message = after.status_message.unwrap();
    assert!(message.starts_with("Delete a.txt?"), "{message}");
    assert!(message.contains("the last answer was refused"), "{message}");
    // `cancel` (the form dismissed) leaves the question open.
    update(client, &id, json!({"input-1": {"action": "cancel"}})).await;
    assert_eq!(store.get(&id).unwrap().status, Status::InputRequired);
    // An unknown key is ignored.
    update(
        client,
        &id,
        json!({"nope": {"action": "accept", "content": {"confirm": true}}}),
    )
    .await;
    assert_eq!(store.get(&id).unwrap().status, Status::InputRequired);
    update(
        client,
        &id,
        json!({"input-1": {"action": "accept", "content": {"confirm": true}}}),
    )
    .await;
    let after = store.get(&id).unwrap();
    assert_eq!(after.status, Status::Working);
    assert_eq!(after.input_value, Some(json!({"confirm": true})));
    // A second round has a new key; the old one is stale and ignored.
    store
        .request_input(&id, schema.clone(), Some("Really?".into()), WORKER)
        .unwrap();
    let t = get(client, &id).await;
    let TaskPayload::InputRequired { input_requests } = &t.payload else {
        panic!("{t:?}")
    };
    assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["input-2"]);
    update(
        client,
        &id,
        json!({"input-1": {"action": "accept", "content": {"confirm": false}}}),
    )
    .await;
    assert_eq!(
        store.get(&id).unwrap().status,
        Status::InputRequired,
        "a stale key is ignored"
    );
    // `decline`: the task ends cancelled.
    update(client, &id, json!({"input-2": {"action": "decline"}})).await;
    assert_eq!(store.get(&id).unwrap().status, Status::Cancelled);
    assert_eq!(get(client, &id).await.status(), TaskStatus::Cancelled);

    // Two questions at once, answered one at a time.
    let id = create(client, "multi_input", json!({})).await;
    let part = json!({"type": "object", "properties": {"value": {"type": "string"}}});
    let multi = json!({
        "type": "object",
        "properties": {"a": part, "b": part},
        "required": ["a", "b"],
        "x-mcp-input-requests": {"a": {"message": "A?"}, "b": {"message": "B?"}},
    });
    store.request_input(&id, multi, None, WORKER).unwrap();
    let t = get(client, &id).await;
    let TaskPayload::InputRequired { input_requests } = &t.payload else {
        panic!("{t:?}")
    };
    assert_eq!(
        input_requests.keys().collect::<Vec<_>>(),
        ["input-1.a", "input-1.b"]
    );
    update(
        client,
        &id,
        json!({"input-1.a": {"action": "accept", "content": {"value": "x"}}}),
    )
    .await;
    let t = get(client, &id).await;
    let TaskPayload::InputRequired { input_requests } = &t.payload else {
        panic!("{t:?}")
    };
    assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["input-1.b"]);
    update(
        client,
        &id,
        json!({"input-1.b": {"action": "accept", "content": {"value": "y"}}}),
    )
    .await;
    let after = store.get(&id).unwrap();
    assert_eq!(after.status, Status::Working);
    assert_eq!(
        after.input_value,
        Some(json!({"a": {"value": "x"}, "b": {"value": "y"}}))
    );

    // tasks/cancel of a working task.
    let id = create(client, "slow_compute", json!({})).await;
    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    assert_eq!(get(client, &id).await.status(), TaskStatus::Cancelled);

    // Unknown ids, and a prefix of a real one, are -32602.
    let e = client
        .get_task(GetTaskParams::new("00000000-0000-4000-8000-000000000000"))
        .await
        .unwrap_err();
    assert_eq!(code(e), ErrorCode::INVALID_PARAMS);
    let e = client
        .get_task(GetTaskParams::new(id[..8].to_string()))
        .await
        .unwrap_err();
    assert_eq!(
        code(e),
        ErrorCode::INVALID_PARAMS,
        "a prefix is not a handle"
    );
    let e = client
        .cancel_task(CancelTaskParams::new("nope"))
        .await
        .unwrap_err();
    assert_eq!(code(e), ErrorCode::INVALID_PARAMS);

    // tasks/list and tasks/result do not exist.
    for method in ["tasks/list", "tasks/result"] {
        let r = client
            .send_request(ClientRequest::CustomRequest(CustomRequest::new(
                method,
                Some(json!({"taskId": id})),
            )))
            .await;
        assert_eq!(
            code(r.unwrap_err()),
            ErrorCode::METHOD_NOT_FOUND,
            "{method}"
        );
    }

    // Arguments that fail the input schema: an error, and no task.
    let before = store.list(&[]).unwrap().len();
    match client
        .call_tool_once(call("slow_compute", json!({"seconds": "soon"})))
        .await
        .unwrap()
    {
        CallToolResponse::Complete(r) => {
            assert_eq!(r.is_error, Some(true));
            let text = serde_json::to_string(&r.content).unwrap();
            assert!(text.contains("/seconds"), "{text}");
        }
        other => panic!("expected a tool error, got {other:?}"),
    }
    assert_eq!(
        store.list(&[]).unwrap().len(),
        before,
        "no task was created"
    );
    let e = client
        .call_tool_once(call("no_such_tool", json!({})))
        .await
        .unwrap_err();
    assert_eq!(code(e), ErrorCode::INVALID_PARAMS);

    // A client without the extension: a required-task tool is -32021, and
    // so is every tasks/* method.
    let e = plain
        .call_tool_once(call("failing_job", json!({})))
        .await
        .unwrap_err();
    assert_eq!(code(e), ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
    let e = plain
        .get_task(GetTaskParams::new(id.clone()))
        .await
        .unwrap_err();
    assert_eq!(code(e), ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
    // An optional one waits for the result inline (here the test works it).
    let worker = {
        let dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || {
            let store = open(&dir);
            let found = common::wait_for(Duration::from_secs(60), || {
                store
                    .list(&[Status::Working])
                    .ok()?
                    .into_iter()
                    .find(|t| t.title.as_deref() == Some("slow_compute inline"))
            })
            .expect("the inline call's task appears");
            store
                .complete(&found.task_id, json!("done inline"), WORKER)
                .unwrap();
        })
    };
    match plain
        .call_tool_once(call("slow_compute", json!({"label": "inline"})))
        .await
        .unwrap()
    {
        CallToolResponse::Complete(r) => {
            assert_eq!(r.is_error, Some(false));
            assert!(
                serde_json::to_string(&r.content)
                    .unwrap()
                    .contains("done inline")
            );
        }
        other => panic!("expected the result inline, got {other:?}"),
    }
    worker.await.unwrap();

    // An ask before the task: input_required with no task, then a task
    // whose request carries the answer.
    let before = store.list(&[]).unwrap().len();
    match client
        .call_tool_once(call("test_tool_with_task", json!({})))
        .await
        .unwrap()
    {
        CallToolResponse::InputRequired(r) => {
            let requests = r.input_requests.expect("input requests");
            assert!(requests.contains_key("user_name"));
        }
        other => panic!("expected input_required, got {other:?}"),
    }
    assert_eq!(store.list(&[]).unwrap().len(), before);
    let mut p = call("test_tool_with_task", json!({}));
    p.input_responses = Some(
        [(
            "user_name".to_string(),
            json!({"action": "accept", "content": {"name": "Alice"}}),
        )]
        .into_iter()
        .collect(),
    );
    let CallToolResponse::Task(t) = client.call_tool_once(p).await.unwrap() else {
        panic!("a task on the second round")
    };
    let stored = store.get(&t.task.task_id).unwrap();
    assert_eq!(
        stored.request,
        Some(json!({"_inputs": {"user_name": {"name": "Alice"}}}))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn over_stdio_every_method_status_and_error() {
    let dir = tempfile::tempdir().unwrap();
    let client = stdio_client(dir.path(), true).await;
    let plain = stdio_client(dir.path(), false).await;
    let discovered = client.peer_info().expect("server info");
    let caps = serde_json::to_value(&discovered.capabilities).unwrap();
    assert!(
        caps["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "the extension is advertised: {caps}"
    );
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 7);
    the_whole_surface(&client, &plain, dir.path()).await;
    client.cancel().await.unwrap();
    plain.cancel().await.unwrap();
}

/// Secret answers (issue 32 item 5): a secret question is not asked by
/// form elicitation (MCP forbids sensitive information there) and says so;
/// once answered in rudder, no answer of `rudder mcp` shows the value; a
/// tool's arguments that fail its schema are refused without quoting a
/// secret argument.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn secret_answers_never_show_over_mcp() {
    const SECRET: &str = "zq7-tiny";
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        r#"[[tool]]
name = "login"
description = "Logs in with an API key"
task = "required"
input_schema = { type = "object", properties = { user = { type = "string" }, api_key = { type = "string", writeOnly = true, minLength = 12 } } }
"#,
    )
    .unwrap();
    let client = stdio_client_of(dir.path(), &tools.display().to_string(), true).await;

    // Refused arguments: the secret one is masked, the others quoted.
    let refused = client
        .call_tool_once(call("login", json!({"user": 7, "api_key": SECRET})))
        .await
        .expect("tools/call");
    let text = format!("{refused:?}");
    assert!(!text.contains(SECRET), "{text}");
    assert!(text.contains("••••"), "{text}");
    assert!(text.contains("7 is not of type"), "{text}");

    // A secret question: no form, and the message says why.
    let id = create(&client, "login", json!({"user": "ann"})).await;
    let store = open(dir.path());
    let schema = json!({"type": "object", "properties": {
        "otp": {"type": "string", "format": "password"}}});
    store
        .request_input(&id, schema, Some("One-time code?".into()), WORKER)
        .unwrap();
    let t = get(&client, &id).await;
    let TaskPayload::InputRequired { input_requests } = &t.payload else {
        panic!("{t:?}")
    };
    assert!(input_requests.is_empty(), "{t:?}");
    let message = t.task.status_message.clone().unwrap_or_default();
    assert!(message.contains("it is secret"), "{message}");
    store
        .provide_input(&id, json!({"otp": SECRET}), None)
        .unwrap();
    store.complete(&id, json!({"ok": true}), WORKER).unwrap();
    let done = serde_json::to_string(&get(&client, &id).await).unwrap();
    assert!(!done.contains(SECRET), "{done}");
    // The store keeps it, for the worker.
    assert_eq!(
        store.get(&id).unwrap().input_value,
        Some(json!({"otp": SECRET}))
    );
    client.cancel().await.unwrap();
}

/// A 2025-11-25 client (`initialize`) gets plain tools, even if it says
/// it takes tasks: the extension is served on the 2026 protocol only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_legacy_client_gets_plain_tools() {
    let dir = tempfile::tempdir().unwrap();
    let transport =
        TokioChildProcess::new(rudder_mcp(dir.path(), FIXTURES)).expect("spawn rudder mcp");
    let legacy = mcp::config(true)
        .with_protocol_version(rmcp::model::ProtocolVersion::V_2025_11_25)
        .serve(transport)
        .await
        .expect("a legacy client connects");
    let e = legacy
        .call_tool_once(call("failing_job", json!({})))
        .await
        .unwrap_err();
    assert_eq!(code(e), ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
    let worker = {
        let dir = dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            let store = open(&dir);
            let found = common::wait_for(Duration::from_secs(60), || {
                // The server creates the store with the call's task: until
                // then there is nothing (or not yet a database) to read.
                store.list(&[Status::Working]).ok()?.into_iter().next()
            })
            .expect("the call's task appears");
            store
                .complete(&found.task_id, json!("plain"), WORKER)
                .unwrap();
        })
    };
    match legacy
        .call_tool_once(call("slow_compute", json!({})))
        .await
        .unwrap()
    {
        CallToolResponse::Complete(r) => {
            assert!(serde_json::to_string(&r.content).unwrap().contains("plain"))
        }
        other => panic!("expected a plain result, got {other:?}"),
    }
    worker.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn over_http_every_method_status_and_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = http_server(dir.path(), "127.0.0.1:0", &[]).await;
    let client = http_client(&server.url, true).await;
    let plain = http_client(&server.url, false).await;
    the_whole_surface(&client, &plain, dir.path()).await;
    drop(server);
}

/// SIGKILL the server, start it again on the same address: the task is
/// answered with the same id, and a worker that kept going is seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_server_answers_every_task_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = http_server(dir.path(), "127.0.0.1:0", &[]).await;
    let client = http_client(&server.url, true).await;
    let id = create(&client, "confirm_delete", json!({"filename": "b"})).await;
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    server.child.start_kill().unwrap();
    server.child.wait().await.unwrap();
    drop(client);
    // Meanwhile the worker goes on: it asks its question.
    let store = open(dir.path());
    let schema = json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}});
    store
        .request_input(&id, schema, Some("Delete b?".into()), WORKER)
        .unwrap();
    let server = http_server(dir.path(), &addr, &[]).await;
    assert_eq!(server.url, format!("http://{addr}/mcp"));
    let client = http_client(&server.url, true).await;
    let t = get(&client, &id).await;
    assert_eq!(t.task.task_id, id);
    assert_eq!(t.status(), TaskStatus::InputRequired);
    update(
        &client,
        &id,
        json!({"input-1": {"action": "accept", "content": {"confirm": true}}}),
    )
    .await;
    store.complete(&id, json!("deleted"), WORKER).unwrap();
    let t = get(&client, &id).await;
    assert_eq!(t.status(), TaskStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_started_again_answers_the_same_id() {
    let dir = tempfile::tempdir().unwrap();
    let client = stdio_client(dir.path(), true).await;
    let id = create(&client, "slow_compute", json!({})).await;
    drop(client);
    open(dir.path()).complete(&id, json!("ok"), WORKER).unwrap();
    let client = stdio_client(dir.path(), true).await;
    assert_eq!(get(&client, &id).await.status(), TaskStatus::Completed);
    // `get` and its JSON say where the task came from.
    let store = store_url(dir.path());
    let human = common::run(&store, &["get", &id]);
    assert_eq!(human.code, 0, "{human:?}");
    assert!(
        human
            .stdout
            .contains("tool slow_compute, client rudder-test-client 7.1"),
        "{}",
        human.stdout
    );
    let json = common::run(&store, &["get", &id, "--json"]).json();
    assert_eq!(
        json["origin"],
        json!({"tool": "slow_compute", "client": {"name": "rudder-test-client", "version": "7.1"}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_face_refuses_what_it_must() {
    let dir = tempfile::tempdir().unwrap();
    // A non-loopback address without a token: exit 2, nothing served.
    let out = common::rudder()
        .env_remove("RUDDER_MCP_TOKEN")
        .args(["--store", &sqlite(dir.path()), "mcp", "--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs a bearer token"), "{stderr}");

    let token = "s3cret-token-0123456789";
    let server = http_server(dir.path(), "0.0.0.0:0", &[("RUDDER_MCP_TOKEN", token)]).await;
    let port = server
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/mcp")
        .to_string();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let get_task = mcp::request(
        "tasks/get",
        json!({"taskId": "00000000-0000-4000-8000-000000000000"}),
    );
    // No token, a wrong token: 401.
    let r = post(&url, &get_task)
        .header("mcp-method", "tasks/get")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = post(&url, &get_task)
        .bearer_auth("wrong-token-0123456789")
        .header("mcp-method", "tasks/get")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: Value = r.json().await.unwrap();
    assert!(body["error"]["code"].is_i64(), "a JSON-RPC error: {body}");
    // A foreign Origin: 403.
    let r = post(&url, &get_task)
        .bearer_auth(token)
        .header("origin", "http://evil.example")
        .header("mcp-method", "tasks/get")
        .header("mcp-name", "00000000-0000-4000-8000-000000000000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // Mcp-Name that does not match the body: 400, -32020.
    let r = post(&url, &get_task)
        .bearer_auth(token)
        .header("mcp-method", "tasks/get")
        .header("mcp-name", "another-task")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32020, "{body}");
    // An oversized body: 413.
    let huge = "x".repeat(rudder::mcp::http::MAX_BODY + 1);
    let r = post(
        &url,
        &mcp::request(
            "tools/call",
            json!({"name": "greet", "arguments": {"name": huge}}),
        ),
    )
    .bearer_auth(token)
    .header("mcp-method", "tools/call")
    .header("mcp-name", "greet")
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 413);
    // Malformed JSON: a JSON-RPC error, and the server still serves.
    let r = post(&url, "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\":")
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_client_error(), "{}", r.status());
    let body: Value = r.json().await.unwrap();
    assert!(body["error"]["code"].is_i64(), "{body}");
    // The right token and headers: the unknown task is -32602.
    let r = post(&url, &get_task)
        .bearer_auth(token)
        .header("mcp-method", "tasks/get")
        .header("mcp-name", "00000000-0000-4000-8000-000000000000")
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    assert!(text.contains("-32602"), "{text}");
    drop(server);
}

#[test]
fn a_catalogue_that_cannot_be_used_is_exit_2_with_file_line_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        "[[tool]]\nname = \"a\"\n\n[[tool]]\nname = \"b\"\nkind = \"a\"\n",
    )
    .unwrap();
    let out = common::rudder()
        .args(["--store", &sqlite(dir.path()), "mcp", "--tools"])
        .arg(&tools)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:6:8: kind \"a\" is named twice",
            tools.display()
        )),
        "{stderr}"
    );
}

/// A store task of the tool `slow_compute`, as a worker would see it.
fn stored_task(dir: &Path, title: &str) -> String {
    open(dir)
        .create(rudder::store::NewTask {
            title: Some(title.into()),
            kind: Some("slow_compute".into()),
            ..Default::default()
        })
        .unwrap()
        .task
        .task_id
}

/// `subscriptions/listen` over stdio: the listener names one task; a change
/// another process makes to it (`rudder complete`) arrives as
/// `notifications/tasks` carrying the task as `tasks/get` shows it, and a
/// change to a task it did not name never does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_hears_of_its_tasks_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let followed = stored_task(dir.path(), "followed");
    let other = stored_task(dir.path(), "other");
    let mut raw = RawStdio::start(rudder_mcp(dir.path(), FIXTURES));
    let discovered = raw.request(json!(1), "server/discover", json!({})).await;
    assert!(discovered["result"].is_object(), "{discovered}");

    // Without the extension: -32021, as the extension says.
    let plain = json!({
        "jsonrpc": "2.0", "id": "plain", "method": "subscriptions/listen",
        "params": {
            "notifications": {"taskIds": [followed]},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    raw.send(&plain.to_string()).await;
    let (refused, _) = raw.until(|m| m["id"] == "plain").await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");

    let unknown = "00000000-0000-4000-8000-000000000000";
    let mut listen: Value = serde_json::from_str(&mcp::request(
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [followed, unknown]}}),
    ))
    .unwrap();
    listen["id"] = json!("listen-1");
    raw.send(&listen.to_string()).await;
    let (ack, _) = raw
        .until(|m| is_notification(m, "notifications/subscriptions/acknowledged"))
        .await;
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([followed, unknown]),
        "the tasks it follows: {ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );

    // Another process changes the other task first, then the followed one.
    let store = store_url(dir.path());
    let done = common::run(&store, &["complete", &other, "--result", "\"not heard\""]);
    assert_eq!(done.code, 0, "{done:?}");
    // A result a worker wrote as a CallToolResult (as the fixture worker does).
    let done = common::run(
        &store,
        &[
            "complete",
            &followed,
            "--result",
            r#"{"content": [{"type": "text", "text": "heard"}]}"#,
        ],
    );
    assert_eq!(done.code, 0, "{done:?}");
    let (heard, before) = raw
        .until(|m| {
            is_notification(m, "notifications/tasks") && m["params"]["status"] == "completed"
        })
        .await;
    let params = &heard["params"];
    assert_eq!(
        params["taskId"],
        followed.as_str(),
        "only the followed task: {heard}"
    );
    // Before it: the followed task as it was when the listen began.
    let earlier: Vec<&Value> = before
        .iter()
        .filter(|m| is_notification(m, "notifications/tasks"))
        .collect();
    assert!(
        earlier
            .iter()
            .all(|m| m["params"]["taskId"] == followed.as_str()
                && m["params"]["status"] == "working"),
        "{earlier:?}"
    );
    assert_eq!(params["result"]["content"][0]["text"], "heard");
    // A finished task's result is a complete CallToolResult, as the
    // extension's clients require (they refuse it otherwise).
    assert_eq!(params["result"]["resultType"], "complete", "{heard}");
    assert_eq!(
        params["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    // The same task as tasks/get shows it.
    let got = raw
        .request(json!(2), "tasks/get", json!({"taskId": followed}))
        .await;
    for field in ["taskId", "status", "createdAt", "lastUpdatedAt", "result"] {
        assert_eq!(got["result"][field], params[field], "{field}");
    }

    // Cancelled, the listen ends; the server goes on answering.
    raw.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": "listen-1"}})
        .to_string(),
    )
    .await;
    let got = raw
        .request(json!(3), "tasks/get", json!({"taskId": other}))
        .await;
    assert_eq!(got["result"]["status"], "completed", "{got}");
}

/// The same over Streamable HTTP: the listen request's answer is an SSE
/// stream carrying the acknowledgement, then the task's notifications.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_hears_of_its_tasks_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let followed = stored_task(dir.path(), "followed");
    let other = stored_task(dir.path(), "other");
    let server = http_server(dir.path(), "127.0.0.1:0", &[]).await;
    let mut stream = post(
        &server.url,
        &mcp::request(
            "subscriptions/listen",
            json!({"notifications": {"taskIds": [followed]}}),
        ),
    )
    .header("mcp-method", "subscriptions/listen")
    .send()
    .await
    .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(
        stream.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut events = SseEvents::default();
    let ack = events
        .until(&mut stream, |m| {
            is_notification(m, "notifications/subscriptions/acknowledged")
        })
        .await;
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([followed]));

    let store = store_url(dir.path());
    let done = common::run(&store, &["complete", &other, "--result", "1"]);
    assert_eq!(done.code, 0, "{done:?}");
    let done = common::run(&store, &["complete", &followed, "--result", "{\"n\": 2}"]);
    assert_eq!(done.code, 0, "{done:?}");
    let heard = events
        .until(&mut stream, |m| {
            is_notification(m, "notifications/tasks") && m["params"]["status"] == "completed"
        })
        .await;
    assert_eq!(heard["params"]["taskId"], followed.as_str(), "{heard}");
    assert_eq!(heard["params"]["status"], "completed");
    assert_eq!(
        heard["params"]["result"]["structuredContent"],
        json!({"n": 2})
    );
    drop(stream);
    drop(server);
}

/// `rudder demo --mcp` keeps the loopback rule of `rudder mcp --http`: a
/// non-loopback address without a token is exit 2, before the demo writes
/// anything (its store is not even created).
#[test]
fn the_demo_refuses_a_non_loopback_mcp_address_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("demo.json");
    let out = common::rudder()
        .env_remove("RUDDER_MCP_TOKEN")
        .arg("--store")
        .arg(&store)
        .args(["demo", "--mcp", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--mcp 0.0.0.0:0"), "{stderr}");
    assert!(stderr.contains("needs a bearer token"), "{stderr}");
    assert!(!store.exists(), "nothing written");
}

/// A worker's own `CallToolResult` (as `examples/mcp_fixture_worker.rs`
/// writes it) and a tool error reach `tasks/get` as complete results: the
/// extension's clients refuse a `result` without `resultType`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_written_result_is_a_complete_call_tool_result() {
    let dir = tempfile::tempdir().unwrap();
    let done = stored_task(dir.path(), "done");
    let broken = stored_task(dir.path(), "broken");
    {
        let store = open(dir.path());
        store
            .complete(
                &done,
                json!({"content": [{"type": "text", "text": "Hello, Ada!"}]}),
                WORKER,
            )
            .unwrap();
        store.fail(&broken, "disk full", WORKER).unwrap();
    }
    let mut raw = RawStdio::start(rudder_mcp(dir.path(), FIXTURES));
    for (n, id) in [&done, &broken].into_iter().enumerate() {
        let got = raw
            .request(json!(n + 10), "tasks/get", json!({"taskId": id}))
            .await;
        let result = &got["result"]["result"];
        assert_eq!(got["result"]["status"], "completed", "{got}");
        assert_eq!(result["resultType"], "complete", "{got}");
        assert!(result["content"][0]["type"].is_string(), "{got}");
    }
}

/// Clients without the extension, each waiting inline for its tool, never
/// take the request slots: with more of them waiting than there are slots,
/// `tasks/get` and `tasks/cancel` are still served, and a call beyond the
/// inline budget is refused at once, creating nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_clients_never_lock_out_tasks_requests() {
    use rudder::mcp::server::MAX_INLINE_WAITS;
    // More waiting clients than request slots.
    const { assert!(MAX_INLINE_WAITS > rudder::mcp::http::MAX_CONCURRENT) };
    let dir = tempfile::tempdir().unwrap();
    let followed = stored_task(dir.path(), "followed");
    let server = http_server(dir.path(), "127.0.0.1:0", &[]).await;
    let slow = mcp::plain_request(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {}}),
    );
    let working = |dir: PathBuf, n: usize| {
        tokio::task::spawn_blocking(move || {
            let store = open(&dir);
            common::wait_for(Duration::from_secs(60), || {
                let got = store.list(&[Status::Working]).ok()?.len();
                (got == n).then_some(got)
            })
        })
    };
    // They come a few at a time (as clients do; at once, those beyond the
    // free slots are 503 before any has begun to wait), and each round
    // waits before the next comes.
    let mut waiting = Vec::new();
    for round in 0..MAX_INLINE_WAITS / 16 {
        for _ in 0..16 {
            let request = post(&server.url, &slow)
                .header("mcp-method", "tools/call")
                .header("mcp-name", "slow_compute");
            waiting.push(tokio::spawn(async move { request.send().await }));
        }
        let n = 16 * (round + 1) + 1;
        let got = working(dir.path().to_path_buf(), n).await.unwrap();
        assert_eq!(got, Some(n), "every call of round {round} is waiting");
    }
    assert!(waiting.iter().all(|w| !w.is_finished()));

    let get = post(
        &server.url,
        &mcp::request("tasks/get", json!({"taskId": followed})),
    )
    .header("mcp-method", "tasks/get")
    .header("mcp-name", &followed)
    .send()
    .await
    .unwrap();
    assert_eq!(get.status(), 200);
    let text = get.text().await.unwrap();
    assert!(text.contains("\"working\""), "{text}");
    let cancel = post(
        &server.url,
        &mcp::request("tasks/cancel", json!({"taskId": followed})),
    )
    .header("mcp-method", "tasks/cancel")
    .header("mcp-name", &followed)
    .send()
    .await
    .unwrap();
    assert_eq!(cancel.status(), 200);
    assert_eq!(
        open(dir.path()).get(&followed).unwrap().status,
        Status::Cancelled
    );

    // One more inline wait: refused, nothing created.
    let refused = post(&server.url, &slow)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "slow_compute")
        .send()
        .await
        .unwrap();
    let text = refused.text().await.unwrap();
    assert!(text.contains("-32000") && text.contains("limit"), "{text}");
    assert_eq!(
        open(dir.path()).list(&[Status::Working]).unwrap().len(),
        MAX_INLINE_WAITS
    );
    for w in waiting {
        w.abort();
    }
    drop(server);
}

/// A legacy `initialize` over HTTP.
fn legacy_initialize(url: &str) -> reqwest::RequestBuilder {
    mcp::http_post(url).body(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "legacy", "version": "1"}}})
        .to_string(),
    )
}

/// A ping in a legacy session: its HTTP status.
async fn legacy_ping(url: &str, session: &str) -> u16 {
    mcp::http_post(url)
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", session)
        .body(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Legacy sessions are bounded: one more than the cap closes the one used
/// least recently (its client gets 404 and initializes again), and the
/// sessions in use go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sessions_are_bounded() {
    use rudder::mcp::sessions::MAX_SESSIONS;
    let dir = tempfile::tempdir().unwrap();
    let server = http_server(dir.path(), "127.0.0.1:0", &[]).await;
    let mut sessions = Vec::new();
    for _ in 0..MAX_SESSIONS + 1 {
        let r = legacy_initialize(&server.url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let id = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
        let _ = r.text().await;
        let initialized = mcp::http_post(&server.url)
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", &id)
            .body(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
            .send()
            .await
            .unwrap();
        assert!(initialized.status().is_success());
        sessions.push(id);
        if sessions.len() == 2 {
            // The second one stays in use: the first is the oldest.
            assert_eq!(legacy_ping(&server.url, &sessions[0]).await, 200);
        }
    }
    assert_eq!(
        legacy_ping(&server.url, &sessions[1]).await,
        404,
        "the least recently used is closed"
    );
    assert_eq!(legacy_ping(&server.url, &sessions[0]).await, 200);
    assert_eq!(legacy_ping(&server.url, &sessions[MAX_SESSIONS]).await, 200);
    drop(server);
}

/// Over stdio a request line over the limit is answered with an error that
/// names the limit (and the request's id), said on stderr, and the server
/// goes on.
#[test]
fn a_request_line_over_the_limit_is_answered() {
    use std::io::{BufRead, Write};
    let dir = tempfile::tempdir().unwrap();
    let limit = rudder::mcp::listen::MAX_LINE;
    let mut child = common::rudder()
        .args(["--store", &sqlite(dir.path()), "mcp", "--tools", FIXTURES])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        // Longer than rmcp's own limit too, which drops such a line unanswered.
        let huge = "x".repeat(limit.max(11 << 20));
        let mut call: Value = serde_json::from_str(&mcp::request(
            "tools/call",
            json!({"name": "greet", "arguments": {"name": huge}}),
        ))
        .unwrap();
        call["id"] = json!(9);
        writeln!(stdin, "{call}").unwrap();
        writeln!(stdin, "{}", mcp::request("server/discover", json!({}))).unwrap();
        stdin.flush().unwrap();
        stdin
    });
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut answers = Vec::new();
    for _ in 0..2 {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        answers.push(serde_json::from_str::<Value>(&line).expect("a JSON answer"));
    }
    drop(writer.join().unwrap());
    // Each answer by its id: the refusal is queued as the line is read
    // away, and the next request's answer may overtake it.
    let by_id = |id: i64| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer with id {id}: {answers:?}"))
    };
    let refused = by_id(9);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains(&limit.to_string()), "{message}");
    let discovered = answers
        .iter()
        .find(|a| a["id"] != 9)
        .expect("the next answer");
    assert!(discovered["result"].is_object(), "{discovered}");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refused a request line") && stderr.contains(&limit.to_string()),
        "{stderr}"
    );
}

/// `rudder mcp --http 127.0.0.1:0 --token-file FILE`, stderr piped.
fn with_token_file(dir: &Path, file: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.env_remove("RUDDER_STORE")
        .env_remove("RUDDER_MCP_TOKEN")
        .args([
            "--store",
            &sqlite(dir),
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--token-file",
        ])
        .arg(file)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    cmd
}

/// A token file group or others may read is refused, naming the fix; a
/// private one is used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_file_others_may_read_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let token = "file-token-0123456789abcdef";
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = with_token_file(dir.path(), &file)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    // A server that took the file would serve until killed.
    let out = tokio::time::timeout(Duration::from_secs(60), refused)
        .await
        .expect("refused at once, not served")
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("chmod 600 {}", file.display())) && stderr.contains("644"),
        "{stderr}"
    );
    assert!(!stderr.contains(token), "{stderr}");
    assert!(!store_url(dir.path()).exists(), "nothing was written");

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = mcp::listen(with_token_file(dir.path(), &file)).await;
    let url = server.url.clone();
    let r = post(&url, &mcp::request("server/discover", json!({})))
        .header("mcp-method", "server/discover")
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// A body that is not JSON is 400 with -32700 (parse error), and JSON that
/// is not a JSON-RPC message is 400 with -32600, as the transport asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_is_not_json_is_a_parse_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = http_server(dir.path(), "127.0.0.1:0", &[]).await;
    for (body, code) in [
        ("this is not json", -32700),
        ("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\":", -32700),
        ("{\"hello\": 1}", -32600),
    ] {
        let r = post(&server.url, body).send().await.unwrap();
        assert_eq!(r.status(), 400, "{body}");
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
    }
    drop(server);
}

/// `docs/mcp.md`'s walkthrough, exactly as written, with `rudder` on the
/// PATH in an empty directory: the question asked before the task exists,
/// answered by the same `tools/call` with `inputResponses`; the worker's
/// question answered with `tasks/update`; the result as `tasks/get` shows it.
#[test]
fn the_mcp_walkthrough_runs_as_written() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/mcp.md"))
        .expect("docs/mcp.md");
    let script = common::walkthrough(&doc);
    assert!(script.contains("inputResponses"), "{script}");
    let dir = tempfile::tempdir().unwrap();
    let out = common::run_walkthrough(&script, dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("task "))
        .expect("the task line");
    assert!(uuid::Uuid::parse_str(id).is_ok(), "a task id: {stdout}");
    let json: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let [asked, request, waiting, ack, answer, done] = &json[..] else {
        panic!("six JSON answers: {stdout}");
    };
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    assert!(asked["inputRequests"]["user_name"].is_object(), "{asked}");
    assert_eq!(request["_inputs"]["user_name"]["name"], "Ada", "{request}");
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    assert!(waiting["inputRequests"]["input-1"].is_object(), "{waiting}");
    assert_eq!(ack, &json!({"resultType": "complete"}));
    assert_eq!(answer, &json!({"service": "payments"}));
    assert_eq!(done["taskId"], id);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["cause"],
        "a full disk on payments-db-2"
    );
}
