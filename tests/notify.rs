//! `rudder notify` (issue 34, docs/notify.md): a program and a webhook get
//! one event per task and round, across a SIGKILL and between two
//! notifiers of one name, and stalled tasks are told of without a write.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{each_backend, pg, store_in, wait_for};
use rudder::store::delivery::{Delivery, EventKey};

const SCHEMA: &str =
    r#"{"type":"object","properties":{"service":{"type":"string"}},"required":["service"]}"#;
const LONG: Duration = Duration::from_secs(60);

/// A running notifier, killed (SIGKILL) when dropped.
struct Notifier {
    child: Child,
    stderr: PathBuf,
}

impl Notifier {
    fn start(store: &Path, dir: &Path, args: &[&str]) -> Notifier {
        Notifier::start_with_env(store, dir, args, &[])
    }

    /// [`Notifier::start`] with `env` in the notifier's environment.
    fn start_with_env(store: &Path, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Notifier {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let stderr = dir.join(format!(
            "notify-{}.err",
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let mut cmd = common::rudder();
        cmd.arg("--store").arg(store).arg("notify");
        // Short by default, so that retries come quickly; a test that
        // needs a long one says so.
        if !args.contains(&"--timeout") {
            cmd.args(["--timeout", "2s"]);
        }
        let child = cmd
            .args(["--backoff", "100ms"])
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("start rudder notify");
        let n = Notifier { child, stderr };
        // Started: it has said so (its feed is up before its first line).
        wait_for(LONG, || n.log().contains("rudder notify:").then_some(()))
            .unwrap_or_else(|| panic!("the notifier did not start: {}", n.log()));
        n
    }

    /// [`Notifier::start`] posting to the test webhook on `port`.
    fn posting(store: &Path, dir: &Path, port: u16) -> Notifier {
        let url = format!("http://127.0.0.1:{port}/hook");
        Notifier::start(store, dir, &["--webhook", &url])
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An executable shell script `name` in `dir` holding `text`.
fn program(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A script (named after `log`: `hook.log` gives `hook.sh`) that appends
/// `START id`, then (after `pause`) its input and environment as one JSON
/// line, then `DONE id` to `log`.
fn script(dir: &Path, log: &Path, pause: &str) -> PathBuf {
    let name = log.with_extension("sh");
    let name = name.file_name().and_then(|n| n.to_str()).unwrap();
    program(
        dir,
        name,
        &format!(
            "#!/bin/sh\n\
             echo \"START $RUDDER_TASK_ID\" >> '{log}'\n\
             sleep {pause}\n\
             input=$(cat)\n\
             printf 'EVENT %s\\n' \"$input\" >> '{log}'\n\
             printf 'ENV %s|%s|%s\\n' \"$RUDDER_TASK_ID\" \"$RUDDER_STATUS\" \"$RUDDER_TITLE\" >> '{log}'\n\
             printf 'SECRETS [%s][%s][%s]\\n' \"$RUDDER_STORE\" \"$PGPASSWORD\" \"$RUDDER_MCP_TOKEN\" >> '{log}'\n\
             echo \"DONE $RUDDER_TASK_ID\" >> '{log}'\n",
            log = log.display()
        ),
    )
}

fn lines(log: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix(prefix).map(str::to_string))
        .collect()
}

fn events(log: &Path) -> Vec<Value> {
    lines(log, "EVENT ")
        .iter()
        .map(|l| serde_json::from_str(l).expect("the event is JSON"))
        .collect()
}

fn ask(store: &Path, title: &str, message: &str) -> String {
    common::create(
        store,
        &["--title", title, "--schema", SCHEMA, "--message", message],
    )
}

/// The delivery record of the notifier `notify`, read as the tests see
/// the store.
struct Records(rudder::Store);

impl Records {
    fn of(store: &Path) -> Records {
        Records(rudder::Store::connect(store).expect("a store URL"))
    }

    /// The record of the `input_required` event of `id`'s first question.
    fn get(&self, id: &str) -> Option<Delivery> {
        let key = EventKey {
            task_id: id.to_string(),
            event: "input_required".into(),
            round: 0,
        };
        pg::off_runtime(|| self.0.delivery_record("notify", &key)).unwrap()
    }

    fn delivered(&self, id: &str) -> bool {
        self.get(id).is_some_and(|d| d.delivered_at.is_some())
    }
}

/// How many times each (task, round) was told of, as the script's
/// `EVENT` lines say (an empty one is a program whose notifier was killed
/// before it handed the event over: nothing was told).
fn told(log: &Path) -> BTreeMap<(String, i64), usize> {
    let mut seen = BTreeMap::new();
    let told = lines(log, "EVENT ");
    for ev in told
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let key = (
            ev["task_id"].as_str().unwrap_or_default().to_string(),
            ev["round"].as_i64().unwrap_or(-1),
        );
        *seen.entry(key).or_insert(0) += 1;
    }
    seen
}

/// Each of `ids` told of exactly once, and nothing else.
fn once_each(ids: &[&String]) -> BTreeMap<(String, i64), usize> {
    ids.iter().map(|id| (((*id).clone(), 0), 1)).collect()
}

/// The event is on the program's stdin and in its environment; a title
/// with shell metacharacters and escapes reaches it as data.
#[test]
fn the_program_gets_the_event_on_stdin_and_in_its_environment() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(dir.path());
        let log = dir.path().join("hook.log");
        let pwned = dir.path().join("PWNED");
        let hook = script(dir.path(), &log, "0");
        let title = format!("disk $(touch {}) `id` \u{1b}]0;x\u{7}", pwned.display());
        let id = ask(&store, &title, "which service?");
        // Secrets of the notifier's environment stay with it.
        let _n = Notifier::start_with_env(
            &store,
            dir.path(),
            &["--exec", hook.to_str().unwrap()],
            &[
                ("RUDDER_STORE", "postgres://u:pw-in-url@h/db"),
                ("PGPASSWORD", "pw-in-env"),
                ("RUDDER_MCP_TOKEN", "a-token"),
            ],
        );
        let ev = wait_for(LONG, || events(&log).pop()).expect("an event");
        assert_eq!(ev["task_id"], Value::from(id.clone()));
        assert_eq!(ev["event"], "input_required");
        assert_eq!(ev["status"], "input_required");
        assert_eq!(ev["title"], Value::from(title.clone()));
        assert_eq!(ev["question"], "which service?");
        assert_eq!(ev["fields"][0]["name"], "service");
        assert_eq!(ev["fields"][0]["required"], true);
        assert!(ev["answer"]["cli"].as_str().unwrap().contains(&id));
        assert!(ev["waited_ms"].is_number());
        assert!(!ev["text"].as_str().unwrap().contains('\u{1b}'));
        let env = wait_for(LONG, || lines(&log, "ENV ").pop()).unwrap();
        let parts: Vec<&str> = env.splitn(3, '|').collect();
        assert_eq!(parts[0], id);
        assert_eq!(parts[1], "input_required");
        assert!(parts[2].starts_with("disk $(touch"), "{env}");
        assert!(
            !parts[2].contains('\u{1b}'),
            "the environment's title is sanitised"
        );
        assert!(!pwned.exists(), "task text was run as a command");
        let secrets = wait_for(LONG, || lines(&log, "SECRETS ").pop()).unwrap();
        assert_eq!(secrets, "[][][]", "the program got the notifier's secrets");
    });
}

/// A task that asks a second question is a new event; the answer in
/// between is none.
#[test]
fn a_second_question_on_the_same_task_is_a_new_event() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tasks.db");
    let log = dir.path().join("hook.log");
    let hook = script(dir.path(), &log, "0");
    let _n = Notifier::start(&store, dir.path(), &["--exec", hook.to_str().unwrap()]);
    let id = ask(&store, "t", "first?");
    wait_for(LONG, || (lines(&log, "DONE ").len() == 1).then_some(())).expect("first event");
    let r = common::run(&store, &["input", &id, "--set", "service=db"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = common::run(
        &store,
        &[
            "request-input",
            &id,
            "--schema",
            SCHEMA,
            "--message",
            "second?",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    wait_for(LONG, || (lines(&log, "DONE ").len() == 2).then_some(())).expect("second event");
    let evs = events(&log);
    assert_eq!(evs[0]["question"], "first?");
    assert_eq!(evs[1]["question"], "second?");
    assert_ne!(evs[0]["round"], evs[1]["round"]);
}

/// A notifier killed with SIGKILL mid-stream and started again delivers
/// every event exactly once, but for the few under way at the kill: an
/// event recorded delivered before it is never told again, one that
/// arrived after it is told once, and only one whose program was running
/// unrecorded may be told twice (at least once, docs/notify.md).
#[test]
fn a_notifier_killed_mid_stream_and_restarted_neither_repeats_nor_skips() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(dir.path());
        let log = dir.path().join("hook.log");
        let hook = script(dir.path(), &log, "0.3");
        let mut ids: Vec<String> = (0..12)
            .map(|i| ask(&store, &format!("t{i}"), "?"))
            .collect();
        let mut n = Notifier::start(&store, dir.path(), &["--exec", hook.to_str().unwrap()]);
        let records = Records::of(&store);
        wait_for(LONG, || {
            ids.iter().any(|i| records.delivered(i)).then_some(())
        })
        .expect("a first delivery");
        n.kill();
        // The record cannot move while no notifier runs.
        let before: Vec<String> = ids
            .iter()
            .filter(|i| records.delivered(i))
            .cloned()
            .collect();
        // More work arrives while no notifier runs.
        let late: Vec<String> = (12..15)
            .map(|i| ask(&store, &format!("t{i}"), "?"))
            .collect();
        ids.extend(late.iter().cloned());
        let n2 = Notifier::start(&store, dir.path(), &["--exec", hook.to_str().unwrap()]);
        wait_for(LONG, || {
            ids.iter().all(|i| records.delivered(i)).then_some(())
        })
        .unwrap_or_else(|| panic!("not every event was delivered: {}", n2.log()));
        // Every program started has finished (those the kill orphaned too).
        wait_for(LONG, || {
            (lines(&log, "START ").len() == lines(&log, "DONE ").len()).then_some(())
        })
        .expect("the programs finish");
        let told = told(&log);
        let keys: Vec<&String> = told.keys().map(|(id, _)| id).collect();
        let mut want: Vec<&String> = ids.iter().collect();
        want.sort();
        assert_eq!(
            keys, want,
            "an event skipped, or one that is none: {told:?}"
        );
        for ((id, round), &times) in &told {
            assert_eq!(*round, 0, "{id}");
            if before.contains(id) || late.contains(id) {
                assert_eq!(times, 1, "{id} was told {times} times: {told:?}");
            } else {
                // Possibly under way at the kill (a program running, or
                // done but not yet recorded): told again at most once.
                assert!(times <= 2, "{id} was told {times} times: {told:?}");
            }
        }
        assert!(before.len() < ids.len(), "the kill came after everything");
    });
}

/// What the test webhook received: each request's head and body, and
/// what happened in order (`<status> <task>`, `hang <task>`, `hung up
/// <task>` when the notifier gave a hanging request up).
#[derive(Default)]
struct Received {
    requests: Vec<(String, Value)>,
    order: Vec<String>,
}

/// How the test webhook answers a request.
enum Answer {
    Status(u16),
    /// No answer: the connection is held until the client drops it.
    Hang,
}

/// A webhook on 127.0.0.1:0 that answers with `answers` in turn (200 once
/// they run out), and records what it got.
fn webhook(answers: Vec<u16>) -> (u16, Arc<Mutex<Received>>) {
    let answers = Mutex::new(answers.into_iter());
    webhook_answering(move |_, _| Answer::Status(answers.lock().unwrap().next().unwrap_or(200)))
}

/// A webhook on 127.0.0.1:0 that answers each request as `answer` says,
/// given the body and how many requests for that task came before; one
/// thread per connection, so that a hanging answer holds up no other.
fn webhook_answering(
    answer: impl Fn(&Value, usize) -> Answer + Send + Sync + 'static,
) -> (u16, Arc<Mutex<Received>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Received::default()));
    let seen = Arc::clone(&got);
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let (seen, answer) = (Arc::clone(&seen), Arc::clone(&answer));
            std::thread::spawn(move || serve(stream, &seen, &*answer));
        }
    });
    (port, got)
}

