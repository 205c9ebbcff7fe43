//! The smallest backend: tasks in memory, for tests, and to show what a
//! backend must do and how little that is. The one policy ([`crate::Store`])
//! runs over it unchanged; the seam's queries (pages, counts, keys, the
//! trail) are the in-memory reference of [`Transaction`] for a [`TaskMap`].
//!
//! A transaction runs on a copy of the tasks and replaces them only when
//! the policy asks to write, so a refused operation writes nothing; each
//! write appends what changed to a change log that the feed follows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rudder_model::task::TaskMap;

use crate::delivery::{Delivery, EventKey, Update};
use crate::watch::{Catchup, FeedSource, ResetReason, TaskChange, Wake};
use crate::{Backend, Location, StoreError, Transaction};

/// Tasks in memory, shared by every clone (one store, many handles).
#[derive(Clone)]
pub struct MemoryBackend {
    name: String,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    tasks: TaskMap,
    /// Every change ever written, in commit order.
    log: Vec<TaskChange>,
    /// The notifiers' delivery records.
    deliveries: HashMap<(String, EventKey), Delivery>,
    /// The feeds to wake after a write.
    wakes: Vec<Wake>,
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBackend")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl MemoryBackend {
    /// An empty store, shown as `memory:NAME`.
    pub fn new(name: impl Into<String>) -> MemoryBackend {
        MemoryBackend {
            name: name.into(),
            state: Arc::default(),
        }
    }

    /// The store `memory:NAME` of this process: the same tasks for every
    /// call with the same name, for as long as the process lives (a test's
    /// second "process" is a second store of the same name).
    pub fn named(name: &str) -> MemoryBackend {
        static STORES: Mutex<Option<HashMap<String, MemoryBackend>>> = Mutex::new(None);
        let mut stores = STORES.lock().unwrap_or_else(|e| e.into_inner());
        stores
            .get_or_insert_with(HashMap::new)
            .entry(name.to_string())
            .or_insert_with(|| MemoryBackend::new(name))
            .clone()
    }

    /// The name it is shown by (`memory:NAME`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many changes were written to it: grows with every write, as a
    /// database's last recorded change does (what the tests compare to tell
    /// whether an operation wrote).
    pub fn last_change(&self) -> u64 {
        self.state().log.len() as u64
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic in a test's closure leaves the tasks as they were (a
        // transaction works on a copy).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Backend for MemoryBackend {
    fn location(&self) -> Location {
        Location::memory(&self.name)
    }

    fn snapshot(
        &self,
        f: &mut dyn FnMut(&dyn Transaction) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        f(&self.state().tasks)
    }

    /// A store exists once something was written to it (as a file is
    /// made by the first write).
    fn exists(&self) -> Result<bool, StoreError> {
        Ok(!self.state().log.is_empty())
    }

    fn transaction(
        &self,
        f: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let mut state = self.state();
        let mut tasks = state.tasks.clone();
        if !f(&mut tasks)? {
            return Ok(());
        }
        let changes = changes(&state.tasks, &tasks);
        state.tasks = tasks;
        state.log.extend(changes);
        for wake in &state.wakes {
            wake();
        }
        Ok(())
    }

    fn feed_source(&self, task: Option<String>) -> Box<dyn FeedSource> {
        Box::new(MemorySource {
            backend: self.clone(),
            task,
            cursor: None,
            reads: 0,
        })
    }

    fn delivery(&self, name: &str, key: &EventKey, f: &mut Update<'_>) -> Result<(), StoreError> {
        let mut state = self.state();
        let at = (name.to_string(), key.clone());
        if let Some(new) = f(state.deliveries.get(&at)) {
            state.deliveries.insert(at, new);
        }
        Ok(())
    }
}

/// What changed from `old` to `new`: tasks that appeared or changed, in
/// the new order, then those removed.
fn changes(old: &TaskMap, new: &TaskMap) -> Vec<TaskChange> {
    let mut out: Vec<TaskChange> = new
        .values()
        .filter(|t| old.get(&t.task_id).is_none_or(|o| o.revision != t.revision))
        .map(|t| TaskChange {
            task_id: t.task_id.clone(),
            revision: t.revision,
            from: old.get(&t.task_id).map(|o| o.status),
            to: Some(t.status),
            at: t.updated_at,
        })
        .collect();
    out.extend(
        old.values()
            .filter(|o| !new.contains_key(&o.task_id))
            .map(|o| TaskChange {
                task_id: o.task_id.clone(),
                revision: o.revision,
                from: Some(o.status),
                to: None,
                at: None,
            }),
    );
    out
}

/// The feed of a [`MemoryBackend`]: its change log after a cursor.
struct MemorySource {
    backend: MemoryBackend,
    /// Only this task's changes, if any.
    task: Option<String>,
    /// How much of the log was seen; `None` before the first catch-up.
    cursor: Option<usize>,
    reads: u64,
}

impl FeedSource for MemorySource {
    fn arm(&mut self, wake: Wake) -> Option<Box<dyn Send>> {
        self.backend.state().wakes.push(wake);
        Some(Box::new(()))
    }

    fn may_have_changed(&mut self) -> bool {
        self.cursor != Some(self.backend.state().log.len())
    }

    fn catch_up(&mut self) -> Catchup {
        self.reads += 1;
        let state = self.backend.state();
        let end = state.log.len();
        let Some(from) = self.cursor.replace(end) else {
            return Catchup::Reset(ResetReason::Start);
        };
        Catchup::Changes(
            state.log[from..]
                .iter()
                .filter(|c| self.task.as_ref().is_none_or(|t| *t == c.task_id))
                .cloned()
                .collect(),
        )
    }

