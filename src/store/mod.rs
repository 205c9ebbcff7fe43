//! The durable task store: every operation of DESIGN.md over a [`Backend`].
//!
//! [`Store`] holds the policy (idempotency, one answer for repeats and
//! conflicts, reclaim and prune reports); a backend only knows how to load all
//! tasks and how to run a read-modify-write under exclusive access, handing
//! the operation a [`Transaction`]: summaries of every task for the scans,
//! full tasks only for those the operation reads or changes. The JSON file
//! backend is [`FileBackend`]; a database backend would implement the same
//! methods and leave every caller untouched.

mod codec;
mod error;
mod file;
pub mod fs;
mod index;
mod report;
mod scan;
mod txn;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

pub use codec::{MAX_STORE_BYTES, decode, encode};
pub use error::StoreError;
pub use file::{DEFAULT_LOCK_TIMEOUT, FileBackend};
pub use index::Summary;
pub use report::{PruneReport, Pruned, ReclaimReport, Reclaimed, Skipped, human_duration, ms};
pub use txn::Transaction;
pub(crate) use txn::check_quick_paths;

use crate::schema;
use crate::task::machine::{self, Refusal};
use crate::task::{Actor, Change, HistoryEntry, Op, OpKind, Progress, Status, Task, TaskMap};

/// Where tasks are kept. Implementations must make `transact` atomic and
/// isolated with respect to every other process using the same store.
pub trait Backend: Send + Sync {
    /// Read all tasks without taking the lock (a consistent snapshot).
    fn load(&self) -> Result<TaskMap, StoreError>;

    /// Call `f` on a consistent snapshot of the tasks without taking the
    /// lock, for readers that need only some tasks in full.
    fn snapshot(
        &self,
        f: &mut dyn FnMut(&dyn Transaction) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        f(&self.load()?)
    }

    /// Whether the store exists yet. Operations that can only change
    /// existing tasks answer from an empty store without taking the lock
    /// when it does not, so that they create nothing (no directory, no lock
    /// file).
    fn exists(&self) -> Result<bool, StoreError> {
        Ok(true)
    }

    /// Read the current tasks under exclusive access and call `f` on them;
    /// persist the changes durably if `f` returns `Ok(true)`, write nothing
    /// if it returns `Ok(false)` or an error. A store that is not valid is
    /// refused before `f` runs.
    fn transaction(
        &self,
        f: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError>;

    /// [`Backend::transaction`] over all tasks read in full (for callers that
    /// look at every task; every task is written anew if `f` commits).
    fn transact(
        &self,
        f: &mut dyn FnMut(&mut TaskMap) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        self.transaction(&mut |txn| {
            let ids: Vec<String> = txn.ids().map(str::to_string).collect();
            let mut tasks = TaskMap::with_capacity(ids.len());
            for id in ids {
                let task = txn.get(&id)?.expect("listed tasks exist");
                tasks.insert(id, task);
            }
            if !f(&mut tasks)? {
                return Ok(false);
            }
            txn.clear();
            for task in tasks.into_values() {
                txn.insert(task);
            }
            Ok(true)
        })
    }
}

/// The source of "now"; replaceable in tests.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The result of a mutation: the task as it now is, and whether it changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub change: Change,
    pub task: Task,
}

/// What `create` needs; everything is optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewTask {
    /// With a schema the task starts `input_required`, else `working`.
    pub input_schema: Option<Value>,
    pub idempotency_key: Option<String>,
    pub title: Option<String>,
    pub request: Option<Value>,
    pub status_message: Option<String>,
    pub ttl_ms: Option<u64>,
    pub poll_interval_ms: Option<u64>,
}

/// The task store.
pub struct Store<B: Backend = FileBackend> {
    backend: B,
    clock: Clock,
}

impl Store<FileBackend> {
    /// Open the JSON store at `path`. Nothing is read or created yet: a missing
    /// file is an empty store, created (0600, with its directory) on the first write.
    pub fn open(path: impl AsRef<Path>) -> Self {
        Store::with_backend(FileBackend::new(path.as_ref()))
    }

    /// The path the store was opened with.
    pub fn path(&self) -> &Path {
        self.backend.path()
    }
}

impl<B: Backend> Store<B> {
    pub fn with_backend(backend: B) -> Self {
        Store {
            backend,
            clock: Arc::new(Utc::now),
        }
    }

    /// Replace the clock (tests, simulations).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    /// All tasks, in file order.
    pub fn load(&self) -> Result<TaskMap, StoreError> {
        self.backend.load()
    }

