//! Issue 18 (sections 3 and 5) from outside: a store password never shows
//! (output, logs, a child's argv), a mistyped scheme is a usage error, the
//! worker takes the store the user gave, and the CLI's small slips get a
//! clear answer.

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::pg::children;
use common::{pg, rudder, run, wait_for};
use portable_pty::{CommandBuilder, PtySize, native_pty_system};

/// Generous: waiting for a state, not measuring time.
const PATIENCE: Duration = Duration::from_secs(60);

const PASSWORD: &str = "S3cr3t-pw-5e1d";

fn cmdline(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw).replace('\0', " ")
}

/// `rudder demo` and `rudder worker` over a PostgreSQL URL with a
/// password: the password is in no output, no log, and not in the demo's
/// worker's argv (it gets the store by environment); the log is 0600; the
/// goodbye line's command is quoted for the shell.
#[test]
fn a_demo_and_a_worker_over_a_url_with_a_password_never_show_it() {
    if !pg::available() {
        return;
    }
    let cluster = pg::Cluster::start_with_password(PASSWORD).expect("a cluster");
    let db = cluster.create_database();
    // `&` in the URL: the goodbye line must quote it.
    let url = format!(
        "{}?sslmode=disable&connect_timeout=10",
        cluster.tcp_url(&db)
    );
    assert!(url.contains(PASSWORD), "{url}");
    let dir = tempfile::tempdir().expect("tempdir");

    // The worker alone: its start-up line names the store, without the
    // password.
    let err_path = dir.path().join("worker.stderr");
    let err_file = std::fs::File::create(&err_path).expect("stderr file");
    let mut worker = rudder()
        .args(["worker", "--speed", "20", "--store", &url])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file)
        .spawn()
        .expect("rudder worker");
    let started = wait_for(PATIENCE, || {
        let text = std::fs::read_to_string(&err_path).ok()?;
        text.contains("started on the store").then_some(text)
    });
    let _ = worker.kill();
    let _ = worker.wait();
    let started = started.expect("the worker says where it started");
    assert!(!started.contains(PASSWORD), "{started}");
    assert!(started.contains("rudder:***@127.0.0.1"), "{started}");

    // The demo in a pseudo-terminal.
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 35,
            cols: 120,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("a pseudo-terminal");
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.args(["--store", &url, "demo", "--speed", "20"]);
    cmd.cwd(dir.path());
    cmd.env("TERM", "xterm-256color");
    cmd.env_remove("RUDDER_STORE");
    let mut child = pty.slave.spawn_command(cmd).expect("rudder demo");
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().expect("a reader");
    let writer = Arc::new(Mutex::new(pty.master.take_writer().expect("a writer")));
    let raw = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&raw);
    let answers = Arc::clone(&writer);
    let reading = std::thread::spawn(move || {
        let _master = pty.master;
        let mut buf = [0u8; 65536];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    // crossterm may ask where the cursor is.
                    if buf[..n].windows(4).any(|w| w == b"\x1b[6n") {
                        let mut w = answers.lock().expect("lock");
                        let _ = w.write_all(b"\x1b[1;1R");
                        let _ = w.flush();
                    }
                    sink.lock().expect("lock").extend_from_slice(&buf[..n]);
                }
            }
        }
    });
    let text = || String::from_utf8_lossy(&raw.lock().expect("lock")).into_owned();
    let demo_pid = child.process_id().expect("the demo's pid");
    // A child between its fork and its exec still shows the demo's own
    // argv: wait for one that has become the program it runs.
    let demo_argv = cmdline(demo_pid);
    let argv = wait_for(PATIENCE, || {
        children(demo_pid).into_iter().find_map(|pid| {
            let argv = cmdline(pid);
            (!argv.is_empty() && argv != demo_argv).then_some(argv)
        })
    })
    .unwrap_or_else(|| panic!("the demo starts its worker; screen: {}", text()));
    assert!(argv.contains("worker"), "{argv}");
    assert!(!argv.contains(PASSWORD), "the worker's argv: {argv}");
    assert!(!argv.contains("postgres"), "the worker's argv: {argv}");
    let log = dir.path().join("rudder-demo.worker.log");
    let logged = wait_for(PATIENCE, || {
        let t = std::fs::read_to_string(&log).ok()?;
        t.contains("started on the store").then_some(t)
    })
    .expect("the worker logs its start");
    let mode = std::fs::metadata(&log)
        .expect("the log")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "the worker log's mode");
    wait_for(PATIENCE, || text().contains("INC-1042").then_some(()))
        .unwrap_or_else(|| panic!("the demo shows its incidents: {}", text()));
    {
        let mut w = writer.lock().expect("lock");
        w.write_all(b"q").expect("q");
        w.flush().expect("flush");
    }
    let status = child.wait().expect("the demo exits");
    assert!(status.success(), "{status:?}: {}", text());
    drop(writer);
    let _ = reading.join();
    let shown = text();
    let logged = format!(
        "{logged}{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    for (what, t) in [("the demo's output", &shown), ("the worker log", &logged)] {
        assert!(!t.contains(PASSWORD), "{what} shows the password:\n{t}");
    }
    // The goodbye line: the store quoted for the shell, password hidden.
    assert!(
        shown.contains(&format!(
            "--store 'postgres://rudder:***@127.0.0.1:{}/{db}?sslmode=disable&connect_timeout=10'",
            cluster.port
        )),
        "{shown}"
    );
    assert!(
        shown.contains("with the password in place of ***"),
        "{shown}"
    );
}

