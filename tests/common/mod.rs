//! Helpers shared by the integration tests: running the built binary against a
//! store in a temp dir, and fingerprinting a store file to prove it was not
//! written.

#![allow(dead_code, unused_macros)]

pub mod pg;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The built `rudder` binary, with `$RUDDER_STORE` removed from its environment.
pub fn rudder() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.env_remove("RUDDER_STORE").env("NO_COLOR", "1");
    cmd
}

/// What a run of the binary produced.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout as exactly one JSON value (panics if it is not).
    pub fn json(&self) -> Value {
        one_json_value(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not exactly one JSON value ({e}): {self:#?}"))
    }
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// Parse `text` as exactly one JSON value (surrounding whitespace allowed).
pub fn one_json_value(text: &str) -> Result<Value, String> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let first = values
        .next()
        .ok_or("no JSON value")?
        .map_err(|e| e.to_string())?;
    match values.next() {
        None => Ok(first),
        Some(_) => Err("more than one JSON value".into()),
    }
}

/// Run `rudder --store STORE ARGS...`.
pub fn run(store: &Path, args: &[&str]) -> Run {
    let out = rudder()
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("run rudder");
    out.into()
}

/// Run `rudder ARGS...` with the store given by `$RUDDER_STORE` (or nothing).
pub fn run_plain(args: &[&str]) -> Run {
    rudder().args(args).output().expect("run rudder").into()
}

/// Create a task through the binary and return its id.
pub fn create(store: &Path, args: &[&str]) -> String {
    let mut all = vec!["create", "--json"];
    all.extend_from_slice(args);
    let r = run(store, &all);
    assert_eq!(r.code, 0, "create failed: {r:#?}");
    r.json()["task"]["task_id"]
        .as_str()
        .expect("task_id")
        .to_string()
}

/// Everything that changes when a file is written: its bytes, inode and mtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub bytes: Vec<u8>,
    pub inode: u64,
    pub mtime_ns: i128,
    pub len: u64,
}

pub fn fingerprint(path: &Path) -> Fingerprint {
    let m = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Fingerprint {
        bytes: std::fs::read(path).expect("read store"),
        inode: m.ino(),
        mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
        len: m.len(),
    }
}

/// The temp files a writer of a store in `dir` makes (`.NAME.rudder-tmp.PID.RANDOM`).
pub fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".rudder-tmp."))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// Files in `dir` whose name starts with `prefix`.
pub fn files_starting_with(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// Poll `f` until it returns `Some`, for at most `deadline` (generous: this is
/// waiting for a state, not measuring time).
pub fn wait_for<T>(deadline: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A store backend the conformance suites run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Sqlite,
    /// A schema of its own on the test process's PostgreSQL cluster.
    Postgres,
}

thread_local! {
    static KIND: std::cell::Cell<Kind> = const { std::cell::Cell::new(Kind::File) };
}

/// The backends to test: `$RUDDER_TEST_STORE` (`file`, `sqlite` or
/// `postgres`) narrows to one; unset or empty, all three (PostgreSQL only
/// where its binaries are installed: see [`pg::available`]).
pub fn kinds() -> Vec<Kind> {
    let pg = || {
        if pg::available() {
            vec![Kind::Postgres]
        } else {
            vec![]
        }
    };
    match std::env::var("RUDDER_TEST_STORE").as_deref() {
        Err(_) | Ok("") => [vec![Kind::File, Kind::Sqlite], pg()].concat(),
        Ok("file") => vec![Kind::File],
        Ok("sqlite") => vec![Kind::Sqlite],
        Ok("postgres") => pg(),
        Ok(other) => panic!("RUDDER_TEST_STORE={other:?}: expected file, sqlite or postgres"),
    }
}

/// Run `f` once per backend of [`kinds`]; inside, [`store_file`] names a
/// store of that backend.
pub fn each_backend(mut f: impl FnMut()) {
    for kind in kinds() {
        KIND.with(|k| k.set(kind));
        eprintln!("[store backend: {kind:?}]");
        f();
    }
    KIND.with(|k| k.set(Kind::File));
}

/// Run `case` on a store of backend `kind` ([`store_in`] names one).
/// A PostgreSQL case where no server can be started fails: the generated
/// test is ignored at build time where the server's programs are missing
/// (build.rs), so it is never reported as passed having run nothing.
pub fn on_backend(kind: Kind, case: impl FnOnce()) {
    if kind == Kind::Postgres {
        assert!(
            pg::available(),
            "no PostgreSQL server programs found (initdb, pg_ctl): this test cannot run"
        );
    }
    KIND.with(|k| k.set(kind));
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            KIND.with(|k| k.set(Kind::File));
        }
    }
    let _reset = Reset;
    case();
}

