//! `cargo bench -p rudder-gateway`: what the durable path costs.
//!
//! 1. A short upstream tool (`echo` of rmcp's own server,
//!    examples/rmcp_upstream.rs, over Streamable HTTP on loopback) called
//!    side by side in the same run: directly by rmcp's client on one open
//!    session; directly on a fresh session per call (what the gateway does
//!    per call); and through the gateway (a task created in a SQLite store,
//!    called upstream by a gateway worker, completed, the completion seen
//!    on a change feed), two ways: as `rudder mcp` makes it (created held
//!    by its own gateway worker, which calls at once), and as another
//!    process makes it (the worker learns of it from its change feed and
//!    claims it). Medians of each.
//! 2. A question asked upstream (`ask`'s `elicitation/create`) until a
//!    change feed, which the TUI draws from, tells the task waits for
//!    input. Median.
//! 3. Sixteen concurrent long calls (`sleep` 1.5 s) through one gateway
//!    process: the OS threads of the process while they run.

#[path = "../examples/rmcp_upstream.rs"]
#[allow(dead_code)]
mod upstream;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rudder_gateway::{Directory, GatewayOptions};
use rudder_store::task::{Status, Task};
use rudder_store::watch::{ChangeFeed, FeedEvent, FeedOptions};
use rudder_store::{NewTask, Store};
use serde_json::json;

