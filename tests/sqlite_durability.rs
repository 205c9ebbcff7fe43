//! SQLite stores left whole and fast: the WAL after bulk work and when idle,
//! writer exclusion when `-shm` is deleted, a FIFO at the path, the bound on
//! `$RUDDER_LOCK_TIMEOUT` (issue 18, sections 1 and 5).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Run, rudder, run};

fn url(path: &Path) -> PathBuf {
    PathBuf::from(format!("sqlite:{}", path.display()))
}

fn wal(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", path.display()))
}

fn list_ids(store: &Path) -> BTreeSet<String> {
    let r = run(store, &["list", "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    r.json()
        .as_array()
        .expect("an array")
        .iter()
        .map(|t| t["task_id"].as_str().expect("id").to_string())
        .collect()
}

fn wait_bounded(mut child: Child, what: &str) -> Run {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output").into();
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("rudder {what} still runs after a minute: it hangs");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn an_idle_store_is_whole_in_its_db_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("t.db");
    let store = url(&db);
    let ids: BTreeSet<String> = (0..10)
        .map(|i| common::create(&store, &["--title", &format!("task {i}")]))
        .collect();
    // Nothing runs: deleting the WAL (an operator's mistake) loses nothing,
    // because the last connection to close checkpointed it.
    match std::fs::remove_file(wal(&db)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("rm -wal: {e}"),
    }
    assert_eq!(list_ids(&store), ids);
}

/// The bytes a process read and wrote through system calls
/// (`/proc/PID/io` `rchar` + `wchar`), read when it has exited and before
/// it is reaped.
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn io_of(mut cmd: std::process::Command) -> (Run, u64) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    // SAFETY: waitid on our own child with a zeroed siginfo to fill;
    // WNOWAIT leaves it to be reaped by `wait_with_output`.
    let rc = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    assert_eq!(rc, 0, "waitid");
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("/proc/PID/io");
    let field = |name: &str| -> u64 {
        io.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in {io}"))
    };
    let bytes = field("rchar:") + field("wchar:");
    (child.wait_with_output().expect("output").into(), bytes)
}

/// A JSON store of `n` tasks in the seed's layout.
fn json_store(path: &Path, n: usize) -> Vec<String> {
    let mut map = serde_json::Map::new();
    let mut ids = Vec::new();
    for i in 0..n {
        let id = format!("{:08x}-0000-4000-8000-{:012x}", i, i);
        map.insert(
            id.clone(),
            serde_json::json!({
                "task_id": id,
                "status": "working",
                "title": format!("INC-{i} a task to copy, with a title of some length"),
                "status_message": "diagnosing the checkout latency, step 3 of 7",
                "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-01T00:00:00Z",
                "revision": 1,
            }),
        );
        ids.push(id);
    }
    std::fs::write(path, serde_json::to_vec(&map).expect("json")).expect("write");
    ids
}

fn heartbeat_io(store: &Path, id: &str) -> u64 {
    let mut cmd = rudder();
    cmd.arg("--store").arg(store).args(["heartbeat", id]);
    let (r, bytes) = io_of(cmd);
    assert_eq!(r.code, 0, "{r:#?}");
    bytes
}

#[test]
fn a_heartbeat_after_a_large_copy_does_no_more_io_than_on_a_small_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy_into = |name: &str, n: usize| {
        let json = dir.path().join(format!("{name}.json"));
        let ids = json_store(&json, n);
        let db = dir.path().join(format!("{name}.db"));
        let r = run(
            &json,
            &["copy", json.to_str().unwrap(), url(&db).to_str().unwrap()],
        );
        assert_eq!(r.code, 0, "{r:#?}");
        (db, ids)
    };
    let (small, small_ids) = copy_into("small", 10);
    // Two write batches of `copy`: tens of MB went through the WAL.
    let (large, large_ids) = copy_into("large", 20_000);
    let wal_len = std::fs::metadata(wal(&large)).map_or(0, |m| m.len());
    assert_eq!(wal_len, 0, "copy left a {wal_len}-byte WAL behind");
    let small_io = heartbeat_io(&url(&small), &small_ids[3]);
    let large_io = heartbeat_io(&url(&large), &large_ids[12_345]);
    // A deeper B-tree reads a few more pages; a WAL read back would be
    // megabytes.
    assert!(
        large_io <= small_io + 256 * 1024,
        "a heartbeat after the copy moved {large_io} bytes, against {small_io} on a small store"
    );
    // And the next process pays no more than the first.
    let again = heartbeat_io(&url(&large), &large_ids[54]);
    assert!(again <= small_io + 256 * 1024, "{again} against {small_io}");
}

