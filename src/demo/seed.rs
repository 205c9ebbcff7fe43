//! Seeding the demo store with the incidents of the scenario data.

use serde_json::{Map, Value, json};

use super::scenarios::{Incident, Scenarios};
use crate::store::{Backend, NewTask, Store, StoreError};
use crate::task::{Change, Task};

/// The idempotency key prefix of every seeded task: `demo:INC-1042`.
pub const KEY_PREFIX: &str = "demo:";

/// What seeding did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeedReport {
    /// Incidents created now.
    pub created: Vec<String>,
    /// Incidents the store already had.
    pub existing: Vec<String>,
}

/// The task `rudder demo` creates for an incident: the request names the
/// incident and, when the reporter named one, the service.
pub fn new_task(incident: &Incident) -> NewTask {
    new_task_as(incident, None)
}

/// [`new_task`] of the task kind `kind` (`rudder demo --gateway`: the
/// upstream tool's).
pub fn new_task_as(incident: &Incident, kind: Option<&str>) -> NewTask {
    let mut request = Map::new();
    request.insert("incident".into(), json!(incident.id));
    if let Some(service) = &incident.reported_service {
        request.insert("service".into(), json!(service));
    }
    NewTask {
        idempotency_key: Some(format!("{KEY_PREFIX}{}", incident.id)),
        title: Some(format!("{} {}", incident.id, incident.title)),
        request: Some(Value::Object(request)),
        status_message: Some("waiting for a worker".into()),
        kind: kind.map(str::to_string),
        ..NewTask::default()
    }
}

/// Create the task of every scenario incident the store does not have yet.
/// Idempotent: the idempotency key of an incident returns its existing task,
/// wherever that task now is, so seeding again never duplicates or resets it.
pub fn seed(store: &Store) -> Result<SeedReport, StoreError> {
    seed_as(store, None)
}

/// [`seed`], the tasks of kind `kind`.
pub fn seed_as(store: &Store, kind: Option<&str>) -> Result<SeedReport, StoreError> {
    let mut report = SeedReport::default();
    for incident in &Scenarios::get().incidents {
        match store.create(new_task_as(incident, kind)) {
            Ok(outcome) if outcome.change == Change::Applied => {
                report.created.push(incident.id.clone());
            }
            Ok(_) => report.existing.push(incident.id.clone()),
            // The task exists but was seeded by another version of the demo
            // with another request: it is still that incident, leave it be.
            Err(StoreError::IdempotencyConflict { .. }) => {
                report.existing.push(incident.id.clone());
            }
            Err(e) => return Err(e),
        }
    }
    Ok(report)
}

/// Whether a task with this idempotency key is a demo incident: one the
/// demo seeded (`demo:INC-1042`). Only those are the demo's to empty
/// (`--fresh`) and its worker's to diagnose; every other task is someone's
/// real work.
pub fn is_demo_key(key: Option<&str>) -> bool {
    key.is_some_and(|k| k.starts_with(KEY_PREFIX))
}

/// Whether `task` is a demo incident ([`is_demo_key`]).
pub fn is_demo_task(task: &Task) -> bool {
    is_demo_key(task.idempotency_key.as_deref())
}

/// The labels of the tasks in `tasks` that are not demo incidents.
fn foreign<'a>(tasks: impl IntoIterator<Item = &'a Task>) -> Vec<String> {
    tasks
        .into_iter()
        .filter(|t| !is_demo_task(t))
        .map(|t| crate::text::clean(t.label().unwrap_or(t.short_id()), 60))
        .collect()
}

/// Refuse a store that holds any task that is not a demo incident, before
/// the demo seeds it or its worker runs on it: `rudder demo --store
/// real.json` must neither seed incidents among real tasks nor let the
/// simulated worker near them. Reads without the lock and writes nothing; a
/// missing store is an empty one (the demo creates it).
pub fn check_demo_store(store: &Store) -> Result<(), FreshError> {
    let tasks = store.load()?;
    let foreign = foreign(tasks.values());
    if foreign.is_empty() {
        Ok(())
    } else {
        Err(FreshError::NotADemoStore {
            path: store.location(),
            foreign,
        })
    }
}

/// `--fresh`: empty the demo store so that it can be seeded anew. Refused if
/// the store holds any task the demo did not seed, so that `rudder demo
/// --fresh --store` pointed at a real store by mistake destroys nothing.
/// Returns how many tasks were removed.
pub fn clear(store: &Store) -> Result<usize, FreshError> {
    let mut removed = 0;
    let mut found = Vec::new();
    // Check and remove under the store lock in one step, so a task created
    // meanwhile by someone else cannot slip between the check and the removal.
    store.backend().transact(&mut |tasks| {
        found = foreign(tasks.values());
        if !found.is_empty() || tasks.is_empty() {
            return Ok(false);
        }
        removed = tasks.len();
        tasks.clear();
        Ok(true)
    })?;
    if found.is_empty() {
        Ok(removed)
    } else {
        Err(FreshError::NotADemoStore {
            path: store.location(),
            foreign: found,
        })
    }
}

/// Why the demo did not start on a store, or `--fresh` did not empty it.
/// (The name is historical: the plain `rudder demo` refuses the same stores.)
#[derive(Debug, thiserror::Error)]
pub enum FreshError {
    /// The store holds tasks the demo did not seed: a usage error (exit 2),
    /// since the remedy is another `--store`.
    #[error(
        "{path} holds {} {} that {} not demo incidents ({}); the demo only runs on a store of its own, \
         and nothing was changed: use the default ./rudder-demo.json (leave out --store) or --store NEW.json",
        foreign.len(),
        if foreign.len() == 1 { "task" } else { "tasks" },
        if foreign.len() == 1 { "is" } else { "are" },
        shorten(foreign)
    )]
    NotADemoStore {
        /// The store.
        path: String,
        /// The labels of the tasks the demo did not create.
        foreign: Vec<String>,
    },
    /// The store could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn shorten(names: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut text = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}
