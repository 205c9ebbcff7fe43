//! The Python package's own test suite, run as part of `cargo test`: builds
//! `python/` into a virtual environment with maturin and runs its pytest
//! suite (on the JSON file, SQLite, and PostgreSQL on a throwaway cluster),
//! then type-checks the hand-written `.pyi` against the tests and examples
//! with mypy.
//!
//! The virtual environment lives in `target/python-env` and is made on first
//! use with CPython 3.10 or later (`$RUDDER_PYTHON`, else `python3`), pip
//! installing the pinned tools below from PyPI; later runs reuse it, and
//! `maturin develop` rebuilds only what changed (in this target directory,
//! so the library's dependencies are not built again).

mod common;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::pg;

/// The tools the suite needs, pinned; a change of this list makes a new
/// environment.
const TOOLS: &[&str] = &["maturin==1.16.0", "pytest==9.2.0", "mypy==2.4.1"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command, what: &str) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("{what}: cannot start {:?}: {e}", cmd.get_program()));
    assert!(status.success(), "{what} failed ({status})");
}

/// The virtual environment with [`TOOLS`] installed, made if missing.
fn venv() -> PathBuf {
    let dir = root().join("target").join("python-env");
    let stamp = dir.join("rudder-tools.txt");
    let want = TOOLS.join("\n");
    if std::fs::read_to_string(&stamp).is_ok_and(|have| have == want) {
        return dir;
    }
    let python = std::env::var_os("RUDDER_PYTHON").unwrap_or_else(|| "python3".into());
    let _ = std::fs::remove_dir_all(&dir);
    run(
        Command::new(&python).args(["-m", "venv"]).arg(&dir),
        "python3 -m venv (CPython 3.10 or later with the venv module is needed; $RUDDER_PYTHON names another interpreter)",
    );
    run(
        Command::new(dir.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(TOOLS),
        "pip install of the Python test tools (PyPI must be reachable on first use)",
    );
    std::fs::write(&stamp, want).expect("write the environment's stamp");
    dir
}

fn in_venv(venv: &Path, program: &str) -> Command {
    let mut cmd = Command::new(venv.join("bin").join(program));
    cmd.env("VIRTUAL_ENV", venv)
        .env_remove("RUDDER_STORE")
        .env_remove("PYTHONPATH")
        .current_dir(root().join("python"));
    cmd
}

/// The virtual environment with the package built into it (once per test
/// process: the tests here share it).
fn built() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let venv = venv();
            // Into this target directory (the dependencies are built
            // already); `cargo test` holds no lock on it while tests run.
            run(
                in_venv(&venv, "maturin")
                    .args(["develop", "--quiet"])
                    .env("CARGO_TARGET_DIR", root().join("target")),
                "maturin develop",
            );
            venv
        })
        .clone()
}

#[test]
fn the_python_package_builds_and_passes_its_tests() {
    let venv = built();
    let mut pytest = in_venv(&venv, "pytest");
    pytest
        .args(["-q", "-p", "no:cacheprovider", "tests"])
        .env("RUDDER_BIN", env!("CARGO_BIN_EXE_rudder"));
    // PostgreSQL as the other backend tests run it: a throwaway cluster,
    // its absence loud (and an error under RUDDER_REQUIRE_PG=1).
    if pg::available() {
        pytest.env("RUDDER_TEST_PG_URL", pg::shared().url("postgres"));
    }
    run(&mut pytest, "pytest (python/tests)");
    run(
        in_venv(&venv, "mypy")
            .arg("--cache-dir")
            .arg(venv.join("mypy-cache")),
        "mypy (the .pyi against the tests and examples)",
    );
}

/// `rudder demo --python-worker`'s supervisor: the Python diagnosis worker
/// works the demo's incidents, is killed with SIGKILL (the TUI's K) and
/// started again (W), and every task survives and settles as in the story.
#[test]
fn the_demo_runs_the_python_worker_through_a_kill_and_a_restart() {
    use rudder::Store;
    use rudder::demo::supervisor::{Supervisor, check_python};
    use rudder::tui::{WorkerControl, WorkerState};
    use std::time::{Duration, Instant};

    let venv = built();
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("rudder-demo.json");
    let store = Store::connect(&path).expect("a store URL");
    rudder::demo::seed::seed(&store).expect("seed the demo store");
    let seeded = store.list(&[]).expect("read the store").len();
    let python = venv.join("bin/python");
    let script = PathBuf::from(rudder::demo::PYTHON_WORKER);
    check_python(python.as_os_str(), &script).expect("the venv imports rudder");
    let log = dir.path().join("worker.log");
    let mut worker = Supervisor::new(
        PathBuf::from(env!("CARGO_BIN_EXE_rudder")),
        rudder::store::StoreUrl::from_path(&path),
        100.0,
        Some(log.clone()),
    )
    .python(python, script);
    // Waits for what it asserts: the store's state, read until it holds.
    let until = |what: &str, done: &dyn Fn(&[rudder::Task]) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let tasks = store.list(&[]).expect("read the store");
            if done(&tasks) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within 2 minutes; worker log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    worker.start().expect("start the Python worker");
    until("a Python worker claims an incident", &|tasks| {
        tasks.iter().any(|t| {
            t.claimed_by
                .as_deref()
                .is_some_and(|h| h.starts_with("py-worker-"))
                && t.progress.is_some_and(|p| p.current >= 1)
        })
    });
    worker.kill().expect("kill the worker");
    assert!(!matches!(worker.state(), WorkerState::Running { .. }));
    worker.start().expect("start it again");
    until("every incident settles", &|tasks| {
        tasks
            .iter()
            .all(|t| t.status.is_terminal() || t.status == rudder::Status::InputRequired)
    });
    let tasks = store.list(&[]).expect("read the store");
    assert_eq!(tasks.len(), seeded, "no task was lost");
    assert!(
        tasks.iter().any(|t| t.status == rudder::Status::Completed
            && t.result.as_ref().is_some_and(|r| r["citations"].is_array())),
        "a diagnosis completed with its citations"
    );
}
