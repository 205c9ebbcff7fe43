//! The demo worker as real processes on a real store: SIGKILL and resume,
//! cancellation within a step, two workers on one store, and a stalled worker
//! whose lease was taken over.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use rudder::demo::diagnosis::TOTAL_STEPS;
use rudder::{Actor, NewTask, Status, Store, StoreError, Task};
use serde_json::{Value, json};

/// A `rudder worker` child, killed when dropped.
struct Worker {
    child: Child,
    log: PathBuf,
}

impl Worker {
    fn start(store: &Path, name: &str, speed: f64) -> Worker {
        let dir = store.parent().expect("the store is in a directory");
        let log = dir.join(format!("{name}.log"));
        let out = File::create(&log).expect("create the log");
        let err = out.try_clone().expect("clone the log handle");
        let child = Command::new(env!("CARGO_BIN_EXE_rudder"))
            .arg("worker")
            .arg("--store")
            .arg(store)
            .args(["--speed", &speed.to_string(), "--name", name])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start rudder worker");
        Worker { child, log }
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL, like a deploy restarting the process.
    fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL the worker");
        self.child.wait().expect("reap the worker");
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // The worker may be stopped: let it run so that SIGKILL is delivered
        // promptly either way, then reap it.
        let _ = Command::new("kill")
            .arg("-CONT")
            .arg(self.child.id().to_string())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Poll `f` until it returns `Some`, or panic after `timeout` naming `what`.
fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = f() {
            return value;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        sleep(Duration::from_millis(25));
    }
}

const DEADLINE: Duration = Duration::from_secs(40);

fn store_in(dir: &tempfile::TempDir) -> (PathBuf, Store) {
    let path = dir.path().join("tasks.json");
    let store = Store::open(&path);
    (path, store)
}

fn create(store: &Store, request: Value) -> String {
    store
        .create(NewTask {
            title: request["incident"].as_str().map(str::to_string),
            request: Some(request),
            ..NewTask::default()
        })
        .expect("create a task")
        .task
        .task_id
}

fn get(store: &Store, id: &str) -> Task {
    store.get(id).expect("the task exists")
}

fn current_step(task: &Task) -> u64 {
    task.progress.map_or(0, |p| p.current)
}

fn citation_kinds(result: &Value) -> Vec<String> {
    result["citations"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| c["kind"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_killed_worker_leaves_tasks_where_they_were_and_a_new_one_resumes_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, store) = store_in(&dir);
    let waiting = create(&store, json!({"incident": "INC-1043"}));
    let running = create(
        &store,
        json!({"incident": "INC-1042", "service": "checkout"}),
    );

    let mut first = Worker::start(&path, "first", 20.0);
    wait_for(
        "a task waiting and one past its second step",
        DEADLINE,
        || {
            let w = get(&store, &waiting);
            let r = get(&store, &running);
            (w.status == Status::InputRequired
                && r.status == Status::Working
                && (2..TOTAL_STEPS).contains(&current_step(&r)))
            .then_some(())
        },
    );
    first.kill9();

    // Everything a person was told survived the kill.
    let w = get(&store, &waiting);
    assert_eq!(w.status, Status::InputRequired);
    assert_eq!(w.claimed_by, None, "a waiting task holds no lease");
    let schema = w.input_schema.clone().expect("the schema is kept");
    let services = &schema["properties"]["service"]["enum"];
    assert!(
        services
            .as_array()
            .is_some_and(|s| s.contains(&json!("payments"))),
        "{schema}"
    );
    assert_eq!(schema["properties"]["window_minutes"]["type"], "integer");
    let r = get(&store, &running);
    assert_eq!(r.status, Status::Working);
    assert_eq!(r.claimed_by.as_deref(), Some("first"));
    let reached = current_step(&r);
    assert!(
        (1..TOTAL_STEPS).contains(&reached),
        "mid-diagnosis: {reached}"
    );

    // The person answers while no worker runs; a new worker finishes both.
    store
        .provide_input(&waiting, json!({"service": "payments"}), None)
        .expect("the input is valid for the schema");
    let _second = Worker::start(&path, "second", 20.0);
    wait_for("both tasks completed", DEADLINE, || {
        let done = [&waiting, &running]
            .iter()
            .all(|id| get(&store, id).status == Status::Completed);
        done.then_some(())
    });

    let r = get(&store, &running);
    let result = r.result.expect("a result");
    assert_eq!(result["worker"]["name"], "second");
    let resumed = result["worker"]["resumed_after_step"]
        .as_u64()
        .expect("resumed_after_step");
    assert!(
        resumed >= reached,
        "resumed after step {resumed}, but step {reached} was already done"
    );
    assert_eq!(citation_kinds(&result), ["incident", "trace", "deploy"]);
    assert_eq!(result["citations"][0]["id"], "INC-1042");
    assert_eq!(result["citations"][2]["id"], "deploy-8812");

    let w = get(&store, &waiting);
    let result = w.result.expect("a result");
    assert_eq!(result["service"], "payments");
    assert_eq!(result["worker"]["resumed_after_step"], 1);
    assert_eq!(citation_kinds(&result), ["incident", "trace", "deploy"]);
}

#[test]
fn a_cancel_during_a_step_stops_the_diagnosis() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, store) = store_in(&dir);
    let id = create(
        &store,
        json!({"incident": "INC-1042", "service": "checkout"}),
    );
    // At speed 4 the second step (call traces) takes 5 s: long enough that
    // a cancel lands inside it.
    let worker = Worker::start(&path, "canceller", 4.0);
    wait_for("the second step to start", DEADLINE, || {
        let t = get(&store, &id);
        (t.status == Status::Working && current_step(&t) == 1).then_some(())
    });
    store
        .cancel(&id, Some("not needed any more".into()))
        .expect("cancel");
    let line = wait_for("the worker to stop the diagnosis", DEADLINE, || {
        worker
            .log()
            .lines()
            .find(|l| l.contains("INC-1042") && l.contains("cancelled"))
            .map(str::to_string)
    });
    // Stopped inside the step it was running, not at its end.
    assert!(line.contains("cancelled during step 2/4"), "{line}");
    let t = get(&store, &id);
    assert_eq!(t.status, Status::Cancelled);
    assert_eq!(current_step(&t), 1, "no step was recorded after the cancel");
    assert_eq!(t.result, None);
}

