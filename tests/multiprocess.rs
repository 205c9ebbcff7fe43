//! Real processes sharing one store: concurrent creates lose nothing, racing
//! `complete`s apply exactly once, and writers killed with SIGKILL at random
//! points never leave a torn file nor lose a create they reported.

mod common;

use rudder::store::Open as _;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{create, one_json_value, rudder, run, temp_files};
use rudder::task::Status;
use rudder::{NewTask, Store};

/// A tiny deterministic generator (the seed is printed, so a failure can be replayed).
struct Rng(u64);

impl Rng {
    fn from_env_or_time() -> Rng {
        let seed = std::env::var("RUDDER_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("RUDDER_TEST_SEED={seed}");
        Rng(seed | 1)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn concurrent_creates_lose_nothing_once() {
    const PROCS: usize = 6;
    const EACH: usize = 12;
    let dir = tempfile::tempdir().unwrap();
    let path = common::store_in(dir.path());
    let ids: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..PROCS)
            .map(|p| {
                let path = &path;
                s.spawn(move || {
                    (0..EACH)
                        .map(|i| create(path, &["--title", &format!("p{p} #{i}")]))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert_eq!(ids.len(), PROCS * EACH);
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "two creates returned the same id");
    let tasks = Store::open(&path).load().unwrap();
    assert_eq!(tasks.len(), PROCS * EACH, "a create was lost");
    for id in &ids {
        assert!(tasks.contains_key(id), "{id} is missing");
    }
    assert!(temp_files(dir.path()).is_empty());
}

fn concurrent_creates_with_one_key_make_one_task_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::store_in(dir.path());
    let children: Vec<Child> = (0..6)
        .map(|_| {
            rudder()
                .arg("--store")
                .arg(&path)
                .args(["create", "--json", "--key", "incident-1", "--schema"])
                .arg(r#"{"type":"object","required":["service"]}"#)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ids = HashSet::new();
    let mut applied = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        let v = one_json_value(&String::from_utf8(out.stdout).unwrap()).unwrap();
        ids.insert(v["task"]["task_id"].as_str().unwrap().to_string());
        applied += (v["change"] == "applied") as usize;
    }
    assert_eq!(ids.len(), 1, "one key made several tasks");
    assert_eq!(
        applied, 1,
        "exactly one create is applied, the rest unchanged"
    );
    assert_eq!(Store::open(&path).load().unwrap().len(), 1);
}

fn racing_completes_apply_exactly_once_once() {
    const RACERS: usize = 6;
    let dir = tempfile::tempdir().unwrap();
    let path = common::store_in(dir.path());
    for round in 0..3 {
        let id = create(&path, &[]);
        let children: Vec<(usize, Child)> = (0..RACERS)
            .map(|i| {
                let child = rudder()
                    .arg("--store")
                    .arg(&path)
                    .args(["complete", &id, "--json", "--result"])
                    .arg(format!(r#"{{"winner": {i}}}"#))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                (i, child)
            })
            .collect();
        let mut winners = Vec::new();
        let mut losers = Vec::new();
        for (i, c) in children {
            let out = c.wait_with_output().unwrap();
            let code = out.status.code().unwrap();
            let v = one_json_value(&String::from_utf8(out.stdout).unwrap())
                .unwrap_or_else(|e| panic!("round {round} racer {i}: {e}"));
            match code {
                0 => {
                    assert_eq!(v["change"], "applied");
                    winners.push((i, v));
                }
                4 => losers.push((i, v)),
                other => panic!("round {round} racer {i}: exit {other}: {v}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {} winners", winners.len());
        let (w, win) = &winners[0];
        assert_eq!(win["task"]["result"]["winner"], *w as u64);
        assert_eq!(losers.len(), RACERS - 1);
        let stored = Store::open(&path).get(&id).unwrap();
        assert_eq!(stored.status, Status::Completed);
        assert_eq!(stored.result.as_ref().unwrap()["winner"], *w as u64);
        assert_eq!(stored.revision, 2, "round {round}: written more than once");
        for (i, v) in losers {
            assert_eq!(v["error"], "refused", "racer {i}: {v}");
            assert_eq!(v["exit_code"], 4);
            // The loser learns the winner's state.
            assert_eq!(v["task"]["status"], "completed", "racer {i}");
            assert_eq!(v["task"]["result"]["winner"], *w as u64, "racer {i}");
            assert_eq!(v["task"]["revision"], 2);
        }
        // A loser retrying with the winner's result is a safe repeat.
        let r = run(
            &path,
            &[
                "complete",
                &id,
                "--json",
                "--result",
                &format!(r#"{{"winner": {w}}}"#),
            ],
        );
        assert_eq!(r.code, 0);
        assert_eq!(r.json()["change"], "unchanged");
    }
}

/// Not a test of its own: the child process of `sigkill_never_tears_the_store`.
/// It does nothing unless started by that test.
#[test]
fn child_process_create_loop() {
    let Some(path) = std::env::var_os("RUDDER_TEST_CHILD_STORE") else {
        return;
    };
    let store = Store::open(path);
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

fn check_store(path: &Path, reported: &[String], ctx: &str) -> usize {
    let tasks = Store::open(path)
        .load()
        .unwrap_or_else(|e| panic!("{ctx}: the store is torn: {e}"));
    for id in reported {
        assert!(
            tasks.contains_key(id),
            "{ctx}: reported create {id} was lost"
        );
    }
    tasks.len()
}

fn sigkill_never_tears_the_store_once() {
    const KILLS: usize = 40;
    let mut rng = Rng::from_env_or_time();
    let dir = tempfile::tempdir().unwrap();
    let path = common::store_in(dir.path());
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
        check_store(&path, &reported, &format!("round {round}"));
    }
    let total = check_store(&path, &reported, "at the end");
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
    Store::open(&path).create(NewTask::default()).unwrap();
}

fn sigkill_of_the_cli_never_tears_the_store_once() {
    const KILLS: usize = 25;
    let mut rng = Rng::from_env_or_time();
    let dir = tempfile::tempdir().unwrap();
    let path = common::store_in(dir.path());
    let mut reported = Vec::new();
    let mut killed = 0;
    for round in 0..KILLS {
        let mut child = rudder()
            .arg("--store")
            .arg(&path)
            .args(["create", "--json", "--title", "killed?"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.below(30_000)));
        if child.try_wait().unwrap().is_none() {
            killed += 1;
        }
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        // Whatever it printed completely before dying was reported.
        if let Ok(v) = one_json_value(&String::from_utf8_lossy(&out.stdout)) {
            reported.push(v["task"]["task_id"].as_str().unwrap().to_string());
        }
        check_store(&path, &reported, &format!("round {round}"));
    }
    eprintln!(
        "{KILLS} rounds, {killed} killed while running, {} creates reported, {} temp file(s) left",
        reported.len(),
        temp_files(dir.path()).len()
    );
    // And the CLI still works on the store.
    assert_eq!(run(&path, &["list"]).code, 0);
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
    let store = Store::open(path);
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
    let path = common::store_in(dir.path());
    let store = Store::open(&path);
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

common::backend_tests! {
    concurrent_creates_lose_nothing: concurrent_creates_lose_nothing_once,
    concurrent_creates_with_one_key_make_one_task: concurrent_creates_with_one_key_make_one_task_once,
    racing_completes_apply_exactly_once: racing_completes_apply_exactly_once_once,
    sigkill_never_tears_the_store: sigkill_never_tears_the_store_once,
    sigkill_of_the_cli_never_tears_the_store: sigkill_of_the_cli_never_tears_the_store_once,
    workers_in_separate_processes_never_share_a_task: workers_in_separate_processes_never_share_a_task_once,
}