/// A password holding an unencoded `/` or `?` (read one way by libpq,
/// another by the `postgres` crate) is refused, and nothing of the user
/// info shows, plain or `--json`, from the CLI, the TUI's entry and the
/// demo's.
#[test]
fn a_url_whose_password_holds_a_slash_or_a_question_mark_never_shows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    for url in [
        "postgres://slash:S3cr3t/x?y@host/db",
        "postgres://q:S3cr3t?y@host/db",
        "postgresql://at:S3c@r3t@host/db",
    ] {
        for args in [
            &["list"][..],
            &["list", "--json"],
            &["get", "abc", "--json"],
            &["watch"],
            &["demo"],
            &["worker"],
        ] {
            let r: common::Run = rudder()
                .arg("--store")
                .arg(url)
                .args(args)
                .current_dir(dir.path())
                .output()
                .expect("rudder")
                .into();
            assert_eq!(r.code, 2, "{url} {args:?}: {r:#?}");
            let all = format!("{}{}", r.stdout, r.stderr);
            assert!(!all.contains("S3c"), "{url} {args:?}: {all}");
            assert!(all.contains("percent-encode"), "{url} {args:?}: {all}");
        }
    }
}

/// A PostgreSQL URL whose parameters cannot be used is refused when the
/// store is opened, as a usage error of where it came from (exit 2, plain
/// or `--json`), before anything is read, its password never shown.
#[test]
fn a_postgres_url_rudder_cannot_use_is_a_usage_error_of_its_source() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = "postgres://ann:S3cr3t-pw@db.example:notaport/tasks";
    for json in [false, true] {
        let mut cmd = rudder();
        cmd.args(["--store", url, "list"]);
        if json {
            cmd.arg("--json");
        }
        let r: common::Run = cmd.current_dir(dir.path()).output().expect("rudder").into();
        assert_eq!(r.code, 2, "{r:#?}");
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(!all.contains("S3cr3t"), "{all}");
        assert!(all.contains("postgres://ann:***@db.example"), "{all}");
        if json {
            let v = r.json();
            assert_eq!(v["error"], "usage", "{v}");
            assert_eq!(v["argument"], "--store", "{v}");
        }
    }
    let r: common::Run = rudder()
        .env("RUDDER_STORE", url)
        .args(["get", "abc"])
        .current_dir(dir.path())
        .output()
        .expect("rudder")
        .into();
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(r.stderr.contains("RUDDER_STORE"), "{r:#?}");
    assert!(!r.stderr.contains("S3cr3t"), "{r:#?}");
}

/// `WORD://` or `WORD:` that is no known scheme (and no existing file) is a
/// usage error naming the known schemes and the nearest; nothing is
/// created. `./postgress:x` is a file, `file:` works.
#[test]
fn a_mistyped_scheme_is_a_usage_error_and_makes_no_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let known = "postgres://, postgresql://, sqlite:PATH and file:PATH";
    for (store, nearest) in [
        (
            "postgress://u@localhost/db",
            Some("did you mean postgres://?"),
        ),
        ("mysql://u@h/db", None),
        ("sqllite:t.db", Some("did you mean sqlite:?")),
    ] {
        for json in [false, true] {
            let mut cmd = rudder();
            cmd.args(["--store", store, "create", "--title", "x"]);
            if json {
                cmd.arg("--json");
            }
            let r: common::Run = cmd.current_dir(dir.path()).output().expect("rudder").into();
            assert_eq!(r.code, 2, "{store}: {r:#?}");
            let message = if json {
                let v = r.json();
                assert_eq!(v["error"], "usage", "{v}");
                assert_eq!(v["exit_code"], 2, "{v}");
                v["message"].as_str().expect("a message").to_string()
            } else {
                r.stderr.clone()
            };
            assert!(message.contains(known), "{store}: {message}");
            match nearest {
                Some(n) => assert!(message.contains(n), "{store}: {message}"),
                None => assert!(!message.contains("did you mean"), "{store}: {message}"),
            }
        }
        // From $RUDDER_STORE too.
        let r: common::Run = rudder()
            .env("RUDDER_STORE", store)
            .args(["list"])
            .current_dir(dir.path())
            .output()
            .expect("rudder")
            .into();
        assert_eq!(r.code, 2, "{store}: {r:#?}");
        assert!(r.stderr.contains("RUDDER_STORE"), "{r:#?}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "nothing is created: {left:?}");
    for store in ["./postgress:x", "file:postgress:y"] {
        let r: common::Run = rudder()
            .args(["--store", store, "create", "--title", "x"])
            .current_dir(dir.path())
            .output()
            .expect("rudder")
            .into();
        assert_eq!(r.code, 0, "{store}: {r:#?}");
    }
    assert!(dir.path().join("postgress:x").is_file());
    assert!(dir.path().join("postgress:y").is_file());
    // An existing file whose name looks like a scheme is that file.
    let r: common::Run = rudder()
        .args(["--store", "postgress:x", "list", "--json"])
        .current_dir(dir.path())
        .output()
        .expect("rudder")
        .into();
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json().as_array().map(Vec::len), Some(1), "{r:#?}");
}

