//! The JSON file backend of rudder (docs/architecture.md "The store file"): the seed's
//! layout, one `flock` on a sidecar lock file per write, atomic rename,
//! readers without a lock; and its change feed, derived by diffing. See
//! `docs/architecture.md`.

mod codec;
mod compact;
mod deliveries;
mod file;
mod file_rows;
mod index;
#[cfg(test)]
mod listed;
pub use rudder_fs as fs;
mod scan;
mod stream;
#[cfg(test)]
mod tricky;
mod txn;
mod watch;

pub use codec::{MAX_STORE_BYTES, decode, decode_whole, encode};
pub use file::{FileBackend, TaskDigest};
pub use file_rows::{FileRows, RowChange};
pub use rudder_core::settings::parse_max_bytes;
pub use rudder_fs::{lock_name, temp_name, temp_pid};
pub use stream::{FileStream, Revisions};
pub use txn::check_quick_paths;
pub use watch::FileSource;

/// A store over the file at `path` (the crate's own tests).
#[cfg(test)]
fn open_store(path: impl Into<std::path::PathBuf>) -> rudder_core::Store<FileBackend> {
    rudder_core::Store::with_backend(FileBackend::new(path))
}