fn serve(
    mut stream: std::net::TcpStream,
    seen: &Mutex<Received>,
    answer: &(dyn Fn(&Value, usize) -> Answer + Send + Sync),
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let task = body["task_id"].as_str().unwrap_or("?").to_string();
    let how = {
        let mut got = seen.lock().unwrap();
        let before = got
            .requests
            .iter()
            .filter(|(_, b)| b["task_id"] == body["task_id"])
            .count();
        let how = answer(&body, before);
        got.requests.push((head, body));
        got.order.push(match how {
            Answer::Status(s) => format!("{s} {task}"),
            Answer::Hang => format!("hang {task}"),
        });
        how
    };
    match how {
        Answer::Status(status) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
        Answer::Hang => {
            // Returns when the notifier drops the connection.
            let _ = reader.read(&mut [0u8; 1]);
            seen.lock().unwrap().order.push(format!("hung up {task}"));
        }
    }
}

/// 500 is retried and the 200 after it ends the event; the bearer token
/// comes from the environment; the log names the URL without credentials.
#[test]
fn a_webhook_answering_500_is_retried_until_200() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tasks.json");
    let (port, got) = webhook(vec![500, 500]);
    let id = ask(&store, "hooked", "which?");
    let url = format!("http://user:hunter2@127.0.0.1:{port}/services/SECRETPATH?token=SECRETQ");
    let n = {
        let mut cmd = common::rudder();
        cmd.env("HOOK_TOKEN", "s3cret-token");
        let stderr = dir.path().join("n.err");
        let child = cmd
            .arg("--store")
            .arg(&store)
            .args(["notify", "--backoff", "100ms", "--timeout", "2s"])
            .args(["--webhook", &url, "--bearer-env", "HOOK_TOKEN"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Notifier { child, stderr }
    };
    wait_for(LONG, || {
        n.log().contains("delivered input_required").then_some(())
    })
    .unwrap_or_else(|| panic!("not delivered: {}", n.log()));
    let got = got.lock().unwrap();
    assert_eq!(got.requests.len(), 3, "two 500s, then the 200");
    for (head, body) in &got.requests {
        assert!(
            head.to_ascii_lowercase()
                .contains("authorization: bearer s3cret-token"),
            "{head}"
        );
        assert_eq!(body["task_id"], Value::from(id.clone()));
        assert!(body["text"].as_str().unwrap().contains("which?"));
    }
    let log = n.log();
    assert!(log.contains("500"), "{log}");
    for secret in ["hunter2", "SECRETPATH", "SECRETQ", "s3cret-token", "user:"] {
        assert!(!log.contains(secret), "{secret} in the log: {log}");
    }
}

/// A 400 is not retried: logged, and the notifier goes on with the next
/// event.
#[test]
fn a_webhook_answering_400_is_not_retried() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tasks.db");
    let (port, got) = webhook(vec![400]);
    let n = Notifier::posting(&store, dir.path(), port);
    let first = ask(&store, "one", "?");
    wait_for(LONG, || n.log().contains("gave up").then_some(()))
        .unwrap_or_else(|| panic!("no 400 logged: {}", n.log()));
    let second = ask(&store, "two", "?");
    wait_for(LONG, || {
        n.log().contains("delivered input_required").then_some(())
    })
    .unwrap_or_else(|| panic!("the second was not delivered: {}", n.log()));
    let got = got.lock().unwrap();
    let ids: Vec<&Value> = got.requests.iter().map(|(_, b)| &b["task_id"]).collect();
    assert_eq!(ids, vec![&Value::from(first), &Value::from(second)]);
    assert!(n.log().contains("400"), "{}", n.log());
}

