//! A client of `rudder mcp` for the tests that run it: rmcp's own over
//! stdio or Streamable HTTP (the 2026-07-28 lifecycle, with or without the
//! Tasks extension) and its task calls; the wire spoken by hand where
//! rmcp's client cannot (requests with their per-request metadata, HTTP
//! posts, the messages of an SSE stream, a line-by-line client over
//! stdio); a `rudder mcp --http` child and the URL it listens on.
//!
//! The binary is the caller's (`CARGO_BIN_EXE_rudder` is set for the root
//! package's tests only): what starts a server takes its command.

use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, DetailedTask,
    ErrorCode, GetTaskParams, Implementation, UpdateTaskParams,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService, ServiceError,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

/// A client of `rudder mcp`.
pub type Client = RunningService<RoleClient, ClientConfig>;

/// The protocol version the Tasks extension is served on.
pub const PROTOCOL: &str = "2026-07-28";

/// The name and version the clients of [`config`] give (`clientInfo`):
/// a task created through one names them as its origin.
pub const CLIENT: (&str, &str) = ("rudder-test-client", "7.1");

/// How long a test waits for an answer, a message or a state.
const DEADLINE: Duration = Duration::from_secs(60);

/// A client's configuration: [`CLIENT`], with the Tasks extension if `tasks`.
pub fn config(tasks: bool) -> ClientConfig {
    let caps = if tasks {
        ClientCapabilities::builder().enable_tasks().build()
    } else {
        ClientCapabilities::default()
    };
    ClientConfig::new(caps, Implementation::new(CLIENT.0, CLIENT.1))
}

/// A client of the 2026-07-28 protocol (`server/discover`, per-request
/// metadata), the era the Tasks extension is served on, over `transport`.
pub async fn connect<T, E, A>(config: ClientConfig, transport: T) -> Client
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    config
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("client connects")
}

/// A client of `cmd` (a `rudder mcp` over stdio), with the Tasks extension
/// if `tasks`.
pub async fn stdio(cmd: tokio::process::Command, tasks: bool) -> Client {
    let transport = TokioChildProcess::new(cmd).expect("spawn rudder mcp");
    connect(config(tasks), transport).await
}

/// A client of the `rudder mcp --http` at `url`, with the Tasks extension
/// if `tasks`.
pub async fn http(url: &str, tasks: bool) -> Client {
    tls();
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    connect(config(tasks), transport).await
}

/// A `tools/call` of `name` with the arguments `args` (an object).
pub fn call(name: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    CallToolRequestParams::new(name.to_string()).with_arguments(args)
}

/// The task a `tools/call` of `name` created (panics if it answered
/// anything else).
pub async fn call_task(client: &Client, name: &str, args: Value) -> rmcp::model::Task {
    match client
        .call_tool_once(call(name, args))
        .await
        .expect("tools/call")
    {
        CallToolResponse::Task(t) => t.task,
        other => panic!("expected a task, got {other:?}"),
    }
}

/// `tasks/get` of `id`.
pub async fn get(client: &Client, id: &str) -> DetailedTask {
    client
        .get_task(GetTaskParams::new(id.to_string()))
        .await
        .expect("tasks/get")
        .task
}

