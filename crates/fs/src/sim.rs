use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::{FileMeta, Fs, FsFile, HeldLock, Identity, LockFailure, LockGuard, ReadFile, Record};

/// One call made to a [`SimFs`], as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsCall {
    Read(PathBuf),
    Mode(PathBuf),
    CreateDirAll(PathBuf),
    CreateNew(PathBuf),
    Write(PathBuf, usize),
    Sync(PathBuf),
    Rename(PathBuf, PathBuf),
    SyncDir(PathBuf),
    Remove(PathBuf),
    ListDir(PathBuf),
    Lock(PathBuf),
}

/// What survives a simulated power loss besides what was fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Only fsynced file data and fsynced directory entries survive: the
    /// harshest outcome a kernel may give.
    DropUnsynced,
    /// Directory changes (creations, renames, removals) all reached the disk
    /// but unsynced file data did not: what a file system that orders
    /// metadata before data may leave.
    KeepDirectoryChanges,
}

#[derive(Debug, Clone)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
    mode: u32,
    /// Data change and status change times, from the simulated clock.
    mtime: i128,
    ctime: i128,
    /// The times as of the last fsync.
    durable_times: (i128, i128),
}

#[derive(Debug, Default)]
struct State {
    inodes: Vec<Inode>,
    /// Directory entries as a reader sees them now.
    names: BTreeMap<PathBuf, usize>,
    /// Directory entries as of each directory's last fsync.
    durable_names: BTreeMap<PathBuf, usize>,
    calls: Vec<FsCall>,
    /// Fail the call with this index with this OS error.
    fail: Option<(usize, i32)>,
    /// Every call from this index on fails: the process has died.
    crash_after: Option<usize>,
    /// The simulated clock: every change of a file takes the next tick.
    clock: i128,
    /// What each lock file holds (not a simulated file: only the lock
    /// holder reads and writes it, and the lock takes no call to fail).
    lock_notes: BTreeMap<PathBuf, String>,
    /// Directories made append-only (`chattr +a`): entries may be created
    /// in them, never renamed or removed.
    append_only: std::collections::BTreeSet<PathBuf>,
}

impl State {
    fn tick(&mut self) -> i128 {
        self.clock += 1;
        self.clock
    }

    fn identity(&self, ino: usize) -> Identity {
        let inode = &self.inodes[ino];
        Identity {
            dev: 1,
            ino: ino as u64,
            size: inode.data.len() as u64,
            mtime_ns: inode.mtime,
            ctime_ns: inode.ctime,
        }
    }

    /// Record a change of the inode's data.
    fn touch(&mut self, ino: usize) {
        let now = self.tick();
        let inode = &mut self.inodes[ino];
        inode.mtime = now;
        inode.ctime = now;
    }
}

/// An in-memory file system that records every call, injects faults and
/// simulates power loss. Clones share the same state.
#[derive(Debug, Clone, Default)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

impl SimFs {
    pub fn new() -> Self {
        SimFs::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic in a test while holding the lock must not hide the state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Put a durable file in place (as if written and synced long ago).
    pub fn put_durable(&self, path: &Path, bytes: &[u8]) {
        let mut s = self.state();
        let ino = s.inodes.len();
        let now = s.tick();
        s.inodes.push(Inode {
            data: bytes.to_vec(),
            durable: bytes.to_vec(),
            mode: 0o600,
            mtime: now,
            ctime: now,
            durable_times: (now, now),
        });
        s.names.insert(path.to_path_buf(), ino);
        s.durable_names.insert(path.to_path_buf(), ino);
    }

    /// The current content of `path` as a reader sees it.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let s = self.state();
        s.names.get(path).map(|&i| s.inodes[i].data.clone())
    }

