//! The worker API (crates/store/src/worker, docs/workers.md) on every backend: `next`
//! on the change feed and its timeout, lease renewal, `Stop::Cancelled`
//! from a renewal, the lease given back on drop, ask and wait, a killed
//! worker process resumed by another, the async form, `Store::connect`.

use rudder_store::Work as _;
use std::path::Path;
use std::time::Duration;

use rudder_model::task::{Answered, Status, Task};
use rudder_store::NewTask;
use rudder_store::Store;
use rudder_store::worker::{Stop, WorkError};
use rudder_testkit::stores::store_in;
use rudder_testkit::wait_for;
use serde_json::json;

const LONG: Duration = Duration::from_secs(30);

fn store(path: &Path) -> Store {
    Store::connect(path).expect("a store URL")
}

fn create(store: &Store, kind: Option<&str>) -> String {
    store
        .create(NewTask {
            kind: kind.map(str::to_string),
            ..NewTask::default()
        })
        .expect("create")
        .task
        .task_id
}

fn get(store: &Store, id: &str) -> Task {
    store.get(id).expect("the task")
}

fn next_times_out_with_nothing_to_claim_and_takes_only_its_kinds_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = store_in(dir.path());
    let store = store(&path);
    let other = create(&store, Some("backup"));
    let mut worker = store
        .worker("w")
        .kinds(["diagnose"])
        .start()
        .expect("start");
    assert!(
        worker
            .next(Duration::from_millis(50))
            .expect("next")
            .is_none()
    );
    assert_eq!(
        get(&store, &other).claimed_by,
        None,
        "another kind is left alone"
    );
    let mine = create(&store, Some("diagnose"));
    let job = worker.next(LONG).expect("next").expect("a job");
    assert_eq!(job.id(), mine);
    assert_eq!(job.task().claimed_by.as_deref(), Some(worker.holder()));
}

fn next_wakes_on_the_feed_when_another_writer_creates_a_task_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = store_in(dir.path());
    let store = store(&path);
    let mut worker = store.worker("w").start().expect("start");
    let creator = {
        let path = path.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            create(&Store::connect(&path).expect("url"), None)
        })
    };
    let job = worker.next(LONG).expect("next").expect("a job");
    assert_eq!(job.id(), creator.join().expect("creator"));
}

fn a_job_renews_its_lease_reports_and_completes_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = store_in(dir.path());
    let store = store(&path);
    let id = create(&store, None);
    let mut worker = store
        .worker("w")
        .lease(Duration::from_secs(1))
        .renew_every(Duration::from_millis(100))
        .start()
        .expect("start");
    let mut job = worker.next(LONG).expect("next").expect("a job");
    let first = job.task().lease_expires_at.expect("a lease");
    // Renewed in the background without any write of the job's.
    let renewed = wait_for(LONG, || {
        let t = get(&store, &id);
        (t.lease_expires_at? > first).then_some(t)
    })
    .expect("the lease is renewed");
    assert_eq!(renewed.claimed_by.as_deref(), Some(job.holder()));
    // Past the lease it was claimed with, another worker still cannot
    // take it: the job lives and renews it.
    wait_for(LONG, || (store.now() > first).then_some(())).expect("the first lease is over");
    let mut other = store.worker("other").start().expect("start");
    assert!(other.next(Duration::ZERO).expect("next").is_none());
    for step in 1..=3 {
        job.progress(step, 3).expect("progress");
    }
    job.message("almost").expect("message");
    let done = job.complete(json!({"ok": true})).expect("complete");
    assert_eq!(done.status, Status::Completed);
    let t = get(&store, &id);
    assert_eq!(t.progress.map(|p| p.current), Some(3));
    assert_eq!(t.result, Some(json!({"ok": true})));
    drop(job);
    assert_eq!(get(&store, &id).status, Status::Completed);
}

fn a_cancelled_task_stops_its_job_at_the_next_renewal_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = store_in(dir.path());
    let store = store(&path);
    let id = create(&store, None);
    let mut worker = store
        .worker("w")
        .renew_every(Duration::from_millis(50))
        .start()
        .expect("start");
    let mut job = worker.next(LONG).expect("next").expect("a job");
    store
        .cancel(&id, Some("not needed".into()))
        .expect("cancel");
    // The job writes nothing: its renewal finds the cancel.
    let stop = wait_for(LONG, || job.check().err()).expect("a stop");
    assert!(
        matches!(stop, WorkError::Stop(Stop::Cancelled(_))),
        "{stop:?}"
    );
    let refused = job.progress(1, 3).expect_err("refused");
    assert!(
        matches!(refused, WorkError::Stop(Stop::Cancelled(_))),
        "{refused:?}"
    );
    assert_eq!(get(&store, &id).status, Status::Cancelled);
}

