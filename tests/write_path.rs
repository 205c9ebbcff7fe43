//! The writing protocol against a hostile neighbourhood: a lock file deleted
//! while writers run, hard links and FIFOs where the store or its lock should
//! be, ownership kept through rewrites, another user's symlink in a shared
//! sticky directory, very long store names and an append-only directory.

mod common;

use rudder::store::Open as _;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, lchown, symlink};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Run, fingerprint, rudder, temp_files};
use rudder::store::fs::{Fs, RealFs};
use rudder::store::{NewTask, Store};

/// A uid and gid that are not the test's own (`nobody` on Debian).
const OTHER: u32 = 65534;

#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Run the binary on `store`, failing the test (instead of hanging it) if it
/// has not exited after a minute.
fn run_bounded(store: &Path, args: &[&str]) -> Run {
    let child = rudder()
        .arg("--store")
        .arg(store)
        .args(args)
        .env("RUDDER_LOCK_TIMEOUT", "2s")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rudder");
    wait_bounded(child, args)
}

fn wait_bounded(mut child: Child, what: &[&str]) -> Run {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output").into();
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("rudder {what:?} still runs after a minute: it hangs");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn deleting_the_lock_file_while_writers_run_loses_no_acknowledged_write() {
    const WRITERS: usize = 6;
    const EACH: usize = 25;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    let lock = dir.path().join("tasks.json.lock");
    let stop = Arc::new(AtomicBool::new(false));
    // A cleanup script that removes the lock file every 2 ms (the pause is
    // the script's pace, not synchronisation).
    let remover = {
        let (stop, lock) = (stop.clone(), lock.clone());
        std::thread::spawn(move || {
            let mut removed = 0usize;
            while !stop.load(Ordering::Relaxed) {
                if fs::remove_file(&lock).is_ok() {
                    removed += 1;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            removed
        })
    };
    // flock belongs to an open file description, so writers on threads of
    // one process exclude each other exactly as processes do.
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = Store::open(&path);
                (0..EACH)
                    .map(|i| {
                        let new = NewTask {
                            title: Some(format!("writer {w} task {i}")),
                            ..NewTask::default()
                        };
                        store.create(new).expect("create").task.task_id
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let acknowledged: Vec<String> = writers
        .into_iter()
        .flat_map(|w| w.join().expect("writer"))
        .collect();
    stop.store(true, Ordering::Relaxed);
    let removed = remover.join().expect("remover");
    let stored = Store::open(&path).load().expect("load");
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|id| !stored.contains_key(id.as_str()))
        .collect();
    eprintln!(
        "{} creates acknowledged, lock file removed {removed} times",
        acknowledged.len()
    );
    assert!(removed > 0, "the lock file was never removed: no test");
    assert_eq!(lost, Vec::<&String>::new(), "acknowledged creates lost");
    assert_eq!(stored.len(), WRITERS * EACH);
}

/// The real file system, but a rename waits until the test says go: a
/// writer frozen between its checks and its rename, as a busy machine may
/// leave it for any length of time.
struct PausingFs {
    at_rename: std::sync::mpsc::Sender<()>,
    go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Fs for PausingFs {
    fn read_identified(
        &self,
        path: &Path,
        limit: u64,
    ) -> std::io::Result<Option<rudder::store::fs::ReadFile>> {
        RealFs.read_identified(path, limit)
    }
    fn meta(&self, path: &Path) -> std::io::Result<Option<rudder::store::fs::FileMeta>> {
        RealFs.meta(path)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        RealFs.create_dir_all(dir)
    }
    fn create_new(
        &self,
        path: &Path,
        meta: &rudder::store::fs::FileMeta,
    ) -> std::io::Result<Box<dyn rudder::store::fs::FsFile>> {
        RealFs.create_new(path, meta)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        let _ = self.at_rename.send(());
        let _ = self.go.lock().expect("go").recv();
        RealFs.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        RealFs.sync_dir(dir)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        RealFs.remove_file(path)
    }
    fn list_dir(&self, dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
        RealFs.list_dir(dir)
    }
    fn lock(
        &self,
        path: &Path,
        timeout: Duration,
        store: &Path,
    ) -> Result<rudder::store::fs::LockGuard, rudder::store::fs::LockFailure> {
        RealFs.lock(path, timeout, store)
    }
}

#[test]
fn a_writer_frozen_before_its_rename_keeps_others_out_after_its_lock_file_is_deleted() {
    use rudder::store::{FileBackend, StoreError};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    Store::open(&path)
        .create(NewTask::default())
        .expect("create");
    let (at_rename, reached) = std::sync::mpsc::channel();
    let (go, wait) = std::sync::mpsc::channel();
    let fs = PausingFs {
        at_rename,
        go: std::sync::Mutex::new(wait),
    };
    let frozen = Store::with_backend(FileBackend::with_fs(&path, Arc::new(fs)));
    let writer = std::thread::spawn(move || {
        let new = NewTask {
            title: Some("frozen".into()),
            ..NewTask::default()
        };
        frozen
            .create(new)
            .expect("the frozen writer's create")
            .task
            .task_id
    });
    reached.recv().expect("the writer reaches its rename");
    // A cleanup script deletes the lock file; another writer comes along.
    fs::remove_file(dir.path().join("tasks.json.lock")).expect("rm lock");
    let other =
        Store::with_backend(FileBackend::new(&path).with_lock_timeout(Duration::from_millis(300)));
    match other.create(NewTask::default()) {
        Err(StoreError::LockTimeout { .. }) => {}
        other => panic!("a second writer got in while the first was mid-write: {other:?}"),
    }
    go.send(()).expect("go");
    let first = writer.join().expect("writer");
    let second = other.create(NewTask::default()).expect("create after").task;
    let stored = Store::open(&path).load().expect("load");
    assert!(stored.contains_key(&first), "the frozen writer's task");
    assert!(
        stored.contains_key(&second.task_id),
        "the second writer's task"
    );
    assert_eq!(stored.len(), 3);
}

#[test]
fn a_hard_link_at_the_lock_path_is_refused_and_its_file_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    let victim = dir.path().join("victim.txt");
    fs::write(&victim, "precious").expect("write");
    fs::hard_link(&victim, dir.path().join("tasks.json.lock")).expect("link");
    let r = run_bounded(&path, &["create", "--title", "x"]);
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(r.stderr.contains("hard links"), "{}", r.stderr);
    assert!(r.stderr.contains("tasks.json.lock"), "{}", r.stderr);
    assert_eq!(fs::read_to_string(&victim).expect("read"), "precious");
    assert!(!path.exists(), "nothing was written");
}

#[test]
fn a_rewrite_keeps_the_owner_group_and_mode_and_the_lock_takes_them() {
    if !is_root() {
        eprintln!("SKIPPED: needs root to give files to another user");
        return;
    }
    let top = tempfile::tempdir().expect("tempdir");
    fs::set_permissions(top.path(), fs::Permissions::from_mode(0o711)).expect("chmod");
    // A directory the group may write, as a shared store needs.
    let dir = top.path().join("shared");
    fs::create_dir(&dir).expect("mkdir");
    std::os::unix::fs::chown(&dir, None, Some(OTHER)).expect("chgrp");
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o770)).expect("chmod");
    let path = dir.join("tasks.json");
    assert_eq!(run_bounded(&path, &["create"]).code, 0);
    fs::remove_file(dir.join("tasks.json.lock")).expect("rm lock");
    // alice's store, shared with her group.
    std::os::unix::fs::chown(&path, Some(OTHER), Some(OTHER)).expect("chown");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o660)).expect("chmod");
    let r = run_bounded(&path, &["create", "--title", "by root"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let m = fs::metadata(&path).expect("stat");
    assert_eq!((m.uid(), m.gid()), (OTHER, OTHER), "owner and group kept");
    assert_eq!(m.mode() & 0o7777, 0o660, "mode kept");
    let lock = fs::metadata(dir.join("tasks.json.lock")).expect("stat lock");
    assert_eq!((lock.uid(), lock.gid()), (OTHER, OTHER), "the lock's owner");
    assert_eq!(
        lock.mode() & 0o7777,
        0o660,
        "the lock takes the store's mode"
    );
    // And the group member can take the lock and write.
    let as_member = Command::new("setpriv")
        .args([
            "--reuid=12345",
            &format!("--regid={OTHER}"),
            "--clear-groups",
            "--",
        ])
        .arg(env!("CARGO_BIN_EXE_rudder"))
        .arg("--store")
        .arg(&path)
        .args(["create", "--title", "by a group member"])
        .env_remove("RUDDER_STORE")
        .output();
    match as_member {
        Ok(out) if out.status.code() == Some(127) || out.status.code() == Some(126) => {
            eprintln!("SKIPPED the group member part: setpriv could not run rudder")
        }
        Ok(out) => {
            let r: Run = out.into();
            assert_eq!(r.code, 0, "a group member writes the shared store: {r:#?}");
            assert_eq!(
                Store::open(&path).load().expect("load").len(),
                3,
                "all three creates stored"
            );
        }
        Err(e) => eprintln!("SKIPPED the group member part: no setpriv ({e})"),
    }
}

#[test]
fn another_users_symlink_in_a_sticky_shared_directory_is_not_followed() {
    if !is_root() {
        eprintln!("SKIPPED: needs root to plant another user's symlink");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let shared = dir.path().join("shared");
    fs::create_dir(&shared).expect("mkdir");
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).expect("chmod");
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).expect("mkdir");
    let target = elsewhere.join("planted.json");
    let link = shared.join("tasks.json");
    symlink(&target, &link).expect("symlink");
    lchown(&link, Some(OTHER), Some(OTHER)).expect("lchown");
    for args in [&["create"][..], &["list"][..]] {
        let r = run_bounded(&link, args);
        assert_eq!(r.code, 6, "{args:?}: {r:#?}");
        assert!(r.stderr.contains("symlink"), "{}", r.stderr);
        assert!(r.stderr.contains("sticky"), "{}", r.stderr);
    }
    assert!(
        !target.exists(),
        "nothing was created where the link points"
    );
    assert!(fs::read_dir(&elsewhere).expect("ls").next().is_none());
    // One's own link there is followed as before.
    fs::remove_file(&link).expect("rm");
    symlink(&target, &link).expect("symlink");
    assert_eq!(run_bounded(&link, &["create"]).code, 0);
    assert!(target.exists());
}

#[test]
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn a_fifo_or_device_at_the_store_path_is_refused_without_hanging() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("cstr");
    // SAFETY: a valid C string; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    for args in [
        &["list"][..],
        &["get", "abc"][..],
        &["create"][..],
        &["cancel", "abc"][..],
        &["wait", "abc", "--timeout", "30s"][..],
    ] {
        let r = run_bounded(&path, args);
        assert_eq!(r.code, 6, "{args:?}: {r:#?}");
        assert!(r.stderr.contains("FIFO"), "{args:?}: {}", r.stderr);
    }
    fs::remove_file(&path).expect("rm");
    symlink("/dev/zero", &path).expect("symlink");
    let r = run_bounded(&path, &["list"]);
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(r.stderr.contains("character device"), "{}", r.stderr);
}

