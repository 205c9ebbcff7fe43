//! Issue 32 item 5, secret answers, from outside: a `writeOnly` or
//! `format: password` field of a task's input schema is masked in every
//! CLI output (human and `--json`) and in validation errors; `get --reveal`
//! shows it in clear (refused under `--read-only`); the worker's paths
//! (`claim`, the Rust worker API) read it in clear.

mod common;
use rudder::store::Work as _;

use std::time::Duration;

use common::{create, run};
use rudder::store::NewTask;
use rudder::{Status, Store};
use serde_json::{Value, json};

const MASK: &str = "••••";
const TOKEN: &str = "tok-5ecret-9f3a";
const PIN: &str = "271828";

fn schema() -> Value {
    json!({"type": "object", "required": ["service"], "properties": {
        "service": {"type": "string"},
        "token": {"type": "string", "writeOnly": true, "minLength": 8},
        "pin": {"type": "string", "format": "password"}
    }})
}

/// `rudder input ID` giving `service` and both secrets (`--set`), then
/// `more` arguments.
fn answer_secrets(path: &std::path::Path, id: &str, service: &str, more: &[&str]) -> common::Run {
    let (service, token, pin) = (
        format!("service={service}"),
        format!("token={TOKEN}"),
        format!("pin={PIN}"),
    );
    let args = [
        "input", id, "--set", &service, "--set", &token, "--set", &pin,
    ];
    run(path, &[&args[..], more].concat())
}

fn no_secret(text: &str) {
    assert!(
        !text.contains(TOKEN) && !text.contains(PIN),
        "a secret shows: {text}"
    );
}

#[test]
fn the_cli_masks_secret_answers_and_reveals_them_on_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    let id = create(&path, &["--schema", &schema().to_string()]);

    // A refused answer does not quote the secret (the value is too short
    // for `minLength`: the message would quote it).
    let refused = run(
        &path,
        &["input", &id, "--value", r#"{"service":"x","token":"zq7"}"#],
    );
    assert_eq!(refused.code, 5, "{refused:#?}");
    assert!(!refused.stderr.contains("zq7"), "{}", refused.stderr);
    assert!(refused.stderr.contains(MASK), "{}", refused.stderr);

    let answered = answer_secrets(&path, &id, "payments", &["--json"]);
    assert_eq!(answered.code, 0, "{answered:#?}");
    no_secret(&answered.stdout);
    let input = &answered.json()["task"]["input_value"];
    assert_eq!(
        *input,
        json!({"service": "payments", "token": MASK, "pin": MASK})
    );

    let got = run(&path, &["get", &id, "--json"]);
    assert_eq!(got.code, 0, "{got:#?}");
    no_secret(&got.stdout);
    assert_eq!(got.json()["input_value"]["token"], MASK);
    assert_eq!(got.json()["input_value"]["service"], "payments");

    let human = run(&path, &["get", &id]);
    assert_eq!(human.code, 0, "{human:#?}");
    no_secret(&human.stdout);
    assert!(human.stdout.contains(MASK), "{}", human.stdout);
    assert!(
        human.stdout.contains("secret fields: token, pin"),
        "{}",
        human.stdout
    );

    let listed = run(&path, &["list", "--json"]);
    assert_eq!(listed.code, 0, "{listed:#?}");
    no_secret(&listed.stdout);
    assert_eq!(listed.json()[0]["input_value"]["pin"], MASK);
    let table = run(&path, &["list"]);
    no_secret(&table.stdout);

    // --reveal: in clear, for whoever may write the store.
    let revealed = run(&path, &["get", &id, "--reveal", "--json"]);
    assert_eq!(revealed.code, 0, "{revealed:#?}");
    assert_eq!(revealed.json()["input_value"]["token"], TOKEN);
    assert_eq!(revealed.json()["input_value"]["pin"], PIN);
    let human = run(&path, &["get", &id, "--reveal"]);
    assert!(human.stdout.contains(TOKEN), "{}", human.stdout);
    assert!(
        human
            .stdout
            .contains("secret fields: token, pin (shown in clear: --reveal)"),
        "{}",
        human.stdout
    );
    // Not under --read-only: exit 4, `refused`, nothing shown.
    let read_only = run(&path, &["--read-only", "get", &id, "--reveal", "--json"]);
    assert_eq!(read_only.code, 4, "{read_only:#?}");
    assert_eq!(
        read_only.json()["error"],
        "reveal_refused",
        "{read_only:#?}"
    );
    no_secret(&read_only.stdout);

    // The worker's read is in clear: `claim` hands the task to a script
    // that must do the work with it.
    let claimed = run(&path, &["claim", "--json"]);
    assert_eq!(claimed.code, 0, "{claimed:#?}");
    assert_eq!(claimed.json()["task"]["input_value"]["token"], TOKEN);
    let holder = claimed.json()["holder"]
        .as_str()
        .expect("holder")
        .to_string();

    // A refusal carries the task's current state: masked too.
    let lost = run(
        &path,
        &["complete", &id, "--holder", "someone-else", "--json"],
    );
    assert_eq!(lost.code, 4, "{lost:#?}");
    no_secret(&lost.stdout);
    assert_eq!(
        lost.json()["task"]["input_value"]["token"],
        MASK,
        "{lost:#?}"
    );

    // Its mutations' answers and `wait` are masked again.
    let done = run(&path, &["complete", &id, "--holder", &holder, "--json"]);
    assert_eq!(done.code, 0, "{done:#?}");
    no_secret(&done.stdout);
    let waited = run(&path, &["wait", &id, "--json"]);
    assert_eq!(waited.code, 0, "{waited:#?}");
    no_secret(&waited.stdout);
    assert_eq!(waited.json()["input_value"]["token"], MASK);
}

