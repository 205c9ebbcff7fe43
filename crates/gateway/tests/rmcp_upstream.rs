//! The gateway in front of rmcp's own server (examples/rmcp_upstream.rs),
//! served over Streamable HTTP in this process on a port of its own: a
//! short call, a flood of progress that once goes backwards, and a result
//! larger than the gateway stores, while other calls are still served.

mod common;

#[path = "../examples/rmcp_upstream.rs"]
mod upstream;

use std::time::Duration;

use common::{Gateway, call, text_of, wait_for};
use rudder_gateway::call::MAX_RESULT_BYTES;
use rudder_store::Store;
use rudder_store::task::Status;
use serde_json::json;

/// The upstream on a free loopback port; its runtime and URL.
fn serve() -> (tokio::runtime::Runtime, String) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a port");
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move {
        let _ = axum::serve(listener, upstream::router()).await;
    });
    (runtime, format!("http://{addr}/mcp"))
}

fn start(dir: &std::path::Path, url: &str) -> (Store, Gateway) {
    let store = Store::connect(dir.join("tasks.db")).unwrap();
    let text = format!(
        "[[upstream]]\nname = \"rmcp\"\nurl = {url:?}\ntools = [\"echo\", \"flood\", \"big\"]\n"
    );
    let gw = Gateway::start(dir, &text, &store, Duration::from_secs(3));
    (store, gw)
}

#[test]
fn a_short_call_through_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = serve();
    let (store, _gw) = start(dir.path(), &url);
    let id = call(&store, "echo", json!({"text": "hi"}));
    let done = wait_for(&store, &id, "completed", |t| t.status.is_terminal());
    assert_eq!(done.status, Status::Completed, "{:?}", done.error);
    assert_eq!(text_of(&done), "hi");
}

#[test]
fn a_flood_of_progress_is_coalesced_and_never_goes_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = serve();
    let (store, _gw) = start(dir.path(), &url);
    let id = call(&store, "flood", json!({"n": 3000}));
    let other = call(&store, "echo", json!({"text": "still served"}));
    let done = wait_for(&store, &id, "completed", |t| t.status.is_terminal());
    assert_eq!(text_of(&done), "flooded 3000");
    assert!(
        done.revision < 300,
        "3000 notifications were coalesced into few writes: revision {}",
        done.revision
    );
    if let Some(p) = done.progress {
        assert!(p.current <= p.total && p.current > 1, "{p:?}");
    }
    let echoed = wait_for(&store, &other, "completed", |t| t.status.is_terminal());
    assert_eq!(text_of(&echoed), "still served");
}

#[test]
fn a_result_over_the_limit_fails_the_task_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = serve();
    let (store, _gw) = start(dir.path(), &url);
    let id = call(&store, "big", json!({"bytes": MAX_RESULT_BYTES + 1024}));
    let other = call(&store, "echo", json!({"text": "next"}));
    let done = wait_for(&store, &id, "failed", |t| t.status.is_terminal());
    assert_eq!(done.status, Status::Failed);
    let message = done.error_message().unwrap_or_default().to_string();
    assert!(
        message.contains(&format!(
            "more than the {MAX_RESULT_BYTES} the gateway stores"
        )),
        "{message}"
    );
    let next = wait_for(&store, &other, "completed", |t| t.status.is_terminal());
    assert_eq!(text_of(&next), "next");
}

/// An upstream URL may carry a password or a key (user info, a query): an
/// error reaching it names the server without them, in the task's history
/// and on stderr alike.
#[test]
fn an_unreachable_upstreams_password_and_key_are_not_told() {
    let dir = tempfile::tempdir().unwrap();
    // A loopback port nobody listens on any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let url = format!("http://operator:s3cretpass@127.0.0.1:{port}/mcp?api_key=k3ykey#frag");
    let (store, gw) = start(dir.path(), &url);
    let id = call(&store, "echo", json!({"text": "hi"}));
    let done = wait_for(&store, &id, "failed", |t| t.status.is_terminal());
    assert_eq!(done.status, Status::Failed);
    let message = done.error_message().unwrap_or_default().to_string();
    assert!(message.contains("could not be reached"), "{message}");
    let history = serde_json::to_string(&done).unwrap();
    let said = gw.said.lock().unwrap().join("\n");
    for text in [&message, &history, &said] {
        assert!(
            !text.contains("s3cretpass") && !text.contains("k3ykey") && !text.contains("operator"),
            "{text}"
        );
    }
}