    fn reads(&self) -> u64 {
        self.reads
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NewTask, Store};
    use rudder_model::task::machine::Actor;
    use rudder_model::task::{Change, Status};
    use serde_json::json;

    fn store() -> Store<MemoryBackend> {
        Store::with_backend(MemoryBackend::new("test"))
    }

    /// The one policy, unchanged over the smallest backend: create with a
    /// key (and its repeat), claim, ask, answer, finish, a refusal that
    /// writes nothing, prune.
    #[test]
    fn the_policy_runs_over_tasks_in_memory() {
        let store = store();
        let schema = json!({"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]});
        let made = store
            .create(NewTask {
                title: Some("INC-7 checkout latency".into()),
                idempotency_key: Some("inc-7".into()),
                input_schema: Some(schema.clone()),
                ..NewTask::default()
            })
            .expect("create");
        assert_eq!(made.task.status, Status::InputRequired);
        let again = store
            .create(NewTask {
                title: Some("INC-7 checkout latency".into()),
                idempotency_key: Some("inc-7".into()),
                input_schema: Some(schema),
                ..NewTask::default()
            })
            .expect("the same key again");
        assert_eq!(again.change, Change::Unchanged);
        assert_eq!(again.task.task_id, made.task.task_id);
        let id = made.task.task_id.clone();
        let short = &id[..8];
        assert_eq!(store.get(short).expect("by prefix").task_id, id);

        // A refused answer writes nothing.
        let revision = store.get(&id).expect("get").revision;
        assert!(
            store
                .provide_input(&id, json!({"service": 7}), None)
                .is_err()
        );
        assert_eq!(store.get(&id).expect("get").revision, revision);

        store
            .provide_input(&id, json!({"service": "checkout"}), None)
            .expect("input");
        assert_eq!(store.get(&id).expect("get").status, Status::Working);
        store
            .complete(&id, json!({"cause": "a bad deploy"}), Actor::Anyone)
            .expect("complete");
        let done = store.get(&id).expect("get");
        assert_eq!(done.status, Status::Completed);
        assert!(
            store.cancel(&id, None).is_err(),
            "a finished task is never cancelled"
        );
        assert_eq!(store.counts().expect("counts").total(), 1);
        let pruned = store.prune(std::time::Duration::ZERO).expect("prune");
        assert_eq!(pruned.removed.len(), 1);
        assert!(matches!(
            store.get(&id),
            Err(StoreError::UnknownTask { .. })
        ));
    }

    /// The feed follows the change log: a reset first, then each write's
    /// changes in commit order, only one task's when asked.
    #[test]
    fn the_feed_follows_the_change_log() {
        let backend = MemoryBackend::new("feed");
        let store = Store::with_backend(backend.clone());
        let mut all = backend.feed_source(None);
        assert!(matches!(all.catch_up(), Catchup::Reset(ResetReason::Start)));
        let a = store
            .create(NewTask::default())
            .expect("create")
            .task
            .task_id;
        let mut one = backend.feed_source(Some(a.clone()));
        let _ = one.catch_up();
        let b = store
            .create(NewTask::default())
            .expect("create")
            .task
            .task_id;
        store.cancel(&a, None).expect("cancel");
        assert!(all.may_have_changed());
        let Catchup::Changes(seen) = all.catch_up() else {
            panic!("changes");
        };
        let seen: Vec<_> = seen
            .iter()
            .map(|c| (c.task_id.clone(), c.from, c.to))
            .collect();
        assert_eq!(
            seen,
            [
                (a.clone(), None, Some(Status::Working)),
                (b, None, Some(Status::Working)),
                (a.clone(), Some(Status::Working), Some(Status::Cancelled)),
            ]
        );
        let Catchup::Changes(mine) = one.catch_up() else {
            panic!("changes");
        };
        assert_eq!(mine.len(), 1);
        assert_eq!(mine[0].task_id, a);
        assert!(!all.may_have_changed());
    }

    /// A backend that answers without running the policy's function breaks
    /// the seam's contract: the policy says so as an error, never panics.
    #[test]
    fn a_backend_that_skips_the_operation_is_an_error_not_a_panic() {
        struct Skips(MemoryBackend);
        impl Backend for Skips {
            fn location(&self) -> Location {
                self.0.location()
            }
            fn snapshot(
                &self,
                _: &mut dyn FnMut(&dyn Transaction) -> Result<(), StoreError>,
            ) -> Result<(), StoreError> {
                Ok(())
            }
            fn transaction(
                &self,
                _: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
            ) -> Result<(), StoreError> {
                Ok(())
            }
            fn feed_source(&self, task: Option<String>) -> Box<dyn FeedSource> {
                self.0.feed_source(task)
            }
            fn delivery(
                &self,
                name: &str,
                key: &EventKey,
                f: &mut Update<'_>,
            ) -> Result<(), StoreError> {
                self.0.delivery(name, key, f)
            }
        }
        let store = Store::with_backend(Skips(MemoryBackend::new("skips")));
        for e in [
            store.create(NewTask::default()).map(|_| ()).unwrap_err(),
            store.counts().map(|_| ()).unwrap_err(),
            store.get("abc").map(|_| ()).unwrap_err(),
            store
                .reclaim(std::time::Duration::ZERO, true)
                .map(|_| ())
                .unwrap_err(),
        ] {
            assert!(matches!(e, StoreError::Database { .. }), "{e}");
            assert!(e.to_string().contains("memory:skips"), "{e}");
        }
    }
}
