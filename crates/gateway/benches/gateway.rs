//! `cargo bench -p rudder-gateway`: what the durable path costs.
//!
//! 1. A short upstream tool (`echo` of rmcp's own server,
//!    examples/rmcp_upstream.rs, over Streamable HTTP on loopback) called
//!    side by side in the same run: directly by rmcp's client on one open
//!    session; directly on a fresh session per call (what the gateway does
//!    per call); and through the gateway (a task created in a SQLite store,
//!    claimed by a gateway worker, called upstream, completed, the
//!    completion seen by `wait` on the change feed). Medians of each.
//! 2. Sixteen concurrent long calls (`sleep` 1.5 s) through one gateway
//!    process: the OS threads of the process while they run.

#[path = "../examples/rmcp_upstream.rs"]
#[allow(dead_code)]
mod upstream;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rudder_gateway::{Directory, GatewayOptions};
use rudder_store::task::Status;
use rudder_store::{NewTask, Store, Until, Work};
use serde_json::json;

const CALLS: usize = 200;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
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
    let text =
        format!("[[upstream]]\nname = \"rmcp\"\nurl = {url:?}\ntools = [\"echo\", \"sleep\"]\n");
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
    gateway.spawn(async move {
        let _ = rudder_gateway::run(
            &worker_store,
            upstreams,
            directory,
            GatewayOptions::default(),
            say,
            tokio_util::sync::CancellationToken::new(),
        )
        .await;
    });
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
    let mut through = Vec::new();
    for i in 0..CALLS + 10 {
        let t = Instant::now();
        let id = create("echo", json!({"text": "hi"}));
        let done = store
            .wait(&id, Until::Terminal, Some(Duration::from_secs(30)))
            .expect("done");
        assert_eq!(done.status, Status::Completed, "{:?}", done.error);
        // The first calls warm the worker up.
        if i >= 10 {
            through.push(t.elapsed());
        }
    }
    let (open, fresh, through) = (median(open), median(fresh), median(through));
    println!("echo, median of {CALLS} calls each, same run:");
    println!("  direct, one open session:      {open:>10.2?}");
    println!("  direct, a session per call:    {fresh:>10.2?}");
    println!("  through the gateway (durable): {through:>10.2?}");
    println!(
        "  the gateway adds {:.2?} over a session per call, {:.2?} over an open session",
        through.saturating_sub(fresh),
        through.saturating_sub(open)
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
