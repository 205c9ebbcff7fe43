//! What rudder's JSON file store and SQLite store share, and nothing else
//! needs: the file-system seam (the handful of calls the writing protocol
//! makes, lock files with a timeout, atomic writes), the names of the files
//! beside a store ([`names`]), and directory watching ([`watch`]), the
//! wake-up of both stores' change feeds.
//!
//! Production uses [`RealFs`]; tests use [`SimFs`], which records every call,
//! can fail any one of them with an injected error, and can simulate a power
//! loss that drops whatever was not yet fsynced.

mod gate;
pub mod names;
mod real;
mod sim;
pub mod watch;

pub use names::{deliveries_name, lock_name, temp_name, temp_pid};

use std::io;
use std::path::Path;
use std::time::Duration;

pub use real::{RealFs, cannot_write, not_regular};
pub use sim::{CrashMode, FsCall, SimFs};

/// A file being read a part at a time (see [`Fs::open_read`]).
pub trait ReadSeek: io::Read + io::Seek + Send {}

impl<T: io::Read + io::Seek + Send> ReadSeek for T {}

/// A temporary file being written.
pub trait FsFile: Send {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Write `parts` one after the other, as one call (a vectored write on
    /// a real file). A failing write may have written part of the data.
    fn write_all_vectored(&mut self, parts: &[&[u8]]) -> io::Result<()>;
    /// `fsync`: the data is durable when this returns.
    fn sync(&mut self) -> io::Result<()>;
    /// After the last write and before the rename: the file's identity,
    /// once the file-system clock has moved past the time of its last
    /// write (see [`Identity::settled`]); `None` when it cannot tell or the
    /// clock does not move within a few milliseconds. Changes only the
    /// file's status-change time.
    fn settle(&mut self) -> io::Result<Option<Identity>>;
    /// The file's identity now (`fstat`), `None` where there is none.
    fn identity(&self) -> io::Result<Option<Identity>>;
}

/// What tells one version of a file's content from every other: the file
/// (device and inode), its size, and the times of its last data change
/// (`mtime`) and last status change (`ctime`), in nanoseconds.
///
/// A writer that verified the store it wrote records its identity in the
/// lock file; the next writer skips checking the untouched tasks again only
/// if the file it reads has exactly that identity (see
/// `docs/durability.md`, "Skipping the check of a file rudder verified").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl Identity {
    /// The data was last written strictly before the inode's last status
    /// change (for a store rudder wrote: the rename that made it the store).
    /// Only then does any later write of the data, which stamps the current
    /// time as `mtime`, necessarily change the identity: one settled
    /// identity names one content.
    pub fn settled(&self) -> bool {
        self.mtime_ns < self.ctime_ns
    }

    /// The line the lock file keeps it in.
    pub fn to_line(&self) -> String {
        format!("{VERIFIED} {}", self.fields())
    }

    /// `dev ino size mtime ctime`, as a record's lines hold them
    /// ([`Identity::from_fields`]).
    fn fields(&self) -> String {
        format!(
            "{} {} {} {} {}",
            self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns
        )
    }

    /// The identity a line of the lock file records, if it is exactly such
    /// a line ([`Identity::to_line`]); anything else is ignored.
    pub fn from_line(line: &str) -> Option<Identity> {
        Identity::from_fields(line.strip_prefix(VERIFIED)?.strip_prefix(' ')?)
    }

    /// The identity `dev ino size mtime ctime` of a record's line.
    fn from_fields(text: &str) -> Option<Identity> {
        let mut fields = text.split(' ');
        let mut next = || -> Option<&str> {
            let f = fields.next()?;
            let digits = f.strip_prefix('-').unwrap_or(f);
            let plain = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
            plain.then_some(f)
        };
        let id = Identity {
            dev: next()?.parse().ok()?,
            ino: next()?.parse().ok()?,
            size: next()?.parse().ok()?,
            mtime_ns: next()?.parse().ok()?,
            ctime_ns: next()?.parse().ok()?,
        };
        fields.next().is_none().then_some(id)
    }
}

/// How a lock file's line with a verified store's identity starts.
const VERIFIED: &str = "verified-store";

/// How a lock file's line saying that every task's text of the verified
/// store is its encoder's starts ([`Record::canonical`]).
const CANONICAL: &str = "canonical-store";

/// What a writer recorded in the lock file of the store file it checked or
/// wrote: the file's identity, and whether every task's text in that file
/// is exactly what an encoder writes for the task the text reads back as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub identity: Identity,
    /// The version of the encoder that vouches for every task's text of the
    /// file (the store crate says what it means), `None` when nobody does
    /// (the file holds text another program wrote, or a writer of a
    /// version that did not say).
    pub canonical: Option<u32>,
}

impl Record {
    /// A record of `identity` alone.
    pub fn verified(identity: Identity) -> Self {
        Record {
            identity,
            canonical: None,
        }
    }

