//! `rudder log` as a person and a script use it, on every backend: the
//! filters (`ID`, `--actor`, `--since`), who is recorded (`--as`,
//! `$RUDDER_ACTOR`, a refused name), and `--follow` printing what other
//! processes write, once each.

mod common;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::{create, run};
use serde_json::Value;

fn lines(r: &common::Run) -> Vec<Value> {
    assert_eq!(r.code, 0, "{r:#?}");
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn filters_and_authors_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store_in(dir.path());
    let a = create(&store, &["--title", "a"]);
    let b = create(&store, &["--title", "b"]);
    assert_eq!(
        run(&store, &["--as", "ana", "cancel", &a, "--reason", "dup"]).code,
        0
    );
    let r = common::rudder()
        .env("RUDDER_ACTOR", "bo")
        .args(["--store", store.to_str().unwrap(), "cancel", &b])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0));

    let all = lines(&run(&store, &["log", "--json"]));
    assert_eq!(all.len(), 4, "two creations, two cancels");
    let ana = lines(&run(&store, &["log", "--actor", "ana", "--json"]));
    assert_eq!(ana.len(), 1);
    assert_eq!(
        (&ana[0]["task_id"], &ana[0]["reason"]),
        (&Value::from(a.clone()), &Value::from("dup"))
    );
    let bo = lines(&run(&store, &["log", "--actor", "bo", "--json"]));
    assert_eq!(bo.len(), 1);
    assert_eq!(bo[0]["task_id"], b.as_str());
    // One task's, by a unique prefix.
    assert_eq!(lines(&run(&store, &["log", &b[..8], "--json"])).len(), 2);
    // Everything is younger than an hour; nothing was written in the future.
    assert_eq!(
        lines(&run(&store, &["log", "--since", "1h", "--json"])).len(),
        4
    );

    // A name that is no name is refused before anything is written; a
    // read does not ask.
    let r = run(&store, &["--as", "ana\u{1b}[2J", "cancel", &a]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(r.stderr.contains("--as"), "{r:#?}");
    assert!(!r.stderr.contains('\u{1b}'), "{r:#?}");
    let r = common::rudder()
        .env("RUDDER_ACTOR", "x\u{7}")
        .args(["--store", store.to_str().unwrap(), "log"])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "a read never asks who you are");
    assert_eq!(
        lines(&run(&store, &["log", "--json"])).len(),
        4,
        "nothing written"
    );
    // The human lines say who and why.
    let r = run(&store, &["log", &a]);
    assert!(
        r.stdout.contains("ana (cli)") && r.stdout.contains("reason: dup"),
        "{r:#?}"
    );
    // An unknown task is unknown, as everywhere.
    assert_eq!(run(&store, &["log", "nope"]).code, 3);
}

fn follow_prints_what_others_write_once_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store_in(dir.path());
    let first = create(&store, &["--title", "first"]);
    let mut child = common::rudder()
        .args([
            "--store",
            store.to_str().unwrap(),
            "log",
            "--follow",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<Value>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let Ok(v) = serde_json::from_str(&line) else {
                break;
            };
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| {
        rx.recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("no line for {what}: {e}"))
    };
    assert_eq!(next("the first task")["task_id"], first.as_str());
    // Another process writes; the follower prints it.
    let second = create(&store, &["--title", "second"]);
    assert_eq!(next("the second task")["task_id"], second.as_str());
    assert_eq!(
        run(
            &store,
            &["--as", "cy", "cancel", &first, "--reason", "done"]
        )
        .code,
        0
    );
    let cancel = next("the cancel");
    assert_eq!(
        (&cancel["task_id"], &cancel["actor"]),
        (&Value::from(first.clone()), &Value::from("cy"))
    );
    // A heartbeat-free marker write: the next line is the marker's, so
    // nothing was printed twice in between.
    let third = create(&store, &["--title", "third"]);
    assert_eq!(next("the third task")["task_id"], third.as_str());
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    assert!(rx.try_recv().is_err(), "nothing more, nothing twice");
}

common::shared_backend_tests! {
    filters_and_authors: filters_and_authors_once,
    follow_prints_what_others_write_once_each: follow_prints_what_others_write_once_each_once,
}
