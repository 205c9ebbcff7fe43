//! A Python with the official MCP SDK (`mcp` from PyPI) and the upstream
//! server the gateway tests run on it; shared by `crates/gateway/tests`
//! and the root tests that drive the binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The SDK the tests run their upstream on, pinned; a change of it makes
/// a new environment.
const TOOLS: &[&str] = &["mcp==2.3.0"];

/// The workspace's root: the nearest directory over the crate under test
/// that holds `crates/gateway` (this file is compiled into tests of the
/// gateway crate and of the binary).
fn root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .find(|d| d.join("crates/gateway/Cargo.toml").is_file())
        .unwrap_or(here)
        .to_path_buf()
}

fn target() -> PathBuf {
    root().join("target")
}

/// A Python with the official MCP SDK: `target/gateway-python-env`, made on
/// first use (`$RUDDER_PYTHON`, else `python3`; pip installs from PyPI).
pub fn python() -> PathBuf {
    static ENV: OnceLock<PathBuf> = OnceLock::new();
    ENV.get_or_init(|| {
        let dir = target().join("gateway-python-env");
        let stamp = dir.join("rudder-tools.txt");
        let want = TOOLS.join("\n");
        if std::fs::read_to_string(&stamp).is_ok_and(|have| have == want) {
            return dir.join("bin/python");
        }
        let python = std::env::var_os("RUDDER_PYTHON").unwrap_or_else(|| "python3".into());
        let _ = std::fs::remove_dir_all(&dir);
        let ok = Command::new(&python)
            .args(["-m", "venv"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "python3 -m venv failed (CPython 3.10 or later is needed)"
        );
        let ok = Command::new(dir.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(TOOLS)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "pip install of {TOOLS:?} failed (PyPI must be reachable on first use)"
        );
        std::fs::write(&stamp, want).expect("write the environment's stamp");
        dir.join("bin/python")
    })
    .clone()
}

/// The Python upstream's script.
pub fn bridge() -> PathBuf {
    root().join("crates/gateway/tests/fixtures/bridge.py")
}