/// Two notifiers of one name on one PostgreSQL store: each event once
/// between them.
#[test]
fn two_notifiers_of_one_name_on_postgres_deliver_each_event_once() {
    if !pg::available() {
        eprintln!("skipped: no PostgreSQL server programs");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = PathBuf::from(pg::store_url());
    let log = dir.path().join("hook.log");
    let hook = script(dir.path(), &log, "0");
    let a = Notifier::start(&store, dir.path(), &["--exec", hook.to_str().unwrap()]);
    let b = Notifier::start(&store, dir.path(), &["--exec", hook.to_str().unwrap()]);
    let ids: Vec<String> = (0..20)
        .map(|i| ask(&store, &format!("t{i}"), "?"))
        .collect();
    let records = Records::of(&store);
    wait_for(LONG, || {
        ids.iter().all(|i| records.delivered(i)).then_some(())
    })
    .unwrap_or_else(|| panic!("not all delivered:\n{}\n{}", a.log(), b.log()));
    let mut done = lines(&log, "DONE ");
    done.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(done, want, "each event exactly once between the two");
}

/// A 429 (too many requests) is retried like a 5xx, not given up like
/// other 4xx.
#[test]
fn a_webhook_answering_429_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tasks.db");
    let (port, got) = webhook(vec![429]);
    let id = ask(&store, "throttled", "?");
    let n = Notifier::posting(&store, dir.path(), port);
    let records = Records::of(&store);
    wait_for(LONG, || records.delivered(&id).then_some(()))
        .unwrap_or_else(|| panic!("not delivered: {}", n.log()));
    assert_eq!(
        got.lock().unwrap().order,
        [format!("429 {id}"), format!("200 {id}")]
    );
    let log = n.log();
    assert!(log.contains("429") && !log.contains("gave up"), "{log}");
}

