//! `rudder demo`'s seeding and `--fresh`, and the supervisor of the worker
//! child the TUI kills and restarts, and stops when the demo ends.
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use rudder::demo::scenarios::Scenarios;
use rudder::demo::seed::{self, FreshError};
use rudder::demo::supervisor::Supervisor;
use rudder::demo::worker::PARENT_ENV;
use rudder::tui::{WorkerControl, WorkerState};
use rudder::{NewTask, Status, Store};

mod demo_common;
use demo_common::{common, rudder, store_in_tempdir, wait_for};

const DEADLINE: Duration = Duration::from_secs(30);

fn demo_store() -> (tempfile::TempDir, PathBuf, Store) {
    store_in_tempdir("rudder-demo.json")
}

fn ids(store: &Store) -> Vec<String> {
    store
        .load()
        .expect("load")
        .into_keys()
        .collect::<Vec<String>>()
}

#[test]
fn seeding_twice_does_not_duplicate_or_reset_incidents() {
    let (_dir, _path, store) = demo_store();
    let incidents = Scenarios::get().incidents.len();
    let first = seed::seed(&store).expect("seed");
    assert_eq!(first.created.len(), incidents);
    assert!(first.existing.is_empty());
    let tasks = store.load().expect("load");
    let asking = tasks
        .values()
        .filter(|t| {
            t.request
                .as_ref()
                .is_some_and(|r| r.get("service").is_none())
        })
        .count();
    assert!(asking >= 1, "some incidents name no service");
    assert!(asking < incidents, "some incidents name their service");

    // A task moved on meanwhile: seeding again must leave it where it is.
    let moved = ids(&store)[0].clone();
    store.cancel(&moved, None).expect("cancel");
    let before = store.load().expect("load");
    let second = seed::seed(&store).expect("seed again");
    assert!(second.created.is_empty(), "{second:?}");
    assert_eq!(second.existing.len(), incidents);
    assert_eq!(store.load().expect("load"), before);
    assert_eq!(store.get(&moved).expect("get").status, Status::Cancelled);
}

#[test]
fn fresh_empties_a_demo_store_but_refuses_a_real_one() {
    let (_dir, _path, store) = demo_store();
    seed::seed(&store).expect("seed");
    let old = ids(&store);
    let removed = seed::clear(&store).expect("clear");
    assert_eq!(removed, old.len());
    assert!(ids(&store).is_empty());
    seed::seed(&store).expect("seed");
    let new = ids(&store);
    assert_eq!(new.len(), old.len());
    assert!(new.iter().all(|id| !old.contains(id)), "new tasks");

    store
        .create(NewTask {
            title: Some("a real task".into()),
            ..NewTask::default()
        })
        .expect("create");
    let refused = seed::clear(&store);
    assert!(
        matches!(&refused, Err(FreshError::NotADemoStore { foreign, .. }) if foreign == &["a real task"]),
        "{refused:?}"
    );
    assert_eq!(ids(&store).len(), new.len() + 1, "nothing was removed");
}

/// Whether any process runs with `needle` in its command line.
fn process_mentions(needle: &str) -> bool {
    let Ok(entries) = fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(needle))
            .unwrap_or(false)
    })
}

fn run_demo(path: &Path) {
    let mut demo = rudder();
    demo.arg("demo").arg("--store").arg(path);
    run_demo_command(demo);
}

