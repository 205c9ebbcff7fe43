//! The real `rudder watch` in a pseudo-terminal, for the benchmarks that
//! measure the binary itself (its memory, its idle CPU).

use std::path::Path;

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};

/// A running `rudder watch` and its terminal.
pub struct Watch {
    pub child: Box<dyn portable_pty::Child + Send + Sync>,
    pub pid: u32,
    /// What the TUI writes.
    pub reader: Box<dyn std::io::Read + Send>,
    /// The terminal's side (`take_writer` for keys); kept open while it runs.
    pub master: Box<dyn MasterPty + Send>,
}

/// `rudder --store STORE watch` in a 120×35 pseudo-terminal.
pub fn watch(store: &Path) -> Watch {
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 35,
            cols: 120,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("pty");
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.args(["--store", store.to_str().expect("utf-8"), "watch"]);
    cmd.env("TERM", "xterm-256color");
    let child = pty.slave.spawn_command(cmd).expect("spawn");
    let pid = child.process_id().expect("pid");
    let reader = pty.master.try_clone_reader().expect("reader");
    Watch {
        child,
        pid,
        reader,
        master: pty.master,
    }
}

/// A field of `/proc/PID/status` (`VmRSS:`, `VmHWM:`) as the kernel writes
/// it, e.g. `14212 kB`.
pub fn status(pid: u32, key: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .map(|l| l.trim_start_matches(key).trim().to_string())
        .unwrap_or_default()
}
