//! `rudder mcp --http` with principals: named tokens (`--tokens FILE`) and
//! JWT access tokens (`--jwks`), each request's principal owning the tasks
//! it creates. Another principal's task is answered exactly as an unknown
//! id; the tasks created outside MCP are the catalogue's operators'.

mod common;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rudder::store::Store;
use rudder_testkit::mcp;
use serde_json::{Value, json};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";
const OPS: &str = "ops-token-0123456789abcdef";
const UNKNOWN: &str = "00000000-0000-4000-8000-000000000000";

const CATALOGUE: &str = r#"
operators = ["ops"]

[[tool]]
name = "diagnose"
description = "Diagnose"
input_schema = { type = "object", properties = { incident = { type = "string" } } }

[[tool]]
name = "alice_only"
description = "Only alice lists and calls it"
principals = ["alice"]
"#;

fn sqlite(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("tasks.db").display())
}

fn private_file(path: &Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `rudder mcp --http 127.0.0.1:0` on the store of `dir` with the
/// catalogue above and `args`, stderr piped.
fn command(dir: &Path, args: &[&str]) -> tokio::process::Command {
    let tools = dir.join("tools.toml");
    std::fs::write(&tools, CATALOGUE).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.env_remove("RUDDER_STORE")
        .env_remove("RUDDER_MCP_TOKEN")
        .args(["--store", &sqlite(dir), "mcp", "--http", "127.0.0.1:0"])
        .arg("--tools")
        .arg(&tools)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// A running server and its URL.
async fn serve(dir: &Path, args: &[&str]) -> mcp::HttpServer {
    mcp::listen(command(dir, args)).await
}

/// The output of a server that refuses to start.
async fn refused(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = tokio::time::timeout(Duration::from_secs(60), command(dir, args).output())
        .await
        .expect("refused at once, not served")
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn post(
    url: &str,
    token: &str,
    method: &str,
    name: &str,
    params: Value,
) -> reqwest::RequestBuilder {
    let mut r = mcp::post(url, &mcp::request(method, params)).header("mcp-method", method);
    if !name.is_empty() {
        r = r.header("mcp-name", name);
    }
    if token.is_empty() {
        return r;
    }
    r.bearer_auth(token)
}

/// The JSON-RPC answer (id 1) to `method`, as `token`'s principal.
async fn rpc(url: &str, token: &str, method: &str, name: &str, params: Value) -> Value {
    let r = post(url, token, method, name, params).send().await.unwrap();
    assert_eq!(r.status(), 200, "{method}");
    let text = r.text().await.unwrap();
    let message = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .chain(std::iter::once(text.as_str()))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m["id"] == 1);
    message.unwrap_or_else(|| panic!("{method}: no answer in {text}"))
}

/// The error of an answer with every occurrence of `id` masked.
fn masked(answer: &Value, id: &str) -> Value {
    let error = answer
        .get("error")
        .unwrap_or_else(|| panic!("an error: {answer}"));
    serde_json::from_str(&error.to_string().replace(id, "ID")).unwrap()
}

fn open(dir: &Path) -> Store {
    Store::connect(Path::new(&sqlite(dir))).unwrap()
}

fn tokens_file(dir: &Path) -> PathBuf {
    let path = dir.join("tokens");
    private_file(
        &path,
        &format!("# the agents\nalice {ALICE}\nbob {BOB}\n\nops {OPS}\n"),
        0o600,
    );
    path
}

/// The task methods, as `token`'s principal, on `id`.
async fn every_task_method(url: &str, token: &str, id: &str) -> Vec<Value> {
    let mut answers = Vec::new();
    for (method, params) in [
        ("tasks/get", json!({"taskId": id})),
        (
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"input-1": {"action": "accept", "content": {}}}}),
        ),
        ("tasks/cancel", json!({"taskId": id, "reason": "not mine"})),
    ] {
        answers.push(rpc(url, token, method, id, params).await);
    }
    answers
}

