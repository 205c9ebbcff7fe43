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
//!   `<db>.lock` (the JSON store's lock, [`rudder_file::fs::Fs::lock`],
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
    fn a_maps_line_reads_as_device_inode_and_path() {
        let m = parse_line(b"7f00-7f08 rw-s 00000000 08:01 123456     /tmp/a b/t.db-shm (deleted)")
            .unwrap();
        assert_eq!(m.ino, 123456);
        assert_eq!(m.dev, libc::makedev(8, 1));
        assert_eq!(m.path, b"/tmp/a b/t.db-shm (deleted)");
        assert!(parse_line(b"7f00-7f08 rw-p 00000000 00:00 0 ").is_none());
    }
}
