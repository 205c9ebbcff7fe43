//! The file-system seam: the handful of calls the writing protocol makes.
//!
//! Production uses [`RealFs`]; tests use [`SimFs`], which records every call,
//! can fail any one of them with an injected error, and can simulate a power
//! loss that drops whatever was not yet fsynced.

mod real;
mod sim;

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
pub trait HeldLock: Send {
    /// Whether the lock path still names the locked file. A cleanup script
    /// that deletes the lock file lets the next writer lock a new one, so a
    /// writer checks this just before it renames its write into place, and
    /// starts over when it lost.
    fn still_held(&self) -> io::Result<bool>;
}

/// A held lock; dropping it releases the lock.
pub type LockGuard = Box<dyn HeldLock>;

/// Who owns a file and its permission bits: what a rewrite must keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMeta {
    /// The permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl FileMeta {
    /// What a new store gets: private to the user creating it.
    pub fn private() -> Self {
        // SAFETY: geteuid and getegid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        FileMeta {
            mode: 0o600,
            uid,
            gid,
        }
    }
}

/// The calls of the writing protocol.
pub trait Fs: Send + Sync {
    /// The file's bytes, `None` if it does not exist. A file longer than
    /// `limit` bytes is an error of kind `FileTooLarge`, found without
    /// reading it; anything but a regular file (a FIFO, a device, a
    /// directory) is an error of kind `InvalidInput`, found without blocking
    /// and without reading it.
    fn read(&self, path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>>;
    /// The owner, group and permission bits of `path`, `None` if it does not
    /// exist.
    fn meta(&self, path: &Path) -> io::Result<Option<FileMeta>>;
    /// Create `dir` and its parents (0700) if missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Create a new file that must not exist yet, with exactly `meta`'s
    /// mode, and its owner and group where the process may set them.
    fn create_new(&self, path: &Path, meta: &FileMeta) -> io::Result<Box<dyn FsFile>>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// `fsync` a directory, making renames and creations in it durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// The paths of the entries of `dir`.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<std::path::PathBuf>>;
    /// Take the exclusive lock on the sidecar lock file `path` (created with
    /// the owner, group and mode of the store at `store`, or private when
    /// there is none yet; never deleted), waiting at most `timeout`. The lock
    /// is held on the file the path names once it is held: a lock file
    /// removed or replaced meanwhile is locked anew. A lock path that is not
    /// a regular file with one link is refused (kind `InvalidInput`).
    fn lock(&self, path: &Path, timeout: Duration, store: &Path) -> Result<LockGuard, LockFailure>;
}
