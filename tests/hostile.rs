//! Hostile surroundings: symlinked stores, unwritable directories, a lock
//! held by a hung process, absurd files, and a hostile umask.
use std::fs::{self, File};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use rudder::store::{FileBackend, NewTask, Store, StoreError};

fn rudder(store: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rudder"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env("RUDDER_LOCK_TIMEOUT", "300ms")
        .output()
        .expect("run rudder")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_symlinked_store_is_written_beside_its_target_and_stays_a_link() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    fs::create_dir(&data).expect("mkdir");
    let link = dir.path().join("tasks.json");
    symlink("data/real.json", &link).expect("symlink");

    let out = rudder(&link, &["create", "--title", "through the link"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = rudder(&link, &["create", "--title", "second"]);
    assert!(out.status.success(), "{}", stderr(&out));

    assert!(
        fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink()
    );
    let real = fs::read_to_string(data.join("real.json")).expect("target written");
    assert!(real.contains("through the link") && real.contains("second"));
    assert!(
        data.join("real.json.lock").exists(),
        "the lock lives beside the target"
    );
    let beside_link: Vec<_> = fs::read_dir(dir.path())
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        beside_link.len(),
        2,
        "nothing written beside the link: {beside_link:?}"
    );
}

#[test]
fn a_store_under_a_file_is_a_clear_error_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let blocker = dir.path().join("not-a-dir");
    fs::write(&blocker, "x").expect("write");
    let out = rudder(&blocker.join("tasks.json"), &["create"]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("not-a-dir"), "{}", stderr(&out));
    assert_eq!(fs::read_to_string(&blocker).expect("read"), "x");
}

#[test]
fn an_unwritable_directory_is_reported_before_any_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let locked = dir.path().join("ro");
    fs::create_dir(&locked).expect("mkdir");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o500)).expect("chmod");
    // root ignores directory permissions; the simulated file system covers
    // EACCES at every call for it (crates/file/tests/crash_sim.rs).
    if File::create(locked.join("probe")).is_ok() {
        eprintln!("skipped: running as root, permissions are not enforced");
        return;
    }
    let out = rudder(&locked.join("tasks.json"), &["create"]);
    assert_eq!(out.status.code(), Some(6));
    let err = stderr(&out);
    assert!(
        err.contains("lock file") && err.contains("ermission denied"),
        "{err}"
    );
    assert_eq!(fs::read_dir(&locked).expect("ls").count(), 0);
}

#[test]
fn a_hung_lock_holder_gives_a_bounded_wait_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.json");
    assert!(rudder(&store, &["create"]).status.success());
    let before = fs::read(&store).expect("read");

    // A process that takes the lock and hangs.
    let mut hung = Command::new("flock")
        .arg("-o")
        .arg(dir.path().join("tasks.json.lock"))
        .args(["sleep", "30"])
        .spawn()
        .expect("flock is part of util-linux");
    // Wait until it really holds the lock.
    let backend = FileBackend::new(&store).with_lock_timeout(Duration::from_millis(50));
    let probe = rudder::store::StoreOf::with_backend(backend);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while probe.create(NewTask::default()).is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "flock never took the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let before_cli = fs::read(&store).expect("read");

    let out = rudder(&store, &["create", "--title", "blocked"]);
    let _ = hung.kill();
    let _ = hung.wait();
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("gave up after") && err.contains(&format!("pid {}", hung.id())),
        "the message names the holder: {err}"
    );
    assert_eq!(
        fs::read(&store).expect("read"),
        before_cli,
        "nothing written"
    );
    assert!(before_cli.len() >= before.len());

    // Once the holder is gone, writes go through again.
    assert!(
        rudder(&store, &["create", "--title", "after"])
            .status
            .success()
    );
}