fn a_write_after_a_takeover_is_a_stop_and_writes_nothing_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = store_in(dir.path());
    let store = store(&path);
    let id = create(&store, None);
    let mut worker = store
        .worker("w")
        .lease(Duration::from_millis(300))
        .renew_every(Duration::from_millis(250))
        .start()
        .expect("start");
    let mut job = worker.next(LONG).expect("next").expect("a job");
    // A zombie: its lease taken over by another holder.
    store.release(&id, job.holder()).expect("release");
    store.claim(&id, "successor", LONG).expect("claim");
    let before = get(&store, &id);
    let e = job.progress(1, 3).expect_err("refused");
    assert!(matches!(e, WorkError::Stop(Stop::LeaseLost(_))), "{e:?}");
    let e = job.complete(json!(1)).expect_err("refused");
    assert!(e.stop().is_some(), "{e:?}");
    drop(job);
    assert_eq!(get(&store, &id), before, "nothing was written");
}

fn dropping_a_job_gives_the_lease_back_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = store_in(dir.path());
    let store = store(&path);
    let id = create(&store, None);
    let mut worker = store.worker("w").start().expect("start");
    let job = worker.next(LONG).expect("next").expect("a job");
    assert!(get(&store, &id).lease_live(store.now()));
    drop(job);
    let t = get(&store, &id);
    assert_eq!((t.claimed_by, t.lease_expires_at), (None, None));
    // So another worker claims it at once.
    let mut other = store.worker("other").start().expect("start");
    let job = other.next(Duration::ZERO).expect("next").expect("a job");
    assert_eq!(job.id(), id);
}

fn ask_keeps_the_lease_and_the_same_worker_continues_with_the_answer_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = store_in(dir.path());
    let store = store(&path);
    let id = create(&store, None);
    let mut worker = store.worker("w").start().expect("start");
    let mut job = worker.next(LONG).expect("next").expect("a job");
    let holder = job.holder().to_string();
    let schema = json!({"type": "object", "required": ["service"]});
    let mut answer = job.ask("Which service?", schema).expect("ask");
    assert_eq!(
        answer.wait(Some(Duration::from_millis(50))).expect("wait"),
        None
    );
    let waiting = get(&store, &id);
    assert_eq!(waiting.status, Status::InputRequired);
    assert_eq!(waiting.claimed_by.as_deref(), Some(holder.as_str()));
    // Nobody else can take it once answered: the lease is the asker's.
    let answerer = {
        let path = path.clone();
        let id = id.clone();
        std::thread::spawn(move || {
            Store::connect(&path)
                .expect("url")
                .provide_input(&id, json!({"service": "payments"}), None)
                .expect("input")
        })
    };
    let value = answer.wait(Some(LONG)).expect("wait").expect("answered");
    answerer.join().expect("answerer");
    assert_eq!(value, json!({"service": "payments"}));
    let mut other = store.worker("other").start().expect("start");
    assert!(other.next(Duration::ZERO).expect("next").is_none());
    job.complete(json!("done")).expect("complete");
    assert_eq!(get(&store, &id).status, Status::Completed);
}

/// A job that asks two questions: the first answer is kept, with its
/// question and schema, when the second is asked, and every backend
/// stores it and reads it back (a fresh connection, the full load, and
/// after another write, which the JSON file backend copies through its
/// quick check). People see its secret masked.
fn earlier_answers_are_kept_with_their_questions_and_read_back_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = store_in(dir.path());
    let store = store(&path);
    let id = create(&store, None);
    let person = Store::connect(&path).expect("url");
    let token = json!({
        "type": "object",
        "properties": {"token": {"type": "string", "writeOnly": true}},
        "required": ["token"]
    });
    let window = json!({"type": "object", "properties": {"window": {"type": "string"}}});
    let mut worker = store.worker("w").start().expect("start");
    let mut job = worker.next(LONG).expect("next").expect("a job");
    for (question, schema, given) in [
        ("Which token?", &token, json!({"token": "tok-1"})),
        ("Which window?", &window, json!({"window": "1h"})),
    ] {
        let mut answer = job.ask(question, schema.clone()).expect("ask");
        person
            .provide_input(&id, given.clone(), None)
            .expect("input");
        assert_eq!(answer.wait(Some(LONG)).expect("wait"), Some(given));
    }
    job.complete(json!("done")).expect("complete");
    drop(worker);
    let kept = vec![Answered {
        message: Some("Which token?".into()),
        input_schema: token.clone(),
        input_value: json!({"token": "tok-1"}),
    }];
    let fresh = Store::connect(&path).expect("url");
    let got = get(&fresh, &id);
    assert_eq!(got.answered, kept);
    assert_eq!(got.input_value, Some(json!({"window": "1h"})));
    let answers: Vec<_> = got.answers().map(|(q, _, v)| (q, v.clone())).collect();
    assert_eq!(
        answers,
        [
            (Some("Which token?"), json!({"token": "tok-1"})),
            (Some("Which window?"), json!({"window": "1h"})),
        ]
    );
    let loaded = fresh.load().expect("load");
    assert_eq!(loaded.get(&id).map(|t| &t.answered), Some(&kept));
    // Another write: the file backend copies this task's text as it is.
    create(&fresh, None);
    assert_eq!(get(&fresh, &id), got);
    let shown = serde_json::to_string(&rudder_store::schema::masked_task(&got)).expect("json");
    assert!(!shown.contains("tok-1"), "{shown}");
    assert!(shown.contains("Which token?"), "{shown}");
}