    /// The lines the lock file keeps it in, each ending in a line break.
    /// The canonical line repeats the identity: a reader that catches the
    /// lock file half rewritten can then never pair one file's identity
    /// with another's canonical mark.
    pub fn to_lines(&self) -> String {
        let mut text = self.identity.to_line();
        text.push('\n');
        if let Some(version) = self.canonical {
            text += &format!("{CANONICAL} {version} {}\n", self.identity.fields());
        }
        text
    }

    /// The record a lock file's text holds: its one `verified-store` line
    /// ([`Identity::to_line`]), and the canonical mark of its one
    /// `canonical-store` line if that names the same identity. Anything
    /// else (no line, two of them, a line cut short) records nothing.
    pub fn from_text(text: &str) -> Option<Record> {
        let one = |prefix: &str| {
            let mut found = text.lines().filter(|l| l.starts_with(prefix));
            match (found.next(), found.next()) {
                (Some(line), None) => Some(line),
                _ => None,
            }
        };
        let identity = Identity::from_line(one(VERIFIED)?)?;
        let canonical = one(CANONICAL).and_then(|line| {
            let (version, id) = line
                .strip_prefix(CANONICAL)?
                .strip_prefix(' ')?
                .split_once(' ')?;
            let plain = !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit());
            let version: u32 = version.parse().ok().filter(|_| plain)?;
            (Identity::from_fields(id)? == identity).then_some(version)
        });
        Some(Record {
            identity,
            canonical,
        })
    }
}

/// A store file's bytes and the identity they were read with.
pub struct ReadFile {
    pub bytes: Vec<u8>,
    /// `fstat` of the descriptor the bytes were read from, after reading;
    /// `None` where the file system has no such thing.
    pub identity: Option<Identity>,
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
    /// The record the lock file held when the lock was taken
    /// ([`Record::from_text`]).
    fn recorded(&self) -> Option<Record>;
    /// Replace the identity kept in the lock file (best effort; the pid line
    /// stays). Only a holder that checked the store file with this identity
    /// (or wrote it from checked tasks) records it.
    fn record(&self, record: Option<Record>);
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
    /// What a new file in a directory with `dir`'s metadata gets: private to
    /// the user creating it, in the directory's group when the directory is
    /// set-group-ID (as the kernel gives it: a shared team directory), else
    /// in the user's own group.
    pub fn new_in(dir: Option<FileMeta>) -> Self {
        let mut meta = FileMeta::private();
        if let Some(dir) = dir.filter(|d| d.mode & 0o2000 != 0) {
            meta.gid = dir.gid;
        }
        meta
    }

    /// What a new store gets: private to the user creating it.
    #[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
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
    fn read(&self, path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
        Ok(self.read_identified(path, limit)?.map(|r| r.bytes))
    }
    /// [`Fs::read`], with the identity of what was read.
    fn read_identified(&self, path: &Path, limit: u64) -> io::Result<Option<ReadFile>>;
    /// [`Fs::read_identified`] into `buf` (emptied first, its allocation
    /// kept: for a reader that reads one large file again and again): `None`
    /// if the file does not exist, else the identity of what was read.
    fn read_into(
        &self,
        path: &Path,
        limit: u64,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<Option<Identity>>> {
        buf.clear();
        Ok(self.read_identified(path, limit)?.map(|r| {
            *buf = r.bytes;
            r.identity
        }))
    }
    /// The identity of the file at `path` now, `None` if it does not exist
    /// or the file system has no such thing.
    fn identity(&self, _path: &Path) -> io::Result<Option<Identity>> {
        Ok(None)
    }
    /// The file opened for reading a part at a time, refused as
    /// [`Fs::read`] refuses it; `None` if it does not exist. Writers
    /// replace the file by a rename, never change it in place, so what the
    /// descriptor reads is one version of it, however long that takes.
    /// (By default it is read whole into memory first.)
    fn open_read(&self, path: &Path, limit: u64) -> io::Result<Option<Box<dyn ReadSeek>>> {
        Ok(self
            .read_identified(path, limit)?
            .map(|r| Box::new(io::Cursor::new(r.bytes)) as Box<dyn ReadSeek>))
    }
    /// The verified store identity the lock file at `lock` records (see
    /// [`HeldLock::recorded`]), read without taking the lock: for readers,
    /// to whom a record is as good a proof as to a writer.
    fn recorded(&self, _lock: &Path) -> Option<Record> {
        None
    }
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
    /// Whether a temp file in `dir` could be renamed over `store` and
    /// removed again, asked before one is written: an error (kind
    /// `PermissionDenied`) saying why not, for a directory or store that
    /// the file system refuses to change (append-only, immutable), where a
    /// temp file once created could never be removed.
    fn check_replaceable(&self, _dir: &Path, _store: &Path) -> io::Result<()> {
        Ok(())
    }
    /// Take the exclusive lock on the sidecar lock file `path` (created with
    /// the owner, group and mode of the store at `store`, or private when
    /// there is none yet; never deleted), waiting at most `timeout`. The lock
    /// is held on the file the path names once it is held: a lock file
    /// removed or replaced meanwhile is locked anew. A lock path that is not
    /// a regular file with one link is refused (kind `InvalidInput`).
    fn lock(&self, path: &Path, timeout: Duration, store: &Path) -> Result<LockGuard, LockFailure>;
}
