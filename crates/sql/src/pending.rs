//! What the database transactions (SQLite, PostgreSQL) share: the changes
//! they hold until they write them out, and the [`Transaction`] methods
//! that answer from those changes first and from the database second.
//!
//! Reads go to the database; changes are kept here (the policy changes a
//! task in place through `get_mut`) and written out by the backend before
//! its next query and at commit, so that every query sees the
//! transaction's own changes. Each backend reads its rows through
//! [`Database`]; the functions here hold no borrow of the changes while
//! they call it, since a read may write the changes out first.
//!
//! [`Transaction`]: rudder_core::Transaction

use std::cell::{OnceCell, RefCell};

use indexmap::IndexMap;

use rudder_core::query::SummaryBuf;
use rudder_core::{Location, StoreError, Summary};
use rudder_model::task::Task;

/// A change not yet written to the database; `B` is what the backend
/// read of the row before (to write on condition that it is unchanged).
pub enum Change<B> {
    /// The task as it is to be: `before` is `None` for a new task.
    Put {
        task: Box<Task>,
        before: Option<B>,
    },
    Delete {
        before: B,
    },
}

/// The state a database transaction keeps beside its connection.
pub struct Pending<B> {
    changes: RefCell<IndexMap<String, Change<B>>>,
    /// Every task's summary, for the whole-store iterators (which the
    /// policy does not use: they exist for callers that want everything).
    all: OnceCell<Vec<SummaryBuf>>,
}

impl<B> Default for Pending<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B> Pending<B> {
    pub fn new() -> Self {
        Pending {
            changes: RefCell::new(IndexMap::new()),
            all: OnceCell::new(),
        }
    }

    /// The changes to write out, oldest first, leaving none.
    pub fn take(&self) -> IndexMap<String, Change<B>> {
        std::mem::take(&mut *self.changes.borrow_mut())
    }

    /// Whether this transaction put (`Some(true)`) or deleted
    /// (`Some(false)`) the task `id`; `None`: it did not change it.
    fn holds(&self, id: &str) -> Option<bool> {
        self.changes
            .borrow()
            .get(id)
            .map(|c| matches!(c, Change::Put { .. }))
    }

    /// The task `id` as this transaction changed it (`Some(None)`: deleted).
    fn task(&self, id: &str) -> Option<Option<Task>> {
        self.changes.borrow().get(id).map(|c| match c {
            Change::Put { task, .. } => Some(Task::clone(task)),
            Change::Delete { .. } => None,
        })
    }

    /// The changes, for a change: the summaries read before no longer hold.
    fn changing(&mut self) -> &mut IndexMap<String, Change<B>> {
        self.all = OnceCell::new();
        self.changes.get_mut()
    }
}

/// A backend's own reads, for the functions of this module.
pub trait Database {
    /// What the backend keeps of a row it read, to write it back on condition.
    type Before;
    fn pending(&self) -> &Pending<Self::Before>;
    fn pending_mut(&mut self) -> &mut Pending<Self::Before>;
    /// The row of `id` as the database holds it now.
    fn read(&self, id: &str) -> Result<Option<(Task, Self::Before)>, StoreError>;
    /// The row of `id`, to change in place (a backend may lock it).
    fn read_to_change(&self, id: &str) -> Result<Option<(Task, Self::Before)>, StoreError> {
        self.read(id)
    }
    /// Whether the database holds a task `id`.
    fn exists(&self, id: &str) -> Result<bool, StoreError>;
    /// Every task's summary, in store order (after writing the changes out).
    fn read_summaries(&self) -> Result<Vec<SummaryBuf>, StoreError>;
    /// Every task in full, in store order (after writing the changes out).
    fn read_tasks(&self) -> Result<rudder_model::task::TaskMap, StoreError>;
    /// Where the store is, for errors.
    fn location(&self) -> Location;
    /// Write the task `id` (`before`: on condition the row is as read).
    fn put(&self, id: &str, task: &Task, before: Option<&Self::Before>) -> Result<(), StoreError>;
    /// Delete the row `id`, on condition it is as read.
    fn delete(&self, id: &str, before: &Self::Before) -> Result<(), StoreError>;
}

