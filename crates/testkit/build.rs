//! Tells the tests whether PostgreSQL's server programs are here: where
//! they are not (and `RUDDER_REQUIRE_PG` is not set), the per-backend
//! PostgreSQL tests are built `#[ignore]`d, so `cargo test` lists them as
//! ignored instead of reporting them passed having run nothing
//! (`backend_tests!`, src/stores.rs). The lookup is the tests' own
//! (src/pg.rs `bindir`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn has(dir: &Path) -> bool {
    dir.join("initdb").is_file() && dir.join("pg_ctl").is_file()
}

fn found() -> bool {
    if let Some(d) = std::env::var_os("RUDDER_TEST_PG_BINDIR") {
        return has(&PathBuf::from(d));
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
        && has(Path::new(String::from_utf8_lossy(&out.stdout).trim()))
    {
        return true;
    }
    if let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql")
        && entries.flatten().any(|e| has(&e.path().join("bin")))
    {
        return true;
    }
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| has(&d)))
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(rudder_no_pg)");
    println!("cargo::rerun-if-env-changed=RUDDER_TEST_PG_BINDIR");
    println!("cargo::rerun-if-env-changed=RUDDER_REQUIRE_PG");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-changed=/usr/lib/postgresql");
    let required = std::env::var("RUDDER_REQUIRE_PG").is_ok_and(|v| v == "1");
    if !required && !found() {
        println!("cargo::rustc-cfg=rudder_no_pg");
    }
}
