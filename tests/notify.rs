//! `rudder notify` (issue 34, docs/notify.md): a program and a webhook get
//! one event per task and round, across a SIGKILL and between two
//! notifiers of one name, and stalled tasks are told of without a write.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use common::{each_backend, pg, store_in, wait_for};
use rudder::store::delivery::EventKey;

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
        let child = common::rudder()
            .arg("--store")
            .arg(store)
            .arg("notify")
            .args(["--timeout", "2s", "--backoff", "100ms"])
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

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
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

/// A script that appends `START id`, then (after `pause`) its input and
/// environment as one JSON line, then `DONE id` to `log`.
fn script(dir: &Path, log: &Path, pause: &str) -> PathBuf {
    let path = dir.join("hook.sh");
    std::fs::write(
        &path,
        format!(
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
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
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
/// every event, and none that was recorded delivered before the kill.
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
        let opened = rudder::Store::connect(&store).expect("a store URL");
        let key = |id: &str| EventKey {
            task_id: id.to_string(),
            event: "input_required".into(),
            round: 0,
        };
        let delivered = |id: &str| {
            pg::off_runtime(|| opened.delivery_record("notify", &key(id)))
                .unwrap()
                .is_some_and(|d| d.delivered_at.is_some())
        };
        wait_for(LONG, || ids.iter().any(|i| delivered(i)).then_some(()))
            .expect("a first delivery");
        n.kill();
        let before: Vec<String> = ids.iter().filter(|i| delivered(i)).cloned().collect();
        let starts_before = lines(&log, "START ").len();
        // More work arrives while no notifier runs.
        ids.extend((12..15).map(|i| ask(&store, &format!("t{i}"), "?")));
        let _n2 = Notifier::start(&store, dir.path(), &["--exec", hook.to_str().unwrap()]);
        wait_for(LONG, || ids.iter().all(|i| delivered(i)).then_some(()))
            .unwrap_or_else(|| panic!("not every event was delivered: {}", _n2.log()));
        let done = lines(&log, "DONE ");
        for id in &ids {
            assert!(done.contains(id), "{id} was skipped");
        }
        let started_after = &lines(&log, "START ")[starts_before..];
        for id in &before {
            assert!(
                !started_after.contains(id),
                "{id} was recorded delivered before the kill and delivered again"
            );
        }
        assert!(before.len() < ids.len(), "the kill came after everything");
    });
}

/// What the test webhook received: each request's head and body.
#[derive(Default)]
struct Received {
    requests: Vec<(String, Value)>,
}

/// A webhook on 127.0.0.1:0 that answers with `answers` in turn (200 once
/// they run out), and records what it got.
fn webhook(answers: Vec<u16>) -> (u16, Arc<Mutex<Received>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Received::default()));
    let seen = Arc::clone(&got);
    std::thread::spawn(move || {
        let mut answers = answers.into_iter();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
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
            let status = answers.next().unwrap_or(200);
            seen.lock()
                .unwrap()
                .requests
                .push((head, serde_json::from_slice(&body).unwrap_or(Value::Null)));
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
    });
    (port, got)
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
    let url = format!("http://127.0.0.1:{port}/hook");
    let n = Notifier::start(&store, dir.path(), &["--webhook", &url]);
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
    let opened = rudder::Store::connect(&store).expect("a store URL");
    let delivered = |id: &str| {
        let key = EventKey {
            task_id: id.to_string(),
            event: "input_required".into(),
            round: 0,
        };
        pg::off_runtime(|| opened.delivery_record("notify", &key))
            .unwrap()
            .is_some_and(|d| d.delivered_at.is_some())
    };
    wait_for(LONG, || ids.iter().all(|i| delivered(i)).then_some(()))
        .unwrap_or_else(|| panic!("not all delivered:\n{}\n{}", a.log(), b.log()));
    let mut done = lines(&log, "DONE ");
    done.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(done, want, "each event exactly once between the two");
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