    /// One task by full id or unique prefix.
    pub fn get(&self, id: &str) -> Result<Task, StoreError> {
        let mut task = None;
        self.backend.snapshot(&mut |tasks| {
            let key = resolve_in(tasks, id)?;
            task = tasks.get(&key)?;
            Ok(())
        })?;
        Ok(task.expect("resolved ids exist"))
    }

    /// Tasks whose status is one of `statuses` (all tasks when empty).
    pub fn list(&self, statuses: &[Status]) -> Result<Vec<Task>, StoreError> {
        if statuses.is_empty() {
            return Ok(self.load()?.into_values().collect());
        }
        let mut list = Vec::new();
        self.backend.snapshot(&mut |tasks| {
            list = tasks.get_where(&|t| statuses.contains(&t.status))?;
            Ok(())
        })?;
        Ok(list)
    }

    /// Run `f` under the backend's exclusive access with the current time.
    /// `f` returns its answer and whether to persist.
    fn transact<T>(
        &self,
        may_create: bool,
        mut f: impl FnMut(&mut dyn Transaction, DateTime<Utc>) -> Result<(T, bool), StoreError>,
    ) -> Result<T, StoreError> {
        if !may_create && !self.backend.exists()? {
            // Nothing to change in a store that does not exist: answer as
            // an empty store would, creating nothing. (An answer that asks
            // to write cannot happen for these operations.)
            let (value, write) = f(&mut TaskMap::new(), self.now())?;
            debug_assert!(!write, "an operation on an empty store wants to write");
            return Ok(value);
        }
        let mut answer = None;
        // A backend may run `f` again on fresh data (the file backend does
        // when its lock was taken from it mid-write), so `f` only reads its
        // captures and changes the store through `tasks`.
        self.backend.transaction(&mut |tasks| {
            let (value, write) = f(tasks, self.now())?;
            answer = Some(value);
            Ok(write)
        })?;
        Ok(answer.expect("the operation ran"))
    }

    /// Create a task. With an idempotency key already in use, return that task
    /// unchanged, or refuse if it was created with another schema or request.
    pub fn create(&self, mut new: NewTask) -> Result<Outcome, StoreError> {
        // A `null` request reads back from the file as none: make it none
        // now, so that retrying the same create matches its key.
        new.request = new.request.filter(|r| !r.is_null());
        if let Some(schema) = &new.input_schema {
            schema::check_schema(schema).map_err(StoreError::InvalidSchema)?;
        }
        self.transact(true, |tasks, now| {
            if let Some(key) = &new.idempotency_key
                && let Some(id) = tasks
                    .summaries()
                    .find(|t| t.idempotency_key == Some(key))
                    .map(|t| t.task_id.to_string())
            {
                let existing = tasks.get(&id)?.expect("a listed task exists");
                let field = if existing.input_schema != new.input_schema {
                    Some("input_schema")
                } else if existing.request != new.request {
                    Some("request")
                } else {
                    None
                };
                return match field {
                    Some(field) => Err(StoreError::IdempotencyConflict {
                        key: key.clone(),
                        field,
                        task: Box::new(existing),
                    }),
                    None => Ok((
                        Outcome {
                            change: Change::Unchanged,
                            task: existing,
                        },
                        false,
                    )),
                };
            }
            let status = if new.input_schema.is_some() {
                Status::InputRequired
            } else {
                Status::Working
            };
            let mut task = Task::new(uuid::Uuid::new_v4().to_string(), status);
            task.input_schema = new.input_schema.clone();
            task.idempotency_key = new.idempotency_key.clone();
            task.title = new.title.clone();
            task.request = new.request.clone();
            task.status_message = new.status_message.clone();
            task.ttl_ms = new.ttl_ms;
            task.poll_interval_ms = new.poll_interval_ms;
            task.created_at = Some(now);
            task.updated_at = Some(now);
            task.revision = 1;
            task.history.push(HistoryEntry {
                status,
                at: now,
                note: Some("created".into()),
            });
            tasks.insert(task.clone());
            Ok((
                Outcome {
                    change: Change::Applied,
                    task,
                },
                true,
            ))
        })
    }

