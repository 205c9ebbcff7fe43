//! What rudder's tests and fuzz targets share. Dev-only: no library of the
//! workspace depends on it, so nothing here is compiled into rudder.
//!
//! - [`fuzzing`]: the fuzz oracles (always built; the fuzz targets need
//!   nothing else);
//! - [`mcp`]: a client of `rudder mcp`, rmcp's and the wire by hand, and a
//!   `rudder mcp --http` child (feature `mcp`);
//! - [`pg`]: throwaway PostgreSQL clusters (feature `stores`);
//! - [`stores`]: temp stores of every backend, and the backend contract's
//!   per-backend tests ([`backend_tests!`]) (feature `stores`);
//! - [`screen`]: a ratatui test terminal's screen as text (feature `tui`);
//! - [`tui`]: the TUI tests' fixtures: fixed tasks, ids and clock, a real
//!   store an app reads its rows from, keys (feature `tui`);
//! - [`wait_for`]: polling for a state with a deadline.

use std::time::{Duration, Instant};

#[cfg(feature = "stores")]
pub mod feed;
pub mod fuzzing;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "stores")]
pub mod pg;
pub mod rng;
#[cfg(feature = "tui")]
pub mod screen;
#[cfg(feature = "stores")]
pub mod stores;
#[cfg(feature = "stores")]
pub mod trail;
#[cfg(feature = "tui")]
pub mod tui;

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
