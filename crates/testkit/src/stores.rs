//! Temp stores of every backend for the tests: which backends a test
//! runs over (`$RUDDER_TEST_STORE`, [`kinds`]), a new store of the
//! current one ([`store_in`]: a file in a temp dir, or a schema of its own
//! on the test process's PostgreSQL cluster, [`crate::pg`]), the backend
//! contract's per-backend tests ([`crate::backend_tests!`]), and what a
//! write changes in a store ([`store_state`], [`assert_store_untouched`]).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::pg;

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

/// A store backend the conformance suites run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Sqlite,
    /// A schema of its own on the test process's PostgreSQL cluster.
    Postgres,
    /// A store in the test process's memory (`memory:NAME`): the contract's
    /// smallest backend, in [`backend_tests!`] only (it is no store
    /// another process can share).
    Memory,
}

impl Kind {
    /// Whether the store lives in a file of the test's directory.
    pub fn has_files(self) -> bool {
        matches!(self, Kind::File | Kind::Sqlite)
    }
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
/// (this crate's build.rs), so it is never reported as passed having run nothing.
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
/// and case, `file::NAME`, `sqlite::NAME`, `postgres::NAME` and
/// `memory::NAME`, each running `CASE` (a function of the invoking module)
/// on a store of that backend ([`on_backend`]; `cargo test -- sqlite::`
/// runs one backend's). Cases that share a store between processes use
/// [`shared_backend_tests!`], which leaves the memory backend out.
/// The PostgreSQL ones are ignored, and listed as such, where the build
/// found no PostgreSQL server programs (this crate's build.rs); with
/// `RUDDER_REQUIRE_PG=1` they are never ignored, and fail there.
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident: $case:ident),* $(,)?) => {
        $crate::shared_backend_tests! { $($name: $case),* }
        mod memory {
            $(
                #[test]
                fn $name() {
                    $crate::stores::on_backend($crate::stores::Kind::Memory, super::$case)
                }
            )*
        }
    };
}

/// [`backend_tests!`] for cases that share a store between processes (a
/// child process, a store opened by another program): the backends a
/// store can be shared through, `file::NAME`, `sqlite::NAME` and
/// `postgres::NAME`.
#[macro_export]
macro_rules! shared_backend_tests {
    ($($name:ident: $case:ident),* $(,)?) => {
        mod file {
            $(
                #[test]
                fn $name() {
                    $crate::stores::on_backend($crate::stores::Kind::File, super::$case)
                }
            )*
        }
        mod sqlite {
            $(
                #[test]
                fn $name() {
                    $crate::stores::on_backend($crate::stores::Kind::Sqlite, super::$case)
                }
            )*
        }
        mod postgres {
            $(
                $crate::__postgres_case! {
                    #[test]
                    fn $name() {
                        $crate::stores::on_backend($crate::stores::Kind::Postgres, super::$case)
                    }
                }
            )*
        }
    };
}

/// A PostgreSQL case of [`backend_tests!`], ignored where this crate was
/// built without PostgreSQL's server programs (the cfg is this crate's:
/// build.rs sets it, so the crates that invoke the macro need no build
/// script of their own).
#[cfg(rudder_no_pg)]
#[doc(hidden)]
#[macro_export]
macro_rules! __postgres_case {
    ($($test:tt)*) => {
        #[ignore = "no PostgreSQL server programs were found when the tests were built"]
        $($test)*
    };
}

/// See the other definition: PostgreSQL's programs were found (or are
/// required), so the case runs.
#[cfg(not(rudder_no_pg))]
#[doc(hidden)]
#[macro_export]
macro_rules! __postgres_case {
    ($($test:tt)*) => {
        $($test)*
    };
}

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
        Kind::Memory => panic!("a store in memory has no file name: use store_in"),
    }
}

/// A new store of the current backend: a file in `dir`, or a new empty
/// PostgreSQL or memory store (a URL, carried in a path as `--store`
/// takes it).
pub fn store_in(dir: &Path) -> PathBuf {
    match kind() {
        Kind::Postgres => PathBuf::from(pg::store_url()),
        // Named after the test's own directory: a store of its own.
        Kind::Memory => PathBuf::from(format!("memory:{}", dir.display())),
        _ => dir.join(store_file()),
    }
}

/// Whether the store at `path` exists: its file, or (PostgreSQL) its
/// tables, or (memory) anything written to it.
pub fn store_exists(path: &Path) -> bool {
    if matches!(
        rudder_store::StoreUrl::parse(path),
        Ok(rudder_store::StoreUrl::Memory(_))
    ) {
        use rudder_store::Backend;
        let store = rudder_store::Store::connect(path).expect("a store URL");
        return store.backend().exists().expect("ask the store");
    }
    if is_postgres(path) {
        use rudder_store::Backend;
        return pg::off_runtime(|| {
            rudder_store::Store::connect(path)
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
        rudder_store::StoreUrl::parse(path),
        Ok(rudder_store::StoreUrl::Postgres(_))
    )
}

/// What a write changes, per backend: the file's bytes, inode and mtime; a
/// database's (or a store in memory's) last recorded change and its tasks.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreState {
    File(Fingerprint),
    Sqlite { last_change: i64, tasks: String },
}

pub fn store_state(path: &Path) -> StoreState {
    use rudder_store::StoreUrl;
    match StoreUrl::parse(path).expect("a store URL") {
        StoreUrl::File(_) => StoreState::File(fingerprint(path)),
        url => {
            let last_change = match url {
                StoreUrl::Postgres(u) => rudder_store::PostgresBackend::new(u).last_change(),
                StoreUrl::Memory(name) => Ok(Some(
                    rudder_store::memory::MemoryBackend::named(&name).last_change() as i64,
                )),
                _ => rudder_store::SqliteBackend::new(path).last_change(),
            }
            .expect("read the changes")
            .unwrap_or(0);
            let tasks = rudder_store::Store::connect(path)
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
    match rudder_store::StoreUrl::parse(path).expect("a store URL") {
        rudder_store::StoreUrl::File(_) => std::fs::write(path, text).expect("write the store"),
        _ => {
            use rudder_store::Backend;
            let tasks = rudder_store::decode(path, text.as_bytes()).expect("a valid store");
            rudder_store::Store::connect(path)
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

/// The store at `path` reads back (a process killed mid-write never
/// tears it) and holds every task whose create was `reported` done; how
/// many tasks it holds.
pub fn check_store(path: &Path, reported: &[String], ctx: &str) -> usize {
    let tasks = rudder_store::Store::connect(path)
        .expect("a store URL")
        .load()
        .unwrap_or_else(|e| panic!("{ctx}: the store is torn: {e}"));
    for id in reported {
        assert!(
            tasks.contains_key(id),
            "{ctx}: reported create {id} was lost"
        );
    }
    tasks.len()
}
