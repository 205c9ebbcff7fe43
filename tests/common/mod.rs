//! Helpers shared by the end-to-end tests of the binary: running the built
//! binary against a store in a temp dir, on a pseudo-terminal, what a
//! script sees of an error. The stores of every backend, the PostgreSQL
//! cluster, the backend contract and fingerprints of a store's file are
//! `rudder-testkit`'s, re-exported here under the names the tests use.

#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use rudder_testkit::stores::*;
pub use rudder_testkit::{backend_tests, pg, shared_backend_tests, wait_for};

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

/// The sh blocks between a page's walkthrough markers, as one script.
pub fn walkthrough(doc: &str) -> String {
    let start = doc
        .find("<!-- walkthrough: begin -->")
        .expect("the begin marker");
    let end = doc
        .find("<!-- walkthrough: end -->")
        .expect("the end marker");
    let mut script = String::new();
    let mut inside = false;
    for line in doc[start..end].lines() {
        match line.trim_end() {
            "```sh" => inside = true,
            "```" if inside => inside = false,
            _ if inside => {
                script.push_str(line);
                script.push('\n');
            }
            _ => {}
        }
    }
    script
}

/// Run a page's walkthrough `script` as written, in `dir`, with `rudder`
/// on the PATH and neither `$RUDDER_STORE` nor `$RUDDER_MCP_TOKEN`: a trap
/// ends the servers it started if a step fails before its own `kill`,
/// `timeout` a step that never would end.
pub fn run_walkthrough(script: &str, dir: &Path) -> Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_rudder")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("timeout")
        .args(["120", "bash", "-c"])
        .arg(format!(
            "set -eo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{script}"
        ))
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("RUDDER_STORE")
        .env_remove("RUDDER_MCP_TOKEN")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}