    /// Apply one state-machine operation to the task `id` (full id or unique prefix).
    pub fn apply(&self, id: &str, op: &Op, actor: Actor<'_>) -> Result<Outcome, StoreError> {
        self.transact(false, |tasks, now| {
            let key = resolve_in(tasks, id)?;
            let task = tasks.get_mut(&key)?.expect("resolved ids exist");
            let change = machine::apply(task, op, actor, now)
                .map_err(|r| refusal_error(op.kind(), r, task))?;
            Ok((
                Outcome {
                    change,
                    task: task.clone(),
                },
                change == Change::Applied,
            ))
        })
    }

    pub fn request_input(
        &self,
        id: &str,
        schema: Value,
        message: Option<String>,
        actor: Actor<'_>,
    ) -> Result<Outcome, StoreError> {
        self.apply(id, &Op::RequestInput { schema, message }, actor)
    }

    pub fn provide_input(
        &self,
        id: &str,
        value: Value,
        expected_revision: Option<u64>,
    ) -> Result<Outcome, StoreError> {
        let op = Op::ProvideInput {
            value,
            expected_revision,
        };
        self.apply(id, &op, Actor::Anyone)
    }

    pub fn heartbeat(
        &self,
        id: &str,
        message: Option<String>,
        progress: Option<Progress>,
        actor: Actor<'_>,
    ) -> Result<Outcome, StoreError> {
        self.apply(id, &Op::Heartbeat { message, progress }, actor)
    }

    pub fn complete(
        &self,
        id: &str,
        result: Value,
        actor: Actor<'_>,
    ) -> Result<Outcome, StoreError> {
        self.apply(id, &Op::Complete { result }, actor)
    }

    /// Fail with `{"message": message}`.
    pub fn fail(&self, id: &str, message: &str, actor: Actor<'_>) -> Result<Outcome, StoreError> {
        let error = serde_json::json!({ "message": message });
        self.apply(id, &Op::Fail { error }, actor)
    }

    pub fn cancel(&self, id: &str, reason: Option<String>) -> Result<Outcome, StoreError> {
        self.apply(id, &Op::Cancel { reason }, Actor::Anyone)
    }

    /// Take or renew the lease on a working task.
    pub fn claim(&self, id: &str, holder: &str, lease: Duration) -> Result<Outcome, StoreError> {
        let op = Op::Claim {
            holder: holder.to_string(),
            lease,
        };
        self.apply(id, &op, Actor::Anyone)
    }

    /// Give a lease back.
    pub fn release(&self, id: &str, holder: &str) -> Result<Outcome, StoreError> {
        let op = Op::Release {
            holder: holder.to_string(),
        };
        self.apply(id, &op, Actor::Anyone)
    }

    /// Claim the oldest working task that no live lease holds, if any, in one
    /// locked step (so two workers never take the same task).
    pub fn claim_next(&self, holder: &str, lease: Duration) -> Result<Option<Task>, StoreError> {
        self.transact(false, |tasks, now| {
            // A task whose lease lapsed is free again, also for the holder
            // that let it lapse (a worker restarted under the same name).
            let next = tasks
                .summaries()
                .find(|t| t.status == Status::Working && !t.lease_live(now))
                .map(|t| t.task_id.to_string());
            let Some(id) = next else {
                return Ok((None, false));
            };
            let task = tasks.get_mut(&id)?.expect("a listed task exists");
            let op = Op::Claim {
                holder: holder.to_string(),
                lease,
            };
            machine::apply(task, &op, Actor::Anyone, now)
                .map_err(|r| refusal_error(OpKind::Claim, r, task))?;
            Ok((Some(task.clone()), true))
        })
    }

    /// Fail every non-terminal task not updated for `older_than`; with
    /// `dry_run`, only report what would be reclaimed.
    pub fn reclaim(
        &self,
        older_than: Duration,
        dry_run: bool,
    ) -> Result<ReclaimReport, StoreError> {
        if dry_run {
            let mut plan = None;
            self.backend.snapshot(&mut |tasks| {
                let now = self.now();
                plan = Some(report::plan_reclaim(
                    tasks.summaries(),
                    older_than,
                    now,
                    true,
                ));
                Ok(())
            })?;
            return Ok(plan.expect("the snapshot was read"));
        }
        self.transact(false, |tasks, now| {
            let report = report::plan_reclaim(tasks.summaries(), older_than, now, false);
            fail_reclaimed(tasks, &report, older_than, now)?;
            let write = !report.reclaimed.is_empty();
            Ok((report, write))
        })
    }

