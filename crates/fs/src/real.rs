use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{
    DirBuilderExt, FileExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt,
};
use std::path::Path;
use std::time::{Duration, Instant};

use super::{
    FileMeta, Fs, FsFile, HeldLock, Identity, LockFailure, LockGuard, ReadFile, ReadSeek, Record,
};

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

struct RealFile(File);

/// At most this many buffers go to one `writev` (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;

impl FsFile for RealFile {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.write_all(bytes)
    }

    fn write_all_vectored(&mut self, parts: &[&[u8]]) -> io::Result<()> {
        let mut parts: Vec<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
        let mut start = 0;
        while start < parts.len() {
            let batch: Vec<io::IoSlice> = parts[start..(start + IOV_MAX).min(parts.len())]
                .iter()
                .map(|p| io::IoSlice::new(p))
                .collect();
            let mut written = match self.0.write_vectored(&batch) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            // Skip what was written: whole parts, then the start of one.
            while written > 0 {
                let part = &mut parts[start];
                if written >= part.len() {
                    written -= part.len();
                    start += 1;
                } else {
                    *part = &part[written..];
                    written = 0;
                }
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_all()
    }

    fn settle(&mut self) -> io::Result<Option<Identity>> {
        let start = Instant::now();
        let mut first = true;
        loop {
            let id = identity(&self.0.metadata()?);
            if id.settled() {
                return Ok(Some(id));
            }
            if start.elapsed() > SETTLE_WAIT {
                return Ok(None);
            }
            if !first {
                std::thread::sleep(Duration::from_micros(100));
            }
            first = false;
            // Setting the same mode again stamps the status-change time
            // with the current time (and changes nothing else).
            let mode = self.0.metadata()?.permissions().mode() & 0o7777;
            self.0.set_permissions(fs::Permissions::from_mode(mode))?;
        }
    }

    fn identity(&self) -> io::Result<Option<Identity>> {
        Ok(Some(identity(&self.0.metadata()?)))
    }
}

/// How long [`FsFile::settle`] waits for the file-system clock to move: a
/// few of the kernel's coarse clock ticks. (A file system whose times are
/// whole seconds gives up here; its next writer checks the whole file.)
const SETTLE_WAIT: Duration = Duration::from_millis(12);

fn identity(m: &fs::Metadata) -> Identity {
    Identity {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
    }
}

/// `O_NONBLOCK`: opening a FIFO must never wait for a writer to appear.
const OPEN_FLAGS: i32 = libc::O_NONBLOCK | libc::O_CLOEXEC;

/// The regular file at `path` opened for reading, and its length; `None`
/// if it does not exist. Checked on the open descriptor, so nothing can be
/// swapped in between: a device is never read, a FIFO never waited on.
fn open_regular(path: &Path, limit: u64) -> io::Result<Option<(File, u64)>> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(OPEN_FLAGS)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(not_regular(&meta, "the store"));
    }
    let len = meta.len();
    if len > limit {
        return Err(io::Error::from(io::ErrorKind::FileTooLarge));
    }
    Ok(Some((file, len)))
}

impl Fs for RealFs {
    fn read_identified(&self, path: &Path, limit: u64) -> io::Result<Option<ReadFile>> {
        let Some((file, len)) = open_regular(path, limit)? else {
            return Ok(None);
        };
        let mut bytes = Vec::with_capacity(len as usize + 1);
        let mut file = file.take(limit + 1);
        file.read_to_end(&mut bytes)?;
        // After reading: a change made while we read shows here.
        let identity = Some(identity(&file.into_inner().metadata()?));
        Ok(Some(ReadFile { bytes, identity }))
    }