/// Poll `tasks/get` of `id` until `done` holds (at most a minute; `what`
/// says what was awaited).
pub async fn until(
    client: &Client,
    id: &str,
    what: &str,
    done: impl Fn(&DetailedTask) -> bool,
) -> DetailedTask {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let task = get(client, id).await;
        if done(&task) {
            return task;
        }
        assert!(Instant::now() < deadline, "never {what}: {task:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `tasks/update` of `id` with `responses` (an object of input responses).
pub async fn update(client: &Client, id: &str, responses: Value) {
    let Value::Object(o) = responses else {
        panic!("input responses are an object")
    };
    let p = UpdateTaskParams::new(id.to_string(), o.into_iter().collect());
    client.update_task(p).await.expect("tasks/update acks");
}

/// The JSON-RPC error code of a refused request.
pub fn code(e: ServiceError) -> ErrorCode {
    match e {
        ServiceError::McpError(e) => e.code,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

/// rudder-notify's reqwest has rustls without a built-in provider, and
/// Cargo unifies that feature into every reqwest of the tests: the
/// process's default provider is ring, as rudder's own.
pub fn tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A JSON-RPC request (id 1) of the 2026-07-28 protocol, from a client
/// named `raw` that declares the Tasks extension.
pub fn request(method: &str, params: Value) -> String {
    with_meta(
        method,
        params,
        "raw",
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    )
}

/// A JSON-RPC request (id 1) of a 2026-07-28 client named `plain` that
/// did not declare the Tasks extension.
pub fn plain_request(method: &str, params: Value) -> String {
    with_meta(method, params, "plain", json!({}))
}

fn with_meta(method: &str, params: Value, client: &str, capabilities: Value) -> String {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
}

/// A POST to `url` as every MCP client sends it (JSON, answered as JSON
/// or an event stream), with no protocol version: a legacy client's first
/// request, or the start of any other.
pub fn http_post(url: &str) -> reqwest::RequestBuilder {
    tls();
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
}

/// `body` posted to `url` by a client of the 2026-07-28 protocol.
pub fn post(url: &str, body: &str) -> reqwest::RequestBuilder {
    http_post(url)
        .header("mcp-protocol-version", PROTOCOL)
        .body(body.to_string())
}

/// Whether `message` is the notification `method` (no id).
pub fn is_notification(message: &Value, method: &str) -> bool {
    message["method"] == method && message.get("id").is_none()
}

/// The JSON messages of an SSE stream, event by event.
#[derive(Default)]
pub struct SseEvents {
    buffer: String,
}

impl SseEvents {
    /// The next message of `response` that `wanted` takes (within a
    /// minute, the stream open).
    pub async fn until(
        &mut self,
        response: &mut reqwest::Response,
        wanted: impl Fn(&Value) -> bool,
    ) -> Value {
        tokio::time::timeout(DEADLINE, self.next(response, wanted))
            .await
            .expect("the event arrives")
            .expect("the stream stays open")
    }

    /// The next message of `response` that `wanted` takes within `wait`;
    /// `None` if none came by then or the stream ended first.
    pub async fn within(
        &mut self,
        response: &mut reqwest::Response,
        wait: Duration,
        wanted: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        tokio::time::timeout(wait, self.next(response, wanted))
            .await
            .ok()
            .flatten()
    }

    async fn next(
        &mut self,
        response: &mut reqwest::Response,
        wanted: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue;
                }
                let message: Value = serde_json::from_str(&data).expect("JSON data");
                if wanted(&message) {
                    return Some(message);
                }
            }
            let chunk = response.chunk().await.expect("read the stream")?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// A JSON-RPC client of its own over `rudder mcp`'s stdio, line by line:
/// rmcp 3.11's client cannot take `notifications/tasks` (and drops
/// `taskIds`), so the listen tests speak the wire themselves.
pub struct RawStdio {
    _child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl RawStdio {
    /// Start `cmd` (a `rudder mcp` over stdio), its stderr dropped.
    pub fn start(mut cmd: tokio::process::Command) -> RawStdio {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn rudder mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        RawStdio {
            _child: child,
            stdin,
            lines: tokio::io::BufReader::new(stdout).lines(),
        }
    }

    /// Send one message (a line).
    pub async fn send(&mut self, message: &str) {
        use tokio::io::AsyncWriteExt;
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("write to rudder mcp");
        self.stdin.flush().await.expect("flush");
    }

    /// The next message `wanted` takes, and every message read before it.
    pub async fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        tokio::time::timeout(DEADLINE, async {
            loop {
                let line = self
                    .lines
                    .next_line()
                    .await
                    .expect("read stdout")
                    .expect("rudder mcp is still there");
                let message: Value = serde_json::from_str(&line).expect("one JSON value a line");
                if wanted(&message) {
                    return (message, before);
                }
                before.push(message);
            }
        })
        .await
        .expect("the message arrives")
    }

    /// Send a [`request`] with the id `id` and wait for its answer.
    pub async fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        let mut request: Value = serde_json::from_str(&request(method, params)).unwrap();
        request["id"] = id.clone();
        self.send(&request.to_string()).await;
        self.until(|m| m["id"] == id && m.get("method").is_none())
            .await
            .0
    }
}

/// A `rudder mcp --http` child and the URL it listens on; killed when
/// dropped.
pub struct HttpServer {
    pub child: tokio::process::Child,
    pub url: String,
}

/// Start `cmd` (a `rudder mcp --http`) and read where it listens from its
/// stderr (the rest of which is read away).
pub async fn listen(mut cmd: tokio::process::Command) -> HttpServer {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn rudder mcp --http");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next_line()
            .await
            .expect("read stderr")
            .expect("rudder mcp says where it listens");
        if let Some(url) = line.strip_prefix("rudder mcp: listening on ") {
            break url.to_string();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    HttpServer { child, url }
}