#[test]
fn two_workers_on_one_store_run_every_task_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, store) = store_in(&dir);
    let requests = [
        json!({"incident": "INC-1042", "service": "checkout"}),
        json!({"incident": "INC-1043", "service": "payments"}),
        json!({"incident": "INC-1045", "service": "auth"}),
        json!({"incident": "INC-1046", "service": "search"}),
        json!({"incident": "INC-1047", "service": "inventory"}),
    ];
    let ids: Vec<String> = (0..8)
        .map(|i| create(&store, requests[i % requests.len()].clone()))
        .collect();

    let workers = [
        Worker::start(&path, "left", 50.0),
        Worker::start(&path, "right", 50.0),
    ];
    wait_for("every task completed", DEADLINE, || {
        ids.iter()
            .all(|id| get(&store, id).status == Status::Completed)
            .then_some(())
    });

    let logs: String = workers.iter().map(Worker::log).collect();
    for id in &ids {
        let task = get(&store, id);
        let result = task.result.as_ref().expect("a result");
        let by = result["worker"]["name"].as_str().expect("a worker name");
        assert!(by == "left" || by == "right", "{by}");
        assert_eq!(result["worker"]["resumed_after_step"], 0);
        let short = format!("({})", task.short_id());
        let claims = logs
            .lines()
            .filter(|l| l.contains(" claimed ") && l.contains(&short))
            .count();
        assert_eq!(claims, 1, "task {id} claimed {claims} times:\n{logs}");
        let completions = task
            .history
            .iter()
            .filter(|h| h.status == Status::Completed)
            .count();
        assert_eq!(completions, 1);
    }
    assert!(!logs.contains("refused"), "{logs}");
}

#[test]
fn a_worker_restarted_under_the_same_name_takes_its_tasks_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, store) = store_in(&dir);
    let id = create(
        &store,
        json!({"incident": "INC-1047", "service": "inventory"}),
    );
    let mut before = Worker::start(&path, "same", 20.0);
    wait_for("the first step done", DEADLINE, || {
        (current_step(&get(&store, &id)) >= 1).then_some(())
    });
    before.kill9();
    let _after = Worker::start(&path, "same", 20.0);
    let task = wait_for("the task completed", DEADLINE, || {
        let t = get(&store, &id);
        (t.status == Status::Completed).then_some(t)
    });
    let result = task.result.expect("a result");
    assert!(result["worker"]["resumed_after_step"].as_u64() >= Some(1));
}

