//! `rudder claim` and `--holder` (docs/cli.md "One policy for every mutation",
//! docs/cli.md "Shell workers"): a shell worker is refused exactly as a
//! library worker once another holder took its task over, and bad input
//! is a clear error with nothing written.

mod common;

use common::{assert_store_untouched, create, run, store_in, store_state};

fn claim_prints_the_task_and_its_holder_and_a_successor_refuses_the_zombie_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = store_in(dir.path());
    let id = create(&path, &["--title", "t"]);
    let r = run(
        &path,
        &["claim", "--lease", "1h", "--holder", "sh-1", "--json"],
    );
    assert_eq!(r.code, 0, "{r:#?}");
    let v = r.json();
    assert_eq!(v["holder"], "sh-1");
    assert_eq!(v["task"]["task_id"], id.as_str());
    assert_eq!(v["task"]["claimed_by"], "sh-1");
    // Human output names the holder too.
    let second = create(&path, &["--title", "u"]);
    let r = run(&path, &["claim", "--holder", "sh-2"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(
        r.stdout.contains(&second) && r.stdout.contains("sh-2"),
        "{r:#?}"
    );
    // Nothing left: exit 10, said on stderr.
    let r = run(&path, &["claim"]);
    assert_eq!(r.code, 10, "{r:#?}");
    assert!(r.stderr.contains("no task was claimable"), "{r:#?}");

    // sh-1 stalls; its lease is given to a successor (released by a
    // person, then claimed).
    let r = run(
        &path,
        &["heartbeat", &id, "--holder", "sh-1", "--message", "step 1"],
    );
    assert_eq!(r.code, 0, "{r:#?}");
    rudder::Store::connect(&path)
        .expect("a store URL")
        .release(&id, "sh-1")
        .expect("release");
    let r = run(&path, &["claim", "--holder", "sh-3", "--json"]);
    assert_eq!(r.json()["task"]["task_id"], id.as_str(), "{r:#?}");
    let before = store_state(&path);
    for args in [
        vec!["heartbeat", &id, "--holder", "sh-1", "--json"],
        vec!["complete", &id, "--holder", "sh-1", "--json"],
        vec!["fail", &id, "--holder", "sh-1", "--error", "x", "--json"],
        vec![
            "request-input",
            &id,
            "--holder",
            "sh-1",
            "--schema",
            "{}",
            "--json",
        ],
    ] {
        let r = run(&path, &args);
        assert_eq!(r.code, 4, "{args:?}: {r:#?}");
        let v = r.json();
        assert_eq!(v["error"], "lease_lost", "{args:?}");
        assert_eq!(v["task"]["claimed_by"], "sh-3", "{args:?}");
    }
    assert_store_untouched(&before, &path, "a zombie's writes");
    let r = run(
        &path,
        &[
            "complete", &id, "--holder", "sh-3", "--result", "1", "--json",
        ],
    );
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()["task"]["status"], "completed");
}

#[test]
fn claim_waits_on_the_feed_for_a_task_of_its_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.db");
    create(&path, &["--kind", "backup"]);
    let claimer = {
        let path = path.clone();
        std::thread::spawn(move || {
            run(
                &path,
                &["claim", "--kind", "diagnose", "--wait", "60s", "--json"],
            )
        })
    };
    // Created while the claim waits (or before it looks: either way it is
    // the one claimed).
    let id = create(&path, &["--kind", "diagnose"]);
    let r = claimer.join().expect("claim");
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()["task"]["task_id"], id.as_str());
    assert_eq!(r.json()["task"]["kind"], "diagnose");
}