/// A secret answer the task keeps after it asked its next question (its
/// earlier answers, `answered`) is masked by the schema it answered, in
/// every CLI output, and shown by `get --reveal` only.
#[test]
fn an_earlier_secret_answer_is_masked_once_the_next_question_is_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    let id = create(&path, &["--schema", &schema().to_string()]);
    let answered = answer_secrets(&path, &id, "payments", &[]);
    assert_eq!(answered.code, 0, "{answered:#?}");
    // The next question: plain, so only the earlier answer has secrets.
    let next = json!({"type": "object", "properties": {"window": {"type": "string"}}});
    let asked = run(
        &path,
        &[
            "request-input",
            &id,
            "--schema",
            &next.to_string(),
            "--message",
            "Which window?",
            "--json",
        ],
    );
    assert_eq!(asked.code, 0, "{asked:#?}");
    no_secret(&asked.stdout);
    let earlier = &asked.json()["task"]["answered"][0];
    assert_eq!(
        earlier["input_value"],
        json!({"service": "payments", "token": MASK, "pin": MASK}),
        "{earlier}"
    );
    // While the next question waits (no answer standing, the secret one
    // earlier) on a file its writer vouched for: `list --json` must not
    // hand the task's own text, which holds the earlier answer in clear.
    let lock = std::fs::read_to_string(dir.path().join("tasks.json.lock")).expect("lock");
    assert!(lock.contains("\ncanonical-store 1 "), "{lock}");
    let listed = run(&path, &["list", "--json"]);
    assert_eq!(listed.code, 0, "{listed:#?}");
    no_secret(&listed.stdout);
    assert_eq!(
        listed.json()[0]["answered"][0]["input_value"]["token"],
        MASK
    );
    let window = run(&path, &["input", &id, "--set", "window=1h", "--json"]);
    assert_eq!(window.code, 0, "{window:#?}");
    no_secret(&window.stdout);
    for args in [
        &["get", &id, "--json"][..],
        &["get", &id],
        &["list", "--json"],
        &["list"],
        &["log", &id],
    ] {
        let out = run(&path, args);
        assert_eq!(out.code, 0, "{args:?}: {out:#?}");
        no_secret(&out.stdout);
    }
    let human = run(&path, &["get", &id]);
    assert!(
        human.stdout.contains("earlier answer (") && human.stdout.contains(MASK),
        "{}",
        human.stdout
    );
    let revealed = run(&path, &["get", &id, "--reveal", "--json"]);
    assert_eq!(revealed.code, 0, "{revealed:#?}");
    assert_eq!(
        revealed.json()["answered"][0]["input_value"]["token"],
        TOKEN
    );
    assert_eq!(revealed.json()["input_value"], json!({"window": "1h"}));
}

#[test]
fn the_rust_worker_api_reads_secret_answers_in_clear() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    let store = Store::connect(&path).expect("a store URL");
    let clear = json!({"service": "payments", "token": TOKEN, "pin": PIN});

    // Answered while no worker held it: the next claim reads it in clear.
    let id = store
        .create(NewTask {
            input_schema: Some(schema()),
            ..NewTask::default()
        })
        .expect("create")
        .task
        .task_id;
    store
        .provide_input(&id, clear.clone(), None)
        .expect("input");
    let mut worker = store.worker("w").start().expect("start");
    let mut job = worker
        .next(Duration::from_secs(30))
        .expect("next")
        .expect("a job");
    assert_eq!(job.task().input_value.as_ref(), Some(&clear));

    // Asked by the worker: the answer it waits for is in clear too.
    let mut answer = job.ask("Credentials?", schema()).expect("ask");
    let answerer = {
        let (path, id, clear) = (path.clone(), id.clone(), clear.clone());
        std::thread::spawn(move || {
            Store::connect(&path)
                .expect("url")
                .provide_input(&id, clear, None)
                .expect("input")
        })
    };
    let value = answer
        .wait(Some(Duration::from_secs(30)))
        .expect("wait")
        .expect("answered");
    answerer.join().expect("answerer");
    assert_eq!(value, clear);
    job.complete(json!("done")).expect("complete");
    // The store keeps the clear value: masking is only what is shown.
    let stored = store.get(&id).expect("the task");
    assert_eq!(stored.status, Status::Completed);
    assert_eq!(stored.input_value, Some(clear));
}

