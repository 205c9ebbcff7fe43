//! End to end: the real binary in a pseudo-terminal, read back through a
//! vt100 parser, while another process writes the store.

mod common;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rudder");
/// How long to wait for something to appear before giving up (generous: CI
/// machines are slow; this is not a speed assertion).
const PATIENCE: Duration = Duration::from_secs(30);

struct Tui {
    screen: Arc<Mutex<vt100::Parser>>,
    /// Everything the TUI wrote, as bytes.
    raw: Arc<Mutex<Vec<u8>>>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
}

impl Tui {
    fn start(store: &Path) -> Tui {
        Tui::start_with(store, &[])
    }

    /// [`Tui::start`] with these environment variables set.
    fn start_with(store: &Path, env: &[(&str, &str)]) -> Tui {
        let store = store.to_str().expect("a UTF-8 path");
        Tui::spawn(&["--store", store, "watch"], env, None)
    }

    /// `rudder ARGS` in a pseudo-terminal, in directory `cwd` if given.
    fn spawn(args: &[&str], env: &[(&str, &str)], cwd: Option<&Path>) -> Tui {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: 35,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("a pseudo-terminal");
        let mut cmd = CommandBuilder::new(BIN);
        cmd.args(args);
        if let Some(dir) = cwd {
            cmd.cwd(dir);
        }
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("NO_COLOR");
        for (name, value) in env {
            cmd.env(name, value);
        }
        let child = pty.slave.spawn_command(cmd).expect("rudder starts");
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().expect("a reader");
        let writer = Arc::new(Mutex::new(pty.master.take_writer().expect("a writer")));
        let screen = Arc::new(Mutex::new(vt100::Parser::new(
            std::num::NonZeroU16::new(35).expect("rows"),
            std::num::NonZeroU16::new(120).expect("cols"),
            0,
        )));
        let answers = Arc::clone(&writer);
        let parser = Arc::clone(&screen);
        let raw = Arc::new(Mutex::new(Vec::new()));
        let raw_out = Arc::clone(&raw);
        std::thread::spawn(move || {
            let _master = pty.master;
            let mut buf = [0u8; 65536];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        // crossterm may ask where the cursor is; nobody else
                        // would answer in a bare pty.
                        if buf[..n].windows(4).any(|w| w == b"\x1b[6n") {
                            let mut w = answers.lock().expect("lock");
                            let _ = w.write_all(b"\x1b[1;1R");
                            let _ = w.flush();
                        }
                        parser.lock().expect("lock").process(&buf[..n]);
                        raw_out.lock().expect("lock").extend_from_slice(&buf[..n]);
                    }
                }
            }
        });
        Tui {
            screen,
            raw,
            writer,
            child,
        }
    }

    fn contents(&self) -> String {
        self.screen.lock().expect("lock").screen().contents()
    }

    fn wait_for(&self, what: &str) {
        let start = Instant::now();
        while start.elapsed() < PATIENCE {
            if self.contents().contains(what) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("{what:?} never appeared; the screen:\n{}", self.contents());
    }

    fn wait_for_gone(&self, what: &str) {
        let start = Instant::now();
        while start.elapsed() < PATIENCE {
            if !self.contents().contains(what) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("{what:?} never went; the screen:\n{}", self.contents());
    }

    /// Wait for the TUI to exit; panics if it does not or fails.
    fn wait_exit(&mut self) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert!(status.success(), "rudder exited with {status:?}");
                return;
            }
            assert!(start.elapsed() < PATIENCE, "rudder did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Type `bytes`. The TUI takes keys in the order they come, so the
    /// next keys need no pause; what a key did is waited for on the screen.
    fn send(&mut self, bytes: &str) {
        let mut w = self.writer.lock().expect("lock");
        w.write_all(bytes.as_bytes()).expect("write keys");
        w.flush().expect("flush keys");
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

fn cli(store: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("the CLI runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn task_in_file(store: &Path, id: &str) -> Value {
    let text = std::fs::read_to_string(store).expect("the store");
    let all: Value = serde_json::from_str(&text).expect("JSON");
    all[id].clone()
}

#[test]
fn answer_and_cancel_through_the_tui() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tasks.json");
    // Who the person at the TUI is: recorded on what they do.
    let mut tui = Tui::start_with(&store, &[("RUDDER_ACTOR", "ana@e2e")]);
    tui.wait_for("waiting for tasks.json to appear");

    // Another process creates a task that waits for a service name.
    let created = cli(
        &store,
        &[
            "create",
            "--json",
            "--title",
            "INC-9 e2e latency",
            "--schema",
            r#"{"type":"object","required":["service"],"properties":{"service":{"type":"string"}}}"#,
        ],
    );
    let created: Value = serde_json::from_str(&created).expect("JSON from create");
    let id = created["task"]["task_id"]
        .as_str()
        .or_else(|| created["task_id"].as_str())
        .expect("an id")
        .to_string();
    tui.wait_for("INC-9 e2e latency");
    tui.wait_for("1 input_required");

    tui.send("i");
    tui.wait_for("input for INC-9 e2e latency");
    tui.send("checkout");
    tui.wait_for("checkout");
    tui.send("\x13"); // Ctrl-S
    // Said once the store took the input.
    tui.wait_for(&format!("input sent: {} is now working", &id[..8]));
    let t = task_in_file(&store, &id);
    assert_eq!(t["status"], "working");
    assert_eq!(t["input_value"], serde_json::json!({"service": "checkout"}));
    let answered = &t["history"][1];
    assert_eq!(answered["actor"], "ana@e2e");
    assert_eq!(answered["face"], "tui");
    assert_eq!(answered["fields"], serde_json::json!(["service"]));

    let created = cli(&store, &["create", "--json", "--title", "INC-10 cancel me"]);
    let created: Value = serde_json::from_str(&created).expect("JSON from create");
    let short = &created["task"]["task_id"].as_str().expect("an id")[..8];
    tui.wait_for("INC-10 cancel me");
    tui.send("/INC-10\r");
    tui.send("c");
    // The dialog names the task the filter selected.
    tui.wait_for(&format!("Cancel task {short} \"INC-10 cancel me\"?"));
    // r: a reason, then Enter.
    tui.send("r");
    tui.wait_for("reason:");
    tui.send("dup of INC-9\r");
    // Not merely "cancelled ", which the dialog itself says ("It becomes
    // cancelled and ..."): the status line the TUI shows once the store
    // took the cancel.
    tui.wait_for(&format!("cancelled {short}"));
    let list = cli(&store, &["list", "--json"]);
    let list: Value = serde_json::from_str(&list).expect("JSON from list");
    let found = list
        .as_array()
        .or_else(|| list["tasks"].as_array())
        .expect("a list")
        .iter()
        .find(|t| t["title"] == "INC-10 cancel me")
        .cloned()
        .expect("the task");
    assert_eq!(found["status"], "cancelled");
    let last = found["history"]
        .as_array()
        .and_then(|h| h.last())
        .expect("history");
    assert_eq!(last["actor"], "ana@e2e");
    assert_eq!(last["face"], "tui");
    assert_eq!(last["reason"], "dup of INC-9");

    tui.send("q");
    tui.wait_exit();
}

#[test]
fn sigterm_exits_cleanly_and_restores_the_terminal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tasks.json");
    cli(&store, &["create", "--title", "INC-11 \u{1b}]0;pwned\u{7}"]);
    let mut tui = Tui::start(&store);
    tui.wait_for("INC-11");
    let pid = tui.child.process_id().expect("a pid");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    tui.wait_exit();
    // Give the reader thread a moment to take the last bytes.
    let start = Instant::now();
    let left = |raw: &[u8]| raw.windows(8).any(|w| w == b"\x1b[?1049l");
    while !left(&tui.raw.lock().expect("lock")) && start.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(20));
    }
    let raw = tui.raw.lock().expect("lock").clone();
    assert!(left(&raw), "the alternate screen was not left");
    assert!(
        !raw.windows(5).any(|w| w == b"pwned"),
        "a title escape from the store reached the terminal"
    );
}

