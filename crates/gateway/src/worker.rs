//! Gateway workers: per upstream, a worker on the store's worker API that
//! claims the tasks of that upstream's tools under a lease, each call made
//! by its own tokio task ([`crate::call`]); at most
//! [`GatewayOptions::max_calls`] at once in all.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rudder_store::Work;
use rudder_store::task::{Author, Face};
use rudder_store::{Store, worker::DEFAULT_LEASE};
use tokio::sync::Semaphore;
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
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            name: "gateway".into(),
            max_calls: 16,
            lease: DEFAULT_LEASE,
            reserved_kinds: Vec::new(),
        }
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
/// cancelled. Tools named in the catalogue are worked from the start;
/// those of `tools = "*"` once `directory` lists them.
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
            Arc::new(store),
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
                            crate::call::serve(job, up, &tool, store, changes, say, stop).await;
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
    Ok(())
}