/// Two principals of a tokens file: every task method refuses the other's
/// task exactly as an unknown id (the error objects equal but for the id),
/// and a listen never hears of it; the CLI's tasks are the operator's; a
/// tool limited to one principal is unknown to the others; the owner's
/// writes carry its name in the trail, with its cancel's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principals_task_is_an_unknown_id() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens_file(dir.path());
    let server = serve(dir.path(), &["--tokens", tokens.to_str().unwrap()]).await;
    let url = &server.url;

    let created = rpc(
        url,
        ALICE,
        "tools/call",
        "diagnose",
        json!({"name": "diagnose", "arguments": {"incident": "INC-1"}}),
    )
    .await;
    let mine = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_string();
    let store = open(dir.path());
    let task = store.get(&mine).unwrap();
    assert_eq!(task.owned_by.as_deref(), Some("alice"));
    assert_eq!(task.history[0].actor.as_deref(), Some("alice"));
    let db = dir.path().join("tasks.db");
    let shown = common::run(&db, &["get", &mine]);
    assert!(
        shown
            .stdout
            .lines()
            .any(|l| l.starts_with("owner") && l.ends_with("alice")),
        "{shown:?}"
    );
    let shown = common::run(&db, &["get", &mine, "--json"]);
    assert_eq!(shown.json()["owned_by"], "alice", "{shown:?}");
    // `copy` carries it to another backend, as part of the task.
    let copy = dir.path().join("copy.json");
    let copied = common::run(&db, &["copy", db.to_str().unwrap(), copy.to_str().unwrap()]);
    assert_eq!(copied.code, 0, "{copied:?}");
    let shown = common::run(&copy, &["get", &mine, "--json"]);
    assert_eq!(shown.json()["owned_by"], "alice", "{shown:?}");
    // The published output schema says what the field is.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli-output.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let owned_by = &schema["$defs"]["task"]["properties"]["owned_by"];
    assert!(
        owned_by.is_object(),
        "docs/cli-output.schema.json names owned_by"
    );
    let check = jsonschema::validator_for(owned_by).expect("the schema of owned_by");
    assert!(check.is_valid(&shown.json()["owned_by"]), "{owned_by}");

    // bob: each method on alice's task answers as on an unknown id.
    let unknown = every_task_method(url, BOB, UNKNOWN).await;
    let theirs = every_task_method(url, BOB, &mine).await;
    for (u, t) in unknown.iter().zip(&theirs) {
        assert_eq!(masked(u, UNKNOWN), masked(t, &mine), "{u} / {t}");
        assert_eq!(u["error"]["code"], -32602, "{u}");
    }
    assert_eq!(
        store.get(&mine).unwrap().status,
        rudder::task::Status::Working,
        "bob's cancel changed nothing"
    );
    // alice reaches it.
    let got = rpc(url, ALICE, "tasks/get", &mine, json!({"taskId": mine})).await;
    assert_eq!(got["result"]["taskId"], mine.as_str(), "{got}");

    // A task made with the CLI: the operator reaches it, bob does not.
    let cli = common::create(&dir.path().join("tasks.db"), &["--title", "from the CLI"]);
    let by_ops = rpc(url, OPS, "tasks/get", &cli, json!({"taskId": cli})).await;
    assert_eq!(by_ops["result"]["taskId"], cli.as_str(), "{by_ops}");
    let by_bob = every_task_method(url, BOB, &cli).await;
    for (u, t) in unknown.iter().zip(&by_bob) {
        assert_eq!(masked(u, UNKNOWN), masked(t, &cli));
    }
    // ... and the operator does not reach alice's.
    let by_ops = rpc(url, OPS, "tasks/get", &mine, json!({"taskId": mine})).await;
    assert_eq!(masked(&by_ops, &mine), masked(&unknown[0], UNKNOWN));

    // A tool for alice alone: bob neither lists nor calls it.
    let names = |answer: &Value| -> Vec<String> {
        answer["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect()
    };
    let listed = rpc(url, ALICE, "tools/list", "", json!({})).await;
    assert_eq!(names(&listed), ["diagnose", "alice_only"]);
    let listed = rpc(url, BOB, "tools/list", "", json!({})).await;
    assert_eq!(names(&listed), ["diagnose"]);
    let call = |tool: &str| json!({"name": tool, "arguments": {}});
    let limited = rpc(url, BOB, "tools/call", "alice_only", call("alice_only")).await;
    let absent = rpc(url, BOB, "tools/call", "no_such", call("no_such")).await;
    assert_eq!(masked(&limited, "alice_only"), masked(&absent, "no_such"));

    // A listen of bob for alice's task hears nothing of it; alice's does.
    let listen = |token: &'static str| {
        post(
            url,
            token,
            "subscriptions/listen",
            "",
            json!({"notifications": {"taskIds": [mine]}}),
        )
        .send()
    };
    let mut bobs = listen(BOB).await.unwrap();
    let mut alices = listen(ALICE).await.unwrap();
    let first = first_task_notification(&mut alices, Duration::from_secs(30)).await;
    assert_eq!(
        first.as_ref().map(|m| m["params"]["taskId"].clone()),
        Some(json!(mine))
    );
    assert_eq!(
        first_task_notification(&mut bobs, Duration::from_secs(2)).await,
        None,
        "bob hears nothing of alice's task"
    );

    // alice cancels with a reason: the trail says who and why.
    let cancelled = rpc(
        url,
        ALICE,
        "tasks/cancel",
        &mine,
        json!({"taskId": mine, "reason": "wrong incident"}),
    )
    .await;
    assert!(cancelled.get("result").is_some(), "{cancelled}");
    let task = store.get(&mine).unwrap();
    assert_eq!(task.status, rudder::task::Status::Cancelled);
    let last = task.history.last().unwrap();
    assert_eq!(last.actor.as_deref(), Some("alice"));
    assert_eq!(last.face, Some(rudder::task::Face::Mcp));
    assert_eq!(last.reason.as_deref(), Some("wrong incident"));

    // A token of no principal.
    let r = post(url, "nobody-0123456789abcdef", "tools/list", "", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

/// The first `notifications/tasks` of a listen's SSE stream within `wait`.
async fn first_task_notification(r: &mut reqwest::Response, wait: Duration) -> Option<Value> {
    mcp::SseEvents::default()
        .within(r, wait, |m| m["method"] == "notifications/tasks")
        .await
}

/// A tokens file others may read, or with a name or a token twice, is
/// refused before anything is served: exit 2, the path and the line, never
/// the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loose_or_duplicate_tokens_file_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    let arg = path.to_str().unwrap().to_string();
    private_file(&path, &format!("alice {ALICE}\n"), 0o640);
    let (code, stderr) = refused(dir.path(), &["--tokens", &arg]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("chmod 600 {arg}")) && stderr.contains("640"),
        "{stderr}"
    );
    assert!(!stderr.contains(ALICE), "{stderr}");

    for (text, wanted) in [
        (
            format!("alice {ALICE}\nalice {BOB}\n"),
            "line 2: the name \"alice\" is also on line 1",
        ),
        (
            format!("alice {ALICE}\n# again\nbob {ALICE}\n"),
            "line 3: the token of \"bob\" is also on line 1",
        ),
    ] {
        private_file(&path, &text, 0o600);
        let (code, stderr) = refused(dir.path(), &["--tokens", &arg]).await;
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(&arg) && stderr.contains(wanted), "{stderr}");
        assert!(!stderr.contains(ALICE) && !stderr.contains(BOB), "{stderr}");
    }
}