/// A webhook that does not answer within `--timeout` is given up on and
/// retried; the other events are delivered while it hangs.
#[test]
fn a_webhook_that_hangs_past_the_timeout_is_retried_while_others_are_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tasks.db");
    let (port, got) = webhook_answering(|body, before| {
        if body["title"] == "hangs" && before == 0 {
            Answer::Hang
        } else {
            Answer::Status(200)
        }
    });
    let slow = ask(&store, "hangs", "?");
    let quick = ask(&store, "quick", "?");
    let n = Notifier::posting(&store, dir.path(), port);
    let records = Records::of(&store);
    wait_for(LONG, || {
        (records.delivered(&slow) && records.delivered(&quick)).then_some(())
    })
    .unwrap_or_else(|| panic!("not delivered: {}", n.log()));
    let order = got.lock().unwrap().order.clone();
    let at = |what: String| {
        order
            .iter()
            .position(|o| *o == what)
            .unwrap_or_else(|| panic!("no {what:?} in {order:?}"))
    };
    assert!(
        at(format!("200 {quick}")) < at(format!("hung up {slow}")),
        "{order:?}"
    );
    assert!(
        at(format!("hung up {slow}")) < at(format!("200 {slow}")),
        "{order:?}"
    );
    assert_eq!(order.len(), 4, "{order:?}");
    assert!(n.log().contains("timed out"), "{}", n.log());
}

