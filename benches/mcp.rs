//! `rudder mcp` over Streamable HTTP on loopback, against a SQLite store of
//! 1M tasks, side by side in the same run with rmcp's own in-memory
//! `TaskManager` server (rmcp's conformance server, built by you: its path
//! in `$RUDDER_MCP_BASELINE`; `benches/scripts/mcp_vs_rmcp.sh` runs this).
//!
//! For 1 and 16 concurrent clients (each its own HTTP connection), and for
//! each server in turn (the order alternates per round):
//!
//! - `create`: `tools/call` answered `CreateTaskResult` (rudder: durable in
//!   SQLite; rmcp: `confirm_delete`, a task parked on one question);
//! - `get`: `tasks/get` of a waiting task (one `elicitation/create` form
//!   request in the answer, on both servers);
//! - `update`: `tasks/update` answering that question (rudder: validated
//!   and written durably; rmcp: handed to the task in memory).
//!
//! Latency median and p99 over every round, requests per second the median
//! of the rounds. Then `notify`: a store write by this process (another
//! process than the server, as a worker's) to the `notifications/tasks` it
//! causes on a `subscriptions/listen` stream, median and p99.
//!
//! The 1M-task database (`benches/common/tasks.rs`'s rich tasks, written in
//! batches of 10,000 through the SQLite backend) is built once under
//! `target/tmp` and reused; each run adds the tasks it creates.
//!
//! Knobs (environment): `RUDDER_MCP_BENCH_TASKS` (store size, 1000000),
//! `RUDDER_MCP_BENCH_OPS` (calls per phase, 320), `RUDDER_MCP_BENCH_ROUNDS`
//! (3), `RUDDER_MCP_BENCH_NOTIFY` (notifications timed, 40),
//! `RUDDER_MCP_BENCH_RUDDER` (the `rudder` binary to time, this build's by
//! default: an A/B of two builds runs the same bench against each).

use rudder::store::Backend as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use rudder::task::Status;
use rudder::{Actor, Store};
use serde_json::{Value, json};

#[path = "common/tasks.rs"]
#[allow(dead_code)]
mod tasks;

const CLIENTS: [usize; 2] = [1, 16];
const OPS: [Op; 3] = [Op::Create, Op::Get, Op::Update];

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Op {
    Create,
    Get,
    Update,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Create => "create (tools/call)",
            Op::Get => "tasks/get",
            Op::Update => "tasks/update",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Side {
    Rudder,
    Rmcp,
}

/// A server under test: a child process killed on drop.
struct Server {
    side: Side,
    url: String,
    _child: tokio::process::Child,
}

/// A waiting task and the key of its open question.
#[derive(Clone)]
struct Waiting {
    id: String,
    key: String,
}

const CATALOGUE: &str = r#"
[[tool]]
name = "diagnose"
description = "Diagnose an incident"
wait = "0s"
poll_interval = "2s"
ttl = "24h"
input_schema = { type = "object", required = ["incident"], properties = { incident = { type = "string" }, service = { type = "string" } } }
"#;

fn main() {
    // `cargo bench` passes `--bench`; a filter is not supported.
    let Some(baseline) = std::env::var_os("RUDDER_MCP_BASELINE").map(PathBuf::from) else {
        eprintln!(
            "mcp bench: set RUDDER_MCP_BASELINE to rmcp's conformance-server binary \
             (benches/scripts/mcp_vs_rmcp.sh BINARY); skipped"
        );
        return;
    };
    let n = knob("RUDDER_MCP_BENCH_TASKS", 1_000_000);
    let ops = knob("RUDDER_MCP_BENCH_OPS", 320);
    let rounds = knob("RUDDER_MCP_BENCH_ROUNDS", 3);
    let notify = knob("RUDDER_MCP_BENCH_NOTIFY", 40);
    let db = fixture(n);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(run(&baseline, &db, ops, rounds, notify));
}

/// The store of at least `n` tasks, built once in the target directory
/// through the SQLite backend, 10,000 tasks a transaction (a JSON file of 1M
/// rich tasks is over the 512 MiB a JSON store may hold, so `rudder copy`
/// cannot take it).
fn fixture(n: usize) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mcp-{n}.db"));
    let have = path.exists()
        && Store::connect(&path)
            .expect("a store URL")
            .counts()
            .map(|c| c.total())
            .unwrap_or(0)
            >= n;
    if !have {
        for ext in ["", "-wal", "-shm", ".lock"] {
            let mut p = path.clone().into_os_string();
            p.push(ext);
            let _ = std::fs::remove_file(p);
        }
        let store = Store::connect(&path).expect("a store URL");
        let started = Instant::now();
        insert(&store, n, |i, now| tasks::rich_task(i, n, now));
        println!(
            "built {n} tasks in {:.1?} at {}",
            started.elapsed(),
            path.display()
        );
    }
    path
}

