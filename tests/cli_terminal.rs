//! `list` on a terminal: the real binary in a pseudo-terminal, its table
//! fitted to the width the terminal (or `$COLUMNS`) gives.

mod common;

use std::io::Read;
use std::path::Path;

use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use unicode_width::UnicodeWidthStr;

/// Every line `rudder list` printed on a terminal `cols` wide, with `env`.
fn list_on_a_terminal(store: &Path, cols: u16, env: &[(&str, &str)]) -> Vec<String> {
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 24,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("a pseudo-terminal");
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_rudder"));
    cmd.args(["--store", store.to_str().expect("a UTF-8 path"), "list"]);
    cmd.env_remove("COLUMNS");
    for (name, value) in env {
        cmd.env(name, value);
    }
    let mut child = pty.slave.spawn_command(cmd).expect("rudder starts");
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().expect("a reader");
    let mut out = Vec::new();
    // Read to the end: the pty reports EOF (or EIO) once the child is gone.
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    let status = child.wait().expect("rudder exits");
    assert!(status.success(), "rudder list: {status:?}");
    String::from_utf8(out)
        .expect("UTF-8")
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn list_fits_the_terminal_or_columns() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store_in(dir.path());
    let long = "checkout latency regression after the payments deploy in eu-west-1 and us-east-2";
    for n in 0..3 {
        common::create(
            &store,
            &["--title", &format!("{long} #{n}"), "--message", long],
        );
    }
    let widest = |lines: &[String]| lines.iter().map(|l| l.width()).max().unwrap_or(0);

    let narrow = list_on_a_terminal(&store, 60, &[]);
    assert_eq!(narrow.len(), 4, "a header and three rows: {narrow:#?}");
    assert!(widest(&narrow) <= 60, "{narrow:#?}");

    let wide = list_on_a_terminal(&store, 60, &[("COLUMNS", "100")]);
    assert_eq!(wide.len(), 4, "{wide:#?}");
    let w = widest(&wide);
    assert!(w > 60 && w <= 100, "$COLUMNS=100 wins: {w} {wide:#?}");

    let junk = list_on_a_terminal(&store, 60, &[("COLUMNS", "lots")]);
    assert!(
        widest(&junk) <= 60,
        "a $COLUMNS that is no number is ignored"
    );
}
