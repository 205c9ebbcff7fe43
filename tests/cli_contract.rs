//! The CLI's contract with scripts (issue 13, docs/architecture.md "The binary"): every
//! command's `--json` answer validates against the JSON Schema published in
//! docs/cli-output.schema.json, every error kind the code can produce is in
//! the schema and docs/cli.md with its exit code, `--read-only` refuses every
//! write before and after the subcommand, usage errors are exit 2
//! everywhere, docs/cli.md's CLI reference matches the clap definition, and
//! the completions and the man page are generated.

mod common;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use common::{Run, assert_store_untouched, create, rudder, run, store_state};
use rudder::cli::{Cli, ErrorKind};
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn published_schema() -> Value {
    serde_json::from_str(&read("docs/cli-output.schema.json")).expect("the schema is JSON")
}

/// A validator for one definition of the published schema.
fn validator(def: &str) -> jsonschema::Validator {
    let schema = published_schema();
    assert!(
        schema["$defs"].get(def).is_some(),
        "the schema defines no {def}"
    );
    let one = json!({
        "$schema": schema["$schema"],
        "$defs": schema["$defs"],
        "$ref": format!("#/$defs/{def}"),
    });
    jsonschema::options()
        .should_validate_formats(true)
        .build(&one)
        .expect("the schema compiles")
}