/// A program (`hook.sh`) whose first run for the task titled `hangs`
/// becomes a sleep that outlasts any test, its pid in `hung`; every other
/// run reads its input and ends at once. Each run appends `START id` to
/// `log`, and `DONE id` when it ends.
fn hangs_once(dir: &Path, log: &Path, hung: &Path) -> PathBuf {
    program(
        dir,
        "hook.sh",
        &format!(
            "#!/bin/sh\n\
             echo \"START $RUDDER_TASK_ID\" >> '{log}'\n\
             if [ \"$RUDDER_TITLE\" = hangs ] && [ ! -e '{hung}' ]; then\n\
               echo $$ > '{hung}'\n\
               exec sleep 100000\n\
             fi\n\
             cat > /dev/null\n\
             echo \"DONE $RUDDER_TASK_ID\" >> '{log}'\n",
            log = log.display(),
            hung = hung.display()
        ),
    )
}

/// A SQLite store in a directory of its own, and [`hangs_once`] there.
struct Hanging {
    dir: tempfile::TempDir,
    store: PathBuf,
    log: PathBuf,
    hung: PathBuf,
    hook: PathBuf,
}

impl Hanging {
    fn new() -> Hanging {
        let dir = tempfile::tempdir().unwrap();
        let (log, hung) = (dir.path().join("hook.log"), dir.path().join("hung.pid"));
        Hanging {
            store: dir.path().join("tasks.db"),
            hook: hangs_once(dir.path(), &log, &hung),
            log,
            hung,
            dir,
        }
    }
}

