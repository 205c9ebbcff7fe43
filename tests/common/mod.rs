//! Helpers shared by the integration tests: running the built binary against a
//! store in a temp dir, and fingerprinting a store file to prove it was not
//! written.

#![allow(dead_code)]

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
