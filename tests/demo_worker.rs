//! The demo worker as real processes on a real store: SIGKILL and resume,
//! SIGTERM giving the leases back, cancellation within a step, two workers on
//! one store, and a stalled worker whose lease was taken over (by a worker of
//! another name, or of the same name). The first three run on every backend.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::sleep;
use std::time::Duration;

use rudder::demo::diagnosis::TOTAL_STEPS;
use rudder::{Actor, NewTask, Status, Store, StoreError, Task};
use serde_json::{Value, json};

mod demo_common;
use demo_common::{common, rudder, store_in_tempdir, store_of_kind, wait_for};

/// A `rudder worker` child, killed when dropped.
struct Worker {
    child: Child,
    log: PathBuf,
}

impl Worker {
    fn start(store: &Path, name: &str, speed: f64) -> Worker {
        // Workers of the same name get logs of their own.
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        // Beside the store, or in the test cluster's dir (removed with it).
        let dir = if common::is_postgres(store) {
            common::pg::shared().dir().to_path_buf()
        } else {
            store
                .parent()
                .expect("the store is in a directory")
                .to_path_buf()
        };
        let log = dir.join(format!("{name}-{}-{n}.log", std::process::id()));
        let out = File::create(&log).expect("create the log");
        let err = out.try_clone().expect("clone the log handle");
        let child = rudder()
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

    /// The complete lines of the log so far. The worker writes a line in
    /// several `write`s (time, message, newline), so a line without its
    /// newline yet may still be growing and is left out.
    fn log(&self) -> String {
        let mut text = fs::read_to_string(&self.log).unwrap_or_default();
        text.truncate(text.rfind('\n').map_or(0, |end| end + 1));
        text
    }

    /// Wait for the first line of the log that mentions `incident` and
    /// `word`, and return it.
    fn wait_for_line(&self, what: &str, incident: &str, word: &str) -> String {
        wait_for(what, DEADLINE, || {
            self.log()
                .lines()
                .find(|l| l.contains(incident) && l.contains(word))
                .map(str::to_string)
        })
    }

    /// Wait for the worker to be stopped by a SIGSTOP sent to it: `kill`
    /// returns once the signal is sent, not once it took effect.
    fn wait_until_stopped(&self) {
        let stat = format!("/proc/{}/stat", self.child.id());
        wait_for("the worker to be stopped by SIGSTOP", DEADLINE, || {
            let text = fs::read_to_string(&stat).expect("the worker's /proc stat");
            // "PID (COMM) STATE ...": COMM may hold spaces and parentheses.
            let state = text.rsplit_once(") ").map(|(_, rest)| &rest[..1]);
            (state == Some("T")).then_some(())
        })
    }

    /// SIGKILL, like a deploy restarting the process.
    fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL the worker");
        self.child.wait().expect("reap the worker");
    }