fn insert(store: &Store, n: usize, make: impl Fn(usize, chrono::DateTime<Utc>) -> rudder::Task) {
    let now = Utc::now();
    for start in (0..n).step_by(10_000) {
        store
            .backend()
            .transaction(&mut |txn| {
                for i in start..(start + 10_000).min(n) {
                    txn.insert(make(i, now))?;
                }
                Ok(true)
            })
            .expect("write the tasks");
    }
}

/// `count` new waiting tasks (a rich task's input schema) for rudder's
/// `tasks/get` and `tasks/update`, written before the timed phases.
fn waiting_tasks(db: &Path, count: usize) -> Vec<String> {
    let store = Store::connect(db).expect("a store URL");
    let made: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    insert(&store, count, |i, now| {
        let mut t = tasks::rich_task(4 + 10 * i, 10 * count + 10, now);
        t.created_at = Some(now);
        t.updated_at = Some(now);
        t.history[0].at = now;
        t.history[1].at = now;
        t.idempotency_key = None;
        assert_eq!(t.status, Status::InputRequired);
        made.lock().expect("ids").push(t.task_id.clone());
        t
    });
    made.into_inner().expect("ids")
}

async fn start_rudder(db: &Path) -> Server {
    let tools = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-bench-tools.toml");
    std::fs::write(&tools, CATALOGUE).expect("write the catalogue");
    let rudder = std::env::var_os("RUDDER_MCP_BENCH_RUDDER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rudder")));
    let mut cmd = tokio::process::Command::new(rudder);
    cmd.env_remove("RUDDER_MCP_TOKEN")
        .arg("--store")
        .arg(format!("sqlite:{}", db.display()))
        .arg("mcp")
        .arg("--tools")
        .arg(&tools)
        .args(["--http", "127.0.0.1:0"]);
    let server = rudder_testkit::mcp::listen(cmd).await;
    Server {
        side: Side::Rudder,
        url: server.url,
        _child: server.child,
    }
}

async fn start_rmcp(binary: &Path) -> Server {
    // It takes its port from $PORT: a free one, found by binding port 0.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = tokio::process::Command::new(binary)
        .env("PORT", port.to_string())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the rmcp conformance server");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let client = {
        tls();
        reqwest::Client::new()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let body = request(1, "server/discover", json!({}));
        if post(&client, &url, "server/discover", None, body)
            .await
            .is_ok()
        {
            break;
        }
        assert!(Instant::now() < deadline, "the rmcp server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Server {
        side: Side::Rmcp,
        url,
        _child: child,
    }
}

/// A JSON-RPC request of the 2026-07-28 protocol: its metadata in `_meta`,
/// declaring the tasks extension.
fn request(id: u64, method: &str, mut params: Value) -> String {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "rudder-mcp-bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

fn builder(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    name: Option<&str>,
    body: String,
) -> reqwest::RequestBuilder {
    let mut b = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        b = b.header("mcp-name", name);
    }
    b.body(body)
}

/// One request; its JSON-RPC result (the answer may come as JSON or as an
/// event stream of one message).
async fn post(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    name: Option<&str>,
    body: String,
) -> Result<Value, String> {
    let r = builder(client, url, method, name, body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = r.status();
    let text = r.text().await.map_err(|e| e.to_string())?;
    let message: Value = match text.trim_start().starts_with('{') {
        true => serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?,
        false => text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("id").is_some())
            .ok_or_else(|| format!("HTTP {status}, no answer in {text:?}"))?,
    };
    match message.get("result") {
        Some(r) => Ok(r.clone()),
        None => Err(format!("HTTP {status}: {message}")),
    }
}

