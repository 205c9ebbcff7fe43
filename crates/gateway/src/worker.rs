//! Gateway workers: per upstream, a worker on the store's worker API that
//! claims the tasks of that upstream's tools under a lease, each call made
//! by its own tokio task ([`crate::call`]); at most
//! [`GatewayOptions::max_calls`] at once in all.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rudder_store::task::{Author, Face, Task};
use rudder_store::worker::Adopter;
use rudder_store::{Held, Work};
use rudder_store::{Store, worker::DEFAULT_LEASE};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::catalogue::{Selection, Upstream};
use crate::{Directory, Say};

/// How gateway workers run.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// The workers' name; each upstream's is `NAME:UPSTREAM`, and its
    /// lease holder that and `#` and eight random hex digits.
    pub name: String,
    /// How many calls are made at once, in all (at least 1).
    pub max_calls: usize,
    /// The lease a call's task is held under (renewed while the call runs).
    pub lease: Duration,
    /// Kinds that belong to others (the catalogue's own `[[tool]]`s): a
    /// tool of a `tools = "*"` upstream of one of these kinds is not
    /// worked (its tasks are another worker's).
    pub reserved_kinds: Vec<String>,
    /// The door the process that makes the tasks (`rudder mcp`) hands
    /// them to these workers by: see [`Handoff`].
    pub handoff: Handoff,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            name: "gateway".into(),
            max_calls: 16,
            lease: DEFAULT_LEASE,
            reserved_kinds: Vec::new(),
            handoff: Handoff::default(),
        }
    }
}

/// The door of this process's gateway workers for the process's own
/// tasks (`rudder mcp` and its gateway in one process): a task of an
/// upstream's tool is created already held by the worker that calls it
/// ([`Store::create_held`]), its claim and first attempt note in the
/// create's write, and its call made at once, with no wait for the change
/// feed. Without a free place ([`GatewayOptions::max_calls`]) the task is
/// made as any other and claimed when one frees. Cheap to clone; empty
/// until [`run`] opens its doors.
#[derive(Clone, Default)]
pub struct Handoff {
    doors: Arc<RwLock<Vec<Door>>>,
}

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let doors = self.doors.read().unwrap_or_else(|p| p.into_inner()).len();
        f.debug_struct("Handoff").field("doors", &doors).finish()
    }
}

/// One upstream's worker, as the handoff reaches it.
#[derive(Clone)]
struct Door {
    index: usize,
    kinds: Kinds,
    adopter: Adopter,
    upstreams: Arc<Vec<Upstream>>,
    slots: Arc<Semaphore>,
    store: Arc<Store>,
    changes: crate::call::Changes,
    say: Say,
    stop: CancellationToken,
}

/// A place for one call, kept until the task is started or the offer
/// dropped.
pub struct Offer {
    door: Door,
    tool: String,
    held: Held,
    place: OwnedSemaphorePermit,
}

impl Handoff {
    /// A place for a task of `kind` with the worker of the upstream that
    /// serves it, if there is one in this process and it has room.
    pub fn offer(&self, kind: &str) -> Option<Offer> {
        let doors = self.doors.read().unwrap_or_else(|p| p.into_inner());
        let (door, tool) = doors.iter().find_map(|d| {
            let tool = d
                .kinds
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(kind)
                .cloned()?;
            Some((d, tool))
        })?;
        if door.stop.is_cancelled() {
            return None;
        }
        let place = Arc::clone(&door.slots).try_acquire_owned().ok()?;
        let up = &door.upstreams[door.index];
        let max = up.settings(&tool).max_attempts();
        let holder = door.adopter.holder().to_string();
        let held = Held {
            note: Some(crate::call::attempt_note(1, max, &tool, up, &holder)),
            holder,
            lease: door.adopter.lease(),
            face: Face::Gateway,
        };
        Some(Offer {
            door: door.clone(),
            tool,
            held,
            place,
        })
    }
}

impl Offer {
    /// What to create the task with: [`Store::create_held`].
    pub fn held(&self) -> &Held {
        &self.held
    }

    /// Make the call of `task`, created with [`Offer::held`], at once on a
    /// tokio task of its own: `None` when this worker does not hold it (one
    /// found by its idempotency key), which is left to whoever holds it;
    /// else what resolves once the call is over, its last write made (the
    /// task's end, or the gateway stopping), so that the process waiting
    /// for the result reads it at once rather than when its change feed
    /// tells. Call from within a runtime.
    pub fn start(self, task: Task) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let Offer {
            door, tool, place, ..
        } = self;
        let job = door.adopter.adopt(task)?;
        let (over, told) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let up = &door.upstreams[door.index];
            crate::call::serve(
                job,
                up,
                &tool,
                door.store,
                door.changes,
                door.say,
                door.stop,
                true,
            )
            .await;
            drop(place);
            let _ = over.send(());
        });
        Some(told)
    }
}

/// Why gateway workers could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// A worker of an upstream could not be started.
    #[error("the gateway worker of upstream {upstream:?} cannot start: {reason}")]
    Start { upstream: String, reason: String },
}