    /// The paths that exist now.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.state().names.keys().cloned().collect()
    }

    /// Change the file at `path` in place (as an editor or another program
    /// writing it without the lock would), keeping its inode.
    pub fn edit_in_place(&self, path: &Path, bytes: &[u8]) {
        let mut s = self.state();
        let ino = s.names[path];
        s.inodes[ino].data = bytes.to_vec();
        s.touch(ino);
    }

    /// What the lock file at `path` holds.
    pub fn lock_note(&self, path: &Path) -> Option<String> {
        self.state().lock_notes.get(path).cloned()
    }

    /// Put `text` into the lock file at `path`.
    pub fn set_lock_note(&self, path: &Path, text: &str) {
        self.state()
            .lock_notes
            .insert(path.to_path_buf(), text.to_string());
    }

    /// Make `dir` append-only, as `chattr +a` does.
    pub fn make_append_only(&self, dir: &Path) {
        self.state().append_only.insert(dir.to_path_buf());
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<FsCall> {
        self.state().calls.clone()
    }

    pub fn call_count(&self) -> usize {
        self.state().calls.len()
    }

    /// Make the call with index `index` (counting from 0 over the whole life
    /// of this file system) fail with OS error `errno`.
    pub fn fail_call(&self, index: usize, errno: i32) {
        self.state().fail = Some((index, errno));
    }

    /// Make every call from index `index` on fail, as if the process died
    /// there. Follow with [`SimFs::power_loss`].
    pub fn crash_after(&self, index: usize) {
        self.state().crash_after = Some(index);
    }

    /// Remove any injected fault or crash.
    pub fn heal(&self) {
        let mut s = self.state();
        s.fail = None;
        s.crash_after = None;
    }

    /// Lose power: keep only what `mode` says survives, then heal.
    pub fn power_loss(&self, mode: CrashMode) {
        let mut s = self.state();
        for inode in &mut s.inodes {
            inode.data = inode.durable.clone();
            (inode.mtime, inode.ctime) = inode.durable_times;
        }
        match mode {
            CrashMode::DropUnsynced => s.names = s.durable_names.clone(),
            CrashMode::KeepDirectoryChanges => s.durable_names = s.names.clone(),
        }
        s.fail = None;
        s.crash_after = None;
    }

    /// Record a call and decide whether it fails.
    fn enter(&self, call: FsCall) -> io::Result<MutexGuard<'_, State>> {
        let mut s = self.state();
        let index = s.calls.len();
        s.calls.push(call);
        if s.crash_after.is_some_and(|c| index >= c) {
            return Err(io::Error::other("simulated crash: the process is gone"));
        }
        if let Some((i, errno)) = s.fail
            && i == index
        {
            return Err(io::Error::from_raw_os_error(errno));
        }
        Ok(s)
    }
}

struct SimFile {
    fs: SimFs,
    path: PathBuf,
    ino: usize,
}

impl FsFile for SimFile {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write_all_vectored(&[bytes])
    }

    fn write_all_vectored(&mut self, parts: &[&[u8]]) -> io::Result<()> {
        let fs = self.fs.clone();
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let (mut s, result, mut keep) = match fs.enter(FsCall::Write(self.path.clone(), total)) {
            Ok(s) => (s, Ok(()), total),
            // A failing write may still have written part of the data.
            Err(e) => (fs.state(), Err(e), total / 2),
        };
        for part in parts {
            let n = keep.min(part.len());
            s.inodes[self.ino].data.extend_from_slice(&part[..n]);
            keep -= n;
        }
        s.touch(self.ino);
        result
    }

    fn sync(&mut self) -> io::Result<()> {
        let fs = self.fs.clone();
        let mut s = fs.enter(FsCall::Sync(self.path.clone()))?;
        let inode = &mut s.inodes[self.ino];
        inode.durable = inode.data.clone();
        inode.durable_times = (inode.mtime, inode.ctime);
        Ok(())
    }

    fn settle(&mut self) -> io::Result<Option<Identity>> {
        let mut s = self.fs.state();
        let now = s.tick();
        s.inodes[self.ino].ctime = now;
        Ok(Some(s.identity(self.ino)))
    }

    fn identity(&self) -> io::Result<Option<Identity>> {
        Ok(Some(self.fs.state().identity(self.ino)))
    }
}

fn parent(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new(""))
}

impl Fs for SimFs {
    fn read_identified(&self, path: &Path, limit: u64) -> io::Result<Option<ReadFile>> {
        let s = self.enter(FsCall::Read(path.to_path_buf()))?;
        match s.names.get(path) {
            Some(&i) if s.inodes[i].data.len() as u64 > limit => {
                Err(io::Error::from(io::ErrorKind::FileTooLarge))
            }
            Some(&i) => Ok(Some(ReadFile {
                bytes: s.inodes[i].data.clone(),
                identity: Some(s.identity(i)),
            })),
            None => Ok(None),
        }
    }