/// The backend contract: `NAME: CASE, ...` makes one test per backend
/// and case, `file::NAME`, `sqlite::NAME` and `postgres::NAME`, each
/// running `CASE` on a store of that backend (`cargo test -- sqlite::`
/// runs one backend's). The PostgreSQL ones are ignored, and listed as
/// such, where the build found no PostgreSQL server programs (build.rs);
/// with `RUDDER_REQUIRE_PG=1` they are never ignored, and fail there.
macro_rules! backend_tests {
    ($($name:ident: $case:ident),* $(,)?) => {
        mod file {
            $(
                #[test]
                fn $name() {
                    crate::common::on_backend(crate::common::Kind::File, super::$case)
                }
            )*
        }
        mod sqlite {
            $(
                #[test]
                fn $name() {
                    crate::common::on_backend(crate::common::Kind::Sqlite, super::$case)
                }
            )*
        }
        mod postgres {
            $(
                #[test]
                #[cfg_attr(
                    rudder_no_pg,
                    ignore = "no PostgreSQL server programs were found when the tests were built"
                )]
                fn $name() {
                    crate::common::on_backend(crate::common::Kind::Postgres, super::$case)
                }
            )*
        }
    };
}
#[allow(unused_imports)] // not every test file has backend cases
pub(crate) use backend_tests;

/// The backend the current [`each_backend`] round tests.
pub fn kind() -> Kind {
    KIND.with(|k| k.get())
}

/// A store file name whose extension selects the current backend (the
/// file backends only: see [`store_in`]).
pub fn store_file() -> &'static str {
    match kind() {
        Kind::File => "tasks.json",
        Kind::Sqlite => "tasks.db",
        Kind::Postgres => panic!("a PostgreSQL store has no file name: use store_in"),
    }
}

/// A new store of the current backend: a file in `dir`, or a new empty
/// PostgreSQL store (a URL, carried in a path as `--store` takes it).
pub fn store_in(dir: &Path) -> PathBuf {
    match kind() {
        Kind::Postgres => PathBuf::from(pg::store_url()),
        _ => dir.join(store_file()),
    }
}

/// Whether the store at `path` exists: its file, or (PostgreSQL) its tables.
pub fn store_exists(path: &Path) -> bool {
    if is_postgres(path) {
        use rudder::store::Backend;
        return pg::off_runtime(|| {
            rudder::Store::connect(path)
                .expect("a store URL")
                .backend()
                .exists()
        })
        .expect("ask the server");
    }
    path.exists()
}

/// Delete the store at `path`: its file, or (PostgreSQL) its tables.
pub fn remove_store(path: &Path) {
    if is_postgres(path) {
        let url = path.to_str().expect("a URL").to_string();
        // The tables are locked in the order every reader and writer takes
        // them (the schema table first), so that a feed reading meanwhile
        // waits instead of deadlocking; a deadlock all the same (a reader
        // of another shape) rolls the drop back whole, so it is run again.
        pg::off_runtime(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls)?;
            let mut attempt = 0;
            loop {
                attempt += 1;
                let done = client.batch_execute(
                    "DROP TABLE rudder_schema, rudder_changes, rudder_counts, rudder_tasks, \
                     rudder_deliveries, rudder_trail",
                );
                match done {
                    Err(e)
                        if attempt < 5
                            && e.code()
                                == Some(&postgres::error::SqlState::T_R_DEADLOCK_DETECTED) => {}
                    done => return done,
                }
            }
        })
        .expect("drop the tables");
        return;
    }
    std::fs::remove_file(path).expect("remove the store");
}

