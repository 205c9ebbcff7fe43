use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::{FileMeta, Fs, FsFile, HeldLock, LockFailure, LockGuard};

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
        s.inodes.push(Inode {
            data: bytes.to_vec(),
            durable: bytes.to_vec(),
            mode: 0o600,
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
        let fs = self.fs.clone();
        match fs.enter(FsCall::Write(self.path.clone(), bytes.len())) {
            Ok(mut s) => {
                s.inodes[self.ino].data.extend_from_slice(bytes);
                Ok(())
            }
            Err(e) => {
                // A failing write may still have written part of the data.
                let mut s = fs.state();
                s.inodes[self.ino]
                    .data
                    .extend_from_slice(&bytes[..bytes.len() / 2]);
                Err(e)
            }
        }
    }

    fn sync(&mut self) -> io::Result<()> {
        let fs = self.fs.clone();
        let mut s = fs.enter(FsCall::Sync(self.path.clone()))?;
        let inode = &mut s.inodes[self.ino];
        inode.durable = inode.data.clone();
        Ok(())
    }
}

fn parent(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new(""))
}

impl Fs for SimFs {
    fn read(&self, path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
        let s = self.enter(FsCall::Read(path.to_path_buf()))?;
        match s.names.get(path) {
            Some(&i) if s.inodes[i].data.len() as u64 > limit => {
                Err(io::Error::from(io::ErrorKind::FileTooLarge))
            }
            Some(&i) => Ok(Some(s.inodes[i].data.clone())),
            None => Ok(None),
        }
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
        s.inodes.push(Inode {
            data: Vec::new(),
            durable: Vec::new(),
            mode,
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
        let ino = s
            .names
            .remove(from)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        s.names.insert(to.to_path_buf(), ino);
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
        s.names
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
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
        let _state = self
            .enter(FsCall::Lock(path.to_path_buf()))
            .map_err(LockFailure::Io)?;
        Ok(Box::new(SimLock))
    }
}

/// The one simulated process's lock, which nobody can take from it.
struct SimLock;

impl HeldLock for SimLock {
    fn still_held(&self) -> io::Result<bool> {
        Ok(true)
    }
}