/// What one call of `op` sends: method, `Mcp-Name`, params.
fn call_of(
    side: Side,
    op: Op,
    i: usize,
    target: Option<&Waiting>,
) -> (&'static str, String, Value) {
    match (op, side) {
        (Op::Create, Side::Rudder) => (
            "tools/call",
            "diagnose".into(),
            json!({"name": "diagnose",
                   "arguments": {"incident": format!("INC-{}", 5000 + i), "service": "payments"}}),
        ),
        (Op::Create, Side::Rmcp) => (
            "tools/call",
            "confirm_delete".into(),
            json!({"name": "confirm_delete", "arguments": {"filename": format!("report-{i}.txt")}}),
        ),
        (Op::Get, _) => {
            let t = target.expect("a task");
            ("tasks/get", t.id.clone(), json!({"taskId": t.id}))
        }
        (Op::Update, _) => {
            let t = target.expect("a task");
            let content = match side {
                Side::Rudder => json!({"service": "payments", "window_minutes": 30}),
                Side::Rmcp => json!({"confirm": true}),
            };
            (
                "tasks/update",
                t.id.clone(),
                json!({"taskId": t.id,
                       "inputResponses": {t.key.clone(): {"action": "accept", "content": content}}}),
            )
        }
    }
}

/// Latencies of one phase and its wall time; the tasks it created or read.
struct Phase {
    latencies: Vec<Duration>,
    wall: Duration,
    created: Vec<String>,
    read: Vec<Waiting>,
}

/// `ops` calls of `op` by `clients` concurrent clients, each with its own
/// connection (warmed up by one untimed `server/discover`).
async fn phase(server: &Server, op: Op, clients: usize, ops: usize, targets: &[Waiting]) -> Phase {
    let targets = Arc::new(targets.to_vec());
    let per = ops / clients;
    let start = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let mut handles = Vec::new();
    for c in 0..clients {
        let url = server.url.clone();
        let side = server.side;
        let targets = Arc::clone(&targets);
        let start = Arc::clone(&start);
        handles.push(tokio::spawn(async move {
            let client = {
                tls();
                reqwest::Client::builder()
            }
            .pool_max_idle_per_host(1)
            .build()
            .expect("an HTTP client");
            post(
                &client,
                &url,
                "server/discover",
                None,
                request(0, "server/discover", json!({})),
            )
            .await
            .expect("discover");
            start.wait().await;
            let mut latencies = Vec::with_capacity(per);
            let mut created = Vec::new();
            let mut read = Vec::new();
            for k in 0..per {
                let i = c * per + k;
                let (method, name, params) = call_of(side, op, i, targets.get(i));
                let body = request(i as u64 + 1, method, params);
                let t0 = Instant::now();
                let result = post(&client, &url, method, Some(&name), body)
                    .await
                    .unwrap_or_else(|e| panic!("{side:?} {method}: {e}"));
                latencies.push(t0.elapsed());
                match op {
                    Op::Create => {
                        assert_eq!(result["resultType"], "task", "{side:?}: {result}");
                        created.push(result["taskId"].as_str().expect("taskId").to_string());
                    }
                    Op::Get => {
                        assert_eq!(result["status"], "input_required", "{side:?}: {result}");
                        let key = result["inputRequests"]
                            .as_object()
                            .and_then(|o| o.keys().next().cloned())
                            .expect("an input request");
                        read.push(Waiting {
                            id: result["taskId"].as_str().expect("taskId").to_string(),
                            key,
                        });
                    }
                    Op::Update => {}
                }
            }
            (latencies, created, read)
        }));
    }
    start.wait().await;
    let t0 = Instant::now();
    let mut out = Phase {
        latencies: Vec::new(),
        wall: Duration::ZERO,
        created: Vec::new(),
        read: Vec::new(),
    };
    for h in handles {
        let (l, c, r) = h.await.expect("a client");
        out.latencies.extend(l);
        out.created.extend(c);
        out.read.extend(r);
    }
    out.wall = t0.elapsed();
    out
}