#[test]
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn a_fifo_at_the_lock_path_is_refused_without_hanging() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    let lock = dir.path().join("tasks.json.lock");
    let c = std::ffi::CString::new(lock.as_os_str().as_encoded_bytes()).expect("cstr");
    // SAFETY: a valid C string; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let r = run_bounded(&path, &["create"]);
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(r.stderr.contains("lock file is a FIFO"), "{}", r.stderr);
    assert!(!path.exists());
}

#[test]
fn a_store_name_at_the_file_system_limit_can_be_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 255 bytes: the longest name a file may have, too long for `.lock`.
    let name = format!("{}.json", "n".repeat(250));
    assert_eq!(name.len(), 255);
    let path = dir.path().join(&name);
    for _ in 0..3 {
        let r = run_bounded(&path, &["create", "--title", "long"]);
        assert_eq!(r.code, 0, "{r:#?}");
    }
    assert_eq!(Store::open(&path).load().expect("load").len(), 3);
    assert!(temp_files(dir.path()).is_empty());
}

/// Runs `chattr -a` on drop, so the temp dir can be removed.
struct AppendOnly<'a>(&'a Path);

impl Drop for AppendOnly<'_> {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-a").arg(self.0).status();
    }
}

#[test]
fn a_refused_write_in_an_append_only_directory_leaves_no_copy_of_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sub = dir.path().join("store");
    fs::create_dir(&sub).expect("mkdir");
    let path = sub.join("tasks.json");
    for _ in 0..20 {
        assert_eq!(run_bounded(&path, &["create", "--title", "x"]).code, 0);
    }
    match Command::new("chattr").arg("+a").arg(&sub).output() {
        Ok(out) if out.status.success() => {}
        other => {
            eprintln!("SKIPPED: chattr +a is not available here ({other:?})");
            return;
        }
    }
    let _guard = AppendOnly(&sub);
    let before = fingerprint(&path);
    for _ in 0..3 {
        let r = run_bounded(&path, &["create", "--title", "refused"]);
        assert_eq!(r.code, 6, "{r:#?}");
        assert!(r.stderr.contains("append-only"), "{}", r.stderr);
        assert!(r.stderr.contains("chattr -a"), "{}", r.stderr);
    }
    assert_eq!(fingerprint(&path), before, "the store is untouched");
    let temps = temp_files(&sub);
    assert!(temps.is_empty(), "temp files left behind: {temps:?}");
}