/// Whether `path` names a PostgreSQL store.
pub fn is_postgres(path: &Path) -> bool {
    matches!(
        rudder::store::StoreUrl::parse(path),
        Ok(rudder::store::StoreUrl::Postgres(_))
    )
}

/// What a write changes, per backend: the file's bytes, inode and mtime; a
/// database's last recorded change and its tasks.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreState {
    File(Fingerprint),
    Sqlite { last_change: i64, tasks: String },
}

pub fn store_state(path: &Path) -> StoreState {
    use rudder::store::StoreUrl;
    match StoreUrl::parse(path).expect("a store URL") {
        StoreUrl::File(_) => StoreState::File(fingerprint(path)),
        url => {
            let last_change = match url {
                StoreUrl::Postgres(u) => rudder::store::PostgresBackend::new(u).last_change(),
                _ => rudder::store::SqliteBackend::new(path).last_change(),
            }
            .expect("read the changes")
            .unwrap_or(0);
            let tasks = rudder::Store::connect(path)
                .expect("a store URL")
                .load()
                .expect("load the tasks");
            StoreState::Sqlite {
                last_change,
                tasks: serde_json::to_string(&tasks).expect("encode"),
            }
        }
    }
}

/// Whether the store was written since `before`.
pub fn written_since(before: &StoreState, path: &Path) -> bool {
    match (before, store_state(path)) {
        (StoreState::File(b), StoreState::File(a)) => a.inode != b.inode,
        (StoreState::Sqlite { last_change: b, .. }, StoreState::Sqlite { last_change: a, .. }) => {
            a != *b
        }
        _ => panic!("the store changed backend"),
    }
}

/// The store was not written since `before`: not a byte (file), not a
/// recorded change nor a task (database).
pub fn assert_store_untouched(before: &StoreState, path: &Path, ctx: &str) {
    let after = store_state(path);
    match (before, &after) {
        (StoreState::File(b), StoreState::File(a)) => {
            assert_eq!(a.inode, b.inode, "{ctx}: the file was replaced");
            assert_eq!(a.mtime_ns, b.mtime_ns, "{ctx}: the file was written");
            assert!(a.bytes == b.bytes, "{ctx}: the bytes changed");
        }
        _ => assert_eq!(&after, before, "{ctx}: the database was written"),
    }
}

/// Choose the backend for [`store_file`] by hand (async tests, which
/// cannot run inside [`each_backend`]'s closure).
pub fn set_kind(kind: Kind) {
    eprintln!("[store backend: {kind:?}]");
    KIND.with(|k| k.set(kind));
}

/// Write `tasks` (a JSON object mapping ids to tasks, the file format)
/// as the whole content of the store at `path`, whatever its backend: the
/// file as text, a database through the store.
pub fn write_store(path: &Path, text: &str) {
    match rudder::store::StoreUrl::parse(path).expect("a store URL") {
        rudder::store::StoreUrl::File(_) => std::fs::write(path, text).expect("write the store"),
        _ => {
            use rudder::store::Backend;
            let tasks = rudder::store::decode(path, text.as_bytes()).expect("a valid store");
            rudder::Store::connect(path)
                .expect("a store URL")
                .backend()
                .transact(&mut |all| {
                    *all = tasks.clone();
                    Ok(true)
                })
                .expect("write the database");
        }
    }
}

/// What a script sees of a store error: the CLI's kind name and exit code
/// for it (`rudder::cli::exit`, where the mapping lives; the library's
/// error knows neither).
pub trait CliKind {
    fn cli_kind(&self) -> &'static str;
    fn exit_code(&self) -> i32;
}

impl CliKind for rudder::StoreError {
    fn cli_kind(&self) -> &'static str {
        rudder::cli::ErrorKind::of_store(self).as_str()
    }
    fn exit_code(&self) -> i32 {
        rudder::cli::ErrorKind::of_store(self).exit_code()
    }
}

