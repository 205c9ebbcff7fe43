//! A store file that does not parse is an error (exit 6) naming the file, and
//! the line and column where there is one; no command ever writes over it.

mod common;

use rudder::store::Open as _;
use std::path::Path;

use common::{CliKind, fingerprint, run, temp_files};
use rudder::{NewTask, Store};

const ID: &str = "34df0ab7-eac3-429b-902f-efa8ea132d2f";

/// A valid store with one task, as rudder writes it.
fn valid_store() -> String {
    format!(
        r#"{{
  "{ID}": {{
    "task_id": "{ID}",
    "status": "input_required",
    "input_schema": {{"type": "object", "required": ["service"]}},
    "input_value": null,
    "result": null,
    "idempotency_key": "incident-1",
    "title": "INC-1042 checkout latency",
    "revision": 1,
    "history": []
  }}
}}
"#
    )
}

struct Broken {
    name: &'static str,
    bytes: Vec<u8>,
    /// The line the error must point at (`None`: no position applies).
    line: Option<usize>,
    /// Words the message must contain.
    says: &'static str,
}

fn broken_files() -> Vec<Broken> {
    let valid = valid_store();
    let mut invalid_utf8 = valid.clone().into_bytes();
    let at = valid.find("checkout").unwrap();
    invalid_utf8[at] = 0xff;
    invalid_utf8[at + 1] = 0xfe;
    vec![
        Broken {
            name: "empty",
            bytes: Vec::new(),
            line: None,
            says: "empty",
        },
        Broken {
            name: "truncated",
            bytes: valid.as_bytes()[..valid.len() * 2 / 3].to_vec(),
            line: Some(valid[..valid.len() * 2 / 3].matches('\n').count() + 1),
            says: "EOF",
        },
        Broken {
            name: "not an object",
            bytes: format!("[\n  {{\"task_id\": \"{ID}\", \"status\": \"working\"}}\n]\n")
                .into_bytes(),
            line: Some(1),
            says: "expected a JSON object",
        },
        Broken {
            name: "unknown status",
            bytes: valid
                .replace("\"input_required\"", "\"paused\"")
                .into_bytes(),
            line: Some(4),
            says: "paused",
        },
        Broken {
            name: "invalid UTF-8",
            bytes: invalid_utf8,
            line: Some(9),
            says: "invalid unicode code point",
        },
        Broken {
            name: "key not matching task_id",
            bytes: valid
                .replacen(&format!("\"{ID}\": {{"), "\"0000aaaa-other\": {", 1)
                .into_bytes(),
            line: None,
            says: "0000aaaa-other",
        },
    ]
}

