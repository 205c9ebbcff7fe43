//! The file-system seam: the handful of calls the writing protocol makes.
//!
//! Production uses [`RealFs`]; tests use [`SimFs`], which records every call,
//! can fail any one of them with an injected error, and can simulate a power
//! loss that drops whatever was not yet fsynced.

mod real;
mod sim;

use std::any::Any;
use std::io;
use std::path::Path;
use std::time::Duration;

pub use real::RealFs;
pub use sim::{CrashMode, FsCall, SimFs};

/// A temporary file being written.
pub trait FsFile: Send {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// `fsync`: the data is durable when this returns.
    fn sync(&mut self) -> io::Result<()>;
}

/// Why the store lock could not be taken.
#[derive(Debug)]
pub enum LockFailure {
    /// Another process held it for longer than the timeout; `holder` is what
    /// the last holder wrote into the lock file (its pid), if anything.
    Timeout {
        waited: Duration,
        holder: Option<String>,
    },
    Io(io::Error),
}

/// A held lock; dropping it releases the lock.
pub type LockGuard = Box<dyn Any + Send>;

/// The calls of the writing protocol.
pub trait Fs: Send + Sync {
    /// The file's bytes, `None` if it does not exist. A file longer than
    /// `limit` bytes is an error of kind `FileTooLarge`, found without
    /// reading it.
    fn read(&self, path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>>;
    /// The permission bits of `path`, `None` if it does not exist.
    fn mode(&self, path: &Path) -> io::Result<Option<u32>>;
    /// Create `dir` and its parents (0700) if missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Create a new file that must not exist yet, with exactly `mode`.
    fn create_new(&self, path: &Path, mode: u32) -> io::Result<Box<dyn FsFile>>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// `fsync` a directory, making renames and creations in it durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// The paths of the entries of `dir`.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<std::path::PathBuf>>;
    /// Take the exclusive lock on the sidecar lock file `path` (created 0600
    /// if missing, never deleted), waiting at most `timeout`.
    fn lock(&self, path: &Path, timeout: Duration) -> Result<LockGuard, LockFailure>;
}