#[test]
fn a_cancel_while_waiting_for_an_answer_is_a_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.db");
    let store = store(&path);
    let id = create(&store, None);
    let mut worker = store.worker("w").start().expect("start");
    let mut job = worker.next(LONG).expect("next").expect("a job");
    let mut answer = job.ask("?", json!({"type": "object"})).expect("ask");
    let canceller = {
        let path = path.clone();
        std::thread::spawn(move || Store::connect(&path).expect("url").cancel(&id, None))
    };
    let e = answer.wait(Some(LONG)).expect_err("a stop");
    canceller.join().expect("canceller").expect("cancel");
    assert!(matches!(e, WorkError::Stop(Stop::Cancelled(_))), "{e:?}");
}

#[test]
fn connect_refuses_a_bad_url_at_once_without_its_password() {
    let e = Store::connect("postgres://ann:s3cret-pw@db.example:notaport/tasks")
        .err()
        .expect("refused");
    let text = e.to_string();
    assert!(!text.contains("s3cret-pw"), "{text}");
    assert!(text.contains("db.example"), "{text}");
    assert!(Store::connect("sqlite:").is_err());
}

#[test]
fn a_bad_name_or_kind_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    let store = store(&path);
    assert!(store.worker("").start().is_err());
    assert!(store.worker("w").holder("a\u{1b}[31m").start().is_err());
    assert!(store.worker("w").kinds(["bad\nkind"]).start().is_err());
    assert!(!path.exists(), "nothing was written");
}

/// The child of `a_killed_worker_process_is_resumed_by_another`: claims
/// the task, reports step 1 of 3, says so, and hangs until killed.
#[test]
#[ignore = "run by a_killed_worker_process_is_resumed_by_another"]
fn child_worker_that_hangs() {
    let Ok(path) = std::env::var("WORKER_TEST_STORE") else {
        return;
    };
    let store = store(Path::new(&path));
    let mut worker = store
        .worker("doomed")
        .lease(Duration::from_millis(500))
        .start()
        .expect("start");
    let mut job = worker.next(LONG).expect("next").expect("a job");
    job.report("step 1/3", 1, 3).expect("report");
    println!("READY {}", job.id());
    loop {
        std::thread::park();
    }
}

#[test]
fn a_killed_worker_process_is_resumed_by_another_from_its_progress() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.db");
    let store = store(&path);
    let id = create(&store, None);
    let mut child = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "child_worker_that_hangs",
            "--ignored",
            "--nocapture",
        ])
        .env("WORKER_TEST_STORE", &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the child worker");
    let stdout = child.stdout.take().expect("stdout");
    let ready = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("READY"))
        .expect("the child claimed the task");
    assert!(ready.ends_with(&id), "{ready}");
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let dead = get(&store, &id);
    assert!(
        dead.claimed_by
            .as_deref()
            .is_some_and(|h| h.starts_with("doomed#"))
    );
    // Another worker waits for the lease to lapse (no write happens) and
    // resumes from step 1.
    let mut heir = store.worker("heir").start().expect("start");
    let mut job = heir
        .next(LONG)
        .expect("next")
        .expect("the task, once its lease lapsed");
    assert_eq!(job.id(), id);
    assert_eq!(job.task().progress.map(|p| p.current), Some(1));
    job.complete(json!("resumed")).expect("complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_form_claims_reports_asks_and_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.db");
    let store = std::sync::Arc::new(store(&path));
    let mut worker = store.worker("a").start_async().expect("start");
    assert!(
        worker
            .next(Duration::from_millis(50))
            .await
            .expect("next")
            .is_none()
    );
    let id = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || create(&store, None))
            .await
            .expect("create")
    };
    let mut job = worker.next(LONG).await.expect("next").expect("a job");
    assert_eq!(job.id(), id);
    job.progress(1, 2).await.expect("progress");
    let mut answer = job.ask("?", json!({"type": "object"})).await.expect("ask");
    {
        let (store, id) = (store.clone(), id.clone());
        tokio::task::spawn_blocking(move || store.provide_input(&id, json!({"a": 1}), None))
            .await
            .expect("join")
            .expect("input");
    }
    let value = answer
        .wait(Some(LONG))
        .await
        .expect("wait")
        .expect("answered");
    assert_eq!(value, json!({"a": 1}));
    let done = job.complete(json!("ok")).await.expect("complete");
    assert_eq!(done.status, Status::Completed);

    // Cancelled under a job: a stop; dropped: the lease given back.
    let id = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || create(&store, None))
            .await
            .expect("create")
    };
    let mut job = worker.next(LONG).await.expect("next").expect("a job");
    {
        let (store, id) = (store.clone(), id.clone());
        tokio::task::spawn_blocking(move || store.cancel(&id, None))
            .await
            .expect("join")
            .expect("cancel");
    }
    let e = job.progress(1, 2).await.expect_err("refused");
    assert!(matches!(e, WorkError::Stop(Stop::Cancelled(_))), "{e:?}");
    let id = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || create(&store, None))
            .await
            .expect("create")
    };
    let job = worker.next(LONG).await.expect("next").expect("a job");
    drop(job);
    let given_back = tokio::task::spawn_blocking(move || {
        wait_for(LONG, || {
            Some(get(&store, &id)).filter(|t| t.claimed_by.is_none())
        })
    })
    .await
    .expect("join");
    assert!(given_back.is_some(), "the lease is given back");
}

