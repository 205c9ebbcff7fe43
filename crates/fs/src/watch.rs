//! Directory watching: the wake-up of the file store's and SQLite's change
//! feeds (docs/architecture.md "Watching"). Watching the *directory*, not
//! the file: an atomic rename leaves a watch on the file pointing at the
//! old inode.

use std::path::PathBuf;
use std::sync::Arc;

/// Called when a watched file may have changed (the change feed's wake-up).
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// Watch `dir` for changes of the files named `names`, calling `wake`.
///
/// On Linux only for what ends a write (a file closed after writing,
/// renamed, created, deleted, its attributes changed), never for each
/// `write` or `open`: the kernel queues an event for every `write` to a
/// watched directory in the writer's own system call, and a SQLite commit
/// is some thirty of them (a frame header and a page each), which every
/// writer of the store paid, and this process's watch thread woke for.
/// A SQLite store is therefore woken by its lock file, which every rudder
/// writer closes after committing (crates/sqlite/src/watch.rs).
pub fn watch_dir(
    dir: &std::path::Path,
    names: Vec<std::ffi::OsString>,
    wake: Wake,
) -> Option<Box<dyn Send>> {
    #[cfg(target_os = "linux")]
    {
        dir_watch::watch(dir, names, wake)
    }
    #[cfg(not(target_os = "linux"))]
    {
        notify_watch(dir, names, wake)
    }
}

#[cfg(target_os = "linux")]
mod dir_watch {
    use std::ffi::OsString;
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};

    use super::Wake;

    /// What ends a write (see [`super::watch_dir`]); no `MODIFY`, `OPEN`
    /// or `ACCESS`, nor `CLOSE_NOWRITE` (the feed's own reads of a JSON
    /// store would wake it again and again).
    const MASK: WatchMask = WatchMask::CLOSE_WRITE
        .union(WatchMask::MOVED_TO)
        .union(WatchMask::MOVED_FROM)
        .union(WatchMask::CREATE)
        .union(WatchMask::DELETE)
        .union(WatchMask::ATTRIB)
        .union(WatchMask::DELETE_SELF)
        .union(WatchMask::MOVE_SELF);

    /// Stops the watch thread when dropped.
    struct Guard {
        watches: Watches,
        wd: WatchDescriptor,
        stop: Arc<AtomicBool>,
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Release);
            // Removing the watch queues IN_IGNORED, which ends the thread's
            // blocking read. Already gone (the directory was deleted): the
            // thread has ended on its own.
            let _ = self.watches.remove(self.wd.clone());
        }
    }

    pub(super) fn watch(dir: &Path, names: Vec<OsString>, wake: Wake) -> Option<Box<dyn Send>> {
        let mut inotify = Inotify::init().ok()?;
        let wd = inotify.watches().add(dir, MASK).ok()?;
        let stop = Arc::new(AtomicBool::new(false));
        let guard = Guard {
            watches: inotify.watches(),
            wd,
            stop: Arc::clone(&stop),
        };
        let thread = std::thread::Builder::new()
            .name("rudder-watch".into())
            .spawn(move || {
                let mut buffer = [0u8; 4096];
                loop {
                    let events = match inotify.read_events_blocking(&mut buffer) {
                        Ok(events) => events,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(_) => {
                            // The safety net takes over; say so once.
                            wake();
                            return;
                        }
                    };
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let (mut relevant, mut gone) = (false, false);
                    for event in events {
                        gone |= event.mask.contains(EventMask::IGNORED);
                        relevant |= event.mask.intersects(
                            EventMask::Q_OVERFLOW
                                | EventMask::IGNORED
                                | EventMask::DELETE_SELF
                                | EventMask::MOVE_SELF,
                        ) || event.name.is_some_and(|n| names.iter().any(|m| m == n));
                    }
                    if relevant {
                        wake();
                    }
                    if gone {
                        return;
                    }
                }
            });
        thread.ok()?;
        Some(Box::new(guard))
    }
}

/// [`watch_dir`] through `notify`, where rudder has no watch of its own.
#[cfg(not(target_os = "linux"))]
fn notify_watch(
    dir: &std::path::Path,
    names: Vec<std::ffi::OsString>,
    wake: Wake,
) -> Option<Box<dyn Send>> {
    use notify::{RecursiveMode, Watcher};
    let mut w = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        let relevant = match &ev {
            Ok(ev) => {
                ev.need_rescan()
                    || (changes_content(&ev.kind)
                        && ev
                            .paths
                            .iter()
                            .any(|p| p.file_name().is_some_and(|n| names.iter().any(|m| m == n))))
            }
            Err(_) => true,
        };
        if relevant {
            wake();
        }
    })
    .ok()?;
    w.watch(dir, RecursiveMode::NonRecursive).ok()?;
    Some(Box::new(w))
}

/// Whether an event can mean new content. Opening and reading the file (as
/// the feed itself does on every read) raises access events: reacting to
/// them would make the feed re-read the file forever.
#[cfg(not(target_os = "linux"))]
fn changes_content(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, EventKind};
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// The directory a store file lives in.
pub fn parent_dir(path: &std::path::Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The watch asks the kernel for no event per `write` or `open` (each
    /// would be queued in every writer's system call), and for closes
    /// after writing: what the kernel says it watches for this process.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_watch_asks_for_no_event_per_write() {
        use inotify::WatchMask;
        let dir = tempfile::tempdir().unwrap();
        let guard =
            watch_dir(dir.path(), vec!["tasks.db.lock".into()], Arc::new(|| {})).expect("a watch");
        // Ours is the watch of this directory's inode.
        let ino = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(dir.path()).unwrap().ino()
        };
        let mut masks = Vec::new();
        for fd in std::fs::read_dir("/proc/self/fdinfo").unwrap() {
            let Ok(info) = std::fs::read_to_string(fd.unwrap().path()) else {
                continue;
            };
            for line in info.lines().filter(|l| l.starts_with("inotify wd:")) {
                let field = |name: &str| {
                    line.split_whitespace()
                        .find_map(|f| f.strip_prefix(name))
                        .map(|v| u64::from_str_radix(v, 16).unwrap())
                };
                if field("ino:") == Some(ino) {
                    masks.push(field("mask:").unwrap() as u32);
                }
            }
        }
        assert_eq!(masks.len(), 1, "one watch of the directory: {masks:x?}");
        let mask = WatchMask::from_bits_retain(masks[0]);
        assert!(
            !mask.intersects(WatchMask::MODIFY | WatchMask::OPEN | WatchMask::ACCESS),
            "{mask:?}"
        );
        assert!(mask.contains(WatchMask::CLOSE_WRITE), "{mask:?}");
        drop(guard);
    }
}