#[test]
fn acknowledged_creates_survive_deleting_shm_while_writers_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("t.db");
    let store = url(&db);
    common::create(&store, &["--title", "first"]);
    let shm = PathBuf::from(format!("{}-shm", db.display()));
    let stop = Arc::new(AtomicBool::new(false));
    let deleter = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut deleted = 0;
            while !stop.load(Ordering::Relaxed) {
                if std::fs::remove_file(&shm).is_ok() {
                    deleted += 1;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            deleted
        })
    };
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0..30 {
                    let r = run(
                        &store,
                        &["create", "--json", "--title", &format!("w{w} #{i}")],
                    );
                    if r.code == 0 {
                        acked.push(r.json()["task"]["task_id"].as_str().unwrap().to_string());
                    }
                }
                acked
            })
        })
        .collect();
    let acked: Vec<String> = writers
        .into_iter()
        .flat_map(|w| w.join().expect("writer"))
        .collect();
    stop.store(true, Ordering::Relaxed);
    let deleted = deleter.join().expect("deleter");
    assert!(deleted > 0, "-shm was never deleted");
    assert!(
        acked.len() >= 100,
        "only {} of 120 creates succeeded",
        acked.len()
    );
    let stored = list_ids(&store);
    let missing: Vec<_> = acked.iter().filter(|id| !stored.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged creates are missing ({deleted} deletions of -shm)",
        missing.len(),
        acked.len()
    );
}

#[test]
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn a_fifo_at_the_database_path_is_refused_without_hanging() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("t.db");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("cstr");
    // SAFETY: a valid C string; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&fifo, &link).expect("symlink");
    for path in [&fifo, &link] {
        for args in [
            &["list"][..],
            &["create"][..],
            &["wait", "abc", "--timeout", "3s"][..],
        ] {
            let child = rudder()
                .arg("--store")
                .arg(url(path))
                .args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn");
            let r = wait_bounded(child, &format!("{args:?}"));
            assert_eq!(r.code, 6, "{args:?}: {r:#?}");
            assert!(r.stderr.contains("FIFO"), "{args:?}: {}", r.stderr);
        }
    }
}

#[test]
fn a_lock_timeout_past_a_day_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = url(&dir.path().join("t.db"));
    // PostgreSQL reads the same variable through the same bound (it failed
    // every connection with "Invalid argument"): refused before connecting.
    let pg = PathBuf::from("postgres://rudder@127.0.0.1:1/rudder");
    for (store, args) in [
        (&store, &["list"][..]),
        (&store, &["create"][..]),
        (&pg, &["list"][..]),
    ] {
        let r: Run = rudder()
            .arg("--store")
            .arg(store)
            .args(args)
            .env("RUDDER_LOCK_TIMEOUT", "25d")
            .output()
            .expect("run")
            .into();
        assert_eq!(r.code, 2, "{r:#?}");
        assert!(
            r.stderr.contains("RUDDER_LOCK_TIMEOUT") && r.stderr.contains("24h"),
            "{}",
            r.stderr
        );
    }
    // The longest is taken as it is (SQLite's busy timeout panicked past
    // about 24.8 days).
    let r: Run = rudder()
        .arg("--store")
        .arg(&store)
        .arg("create")
        .env("RUDDER_LOCK_TIMEOUT", "24h")
        .output()
        .expect("run")
        .into();
    assert_eq!(r.code, 0, "{r:#?}");
}

/// The inode of the file at `path`, if any.
fn inode(path: &Path) -> Option<u64> {
    std::fs::metadata(path)
        .ok()
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
}

/// Whether this process holds a POSIX lock on the file `ino` (`/proc/locks`).
fn holds_a_lock_on(ino: u64) -> bool {
    let me = std::process::id().to_string();
    let locks = std::fs::read_to_string("/proc/locks").expect("/proc/locks");
    locks.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // `1: POSIX  ADVISORY  READ 9080 fe:00:10010896 0 EOF`
        f.get(4) == Some(&me.as_str())
            && f.get(5).and_then(|d| d.rsplit(':').next()) == Some(&ino.to_string())
    })
}

