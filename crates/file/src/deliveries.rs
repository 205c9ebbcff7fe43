//! The JSON file store's delivery record (`rudder notify`, docs/notify.md):
//! a sidecar file `<store>.deliveries` beside the store, never inside it
//! (the store file keeps the seed's layout, a map of task id to task).
//!
//! It is read and written under the store's own lock (`<store>.lock`) by
//! the store's writing protocol: a temp file, fsync, rename, fsync the
//! directory; a lock lost before the rename writes nothing and starts over.
//! Its content: `{"version": 1, "deliveries": [ROW, …]}`, a row being the
//! notifier's name, the [`EventKey`] and the [`Delivery`] flattened.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::FileBackend;
use crate::codec::Written;
use rudder_core::delivery::{Delivery, EventKey, Update};
use rudder_core::{Location, StoreError};

/// The sidecar's format version.
const VERSION: u32 = 1;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    version: u32,
    #[serde(default)]
    deliveries: Vec<Row>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Row {
    notifier: String,
    #[serde(flatten)]
    key: EventKey,
    #[serde(flatten)]
    delivery: Delivery,
}

/// The sidecar's path for `backend`'s store.
pub(crate) fn path(backend: &FileBackend) -> PathBuf {
    let target = &backend.target;
    target.with_file_name(rudder_fs::deliveries_name(
        target.file_name().unwrap_or_default(),
    ))
}

/// [`rudder_core::Backend::delivery`] for the JSON file store.
pub(crate) fn update(
    backend: &FileBackend,
    name: &str,
    key: &EventKey,
    f: &mut Update<'_>,
) -> Result<(), StoreError> {
    let path = path(backend);
    let location = || Location::file(&path);
    let start = std::time::Instant::now();
    loop {
        let lock = backend.lock()?;
        let bytes = backend
            .fs
            .read(&path, backend.max_bytes)
            .map_err(|e| StoreError::io(location(), &path, "read the delivery record", e))?;
        let mut record: Record = match bytes {
            None => Record {
                version: VERSION,
                deliveries: Vec::new(),
            },
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                location: location(),
                line: Some(e.line()),
                column: Some(e.column()),
                message: format!("the delivery record is not valid: {e}"),
            })?,
        };
        if record.version > VERSION {
            return Err(StoreError::NotAStore {
                location: location(),
                message: format!(
                    "the delivery record is of version {}, newer than this rudder's {VERSION}",
                    record.version
                ),
            });
        }
        let at = record
            .deliveries
            .iter()
            .position(|r| r.notifier == name && r.key == *key);
        let Some(new) = f(at.map(|i| &record.deliveries[i].delivery)) else {
            return Ok(());
        };
        match at {
            Some(i) => record.deliveries[i].delivery = new,
            None => record.deliveries.push(Row {
                notifier: name.to_string(),
                key: key.clone(),
                delivery: new,
            }),
        }
        record.version = VERSION;
        let mut text = serde_json::to_vec_pretty(&record).map_err(|e| StoreError::Database {
            location: location(),
            action: "write the delivery record",
            message: e.to_string(),
        })?;
        text.push(b'\n');
        match backend.write_atomically(&path, &[&text], &lock)? {
            Written::Done(_) => return Ok(()),
            // The lock file was deleted under us: nothing was written; the
            // next round takes the lock anew and reads the record again.
            Written::LockLost if start.elapsed() < backend.lock_timeout => drop(lock),
            Written::LockLost => {
                return Err(StoreError::io(
                    location(),
                    &path,
                    "keep the store lock",
                    std::io::Error::other("the lock file was deleted under every write attempt"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rudder_core::delivery::Claimed;
    use rudder_core::{NewTask, Store};
    use std::time::Duration;

    /// The record lives beside the store, which keeps its layout (a map
    /// of task id to task) and its tasks' revisions.
    #[test]
    fn the_record_is_a_sidecar_and_the_store_file_is_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let store_path = dir.path().join("tasks.json");
        let store = Store::with_backend(FileBackend::new(&store_path));
        let task = store.create(NewTask::default()).unwrap().task;
        let before = std::fs::read(&store_path).unwrap();
        let key = EventKey {
            task_id: task.task_id.clone(),
            event: "input_required".into(),
            round: 0,
        };
        let won = store
            .claim_delivery("n", &key, "a", Duration::from_secs(30))
            .unwrap();
        assert_eq!(won, Claimed::Won { attempts: 1 });
        assert!(matches!(
            store
                .claim_delivery("n", &key, "b", Duration::from_secs(30))
                .unwrap(),
            Claimed::Held { .. }
        ));
        // Another name has a record of its own.
        assert_eq!(
            store
                .claim_delivery("other", &key, "b", Duration::from_secs(30))
                .unwrap(),
            Claimed::Won { attempts: 1 }
        );
        store.finish_delivery("n", &key, "a").unwrap();
        assert_eq!(
            store
                .claim_delivery("n", &key, "b", Duration::from_secs(30))
                .unwrap(),
            Claimed::Delivered
        );
        assert_eq!(std::fs::read(&store_path).unwrap(), before);
        let sidecar: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.path().join("tasks.json.deliveries")).unwrap(),
        )
        .unwrap();
        assert_eq!(sidecar["deliveries"].as_array().unwrap().len(), 2);
    }
}
