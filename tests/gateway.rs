//! The gateway through the binary: `rudder mcp` serving the tools of an
//! upstream MCP server written on the official Python SDK (listed as its
//! own, called as durable tasks, a question answered with `tasks/update`),
//! an upstream that does not start, and `rudder gateway` on its own.

mod common;
#[path = "../crates/gateway/tests/common/python.rs"]
mod python_env;

use std::path::Path;
use std::time::{Duration, Instant};

use python_env::{bridge, python};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, TaskPayload, TaskStatus};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use rmcp::transport::TokioChildProcess;
use rudder::store::{NewTask, Store};
use rudder::task::Status;
use rudder_testkit::mcp::{self, until};
use serde_json::{Value, json};

fn catalogue(dir: &Path, upstream: &str) -> std::path::PathBuf {
    let path = dir.join("tools.toml");
    std::fs::write(&path, upstream).unwrap();
    path
}

fn bridge_upstream() -> String {
    format!(
        "[[upstream]]\nname = \"bridge\"\ncommand = [{:?}, {:?}]\ntools = \"*\"\n",
        python().display().to_string(),
        bridge().display().to_string()
    )
}

/// `rudder mcp --tools TOOLS` over stdio on a SQLite store in `dir`.
fn rudder_mcp(dir: &Path, tools: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.env_remove("RUDDER_STORE")
        .arg("--store")
        .arg(dir.join("tasks.db"))
        .arg("mcp")
        .arg("--tools")
        .arg(tools);
    cmd
}

/// The id of the task a `tools/call` of `name` created.
async fn call(client: &mcp::Client, name: &str, args: Value) -> String {
    mcp::call_task(client, name, args).await.task_id
}