#[derive(Default)]
struct Figures {
    latencies: Vec<Duration>,
    rates: Vec<f64>,
}

impl Figures {
    fn add(&mut self, p: &Phase) {
        self.rates
            .push(p.latencies.len() as f64 / p.wall.as_secs_f64());
        self.latencies.extend(&p.latencies);
    }

    fn median(&self) -> f64 {
        quantile(&self.latencies, 0.5)
    }

    fn p99(&self) -> f64 {
        quantile(&self.latencies, 0.99)
    }

    fn rate(&self) -> f64 {
        let mut r = self.rates.clone();
        r.sort_by(f64::total_cmp);
        r[r.len() / 2]
    }
}

/// The `q` quantile in milliseconds (nearest rank).
fn quantile(values: &[Duration], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1].as_secs_f64() * 1000.0
}

async fn run(baseline: &Path, db: &Path, ops: usize, rounds: usize, notify: usize) {
    let rudder = start_rudder(db).await;
    let rmcp = start_rmcp(baseline).await;
    println!("rudder: {} (store {})", rudder.url, db.display());
    println!("rmcp:   {} ({})", rmcp.url, baseline.display());
    // Rudder's waiting tasks for get and update: one per update of the run.
    let pool = waiting_tasks(db, ops * CLIENTS.len() * rounds);
    let mut pool = pool.into_iter().map(|id| Waiting {
        id,
        key: String::new(),
    });
    let mut figures: std::collections::HashMap<(Side, Op, usize), Figures> = Default::default();
    for round in 0..rounds {
        for &clients in &CLIENTS {
            let order = match round % 2 {
                0 => [&rudder, &rmcp],
                _ => [&rmcp, &rudder],
            };
            for server in order {
                let created = phase(server, Op::Create, clients, ops, &[]).await;
                let targets: Vec<Waiting> = match server.side {
                    Side::Rudder => pool.by_ref().take(ops).collect(),
                    Side::Rmcp => created
                        .created
                        .iter()
                        .map(|id| Waiting {
                            id: id.clone(),
                            key: String::new(),
                        })
                        .collect(),
                };
                let got = phase(server, Op::Get, clients, ops, &targets).await;
                let updated = phase(server, Op::Update, clients, ops, &got.read).await;
                for (op, p) in OPS.iter().zip([&created, &got, &updated]) {
                    figures
                        .entry((server.side, *op, clients))
                        .or_default()
                        .add(p);
                }
            }
        }
        println!("round {} of {rounds} done", round + 1);
    }
    println!();
    println!(
        "{ops} calls per phase, {rounds} rounds, store of {} tasks; latency ms (median, p99 over all rounds), req/s (median of rounds)",
        Store::connect(db)
            .expect("a store URL")
            .counts()
            .map(|c| c.total())
            .unwrap_or(0)
    );
    println!(
        "{:<20} {:>7} | {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} | {:>7} {:>7}",
        "operation",
        "clients",
        "rudder",
        "p99",
        "req/s",
        "rmcp",
        "p99",
        "req/s",
        "median×",
        "req/s÷"
    );
    for op in OPS {
        for clients in CLIENTS {
            let r = &figures[&(Side::Rudder, op, clients)];
            let m = &figures[&(Side::Rmcp, op, clients)];
            println!(
                "{:<20} {:>7} | {:>8.2} {:>8.2} {:>8.0} | {:>8.2} {:>8.2} {:>8.0} | {:>6.2}× {:>6.2}×",
                op.name(),
                clients,
                r.median(),
                r.p99(),
                r.rate(),
                m.median(),
                m.p99(),
                m.rate(),
                r.median() / m.median(),
                m.rate() / r.rate(),
            );
        }
    }
    println!("(median×: rudder's median over rmcp's; req/s÷: rmcp's rate over rudder's)");
    println!(
        "goals: durable tasks/get ≤ 1.5× in-memory ({:.2}× at 1 client), durable create ≤ 3× ({:.2}× at 1 client)",
        figures[&(Side::Rudder, Op::Get, 1)].median() / figures[&(Side::Rmcp, Op::Get, 1)].median(),
        figures[&(Side::Rudder, Op::Create, 1)].median()
            / figures[&(Side::Rmcp, Op::Create, 1)].median(),
    );
    drop(rmcp);
    if notify > 0 {
        notifications(&rudder, db, notify).await;
    }
}