#[test]
fn an_idle_worker_poll_takes_no_lock() {
    use rudder::store::{FileBackend, StoreError};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    let setup = Store::open(&path);
    let waiting = NewTask {
        input_schema: Some(serde_json::json!({"type": "object"})),
        ..NewTask::default()
    };
    setup.create(waiting).expect("create");
    let leased = setup.create(NewTask::default()).expect("create").task;
    setup
        .claim_next("busy", Duration::from_secs(3600), &[])
        .expect("claim")
        .expect("claimed");
    // Another writer holds the lock for as long as this test runs.
    let lock = fs::File::open(dir.path().join("tasks.json.lock")).expect("open lock");
    lock.lock().expect("lock");
    let store =
        Store::with_backend(FileBackend::new(&path).with_lock_timeout(Duration::from_millis(200)));
    for _ in 0..3 {
        assert!(
            store
                .claim_next("idle", Duration::from_secs(8), &[])
                .expect("an idle poll does not wait for the lock")
                .is_none()
        );
    }
    assert_eq!(store.get(&leased.task_id).expect("get").revision, 2);
    // With something to claim, the poll does take the lock.
    drop(lock);
    setup.release(&leased.task_id, "busy").expect("release");
    let lock = fs::File::open(dir.path().join("tasks.json.lock")).expect("open lock");
    lock.lock().expect("lock");
    match store.claim_next("idle", Duration::from_secs(8), &[]) {
        Err(StoreError::LockTimeout { .. }) => {}
        other => panic!("a claimable task is claimed under the lock: {other:?}"),
    }
}