/// Whether the process whose pid `file` holds is gone: no more, or a
/// zombie (killed, its exit not yet collected by whoever inherited it).
fn gone(file: &Path) -> bool {
    let pid = std::fs::read_to_string(file).unwrap();
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Err(_) => true,
        Ok(stat) => stat
            .rfind(')')
            .is_some_and(|i| stat[i + 1..].trim_start().starts_with('Z')),
    }
}

/// A program that never exits is killed at `--timeout` and run again; the
/// other events are delivered while it runs.
#[test]
fn a_program_that_never_exits_is_killed_at_the_timeout_and_retried_while_others_are_delivered() {
    let h = Hanging::new();
    let slow = ask(&h.store, "hangs", "?");
    let quick = ask(&h.store, "quick", "?");
    let n = Notifier::start(
        &h.store,
        h.dir.path(),
        &["--exec", h.hook.to_str().unwrap()],
    );
    let records = Records::of(&h.store);
    wait_for(LONG, || {
        (records.delivered(&slow) && records.delivered(&quick)).then_some(())
    })
    .unwrap_or_else(|| panic!("not delivered: {}", n.log()));
    let order: Vec<String> = std::fs::read_to_string(&h.log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let slow_starts: Vec<usize> = (0..order.len())
        .filter(|&i| order[i] == format!("START {slow}"))
        .collect();
    assert_eq!(slow_starts.len(), 2, "{order:?}");
    let quick_done = order.iter().position(|l| *l == format!("DONE {quick}"));
    assert!(
        quick_done.is_some_and(|d| d < slow_starts[1]),
        "the other event waited for the hanging program: {order:?}"
    );
    assert_eq!(order.last(), Some(&format!("DONE {slow}")), "{order:?}");
    assert!(gone(&h.hung), "the hanging program was not killed");
    assert!(n.log().contains("did not exit within 2s"), "{}", n.log());
}

/// SIGTERM mid-delivery: the notifier ends the program, gives the claim
/// back and exits 0; the next notifier of the name delivers the event at
/// once instead of after the claim's lease (here `--timeout` + 5 s = 65 s).
#[test]
fn a_notifier_stopped_with_sigterm_mid_delivery_gives_its_claim_back() {
    let h = Hanging::new();
    let id = ask(&h.store, "hangs", "?");
    let args = ["--timeout", "60s", "--exec", h.hook.to_str().unwrap()];
    let mut n = Notifier::start(&h.store, h.dir.path(), &args);
    wait_for(LONG, || h.hung.exists().then_some(())).expect("the program runs");
    let records = Records::of(&h.store);
    assert!(
        records.get(&id).is_some_and(|d| d.holder.is_some()),
        "claimed"
    );
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &n.pid().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let status = wait_for(LONG, || n.child.try_wait().unwrap()).expect("it exits on SIGTERM");
    assert!(status.success(), "{status:?}: {}", n.log());
    let record = records.get(&id).expect("a record");
    assert_eq!(
        (record.holder.as_deref(), record.delivered_at),
        (None, None),
        "the claim was not given back: {}",
        n.log()
    );
    wait_for(LONG, || gone(&h.hung).then_some(())).expect("the program outlived its notifier");
    let started = Instant::now();
    let n2 = Notifier::start(&h.store, h.dir.path(), &args);
    // Well within the 65 s lease a kept claim would hold it for.
    wait_for(Duration::from_secs(30), || {
        records.delivered(&id).then_some(())
    })
    .unwrap_or_else(|| panic!("not delivered after {:?}: {}", started.elapsed(), n2.log()));
    assert_eq!(lines(&h.log, "DONE "), [id]);
    assert!(
        n.log().contains("giving back the claims of 1"),
        "{}",
        n.log()
    );
}

/// A JSON file store moved away (missing) and back, with new questions
/// asked meanwhile: the notifier waits, then catches up from its record,
/// telling the new ones and not again the one it had told.
#[test]
fn a_file_store_moved_away_and_back_is_caught_up_without_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tasks.json");
    let away = dir.path().join("away.json");
    let log = dir.path().join("hook.log");
    let hook = script(dir.path(), &log, "0");
    let first = ask(&store, "first", "?");
    let n = Notifier::start(&store, dir.path(), &["--exec", hook.to_str().unwrap()]);
    let records = Records::of(&store);
    wait_for(LONG, || records.delivered(&first).then_some(())).expect("the first event");
    std::fs::rename(&store, &away).unwrap();
    wait_for(LONG, || {
        n.log().contains("cannot be read now").then_some(())
    })
    .unwrap_or_else(|| panic!("the notifier did not notice: {}", n.log()));
    let more: Vec<String> = (0..3).map(|i| ask(&away, &format!("m{i}"), "?")).collect();
    std::fs::rename(&away, &store).unwrap();
    wait_for(LONG, || {
        more.iter().all(|i| records.delivered(i)).then_some(())
    })
    .unwrap_or_else(|| panic!("not caught up: {}", n.log()));
    let all: Vec<&String> = std::iter::once(&first).chain(&more).collect();
    assert_eq!(told(&log), once_each(&all));
}

