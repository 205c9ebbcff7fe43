//! Real processes sharing one store (this test binary run again as each
//! child): writers killed with SIGKILL at random points never leave a torn
//! file nor lose a create they reported, and workers in separate processes
//! never share a task. Concurrent creates and racing `complete`s through the
//! binary are the root's tests/multiprocess_cli.rs.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rudder_store::{NewTask, Store};
use rudder_testkit::rng::Rng;
use rudder_testkit::stores::temp_files;

/// Not a test of its own: the child process of `sigkill_never_tears_the_store`.
/// It does nothing unless started by that test.
#[test]
fn child_process_create_loop() {
    let Some(path) = std::env::var_os("RUDDER_TEST_CHILD_STORE") else {
        return;
    };
    let store = Store::connect(path).expect("a store URL");
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        let o = store
            .create(NewTask {
                title: Some(format!("create #{i} — durable")),
                request: Some(serde_json::json!({"n": i, "padding": "x".repeat(200)})),
                ..NewTask::default()
            })
            .expect("create");
        writeln!(out, "CREATED {}", o.task.task_id).unwrap();
        out.flush().unwrap();
    }
}

/// Complete `CREATED <id>` lines; a line cut by the kill was not reported.
fn reported_ids(text: &str, into: &mut Vec<String>) {
    for line in text.split_inclusive('\n') {
        if let Some(id) = line
            .strip_prefix("CREATED ")
            .and_then(|l| l.strip_suffix('\n'))
        {
            into.push(id.to_string());
        }
    }
}

fn sigkill_never_tears_the_store_once() {
    const KILLS: usize = 40;
    let mut rng = Rng::from_env_or_time();
    let dir = tempfile::tempdir().unwrap();
    let path = rudder_testkit::stores::store_in(dir.path());
    let mut reported = Vec::new();
    for round in 0..KILLS {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "child_process_create_loop",
                "--exact",
                "--nocapture",
                "--test-threads=1",
                "-q",
            ])
            .env("RUDDER_TEST_CHILD_STORE", &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        // Let it report a few creates, then kill it somewhere in the next ones.
        let wanted = 1 + rng.below(6);
        let mut seen = 0;
        let mut line = String::new();
        while seen < wanted {
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                panic!("round {round}: the child stopped by itself");
            }
            if line.starts_with("CREATED ") {
                seen += 1;
            }
            reported_ids(&line, &mut reported);
        }
        std::thread::sleep(Duration::from_micros(rng.below(4000)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).unwrap();
        reported_ids(&rest, &mut reported);
        rudder_testkit::stores::check_store(&path, &reported, &format!("round {round}"));
    }
    let total = rudder_testkit::stores::check_store(&path, &reported, "at the end");
    let unique: HashSet<&String> = reported.iter().collect();
    assert_eq!(unique.len(), reported.len());
    let temps = temp_files(dir.path());
    eprintln!(
        "{KILLS} kills: {} creates reported, {total} tasks stored, {} temp file(s) left by kills mid-write",
        reported.len(),
        temps.len()
    );
    // A kill between creating the temp file and renaming it leaves one behind;
    // nothing else may.
    assert!(
        temps.len() <= KILLS,
        "{} temp files after {KILLS} kills",
        temps.len()
    );
    // The store still takes writes after all that.
    Store::connect(&path)
        .expect("a store URL")
        .create(NewTask::default())
        .unwrap();
}

/// Not a test of its own: the child process of `workers_in_separate_processes_never_share_a_task`.
#[test]
fn child_process_claim_loop() {
    let (Some(path), Some(holder)) = (
        std::env::var_os("RUDDER_TEST_CLAIM_STORE"),
        std::env::var("RUDDER_TEST_CLAIM_HOLDER").ok(),
    ) else {
        return;
    };
    let store = Store::connect(path).expect("a store URL");
    let mut out = std::io::stdout().lock();
    while let Some(task) = store
        .claim_next(&holder, Duration::from_secs(3600), &[])
        .expect("claim_next")
    {
        writeln!(out, "CLAIMED {}", task.task_id).unwrap();
        out.flush().unwrap();
    }
}

fn workers_in_separate_processes_never_share_a_task_once() {
    const TASKS: usize = 60;
    const WORKERS: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    let path = rudder_testkit::stores::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    for _ in 0..TASKS {
        store.create(NewTask::default()).unwrap();
    }
    // A task waiting for input is never handed to a worker.
    let waiting = store
        .create(NewTask {
            input_schema: Some(serde_json::json!({"type": "object"})),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;
    let children: Vec<(String, Child)> = (0..WORKERS)
        .map(|w| {
            let holder = format!("worker-{w}");
            let child = Command::new(std::env::current_exe().unwrap())
                .args([
                    "child_process_claim_loop",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                    "-q",
                ])
                .env("RUDDER_TEST_CLAIM_STORE", &path)
                .env("RUDDER_TEST_CLAIM_HOLDER", &holder)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            (holder, child)
        })
        .collect();
    let mut claimed: Vec<(String, String)> = Vec::new();
    for (holder, child) in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{holder} failed");
        let mut ids = Vec::new();
        reported_ids(
            &String::from_utf8(out.stdout)
                .unwrap()
                .replace("CLAIMED ", "CREATED "),
            &mut ids,
        );
        claimed.extend(ids.into_iter().map(|id| (id, holder.clone())));
    }
    assert_eq!(
        claimed.len(),
        TASKS,
        "every working task is claimed exactly once"
    );
    let unique: HashSet<&String> = claimed.iter().map(|(id, _)| id).collect();
    assert_eq!(unique.len(), TASKS, "two workers claimed the same task");
    let tasks = store.load().unwrap();
    for (id, holder) in &claimed {
        assert_eq!(
            tasks[id].claimed_by.as_deref(),
            Some(holder.as_str()),
            "{id}"
        );
        assert_eq!(tasks[id].revision, 2, "{id}: claimed more than once");
    }
    assert_eq!(tasks[&waiting].claimed_by, None);
}

rudder_testkit::shared_backend_tests! {
    sigkill_never_tears_the_store: sigkill_never_tears_the_store_once,
    workers_in_separate_processes_never_share_a_task: workers_in_separate_processes_never_share_a_task_once,
}