/// What changes when a file is written: its bytes, inode and mtime.
fn fingerprint(path: &Path) -> (Vec<u8>, u64, i64, i64) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).expect("the store");
    (
        std::fs::read(path).expect("the store"),
        m.ino(),
        m.mtime(),
        m.mtime_nsec(),
    )
}

/// Whether process `pid` has `file` open.
fn has_open(pid: u32, file: &Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == file))
}

/// A write that waits for the store lock (another process holds it, for up
/// to `$RUDDER_LOCK_TIMEOUT`) must not keep the TUI from quitting: `q`
/// ends it at once, and the abandoned write never happens, so the store is
/// exactly as it was.
#[test]
fn quitting_while_a_write_waits_for_the_lock_is_immediate_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tasks.json");
    cli(&store, &["create", "--title", "INC-12 held"]);
    let lock_path = dir.path().join("tasks.json.lock");
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .expect("the lock file");
    lock.lock().expect("hold the store lock");
    let before = fingerprint(&store);

    let mut tui = Tui::start_with(&store, &[("RUDDER_LOCK_TIMEOUT", "10m")]);
    tui.wait_for("INC-12 held");
    tui.send("c");
    tui.wait_for("Cancel task");
    tui.send("y");
    tui.wait_for("cancelling");
    // The cancel is under way: its writer has opened the lock file and
    // waits for the lock the test holds.
    let pid = tui.child.process_id().expect("a pid");
    let lock_path = lock_path.canonicalize().expect("the lock path");
    let start = Instant::now();
    while !has_open(pid, &lock_path) {
        assert!(
            start.elapsed() < PATIENCE,
            "the cancel never reached the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    tui.send("q");
    tui.wait_exit();
    assert_eq!(fingerprint(&store), before, "the store was written");
    drop(lock);
    let task = cli(&store, &["list", "--json"]);
    let task: Value = serde_json::from_str(&task).expect("JSON from list");
    assert_eq!(task[0]["status"], "working");
    assert_eq!(fingerprint(&store), before, "the store was written");
}

/// A task in a file the seed's Python `TaskStore` wrote, whose schema names
/// its one field only under `required`: the form has a text field for it,
/// and typing `payments` and Ctrl-S answers it.
#[test]
fn a_seed_task_is_answered_by_typing_the_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tasks.json");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/seed_store.json"
        ),
        &store,
    )
    .expect("the seed fixture");
    let id = "34df0ab7-eac3-429b-902f-efa8ea132d2f";
    let mut tui = Tui::start(&store);
    tui.wait_for("1 input_required");
    tui.send("i");
    tui.wait_for("service * (text)");
    tui.send("payments");
    tui.wait_for("[ payments");
    tui.send("\x13"); // Ctrl-S
    tui.wait_for(&format!("input sent: {} is now working", &id[..8]));
    let t = task_in_file(&store, id);
    assert_eq!(t["status"], "working");
    assert_eq!(t["input_value"], serde_json::json!({"service": "payments"}));
    // What rudder does not know is kept.
    assert_eq!(t["owner"]["team"], "支付平台");
    tui.send("q");
    tui.wait_exit();
}