fn result_text(task: &rmcp::model::DetailedTask) -> String {
    match &task.payload {
        TaskPayload::Completed { result } => result
            .get("content")
            .and_then(|c| c.pointer("/0/text"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        other => panic!("no result: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudder_mcp_serves_an_upstreams_tools_as_durable_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let tools = catalogue(dir.path(), &bridge_upstream());
    let client = mcp::stdio(rudder_mcp(dir.path(), &tools), true).await;
    // Listed once the upstream answers, with its names and descriptions.
    let deadline = Instant::now() + Duration::from_secs(60);
    let listed = loop {
        let listed = client.list_all_tools().await.expect("tools/list");
        if listed.iter().any(|t| t.name == "greet") {
            break listed;
        }
        assert!(
            Instant::now() < deadline,
            "the upstream's tools were never listed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let greet = listed.iter().find(|t| t.name == "greet").unwrap();
    assert_eq!(greet.description.as_deref(), Some("A short tool."));
    let id = call(&client, "greet", json!({"name": "Ada"})).await;
    let done = until(&client, &id, "completed", |t| {
        t.task.status == TaskStatus::Completed
    })
    .await;
    assert_eq!(result_text(&done), "Hello, Ada!");

    // A question asked upstream is the task's, answered with tasks/update.
    let id = call(
        &client,
        "diagnose",
        json!({"incident": "INC-1", "steps": 2}),
    )
    .await;
    let asked = until(&client, &id, "input_required", |t| {
        t.task.status == TaskStatus::InputRequired
    })
    .await;
    let TaskPayload::InputRequired {
        input_requests: requests,
    } = &asked.payload
    else {
        panic!("no input requests: {asked:?}")
    };
    let key = requests.keys().next().expect("a question").clone();
    let text = serde_json::to_string(&requests[&key]).unwrap();
    assert!(text.contains("Restart the service for INC-1?"), "{text}");
    let responses =
        json!({ key: {"action": "accept", "content": {"restart": true, "note": "mcp"}} });
    mcp::update(&client, &id, responses).await;
    let done = until(&client, &id, "completed", |t| {
        t.task.status == TaskStatus::Completed
    })
    .await;
    assert_eq!(result_text(&done), "INC-1: restart=True note=mcp");
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudder_mcp_starts_when_an_upstream_does_not_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let tools = catalogue(
        dir.path(),
        "[[tool]]\nname = \"local\"\n\n[[upstream]]\nname = \"gone\"\ncommand = [\"/nonexistent/mcp-server\"]\ntools = \"*\"\n",
    );
    let (transport, stderr) = TokioChildProcess::builder(rudder_mcp(dir.path(), &tools))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let client = mcp::connect(mcp::config(true), transport).await;
    let listed = client.list_all_tools().await.expect("tools/list");
    assert_eq!(
        listed
            .iter()
            .map(|t| t.name.to_string())
            .collect::<Vec<_>>(),
        ["local"]
    );
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr.expect("stderr")).lines();
    let said = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("upstream \"gone\" does not answer") {
                return line;
            }
        }
        String::new()
    })
    .await
    .expect("told in time");
    assert!(said.starts_with("rudder mcp: gateway: "), "{said}");
    let _ = client.cancel().await;
}

#[test]
fn rudder_gateway_works_the_tasks_of_an_upstreams_tools() {
    let dir = tempfile::tempdir().unwrap();
    let tools = catalogue(dir.path(), &bridge_upstream());
    let url = dir.path().join("tasks.db");
    let store = Store::connect(&url).unwrap();
    let id = store
        .create(NewTask {
            kind: Some("greet".into()),
            request: Some(json!({"name": "Bob"})),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;
    let mut gateway = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
        .env_remove("RUDDER_STORE")
        .arg("--store")
        .arg(&url)
        .args(["gateway", "--max-calls", "2", "--tools"])
        .arg(&tools)
        .spawn()
        .expect("rudder gateway starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    let task = loop {
        let task = store.get(&id).unwrap();
        if task.status.is_terminal() {
            break task;
        }
        assert!(Instant::now() < deadline, "never finished: {task:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = gateway.kill();
    let _ = gateway.wait();
    assert_eq!(task.status, Status::Completed, "{:?}", task.error);
    assert_eq!(
        task.result
            .as_ref()
            .and_then(|r| r.pointer("/content/0/text")),
        Some(&json!("Hello, Bob!"))
    );
    assert!(
        task.history.iter().any(|e| e
            .actor
            .as_deref()
            .is_some_and(|a| a.starts_with("gateway:bridge#"))),
        "{:?}",
        task.history
    );
}

#[test]
fn rudder_gateway_refuses_a_catalogue_it_cannot_use_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let tools = catalogue(
        dir.path(),
        "[[upstream]]\nname = \"b\"\nurl = \"ftp://x\"\ntools = \"*\"\n",
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
        .env_remove("RUDDER_STORE")
        .arg("--store")
        .arg(dir.path().join("tasks.db"))
        .args(["gateway", "--tools"])
        .arg(&tools)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tools.toml:3:7: upstream \"b\", field \"url\""),
        "{stderr}"
    );
}

/// A stdio upstream is another program: it inherits none of the secrets
/// rudder's environment may hold (the store URL, libpq's password, the MCP
/// face's token, another upstream's token), while the rest of the
/// environment reaches it.
#[test]
fn a_stdio_upstream_inherits_none_of_rudders_secrets() {
    let dir = tempfile::tempdir().unwrap();
    // Another upstream, reached with a token from the gateway's
    // environment (nobody answers there: only its token matters here).
    let remote = "[[upstream]]\nname = \"remote\"\nurl = \"http://127.0.0.1:9/mcp\"\ntoken_env = \"RUDDER_TEST_REMOTE_TOKEN\"\ntools = [\"remote_only\"]\n";
    let tools = catalogue(dir.path(), &format!("{}\n{remote}", bridge_upstream()));
    let url = dir.path().join("tasks.db");
    let store = Store::connect(&url).unwrap();
    let names = [
        "RUDDER_STORE",
        "PGPASSWORD",
        "RUDDER_MCP_TOKEN",
        "RUDDER_TEST_REMOTE_TOKEN",
        "RUDDER_TEST_PLAIN",
    ];
    let id = store
        .create(NewTask {
            kind: Some("environment".into()),
            request: Some(json!({ "names": names })),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;
    let mut gateway = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
        .env("RUDDER_STORE", format!("sqlite:{}", url.display()))
        .env("PGPASSWORD", "pg-secret")
        .env("RUDDER_MCP_TOKEN", "mcp-secret-token-0123456789")
        .env("RUDDER_TEST_REMOTE_TOKEN", "remote-secret-token")
        .env("RUDDER_TEST_PLAIN", "1")
        .args(["gateway", "--tools"])
        .arg(&tools)
        .spawn()
        .expect("rudder gateway starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    let task = loop {
        let task = store.get(&id).unwrap();
        if task.status.is_terminal() {
            break task;
        }
        assert!(Instant::now() < deadline, "never finished: {task:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = gateway.kill();
    let _ = gateway.wait();
    assert_eq!(task.status, Status::Completed, "{:?}", task.error);
    assert_eq!(
        task.result
            .as_ref()
            .and_then(|r| r.pointer("/content/0/text")),
        Some(&json!("RUDDER_TEST_PLAIN"))
    );
}

/// Poll the store until `done` holds for the task (at most two minutes:
/// a takeover waits for the killed holder's lease, 30 s, to lapse).
fn wait_until(
    store: &Store,
    id: &str,
    what: &str,
    done: impl Fn(&rudder::Task) -> bool,
) -> rudder::Task {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let task = store.get(id).unwrap();
        if done(&task) {
            return task;
        }
        assert!(Instant::now() < deadline, "never {what}: {task:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `rudder --store URL COMMAND --tools TOOLS` (`gateway`, or `mcp`, whose
/// stdio is kept open: it serves until stdin closes).
fn serving(url: &Path, command: &str, tools: &Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
        .env_remove("RUDDER_STORE")
        .arg("--store")
        .arg(url)
        .args([command, "--tools"])
        .arg(tools)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("rudder starts")
}

/// A task of `kind` with `request`: what an MCP client's call makes.
fn stored_call(store: &Store, kind: &str, request: Value) -> String {
    store
        .create(NewTask {
            kind: Some(kind.into()),
            request: Some(request),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id
}

/// The pid of the fixture's upstream process, once its tool that hangs
/// (`_hang_once`) wrote it to `marker`: the call has reached the tool.
fn hanging_upstream(marker: &Path, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(pid) = std::fs::read_to_string(marker)
            && !pid.is_empty()
        {
            return pid.trim().to_string();
        }
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kill the upstream process `pid`: a stopped rudder's stdio child may
/// outlive it, and is neither the next call's nor to be left behind.
fn kill_upstream(pid: &str) {
    let _ = std::process::Command::new("kill")
        .args(["-9", pid])
        .status();
}

/// A deploy stops the process that runs gateway workers (`rudder gateway`,
/// or `rudder mcp` with upstreams) with SIGTERM while a call hangs: it
/// gives the task's lease back before it exits (the task still working,
/// held by nobody), so the next gateway takes the call over at once
/// instead of after the lease's 30 s.
#[test]
fn a_gateway_stopped_with_sigterm_gives_its_calls_back_before_it_exits() {
    for command in ["gateway", "mcp"] {
        let dir = tempfile::tempdir().unwrap();
        let tools = catalogue(
            dir.path(),
            &format!(
                "{}[upstream.tool.flaky]\nidempotent = true\n",
                bridge_upstream()
            ),
        );
        let url = dir.path().join("tasks.db");
        let store = Store::connect(&url).unwrap();
        let marker = dir.path().join("flaky.pid");
        let id = stored_call(&store, "flaky", json!({"marker": marker}));
        let mut first = serving(&url, command, &tools);
        let upstream = hanging_upstream(
            &marker,
            &format!("{command}: the call never reached the tool"),
        );
        let held = store.get(&id).unwrap();
        assert!(held.claimed_by.is_some(), "{command}: {held:#?}");
        let term = std::process::Command::new("kill")
            .args(["-TERM", &first.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(term.success());
        // Held open until the process is gone: `wait` would close it first,
        // and `rudder mcp` would then end on its stdio closing, not on
        // the signal.
        let stdin = first.stdin.take();
        let status = first.wait().expect("rudder exits");
        drop(stdin);
        kill_upstream(&upstream);
        assert!(status.success(), "{command}: {status:?}");
        let left = store.get(&id).unwrap();
        assert_eq!(left.status, Status::Working, "{command}: {left:#?}");
        assert_eq!(
            left.claimed_by, None,
            "{command}: the stopped process kept the lease: {left:#?}"
        );
        // The next gateway takes it over and the tool, called again, answers.
        let mut second = serving(&url, "gateway", &tools);
        let done = wait_until(&store, &id, "finished", |t| t.status.is_terminal());
        let _ = second.kill();
        let _ = second.wait();
        assert_eq!(done.status, Status::Completed, "{command}: {done:#?}");
    }
}

/// rudder restarted (the `rudder gateway` process killed, and started
/// again) while an idempotent call that asked two different questions,
/// both answered, still runs: once the killed process's lease lapses the
/// new one calls again, and the upstream's two questions get their stored
/// answers at once; the engineer is asked nothing more.
#[test]
fn a_restarted_rudder_gateway_answers_both_questions_already_answered_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let tools = catalogue(
        dir.path(),
        &format!(
            "{}[upstream.tool.failover]\nidempotent = true\n",
            bridge_upstream()
        ),
    );
    let url = dir.path().join("tasks.db");
    let store = Store::connect(&url).unwrap();
    let marker = dir.path().join("failover.pid");
    let id = stored_call(
        &store,
        "failover",
        json!({"incident": "INC-12", "marker": marker}),
    );
    let gateway = || serving(&url, "gateway", &tools);
    let mut first = gateway();
    let answers = [json!({"region": "eu-west"}), json!({"confirm": true})];
    for (round, answer) in answers.into_iter().enumerate() {
        wait_until(&store, &id, "asked", |t| {
            t.status == Status::InputRequired && t.answered.len() == round
        });
        store.provide_input(&id, answer, None).expect("an answer");
    }
    // Both answers reached the upstream, whose tool now works on: rudder
    // is killed before it returns.
    let upstream = hanging_upstream(&marker, "the tool never got both answers");
    first.kill().expect("kill rudder gateway");
    let _ = first.wait();
    // Its upstream child outlives it (a killed process kills no child).
    kill_upstream(&upstream);
    let mut second = gateway();
    let done = wait_until(&store, &id, "completed or asking again", |t| {
        t.status.is_terminal() || t.status == Status::InputRequired
    });
    let _ = second.kill();
    let _ = second.wait();
    assert_eq!(
        done.status,
        Status::Completed,
        "the engineer was asked again: {:?} {:#?}",
        done.status_message,
        done.history
    );
    assert_eq!(
        done.result
            .as_ref()
            .and_then(|r| r.pointer("/content/0/text")),
        Some(&json!("INC-12: region=eu-west confirm=True"))
    );
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
    let replayed = done
        .history
        .iter()
        .filter_map(|e| e.note.as_deref())
        .filter(|n| n.contains("the stored answer was given at once"))
        .count();
    assert_eq!(replayed, 2, "{:#?}", done.history);
}

/// A client of `rudder mcp` that hears `notifications/tools/list_changed`.
#[derive(Clone)]
struct Heard(tokio::sync::mpsc::UnboundedSender<()>);

impl rmcp::ClientHandler for Heard {
    async fn on_tool_list_changed(&self, _cx: rmcp::service::NotificationContext<RoleClient>) {
        let _ = self.0.send(());
    }

    fn get_info(&self) -> ClientConfig {
        mcp::config(false)
    }
}

/// When an upstream's tools change, `rudder mcp` tells its own clients
/// (it declares `listChanged`), and lists the new tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudder_mcp_tells_its_clients_when_an_upstreams_tools_change() {
    let dir = tempfile::tempdir().unwrap();
    let trigger = dir.path().join("grow");
    let script = bridge().with_file_name("changing.py");
    let tools = catalogue(
        dir.path(),
        &format!(
            "[[upstream]]\nname = \"changing\"\ncommand = [{:?}, {:?}, {:?}]\ntools = \"*\"\n",
            python().display().to_string(),
            script.display().to_string(),
            trigger.display().to_string()
        ),
    );
    let cmd = rudder_mcp(dir.path(), &tools);
    let (tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let client = rmcp::ServiceExt::serve(Heard(tx), TokioChildProcess::new(cmd).unwrap())
        .await
        .expect("client connects");
    let declared = client
        .peer_info()
        .and_then(|i| i.capabilities.tools.as_ref().and_then(|t| t.list_changed));
    assert_eq!(declared, Some(true), "listChanged is declared");
    let names = async || -> Vec<String> {
        let listed = client.list_all_tools().await.expect("tools/list");
        listed.into_iter().map(|t| t.name.to_string()).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !names().await.contains(&"first".to_string()) {
        assert!(
            Instant::now() < deadline,
            "the upstream's tools were never listed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::write(&trigger, "").unwrap();
    // Told (maybe first of the first listing), until a notice after which
    // the new tool is listed.
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let told = tokio::time::timeout(left, heard.recv()).await;
        assert!(
            matches!(told, Ok(Some(()))),
            "rudder mcp never said its tools changed"
        );
        if names().await.contains(&"second".to_string()) {
            break;
        }
    }
    let _ = client.cancel().await;
}

/// The same for a client of protocol 2026-07-28, which has no session to
/// be told on: it hears on a `subscriptions/listen` that asked for
/// `toolsListChanged`, and lists the new tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rudder_mcp_tells_a_2026_listener_when_an_upstreams_tools_change() {
    use rmcp::model::{ServerNotification, SubscriptionFilter};
    let dir = tempfile::tempdir().unwrap();
    let trigger = dir.path().join("grow");
    let script = bridge().with_file_name("changing.py");
    let tools = catalogue(
        dir.path(),
        &format!(
            "[[upstream]]\nname = \"changing\"\ncommand = [{:?}, {:?}, {:?}]\ntools = \"*\"\n",
            python().display().to_string(),
            script.display().to_string(),
            trigger.display().to_string()
        ),
    );
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.env_remove("RUDDER_STORE")
        .arg("--store")
        .arg(dir.path().join("tasks.db"))
        .arg("mcp")
        .arg("--tools")
        .arg(&tools);
    let config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("rudder-gateway-test", "1"),
    );
    let client = config
        .serve_with_lifecycle(
            TokioChildProcess::new(cmd).unwrap(),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("client connects");
    let names = async || -> Vec<String> {
        let listed = client.list_all_tools().await.expect("tools/list");
        listed.into_iter().map(|t| t.name.to_string()).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !names().await.contains(&"first".to_string()) {
        assert!(
            Instant::now() < deadline,
            "the upstream's tools were never listed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut listen = client
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("subscriptions/listen is acknowledged");
    assert_eq!(
        listen.acknowledged().tools_list_changed,
        Some(true),
        "toolsListChanged is accepted"
    );
    std::fs::write(&trigger, "").unwrap();
    // Told on the listen, until a notice after which the new tool is listed.
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, listen.next()).await {
            Ok(Ok(Some(ServerNotification::ToolListChangedNotification(_)))) => {}
            other => panic!("rudder mcp never said its tools changed on the listen: {other:?}"),
        }
        if names().await.contains(&"second".to_string()) {
            break;
        }
    }
    listen.cancel().await.expect("the listen is cancelled");
    let _ = client.cancel().await;
}

/// docs/gateway.md's story, exactly as written, with `rudder` on the PATH
/// in an empty directory: an MCP server that knows nothing of rudder,
/// behind `rudder gateway`, killed while its question waits and started
/// again; the answer given meanwhile reaches the new server, and the
/// task completes.
#[test]
fn the_gateway_story_runs_as_written() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/gateway.md"))
        .expect("docs/gateway.md");
    let script = common::walkthrough(&doc);
    assert!(script.contains("kill %1"), "{script}");
    let dir = tempfile::tempdir().unwrap();
    let out = common::run_walkthrough(&script, dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let logs = ["upstream.log", "gateway.log"]
        .map(|f| std::fs::read_to_string(dir.path().join(f)).unwrap_or_default())
        .join("\n");
    assert!(out.status.success(), "{stdout}\n{stderr}\n{logs}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("input_required: Which service should the diagnosis follow?")),
        "{stdout}"
    );
    let done: Value = lines
        .iter()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("the last JSON line");
    assert_eq!(done["status"], "completed", "{stdout}\n{logs}");
    assert!(done["cause"].is_string(), "{done}");
    // The server was killed mid-call and the call made again; the person
    // was asked once.
    let store = Store::connect(dir.path().join("tasks.db")).unwrap();
    let task = store.list(&[Status::Completed]).unwrap().remove(0);
    let notes: Vec<String> = task.history.iter().filter_map(|e| e.note.clone()).collect();
    assert!(
        notes.iter().any(|n| n.contains("attempt 1 of 20 was lost")),
        "{notes:#?}"
    );
    let asked = task
        .history
        .iter()
        .filter(|e| e.status == Status::InputRequired)
        .count();
    assert_eq!(asked, 1, "asked once: {:#?}", task.history);
}