/// A store write from this process (not the server) to the
/// `notifications/tasks` it causes on a `subscriptions/listen` stream.
async fn notifications(server: &Server, db: &Path, count: usize) {
    let client = {
        tls();
        reqwest::Client::new()
    };
    let created = post(
        &client,
        &server.url,
        "tools/call",
        Some("diagnose"),
        request(
            1,
            "tools/call",
            json!({"name": "diagnose", "arguments": {"incident": "INC-9999"}}),
        ),
    )
    .await
    .expect("create a task to follow");
    let id = created["taskId"].as_str().expect("taskId").to_string();
    let listen = request(
        2,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [id]}}),
    );
    let mut stream = match builder(&client, &server.url, "subscriptions/listen", None, listen)
        .send()
        .await
    {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            println!(
                "notify: subscriptions/listen refused: HTTP {} {}",
                r.status(),
                r.text().await.unwrap_or_default()
            );
            return;
        }
        Err(e) => {
            println!("notify: subscriptions/listen failed: {e}");
            return;
        }
    };
    // Each chunk of the event stream, with when it arrived.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, String)>();
    let reader = tokio::spawn(async move {
        let mut text = String::new();
        while let Ok(Some(chunk)) = stream.chunk().await {
            let at = Instant::now();
            text.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = text.find("\n\n") {
                let event: String = text.drain(..end + 2).collect();
                if tx.send((at, event)).is_err() {
                    return;
                }
            }
        }
    });
    // The acknowledgement first: the subscription is in place.
    let acked = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some((_, event)) = rx.recv().await {
            if event.contains("notifications/subscriptions/acknowledged") {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    if !acked {
        println!("notify: no notifications/subscriptions/acknowledged within 5 s");
    }
    let store = Arc::new(Store::connect(db).expect("a store URL"));
    let mut from_commit = Vec::new();
    let mut from_start = Vec::new();
    let mut missed = 0;
    for k in 0..count {
        let message = format!("bench beat {k}");
        let (s, i, m) = (Arc::clone(&store), id.clone(), message.clone());
        let t0 = Instant::now();
        tokio::task::spawn_blocking(move || s.heartbeat(&i, Some(m), None, Actor::Anyone))
            .await
            .expect("the write")
            .expect("heartbeat");
        let t1 = Instant::now();
        let arrived = tokio::time::timeout(Duration::from_secs(5), async {
            while let Some((at, event)) = rx.recv().await {
                if event.contains("notifications/tasks") && event.contains(&message) {
                    return Some(at);
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        match arrived {
            Some(at) => {
                from_commit.push(at.saturating_duration_since(t1));
                from_start.push(at.saturating_duration_since(t0));
            }
            None => missed += 1,
        }
        // Spread the writes so each is a change of its own (and a poll
        // interval of the feed falls anywhere between them).
        tokio::time::sleep(Duration::from_millis(20 + (k as u64 * 37) % 60)).await;
    }
    reader.abort();
    if from_commit.is_empty() {
        println!("notify: no notifications/tasks arrived ({missed} writes)");
        return;
    }
    println!(
        "notify: store write committed → notifications/tasks: median {:.1} ms, p99 {:.1} ms; from the write's start {:.1} ms ({} of {count}, {missed} missed; goal ≤ 100 ms median)",
        quantile(&from_commit, 0.5),
        quantile(&from_commit, 0.99),
        quantile(&from_start, 0.5),
        from_commit.len(),
    );
}

/// rudder-notify's reqwest has rustls without a built-in provider, and
/// Cargo unifies that feature into this reqwest too: the process's default
/// provider is ring, as rudder's own.
fn tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