#[test]
fn bad_holders_kinds_and_leases_are_usage_errors_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    let id = create(&path, &["--title", "t"]);
    let before = store_state(&path);
    for args in [
        vec!["claim", "--kind", "bad\u{7}kind", "--json"],
        vec!["claim", "--kind", "", "--json"],
        vec!["claim", "--holder", "a\u{1b}[2Jb", "--json"],
        vec!["claim", "--holder", " ", "--json"],
        vec!["claim", "--lease", "0s", "--json"],
        vec!["claim", "--wait", "soon", "--json"],
        vec!["heartbeat", &id, "--holder", "x\ny", "--json"],
        vec!["complete", &id, "--holder", "", "--json"],
    ] {
        let r = run(&path, &args);
        assert_eq!(r.code, 2, "{args:?}: {r:#?}");
        assert_eq!(r.json()["error"], "usage", "{args:?}");
        assert!(!r.stdout.contains('\u{1b}'), "{args:?}: an escape echoed");
    }
    // --lease without --holder on heartbeat says what it needs.
    let r = run(&path, &["heartbeat", &id, "--lease", "1m", "--json"]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert_store_untouched(&before, &path, "refused usage");
    // A heartbeat with a holder that never held the task: refused, exit 4.
    let r = run(&path, &["heartbeat", &id, "--holder", "stranger", "--json"]);
    assert_eq!(r.code, 4, "{r:#?}");
    assert_eq!(r.json()["error"], "lease_lost");
    assert_store_untouched(&before, &path, "a stranger's heartbeat");
}

#[test]
fn read_only_refuses_claim() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    create(&path, &["--title", "t"]);
    let before = store_state(&path);
    let r = run(&path, &["--read-only", "claim", "--json"]);
    assert_eq!(r.code, 4, "{r:#?}");
    assert_eq!(r.json()["error"], "read_only");
    assert_store_untouched(&before, &path, "read-only claim");
}

/// The lease of a task as its JSON says: how long after its last write
/// (`updated_at`, the same instant the lease was renewed at) it lapses.
fn lease_of(task: &serde_json::Value) -> chrono::Duration {
    let at = |field: &str| {
        chrono::DateTime::parse_from_rfc3339(task[field].as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{field} of {task}: {e}"))
    };
    at("lease_expires_at") - at("updated_at")
}

fn a_holders_write_renews_the_lease_for_the_length_it_was_claimed_with_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = store_in(dir.path());
    let id = create(&path, &["--title", "t"]);
    let r = run(
        &path,
        &["claim", "--lease", "2s", "--holder", "sh-1", "--json"],
    );
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(lease_of(&r.json()["task"]), chrono::Duration::seconds(2));
    assert_eq!(r.json()["task"]["lease_ms"], 2000, "{r:#?}");

    // No --lease: the claim's 2 s, not the 30 s default, and again at
    // every later write (the length is kept with the task, not the
    // process).
    for message in ["step 1", "step 2"] {
        let r = run(
            &path,
            &[
                "heartbeat",
                &id,
                "--holder",
                "sh-1",
                "--message",
                message,
                "--json",
            ],
        );
        assert_eq!(r.code, 0, "{r:#?}");
        assert_eq!(lease_of(&r.json()["task"]), chrono::Duration::seconds(2));
    }

    // An explicit --lease renews for that length, and becomes the one
    // later writes renew for.
    let r = run(
        &path,
        &[
            "heartbeat",
            &id,
            "--holder",
            "sh-1",
            "--lease",
            "1m",
            "--json",
        ],
    );
    assert_eq!(lease_of(&r.json()["task"]), chrono::Duration::seconds(60));
    let r = run(&path, &["heartbeat", &id, "--holder", "sh-1", "--json"]);
    assert_eq!(lease_of(&r.json()["task"]), chrono::Duration::seconds(60));
    assert_eq!(r.json()["task"]["lease_ms"], 60_000, "{r:#?}");

    // The library's write that names no length does the same.
    let out = rudder::Store::connect(&path)
        .expect("a store URL")
        .heartbeat(
            &id,
            None,
            None,
            rudder::store::task::Actor::Worker {
                holder: "sh-1",
                lease: None,
            },
        )
        .expect("heartbeat");
    let task = serde_json::to_value(&out.task).expect("json");
    assert_eq!(lease_of(&task), chrono::Duration::seconds(60));

    // Giving the lease back forgets its length.
    let r = run(&path, &["complete", &id, "--holder", "sh-1", "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(r.json()["task"].get("lease_ms").is_none(), "{r:#?}");
}

common::shared_backend_tests! {
    claim_prints_the_task_and_its_holder_and_a_successor_refuses_the_zombie: claim_prints_the_task_and_its_holder_and_a_successor_refuses_the_zombie_case,
    a_holders_write_renews_the_lease_for_the_length_it_was_claimed_with: a_holders_write_renews_the_lease_for_the_length_it_was_claimed_with_case,
}