    /// Reclaim exactly the tasks a person was shown: each `(id, revision)`
    /// is failed only if it is still at that revision and still qualifies
    /// (unfinished, idle for `older_than`, no live lease); every other listed
    /// task is reported as skipped with the reason. Tasks not listed are
    /// never touched, even if they went idle since the preview.
    pub fn reclaim_tasks(
        &self,
        previewed: &[(String, u64)],
        older_than: Duration,
    ) -> Result<ReclaimReport, StoreError> {
        self.transact(false, |tasks, now| {
            let mut plan = report::plan_reclaim(tasks.summaries(), older_than, now, false);
            let mut reclaimed = Vec::new();
            let mut skipped = Vec::new();
            for (id, seen) in previewed {
                let current = tasks.summary(id).map(|t| (t.status, t.revision));
                let planned = plan.reclaimed.iter().position(|r| &r.task_id == id);
                let skip = |status, reason: String| Skipped {
                    task_id: id.clone(),
                    status,
                    reason,
                };
                match (planned, current) {
                    (Some(i), Some((_, revision))) if revision == *seen => {
                        reclaimed.push(plan.reclaimed.swap_remove(i));
                    }
                    (Some(_), Some((status, revision))) => skipped.push(skip(
                        status,
                        format!("changed since the preview (revision {seen}, now {revision})"),
                    )),
                    (_, Some((status, _))) => skipped.push(
                        plan.skipped
                            .iter()
                            .find(|s| &s.task_id == id)
                            .cloned()
                            .unwrap_or_else(|| skip(status, format!("it is {status} now"))),
                    ),
                    // Only finished tasks are pruned, so it finished first.
                    (_, None) => skipped.push(skip(Status::Failed, "it no longer exists".into())),
                }
            }
            plan.reclaimed = reclaimed;
            plan.skipped = skipped;
            fail_reclaimed(tasks, &plan, older_than, now)?;
            let write = !plan.reclaimed.is_empty();
            Ok((plan, write))
        })
    }

    /// Remove terminal tasks past their retention: `ttl_ms` when set, else `older_than`.
    pub fn prune(&self, older_than: Duration) -> Result<PruneReport, StoreError> {
        self.transact(false, |tasks, now| {
            let report = report::plan_prune(tasks.summaries(), older_than, now);
            for p in &report.removed {
                tasks.remove(&p.task_id);
            }
            let write = !report.removed.is_empty();
            Ok((report, write))
        })
    }
}

/// Fail every task of a reclaim plan made from these very tasks.
fn fail_reclaimed(
    tasks: &mut dyn Transaction,
    plan: &ReclaimReport,
    older_than: Duration,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    for r in &plan.reclaimed {
        let task = tasks
            .get_mut(&r.task_id)?
            .ok_or_else(|| StoreError::UnknownTask {
                id: r.task_id.clone(),
            })?;
        let op = Op::Fail {
            error: report::reclaim_error(r, older_than),
        };
        machine::apply(task, &op, Actor::Anyone, now)
            .map_err(|refusal| refusal_error(OpKind::Reclaim, refusal, task))?;
    }
    Ok(())
}

/// Find the key for a full id or a unique prefix of one.
fn resolve_in(tasks: &dyn Transaction, id: &str) -> Result<String, StoreError> {
    if tasks.contains(id) {
        return Ok(id.to_string());
    }
    let unknown = || StoreError::UnknownTask { id: id.to_string() };
    if id.is_empty() {
        return Err(unknown());
    }
    let mut matches = tasks.ids().filter(|k| k.starts_with(id));
    let first = matches.next().ok_or_else(unknown)?;
    let rest: Vec<&str> = matches.collect();
    if rest.is_empty() {
        return Ok(first.to_string());
    }
    let mut candidates: Vec<String> = std::iter::once(first)
        .chain(rest)
        .map(str::to_string)
        .collect();
    candidates.sort();
    Err(StoreError::AmbiguousId {
        prefix: id.to_string(),
        candidates,
    })
}

fn refusal_error(op: OpKind, refusal: Refusal, task: &Task) -> StoreError {
    let task = Box::new(task.clone());
    match refusal {
        Refusal::NotAllowed(reason) => StoreError::Refused { op, reason, task },
        Refusal::StaleRevision { expected } => StoreError::StaleRevision { op, expected, task },
        Refusal::Lease => StoreError::LeaseLost { op, task },
        Refusal::InvalidInput(violations) => StoreError::InvalidInput {
            id: task.task_id.clone(),
            violations,
        },
        Refusal::InvalidSchema(message) => StoreError::InvalidSchema(message),
    }
}