/// How many clock ticks make a second (`getconf CLK_TCK`; 100 on Linux).
fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// CPU time (user + system) of process `pid` so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 14th and 15th of the line.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A PostgreSQL server stopped mid-delivery and started again: the
/// notifier retries recording the delivery it made (spaced by its backoff,
/// not a busy loop), does not tell it again, and tells what comes after.
#[test]
fn a_postgres_server_stopped_and_started_is_caught_up_without_repeats_or_spinning() {
    if !pg::available() {
        eprintln!("skipped: no PostgreSQL server programs");
        return;
    }
    let cluster = pg::Cluster::start().expect("a cluster");
    let store = PathBuf::from(cluster.url(&cluster.create_database()));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("hook.log");
    // Long enough to stop the server while it runs.
    let hook = script(dir.path(), &log, "1");
    let first = ask(&store, "first", "?");
    let n = Notifier::start_with_env(
        &store,
        dir.path(),
        &["--exec", hook.to_str().unwrap()],
        // A write to a server that is down gives up after this.
        &[("RUDDER_LOCK_TIMEOUT", "1s")],
    );
    wait_for(LONG, || (!lines(&log, "START ").is_empty()).then_some(())).expect("the program runs");
    cluster.stop_immediate();
    let down = Instant::now();
    let cpu_down = cpu_ticks(n.pid());
    let store_lines = |log: &str| log.lines().filter(|l| l.contains("notify: store:")).count();
    // The program ends, the record of its delivery fails, and is tried
    // again: a few times.
    wait_for(LONG, || (store_lines(&n.log()) >= 4).then_some(()))
        .unwrap_or_else(|| panic!("no retries: {}", n.log()));
    let (seen, cpu, wall) = (
        store_lines(&n.log()),
        cpu_ticks(n.pid()) - cpu_down,
        down.elapsed(),
    );
    // At most one a backoff (100 ms), plus the feed's one notice.
    let most = (wall.as_millis() / 100) as usize + 2;
    assert!(seen <= most, "{seen} store lines in {wall:?}: {}", n.log());
    let hz = clock_ticks_per_second();
    assert!(
        (cpu as f64 / hz) < wall.as_secs_f64() / 2.0,
        "{cpu} ticks of CPU in {wall:?} while the store was down"
    );
    cluster.start_server().expect("the server starts again");
    let records = Records::of(&store);
    wait_for(LONG, || records.delivered(&first).then_some(()))
        .unwrap_or_else(|| panic!("the delivery was not recorded: {}", n.log()));
    let second = ask(&store, "second", "?");
    wait_for(LONG, || records.delivered(&second).then_some(()))
        .unwrap_or_else(|| panic!("not caught up: {}", n.log()));
    wait_for(LONG, || (lines(&log, "DONE ").len() == 2).then_some(())).expect("done");
    assert_eq!(told(&log), once_each(&[&first, &second]));
}