/// Write out every pending change, oldest first.
pub fn flush<D: Database + ?Sized>(db: &D) -> Result<(), StoreError> {
    for (id, change) in db.pending().take() {
        match change {
            Change::Put { task, before } => db.put(&id, &task, before.as_ref())?,
            Change::Delete { before } => db.delete(&id, &before)?,
        }
    }
    Ok(())
}

/// The task `id` from the document the database holds of it.
pub fn parse<D: Database + ?Sized>(db: &D, id: &str, doc: &str) -> Result<Task, StoreError> {
    serde_json::from_str(doc).map_err(|e| StoreError::Corrupt {
        location: db.location(),
        line: None,
        column: None,
        message: format!("the task {id:?} does not read back: {e}"),
    })
}

/// The document to store of `task`.
pub fn encode<D: Database + ?Sized>(db: &D, task: &Task) -> Result<String, StoreError> {
    serde_json::to_string(task).map_err(|e| StoreError::Database {
        location: db.location(),
        action: "encode a task",
        message: e.to_string(),
    })
}

/// Every task's summary, read once until the next change.
pub fn all<D: Database + ?Sized>(db: &D) -> Result<&[SummaryBuf], StoreError> {
    let cache = &db.pending().all;
    if let Some(all) = cache.get() {
        return Ok(all);
    }
    let all = db.read_summaries()?;
    Ok(cache.get_or_init(|| all))
}

/// [`Transaction::ids`](rudder_core::Transaction::ids).
pub fn ids<D: Database + ?Sized>(
    db: &D,
) -> Result<Box<dyn Iterator<Item = &str> + '_>, StoreError> {
    Ok(Box::new(all(db)?.iter().map(|t| t.task_id.as_str())))
}

/// [`Transaction::summaries`](rudder_core::Transaction::summaries).
pub fn summaries<D: Database + ?Sized>(
    db: &D,
) -> Result<Box<dyn Iterator<Item = Summary<'_>> + '_>, StoreError> {
    Ok(Box::new(all(db)?.iter().map(SummaryBuf::summary)))
}

/// [`Transaction::summary`](rudder_core::Transaction::summary).
pub fn summary<'a, D: Database + ?Sized>(
    db: &'a D,
    id: &str,
) -> Result<Option<Summary<'a>>, StoreError> {
    Ok(all(db)?
        .iter()
        .find(|t| t.task_id == id)
        .map(SummaryBuf::summary))
}

/// [`Transaction::contains`](rudder_core::Transaction::contains).
pub fn contains<D: Database + ?Sized>(db: &D, id: &str) -> Result<bool, StoreError> {
    if let Some(put) = db.pending().holds(id) {
        return Ok(put);
    }
    db.exists(id)
}

/// [`Transaction::get`](rudder_core::Transaction::get).
pub fn get<D: Database + ?Sized>(db: &D, id: &str) -> Result<Option<Task>, StoreError> {
    if let Some(task) = db.pending().task(id) {
        return Ok(task);
    }
    Ok(db.read(id)?.map(|(t, _)| t))
}

/// [`Transaction::get_where`](rudder_core::Transaction::get_where).
pub fn get_where<D: Database + ?Sized>(
    db: &D,
    keep: &dyn Fn(&Summary) -> bool,
) -> Result<Vec<Task>, StoreError> {
    let tasks = db.read_tasks()?;
    Ok(tasks
        .into_values()
        .filter(|t| keep(&Summary::of(t)))
        .collect())
}