#[test]
fn a_lock_file_made_before_the_store_was_shared_follows_its_mode_and_group() {
    if !is_root() {
        eprintln!("SKIPPED: needs root to give files to another group");
        return;
    }
    let top = tempfile::tempdir().expect("tempdir");
    fs::set_permissions(top.path(), fs::Permissions::from_mode(0o711)).expect("chmod");
    let dir = top.path().join("shared");
    fs::create_dir(&dir).expect("mkdir");
    std::os::unix::fs::chown(&dir, None, Some(OTHER)).expect("chgrp");
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o770)).expect("chmod");
    let path = dir.join("tasks.json");
    // The first user's store and lock file, private to them...
    assert_eq!(run_bounded(&path, &["create"]).code, 0);
    let lock = dir.join("tasks.json.lock");
    assert_eq!(fs::metadata(&lock).expect("stat").mode() & 0o7777, 0o600);
    // ...then shared with the team: `chgrp team t.json; chmod 660 t.json`.
    std::os::unix::fs::chown(&path, None, Some(OTHER)).expect("chgrp");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o660)).expect("chmod");
    assert_eq!(run_bounded(&path, &["create", "--title", "owner"]).code, 0);
    let m = fs::metadata(&lock).expect("stat lock");
    assert_eq!(m.gid(), OTHER, "the lock file takes the store's group");
    assert_eq!(
        m.mode() & 0o7777,
        0o660,
        "the lock file takes the store's mode"
    );
    let as_member = Command::new("setpriv")
        .args([
            "--reuid=12345",
            &format!("--regid={OTHER}"),
            "--clear-groups",
            "--",
        ])
        .arg(env!("CARGO_BIN_EXE_rudder"))
        .arg("--store")
        .arg(&path)
        .args(["create", "--title", "member"])
        .env_remove("RUDDER_STORE")
        .output();
    match as_member {
        Ok(out) if matches!(out.status.code(), Some(126 | 127)) => {
            eprintln!("SKIPPED the member part: setpriv could not run rudder")
        }
        Ok(out) => {
            let r: Run = out.into();
            assert_eq!(
                r.code, 0,
                "the second member writes the shared store: {r:#?}"
            );
            assert_eq!(Store::open(&path).load().expect("load").len(), 3);
        }
        Err(e) => eprintln!("SKIPPED the member part: no setpriv ({e})"),
    }
}

#[test]
fn a_new_store_in_a_set_group_id_directory_keeps_the_directorys_group() {
    if !is_root() {
        eprintln!("SKIPPED: needs root to give a directory to another group");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let shared = dir.path().join("team");
    fs::create_dir(&shared).expect("mkdir");
    std::os::unix::fs::chown(&shared, None, Some(OTHER)).expect("chgrp");
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o2770)).expect("chmod");
    let path = shared.join("tasks.json");
    assert_eq!(run_bounded(&path, &["create"]).code, 0);
    for file in [&path, &shared.join("tasks.json.lock")] {
        let m = fs::metadata(file).expect("stat");
        assert_eq!(
            m.gid(),
            OTHER,
            "{} in the directory's group",
            file.display()
        );
        assert_eq!(m.mode() & 0o7777, 0o600, "{} still private", file.display());
    }
}