/// `r` printed exactly one JSON value of shape `def`, exit `code`; an error
/// carries that same code and says nothing on stderr.
fn assert_shape(r: &Run, def: &str, code: i32, ctx: &str) -> Value {
    assert_eq!(r.code, code, "{ctx}: {r:#?}");
    let v = r.json();
    let check = validator(def);
    let errors: Vec<String> = check
        .iter_errors(&v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{ctx}: not a {def}: {errors:#?}\n{v:#}");
    // The whole published schema takes it too (its top level lists every
    // shape).
    let all = jsonschema::options()
        .should_validate_formats(true)
        .build(&published_schema())
        .expect("the schema compiles");
    assert!(all.is_valid(&v), "{ctx}: the top-level schema refuses {v}");
    if def == "error" {
        assert_eq!(v["exit_code"], code, "{ctx}");
        assert!(
            r.stderr.is_empty(),
            "{ctx}: --json errors are on stdout only"
        );
    }
    v
}

fn store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = common::store_in(dir.path());
    (dir, path)
}

const SCHEMA: &str = r#"{"type":"object","required":["service"],"properties":{"service":{"type":"string"},"n":{"type":"integer"}}}"#;

fn every_command_prints_its_documented_shape_once() {
    let (dir, path) = store();
    let p = &path;
    let shape = |args: &[&str], def: &str, code: i32| {
        assert_shape(&run(p, args), def, code, &args.join(" "))
    };
    let r = run(
        p,
        &[
            "create", "--title", "t", "--key", "k", "--ttl", "1h", "--json",
        ],
    );
    let id = assert_shape(&r, "mutation", 0, "create")["task"]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = run(p, &["create", "--title", "t", "--key", "k", "--json"]);
    assert_eq!(
        assert_shape(&r, "mutation", 0, "create again")["change"],
        "unchanged"
    );
    let asking = create(p, &["--schema", SCHEMA, "--title", "asks"]);
    shape(&["get", &id, "--json"], "get", 0);
    let got = shape(&["get", &asking, "--json"], "get", 0);
    assert!(got["mcp_elicitation"]["fits"].is_boolean());
    shape(&["list", "--json"], "list", 0);
    let r = run(
        p,
        &[
            "list",
            "--status",
            "input_required",
            "--sort",
            "title",
            "--json",
        ],
    );
    assert_eq!(
        assert_shape(&r, "list", 0, "list --status")
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Kinds: created, listed by kind, shown; a bad one refused, naming it.
    let r = run(p, &["create", "--kind", "diagnose", "--json"]);
    let kinded = assert_shape(&r, "mutation", 0, "create --kind")["task"].clone();
    assert_eq!(kinded["kind"], "diagnose");
    let r = run(p, &["list", "--kind", "diagnose", "--kind", "x", "--json"]);
    let listed = assert_shape(&r, "list", 0, "list --kind");
    assert_eq!(listed.as_array().unwrap(), std::slice::from_ref(&kinded));
    let r = run(p, &["get", kinded["task_id"].as_str().unwrap(), "--json"]);
    assert_eq!(assert_shape(&r, "get", 0, "get")["kind"], "diagnose");
    let r = run(p, &["create", "--kind", "two words", "--json"]);
    let e = assert_shape(&r, "error", 2, "create --kind 'two words'");
    assert_eq!(
        (&e["error"], &e["field"], &e["kind"]),
        (&json!("invalid_kind"), &json!("kind"), &json!("two words"))
    );
    // Shell workers: claim by kind, write as the holder; a stranger is
    // refused, and nothing else is claimable.
    let r = run(
        p,
        &["claim", "--kind", "diagnose", "--lease", "1h", "--json"],
    );
    let claimed = assert_shape(&r, "claim", 0, "claim --kind");
    assert_eq!(claimed["task"]["task_id"], kinded["task_id"]);
    let holder = claimed["holder"].as_str().unwrap().to_string();
    assert_eq!(
        claimed["task"]["claimed_by"].as_str(),
        Some(holder.as_str())
    );
    let kid = kinded["task_id"].as_str().unwrap();
    shape(
        &[
            "heartbeat",
            kid,
            "--holder",
            &holder,
            "--lease",
            "1h",
            "--json",
        ],
        "mutation",
        0,
    );
    let r = run(p, &["heartbeat", kid, "--holder", "stranger", "--json"]);
    assert_eq!(
        assert_shape(&r, "error", 4, "heartbeat --holder stranger")["error"],
        "lease_lost"
    );
    let r = run(p, &["claim", "--kind", "diagnose", "--json"]);
    assert_eq!(
        assert_shape(&r, "error", 10, "claim, nothing left")["error"],
        "nothing_to_claim"
    );
    // Finished, so that reclaim below has only the task it expects.
    let r = run(p, &["cancel", kinded["task_id"].as_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:#?}");
    // wait on a task waiting for input: 9 and the task.
    shape(&["wait", &asking, "--json"], "task", 9);
    let r = run(p, &["input", &asking, "--set", "service=db", "--json"]);
    assert_shape(&r, "mutation", 0, "input --set");
    let r = run(
        p,
        &[
            "request-input",
            &asking,
            "--schema",
            SCHEMA,
            "--message",
            "again",
            "--json",
        ],
    );
    assert_shape(&r, "mutation", 0, "request-input");
    let r = run(
        p,
        &[
            "input",
            &asking,
            "--value",
            r#"{"service":"api"}"#,
            "--json",
        ],
    );
    assert_shape(&r, "mutation", 0, "input --value");
    shape(
        &["heartbeat", &id, "--message", "alive", "--json"],
        "mutation",
        0,
    );
    assert_shape(
        &run(
            p,
            &["complete", &id, "--result", r#"{"ok":true}"#, "--json"],
        ),
        "mutation",
        0,
        "complete",
    );
    shape(&["wait", &id, "--json"], "task", 0);
    shape(
        &["fail", &asking, "--error", "boom", "--json"],
        "mutation",
        0,
    );
    shape(&["wait", &asking, "--json"], "task", 7);
    let third = create(p, &["--title", "third"]);
    shape(
        &["cancel", &third, "--reason", "dup", "--as", "ana", "--json"],
        "mutation",
        0,
    );
    shape(&["wait", &third, "--json"], "task", 8);
    // The trail: JSON Lines, each a trail_entry; the cancel says who and why.
    let r = run(p, &["log", &third, "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let check = validator("trail_entry");
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 2, "created, cancelled: {}", r.stdout);
    for v in &lines {
        let errors: Vec<String> = check.iter_errors(v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "not a trail_entry: {errors:#?}\n{v:#}");
    }
    assert_eq!(lines[0]["before"], Value::Null);
    assert_eq!(lines[1]["before"], "working");
    assert_eq!(lines[1]["status"], "cancelled");
    assert_eq!(lines[1]["actor"], "ana");
    assert_eq!(lines[1]["face"], "cli");
    assert_eq!(lines[1]["reason"], "dup");
    let r = run(p, &["log", &third]);
    assert_eq!(r.code, 0, "{r:#?}");
    let last = r.stdout.lines().last().unwrap_or_default();
    assert!(
        last.contains("working → cancelled")
            && last.contains("ana (cli)")
            && last.contains("reason: dup"),
        "{}",
        r.stdout
    );
    let fourth = create(p, &["--title", "fourth"]);
    shape(
        &["wait", &fourth, "--timeout", "200ms", "--json"],
        "error",
        124,
    );
    let r = run(p, &["reclaim", "--older-than", "0s", "--dry-run", "--json"]);
    assert_shape(&r, "reclaim_report", 0, "reclaim --dry-run");
    let r = run(p, &["reclaim", "--older-than", "0s", "--json"]);
    let report = assert_shape(&r, "reclaim_report", 0, "reclaim");
    assert_eq!(report["reclaimed"][0]["task_id"], fourth.as_str());
    let r = run(p, &["prune", "--older-than", "0s", "--json"]);
    assert!(
        !assert_shape(&r, "prune_report", 0, "prune")["removed"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let other = dir.path().join("copy.db");
    let r = run(
        p,
        &[
            "copy",
            p.to_str().unwrap(),
            other.to_str().unwrap(),
            "--json",
        ],
    );
    assert_shape(&r, "copy_report", 0, "copy");

    // Errors, one of each kind a script can provoke here.
    let live = create(p, &["--title", "live", "--schema", SCHEMA]);
    let done = create(p, &["--title", "done"]);
    run(p, &["cancel", &done]);
    let error = |args: &[&str], code: i32, kind: &str| {
        let v = assert_shape(&run(p, args), "error", code, &args.join(" "));
        assert_eq!(v["error"], kind, "{args:?}: {v}");
        v
    };
    error(&["get", "nope", "--json"], 3, "unknown_task");
    let v = error(&["get", "", "--json"], 3, "unknown_task");
    assert_eq!(
        v["message"], r#"unknown task: "" (the id is empty)"#,
        "an empty id is said to be empty"
    );
    let v = error(&["complete", &done, "--json"], 4, "refused");
    assert_eq!(v["task"]["task_id"], done.as_str());
    error(
        &[
            "input",
            &live,
            "--value",
            r#"{"n":1}"#,
            "--revision",
            "999",
            "--json",
        ],
        4,
        "stale_revision",
    );
    let v = error(
        &["input", &live, "--set", "n=abc", "--json"],
        5,
        "invalid_input",
    );
    assert!(!v["violations"].as_array().unwrap().is_empty());
    error(
        &["create", "--key", "k", "--request", "1", "--json"],
        4,
        "idempotency_conflict",
    );
    error(
        &["create", "--schema", r#"{"type":"nonsense"}"#, "--json"],
        2,
        "invalid_schema",
    );
    let v = error(&["create", "--ttl", "soon", "--json"], 2, "usage");
    assert_eq!(v["argument"], "--ttl");
    let v = error(&["fail", &live, "--json"], 2, "usage");
    assert_eq!(
        v["missing"],
        json!(["--error <TEXT>"]),
        "the missing argument is named"
    );
    let v = error(&["--read-only", "cancel", &live, "--json"], 4, "read_only");
    assert_eq!(v["command"], "cancel");
    error(
        &["copy", p.to_str().unwrap(), p.to_str().unwrap(), "--json"],
        2,
        "usage",
    );
    error(
        &[
            "copy",
            other.to_str().unwrap(),
            p.to_str().unwrap(),
            "--json",
        ],
        4,
        "copy_refused",
    );

    let r = common::rudder()
        .env("RUDDER_LOCK_TIMEOUT", "bogus")
        .args(["--store", p.to_str().unwrap(), "list", "--json"])
        .output()
        .expect("run")
        .into();
    let v = assert_shape(&r, "error", 2, "RUDDER_LOCK_TIMEOUT=bogus");
    assert_eq!(v["variable"], "RUDDER_LOCK_TIMEOUT");

    // A store URL that names nothing, from the flag or the environment.
    let r = common::rudder()
        .args(["--store", "sqlite:", "list", "--json"])
        .output()
        .expect("run")
        .into();
    assert_eq!(
        assert_shape(&r, "error", 2, "--store sqlite:")["argument"],
        "--store"
    );
    let r = common::rudder()
        .env("RUDDER_STORE", "sqlite:")
        .args(["get", "x", "--json"])
        .output()
        .expect("run")
        .into();
    let v = assert_shape(&r, "error", 2, "RUDDER_STORE=sqlite:");
    assert_eq!(v["variable"], "RUDDER_STORE");

    // A file that is not a store (a database server has no such file).
    if common::kind() != common::Kind::Postgres {
        let broken = dir
            .path()
            .join(common::store_file().replace("tasks", "broken"));
        std::fs::write(&broken, "{ this is not a store").unwrap();
        let r = run(&broken, &["list", "--json"]);
        let v = assert_shape(&r, "error", 6, "a corrupt store");
        assert!(["corrupt_store", "not_a_store"].contains(&v["error"].as_str().unwrap()));
    }
}

/// `rudder --store STORE ARGS` with `env`, once plain and once with
/// `--json`: the error's kind is `kind` on exit 6, its message starts with
/// the store's `location`, and the JSON (valid against the published
/// schema) names it as `store`, with `path` the store's file if it has one.
fn assert_names_store(
    store: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    kind: &str,
    location: &str,
    path: Option<&Path>,
) -> Value {
    let go = |json: bool| -> Run {
        let mut c = rudder();
        c.arg("--store").arg(store).args(args);
        if json {
            c.arg("--json");
        }
        c.envs(env.iter().copied());
        c.output().expect("run").into()
    };
    let ctx = format!("{kind} of {location}");
    let plain = go(false);
    assert_eq!(plain.code, 6, "{ctx}: {plain:#?}");
    assert!(
        plain.stderr.contains(&format!("{location}: ")),
        "{ctx}: the message does not start with the store: {}",
        plain.stderr
    );
    let v = assert_shape(&go(true), "error", 6, &ctx);
    assert_eq!(v["error"], kind, "{ctx}: {v}");
    assert_eq!(v["store"], location, "{ctx}: {v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{location}: ")),
        "{ctx}: {v}"
    );
    match path {
        Some(p) => assert_eq!(v["path"], p.to_str().unwrap(), "{ctx}: {v}"),
        None => assert!(v.get("path").is_none(), "{ctx}: a server has no path: {v}"),
    }
    v
}

/// Every backend names its store the same way in the errors about the
/// store itself (corrupt, I/O, too large, the lock, not a store, the
/// database): the JSON file by its path, SQLite as `sqlite:PATH`,
/// PostgreSQL by its URL with the password redacted.
#[test]
fn store_errors_name_the_store_the_same_way_on_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shown = |p: &Path| p.display().to_string();

    // The JSON file.
    let broken = d.join("broken.json");
    std::fs::write(&broken, "{ this is not a store").unwrap();
    let v = assert_names_store(
        &broken,
        &["list"],
        &[],
        "corrupt_store",
        &shown(&broken),
        Some(&broken),
    );
    assert_eq!(v["line"], 1, "{v}");
    std::fs::write(d.join("plain"), "a file, not a directory").unwrap();
    let under_file = d.join("plain/sub/tasks.json");
    let v = assert_names_store(
        &under_file,
        &["create", "--title", "x"],
        &[],
        "io",
        &shown(&under_file),
        Some(&under_file),
    );
    // The directory it could not create is named too.
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("create the store directory")
            && message.contains(&shown(&d.join("plain/sub"))),
        "{v}"
    );
    let small = d.join("small.json");
    assert_names_store(
        &small,
        &["create", "--title", "x"],
        &[("RUDDER_MAX_STORE_BYTES", "10")],
        "too_large",
        &shown(&small),
        Some(&small),
    );

    // SQLite.
    let db = d.join("tasks.db");
    let id = rudder::Store::connect(&db)
        .expect("a store URL")
        .create(rudder::NewTask::default())
        .unwrap()
        .task
        .task_id;
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE tasks SET doc = '{not json'", [])
        .unwrap();
    let sqlite = format!("sqlite:{}", db.display());
    let v = assert_names_store(&db, &["get", &id], &[], "corrupt_store", &sqlite, Some(&db));
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("does not read back"),
        "{v}"
    );
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert_names_store(
        &db,
        &["create", "--title", "x"],
        &[("RUDDER_LOCK_TIMEOUT", "200ms")],
        "lock_timeout",
        &sqlite,
        Some(&db),
    );
    conn.execute_batch("ROLLBACK").unwrap();
    let text = d.join("text.db");
    std::fs::write(&text, "not a database\n").unwrap();
    assert_names_store(
        &text,
        &["list"],
        &[],
        "not_a_store",
        &format!("sqlite:{}", text.display()),
        Some(&text),
    );
    let db_under_file = d.join("plain/sub/tasks.db");
    assert_names_store(
        &db_under_file,
        &["create", "--title", "x"],
        &[],
        "io",
        &format!("sqlite:{}", db_under_file.display()),
        Some(&db_under_file),
    );

    // PostgreSQL: a server that cannot be reached (no server needed) ...
    let unreachable = d.join("no-server");
    let url = format!(
        "postgresql://alice:s3cret@/postgres?host={}&port=1",
        unreachable.display()
    );
    let shown_url = url.replace("s3cret", "***");
    let v = assert_names_store(
        Path::new(&url),
        &["list"],
        &[("RUDDER_LOCK_TIMEOUT", "1s")],
        "database",
        &shown_url,
        None,
    );
    assert!(!v.to_string().contains("s3cret"), "{v}");
    // ... and a task whose document does not read back.
    if common::pg::available() {
        let url = common::pg::store_url();
        let id = rudder::Store::connect(&url)
            .expect("a store URL")
            .create(rudder::NewTask::default())
            .unwrap()
            .task
            .task_id;
        let rudder::store::StoreUrl::Postgres(u) = rudder::store::StoreUrl::parse(&url).unwrap()
        else {
            unreachable!()
        };
        let mut admin =
            ::postgres::Client::connect(u.secret_text(), ::postgres::NoTls).expect("connect");
        // JSON (the server checks that: `status_message` is generated
        // from the document), but not a task.
        admin
            .batch_execute("UPDATE rudder_tasks SET doc = '[\"not a task\"]'")
            .unwrap();
        let v = assert_names_store(
            Path::new(&url),
            &["get", &id],
            &[],
            "corrupt_store",
            u.shown(),
            None,
        );
        assert!(
            v["message"].as_str().unwrap().contains("store is corrupt"),
            "{v}"
        );
    }
}

/// The kinds the code can produce ([`ErrorKind::ALL`], which the mapping
/// functions return), with their exit codes.
fn code_kinds() -> BTreeMap<&'static str, i32> {
    ErrorKind::ALL
        .iter()
        .map(|k| (k.as_str(), k.exit_code()))
        .collect()
}

#[test]
fn the_schema_lists_every_error_kind_with_its_exit_code() {
    let schema = published_schema();
    let error = &schema["$defs"]["error"];
    let listed: BTreeSet<&str> = error["properties"]["error"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let pairs: BTreeMap<&str, i32> = error["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let p = &b["properties"];
            (
                p["error"]["const"].as_str().unwrap(),
                p["exit_code"]["const"].as_i64().unwrap() as i32,
            )
        })
        .collect();
    let kinds = code_kinds();
    assert_eq!(
        listed,
        kinds.keys().copied().collect(),
        "the schema's kinds"
    );
    assert_eq!(pairs, kinds, "the schema's exit code per kind");
}

/// The rows `| `kind` | code | … |` of docs/cli.md's kind table.
fn kind_table(page: &str) -> BTreeMap<String, i32> {
    let start = page
        .find("| kind | exit | meaning |")
        .expect("docs/cli.md has the table of error kinds");
    page[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let kind = cells[1].trim_matches('`').to_string();
            let code = cells[2]
                .parse()
                .unwrap_or_else(|_| panic!("exit code in {l}"));
            (kind, code)
        })
        .collect()
}

#[test]
fn the_cli_page_lists_every_error_kind_the_cli_can_produce() {
    let page = read("docs/cli.md");
    let table = kind_table(&page);
    let kinds: BTreeMap<String, i32> = code_kinds()
        .into_iter()
        .map(|(k, c)| (k.to_string(), c))
        .collect();
    for (kind, code) in &kinds {
        assert_eq!(
            table.get(kind),
            Some(code),
            "docs/cli.md's kind table: `{kind}` must be listed with exit {code}"
        );
    }
    for kind in table.keys() {
        assert!(
            kinds.contains_key(kind),
            "docs/cli.md lists `{kind}`, which the CLI never produces"
        );
    }
    // The exit-code table names each kind in the row of its code.
    let start = page
        .find("| code | meaning |")
        .expect("the exit-code table");
    for line in page[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
    {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let code: i32 = cells[1].parse().expect("a code");
        for kind in cells[3]
            .split(',')
            .map(|k| k.trim().trim_matches('`'))
            .filter(|k| !k.is_empty())
        {
            assert_eq!(
                kinds.get(kind),
                Some(&code),
                "exit-code table: {kind} under {code}"
            );
        }
    }
}

/// Every command that writes, with what it needs to write something.
fn writing_commands(path: &Path, id: &str, asking: &str, other: &Path) -> Vec<Vec<String>> {
    let p = path.to_str().unwrap().to_string();
    let o = other.to_str().unwrap().to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        s(&["create", "--title", "new"]),
        s(&["input", asking, "--set", "service=db"]),
        s(&["input", asking, "--value", r#"{"service":"db"}"#]),
        s(&["request-input", id, "--schema", SCHEMA]),
        s(&["heartbeat", id]),
        s(&["complete", id]),
        s(&["fail", id, "--error", "x"]),
        s(&["claim"]),
        s(&["cancel", id]),
        s(&["reclaim", "--older-than", "0s"]),
        s(&["prune", "--older-than", "0s"]),
        vec!["copy".into(), p, o],
        // It writes its delivery record (and never returns if let run).
        s(&["notify", "--exec", "true"]),
    ]
}

fn read_only_refuses_every_write_once() {
    let (dir, path) = store();
    let id = create(&path, &["--title", "t"]);
    let asking = create(&path, &["--title", "asks", "--schema", SCHEMA]);
    let done = create(&path, &["--title", "done"]);
    run(&path, &["cancel", &done]);
    let other = dir.path().join("other.json");
    let before = store_state(&path);
    for args in writing_commands(&path, &id, &asking, &other) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        for at_start in [true, false] {
            let mut all: Vec<&str> = if at_start {
                vec!["--read-only"]
            } else {
                vec![]
            };
            all.extend(&args);
            if !at_start {
                all.push("--read-only");
            }
            let ctx = all.join(" ");
            let r = run(&path, &all);
            assert_eq!(r.code, 4, "{ctx}: {r:#?}");
            assert!(r.stderr.contains("--read-only"), "{ctx}: {}", r.stderr);
            all.push("--json");
            let v = assert_shape(&run(&path, &all), "error", 4, &ctx);
            assert_eq!(v["error"], "read_only");
            assert_store_untouched(&before, &path, &ctx);
            assert!(!other.exists(), "{ctx}: copy wrote TO");
        }
    }
    // The demo and its worker write to their own store: refused, and it is
    // not even created.
    let demo = dir.path().join("demo.json");
    for args in [["demo", "--read-only"], ["--read-only", "worker"]] {
        let r: Run = rudder()
            .args(args)
            .arg("--store")
            .arg(&demo)
            .output()
            .expect("run")
            .into();
        assert_eq!(r.code, 4, "{args:?}: {r:#?}");
        assert!(!demo.exists(), "{args:?} created its store");
    }
    // Reads still work, and a dry run is a read.
    for args in [
        vec!["--read-only", "list"],
        vec!["get", &id, "--read-only"],
        vec!["--read-only", "wait", &done],
        vec!["reclaim", "--older-than", "0s", "--dry-run", "--read-only"],
    ] {
        let r = run(&path, &args);
        assert!(r.code == 0 || r.code == 8, "{args:?}: {r:#?}");
    }
    assert_store_untouched(&before, &path, "reads under --read-only");
}

fn list_on_a_store_that_does_not_exist_says_so_case() {
    let (_dir, path) = store();
    let r = run(&path, &["list"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(r.stdout.contains("no tasks"), "{}", r.stdout);
    assert!(
        r.stderr.contains("does not exist") && r.stderr.contains(path.to_str().unwrap()),
        "the note names the store: {}",
        r.stderr
    );
    let r = run(&path, &["list", "--json"]);
    assert_eq!((r.code, r.json()), (0, json!([])), "{r:#?}");
    assert!(r.stderr.contains("does not exist"), "{}", r.stderr);
    assert!(!path.exists(), "list created the store");
    // An existing empty store says nothing of the kind.
    let id = create(&path, &[]);
    run(&path, &["cancel", &id]);
    run(&path, &["prune", "--older-than", "0s"]);
    let r = run(&path, &["list", "--json"]);
    assert_eq!(r.json(), json!([]));
    assert!(r.stderr.is_empty(), "{}", r.stderr);
}

/// Every subcommand's name, as clap defines it.
fn subcommands() -> Vec<clap::Command> {
    Cli::command().get_subcommands().cloned().collect()
}

#[test]
fn usage_errors_exit_2_from_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    for sub in subcommands() {
        let name = sub.get_name().to_string();
        let r = run(&path, &[&name, "--no-such-flag"]);
        assert_eq!(r.code, 2, "{name} --no-such-flag: {r:#?}");
        assert!(r.stderr.contains("--no-such-flag"), "{name}: {}", r.stderr);
        let r = run(&path, &[&name, "--no-such-flag", "--json"]);
        let v = assert_shape(&r, "error", 2, &name);
        assert_eq!(v["error"], "usage");
        let help = run(&path, &[&name, "--help"]);
        assert_eq!(help.code, 0, "{name} --help: {help:#?}");
    }
    let r = run(&path, &["worker", "--speed", "0"]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(!path.exists());
}

#[test]
fn help_tells_the_real_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    for name in ["demo", "worker"] {
        let r = run(&path, &[name, "--help"]);
        let store_line = r
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with("--store"))
            .unwrap_or_else(|| panic!("{name} --help has --store: {}", r.stdout));
        assert!(
            store_line.contains("./rudder-demo.json"),
            "{name}: {store_line}"
        );
        // The demo never seeds $RUDDER_STORE; the worker takes it, like
        // every other command.
        let says = match name {
            "demo" => "never $RUDDER_STORE",
            _ => "$RUDDER_STORE, else ./rudder-demo.json",
        };
        assert!(store_line.contains(says), "{name}: {store_line}");
    }
    let r = run(&path, &["list", "--help"]);
    let store_line = r.stdout.lines().find(|l| l.contains("--store")).unwrap();
    assert!(
        store_line.contains("$RUDDER_STORE, else ./tasks.json"),
        "{store_line}"
    );
}

/// The usage lines of docs/cli.md's CLI reference: subcommand → the flags and
/// positional arguments it names.
fn cli_page_reference() -> BTreeMap<String, BTreeSet<String>> {
    let page = read("docs/cli.md");
    let cli = &page[page.find("## The commands").expect("the commands section")..];
    let block = &cli[cli.find("```\n").unwrap() + 4..];
    let block = &block[..block.find("```").unwrap()];
    let mut out = BTreeMap::new();
    for line in block.lines() {
        let usage = line.split('#').next().unwrap();
        let mut words = usage.split_whitespace();
        assert_eq!(words.next(), Some("rudder"), "{line}");
        let Some(sub) = words.next() else { continue };
        let name = sub.trim_matches(|c| c == '[' || c == ']').to_string();
        let mut args = BTreeSet::new();
        for w in usage.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_')) {
            // Flags, and positional arguments named in capitals (ID, FROM).
            let positional = w.len() > 1 && w.chars().all(|c| c.is_ascii_uppercase());
            if w.starts_with("--") || positional && w != "JSON" {
                args.insert(w.to_string());
            }
        }
        out.insert(name, args);
    }
    out
}

#[test]
fn the_cli_pages_reference_matches_the_clap_definition() {
    let reference = cli_page_reference();
    let globals = ["--store", "--read-only", "--help", "--version"];
    for sub in subcommands() {
        let name = sub.get_name();
        let listed = reference
            .get(name)
            .unwrap_or_else(|| panic!("docs/cli.md's CLI reference has no line for {name}"));
        for arg in sub.get_arguments() {
            if arg.is_global_set() {
                continue;
            }
            let word = match arg.get_long() {
                Some(long) => format!("--{long}"),
                None => arg
                    .get_value_names()
                    .and_then(|v| v.first())
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| arg.get_id().to_string().to_uppercase()),
            };
            if globals.contains(&word.as_str()) && arg.get_long() == Some("help") {
                continue;
            }
            if name != "demo" && name != "worker" && word == "--store" {
                continue;
            }
            assert!(
                listed.contains(&word),
                "docs/cli.md's `rudder {name}` line does not name {word} (clap defines it)"
            );
        }
        for word in listed {
            if !word.starts_with("--") || globals.contains(&word.as_str()) && name == "watch" {
                continue;
            }
            let defined = sub
                .get_arguments()
                .any(|a| a.get_long() == Some(&word[2..]));
            assert!(
                defined,
                "docs/cli.md's `rudder {name}` names {word}, which clap does not define"
            );
        }
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        assert!(!about.is_empty(), "{name} has no help text");
        for arg in sub.get_arguments() {
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(!help.is_empty(), "{name} {}: no help text", arg.get_id());
        }
    }
    for name in reference.keys() {
        assert!(
            subcommands().iter().any(|s| s.get_name() == name),
            "docs/cli.md's CLI reference names `rudder {name}`, which does not exist"
        );
    }
}

#[test]
fn clap_definition_is_consistent() {
    Cli::command().debug_assert();
}

fn generated(args: &[&str]) -> String {
    let r: Run = rudder().args(args).output().expect("run").into();
    assert_eq!(r.code, 0, "{args:?}: {r:#?}");
    assert!(r.stderr.is_empty(), "{args:?}: {}", r.stderr);
    r.stdout
}

#[test]
fn completions_for_every_shell_name_every_subcommand() {
    let names: Vec<String> = subcommands()
        .iter()
        .map(|s| s.get_name().to_string())
        .collect();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = generated(&["completions", shell]);
        for name in &names {
            assert!(
                script.contains(name.as_str()),
                "{shell} completion lacks {name}"
            );
        }
        assert!(
            script.contains("older-than"),
            "{shell}: flags are completed"
        );
    }
    // Syntax-checked by each shell that is installed here.
    let dir = tempfile::tempdir().unwrap();
    for (shell, check) in [("bash", "-n"), ("zsh", "-n"), ("fish", "--no-execute")] {
        let file = dir.path().join(format!("rudder.{shell}"));
        std::fs::write(&file, generated(&["completions", shell])).unwrap();
        if let Ok(out) = std::process::Command::new(shell)
            .arg(check)
            .arg(&file)
            .output()
        {
            assert!(
                out.status.success(),
                "{shell} {check}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let r: Run = rudder()
        .args(["completions", "tcsh"])
        .output()
        .expect("run")
        .into();
    assert_eq!(r.code, 2, "an unknown shell is a usage error: {r:#?}");
}

#[test]
fn the_man_page_is_roff_naming_every_subcommand() {
    let page = generated(&["man"]);
    assert!(
        page.contains(".TH rudder 1"),
        "{}",
        &page[..200.min(page.len())]
    );
    for sub in subcommands() {
        // roff escapes a hyphen.
        let name = sub.get_name().replace('-', "\\-");
        assert!(page.contains(&name), "the man page lacks {name}");
    }
    assert!(page.contains("read\\-only"), "global flags are in the page");
}

fn a_streamed_list_has_the_bytes_of_the_whole_array_case() {
    let (_dir, path) = store();
    for i in 0..25 {
        create(&path, &["--title", &format!("task {i:02}")]);
    }
    let store = rudder::Store::connect(&path).expect("a store URL");
    for args in [
        vec!["list", "--json"],
        vec!["list", "--json", "--sort", "title", "--limit", "7"],
        vec!["list", "--json", "--status", "completed"],
    ] {
        let r = run(&path, &args);
        assert_eq!(r.code, 0, "{r:#?}");
        let q = rudder::store::PageQuery {
            statuses: if args.contains(&"completed") {
                vec![rudder::task::Status::Completed]
            } else {
                vec![]
            },
            sort: if args.contains(&"title") {
                rudder::store::SortKey::Title
            } else {
                rudder::store::SortKey::Store
            },
            limit: args.contains(&"7").then_some(7),
            ..rudder::store::PageQuery::default()
        };
        let whole = serde_json::to_string(&store.page(&q).unwrap()).unwrap() + "\n";
        assert_eq!(r.stdout, whole, "{args:?}");
    }
    let human = run(&path, &["list"]);
    assert_eq!(human.stdout.lines().count(), 26, "a header and a row each");
}

/// Keyset paging with `--limit` and `--after` while another process creates
/// tasks: every task that was there before is listed once, none twice.
fn paging_while_another_process_creates_tasks_has_no_gaps_and_no_repeats_case() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    /// Tasks the other process creates per order.
    const NEW: usize = 6;
    let (_dir, path) = store();
    let before: BTreeSet<String> = (0..13)
        .map(|i| create(&path, &["--title", &format!("t{:02}", (i * 7) % 13)]))
        .collect();
    for sort in ["store", "updated", "created", "title", "id"] {
        let stop = Arc::new(AtomicBool::new(false));
        let made = Arc::new(AtomicUsize::new(0));
        let creator = {
            let (stop, made, path) = (stop.clone(), made.clone(), path.clone());
            std::thread::spawn(move || {
                for n in 0..NEW {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    create(&path, &["--title", &format!("new {n}")]);
                    made.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let mut seen: Vec<String> = Vec::new();
        let before: BTreeSet<String> = before
            .iter()
            .cloned()
            .chain(
                rudder::Store::connect(&path)
                    .expect("a store URL")
                    .list(&[])
                    .unwrap()
                    .into_iter()
                    .map(|t| t.task_id),
            )
            .collect();
        loop {
            let mut args = vec!["list", "--json", "--sort", sort, "--limit", "4"];
            let last = seen.last().cloned();
            if let Some(last) = &last {
                args.extend(["--after", last.as_str()]);
            }
            let r = run(&path, &args);
            assert_eq!(r.code, 0, "{r:#?}");
            let page: Vec<String> = r
                .json()
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["task_id"].as_str().unwrap().to_string())
                .collect();
            if page.is_empty() {
                break;
            }
            seen.extend(page);
            // Another task is created between two pages, as long as
            // the other process has tasks to create.
            let now = made.load(Ordering::SeqCst);
            if now < NEW {
                let moved = common::wait_for(std::time::Duration::from_secs(20), || {
                    (made.load(Ordering::SeqCst) > now).then_some(())
                });
                assert!(moved.is_some(), "the other process creates nothing");
            }
        }
        stop.store(true, Ordering::SeqCst);
        creator.join().unwrap();
        let unique: BTreeSet<&String> = seen.iter().collect();
        assert_eq!(
            unique.len(),
            seen.len(),
            "--sort {sort}: a task listed twice"
        );
        for id in &before {
            assert!(unique.contains(id), "--sort {sort}: {id} was skipped");
        }
    }
}

common::shared_backend_tests! {
    every_command_prints_its_documented_shape: every_command_prints_its_documented_shape_once,
    read_only_refuses_every_write_before_and_after_the_subcommand: read_only_refuses_every_write_once,
    list_on_a_store_that_does_not_exist_says_so: list_on_a_store_that_does_not_exist_says_so_case,
    a_streamed_list_has_the_bytes_of_the_whole_array: a_streamed_list_has_the_bytes_of_the_whole_array_case,
    paging_while_another_process_creates_tasks_has_no_gaps_and_no_repeats: paging_while_another_process_creates_tasks_has_no_gaps_and_no_repeats_case,
}