/// [`Transaction::get_mut`](rudder_core::Transaction::get_mut).
pub fn get_mut<'a, D: Database + ?Sized>(
    db: &'a mut D,
    id: &str,
) -> Result<Option<&'a mut Task>, StoreError> {
    if !db.pending_mut().changing().contains_key(id) {
        let Some((task, before)) = db.read_to_change(id)? else {
            return Ok(None);
        };
        db.pending_mut().changing().insert(
            id.to_string(),
            Change::Put {
                task: Box::new(task),
                before: Some(before),
            },
        );
    }
    match db.pending_mut().changing().get_mut(id) {
        Some(Change::Put { task, .. }) => Ok(Some(task)),
        _ => Ok(None),
    }
}

/// What the database held of `id` before this transaction, taking out
/// the change this transaction made to it, if any: whether that change
/// was a removal, and the row read before. A failed read changes nothing.
fn take_before<D: Database + ?Sized>(
    db: &mut D,
    id: &str,
) -> Result<(bool, Option<D::Before>), StoreError> {
    if !db.pending_mut().changing().contains_key(id) {
        return Ok((false, db.read(id)?.map(|(_, b)| b)));
    }
    match db.pending_mut().changing().shift_remove(id) {
        Some(Change::Put { before, .. }) => Ok((false, before)),
        Some(Change::Delete { before }) => Ok((true, Some(before))),
        None => Ok((false, None)),
    }
}

/// [`Transaction::insert`](rudder_core::Transaction::insert).
pub fn insert<D: Database + ?Sized>(db: &mut D, task: Task) -> Result<(), StoreError> {
    let id = task.task_id.clone();
    let (_, before) = take_before(db, &id)?;
    db.pending_mut().changing().insert(
        id,
        Change::Put {
            task: Box::new(task),
            before,
        },
    );
    Ok(())
}

/// [`Transaction::remove`](rudder_core::Transaction::remove).
pub fn remove<D: Database + ?Sized>(db: &mut D, id: &str) -> Result<bool, StoreError> {
    let (removed, before) = take_before(db, id)?;
    // Without `before` the task was added in this transaction and never
    // written: nothing to undo. A task removed already stays removed.
    if let Some(before) = before {
        db.pending_mut()
            .changing()
            .insert(id.to_string(), Change::Delete { before });
    }
    Ok(!removed)
}

/// [`Transaction::clear`](rudder_core::Transaction::clear).
pub fn clear<D: Database + ?Sized>(db: &mut D) -> Result<(), StoreError> {
    let ids: Vec<String> = all(db)?.iter().map(|t| t.task_id.clone()).collect();
    for id in ids {
        remove(db, &id)?;
    }
    Ok(())
}