/// A second store object opening the database a process already has open
/// must not release the locks SQLite holds there: closing any descriptor
/// of a file drops every POSIX lock the process has on it. Were SQLite's
/// shared lock gone, another process's last connection would take the
/// exclusive lock as it closes and delete `-wal` and `-shm` under this
/// process (whose commits would then go to a deleted WAL).
#[test]
fn a_second_store_object_in_a_process_keeps_sqlites_locks() {
    use rudder::{NewTask, Store};
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("t.db");
    let store = url(&db);
    let first = Store::connect(&store).expect("a store URL");
    first.create(NewTask::default()).expect("create");
    let shm = PathBuf::from(format!("{}-shm", db.display()));
    let (wal_before, shm_before) = (inode(&wal(&db)), inode(&shm));
    assert!(wal_before.is_some() && shm_before.is_some(), "no WAL");
    let db_ino = inode(&db).expect("db");
    assert!(
        holds_a_lock_on(db_ino),
        "SQLite holds no lock on the database"
    );
    // A second object opens (and checks) the file and reads.
    let second = Store::connect(&store).expect("a store URL");
    assert_eq!(second.list(&[]).expect("list").len(), 1);
    assert!(
        holds_a_lock_on(db_ino),
        "opening a second store object released SQLite's lock on the database"
    );
    // What an operator's `sqlite3` does: read and close, the last
    // connection of its process (the system's SQLite, through Python).
    let child = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1])\n\
             c.execute('SELECT count(*) FROM tasks').fetchall()\n\
             c.close()",
        )
        .arg(&db)
        .output()
        .expect("python3 (the test command's Python tests need it too)");
    assert!(child.status.success(), "{child:?}");
    assert_eq!(
        (inode(&wal(&db)), inode(&shm)),
        (wal_before, shm_before),
        "another process's close deleted the WAL this process has open"
    );
    // And a commit made here is seen by the next process.
    let id = first
        .create(NewTask::default())
        .expect("create")
        .task
        .task_id;
    assert!(list_ids(&store).contains(id.as_str()));
}

/// Whether `pid` watches a directory (an inotify instance open): what
/// `rudder wait` makes once it read its task and found it not settled.
fn watching(pid: u32) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|to| to.to_string_lossy().contains("inotify"))
    })
}

/// Issue 30, item 8: a database replaced by `mv` while a `rudder wait`
/// has it open. SQLite would pair the old file's `-wal` and `-shm` with the
/// new file; the wait used to read that mix and miss the completion in the
/// new file, waiting until its timeout. It now stops at once, saying the
/// file was replaced and what to do (exit 6, a database error), whatever
/// the completion that follows did.
#[test]
fn a_wait_on_a_database_replaced_by_mv_stops_saying_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("t.db");
    let other = dir.path().join("other.db");
    let store = url(&db);
    let id = common::create(&store, &["--title", "replaced under its wait"]);
    // Another database holding the same task, made while nothing has the
    // store open.
    let r = run(
        &store,
        &[
            "copy",
            url(&db).to_str().unwrap(),
            url(&other).to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{r:#?}");
    let child = rudder()
        .arg("--store")
        .arg(&store)
        .args(["wait", &id, "--json", "--timeout", "60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rudder wait");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !watching(child.id()) {
        assert!(Instant::now() < deadline, "wait never started watching");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::fs::rename(&other, &db).expect("mv other.db t.db");
    // The completion in the new file (its outcome is SQLite's: a process
    // that opens the new file while the old one's WAL is still at the path
    // may read and write that WAL).
    let _ = run(&store, &["complete", &id, "--result", "\"done\""]);
    let started = Instant::now();
    let r = wait_bounded(child, "wait");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "wait ran on to its timeout"
    );
    assert_eq!(r.code, 6, "{r:#?}");
    let v = r.json();
    assert_eq!(v["error"], "database", "{v}");
    let message = v["message"].as_str().expect("a message");
    assert!(
        message.contains("was replaced") && message.contains("rudder copy"),
        "{message}"
    );
}