fn commands() -> Vec<Vec<&'static str>> {
    vec![
        vec!["list"],
        vec!["list", "--status", "working"],
        vec!["get", ID],
        vec!["create", "--title", "new"],
        vec!["create", "--key", "incident-1"],
        vec!["cancel", ID],
        vec!["input", ID, "--set", "service=payments"],
        vec!["input", ID, "--value", r#"{"service": "payments"}"#],
        vec!["request-input", ID, "--schema", r#"{"type": "object"}"#],
        vec!["heartbeat", ID],
        vec!["complete", ID],
        vec!["fail", ID, "--error", "boom"],
        vec!["reclaim", "--older-than", "1s"],
        vec!["reclaim", "--older-than", "1s", "--dry-run"],
        vec!["prune", "--older-than", "1s"],
        vec!["wait", ID, "--timeout", "1s"],
    ]
}

#[test]
fn every_command_refuses_a_broken_file_and_leaves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    let display = path.display().to_string();
    for b in broken_files() {
        std::fs::write(&path, &b.bytes).unwrap();
        let before = fingerprint(&path);
        for args in commands() {
            let ctx = format!("{} / {}", b.name, args.join(" "));
            let r = run(&path, &args);
            assert_eq!(r.code, 6, "{ctx}: {r:#?}");
            assert!(
                r.stderr.contains(&display),
                "{ctx}: the file is not named: {}",
                r.stderr
            );
            assert!(r.stderr.contains("corrupt"), "{ctx}: {}", r.stderr);
            assert!(r.stderr.contains(b.says), "{ctx}: {}", r.stderr);
            match b.line {
                Some(line) => {
                    assert!(
                        r.stderr.contains(&format!("at line {line} column ")),
                        "{ctx}: no line {line}/column: {}",
                        r.stderr
                    );
                    assert_eq!(
                        r.stderr.matches(" at line ").count(),
                        1,
                        "{ctx}: {}",
                        r.stderr
                    );
                }
                None => assert!(!r.stderr.contains(" at line "), "{ctx}: {}", r.stderr),
            }
            assert!(r.stdout.is_empty(), "{ctx}: {}", r.stdout);
            assert_eq!(
                fingerprint(&path),
                before,
                "{ctx}: the broken file was written"
            );

            // With --json: exactly one JSON value saying the same.
            if args[0] != "list" || args.len() == 1 {
                let mut json_args = args.clone();
                json_args.push("--json");
                let r = run(&path, &json_args);
                assert_eq!(r.code, 6, "{ctx} --json");
                let v = r.json();
                assert_eq!(v["error"], "corrupt_store", "{ctx}");
                assert_eq!(v["exit_code"], 6);
                assert_eq!(v["path"], display.as_str());
                assert_eq!(v["line"].as_u64().map(|l| l as usize), b.line, "{ctx}");
                assert_eq!(v["column"].is_u64(), b.line.is_some(), "{ctx}");
                assert_eq!(fingerprint(&path), before, "{ctx} --json: written");
            }
        }
        assert!(
            temp_files(dir.path()).is_empty(),
            "{}: temp files left",
            b.name
        );
    }
}

#[test]
fn the_store_api_reports_the_position_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    for b in broken_files() {
        std::fs::write(&path, &b.bytes).unwrap();
        let before = fingerprint(&path);
        let store = Store::open(&path);
        let e = store.load().unwrap_err();
        assert_eq!(e.cli_kind(), "corrupt_store", "{}", b.name);
        assert_eq!(e.exit_code(), 6);
        let e = store.create(NewTask::default()).unwrap_err();
        assert_eq!(e.cli_kind(), "corrupt_store", "{}", b.name);
        let rudder::StoreError::Corrupt { location, line, .. } = &e else {
            unreachable!()
        };
        assert_eq!(location.path(), Some(path.as_path()));
        assert_eq!(location.to_string(), path.display().to_string());
        assert_eq!(*line, b.line, "{}", b.name);
        assert_eq!(fingerprint(&path), before, "{}", b.name);
    }
}

#[test]
fn a_file_that_is_only_whitespace_is_empty_and_a_missing_one_is_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    // Missing: an empty store, nothing created by reading.
    let r = run(&path, &["list", "--json"]);
    assert_eq!(r.code, 0);
    assert_eq!(r.json(), serde_json::json!([]));
    assert!(!path.exists());
    std::fs::write(&path, " \n\t\n").unwrap();
    let r = run(&path, &["create"]);
    assert_eq!(r.code, 6);
    assert!(r.stderr.contains("empty"), "{}", r.stderr);
    assert_eq!(std::fs::read(&path).unwrap(), b" \n\t\n");
}

#[test]
fn repairing_the_file_makes_the_store_usable_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    std::fs::write(&path, b"{\"oops\": ").unwrap();
    assert_eq!(run(&path, &["cancel", ID]).code, 6);
    std::fs::write(&path, valid_store()).unwrap();
    assert_eq!(run(&path, &["cancel", &ID[..8]]).code, 0);
    assert_eq!(
        Store::open(&path).get(ID).unwrap().status.as_str(),
        "cancelled"
    );
    let _ = Path::new(&path);
}