/// Run `demo` (a `rudder demo` command) until it exits.
fn run_demo_command(mut demo: Command) {
    // Without a terminal the TUI cannot start: the demo seeds, starts its
    // worker, fails to open the TUI, and must stop the worker on its way out.
    let mut child = demo
        .args(["--speed", "50"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start rudder demo");
    let exited = wait_for("rudder demo to exit", DEADLINE, || {
        child.try_wait().expect("poll rudder demo")
    });
    // Whatever the TUI did, it is gone now; if it hung we never get here.
    let _ = exited;
}

#[test]
fn the_demo_seeds_once_and_leaves_no_worker_behind() {
    let (_dir, path, store) = demo_store();
    run_demo(&path);
    let first = ids(&store);
    assert_eq!(first.len(), Scenarios::get().incidents.len());
    assert_eq!(first.len(), 6, "the README promises six incidents");
    // The worker logs beside the store, as the README says.
    let log = path.with_file_name("rudder-demo.json.worker.log");
    assert!(log.is_file(), "no worker log at {}", log.display());
    run_demo(&path);
    assert_eq!(
        ids(&store),
        first,
        "running the demo again seeds nothing new"
    );
    let needle = path.display().to_string();
    wait_for("the demo's worker to be gone", DEADLINE, || {
        (!process_mentions(&needle)).then_some(())
    });
}

/// A supervisor of the built binary's workers on `path`, logging to
/// `worker.log` in `dir`; and that log.
fn supervisor(dir: &tempfile::TempDir, path: &Path, speed: f64) -> (Supervisor, PathBuf) {
    let log = dir.path().join("worker.log");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_rudder"));
    let supervisor = Supervisor::new(
        exe,
        rudder::store::StoreUrl::from_path(path),
        speed,
        Some(log.clone()),
    );
    (supervisor, log)
}

#[test]
fn the_supervisor_kills_and_restarts_the_worker() {
    let (dir, path, store) = demo_store();
    seed::seed(&store).expect("seed");
    let (mut supervisor, log) = supervisor(&dir, &path, 50.0);
    assert_eq!(supervisor.state(), WorkerState::NotStarted);
    assert!(supervisor.kill().is_err(), "nothing to kill yet");

    supervisor.start().expect("start");
    let WorkerState::Running { pid } = supervisor.state() else {
        panic!("not running: {:?}", supervisor.state());
    };
    assert!(supervisor.start().is_err(), "one worker at a time");
    // Stopped with SIGSTOP, it is not said to be running; SIGCONT resumes it.
    let signal = |sig| {
        let status = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{sig} {pid}");
    };
    signal("STOP");
    wait_for("the worker to show as stopped", DEADLINE, || {
        (supervisor.state() == WorkerState::Stopped { pid }).then_some(())
    });
    let refused = supervisor
        .start()
        .expect_err("a stopped worker is still there");
    assert!(refused.contains("stopped"), "{refused}");
    signal("CONT");
    wait_for("the worker to show as running again", DEADLINE, || {
        (supervisor.state() == WorkerState::Running { pid }).then_some(())
    });
    wait_for("the worker to finish a diagnosis", DEADLINE, || {
        let tasks = store.load().expect("load");
        tasks.values().any(|t| t.status.is_terminal()).then_some(())
    });
    supervisor.kill().expect("kill");
    assert_eq!(supervisor.state(), WorkerState::Killed { pid });
    assert!(supervisor.kill().is_err(), "already killed");

    supervisor.start().expect("start again");
    let WorkerState::Running { pid: again } = supervisor.state() else {
        panic!("not running again");
    };
    assert_ne!(again, pid);
    // Both workers wrote to the log file (appended, not truncated), not to
    // the terminal the TUI draws on. The first one was killed and reaped, so
    // its lines are all there; the second one is running: wait for its line.
    let started = |logged: &str, worker: u32| {
        logged
            .lines()
            .any(|l| l.contains(&format!("worker-{worker}#")) && l.contains("started"))
    };
    let logged = wait_for("the second worker to log that it started", DEADLINE, || {
        let logged = fs::read_to_string(&log).unwrap_or_default();
        started(&logged, again).then_some(logged)
    });
    assert!(started(&logged, pid), "{logged}");
    assert_eq!(supervisor.stop(), Some(again));
    // Asked to stop, the worker exited by itself.
    assert_eq!(
        supervisor.state(),
        WorkerState::Exited {
            pid: again,
            code: Some(0)
        }
    );
}

/// The first task a worker holds mid-diagnosis: its id and step. Only one
/// that names its service, which stays `working` through step 2 (a task
/// naming none asks for it when step 1 ends).
fn held_mid_diagnosis(store: &Store) -> (String, u64) {
    wait_for("a diagnosis under way", DEADLINE, || {
        store.load().expect("load").into_values().find_map(|t| {
            let step = t.progress.map_or(0, |p| p.current);
            let named = t
                .request
                .as_ref()
                .is_some_and(|r| r.get("service").is_some());
            (named && t.status == Status::Working && t.claimed_by.is_some() && step >= 1)
                .then_some((t.task_id, step))
        })
    })
}

#[test]
fn ending_the_demo_gives_the_leases_back_but_killing_the_worker_does_not() {
    let (dir, path, store) = demo_store();
    seed::seed(&store).expect("seed");
    // At speed 4 a diagnosis takes about 14 s: it is under way for long.
    let (mut supervisor, log) = supervisor(&dir, &path, 4.0);

    // Quitting the demo stops the worker: SIGTERM, so it gives its leases
    // back and the next demo resumes the tasks at once.
    supervisor.start().expect("start");
    let (id, step) = held_mid_diagnosis(&store);
    let pid = supervisor.stop().expect("a worker was running");
    let logged = fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        supervisor.state(),
        WorkerState::Exited { pid, code: Some(0) },
        "{logged}"
    );
    let tasks = store.load().expect("load");
    let held: Vec<_> = tasks.values().filter(|t| t.claimed_by.is_some()).collect();
    assert!(held.is_empty(), "leases kept: {held:?}\n{logged}");
    let task = &tasks[id.as_str()];
    assert_eq!(task.status, Status::Working, "{logged}");
    assert!(task.progress.is_some_and(|p| p.current >= step));
    assert!(logged.contains("lease given back"), "{logged}");

    // The presenter's K is SIGKILL: the lease stays until it runs out.
    supervisor.start().expect("start again");
    let (id, _) = held_mid_diagnosis(&store);
    supervisor.kill().expect("kill");
    assert!(matches!(supervisor.state(), WorkerState::Killed { .. }));
    let task = store.get(&id).expect("get");
    assert!(task.claimed_by.is_some(), "{task:?}");
    assert!(task.lease_expires_at.is_some(), "{task:?}");
}

#[test]
fn an_orphaned_demo_worker_exits() {
    let (_dir, path, _store) = demo_store();
    // The worker believes pid 1 started it; its real parent is this test, so
    // it concludes the demo is gone and exits cleanly.
    let out = rudder()
        .arg("worker")
        .arg("--store")
        .arg(&path)
        .env(PARENT_ENV, "1")
        .stdin(Stdio::null())
        .output()
        .expect("run the worker");
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is gone"), "{stderr}");
}

/// A speed outside 0.01..=10000 is a usage error (exit 2) of `worker` and
/// `demo` alike, before anything runs: `1e-308` used to overflow the step
/// durations and panic a diagnosis thread.
#[test]
fn a_bad_speed_is_refused() {
    let (_dir, path, _store) = demo_store();
    for command in ["worker", "demo"] {
        for speed in [
            "0", "-1", "NaN", "inf", "-inf", "1e-308", "0.001", "1e400", "10001", "fast", "",
        ] {
            let out = rudder()
                .arg(command)
                .arg("--store")
                .arg(&path)
                .arg(format!("--speed={speed}"))
                .stdin(Stdio::null())
                .output()
                .expect("run the worker");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{command} --speed={speed}: {stderr}"
            );
            assert!(stderr.contains("--speed"), "{stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
    assert!(!path.exists(), "nothing was written");
}

/// A store holding tasks that are not demo incidents is refused by the
/// demo, with and without --fresh: exit 2, the store untouched (not a byte,
/// not its inode or mtime), no worker started, and the message says why and
/// which store to use instead.
#[test]
fn the_demo_refuses_a_store_with_real_tasks() {
    let (dir, path, store) = store_in_tempdir("real.json");
    for title in ["INC-7 a real incident", "nightly backup"] {
        store
            .create(NewTask {
                title: Some(title.into()),
                ..NewTask::default()
            })
            .expect("create a real task");
    }
    // A demo incident among them does not make it a demo store.
    seed::seed(&store).expect("seed one store");
    let before = common::fingerprint(&path);
    for fresh in [false, true] {
        let mut demo = rudder();
        demo.arg("demo").arg("--store").arg(&path);
        if fresh {
            demo.arg("--fresh");
        }
        let out = demo
            .args(["--speed", "50"])
            .stdin(Stdio::null())
            .output()
            .expect("run rudder demo");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--fresh {fresh}: {stderr}");
        for says in [
            path.display().to_string().as_str(),
            "holds 2 tasks that are not demo incidents",
            "INC-7 a real incident",
            "nightly backup",
            "nothing was changed",
            "./rudder-demo.json",
            "--store NEW.json",
        ] {
            assert!(
                stderr.contains(says),
                "--fresh {fresh}: no {says:?} in {stderr}"
            );
        }
        assert_eq!(common::fingerprint(&path), before, "the store was written");
    }
    assert!(
        !Supervisor::log_path_for(&rudder::store::StoreUrl::from_path(&path)).exists(),
        "a worker was started"
    );
    assert!(
        !dir.path().join("rudder-demo.json").exists(),
        "the refusal wrote elsewhere"
    );
}

/// The README: the demo uses `./rudder-demo.json` unless `--store` is
/// given, and never `$RUDDER_STORE`; the worker takes the store the user
/// gave like every other command (issue 18: the "Many machines" snippet).
#[test]
fn the_demo_never_uses_rudder_store_and_the_worker_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("real.json");

    let mut demo = rudder();
    demo.arg("demo")
        .current_dir(dir.path())
        .env("RUDDER_STORE", &real);
    run_demo_command(demo);
    assert!(!real.exists(), "the demo wrote $RUDDER_STORE");
    let seeded = ids(&Store::connect(dir.path().join("rudder-demo.json")).expect("a store URL"));
    assert_eq!(seeded.len(), Scenarios::get().incidents.len());

    // An orphaned worker exits at once, after saying which store it is on.
    let out = rudder()
        .arg("worker")
        .current_dir(dir.path())
        .env("RUDDER_STORE", &real)
        .env(PARENT_ENV, "1")
        .stdin(Stdio::null())
        .output()
        .expect("run the worker");
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("real.json"), "{stderr}");
    assert!(!stderr.contains("rudder-demo.json"), "{stderr}");
}

/// Issue 30, item 15: `rudder demo --python-worker` on a machine whose
/// Python lacks the package (or has no Python at all) is a set-up error:
/// exit 2 with the install command, said before anything is written.
#[test]
fn a_python_worker_without_its_package_is_a_set_up_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    // An interpreter that runs but cannot import rudder.
    let python = dir.path().join("python-without-rudder");
    fs::write(
        &python,
        "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'rudder'\" >&2\nexit 1\n",
    )
    .expect("write the interpreter");
    fs::set_permissions(&python, fs::Permissions::from_mode(0o755)).expect("chmod");
    let missing = dir.path().join("no-such-python");
    for (interpreter, says) in [
        (&python, "cannot import the rudder Python package"),
        (&missing, "cannot run"),
    ] {
        let store = dir.path().join("demo.json");
        let out = rudder()
            .arg("demo")
            .arg("--store")
            .arg(&store)
            .arg("--python-worker")
            .env("RUDDER_PYTHON", interpreter)
            .stdin(Stdio::null())
            .output()
            .expect("run rudder demo");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(stderr.contains("pip install ./python"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!store.exists(), "the demo store was seeded: {stderr}");
        assert!(
            !Supervisor::log_path_for(&rudder::store::StoreUrl::from_path(&store)).exists(),
            "a worker was started"
        );
    }
}
