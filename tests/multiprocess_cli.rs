//! Real processes of the binary sharing one store: concurrent creates lose
//! nothing (nor make two tasks of one key), racing `complete`s apply
//! exactly once, and a CLI killed with SIGKILL at random points never
//! leaves a torn file. Writers and workers of the library in processes of
//! their own are crates/store/tests/multiprocess.rs.

mod common;
use std::collections::HashSet;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{create, one_json_value, rudder, run, temp_files};
use rudder::Store;
use rudder::task::Status;
use rudder_testkit::rng::Rng;

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
    let tasks = Store::connect(&path).expect("a store URL").load().unwrap();
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
    assert_eq!(
        Store::connect(&path)
            .expect("a store URL")
            .load()
            .unwrap()
            .len(),
        1
    );
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
        let stored = Store::connect(&path)
            .expect("a store URL")
            .get(&id)
            .unwrap();
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
        rudder_testkit::stores::check_store(&path, &reported, &format!("round {round}"));
    }
    eprintln!(
        "{KILLS} rounds, {killed} killed while running, {} creates reported, {} temp file(s) left",
        reported.len(),
        temp_files(dir.path()).len()
    );
    // And the CLI still works on the store.
    assert_eq!(run(&path, &["list"]).code, 0);
}

common::shared_backend_tests! {
    concurrent_creates_lose_nothing: concurrent_creates_lose_nothing_once,
    concurrent_creates_with_one_key_make_one_task: concurrent_creates_with_one_key_make_one_task_once,
    racing_completes_apply_exactly_once: racing_completes_apply_exactly_once_once,
    sigkill_of_the_cli_never_tears_the_store: sigkill_of_the_cli_never_tears_the_store_once,
}