/// The single token of `$RUDDER_MCP_TOKEN` keeps working, as the principal
/// `mcp-token`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_single_token_is_the_principal_mcp_token() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = command(dir.path(), &[]);
    cmd.env("RUDDER_MCP_TOKEN", ALICE);
    let server = mcp::listen(cmd).await;
    let created = rpc(
        &server.url,
        ALICE,
        "tools/call",
        "diagnose",
        json!({"name": "diagnose", "arguments": {}}),
    )
    .await;
    let id = created["result"]["taskId"].as_str().unwrap().to_string();
    let task = open(dir.path()).get(&id).unwrap();
    assert_eq!(task.owned_by.as_deref(), Some("mcp-token"));
    assert_eq!(task.history[0].actor.as_deref(), Some("mcp-token"));
}

const ISSUER: &str = "https://auth.example.test";
const RESOURCE: &str = "https://mcp.example.test/mcp";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/mcp/tests/fixtures")
        .join(name)
}

/// A JWT signed with the RSA test key, of `claims` over good ones.
fn jwt(claims: Value) -> String {
    let now = chrono::Utc::now().timestamp();
    let mut all = json!({"sub": "carol", "iss": ISSUER, "aud": RESOURCE, "exp": now + 600});
    if let (Some(a), Some(c)) = (all.as_object_mut(), claims.as_object()) {
        a.extend(c.clone());
    }
    let key = jsonwebtoken::EncodingKey::from_rsa_der(
        &std::fs::read(fixture("jwt-rsa-private.der")).unwrap(),
    );
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("test-rsa".into());
    jsonwebtoken::encode(&header, &all, &key).unwrap()
}