/// A TUI (with `env`) over a new store with one task, alpha-on-postgres,
/// on a PostgreSQL cluster of its own (the test stops its server), once it
/// shows the task, live; `None` when no PostgreSQL can be run here.
fn tui_on_a_cluster_of_its_own(
    env: &[(&str, &str)],
) -> Option<(common::pg::Cluster, std::path::PathBuf, Tui)> {
    if !common::pg::available() {
        return None;
    }
    let cluster = common::pg::Cluster::start().expect("a test cluster");
    let db = cluster.create_database();
    let url = std::path::PathBuf::from(cluster.url(&db));
    cli(&url, &["create", "--title", "alpha-on-postgres"]);
    let tui = Tui::start_with(&url, env);
    tui.wait_for("alpha-on-postgres");
    tui.wait_for("live");
    Some((cluster, url, tui))
}

#[test]
fn over_postgres_another_process_shows_and_an_outage_is_survived() {
    // A write waits for a restarting server up to the lock timeout: a short
    // one, so that the refused cancel below is refused soon.
    let Some((cluster, url, mut tui)) =
        tui_on_a_cluster_of_its_own(&[("RUDDER_LOCK_TIMEOUT", "2s")])
    else {
        return;
    };
    // Another process's change appears (LISTEN wakes the feed).
    cli(&url, &["create", "--title", "beta-from-elsewhere"]);
    tui.wait_for("beta-from-elsewhere");

    // The server goes away: said so, with the reason, last rows kept.
    cluster.stop_immediate();
    tui.wait_for("store unreachable");
    tui.wait_for("✖ unreachable");
    let screen = tui.contents();
    assert!(screen.contains("alpha-on-postgres"), "{screen}");
    assert!(screen.contains("beta-from-elsewhere"), "{screen}");
    // A write while it is down is refused with the reason, not queued.
    tui.send("c");
    tui.wait_for("Cancel task");
    tui.send("y");
    tui.wait_for("cancel failed");

    // It comes back, with a change made meanwhile: shown without a key.
    cluster.start_server().expect("restart the server");
    cli(&url, &["create", "--title", "gamma-after-restart"]);
    tui.wait_for("gamma-after-restart");
    tui.wait_for("live");
    assert!(!tui.contents().contains("store unreachable"));
    // The refused cancel was not kept to be sent later.
    let cancelled = cli(&url, &["list", "--status", "cancelled", "--json"]);
    assert_eq!(cancelled.trim(), "[]", "{cancelled}");
    tui.send("q");
    tui.wait_exit();
}

