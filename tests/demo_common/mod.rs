//! Helpers shared by the demo's integration tests (`demo_seed`, `demo_worker`):
//! a store in a temp dir, and waiting for a state with a named timeout. The
//! general helpers of `tests/common` are reused, not copied.

#![allow(dead_code)]
use std::path::PathBuf;
use std::time::Duration;

use rudder::Store;

#[path = "../common/mod.rs"]
pub mod common;

pub use common::rudder;

/// Poll `f` until it returns `Some`, or panic after `timeout` naming `what`.
pub fn wait_for<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    common::wait_for(timeout, f).unwrap_or_else(|| panic!("timed out waiting for {what}"))
}

/// A store named `file` in a fresh temp dir (kept while the `TempDir` lives).
pub fn store_in_tempdir(file: &str) -> (tempfile::TempDir, PathBuf, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(file);
    let store = Store::connect(&path).expect("a store URL");
    (dir, path, store)
}

/// A new store of the backend `common::each_backend` is testing, in a
/// fresh temp dir (a file backend) or on the test cluster (PostgreSQL).
pub fn store_of_kind() -> (tempfile::TempDir, PathBuf, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = common::store_in(dir.path());
    let store = Store::connect(&path).expect("a store URL");
    (dir, path, store)
}