/// `next()` while the PostgreSQL server is down reports it once, then waits
/// for it, and claims once it is back.
#[test]
fn next_reports_an_unreachable_store_and_recovers_when_it_is_back() {
    if !rudder_testkit::pg::available() {
        eprintln!("PostgreSQL is not installed: skipped");
        return;
    }
    let cluster = rudder_testkit::pg::Cluster::start().expect("a cluster");
    let url = cluster.url(&cluster.create_database());
    let store = Store::connect(&url).expect("url");
    let mut worker = store.worker("w").start().expect("start");
    assert!(
        worker
            .next(Duration::from_millis(50))
            .expect("next")
            .is_none()
    );
    cluster.stop_immediate();
    let e = worker.next(LONG).expect_err("the server is down");
    assert!(
        matches!(&e, WorkError::Store(s) if s.is_unreachable()),
        "{e:?}"
    );
    // Said once: the next call waits quietly.
    assert!(
        worker
            .next(Duration::from_millis(700))
            .expect("quiet")
            .is_none()
    );
    cluster.start_server().expect("restart");
    let id = create(&Store::connect(&url).expect("url"), None);
    let job = wait_for(LONG, || worker.next(Duration::from_secs(5)).ok().flatten())
        .expect("claimed once the server is back");
    assert_eq!(job.id(), id);
}

/// The async form on PostgreSQL, whose client may not block on a runtime
/// thread: every call goes through the worker's store threads.
#[tokio::test(flavor = "current_thread")]
async fn the_async_form_works_on_postgresql_from_a_single_threaded_runtime() {
    if !rudder_testkit::pg::available() {
        eprintln!("PostgreSQL is not installed: skipped");
        return;
    }
    let url = tokio::task::spawn_blocking(|| {
        let url = rudder_testkit::pg::store_url();
        create(&Store::connect(&url).expect("url"), Some("pg"));
        url
    })
    .await
    .expect("setup");
    let store = Store::connect(&url).expect("url");
    let mut worker = store
        .worker("a")
        .kinds(["pg"])
        .start_async()
        .expect("start");
    let mut job = worker.next(LONG).await.expect("next").expect("a job");
    for step in 1..=3 {
        job.progress(step, 3).await.expect("progress");
    }
    let done = job.complete(json!("ok")).await.expect("complete");
    assert_eq!(done.status, Status::Completed);
    assert_eq!(done.progress.map(|p| p.current), Some(3));
}

rudder_testkit::backend_tests! {
    next_times_out_with_nothing_to_claim_and_takes_only_its_kinds: next_times_out_with_nothing_to_claim_and_takes_only_its_kinds_case,
    next_wakes_on_the_feed_when_another_writer_creates_a_task: next_wakes_on_the_feed_when_another_writer_creates_a_task_case,
    a_job_renews_its_lease_reports_and_completes: a_job_renews_its_lease_reports_and_completes_case,
    a_cancelled_task_stops_its_job_at_the_next_renewal: a_cancelled_task_stops_its_job_at_the_next_renewal_case,
    a_write_after_a_takeover_is_a_stop_and_writes_nothing: a_write_after_a_takeover_is_a_stop_and_writes_nothing_case,
    dropping_a_job_gives_the_lease_back: dropping_a_job_gives_the_lease_back_case,
    ask_keeps_the_lease_and_the_same_worker_continues_with_the_answer: ask_keeps_the_lease_and_the_same_worker_continues_with_the_answer_case,
    earlier_answers_are_kept_with_their_questions_and_read_back: earlier_answers_are_kept_with_their_questions_and_read_back_case,
}