/// A child process killed by SIGKILL and not reaped (a zombie, as a
/// harness that kills without waiting leaves it), and its pid.
fn killed_unreaped() -> (Child, u32) {
    let mut child = Command::new("sleep").arg("600").spawn().expect("sleep");
    let pid = child.id();
    child.kill().expect("kill");
    let zombie = common::wait_for(Duration::from_secs(30), || {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let state = stat
            .rsplit(')')
            .next()?
            .split_whitespace()
            .next()?
            .to_string();
        (state == "Z").then_some(())
    });
    assert!(zombie.is_some(), "the killed child became a zombie");
    (child, pid)
}

#[test]
fn a_killed_writers_temp_is_removed_even_before_it_is_reaped_and_a_live_ones_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    assert_eq!(run_bounded(&path, &["create"]).code, 0);
    let (mut killed, dead) = killed_unreaped();
    let mut live = Command::new("sleep").arg("600").spawn().expect("sleep");
    let temp = |pid: u32| {
        let t = dir.path().join(format!(
            ".tasks.json.rudder-tmp.{pid}.0123456789abcdef0123456789abcdef"
        ));
        fs::write(&t, "{\"half\": ").expect("write temp");
        t
    };
    let (dead_temp, live_temp) = (temp(dead), temp(live.id()));
    let other = dir
        .path()
        .join(format!(".tasks.json.rudder-tmp.{dead}.not-a-temp"));
    fs::write(&other, "keep").expect("write");
    assert_eq!(run_bounded(&path, &["create"]).code, 0);
    let gone = !dead_temp.exists();
    let kept = live_temp.exists() && other.exists();
    let _ = live.kill();
    let _ = live.wait();
    let _ = killed.wait();
    assert!(gone, "the killed writer's temp is removed");
    assert!(kept, "a live writer's temp and other names are kept");
}

/// The real file system, but when the writer creates its temp file, a
/// cleanup script deletes the lock file and another program following the
/// protocol (`flock` on the lock file alone) takes the new one and holds it.
struct LockStolenFs {
    stolen: std::sync::Mutex<Option<fs::File>>,
}

impl Fs for LockStolenFs {
    fn read_identified(
        &self,
        path: &Path,
        limit: u64,
    ) -> std::io::Result<Option<rudder::store::fs::ReadFile>> {
        RealFs.read_identified(path, limit)
    }
    fn meta(&self, path: &Path) -> std::io::Result<Option<rudder::store::fs::FileMeta>> {
        RealFs.meta(path)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        RealFs.create_dir_all(dir)
    }
    fn create_new(
        &self,
        path: &Path,
        meta: &rudder::store::fs::FileMeta,
    ) -> std::io::Result<Box<dyn rudder::store::fs::FsFile>> {
        let mut stolen = self.stolen.lock().expect("stolen");
        if stolen.is_none() {
            let lock = path.with_file_name("tasks.json.lock");
            fs::remove_file(&lock).expect("rm lock");
            let file = fs::File::create_new(&lock).expect("new lock file");
            file.lock().expect("flock the new lock file");
            *stolen = Some(file);
        }
        RealFs.create_new(path, meta)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        RealFs.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        RealFs.sync_dir(dir)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        RealFs.remove_file(path)
    }
    fn list_dir(&self, dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
        RealFs.list_dir(dir)
    }
    fn check_replaceable(&self, dir: &Path, store: &Path) -> std::io::Result<()> {
        RealFs.check_replaceable(dir, store)
    }
    fn lock(
        &self,
        path: &Path,
        timeout: Duration,
        store: &Path,
    ) -> Result<rudder::store::fs::LockGuard, rudder::store::fs::LockFailure> {
        RealFs.lock(path, timeout, store)
    }
}

#[test]
fn a_writer_whose_lock_file_was_deleted_and_taken_by_another_program_does_not_rename() {
    use rudder::store::{FileBackend, StoreError};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tasks.json");
    Store::open(&path)
        .create(NewTask::default())
        .expect("create");
    let before = fingerprint(&path);
    let fs_ = LockStolenFs {
        stolen: std::sync::Mutex::new(None),
    };
    let writer = Store::with_backend(
        FileBackend::with_fs(&path, Arc::new(fs_)).with_lock_timeout(Duration::from_millis(300)),
    );
    match writer.create(NewTask::default()) {
        Err(StoreError::LockTimeout { .. }) => {}
        other => panic!("the writer went on without the lock now at the path: {other:?}"),
    }
    assert_eq!(fingerprint(&path), before, "nothing renamed into place");
    assert!(temp_files(dir.path()).is_empty(), "no temp left");
}