/// The store's guarantee itself, without processes: once a lease was taken
/// over, the previous holder's writes are refused and the successor's result
/// stands.
#[test]
fn a_zombie_holder_is_refused_once_its_lease_was_taken_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, store) = store_in(&dir);
    let id = create(
        &store,
        json!({"incident": "INC-1042", "service": "checkout"}),
    );
    let short = Duration::from_millis(100);
    let long = Duration::from_secs(60);
    store.claim(&id, "zombie", short).expect("claim");
    wait_for("the zombie's lease to expire", DEADLINE, || {
        let t = get(&store, &id);
        (!t.lease_live(store.now())).then_some(())
    });
    let taken = store
        .claim_next("successor", long)
        .expect("claim_next")
        .expect("the expired task is claimable");
    assert_eq!(taken.task_id, id);

    let zombie = Actor::Worker {
        holder: "zombie",
        lease: short,
    };
    let successor = Actor::Worker {
        holder: "successor",
        lease: long,
    };
    let early = store.complete(&id, json!({"summary": "zombie"}), zombie);
    assert!(
        matches!(early, Err(StoreError::LeaseLost { .. })),
        "{early:?}"
    );
    let heartbeat = store.heartbeat(&id, Some("still here".into()), None, zombie);
    assert!(matches!(heartbeat, Err(StoreError::LeaseLost { .. })));

    let good = json!({"summary": "successor"});
    store
        .complete(&id, good.clone(), successor)
        .expect("complete");
    let late = store.complete(&id, json!({"summary": "zombie"}), zombie);
    assert!(late.is_err(), "{late:?}");
    let t = get(&store, &id);
    assert_eq!(t.status, Status::Completed);
    assert_eq!(t.result, Some(good));
}

/// SIGSTOP a worker holding a task, but never while it holds the store lock
/// (a stopped lock holder would block every other writer).
fn stop_outside_the_lock(worker: &Worker, store_path: &Path) {
    let lock_path = store_path.with_file_name("tasks.json.lock");
    wait_for(
        "the worker stopped outside the store lock",
        DEADLINE,
        || {
            worker.signal("STOP");
            let lock = File::open(&lock_path).expect("the lock file exists");
            if lock.try_lock().is_ok() {
                return Some(());
            }
            worker.signal("CONT");
            sleep(Duration::from_millis(30));
            None
        },
    );
}

#[test]
fn a_stalled_worker_cannot_overwrite_its_successors_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, store) = store_in(&dir);
    let id = create(
        &store,
        json!({"incident": "INC-1042", "service": "checkout"}),
    );
    let stalled = Worker::start(&path, "stalled", 20.0);
    wait_for("the first step done", DEADLINE, || {
        let t = get(&store, &id);
        (current_step(&t) >= 1 && t.status == Status::Working).then_some(())
    });
    stop_outside_the_lock(&stalled, &path);
    assert_eq!(get(&store, &id).claimed_by.as_deref(), Some("stalled"));
    wait_for("the stalled worker's lease to expire", DEADLINE, || {
        (!get(&store, &id).lease_live(store.now())).then_some(())
    });

    let _successor = Worker::start(&path, "successor", 20.0);
    let done = wait_for("the successor to complete the task", DEADLINE, || {
        let t = get(&store, &id);
        (t.status == Status::Completed).then_some(t)
    });
    assert_eq!(
        done.result.as_ref().map(|r| &r["worker"]["name"]),
        Some(&json!("successor"))
    );

    // The stalled worker wakes up mid-step and tries to go on.
    stalled.signal("CONT");
    let line = wait_for("the stalled worker to be refused", DEADLINE, || {
        stalled
            .log()
            .lines()
            .find(|l| l.contains("INC-1042") && l.contains("refused"))
            .map(str::to_string)
    });
    assert!(line.contains("stopped"), "{line}");
    println!("the stalled worker said: {line}");
    let after = get(&store, &id);
    assert_eq!(after.result, done.result, "the successor's result stands");
    assert_eq!(after.revision, done.revision, "nothing was written");
}