/// `get --reveal` on a store this user cannot write (a read-only view of
/// its directory) is refused, naming why; a plain `get` still reads it,
/// masked.
#[test]
fn reveal_is_refused_on_a_store_this_user_cannot_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    std::fs::create_dir(&src).expect("mkdir");
    let path = src.join("tasks.json");
    let id = create(&path, &["--schema", &schema().to_string()]);
    let answered = answer_secrets(&path, &id, "db", &[]);
    assert_eq!(answered.code, 0, "{answered:#?}");
    let view = match common::ReadOnlyView::of(&src, &dir.path().join("view")) {
        Ok(v) => v,
        Err(why) => {
            eprintln!("SKIPPED reveal_is_refused...: cannot set up a read-only view: {why}");
            return;
        }
    };
    let ro = view.path().join("tasks.json");
    let refused = run(&ro, &["get", &id, "--reveal", "--json"]);
    assert_eq!(refused.code, 4, "{refused:#?}");
    assert_eq!(refused.json()["error"], "reveal_refused", "{refused:#?}");
    assert!(
        refused.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot be written")),
        "{refused:#?}"
    );
    no_secret(&refused.stdout);
    let masked = run(&ro, &["get", &id, "--json"]);
    assert_eq!(masked.code, 0, "{masked:#?}");
    assert_eq!(masked.json()["input_value"]["token"], MASK);
}

/// Issue 30 item 18: `rudder list --json` on a file a rudder writer
/// vouched for (its lock file's `canonical-store` line: tasks are printed
/// as their own text) still masks a secret answer, and prints exactly what
/// the same tasks print from a file another program wrote, byte for byte
/// or in a layout of its own (checked whole, every task read in full).
#[test]
fn list_json_masks_secrets_on_a_vouched_file_and_prints_another_programs_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    let id = create(&path, &["--schema", &schema().to_string()]);
    create(
        &path,
        &[
            "--title",
            "caf\u{e9} \"quoted\" 支付 \\n",
            "--kind",
            "diagnose",
            "--request",
            r#"{"big": 123456789012345678901234567890, "f": 1.50, "e": -1.5e-300, "s": "a\u0001b"}"#,
        ],
    );
    let answered = answer_secrets(&path, &id, "db", &[]);
    assert_eq!(answered.code, 0, "{answered:#?}");
    let lock = std::fs::read_to_string(dir.path().join("tasks.json.lock")).expect("lock");
    assert!(lock.contains("\ncanonical-store 1 "), "{lock}");

    let vouched = run(&path, &["list", "--json"]);
    assert_eq!(vouched.code, 0, "{vouched:#?}");
    no_secret(&vouched.stdout);
    let tasks = vouched.json();
    assert_eq!(tasks[0]["input_value"]["token"], MASK);
    assert_eq!(tasks[0]["input_value"]["service"], "db");
    assert!(vouched.stdout.contains("123456789012345678901234567890"));

    // The same bytes in a file no rudder writer recorded.
    let copy = dir.path().join("copy.json");
    std::fs::write(&copy, std::fs::read(&path).expect("store")).expect("copy");
    let checked = run(&copy, &["list", "--json"]);
    assert_eq!(checked.stdout, vouched.stdout);
    // The same tasks, written compact by hand.
    let hand = dir.path().join("hand.json");
    let text = std::fs::read_to_string(&path).expect("store");
    let value: Value = serde_json::from_str(&text).expect("JSON");
    std::fs::write(&hand, value.to_string()).expect("hand-written");
    let by_hand = run(&hand, &["list", "--json"]);
    assert_eq!(by_hand.stdout, vouched.stdout);
    let filtered = run(&path, &["list", "--json", "--kind", "diagnose"]);
    assert_eq!(
        filtered.stdout,
        run(&hand, &["list", "--json", "--kind", "diagnose"]).stdout
    );
    assert_eq!(filtered.json().as_array().map(Vec::len), Some(1));
}