const CALLS: usize = 200;
const QUESTIONS: usize = 50;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The task `id` once the feed tells it finished (completed).
async fn finished(store: &Store, feed: &mut ChangeFeed, id: &str) -> Task {
    loop {
        let task = store.get(id).expect("get");
        if task.status.is_terminal() {
            assert_eq!(task.status, Status::Completed, "{:?}", task.error);
            return task;
        }
        loop {
            match feed.next().await.expect("the feed runs") {
                FeedEvent::Changes(c) if c.iter().any(|c| c.task_id == id) => break,
                FeedEvent::Reset(_) => break,
                _ => {}
            }
        }
    }
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

fn echo() -> CallToolRequestParams {
    let args = json!({"text": "hi"})
        .as_object()
        .cloned()
        .unwrap_or_default();
    CallToolRequestParams::new("echo").with_arguments(args)
}

fn main() {
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let listener = server
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a port");
    let url = format!("http://{}/mcp", listener.local_addr().expect("an address"));
    server.spawn(async move {
        let _ = axum::serve(listener, upstream::router()).await;
    });

    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let transport =
        || rmcp::transport::StreamableHttpClientTransport::from_uri(Arc::<str>::from(url.as_str()));
    let (open, fresh) = client_rt.block_on(async {
        let session = ().serve(transport()).await.expect("a session");
        let mut open = Vec::new();
        for _ in 0..CALLS {
            let t = Instant::now();
            session.call_tool(echo()).await.expect("echo");
            open.push(t.elapsed());
        }
        let mut fresh = Vec::new();
        for _ in 0..CALLS {
            let t = Instant::now();
            let s = ().serve(transport()).await.expect("a session");
            s.call_tool(echo()).await.expect("echo");
            fresh.push(t.elapsed());
            let _ = s.cancel().await;
        }
        (open, fresh)
    });

    let dir = tempfile::tempdir().expect("a temp dir");
    let store = Store::connect(dir.path().join("bench.db")).expect("a store");
    let text = format!(
        "[[upstream]]\nname = \"rmcp\"\nurl = {url:?}\ntools = [\"echo\", \"sleep\", \"ask\"]\n"
    );
    let path = dir.path().join("tools.toml");
    let upstreams = Arc::new(rudder_gateway::catalogue::parse(&path, &text).expect("a catalogue"));
    let gateway = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let say: rudder_gateway::Say = Arc::new(|s: &str| eprintln!("{s}"));
    let directory = {
        let _inside = gateway.enter();
        Directory::start(Arc::clone(&upstreams), Arc::clone(&say))
    };
    let worker_store = rudder_store::reopen(&store).expect("the store again");
    let handoff = rudder_gateway::Handoff::default();
    let options = GatewayOptions {
        handoff: handoff.clone(),
        ..GatewayOptions::default()
    };
    gateway.spawn(async move {
        let _ = rudder_gateway::run(
            &worker_store,
            upstreams,
            directory,
            options,
            say,
            tokio_util::sync::CancellationToken::new(),
        )
        .await;
    });
    let store = Arc::new(store);
    let create = |kind: &str, request: serde_json::Value| {
        store
            .create(NewTask {
                kind: Some(kind.into()),
                request: Some(request),
                ..NewTask::default()
            })
            .expect("create")
            .task
            .task_id
    };
    let (handed, split, fed) = gateway.block_on(async {
        // One change feed tells every finished call, as `rudder mcp`'s
        // does for its waiting calls.
        let mut feed = store.feed(FeedOptions::default());
        let mut handed = Vec::new();
        let mut split = Vec::new();
        let mut fed = Vec::new();
        for i in 0..CALLS + 10 {
            // As `rudder mcp` makes an upstream's call: created held by its
            // own gateway worker, which calls at once.
            let t = Instant::now();
            let offer = loop {
                // A place frees once the last call's task is let go.
                if let Some(o) = handoff.offer("echo") {
                    break o;
                }
                tokio::task::yield_now().await;
            };
            let held = offer.held().clone();
            let s = Arc::clone(&store);
            let task = tokio::task::spawn_blocking(move || {
                s.create_held(
                    NewTask {
                        kind: Some("echo".into()),
                        request: Some(json!({"text": "hi"})),
                        ..NewTask::default()
                    },
                    &held,
                )
            })
            .await
            .expect("a store thread")
            .expect("create")
            .task;
            let made = t.elapsed();
            let id = task.task_id.clone();
            let over = offer.start(task).expect("held by the gateway");
            // `rudder mcp` reads the result once the call is over.
            let _ = over.await;
            let done = store.get(&id).expect("get");
            assert_eq!(done.status, Status::Completed, "{:?}", done.error);
            if i >= 10 {
                handed.push(t.elapsed());
                let worked = match (done.created_at, done.updated_at) {
                    (Some(a), Some(b)) => (b - a).to_std().unwrap_or_default(),
                    _ => Duration::ZERO,
                };
                split.push((made, worked));
            }
            // As another process makes it (`rudder gateway` elsewhere): the
            // worker learns of it from its change feed and claims it.
            let t = Instant::now();
            let s = Arc::clone(&store);
            let id = tokio::task::spawn_blocking(move || {
                s.create(NewTask {
                    kind: Some("echo".into()),
                    request: Some(json!({"text": "hi"})),
                    ..NewTask::default()
                })
            })
            .await
            .expect("a store thread")
            .expect("create")
            .task
            .task_id;
            finished(&store, &mut feed, &id).await;
            if i >= 10 {
                fed.push(t.elapsed());
            }
        }
        (handed, split, fed)
    });
    let made = median(split.iter().map(|s| s.0).collect());
    let worked = median(split.iter().map(|s| s.1).collect());
    let (open, fresh, handed, fed) = (median(open), median(fresh), median(handed), median(fed));
    println!("echo, median of {CALLS} calls each, same run:");
    println!("  direct, one open session:                 {open:>10.2?}");
    println!("  direct, a session per call:               {fresh:>10.2?}");
    println!("  through the gateway, as rudder mcp makes it: {handed:>10.2?}");
    println!("  through the gateway, made by another process: {fed:>10.2?}");
    println!(
        "  the durable path adds {:.2?} over an open session ({:.2?} when another process makes the task)",
        handed.saturating_sub(open),
        fed.saturating_sub(open)
    );
    println!(
        "  where a call as rudder mcp makes it goes (medians): the task made held {made:.2?}; from the task made to its result stored {worked:.2?} (a session, the call, the write); the rest {:.2?}",
        handed.saturating_sub(made + worked)
    );

    // A question asked upstream until the TUI could draw it: from the
    // upstream's `elicitation/create` until a change feed (what the TUI
    // draws from) tells the task is waiting for input.
    let asked: Vec<Duration> = gateway.block_on(async {
        let mut feed = store.feed(FeedOptions::default());
        let mut asked = Vec::new();
        for i in 0..QUESTIONS + 5 {
            let s = Arc::clone(&store);
            let id = tokio::task::spawn_blocking(move || {
                s.create(NewTask {
                    kind: Some("ask".into()),
                    request: Some(json!({})),
                    ..NewTask::default()
                })
            })
            .await
            .expect("a store thread")
            .expect("create")
            .task
            .task_id;
            let seen = loop {
                match feed.next().await.expect("the feed runs") {
                    FeedEvent::Changes(c)
                        if c.iter()
                            .any(|c| c.task_id == id && c.to == Some(Status::InputRequired)) =>
                    {
                        break Instant::now();
                    }
                    _ => {}
                }
            };
            let at = upstream::ASKED_AT
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .expect("the upstream asked");
            if i >= 5 {
                asked.push(seen.saturating_duration_since(at));
            }
            let s = Arc::clone(&store);
            let answered = id.clone();
            tokio::task::spawn_blocking(move || {
                s.provide_input(&answered, json!({"go": true}), None)
            })
            .await
            .expect("a store thread")
            .expect("an answer");
            finished(&store, &mut feed, &id).await;
        }
        asked
    });
    println!(
        "a question asked upstream (elicitation/create) until a change feed tells the task waits for input: median {:.2?} of {QUESTIONS}",
        median(asked)
    );

    let before = threads();
    let ids: Vec<String> = (0..16)
        .map(|_| create("sleep", json!({"ms": 1500})))
        .collect();
    let mut peak = before;
    let mut running = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        peak = peak.max(threads());
        let tasks: Vec<_> = ids.iter().map(|id| store.get(id).expect("get")).collect();
        running = running.max(
            tasks
                .iter()
                .filter(|t| t.status == Status::Working && t.claimed_by.is_some())
                .count(),
        );
        if tasks.iter().all(|t| t.status.is_terminal()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "16 concurrent 1.5 s calls: at most {running} held at once; the process's OS threads {before} before, {peak} at most while they ran"
    );
}