#[test]
fn an_oversized_store_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.json");
    // Sparse: takes no disk space, but claims 600 MiB.
    File::create(&store)
        .and_then(|f| f.set_len(600 << 20))
        .expect("sparse file");
    for args in [&["list"][..], &["create"]] {
        let out = rudder(&store, args);
        assert_eq!(out.status.code(), Some(6));
        assert!(
            stderr(&out).contains("larger than the 512 MiB"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(fs::metadata(&store).expect("stat").len(), 600 << 20);
}

#[test]
fn absurd_nesting_is_an_error_not_a_stack_overflow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.json");
    let deep = format!("{{\"a\": {}", "[".repeat(200_000));
    fs::write(&store, &deep).expect("write");
    let out = rudder(&store, &["list"]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("line 1 column"), "{}", stderr(&out));
    let direct = Store::connect(&store).expect("a store URL").load();
    assert!(matches!(direct, Err(StoreError::Corrupt { .. })));
    assert_eq!(fs::read_to_string(&store).expect("read"), deep);
}

#[test]
fn new_files_are_private_whatever_the_umask() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("sub/dir/tasks.json");
    let out = Command::new("sh")
        .arg("-c")
        .arg("umask 000; exec \"$0\" --store \"$1\" create")
        .arg(env!("CARGO_BIN_EXE_rudder"))
        .arg(&store)
        .output()
        .expect("sh");
    assert!(out.status.success(), "{}", stderr(&out));
    let mode = |p: &Path| fs::metadata(p).expect("stat").mode() & 0o777;
    assert_eq!(mode(&store), 0o600);
    assert_eq!(mode(&dir.path().join("sub/dir/tasks.json.lock")), 0o600);
    assert_eq!(mode(&dir.path().join("sub/dir")), 0o700);

    // An existing store keeps its own permissions through rewrites.
    fs::set_permissions(&store, fs::Permissions::from_mode(0o640)).expect("chmod");
    let out = Command::new("sh")
        .arg("-c")
        .arg("umask 077; exec \"$0\" --store \"$1\" create")
        .arg(env!("CARGO_BIN_EXE_rudder"))
        .arg(&store)
        .output()
        .expect("sh");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mode(&store), 0o640);
}

#[test]
fn a_symlink_planted_at_the_lock_path_is_not_followed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("t.json");
    let victim = dir.path().join("victim.txt");
    fs::write(&victim, "precious").expect("write");
    symlink(&victim, dir.path().join("t.json.lock")).expect("symlink");
    let out = rudder(&store, &["create"]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("lock file"), "{}", stderr(&out));
    assert_eq!(fs::read_to_string(&victim).expect("read"), "precious");
    assert!(!store.exists());
}

#[test]
fn temp_files_left_by_killed_writers_are_removed_by_the_next_writer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.json");
    assert!(rudder(&store, &["create"]).status.success());
    // What a writer killed between creating its temp file and renaming it leaves.
    let stale = dir
        .path()
        .join(".tasks.json.rudder-tmp.4242.0123456789abcdef0123456789abcdef");
    fs::write(&stale, "{\"half\": ").expect("write");
    // Names a user might choose, close to a temp name but not one.
    let unrelated: Vec<_> = [
        "tasks.json.bak",
        "tasks.json.tmp.backup",
        "tasks.json.tmp.4242.0123456789abcdef",
        ".tasks.json.rudder-tmp.4242.0123456789abcdef0123456789abcdef.keep",
        ".tasks.json.rudder-tmp.notapid.0123456789abcdef0123456789abcdef",
        ".other.json.rudder-tmp.4242.0123456789abcdef0123456789abcdef",
    ]
    .iter()
    .map(|name| {
        let path = dir.path().join(name);
        fs::write(&path, "keep").expect("write");
        path
    })
    .collect();
    // A refused operation does not tidy up: it writes nothing at all.
    assert_eq!(rudder(&store, &["cancel", "nope"]).status.code(), Some(3));
    assert!(stale.exists());
    assert!(rudder(&store, &["create"]).status.success());
    assert!(!stale.exists(), "the stale temp file is gone");
    for path in &unrelated {
        assert!(path.exists(), "{} is left alone", path.display());
    }
}