/// JWT access tokens: the protected resource metadata is served and a 401
/// points at it; a valid token's `sub` owns what it creates; an expired
/// one, one for another audience and one from another issuer are 401
/// `invalid_token`; a JWKS that is missing is refused at start with its
/// path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwt_names_its_principal() {
    let dir = tempfile::tempdir().unwrap();
    let jwks = fixture("jwks-rsa.json");
    let args = [
        "--jwks",
        jwks.to_str().unwrap(),
        "--issuer",
        ISSUER,
        "--resource",
        RESOURCE,
    ];
    let server = serve(dir.path(), &args).await;
    let base = server.url.trim_end_matches("/mcp").to_string();
    mcp::tls();
    let http = reqwest::Client::new();
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let meta: Value = http
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(meta["resource"], RESOURCE, "{path}");
        assert_eq!(meta["authorization_servers"], json!([ISSUER]));
    }
    let challenge = |r: &reqwest::Response| {
        r.headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let r = http.post(&server.url).body("{}").send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        challenge(&r),
        "Bearer resource_metadata=\"https://mcp.example.test/.well-known/oauth-protected-resource/mcp\""
    );

    let good = jwt(json!({}));
    let created = rpc(
        &server.url,
        &good,
        "tools/call",
        "diagnose",
        json!({"name": "diagnose", "arguments": {}}),
    )
    .await;
    let id = created["result"]["taskId"].as_str().unwrap().to_string();
    let task = open(dir.path()).get(&id).unwrap();
    assert_eq!(task.owned_by.as_deref(), Some("carol"));

    let now = chrono::Utc::now().timestamp();
    for (token, why) in [
        (jwt(json!({"exp": now - 3600})), "it has expired"),
        (
            jwt(json!({"aud": "https://other.example.test/mcp"})),
            "another audience",
        ),
        (
            jwt(json!({"iss": "https://evil.example.test"})),
            "another issuer",
        ),
    ] {
        let r = post(&server.url, &token, "tasks/get", &id, json!({"taskId": id}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{why}");
        let c = challenge(&r);
        assert!(
            c.contains("error=\"invalid_token\"") && c.contains(why),
            "{c}"
        );
        let body = r.text().await.unwrap();
        assert!(body.contains(why) && !body.contains(&token), "{body}");
    }

    let missing = dir.path().join("no-such-jwks.json");
    let (code, stderr) = refused(
        dir.path(),
        &[
            "--jwks",
            missing.to_str().unwrap(),
            "--issuer",
            ISSUER,
            "--resource",
            RESOURCE,
        ],
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");
}

/// Over stdio the principal is the local user (`USER@HOST`): the tasks it
/// creates are its own, its writes are recorded as its, a cancel's
/// `reason` is the trail's; and it is an operator, reaching a task made
/// with the CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_the_principal_is_the_local_user() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(&tools, CATALOGUE).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.env_remove("RUDDER_STORE")
        .env("USER", "ada")
        .args(["--store", &sqlite(dir.path()), "mcp", "--tools"])
        .arg(&tools);
    let mut raw = mcp::RawStdio::start(cmd);
    let mut ask = async |method: &str, params: Value| -> Value {
        raw.request(json!(1), method, params).await
    };
    let created = ask(
        "tools/call",
        json!({"name": "diagnose", "arguments": {"incident": "INC-2"}}),
    )
    .await;
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_string();
    let cancelled = ask(
        "tasks/cancel",
        json!({"taskId": id, "reason": "a duplicate"}),
    )
    .await;
    assert!(cancelled.get("result").is_some(), "{cancelled}");
    let task = open(dir.path()).get(&id).unwrap();
    let owner = task.owned_by.clone().expect("an owner");
    assert!(owner.starts_with("ada@"), "{owner}");
    assert_eq!(task.history[0].actor.as_ref(), Some(&owner));
    let last = task.history.last().unwrap();
    assert_eq!(last.actor.as_ref(), Some(&owner));
    assert_eq!(last.reason.as_deref(), Some("a duplicate"));

    let cli = common::create(&dir.path().join("tasks.db"), &["--title", "from the CLI"]);
    let got = ask("tasks/get", json!({"taskId": cli})).await;
    assert_eq!(got["result"]["taskId"], cli.as_str(), "{got}");
}

/// Without authorization (loopback, no token) nothing changes: every task
/// is reached, and writes are recorded as `mcp:CLIENT-NAME`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_authorization_writes_are_the_clients() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]).await;
    let created = rpc(
        &server.url,
        "",
        "tools/call",
        "diagnose",
        json!({"name": "diagnose", "arguments": {}}),
    )
    .await;
    let id = created["result"]["taskId"].as_str().unwrap().to_string();
    let task = open(dir.path()).get(&id).unwrap();
    assert_eq!(task.owned_by, None);
    assert_eq!(task.history[0].actor.as_deref(), Some("mcp:raw"));
    let cli = common::create(&dir.path().join("tasks.db"), &["--title", "from the CLI"]);
    let got = rpc(&server.url, "", "tasks/get", &cli, json!({"taskId": cli})).await;
    assert_eq!(got["result"]["taskId"], cli.as_str(), "{got}");
}