    /// Wait for the worker to exit by itself.
    fn exited(&mut self) -> ExitStatus {
        wait_for("the worker to exit", DEADLINE, || {
            self.child.try_wait().expect("poll the worker")
        })
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

const DEADLINE: Duration = Duration::from_secs(40);

/// A demo incident (the worker takes no other task): its key starts with
/// `demo:`, unique per task so that one incident can be run several times.
fn create(store: &Store, request: Value) -> String {
    static CREATED: AtomicUsize = AtomicUsize::new(0);
    let n = CREATED.fetch_add(1, Ordering::Relaxed);
    let incident = request["incident"].as_str().unwrap_or("none").to_string();
    store
        .create(NewTask {
            idempotency_key: Some(format!("demo:{incident}#{n}")),
            title: request["incident"].as_str().map(str::to_string),
            request: Some(request),
            ..NewTask::default()
        })
        .expect("create a task")
        .task
        .task_id
}

/// INC-1042, which names its service: never asks for input.
fn create_checkout(store: &Store) -> String {
    create(
        store,
        json!({"incident": "INC-1042", "service": "checkout"}),
    )
}

fn get(store: &Store, id: &str) -> Task {
    store.get(id).expect("the task exists")
}

/// Wait for the task to be completed, and return it.
fn wait_for_completed(what: &str, store: &Store, id: &str) -> Task {
    wait_for(what, DEADLINE, || {
        let t = get(store, id);
        (t.status == Status::Completed).then_some(t)
    })
}

/// How many times the task's history shows it completed.
fn completions(task: &Task) -> usize {
    task.history
        .iter()
        .filter(|h| h.status == Status::Completed)
        .count()
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
    common::each_backend(
        a_killed_worker_leaves_tasks_where_they_were_and_a_new_one_resumes_them_once,
    );
}

fn a_killed_worker_leaves_tasks_where_they_were_and_a_new_one_resumes_them_once() {
    let (_dir, path, store) = store_of_kind();
    let waiting = create(&store, json!({"incident": "INC-1043"}));
    let running = create_checkout(&store);

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
    // SIGKILL gives nothing back: the lease runs out by itself.
    let holder = r.claimed_by.as_deref().unwrap_or_default();
    assert!(holder.starts_with("first#"), "{holder}");
    assert!(r.lease_expires_at.is_some());
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
    let (_dir, path, store) = store_in_tempdir("tasks.json");
    let id = create_checkout(&store);
    // At speed 4 the second step (call traces) takes 5 s: long enough that
    // a cancel lands inside it.
    let worker = Worker::start(&path, "canceller", 4.0);
    // Step 1 done (progress 1) is not yet step 2 begun: the worker records
    // that with a write of its own, and a cancel landing before it stops
    // the diagnosis "before step 2/4". Wait for step 2's own message.
    let step_2 = format!("step 2/{TOTAL_STEPS}: ");
    wait_for("the second step to start", DEADLINE, || {
        let t = get(&store, &id);
        let in_step_2 = t
            .status_message
            .as_deref()
            .is_some_and(|m| m.starts_with(&step_2));
        (t.status == Status::Working && current_step(&t) == 1 && in_step_2).then_some(())
    });
    store
        .cancel(&id, Some("not needed any more".into()))
        .expect("cancel");
    let line = worker.wait_for_line("the worker to stop the diagnosis", "INC-1042", "cancelled");
    // Stopped inside the step it was running, not at its end.
    assert!(line.contains("cancelled during step 2/4"), "{line}");
    let t = get(&store, &id);
    assert_eq!(t.status, Status::Cancelled);
    assert_eq!(current_step(&t), 1, "no step was recorded after the cancel");
    assert_eq!(t.result, None);
}

/// `rudder worker` on a store with real work never touches it: a task that
/// is not a demo incident (even one whose request looks like one) is never
/// claimed, let alone failed, while the demo incidents beside it are
/// diagnosed. The older real tasks come first in the store, so a worker
/// taking "the oldest working task" would have taken them.
#[test]
fn the_worker_never_claims_a_task_that_is_not_a_demo_incident() {
    let (_dir, path, store) = store_in_tempdir("tasks.json");
    let real: Vec<Task> = [
        json!({"incident": "INC-1042", "service": "checkout"}),
        json!({"incident": "INC-9999"}),
        json!({"deploy": "v2"}),
    ]
    .into_iter()
    .map(|request| {
        store
            .create(NewTask {
                title: Some("real work".into()),
                request: Some(request),
                ..NewTask::default()
            })
            .expect("create a real task")
            .task
    })
    .collect();
    let demo = create_checkout(&store);
    let worker = Worker::start(&path, "careful", 50.0);
    wait_for_completed("the demo incident diagnosed", &store, &demo);
    for task in &real {
        assert_eq!(&get(&store, &task.task_id), task, "a real task was touched");
    }
    let log = worker.log();
    assert!(
        log.contains(
            "3 task(s) in this store are not demo incidents: this worker never claims them"
        ),
        "{log}"
    );
}

fn two_workers_on_one_store_run_every_task_exactly_once_once() {
    let (_dir, path, store) = store_of_kind();
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

    let mut workers = [
        Worker::start(&path, "left", 50.0),
        Worker::start(&path, "right", 50.0),
    ];
    wait_for("every task completed", DEADLINE, || {
        ids.iter()
            .all(|id| get(&store, id).status == Status::Completed)
            .then_some(())
    });
    // A worker logs a claim after the store write that made it: only the
    // log of a worker that exited is complete, so stop both before counting.
    for worker in &mut workers {
        worker.signal("TERM");
        let status = worker.exited();
        assert!(status.success(), "{status:?}\n{}", worker.log());
    }

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
        assert_eq!(completions(&task), 1);
    }
    assert!(!logs.contains("refused"), "{logs}");
}

#[test]
fn a_worker_restarted_under_the_same_name_resumes_the_task_once_the_lease_lapsed() {
    let (_dir, path, store) = store_in_tempdir("tasks.json");
    let id = create(
        &store,
        json!({"incident": "INC-1047", "service": "inventory"}),
    );
    let mut before = Worker::start(&path, "same", 20.0);
    wait_for("the first step done", DEADLINE, || {
        (current_step(&get(&store, &id)) >= 1).then_some(())
    });
    before.kill9();
    let left = get(&store, &id);
    let old = left.claimed_by.clone().expect("SIGKILL leaves the lease");
    let lapses = left.lease_expires_at.expect("a lease");

    // A new process of the same name is a new holder: it does not renew
    // its predecessor's lease, it claims the task once that lease lapsed.
    let _after = Worker::start(&path, "same", 20.0);
    let new = wait_for("the restarted worker to claim the task", DEADLINE, || {
        let t = get(&store, &id);
        // Read after the task: the claim it shows was made before `now`.
        let now = store.now();
        let holder = t.claimed_by.filter(|h| h != &old)?;
        assert!(now >= lapses, "{holder} took the task over a live lease");
        Some(holder)
    });
    assert!(new.starts_with("same#"), "{new}");
    let task = wait_for_completed("the task completed", &store, &id);
    let result = task.result.expect("a result");
    assert_eq!(result["worker"]["name"], "same");
    assert!(result["worker"]["resumed_after_step"].as_u64() >= Some(1));
}

fn sigterm_gives_the_lease_back_and_exits_once() {
    let (_dir, path, store) = store_of_kind();
    let id = create_checkout(&store);
    // At speed 4 a diagnosis takes about 14 s: it is under way for long.
    let mut worker = Worker::start(&path, "polite", 4.0);
    let reached = wait_for("the first step done", DEADLINE, || {
        let t = get(&store, &id);
        (t.status == Status::Working && current_step(&t) >= 1 && t.claimed_by.is_some())
            .then(|| current_step(&t))
    });
    worker.signal("TERM");
    let status = worker.exited();
    assert!(
        status.success(),
        "{status:?}: it must exit by itself, not die of the signal\n{}",
        worker.log()
    );
    let t = get(&store, &id);
    assert_eq!(t.status, Status::Working, "the task stays where it was");
    assert_eq!(t.claimed_by, None, "the lease was given back");
    assert_eq!(t.lease_expires_at, None);
    let step = current_step(&t);
    assert!((reached..TOTAL_STEPS).contains(&step), "at step {step}");
    let log = worker.log();
    assert!(log.contains("SIGTERM"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("INC-1042") && l.contains("lease given back")),
        "{log}"
    );
}

/// The store's guarantee itself, without processes: once a lease was taken
/// over, the previous holder's writes are refused and the successor's result
/// stands.
#[test]
fn a_zombie_holder_is_refused_once_its_lease_was_taken_over() {
    let (_dir, _, store) = store_in_tempdir("tasks.json");
    let id = create_checkout(&store);
    let short = Duration::from_millis(100);
    let long = Duration::from_secs(60);
    store.claim(&id, "zombie", short).expect("claim");
    wait_for("the zombie's lease to expire", DEADLINE, || {
        let t = get(&store, &id);
        (!t.lease_live(store.now())).then_some(())
    });
    let taken = store
        .claim_next("successor", long, &[])
        .expect("claim_next")
        .expect("the expired task is claimable");
    assert_eq!(taken.task_id, id);

    let zombie = Actor::Worker {
        holder: "zombie",
        lease: Some(short),
    };
    let successor = Actor::Worker {
        holder: "successor",
        lease: Some(long),
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
            worker.wait_until_stopped();
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
    let (_dir, path, store) = store_in_tempdir("tasks.json");
    let id = create_checkout(&store);
    let stalled = Worker::start(&path, "stalled", 20.0);
    wait_for("the first step done", DEADLINE, || {
        let t = get(&store, &id);
        (current_step(&t) >= 1 && t.status == Status::Working).then_some(())
    });
    stop_outside_the_lock(&stalled, &path);
    let holder = get(&store, &id).claimed_by.unwrap_or_default();
    assert!(holder.starts_with("stalled#"), "{holder}");
    wait_for("the stalled worker's lease to expire", DEADLINE, || {
        (!get(&store, &id).lease_live(store.now())).then_some(())
    });

    let _successor = Worker::start(&path, "successor", 20.0);
    let done = wait_for_completed("the successor to complete the task", &store, &id);
    assert_eq!(
        done.result.as_ref().map(|r| &r["worker"]["name"]),
        Some(&json!("successor"))
    );

    // The stalled worker wakes up mid-step and tries to go on.
    stalled.signal("CONT");
    let line = stalled.wait_for_line("the stalled worker to be refused", "INC-1042", "refused");
    assert!(line.contains("stopped"), "{line}");
    println!("the stalled worker said: {line}");
    let after = get(&store, &id);
    assert_eq!(after.result, done.result, "the successor's result stands");
    assert_eq!(after.revision, done.revision, "nothing was written");
}

/// The review's reproduction: two workers of the same name; the one holding
/// the task stalls past its lease, the other takes over, and the stalled one
/// wakes up while its successor is still at work. Under one shared holder
/// name the stalled one's writes were accepted; now they are refused.
#[test]
fn a_stalled_worker_is_refused_once_a_worker_of_the_same_name_took_over() {
    let (_dir, path, store) = store_in_tempdir("tasks.json");
    let id = create_checkout(&store);
    // Speed 10: a lease of 3 s, and steps 2 to 4 take almost 5 s, so the
    // successor is still at work when the stalled worker wakes up.
    let stalled = Worker::start(&path, "same", 10.0);
    let first = wait_for("the first step done", DEADLINE, || {
        let t = get(&store, &id);
        (t.status == Status::Working && current_step(&t) >= 1)
            .then_some(t.claimed_by)
            .flatten()
    });
    let successor = Worker::start(&path, "same", 10.0);
    stop_outside_the_lock(&stalled, &path);
    successor.wait_for_line(
        "the other worker to take the task over",
        "INC-1042",
        "claimed",
    );
    let second = get(&store, &id).claimed_by.expect("the successor's lease");

    stalled.signal("CONT");
    let line = stalled.wait_for_line("the stalled worker to be refused", "INC-1042", "refused");
    // Refused for the lease, while the task was still being worked on (not
    // merely because it was finished by then).
    assert!(
        line.contains(&format!("the lease is held by {second}")),
        "{line}"
    );
    assert_ne!(second, first, "two processes, two holders");
    assert!(second.starts_with("same#"), "{second}");
    let done = wait_for_completed("the successor to complete the task", &store, &id);
    let result = done.result.as_ref().expect("a result");
    // The stalled worker started at step 0; its successor resumed mid-way.
    assert!(
        result["worker"]["resumed_after_step"].as_u64() >= Some(1),
        "{result}"
    );
    assert_eq!(completions(&done), 1);
    // The worker logs the completion after the store write (and its
    // fsyncs) returned: wait for the line rather than expect it already.
    let completed = successor.wait_for_line(
        "the successor to log the completion",
        "INC-1042",
        "completed",
    );
    assert!(completed.ends_with(": completed"), "{completed}");
    // The stalled worker's diagnosis ended with its refusal (logged above),
    // and the task is finished: its log has nothing more to say about it.
    assert!(!stalled.log().contains("completed"), "{}", stalled.log());
    let after = get(&store, &id);
    assert_eq!(after.result, done.result, "the successor's result stands");
    assert_eq!(after.revision, done.revision, "nothing was written");
}

common::shared_backend_tests! {
    two_workers_on_one_store_run_every_task_exactly_once: two_workers_on_one_store_run_every_task_exactly_once_once,
    sigterm_gives_the_lease_back_and_exits: sigterm_gives_the_lease_back_and_exits_once,
}
