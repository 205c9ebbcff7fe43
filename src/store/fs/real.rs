use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use super::{Fs, FsFile, LockFailure, LockGuard};

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

struct RealFile(File);

impl FsFile for RealFile {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.write_all(bytes)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_all()
    }
}

impl Fs for RealFs {
    fn read(&self, path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        let mut bytes = Vec::with_capacity(len.min(limit) as usize + 1);
        file.take(limit + 1).read_to_end(&mut bytes)?;
        Ok(Some(bytes))
    }

    fn mode(&self, path: &Path) -> io::Result<Option<u32>> {
        match fs::metadata(path) {
            Ok(m) => Ok(Some(m.permissions().mode() & 0o7777)),
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

    fn create_new(&self, path: &Path, mode: u32) -> io::Result<Box<dyn FsFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        // open()'s mode is masked by the umask; set the bits exactly.
        if let Err(e) = file.set_permissions(fs::Permissions::from_mode(mode)) {
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
        fs::remove_file(path)
    }

    fn lock(&self, path: &Path, timeout: Duration) -> Result<LockGuard, LockFailure> {
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(LockFailure::Io)?;
        if !existed {
            // Whatever the umask, the lock file is private like the store.
            let _ = file.set_permissions(fs::Permissions::from_mode(0o600));
        }
        let start = Instant::now();
        let mut pause = Duration::from_micros(200);
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(fs::TryLockError::WouldBlock) => {
                    if start.elapsed() >= timeout {
                        let mut holder = String::new();
                        let _ = (&file).read_to_string(&mut holder);
                        let holder = holder.trim();
                        return Err(LockFailure::Timeout {
                            waited: start.elapsed(),
                            holder: (!holder.is_empty()).then(|| holder.to_string()),
                        });
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Err(fs::TryLockError::Error(e)) => return Err(LockFailure::Io(e)),
            }
        }
        // Say who holds the lock, for the message of whoever times out
        // waiting. Best effort: the lock works without it.
        let who = format!("pid {}\n", std::process::id());
        if file.set_len(0).is_ok() {
            let _ = file.write_at(who.as_bytes(), 0);
        }
        Ok(Box::new(file))
    }
}