/// Issue 31: the TUI never blocks on the store. A PostgreSQL server that
/// stops answering (SIGSTOP: its connections stay open and nothing
/// answers, as a host that hangs) leaves the screen live: the keys work,
/// the header says the TUI waits for the store, the rows come back when
/// the server does, and `q` quits at once while it hangs.
#[test]
fn over_postgres_a_server_that_stops_answering_leaves_the_keys_working() {
    let Some((cluster, url, mut tui)) = tui_on_a_cluster_of_its_own(&[]) else {
        return;
    };
    {
        let _frozen = cluster.freeze();
        // The once-a-second count of stalled tasks now waits on the
        // server (as any read would): said, with the last rows kept.
        tui.wait_for("waiting for the store");
        assert!(tui.contents().contains("alpha-on-postgres"));
        // The keys work meanwhile: the help opens and closes.
        tui.send("?");
        tui.wait_for(" keys ");
        tui.send("\x1b");
        tui.wait_for_gone(" keys ");
    }
    // The server answers again: a change made since is shown, live.
    cli(&url, &["create", "--title", "beta-after-the-hang"]);
    tui.wait_for("beta-after-the-hang");
    tui.wait_for("live");
    assert!(!tui.contents().contains("waiting for the store"));
    // Quitting does not wait for a read that hangs.
    let _frozen = cluster.freeze();
    tui.wait_for("waiting for the store");
    tui.send("q");
    tui.wait_exit();
}

/// `rudder demo` over PostgreSQL in a pseudo-terminal: it seeds its
/// incidents, its worker (a child process on the same URL) works them, a
/// change by another process appears, and `q` ends it all.
#[test]
fn the_demo_over_postgres_runs_its_worker_and_shows_another_process() {
    if !common::pg::available() {
        return;
    }
    let url = common::pg::store_url();
    // The worker's log goes to the working directory for a database URL.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut tui = Tui::spawn(
        &["--store", &url, "demo", "--speed", "20"],
        &[],
        Some(dir.path()),
    );
    tui.wait_for("INC-1042");
    tui.wait_for("running");
    // The worker got on with it: a step of a diagnosis is shown.
    tui.wait_for("step ");
    let url = std::path::PathBuf::from(url);
    cli(&url, &["create", "--title", "zeta-from-elsewhere"]);
    tui.wait_for("zeta-from-elsewhere");
    tui.send("q");
    tui.wait_exit();
    assert!(dir.path().join("rudder-demo.worker.log").is_file());
    // Every incident is in the database, the worker's work with them.
    let listed: Value = serde_json::from_str(&cli(&url, &["list", "--json"])).expect("JSON");
    let tasks = listed.as_array().expect("an array");
    assert_eq!(tasks.len(), 7, "{listed}");
    assert!(
        tasks.iter().any(|t| t["revision"].as_u64() > Some(1)),
        "{listed}"
    );
}