/// A JSON store of `n` tasks of about 1 KB each, in the file layout, whose
/// last task's status is not one, written to `path`: the line that status
/// is on (the place `copy` must name).
pub fn write_store_with_a_bad_last_status(path: &Path, n: usize) -> usize {
    let mut tasks = rudder::task::TaskMap::new();
    for i in 0..n {
        let mut t = rudder::task::Task::new(format!("task-{i:06}"), rudder::task::Status::Working);
        t.request = Some(serde_json::json!({"pad": "x".repeat(900), "i": i}));
        tasks.insert(t.task_id.clone(), t);
    }
    let mut text = String::from_utf8(rudder::store::encode(&tasks, 0)).expect("UTF-8");
    let at = text.rfind("\"status\": \"working\"").expect("a status");
    text.replace_range(at..at + 19, "\"status\": \"wonking\"");
    std::fs::write(path, &text).expect("write the store");
    text[..at].matches('\n').count() + 1
}

/// A directory as a reader without write access to it sees it: a
/// read-only bind mount of it (as root, who may write any directory
/// whatever its mode), or the directory itself made 0555 (as another user).
/// Undone when dropped.
pub struct ReadOnlyView {
    path: PathBuf,
    mounted: bool,
    chmodded: bool,
}

impl ReadOnlyView {
    /// `dir` read only, at `mount_point` (root) or in place; `Err` says why
    /// it could not be set up (the caller skips, saying so).
    #[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
    pub fn of(dir: &Path, mount_point: &Path) -> Result<ReadOnlyView, String> {
        use std::os::unix::fs::PermissionsExt;
        #[allow(unsafe_code)]
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let view = if root {
            std::fs::create_dir_all(mount_point).map_err(|e| format!("mkdir: {e}"))?;
            let mount = |args: &[&str]| -> Result<(), String> {
                let out = Command::new("mount")
                    .args(args)
                    .output()
                    .map_err(|e| format!("mount: {e}"))?;
                if out.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "mount {args:?}: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ))
                }
            };
            let (d, m) = (
                dir.to_str().ok_or("a path that is not UTF-8")?,
                mount_point.to_str().ok_or("a path that is not UTF-8")?,
            );
            mount(&["--bind", d, m])?;
            let view = ReadOnlyView {
                path: mount_point.to_path_buf(),
                mounted: true,
                chmodded: false,
            };
            mount(&["-o", "remount,ro,bind", m])?;
            view
        } else {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555))
                .map_err(|e| format!("chmod 0555: {e}"))?;
            ReadOnlyView {
                path: dir.to_path_buf(),
                mounted: false,
                chmodded: true,
            }
        };
        // The condition itself, checked: nothing can be created there.
        let probe = view.path.join(".rudder-write-probe");
        if std::fs::File::create(&probe).is_ok() {
            let _ = std::fs::remove_file(&probe);
            return Err(format!("{} is still writable", view.path.display()));
        }
        Ok(view)
    }

    /// The directory as the reader sees it.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ReadOnlyView {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if self.mounted {
            // Lazy: a process of the test may still have a file open there.
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        }
        if self.chmodded {
            let _ = std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o755));
        }
    }
}

/// What `rudder ARGS` printed on a pseudo-terminal `cols` wide, with
/// `$COLUMNS` unset and `env` set: its exit code and its non-empty lines,
/// read to the end (the pty reports EOF, or EIO, once the child is gone).
pub fn on_a_terminal(args: &[&str], cols: u16, env: &[(&str, &str)]) -> (u32, Vec<String>) {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    use std::io::Read;
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 24,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("a pseudo-terminal");
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.args(args);
    cmd.env_remove("COLUMNS");
    cmd.env_remove("RUDDER_STORE");
    for (name, value) in env {
        cmd.env(name, value);
    }
    let mut child = pty.slave.spawn_command(cmd).expect("rudder starts");
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().expect("a reader");
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    let status = child.wait().expect("rudder exits");
    let lines = String::from_utf8(out)
        .expect("UTF-8 output")
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    (status.exit_code(), lines)
}