    fn read_into(
        &self,
        path: &Path,
        limit: u64,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<Option<Identity>>> {
        buf.clear();
        let Some((file, len)) = open_regular(path, limit)? else {
            return Ok(None);
        };
        buf.reserve(len as usize + 1);
        let mut file = file.take(limit + 1);
        file.read_to_end(buf)?;
        // After reading: a change made while we read shows here.
        Ok(Some(Some(identity(&file.into_inner().metadata()?))))
    }

    fn identity(&self, path: &Path) -> io::Result<Option<Identity>> {
        match fs::metadata(path) {
            Ok(m) => Ok(Some(identity(&m))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn open_read(&self, path: &Path, limit: u64) -> io::Result<Option<Box<dyn ReadSeek>>> {
        Ok(open_regular(path, limit)?.map(|(file, _)| Box::new(file) as Box<dyn ReadSeek>))
    }

    fn recorded(&self, lock: &Path) -> Option<Record> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(OPEN_FLAGS | libc::O_NOFOLLOW)
            .open(lock)
            .ok()?;
        let meta = file.metadata().ok()?;
        if !meta.file_type().is_file() {
            return None;
        }
        recorded_record(&file)
    }

    fn meta(&self, path: &Path) -> io::Result<Option<FileMeta>> {
        match fs::metadata(path) {
            Ok(m) => Ok(Some(FileMeta {
                mode: m.permissions().mode() & 0o7777,
                uid: m.uid(),
                gid: m.gid(),
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }

    fn create_new(&self, path: &Path, meta: &FileMeta) -> io::Result<Box<dyn FsFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)?;
        if let Err(e) = take_owner_and_mode(&file, meta) {
            let _ = fs::remove_file(path);
            return Err(e);
        }
        Ok(Box::new(RealFile(file)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        match fs::remove_file(path) {
            // A directory that forbids removals (append-only) must not keep
            // a full copy of the store per refused write: empty it instead.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                if let Ok(f) = OpenOptions::new()
                    .write(true)
                    .custom_flags(OPEN_FLAGS | libc::O_NOFOLLOW)
                    .open(path)
                {
                    let _ = f.set_len(0);
                }
                Err(e)
            }
            other => other,
        }
    }

    fn check_replaceable(&self, dir: &Path, store: &Path) -> io::Result<()> {
        for (path, what) in [(dir, "the store's directory"), (store, "the store")] {
            let flags = match inode_flags(path) {
                Ok(flags) => flags,
                // No such file (a new store), or a file system without
                // these flags: nothing refuses the rename in advance.
                Err(_) => continue,
            };
            let kind = if flags & FS_IMMUTABLE_FL != 0 {
                "immutable"
            } else if flags & FS_APPEND_FL != 0 {
                "append-only"
            } else {
                continue;
            };
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{what} is {kind} (`lsattr -d` shows it), so no write can replace \
                     the store; `chattr -{}` it (as root) to write again",
                    if kind == "immutable" { 'i' } else { 'a' }
                ),
            ));
        }
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<std::path::PathBuf>> {
        fs::read_dir(dir)?
            .map(|entry| entry.map(|e| e.path()))
            .collect()
    }

    fn lock(&self, path: &Path, timeout: Duration, store: &Path) -> Result<LockGuard, LockFailure> {
        let start = Instant::now();
        // This process's threads take turns first (see gate.rs).
        let passed =
            super::gate::pass(path, start + timeout).ok_or_else(|| LockFailure::Timeout {
                waited: start.elapsed(),
                holder: Some(format!("pid {} (this process)", std::process::id())),
            })?;
        let meta = self
            .meta(store)
            .map_err(LockFailure::Io)?
            .unwrap_or_else(|| {
                let dir = path.parent().and_then(|d| self.meta(d).ok().flatten());
                FileMeta::new_in(dir)
            });
        let meta = &meta;
        loop {
            // The lock file can vanish between our calls (a cleanup
            // script): then simply start over.
            let Some((file, writable)) = open_lock_file(path, meta).map_err(LockFailure::Io)?
            else {
                continue;
            };
            wait_for_flock(&file, start, timeout)?;
            // The lock counts only if the path still names the locked file:
            // a lock file deleted (or replaced) meanwhile by a cleanup script
            // would otherwise let a second writer in through a new file.
            let held = file.metadata().map_err(LockFailure::Io)?;
            let mut lock = RealLock {
                file,
                path: path.to_path_buf(),
                dev: held.dev(),
                ino: held.ino(),
                dir: None,
                writable,
                recorded: None,
                also: std::sync::Mutex::default(),
                passed: None,
            };
            if !lock.names_locked_file().map_err(LockFailure::Io)? {
                continue;
            }
            check_lock_file(&held).map_err(LockFailure::Io)?;
            // Then the directory, which nobody can delete while the store
            // is in it: a writer that locked a new lock file because a
            // cleanup script deleted ours waits here until we are done.
            // Best effort where the directory cannot be opened for reading.
            let dir = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if let Ok(d) = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
                .open(dir)
            {
                wait_for_flock(&d, start, timeout)?;
                lock.dir = Some(d);
            }
            lock.recorded = recorded_record(&lock.file);
            // Say who holds the lock, for the message of whoever times out
            // waiting, keeping the verified identity (a fact about the
            // store that stays true whoever holds the lock). Best effort:
            // the lock works without it. Safe to write: the file is a
            // regular file with one link, our own lock file.
            lock.record(lock.recorded);
            lock.passed = Some(passed);
            return Ok(Box::new(lock));
        }
    }
}

/// A held `flock` on the lock file `path` named when it was taken.
struct RealLock {
    /// Closing it releases the lock.
    file: File,
    path: std::path::PathBuf,
    dev: u64,
    ino: u64,
    /// The `flock` on the store's directory, taken after the lock file's.
    dir: Option<File>,
    /// Whether we may write the lock file.
    writable: bool,
    /// What the lock file recorded when we took the lock.
    recorded: Option<Record>,
    /// Lock files that took the place of ours while we held it, locked too
    /// (see [`HeldLock::still_held`]).
    also: std::sync::Mutex<Vec<File>>,
    /// This process's gate, opened last, once the `flock`s above are let
    /// go (fields drop in order).
    passed: Option<super::gate::Passed>,
}

impl RealLock {
    /// Whether the lock path still names the file this lock holds.
    fn names_locked_file(&self) -> io::Result<bool> {
        match fs::symlink_metadata(&self.path) {
            Ok(now) => Ok(now.dev() == self.dev && now.ino() == self.ino),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The identity the lock file records: its one `verified-store` line, if it
/// holds exactly one valid one among at most a few short lines.
fn recorded_record(file: &File) -> Option<Record> {
    let mut buf = [0u8; 4096];
    let n = file.read_at(&mut buf, 0).ok()?;
    Record::from_text(std::str::from_utf8(&buf[..n]).ok()?)
}

impl HeldLock for RealLock {
    fn still_held(&self) -> io::Result<bool> {
        if self.names_locked_file()? {
            return Ok(true);
        }
        // The lock file was deleted (or replaced) under us. Without the
        // directory lock, another writer may be in: start over.
        if self.dir.is_none() {
            return Ok(false);
        }
        // With it, every rudder writer is kept out, but a program following
        // the protocol with `flock` on the lock file alone may hold the file
        // that now stands at the path: then start over and wait for it;
        // else lock that file too (kept until we are done).
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(OPEN_FLAGS | libc::O_NOFOLLOW)
            .open(&self.path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(e),
        };
        match file.try_lock() {
            Ok(()) => {
                self.also
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(file);
                Ok(true)
            }
            Err(fs::TryLockError::WouldBlock) => Ok(false),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }

    fn recorded(&self) -> Option<Record> {
        self.recorded
    }

    fn record(&self, record: Option<Record>) {
        if !self.writable {
            return;
        }
        let mut text = format!("pid {}\n", std::process::id());
        if let Some(record) = record {
            text += &record.to_lines();
        }
        // Written over the old text, then cut to length: never truncated to
        // nothing first, which on ext4 (auto_da_alloc) would force the lock
        // file's data out with the store's fsync. A reader that catches it
        // half written sees a line that is not a record (ignored), or one
        // that matches no file but the one it names.
        if self.file.write_at(text.as_bytes(), 0).is_ok() {
            let _ = self.file.set_len(text.len() as u64);
        }
    }
}

/// Open (or create, with the store's owner and mode) the lock file, never
/// following a symlink and never blocking on a FIFO. Read-only when the
/// process may not write it (flock needs no write access): the bool says
/// whether it is writable; `None` when it vanished while being opened.
fn open_lock_file(path: &Path, meta: &FileMeta) -> io::Result<Option<(File, bool)>> {
    let flags = OPEN_FLAGS | libc::O_NOFOLLOW;
    match OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(flags)
        .open(path)
    {
        Ok(file) => {
            // Best effort: a lock file with the wrong owner is still a lock.
            let _ = take_owner_and_mode(&file, meta);
            return Ok(Some((file, true)));
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let opened = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(flags)
        .open(path)
    {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => OpenOptions::new()
            .read(true)
            .custom_flags(flags)
            .open(path)
            .map(|f| (f, false)),
        other => other.map(|f| (f, true)),
    };
    let (file, writable) = match opened {
        Ok(opened) => opened,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let m = file.metadata()?;
    if m.nlink() == 0 {
        return Ok(None);
    }
    check_lock_file(&m)?;
    // A lock file made before the store was shared (`chmod 660`, `chgrp
    // team` on the store after its first write) follows the store's mode
    // and group, so that the group sharing the store can take the lock
    // too. Only its owner (or root) may change them; best effort.
    let me = FileMeta::private().uid;
    if (m.uid() == me || me == 0)
        && (m.permissions().mode() & 0o7777 != meta.mode || m.gid() != meta.gid)
    {
        let mine = FileMeta {
            uid: m.uid(),
            ..*meta
        };
        let _ = take_owner_and_mode(&file, &mine);
    }
    Ok(Some((file, writable)))
}

/// A lock path must be a regular file with one link: anything else would
/// have the pid written into somebody else's file (a hard link) or hang.
fn check_lock_file(m: &fs::Metadata) -> io::Result<()> {
    if !m.file_type().is_file() {
        return Err(not_regular(m, "the lock file"));
    }
    if m.nlink() != 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the lock file has {} hard links; a lock file must have exactly one \
                 (another name for it could be anybody's file): remove it and retry",
                m.nlink()
            ),
        ));
    }
    Ok(())
}

fn wait_for_flock(file: &File, start: Instant, timeout: Duration) -> Result<(), LockFailure> {
    let mut pause = Duration::from_micros(200);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(fs::TryLockError::WouldBlock) => {
                if start.elapsed() >= timeout {
                    return Err(LockFailure::Timeout {
                        waited: start.elapsed(),
                        holder: holder(file),
                    });
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(fs::TryLockError::Error(e)) => return Err(LockFailure::Io(e)),
        }
    }
}

/// Give a new file exactly `meta`'s mode (open's mode is masked by the
/// umask), and its owner and group when they differ from the process's and
/// it may set them (root may; a member of the group may set the group).
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn take_owner_and_mode(file: &File, meta: &FileMeta) -> io::Result<()> {
    let mine = file.metadata()?;
    if mine.uid() != meta.uid || mine.gid() != meta.gid {
        let uid = if mine.uid() != meta.uid {
            meta.uid
        } else {
            u32::MAX
        };
        // SAFETY: fchown on a descriptor we own; (uid_t)-1 leaves the owner.
        let rc = unsafe { libc::fchown(file.as_raw_fd(), uid, meta.gid) };
        if rc != 0 && uid != u32::MAX {
            // Not root: keep at least the group, which is what lets the
            // other members of a shared store go on writing it.
            // SAFETY: as above.
            unsafe { libc::fchown(file.as_raw_fd(), u32::MAX, meta.gid) };
        }
    }
    // After fchown, which clears set-id bits.
    file.set_permissions(fs::Permissions::from_mode(meta.mode))
}

/// The inode flags `chattr` sets (`linux/fs.h`).
const FS_IMMUTABLE_FL: libc::c_int = 0x10;
const FS_APPEND_FL: libc::c_int = 0x20;

/// `FS_IOC_GETFLAGS` of `path` (Linux; an error elsewhere or where the file
/// system has no such flags).
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn inode_flags(path: &Path) -> io::Result<libc::c_int> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(OPEN_FLAGS)
        .open(path)?;
    let mut flags: libc::c_int = 0;
    // SAFETY: the ioctl writes one int into `flags`, which outlives the call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(flags)
}

/// The error for a path that is `m`, not a regular file: which kind it is
/// (`what` names the path: "the store").
pub fn not_regular(m: &fs::Metadata, what: &str) -> io::Error {
    let t = m.file_type();
    let kind = if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what} is {kind}; rudder only reads and writes regular files"),
    )
}

/// Who holds the lock on `file`: the process the kernel names in
/// `/proc/locks` (Linux), else the pid the last holder wrote into the file.
fn holder(file: &File) -> Option<String> {
    if let Ok(meta) = file.metadata()
        && let Some(pid) = flock_holder(meta.ino())
    {
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let comm = comm.trim();
        return Some(if comm.is_empty() {
            format!("pid {pid}")
        } else {
            format!("pid {pid} ({comm})")
        });
    }
    let mut written = String::new();
    let _ = file.take(4096).read_to_string(&mut written);
    // The first line names the holder; the store identity is no news.
    let written = written.lines().next().unwrap_or_default().trim();
    (!written.is_empty()).then(|| format!("{written} (as last recorded in the lock file)"))
}

/// The pid holding an `flock` on inode `ino`, from `/proc/locks`, whose lines
/// read `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`.
fn flock_holder(ino: u64) -> Option<u32> {
    let locks = fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (kind, pid, dev_ino) = (fields.get(1)?, fields.get(4)?, fields.get(5)?);
        let lock_ino: u64 = dev_ino.rsplit(':').next()?.parse().ok()?;
        (*kind == "FLOCK" && lock_ino == ino).then(|| pid.parse().ok())?
    })
}

/// Whether this process certainly cannot write the store at `path` (a file
/// replaced by a rename, or a database with files beside it: both need the
/// directory): why, for a reader to say it reads only. `None` when it may
/// (a write may still fail for another reason), or when nothing tells.
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
pub fn cannot_write(path: &Path) -> Option<String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let check = |path: &Path| -> Option<String> {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
        #[allow(unsafe_code)]
        // SAFETY: a NUL-terminated path that outlives the call, which only
        // reads it.
        let rc =
            unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
        if rc == 0 {
            return None;
        }
        let e = io::Error::last_os_error();
        (e.kind() != io::ErrorKind::NotFound)
            .then(|| format!("{} cannot be written by this user ({e})", path.display()))
    };
    check(path).or_else(|| check(dir))
}
