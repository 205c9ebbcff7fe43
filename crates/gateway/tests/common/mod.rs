//! What the gateway tests share: the Python environment with the official
//! MCP SDK, a gateway running on its own runtime, and waits on the store.

#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rudder_gateway::{Directory, GatewayOptions};
use rudder_store::task::Task;
use rudder_store::{NewTask, Store};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

#[path = "python.rs"]
mod python_env;
#[allow(unused_imports)]
pub use python_env::{bridge, python};

/// A gateway on its own runtime, stopped (abruptly, as a crash would) when
/// dropped.
pub struct Gateway {
    pub runtime: Option<tokio::runtime::Runtime>,
    pub stop: CancellationToken,
    pub said: Arc<Mutex<Vec<String>>>,
    pub directory: Directory,
}

impl Gateway {
    /// Start gateway workers for the catalogue `text` (written to `dir`)
    /// on `store`.
    pub fn start(dir: &Path, text: &str, store: &Store, lease: Duration) -> Gateway {
        let path = dir.join("tools.toml");
        std::fs::write(&path, text).expect("write the catalogue");
        let upstreams =
            Arc::new(rudder_gateway::catalogue::parse(&path, text).expect("a catalogue"));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let said: Arc<Mutex<Vec<String>>> = Arc::default();
        let heard = Arc::clone(&said);
        let say: rudder_gateway::Say = Arc::new(move |s: &str| {
            eprintln!("{s}");
            heard.lock().unwrap().push(s.to_string());
        });
        let stop = CancellationToken::new();
        let directory = {
            let _inside = runtime.enter();
            Directory::start(Arc::clone(&upstreams), Arc::clone(&say))
        };
        let (store, stopping, listed) = (
            rudder_store::reopen(store).expect("the store again"),
            stop.clone(),
            directory.clone(),
        );
        runtime.spawn(async move {
            let options = GatewayOptions {
                lease,
                ..GatewayOptions::default()
            };
            rudder_gateway::run(&store, upstreams, listed, options, say, stopping)
                .await
                .expect("the gateway runs");
        });
        Gateway {
            runtime: Some(runtime),
            stop,
            said,
            directory,
        }
    }

    /// Stop it as a crash would: its calls end where they are.
    pub fn kill(mut self) {
        self.stop.cancel();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

/// A task of `kind` with `arguments`, as `rudder mcp` makes one.
pub fn call(store: &Store, kind: &str, arguments: Value) -> String {
    store
        .create(NewTask {
            kind: Some(kind.into()),
            request: Some(arguments),
            ..NewTask::default()
        })
        .expect("create")
        .task
        .task_id
}

/// Poll the store until `done` holds for the task (at most a minute).
pub fn wait_for(store: &Store, id: &str, what: &str, done: impl Fn(&Task) -> bool) -> Task {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let task = store.get(id).expect("get");
        if done(&task) {
            return task;
        }
        assert!(
            Instant::now() < deadline,
            "the task never became {what}: {}",
            serde_json::to_string_pretty(&task).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Poll until `path` exists (at most a minute); its text.
pub fn wait_file(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The text of a stored `CallToolResult`'s first content block.
pub fn text_of(task: &Task) -> String {
    task.result
        .as_ref()
        .and_then(|r| r.pointer("/content/0/text"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The notes of the task's history.
pub fn notes(task: &Task) -> Vec<String> {
    task.history.iter().filter_map(|e| e.note.clone()).collect()
}