/// A working task whose lease lapses is told of as stalled, though
/// nothing was written when it lapsed.
#[test]
fn a_lapsed_lease_is_told_of_as_stalled() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tasks.db");
    let log = dir.path().join("hook.log");
    let hook = script(dir.path(), &log, "0");
    let _n = Notifier::start(
        &store,
        dir.path(),
        &["--on", "stalled,failed", "--exec", hook.to_str().unwrap()],
    );
    let id = common::create(&store, &["--title", "long job"]);
    let r = common::run(
        &store,
        &["claim", "--lease", "1s", "--holder", "w1", "--json"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let ev = wait_for(LONG, || events(&log).pop()).expect("a stalled event");
    assert_eq!(ev["event"], "stalled");
    assert_eq!(ev["task_id"], Value::from(id));
    assert_eq!(ev["claimed_by"], "w1");
    assert_eq!(events(&log).len(), 1);
}

/// `rudder demo --notify PROGRAM` runs a notifier beside the worker: the
/// program hears of the incidents' questions, and the notifier ends with
/// the demo.
#[test]
fn the_demo_runs_a_notifier_beside_its_worker() {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("demo.json");
    let log = dir.path().join("hook.log");
    let hook = script(dir.path(), &log, "0");
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 30,
            cols: 100,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("a pseudo-terminal");
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.args(["demo", "--speed", "20", "--store"]);
    cmd.arg(&store);
    cmd.arg("--notify");
    cmd.arg(&hook);
    cmd.env("TERM", "xterm-256color");
    cmd.env_remove("RUDDER_STORE");
    let mut child = pty.slave.spawn_command(cmd).expect("rudder demo starts");
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().unwrap();
    let writer = Arc::new(Mutex::new(pty.master.take_writer().unwrap()));
    let answers = Arc::clone(&writer);
    std::thread::spawn(move || {
        let _master = pty.master;
        let mut buf = [0u8; 65536];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            // crossterm may ask where the cursor is.
            if buf[..n].windows(4).any(|w| w == b"\x1b[6n") {
                let mut w = answers.lock().unwrap();
                let _ = w.write_all(b"\x1b[1;1R");
                let _ = w.flush();
            }
        }
    });
    let ev = wait_for(LONG, || events(&log).pop());
    let quit = |w: &Arc<Mutex<Box<dyn Write + Send>>>| {
        let mut w = w.lock().unwrap();
        let _ = w.write_all(b"q");
        let _ = w.flush();
    };
    quit(&writer);
    let ev = ev.unwrap_or_else(|| {
        panic!(
            "no event; the notifier's log: {}",
            std::fs::read_to_string(dir.path().join("demo.json.notify.log")).unwrap_or_default()
        )
    });
    assert_eq!(ev["event"], "input_required");
    assert_eq!(ev["notifier"], "demo");
    wait_for(LONG, || child.try_wait().unwrap()).expect("the demo exits on q");
    let needle = hook.display().to_string();
    wait_for(LONG, || {
        let running = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&needle))
                .unwrap_or(false)
        });
        (!running).then_some(())
    })
    .expect("the notifier outlived the demo");
}
