//! Writer exclusion that survives a deleted `-shm` file.
//!
//! SQLite's WAL index lives in the `-shm` file, memory-mapped by every
//! connection; its locks are what keep two writers apart and its header
//! says where the WAL ends. An operator who deletes `-shm` while processes
//! have the store open splits them: those that open the store afterwards
//! build a new index from the WAL, those that had it open keep the old one,
//! and a writer on one index appends over commits made on the other (lost
//! acknowledged writes, `integrity_check` still ok).
//!
//! So rudder does not rely on the `-shm` file alone:
//!
//! - every write transaction runs under rudder's own `flock` on the sidecar
//!   `<db>.lock` (the JSON store's lock, [`rudder_fs::Fs::lock`],
//!   which survives its own deletion), so rudder's writers take turns
//!   whatever happened to `-shm`;
//! - under that lock, before writing, the writer checks that the `-shm`
//!   file its process has mapped is still the one at the path (Linux:
//!   `/proc/self/maps` against `stat`); if not, it reopens its connection,
//!   which maps the current file (an index built from the WAL, holding every
//!   commit so far, since no commit can happen while we hold the lock);
//! - after committing, still under the lock, it checks again: a `-shm`
//!   deleted during the transaction may have let another process build an
//!   index that lacks this commit, so the writer removes that file too, and
//!   whoever opens the store next builds the index again from the WAL.
//!
//! Readers take no lock; one that finds its index stale reopens before it
//! reads. Where `/proc/self/maps` cannot be read the check reports
//! [`Index::Unknown`] and writers rely on the lock and SQLite alone.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bumped whenever a connection of this process found the `-shm` file
/// replaced: every connection opened before is dropped at its next use, so
/// that the process lets go of the old mapping (SQLite shares one mapping
/// between all connections of a process to one database).
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// The current epoch, recorded by a connection when it is opened.
pub(super) fn epoch() -> u64 {
    EPOCH.load(Ordering::Acquire)
}

/// Tell every connection of this process to reopen.
pub(super) fn bump_epoch() {
    EPOCH.fetch_add(1, Ordering::AcqRel);
}

/// Whether this process's WAL index of a database is the `-shm` file at
/// its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Index {
    /// No mapping of the `-shm` file (no connection, or not in WAL mode),
    /// or a mapping of the file at the path.
    Current,
    /// A mapping of a `-shm` file that is no longer at the path.
    Stale,
    /// Cannot tell (no `/proc/self/maps`).
    Unknown,
}

/// The `-shm` path of a database as the kernel names the mapped file:
/// SQLite follows symlinks to the database and puts `-shm` beside it.
pub(super) fn shm_path(db: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(db).ok()?;
    let mut name = real.into_os_string();
    name.push("-shm");
    Some(PathBuf::from(name))
}

/// Compare this process's mappings of `shm` with the file at `shm` now.
pub(super) fn check(shm: &Path) -> Index {
    let Ok(maps) = std::fs::read("/proc/self/maps") else {
        return Index::Unknown;
    };
    let at_path = match std::fs::metadata(shm) {
        Ok(m) => Some((m.dev(), m.ino())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(_) => return Index::Unknown,
    };
    let wanted = shm.as_os_str().as_encoded_bytes();
    let mut state = Index::Current;
    for line in maps.split(|&b| b == b'\n') {
        let Some(mapping) = parse_line(line) else {
            continue;
        };
        let (path, deleted) = match mapping.path.strip_suffix(b" (deleted)") {
            Some(p) => (p, true),
            None => (mapping.path, false),
        };
        if path != wanted {
            continue;
        }
        let same = !deleted && at_path == Some((mapping.dev, mapping.ino));
        if !same {
            state = Index::Stale;
        }
    }
    state
}

/// A file's identity: device, inode, and birth time where the file system
/// keeps one (an inode number freed by a deleted file may be given to a
/// later one; its birth time tells the two apart).
type FileId = (u64, u64, Option<std::time::SystemTime>);

fn file_id(shm: &Path) -> Option<FileId> {
    let m = std::fs::metadata(shm).ok()?;
    Some((m.dev(), m.ino(), m.created().ok()))
}

/// [`check`] for one connection, remembering the `-shm` file it last found
/// its index to be: while the file at the path is still that one, the
/// index is still current, and one `stat` says so instead of a read of
/// `/proc/self/maps` (about 100 µs in a busy process, on every read).
#[derive(Debug, Default)]
pub(super) struct Checked {
    current: Option<FileId>,
}

impl Checked {
    pub(super) fn check(&mut self, shm: &Path) -> Index {
        // Taken before the full check: if the file changes in between, the
        // identity kept is the older one, and the next call checks again.
        let now = file_id(shm);
        if now.is_some() && now == self.current {
            return Index::Current;
        }
        let state = check(shm);
        self.current = now.filter(|_| state == Index::Current);
        state
    }
}

/// One line of `/proc/self/maps`:
/// `start-end perms offset major:minor inode    path`.
struct Mapping<'a> {
    dev: u64,
    ino: u64,
    path: &'a [u8],
}

fn parse_line(line: &[u8]) -> Option<Mapping<'_>> {
    let mut rest = line;
    let mut field = || -> Option<&[u8]> {
        let start = rest.iter().position(|&b| b != b' ')?;
        rest = &rest[start..];
        let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
        let (f, r) = rest.split_at(end);
        rest = r;
        Some(f)
    };
    let _range = field()?;
    let _perms = field()?;
    let _offset = field()?;
    let dev = std::str::from_utf8(field()?).ok()?;
    let ino = std::str::from_utf8(field()?).ok()?.parse().ok()?;
    let start = rest.iter().position(|&b| b != b' ')?;
    let path = &rest[start..];
    let (major, minor) = dev.split_once(':')?;
    let major = u32::from_str_radix(major, 16).ok()?;
    let minor = u32::from_str_radix(minor, 16).ok()?;
    Some(Mapping {
        dev: libc::makedev(major, minor),
        ino,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
    fn a_replaced_file_is_checked_again() {
        let dir = tempfile::tempdir().unwrap();
        let shm = dir.path().join("t.db-shm");
        std::fs::write(&shm, b"index").unwrap();
        let mut checked = Checked::default();
        // Not mapped by this process: current, and remembered.
        assert_eq!(checked.check(&shm), Index::Current);
        assert_eq!(checked.current, file_id(&shm));
        // Mapped, then replaced at its path: the mapping is stale, which
        // the remembered identity must not hide.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&shm)
            .unwrap();
        // SAFETY: a shared read-only mapping of a file this test owns,
        // unmapped below before the file is dropped.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                5,
                libc::PROT_READ,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        assert_eq!(checked.check(&shm), Index::Current);
        // Deleted and made again, as SQLite does after an operator's `rm`.
        std::fs::remove_file(&shm).unwrap();
        std::fs::write(&shm, b"index").unwrap();
        assert_eq!(checked.check(&shm), Index::Stale);
        assert_eq!(checked.current, None);
        // SAFETY: the mapping made above, of 5 bytes.
        unsafe { libc::munmap(map, 5) };
    }

    #[test]
    fn a_maps_line_reads_as_device_inode_and_path() {
        let m = parse_line(b"7f00-7f08 rw-s 00000000 08:01 123456     /tmp/a b/t.db-shm (deleted)")
            .unwrap();
        assert_eq!(m.ino, 123456);
        assert_eq!(m.dev, libc::makedev(8, 1));
        assert_eq!(m.path, b"/tmp/a b/t.db-shm (deleted)");
        assert!(parse_line(b"7f00-7f08 rw-p 00000000 00:00 0 ").is_none());
    }
}