/// The TUI over a large SQLite store holds a window of rows: it shows the
/// store's counts, reaches the bottom of the table with `G`, shows what
/// another process changes, and follows a task across the table.
#[test]
fn a_large_sqlite_store_is_paged() {
    use rudder::store::Backend;
    use rudder::task::{Status, Task};
    const N: usize = 20_000;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tasks.db");
    let base = chrono::Utc::now() - chrono::TimeDelta::days(30);
    let started = Instant::now();
    rudder::Store::connect(&store)
        .expect("a store URL")
        .backend()
        .transaction(&mut |txn| {
            for i in 0..N {
                let mut t = Task::new(format!("{i:08x}-bulk"), Status::Working);
                t.title = Some(format!("bulk task {i:05}"));
                t.created_at = Some(base + chrono::TimeDelta::seconds(i as i64));
                t.updated_at = t.created_at;
                t.revision = 1;
                txn.insert(t)?;
            }
            Ok(true)
        })
        .expect("build the store");
    eprintln!("built {N} tasks in {:.1?}", started.elapsed());
    let mut tui = Tui::start(&store);
    // Newest first: the last one created is on top.
    tui.wait_for("bulk task 19999");
    tui.wait_for(&format!("{N} working"));
    tui.send("G");
    tui.wait_for("bulk task 00000");
    // Another process asks the first task for input: it moves to the top
    // (waiting first), the selection follows it, the counts change.
    let id = format!("{:08x}-bulk", 0);
    cli(
        &store,
        &[
            "request-input",
            &id,
            "--schema",
            r#"{"type":"object"}"#,
            "--message",
            "which region?",
        ],
    );
    tui.wait_for("1 input_required");
    tui.wait_for("which region?");
    tui.wait_for(&format!("{} working", N - 1));
    // `g` goes to the top, which is that task now; `j` moves on to the
    // newest working one.
    tui.send("gj");
    tui.wait_for("bulk task 19999");
    tui.send("q");
    tui.wait_exit();
}

/// Mark three of four tasks (Space on two, then `*` on a filter that shows
/// one more), cancel them with one y/n, and find exactly those three
/// cancelled in the store file.
#[test]
fn three_of_four_tasks_are_marked_and_cancelled_with_one_confirmation() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tasks.json");
    let mut ids = Vec::new();
    for title in [
        "BULK-1 first",
        "BULK-2 second",
        "KEEP-3 third",
        "BULK-4 fourth",
    ] {
        let created = cli(&store, &["create", "--json", "--title", title]);
        let created: Value = serde_json::from_str(&created).expect("JSON from create");
        ids.push(
            created["task"]["task_id"]
                .as_str()
                .expect("an id")
                .to_string(),
        );
    }
    // No config of the user's (a temp dir without one).
    let config = dir.path().join("config");
    let mut tui = Tui::start_with(
        &store,
        &[("XDG_CONFIG_HOME", config.to_str().expect("UTF-8"))],
    );
    tui.wait_for("BULK-4 fourth");
    // Filter to BULK-1 and mark it with Space; the same for BULK-4; then
    // `*` marks what a filter shows: BULK-2.
    tui.send("/BULK-1\r ");
    tui.wait_for("1 marked");
    tui.send("/\x15BULK-4\r ");
    tui.wait_for("2 marked");
    tui.send("/\x15second\r*");
    tui.wait_for("3 marked");
    tui.send("\x1b");
    tui.wait_for("filters cleared");
    tui.send("c");
    tui.wait_for("Cancel these 3 marked task(s)?");
    tui.send("y");
    tui.wait_for("cancel of 3 task(s): 3 cancelled, 0 unchanged, 0 refused");
    for (i, id) in ids.iter().enumerate() {
        let wanted = if i == 2 { "working" } else { "cancelled" };
        assert_eq!(task_in_file(&store, id)["status"], wanted, "task {i}");
    }
    tui.send("x");
    tui.send("q");
    tui.wait_exit();
}

/// A broken config file: the TUI starts with the default keys and says
/// what is wrong, with the file and line.
#[test]
fn a_broken_config_file_is_shown_and_the_tui_starts_anyway() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("tasks.json");
    cli(&store, &["create", "--title", "INC-13 config"]);
    let config = dir.path().join("config");
    std::fs::create_dir_all(config.join("rudder")).expect("config dir");
    std::fs::write(
        config.join("rudder").join("config.toml"),
        "[keys]\nquit = \"x\"\nmark = \"j\"\n",
    )
    .expect("config file");
    let mut tui = Tui::start_with(
        &store,
        &[("XDG_CONFIG_HOME", config.to_str().expect("UTF-8"))],
    );
    tui.wait_for("INC-13 config");
    tui.wait_for("line 3, column 1: [keys] mark: j already does \"move down\"");
    // The rebinding that was fine is taken: x quits, q does not.
    tui.send("q");
    tui.send("?");
    tui.wait_for("j/k scroll it");
    tui.send("?");
    tui.send("x");
    tui.wait_exit();
}