/// The [`Transaction`](rudder_core::Transaction) methods a database
/// transaction answers through this module (and `len` from its counts),
/// written once for every backend: expands inside its `impl Transaction`.
#[macro_export]
macro_rules! transaction_methods {
    () => {
        fn len(&self) -> Result<usize, $crate::StoreError> {
            Ok(self.counts()?.total())
        }

        fn ids(&self) -> Result<Box<dyn Iterator<Item = &str> + '_>, $crate::StoreError> {
            $crate::pending::ids(self)
        }

        fn contains(&self, id: &str) -> Result<bool, $crate::StoreError> {
            $crate::pending::contains(self, id)
        }

        fn summaries(
            &self,
        ) -> Result<Box<dyn Iterator<Item = $crate::Summary<'_>> + '_>, $crate::StoreError> {
            $crate::pending::summaries(self)
        }

        fn summary(&self, id: &str) -> Result<Option<$crate::Summary<'_>>, $crate::StoreError> {
            $crate::pending::summary(self, id)
        }

        fn get(&self, id: &str) -> Result<Option<$crate::model::task::Task>, $crate::StoreError> {
            $crate::pending::get(self, id)
        }

        fn get_where(
            &self,
            keep: &dyn Fn(&$crate::Summary) -> bool,
        ) -> Result<Vec<$crate::model::task::Task>, $crate::StoreError> {
            $crate::pending::get_where(self, keep)
        }

        fn get_mut(
            &mut self,
            id: &str,
        ) -> Result<Option<&mut $crate::model::task::Task>, $crate::StoreError> {
            $crate::pending::get_mut(self, id)
        }

        fn insert(&mut self, task: $crate::model::task::Task) -> Result<(), $crate::StoreError> {
            $crate::pending::insert(self, task)
        }

        fn remove(&mut self, id: &str) -> Result<bool, $crate::StoreError> {
            $crate::pending::remove(self, id)
        }

        fn clear(&mut self) -> Result<(), $crate::StoreError> {
            $crate::pending::clear(self)
        }
    };
}
pub use transaction_methods;

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};

    use indexmap::IndexMap;

    use super::*;
    use rudder_core::Summary;
    use rudder_model::task::{Status, TaskMap};

    const A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
    const B: &str = "bbbbbbbb-0000-4000-8000-000000000002";

    /// Rows held in memory, each with its revision as what a write is
    /// conditional on; every write out is logged.
    struct Memory {
        pending: Pending<u64>,
        rows: RefCell<IndexMap<String, (Task, u64)>>,
        /// `(id, before)` of each put, `(id, Some(before))` of each delete.
        writes: RefCell<Vec<(String, Option<u64>, bool)>>,
        reads: Cell<usize>,
        fail_reads: bool,
    }

    impl Memory {
        fn with(ids: &[&str]) -> Self {
            let rows = ids
                .iter()
                .map(|id| (id.to_string(), (Task::new(*id, Status::Working), 7)))
                .collect();
            Memory {
                pending: Pending::new(),
                rows: RefCell::new(rows),
                writes: RefCell::new(Vec::new()),
                reads: Cell::new(0),
                fail_reads: false,
            }
        }
        fn failure() -> StoreError {
            StoreError::Database {
                location: Location::remote("test".to_string()),
                action: "read a task",
                message: "the read failed".to_string(),
            }
        }
    }

    impl Database for Memory {
        type Before = u64;
        fn pending(&self) -> &Pending<u64> {
            &self.pending
        }
        fn pending_mut(&mut self) -> &mut Pending<u64> {
            &mut self.pending
        }
        fn read(&self, id: &str) -> Result<Option<(Task, u64)>, StoreError> {
            if self.fail_reads {
                return Err(Self::failure());
            }
            self.reads.set(self.reads.get() + 1);
            Ok(self.rows.borrow().get(id).cloned())
        }
        fn exists(&self, id: &str) -> Result<bool, StoreError> {
            if self.fail_reads {
                return Err(Self::failure());
            }
            Ok(self.rows.borrow().contains_key(id))
        }
        fn read_summaries(&self) -> Result<Vec<SummaryBuf>, StoreError> {
            if self.fail_reads {
                return Err(Self::failure());
            }
            // As the backends' queries do: the changes are written out first.
            flush(self)?;
            let rows = self.rows.borrow();
            Ok(rows
                .values()
                .map(|(t, _)| SummaryBuf::of(&Summary::of(t)))
                .collect())
        }
        fn read_tasks(&self) -> Result<TaskMap, StoreError> {
            flush(self)?;
            let rows = self.rows.borrow();
            Ok(rows
                .iter()
                .map(|(id, (t, _))| (id.clone(), t.clone()))
                .collect())
        }
        fn location(&self) -> Location {
            Location::remote("test".to_string())
        }
        fn put(&self, id: &str, task: &Task, before: Option<&u64>) -> Result<(), StoreError> {
            self.writes
                .borrow_mut()
                .push((id.to_string(), before.copied(), true));
            let revision = before.map_or(1, |b| b + 1);
            self.rows
                .borrow_mut()
                .insert(id.to_string(), (task.clone(), revision));
            Ok(())
        }
        fn delete(&self, id: &str, before: &u64) -> Result<(), StoreError> {
            self.writes
                .borrow_mut()
                .push((id.to_string(), Some(*before), false));
            self.rows.borrow_mut().shift_remove(id);
            Ok(())
        }
    }

    #[test]
    fn reads_see_the_changes_before_they_are_written() {
        let mut db = Memory::with(&[A]);
        insert(&mut db, Task::new(B, Status::Completed)).unwrap();
        assert!(remove(&mut db, A).unwrap());
        assert!(matches!(contains(&db, B), Ok(true)) && matches!(contains(&db, A), Ok(false)));
        assert_eq!(
            get(&db, B).unwrap().map(|t| t.status),
            Some(Status::Completed)
        );
        assert_eq!(get(&db, A).unwrap(), None);
        assert!(
            db.writes.borrow().is_empty(),
            "nothing written before a flush"
        );
        flush(&db).unwrap();
        // Oldest change first; the new task unconditional, the removal at
        // the revision read.
        assert_eq!(
            *db.writes.borrow(),
            [(B.to_string(), None, true), (A.to_string(), Some(7), false)]
        );
        flush(&db).unwrap();
        assert_eq!(db.writes.borrow().len(), 2, "a flush takes the changes");
    }

    #[test]
    fn get_mut_reads_once_and_changes_in_place() {
        let mut db = Memory::with(&[A]);
        get_mut(&mut db, A).unwrap().unwrap().title = Some("first".into());
        get_mut(&mut db, A).unwrap().unwrap().status = Status::Cancelled;
        assert_eq!(db.reads.get(), 1);
        assert_eq!(get_mut(&mut db, B).unwrap(), None);
        flush(&db).unwrap();
        assert_eq!(*db.writes.borrow(), [(A.to_string(), Some(7), true)]);
        let (task, _) = &db.rows.borrow()[A];
        assert_eq!(
            (task.title.as_deref(), task.status),
            (Some("first"), Status::Cancelled)
        );
    }

    #[test]
    fn a_removal_stays_and_a_new_task_removed_writes_nothing() {
        let mut db = Memory::with(&[A]);
        assert!(remove(&mut db, A).unwrap());
        assert!(!remove(&mut db, A).unwrap(), "removed already");
        assert_eq!(get_mut(&mut db, A).unwrap(), None);
        insert(&mut db, Task::new(B, Status::Working)).unwrap();
        assert!(remove(&mut db, B).unwrap());
        // Put back after its removal: written on condition of the row read.
        insert(&mut db, Task::new(A, Status::Failed)).unwrap();
        flush(&db).unwrap();
        assert_eq!(*db.writes.borrow(), [(A.to_string(), Some(7), true)]);
    }

    #[test]
    fn the_summaries_are_read_again_after_a_change() {
        let mut db = Memory::with(&[A]);
        assert_eq!(ids(&db).unwrap().collect::<Vec<_>>(), [A]);
        insert(&mut db, Task::new(B, Status::Working)).unwrap();
        // Reading them writes the change out, without a borrow conflict.
        assert_eq!(ids(&db).unwrap().collect::<Vec<_>>(), [A, B]);
        assert_eq!(
            summary(&db, B).unwrap().map(|s| s.status),
            Some(Status::Working)
        );
        clear(&mut db).unwrap();
        assert_eq!(ids(&db).unwrap().count(), 0);
        assert!(db.rows.borrow().is_empty());
    }

    #[test]
    fn a_failed_read_is_an_error_at_once_and_changes_nothing() {
        let mut db = Memory::with(&[A]);
        db.fail_reads = true;
        let failed = |r: Result<(), StoreError>| matches!(r, Err(StoreError::Database { message, .. }) if message == "the read failed");
        assert!(failed(insert(&mut db, Task::new(B, Status::Working))));
        assert!(failed(remove(&mut db, A).map(|_| ())));
        assert!(failed(contains(&db, A).map(|_| ())));
        assert!(failed(ids(&db).map(|_| ())));
        assert_eq!(db.pending.holds(B), None, "the insert did not happen");
        assert_eq!(db.pending.holds(A), None, "the removal did not happen");
        // The reads work again: the transaction goes on from where it was.
        db.fail_reads = false;
        assert_eq!(ids(&db).unwrap().collect::<Vec<_>>(), [A]);
        flush(&db).unwrap();
        assert!(db.writes.borrow().is_empty());
    }
}