/// Which tool each task kind of one upstream calls.
type Kinds = Arc<RwLock<HashMap<String, String>>>;

/// Run gateway workers for `upstreams` on `store` until `stop` is
/// cancelled, then give back the leases of the calls under way. Tools
/// named in the catalogue are worked from the start; those of
/// `tools = "*"` once `directory` lists them.
pub async fn run(
    store: &Store,
    upstreams: Arc<Vec<Upstream>>,
    directory: Directory,
    options: GatewayOptions,
    say: Say,
    stop: CancellationToken,
) -> Result<(), GatewayError> {
    let slots = Arc::new(Semaphore::new(options.max_calls.max(1)));
    // One change feed for every call's cancel, not one per call.
    let changes = crate::call::follow_changes(store);
    let mut loops = tokio::task::JoinSet::new();
    for (index, up) in upstreams.iter().enumerate() {
        let name = format!("{}:{}", options.name, up.name);
        let author = Author::new(name.clone(), Face::Gateway).map_err(|e| GatewayError::Start {
            upstream: up.name.clone(),
            reason: e.to_string(),
        })?;
        let store = store.by(author);
        let kinds: Kinds = Arc::default();
        let mut builder = store.worker(name).lease(options.lease);
        if let Selection::Named(names) = &up.tools {
            let mut table = kinds.write().unwrap_or_else(|p| p.into_inner());
            for n in names {
                table.insert(up.kind_of(n), n.clone());
            }
            builder = builder.kinds(table.keys().cloned().collect::<Vec<_>>());
        }
        let wanted = Arc::clone(&kinds);
        builder = builder.filter(move |s| {
            s.kind.is_some_and(|k| {
                wanted
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .contains_key(k)
            })
        });
        let worker = builder.start_async().map_err(|e| GatewayError::Start {
            upstream: up.name.clone(),
            reason: e.to_string(),
        })?;
        let store = Arc::new(store);
        options
            .handoff
            .doors
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(Door {
                index,
                kinds: Arc::clone(&kinds),
                adopter: worker.adopter(),
                upstreams: Arc::clone(&upstreams),
                slots: Arc::clone(&slots),
                store: Arc::clone(&store),
                changes: changes.clone(),
                say: Arc::clone(&say),
                stop: stop.clone(),
            });
        if up.tools == Selection::All {
            // The kinds of `"*"` tools are known once they are listed.
            let (kinds, mut listed, upstream, stop, reserved) = (
                Arc::clone(&kinds),
                directory.watch(),
                up.name.clone(),
                stop.clone(),
                options.reserved_kinds.clone(),
            );
            loops.spawn(async move {
                loop {
                    let tools = Arc::clone(&listed.borrow_and_update());
                    {
                        let mut table = kinds.write().unwrap_or_else(|p| p.into_inner());
                        for t in tools.iter().filter(|t| t.upstream == upstream) {
                            if !reserved.contains(&t.kind) {
                                table.insert(t.kind.clone(), t.name.clone());
                            }
                        }
                    }
                    tokio::select! {
                        changed = listed.changed() => if changed.is_err() {
                            return;
                        },
                        _ = stop.cancelled() => return,
                    }
                }
            });
        }
        let (upstreams, slots, say, stop, store, changes) = (
            Arc::clone(&upstreams),
            Arc::clone(&slots),
            Arc::clone(&say),
            stop.clone(),
            store,
            changes.clone(),
        );
        loops.spawn(async move {
            let mut worker = worker;
            loop {
                let slot = tokio::select! {
                    s = Arc::clone(&slots).acquire_owned() => match s {
                        Ok(s) => s,
                        Err(_) => return,
                    },
                    _ = stop.cancelled() => return,
                };
                let next = tokio::select! {
                    n = worker.next(Duration::from_secs(60)) => n,
                    _ = stop.cancelled() => return,
                };
                match next {
                    Ok(Some(job)) => {
                        let kind = job.task().kind.clone().unwrap_or_default();
                        let tool = kinds
                            .read()
                            .unwrap_or_else(|p| p.into_inner())
                            .get(&kind)
                            .cloned();
                        let Some(tool) = tool else {
                            // The filter took it: its kind was known then.
                            continue;
                        };
                        let (upstreams, say, store, stop, changes) = (
                            Arc::clone(&upstreams),
                            Arc::clone(&say),
                            Arc::clone(&store),
                            stop.clone(),
                            changes.clone(),
                        );
                        tokio::spawn(async move {
                            let up = &upstreams[index];
                            crate::call::serve(job, up, &tool, store, changes, say, stop, false)
                                .await;
                            drop(slot);
                        });
                    }
                    Ok(None) => {}
                    Err(e) => {
                        say(&format!("gateway: {e}"));
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
    }
    while loops.join_next().await.is_some() {}
    // Every call holds a slot until its last write: once all are back, the
    // calls under way when `stop` came have given their leases back (each
    // ends at once on `stop`; the bound is for a store that stopped
    // answering, whose leases then lapse as after a crash).
    let all = u32::try_from(options.max_calls.max(1)).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(Duration::from_secs(10), slots.acquire_many(all)).await;
    Ok(())
}
