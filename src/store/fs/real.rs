use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
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
        if len > limit {
            return Err(io::Error::from(io::ErrorKind::FileTooLarge));
        }
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

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<std::path::PathBuf>> {
        fs::read_dir(dir)?
            .map(|entry| entry.map(|e| e.path()))
            .collect()
    }

    fn lock(&self, path: &Path, timeout: Duration) -> Result<LockGuard, LockFailure> {
        let existed = path.exists();
        // Never follow a symlink planted at the lock path: the pid written
        // below would overwrite whatever it points to.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
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
                        return Err(LockFailure::Timeout {
                            waited: start.elapsed(),
                            holder: holder(&file),
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
    let _ = (&*file).read_to_string(&mut written);
    let written = written.trim();
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