#[test]
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn a_fifo_at_the_sqlite_path_is_shown_as_an_error_and_q_quits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("t.db");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("cstr");
    // SAFETY: a valid C string; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let store = PathBuf::from(format!("sqlite:{}", fifo.display()));
    let mut tui = Tui::start(&store);
    // Not stuck at "starting": the refusal is on screen, and q quits.
    tui.wait_for("cannot open the databa");
    tui.send("q");
    tui.wait_exit();
}

/// An MCP client of the 2026-07-28 protocol with the Tasks extension, over
/// Streamable HTTP (rmcp's own client), driven from a synchronous test.
struct McpClient {
    // Dropped before the runtime it runs on.
    client: rmcp::service::RunningService<rmcp::service::RoleClient, rmcp::model::ClientConfig>,
    runtime: tokio::runtime::Runtime,
}

impl McpClient {
    fn connect(url: &str) -> McpClient {
        use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
        use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let config = ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("e2e-client", "1.0"),
        );
        let client = runtime
            .block_on(async {
                tls();
                let transport =
                    rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_string());
                config
                    .serve_with_lifecycle(
                        transport,
                        ClientLifecycleMode::Discover {
                            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                        },
                    )
                    .await
            })
            .expect("the client connects");
        McpClient { runtime, client }
    }

    /// `tools/call diagnose {incident}`: the task's id.
    fn diagnose(&self, incident: &str) -> String {
        use rmcp::model::{CallToolRequestParams, CallToolResponse};
        let Value::Object(args) = serde_json::json!({ "incident": incident }) else {
            unreachable!()
        };
        let call = CallToolRequestParams::new("diagnose").with_arguments(args);
        match self.runtime.block_on(self.client.call_tool_once(call)) {
            Ok(CallToolResponse::Task(t)) => t.task.task_id,
            other => panic!("expected a task, got {other:?}"),
        }
    }

    /// `tasks/get`, as JSON.
    fn get(&self, id: &str) -> Value {
        let got = self
            .runtime
            .block_on(
                self.client
                    .get_task(rmcp::model::GetTaskParams::new(id.to_string())),
            )
            .expect("tasks/get");
        serde_json::to_value(&got.task).expect("JSON")
    }

    /// Poll `tasks/get` (as a client does) until the task is in `status`.
    fn wait_status(&self, id: &str, status: &str) -> Value {
        let start = Instant::now();
        loop {
            let task = self.get(id);
            if task["status"] == status {
                return task;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "task {id} never became {status}: {task}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn answer(&self, id: &str, key: &str, content: Value) {
        let responses = [(
            key.to_string(),
            serde_json::json!({"action": "accept", "content": content}),
        )]
        .into_iter()
        .collect();
        self.runtime
            .block_on(self.client.update_task(rmcp::model::UpdateTaskParams::new(
                id.to_string(),
                responses,
            )))
            .expect("tasks/update acks");
    }
}

impl Tui {
    /// Wait until one line of the screen holds every one of `parts`.
    fn wait_for_line(&self, parts: &[&str]) {
        let start = Instant::now();
        while start.elapsed() < PATIENCE {
            if self
                .contents()
                .lines()
                .any(|l| parts.iter().all(|p| l.contains(p)))
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "no line with {parts:?} appeared; the screen:\n{}",
            self.contents()
        );
    }
}

/// `rudder demo --mcp`: an MCP client starts a diagnosis of INC-1043 while
/// the TUI shows the same task. It asks for the service; the client answers
/// over MCP (`tasks/update`) and the TUI shows it move on and complete with
/// the cited conclusion. Then the other way round: a second diagnosis is
/// answered in the TUI, and the client's `tasks/get` sees it move on.
#[test]
fn the_demo_over_mcp_answered_by_the_client_and_in_the_tui() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("demo.json");
    let store_arg = store.to_str().expect("UTF-8");
    let mut tui = Tui::spawn(
        &[
            "--store",
            store_arg,
            "demo",
            "--speed",
            "20",
            "--mcp",
            "127.0.0.1:0",
        ],
        &[],
        None,
    );
    tui.wait_for("INC-1042");
    // Port 0: the face says where it listens in its log.
    let log = dir.path().join("demo.json.mcp.log");
    let start = Instant::now();
    let url = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(url) = text.lines().find_map(|l| l.split("listening on ").nth(1)) {
            break url.trim().to_string();
        }
        assert!(
            start.elapsed() < PATIENCE,
            "the MCP face never said where it listens"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mcp = McpClient::connect(&url);

    // Answered by the MCP client.
    let id = mcp.diagnose("INC-1043");
    let short = &id[..8];
    let waiting = mcp.wait_status(&id, "input_required");
    tui.wait_for_line(&[short, "input_required"]);
    let request = &waiting["inputRequests"]["input-1"];
    assert_eq!(request["method"], "elicitation/create", "{waiting}");
    let schema = &request["params"]["requestedSchema"];
    assert!(
        schema["properties"]["service"]["enum"]
            .as_array()
            .is_some_and(|e| e.contains(&Value::from("payments"))),
        "{waiting}"
    );
    assert!(
        waiting["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("INC-1043")),
        "{waiting}"
    );
    mcp.answer(&id, "input-1", serde_json::json!({"service": "payments"}));
    tui.wait_for_line(&[short, "completed"]);
    let done = mcp.wait_status(&id, "completed");
    let result = &done["result"]["structuredContent"];
    assert_eq!(result["incident"], "INC-1043", "{done}");
    assert_eq!(result["service"], "payments");
    assert_eq!(result["citations"][2]["id"], "deploy-8820", "{done}");

    // Answered in the TUI.
    let id = mcp.diagnose("INC-1043");
    let short = &id[..8];
    mcp.wait_status(&id, "input_required");
    tui.wait_for_line(&[short, "input_required"]);
    tui.send(&format!("/{short}\r"));
    tui.send("i");
    tui.wait_for("service * (choice)");
    // The choices in order: auth, checkout, inventory, notifications, payments.
    tui.send("\x1b[C\x1b[C\x1b[C\x1b[C\x1b[C");
    tui.wait_for("◀ payments ▶");
    tui.send("\x13"); // Ctrl-S
    tui.wait_for(&format!("input sent: {short} is now working"));
    let done = mcp.wait_status(&id, "completed");
    assert_eq!(
        done["result"]["structuredContent"]["service"], "payments",
        "{done}"
    );
    tui.send("q");
    tui.wait_exit();
}

/// Issue 34: a task that starts waiting while the TUI is open rings the
/// bell once per round by default; `notify = "desktop"` sends a desktop
/// notification (OSC 9 here, no VTE) naming the task instead; `off` is
/// silent.
#[test]
fn a_task_that_starts_waiting_rings_the_bell_once_per_round() {
    for (mode, expect) in [
        (None, "\x07"),
        (Some("desktop"), "\x1b]9;rudder: needs input: asks-"),
        (Some("off"), ""),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("tasks.json");
        cli(&store, &["create", "--title", "already-here"]);
        let config = dir.path().join("config");
        if let Some(mode) = mode {
            std::fs::create_dir_all(config.join("rudder")).unwrap();
            std::fs::write(
                config.join("rudder/config.toml"),
                format!("notify = \"{mode}\"\n"),
            )
            .unwrap();
        }
        let mut tui = Tui::spawn(
            &["--store", store.to_str().unwrap(), "watch"],
            &[
                ("XDG_CONFIG_HOME", config.to_str().unwrap()),
                ("VTE_VERSION", ""),
            ],
            None,
        );
        tui.wait_for("already-here");
        let bells = |tui: &Tui| {
            tui.raw
                .lock()
                .expect("lock")
                .iter()
                .filter(|b| **b == 0x07)
                .count()
        };
        assert_eq!(bells(&tui), 0, "{mode:?}: a bell before anything waited");
        let title = format!("asks-{}", mode.unwrap_or("bell"));
        let created = cli(
            &store,
            &[
                "create",
                "--json",
                "--title",
                &title,
                "--schema",
                r#"{"type":"object"}"#,
            ],
        );
        let id = serde_json::from_str::<Value>(&created).unwrap()["task"]["task_id"]
            .as_str()
            .unwrap()
            .to_string();
        tui.wait_for(&title);
        let raw = || String::from_utf8_lossy(&tui.raw.lock().expect("lock")).into_owned();
        if !expect.is_empty() {
            let start = Instant::now();
            while !raw().contains(expect) && start.elapsed() < PATIENCE {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(raw().contains(expect), "{mode:?}: {:?}", raw());
        }
        // A write while it waits is not a new round; the next frame is
        // drawn after it, so the count below is final for it.
        cli(&store, &["cancel", &id]);
        tui.wait_for_line(&[&title, "cancelled"]);
        let n = bells(&tui);
        assert_eq!(n, usize::from(!expect.is_empty()), "{mode:?}: {:?}", raw());
        tui.send("q");
        tui.wait_exit();
    }
}

/// Issue 30, item 7: a SQLite store this user cannot write (a read-only
/// mount: its idle store has no `-wal` or `-shm`, which the reader may not
/// create) is shown, said to be read only (without `--read-only`), and
/// follows another process's writes.
#[test]
fn a_sqlite_store_without_write_access_is_shown_read_only_and_live() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    std::fs::create_dir(&src).expect("mkdir");
    let db = src.join("t.db");
    let created: Value = serde_json::from_str(&cli(
        &db,
        &["create", "--json", "--title", "read-only incident"],
    ))
    .expect("JSON");
    let id = created["task"]["task_id"]
        .as_str()
        .expect("an id")
        .to_string();
    let view = match common::ReadOnlyView::of(&src, &dir.path().join("view")) {
        Ok(v) => v,
        Err(why) => {
            eprintln!(
                "SKIPPED a_sqlite_store_without_write_access...: cannot set up a read-only view: {why}"
            );
            return;
        }
    };
    let mut tui = Tui::start(&view.path().join("t.db"));
    tui.wait_for("read-only incident");
    tui.wait_for("[read-only]");
    cli(
        &db,
        &["heartbeat", &id, "--message", "seen through the mount"],
    );
    tui.wait_for("seen through the mount");
    // A write is refused at once, saying why.
    tui.send("c");
    tui.wait_for("cannot be written by this user");
    tui.send("q");
    tui.wait_exit();
    drop(view);
}

/// rudder-notify's reqwest has rustls without a built-in provider, and
/// Cargo unifies that feature into this reqwest too: the process's default
/// provider is ring, as rudder's own.
fn tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// `rudder demo --gateway`: the diagnosis is an MCP server behind the
/// demo's gateway workers. INC-1043's question waits in the store while
/// K kills the server; the answer is given with the server down; W starts
/// it again, the gateway calls it again, and the diagnosis completes.
#[test]
fn the_demo_through_the_gateway_survives_its_server_killed_while_a_question_waits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("demo.db");
    let path = store.to_str().expect("a UTF-8 path");
    let mut tui = Tui::spawn(
        &["--store", path, "demo", "--gateway", "--speed", "50"],
        &[],
        Some(dir.path()),
    );
    tui.wait_for("INC-1043");
    let task = |status: &str| -> Value {
        let start = Instant::now();
        loop {
            let listed: Value =
                serde_json::from_str(&cli(&store, &["list", "--json"])).expect("JSON");
            let found = listed
                .as_array()
                .expect("an array")
                .iter()
                .find(|t| {
                    t["title"]
                        .as_str()
                        .is_some_and(|s| s.starts_with("INC-1043"))
                })
                .cloned()
                .expect("INC-1043");
            if found["status"] == status {
                return found;
            }
            assert!(start.elapsed() < PATIENCE, "never {status}: {found}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let asked = task("input_required");
    assert_eq!(asked["kind"], "diagnose", "{asked}");
    let id = asked["task_id"].as_str().expect("an id").to_string();
    // The header names what K and W control: the diagnosis server.
    tui.wait_for("upstream: pid");
    tui.send("K");
    tui.wait_for("killed");
    cli(&store, &["input", &id, "--set", "service=payments"]);
    tui.send("W");
    task("completed");
    let done: Value = serde_json::from_str(&cli(&store, &["get", &id, "--json"])).expect("JSON");
    assert!(
        done["result"]["structuredContent"]["root_cause"].is_string(),
        "{done}"
    );
    let log = cli(&store, &["log", &id]);
    assert!(log.contains("was lost"), "{log}");
    assert!(
        log.contains("gateway:diagnosis") || log.contains("demo-gateway:diagnosis"),
        "{log}"
    );
    tui.send("q");
    tui.wait_exit();
}