/// `rudder worker` takes `$RUDDER_STORE` (as docs/stores.md's "Many machines"
/// says), `--store` over it; without either, `./rudder-demo.json`.
#[test]
fn the_worker_works_the_store_the_user_gave() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("team.json");
    let started_on = |env: Option<&Path>, flag: Option<&Path>| -> String {
        let err_path = dir.path().join("stderr");
        let err = std::fs::File::create(&err_path).expect("stderr file");
        let mut cmd = rudder();
        cmd.arg("worker");
        if let Some(f) = flag {
            cmd.arg("--store").arg(f);
        }
        if let Some(e) = env {
            cmd.env("RUDDER_STORE", e);
        }
        let mut child = cmd
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("rudder worker");
        let line = wait_for(PATIENCE, || {
            let t = std::fs::read_to_string(&err_path).ok()?;
            t.lines()
                .find(|l| l.contains("started on the store"))
                .map(str::to_string)
        });
        let _ = child.kill();
        let _ = child.wait();
        line.expect("the worker says where it started")
    };
    let other = dir.path().join("other.json");
    let line = started_on(Some(&store), None);
    assert!(
        line.contains(&format!("store {} ", store.display())),
        "{line}"
    );
    let line = started_on(Some(&store), Some(&other));
    assert!(
        line.contains(&format!("store {} ", other.display())),
        "{line}"
    );
    let line = started_on(None, None);
    let default = dir.path().join("rudder-demo.json");
    assert!(
        line.contains(&format!("store {} ", default.display())),
        "{line}"
    );
}

/// `get` on a store that does not exist names it (exit 3, plain and
/// `--json`); `watch` without a terminal says it needs one (exit 2).
#[test]
fn get_on_a_missing_store_names_it_and_watch_needs_a_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope.json");
    let r = run(&missing, &["get", "abc"]);
    assert_eq!(r.code, 3, "{r:#?}");
    assert!(r.stderr.contains("unknown task: abc"), "{r:#?}");
    assert!(r.stderr.contains("no store at"), "{r:#?}");
    assert!(r.stderr.contains(&missing.display().to_string()), "{r:#?}");
    let r = run(&missing, &["get", "abc", "--json"]);
    assert_eq!(r.code, 3, "{r:#?}");
    let v = r.json();
    assert_eq!(v["error"], "unknown_task", "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("no store at"),
        "{v}"
    );
    assert!(!missing.exists(), "nothing is created");
    // An existing store still says only that the task is unknown.
    common::create(&missing, &["--title", "t"]);
    let r = run(&missing, &["get", "zzzz"]);
    assert_eq!(r.code, 3, "{r:#?}");
    assert!(!r.stderr.contains("no store at"), "{r:#?}");

    let r: common::Run = rudder()
        .arg("--store")
        .arg(&missing)
        .arg("watch")
        .stdin(Stdio::null())
        .output()
        .expect("rudder")
        .into();
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(r.stderr.contains("needs a terminal"), "{r:#?}");
}

/// `--json` before the subcommand works as after it; `input ID
/// FIELD=VALUE` gets a tip; an empty `--key` is named as such.
#[test]
fn json_before_the_subcommand_a_tip_for_set_and_an_empty_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("t.json");
    let id = common::create(
        &store,
        &["--title", "t", "--schema", r#"{"required":["service"]}"#],
    );
    let r: common::Run = rudder()
        .arg("--json")
        .arg("--store")
        .arg(&store)
        .arg("list")
        .output()
        .expect("rudder")
        .into();
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json().as_array().map(Vec::len), Some(1), "{r:#?}");
    let r: common::Run = rudder()
        .args(["--json", "--store"])
        .arg(&store)
        .args(["get", &id])
        .output()
        .expect("rudder")
        .into();
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()["task_id"], id.as_str(), "{r:#?}");

    let r = run(&store, &["input", &id, "service=x"]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(
        r.stderr.contains("did you mean `--set service=x`?"),
        "{r:#?}"
    );
    let r = run(&store, &["input", &id, "service=x", "--json"]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert_eq!(r.json()["error"], "usage", "{r:#?}");

    for json in [false, true] {
        let mut args = vec!["create", "--key", ""];
        if json {
            args.push("--json");
        }
        let r = run(&store, &args);
        assert_eq!(r.code, 2, "{r:#?}");
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(all.contains("an empty key is not a key"), "{all}");
        assert!(!all.contains("none was supplied"), "{all}");
    }
}