    fn recorded(&self, lock: &Path) -> Option<Record> {
        let note = self
            .state()
            .lock_notes
            .get(lock)
            .cloned()
            .unwrap_or_default();
        recorded_in(&note)
    }

    fn meta(&self, path: &Path) -> io::Result<Option<FileMeta>> {
        let s = self.enter(FsCall::Mode(path.to_path_buf()))?;
        Ok(s.names.get(path).map(|&i| FileMeta {
            mode: s.inodes[i].mode,
            ..FileMeta::private()
        }))
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let _state = self.enter(FsCall::CreateDirAll(dir.to_path_buf()))?;
        Ok(())
    }

    fn create_new(&self, path: &Path, meta: &FileMeta) -> io::Result<Box<dyn FsFile>> {
        let mode = meta.mode;
        let mut s = self.enter(FsCall::CreateNew(path.to_path_buf()))?;
        if s.names.contains_key(path) {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        let ino = s.inodes.len();
        let now = s.tick();
        s.inodes.push(Inode {
            data: Vec::new(),
            durable: Vec::new(),
            mode,
            mtime: now,
            ctime: now,
            durable_times: (now, now),
        });
        s.names.insert(path.to_path_buf(), ino);
        Ok(Box::new(SimFile {
            fs: self.clone(),
            path: path.to_path_buf(),
            ino,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.enter(FsCall::Rename(from.to_path_buf(), to.to_path_buf()))?;
        if s.append_only.contains(parent(from)) || s.append_only.contains(parent(to)) {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        let ino = s
            .names
            .remove(from)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        s.names.insert(to.to_path_buf(), ino);
        let now = s.tick();
        s.inodes[ino].ctime = now;
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.enter(FsCall::SyncDir(dir.to_path_buf()))?;
        let in_dir = |p: &PathBuf| parent(p) == dir;
        let mut durable: BTreeMap<PathBuf, usize> = s
            .durable_names
            .iter()
            .filter(|(p, _)| !in_dir(p))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        durable.extend(
            s.names
                .iter()
                .filter(|(p, _)| in_dir(p))
                .map(|(p, i)| (p.clone(), *i)),
        );
        s.durable_names = durable;
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.enter(FsCall::Remove(path.to_path_buf()))?;
        if s.append_only.contains(parent(path)) {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        s.names
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn check_replaceable(&self, dir: &Path, _store: &Path) -> io::Result<()> {
        match self.state().append_only.contains(dir) {
            true => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the store's directory is append-only",
            )),
            false => Ok(()),
        }
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let s = self.enter(FsCall::ListDir(dir.to_path_buf()))?;
        Ok(s.names
            .keys()
            .filter(|p| parent(p) == dir)
            .cloned()
            .collect())
    }

    fn lock(
        &self,
        path: &Path,
        _timeout: Duration,
        _store: &Path,
    ) -> Result<LockGuard, LockFailure> {
        // One simulated process: the lock only counts as a call that can fail.
        let s = self
            .enter(FsCall::Lock(path.to_path_buf()))
            .map_err(LockFailure::Io)?;
        let recorded = recorded_in(&s.lock_notes.get(path).cloned().unwrap_or_default());
        drop(s);
        let lock = SimLock {
            fs: self.clone(),
            path: path.to_path_buf(),
            recorded,
        };
        lock.record(recorded);
        Ok(Box::new(lock))
    }
}

/// The record a lock file's text holds ([`Record::from_text`]).
fn recorded_in(note: &str) -> Option<Record> {
    Record::from_text(note)
}

/// The one simulated process's lock, which nobody can take from it.
struct SimLock {
    fs: SimFs,
    path: PathBuf,
    recorded: Option<Record>,
}

impl HeldLock for SimLock {
    fn still_held(&self) -> io::Result<bool> {
        Ok(true)
    }

    fn recorded(&self) -> Option<Record> {
        self.recorded
    }

    fn record(&self, record: Option<Record>) {
        let mut text = String::from("pid 1\n");
        if let Some(record) = record {
            text += &record.to_lines();
        }
        self.fs.state().lock_notes.insert(self.path.clone(), text);
    }
}
