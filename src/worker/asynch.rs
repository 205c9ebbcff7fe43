//! The worker API for tokio code: [`AsyncWorker`], [`AsyncJob`],
//! [`AsyncAnswer`]. The same calls as the sync form; each store call runs
//! on tokio's blocking threads (`spawn_blocking`), never on the runtime's
//! own, and waits are the change feed's async side.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::job::{Shared, no_longer_asking};
use super::wait::follow;
use super::{Core, Look, Settings, WorkError};
use crate::store::{Outcome, Store, StoreError};
use crate::task::{Actor, Progress, Task};
use crate::watch::{ChangeFeed, FeedOptions};

/// Run a blocking store call on tokio's blocking threads.
async fn blocking<T: Send + 'static>(
    store: &Arc<Store>,
    f: impl FnOnce() -> Result<T, WorkError> + Send + 'static,
) -> Result<T, WorkError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(done) => done,
        // The call panicked, or the runtime is shutting down.
        Err(e) => Err(WorkError::Store(StoreError::Database {
            location: store.backend().store_location(),
            action: "run a store call",
            message: e.to_string(),
        })),
    }
}

/// A worker for tokio code: [`super::Worker`]'s API with `async` calls.
/// Made by [`super::WorkerBuilder::start_async`].
pub struct AsyncWorker {
    core: Core,
    feed: Option<ChangeFeed>,
}

impl AsyncWorker {
    pub(crate) fn new(core: Core) -> AsyncWorker {
        AsyncWorker { core, feed: None }
    }

    /// The name the worker was given.
    pub fn name(&self) -> &str {
        &self.core.settings.name
    }

    /// The lease holder its claims record.
    pub fn holder(&self) -> &str {
        &self.core.settings.holder
    }

    /// The store it works on (its calls block: run them with
    /// `spawn_blocking`).
    pub fn store(&self) -> &Arc<Store> {
        &self.core.store
    }

    /// [`super::Worker::next`]: wait on the change feed until this worker
    /// holds a claimed job or `timeout` passes.
    pub async fn next(&mut self, timeout: Duration) -> Result<Option<AsyncJob>, WorkError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.feed.is_none() {
                self.feed = Some(self.core.feed());
            }
            let (settings, store) = (
                Arc::clone(&self.core.settings),
                Arc::clone(&self.core.store),
            );
            let got = tokio::task::spawn_blocking(move || Core::claim(&settings, &store)).await;
            let got = got.unwrap_or_else(|e| {
                Err(StoreError::Database {
                    location: self.core.store.backend().store_location(),
                    action: "claim a task",
                    message: e.to_string(),
                })
            });
            if let Look::Claimed(task) = self.core.looked(got)? {
                return Ok(Some(AsyncJob::start(
                    Arc::clone(&self.core.settings),
                    Arc::clone(&self.core.store),
                    *task,
                )));
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let pause = self.core.pause(left);
            let Some(feed) = self.feed.as_mut() else {
                return Ok(None);
            };
            if let Ok(None) = tokio::time::timeout(pause, feed.next()).await {
                // The feed stopped: start another at the next turn.
                self.feed = None;
            }
        }
    }
}

/// [`super::Job`] for tokio code: its lease is renewed by a tokio task
/// while it is alive; dropping it gives the lease back (on a blocking
/// thread, without waiting).
pub struct AsyncJob {
    shared: Arc<Shared>,
    task: Task,
    renewer: tokio::task::JoinHandle<()>,
}

impl AsyncJob {
    fn start(settings: Arc<Settings>, store: Arc<Store>, task: Task) -> AsyncJob {
        let shared = Arc::new(Shared::new(settings, store, task.task_id.clone()));
        let renewing = Arc::clone(&shared);
        let renewer = tokio::spawn(async move {
            while let Some(wait) = renewing.renew_in() {
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = renewing.ended.notified() => continue,
                }
                if renewing.renew_in().is_some_and(|w| w.is_zero()) {
                    let shared = Arc::clone(&renewing);
                    // A failed renewal is recorded in the job's state.
                    let _ = tokio::task::spawn_blocking(move || shared.renew()).await;
                }
            }
        });
        AsyncJob {
            shared,
            task,
            renewer,
        }
    }

    /// The task as of this job's last write (or its claim).
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// The task's id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// The lease holder this job writes as.
    pub fn holder(&self) -> &str {
        &self.shared.settings.holder
    }

    /// [`super::Job::check`].
    pub fn check(&self) -> Result<(), WorkError> {
        self.shared.check()
    }

    async fn write(
        &mut self,
        finish: bool,
        f: impl FnOnce(&Store, Actor<'_>) -> Result<Outcome, StoreError> + Send + 'static,
    ) -> Result<Task, WorkError> {
        let shared = Arc::clone(&self.shared);
        let task = blocking(&self.shared.store, move || match finish {
            true => shared.finish(f),
            false => shared.write(f),
        })
        .await?;
        self.task = task.clone();
        Ok(task)
    }

    /// [`super::Job::progress`].
    pub async fn progress(&mut self, current: u64, total: u64) -> Result<(), WorkError> {
        let id = self.shared.id.clone();
        let progress = Progress { current, total };
        self.write(false, move |store, actor| {
            store.heartbeat(&id, None, Some(progress), actor)
        })
        .await
        .map(drop)
    }

    /// [`super::Job::message`].
    pub async fn message(&mut self, message: impl Into<String>) -> Result<(), WorkError> {
        let (id, message) = (self.shared.id.clone(), message.into());
        self.write(false, move |store, actor| {
            store.heartbeat(&id, Some(message), None, actor)
        })
        .await
        .map(drop)
    }

    /// [`super::Job::report`].
    pub async fn report(
        &mut self,
        message: impl Into<String>,
        current: u64,
        total: u64,
    ) -> Result<(), WorkError> {
        let (id, message) = (self.shared.id.clone(), message.into());
        let progress = Progress { current, total };
        self.write(false, move |store, actor| {
            store.heartbeat(&id, Some(message), Some(progress), actor)
        })
        .await
        .map(drop)
    }

    /// [`super::Job::ask`].
    pub async fn ask(
        &mut self,
        message: impl Into<String>,
        schema: Value,
    ) -> Result<AsyncAnswer<'_>, WorkError> {
        let (id, message) = (self.shared.id.clone(), message.into());
        let (holder, lease) = (
            self.shared.settings.holder.clone(),
            self.shared.settings.lease,
        );
        self.write(false, move |store, _| {
            store.request_input_holding(&id, schema, Some(message), &holder, lease)
        })
        .await?;
        Ok(AsyncAnswer { job: self })
    }

    /// [`super::Job::hand_over`].
    pub async fn hand_over(
        &mut self,
        message: impl Into<String>,
        schema: Value,
    ) -> Result<Task, WorkError> {
        let (id, message) = (self.shared.id.clone(), message.into());
        self.write(true, move |store, actor| {
            store.request_input(&id, schema, Some(message), actor)
        })
        .await
    }

    /// [`super::Job::complete`].
    pub async fn complete(&mut self, result: Value) -> Result<Task, WorkError> {
        let id = self.shared.id.clone();
        self.write(true, move |store, actor| store.complete(&id, result, actor))
            .await
    }

    /// [`super::Job::fail`].
    pub async fn fail(&mut self, message: impl Into<String>) -> Result<Task, WorkError> {
        let (id, message) = (self.shared.id.clone(), message.into());
        self.write(true, move |store, actor| store.fail(&id, &message, actor))
            .await
    }

    /// [`super::Job::release`].
    pub async fn release(&mut self) -> Result<Task, WorkError> {
        let (id, holder) = (self.shared.id.clone(), self.shared.settings.holder.clone());
        self.write(true, move |store, _| store.release(&id, &holder))
            .await
    }
}

impl Drop for AsyncJob {
    fn drop(&mut self) {
        self.renewer.abort();
        let shared = Arc::clone(&self.shared);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || shared.give_back())),
            // Dropped outside a runtime: give it back here.
            Err(_) => shared.give_back(),
        }
    }
}

/// The answer an [`AsyncJob::ask`] waits for.
pub struct AsyncAnswer<'j> {
    job: &'j mut AsyncJob,
}

impl AsyncAnswer<'_> {
    /// [`super::Answer::wait`].
    pub async fn wait(&mut self, timeout: Option<Duration>) -> Result<Option<Value>, WorkError> {
        let shared = Arc::clone(&self.job.shared);
        let read = |shared: Arc<Shared>| async move {
            let store = Arc::clone(&shared.store);
            tokio::task::spawn_blocking(move || store.get(&shared.id))
                .await
                .unwrap_or_else(|e| {
                    Err(StoreError::Database {
                        location: crate::store::Location::remote("the store"),
                        action: "read the task",
                        message: e.to_string(),
                    })
                })
        };
        let waited = async {
            let task = read(Arc::clone(&shared)).await?;
            if no_longer_asking(&task) {
                return Ok(task);
            }
            let feed = ChangeFeed::with_source(
                super::feed_source(&shared.store, Some(shared.id.clone())),
                FeedOptions {
                    task: Some(shared.id.clone()),
                    ..FeedOptions::default()
                },
            );
            let mut again = || -> Pin<Box<dyn Future<Output = _> + Send + '_>> {
                Box::pin(read(Arc::clone(&shared)))
            };
            // Only asked when the task vanished: whether the whole store did.
            let exists = || true;
            follow(
                feed,
                task,
                &no_longer_asking,
                &mut again,
                &exists,
                timeout,
                &mut |_| {},
            )
            .await
        }
        .await;
        let after = Arc::clone(&shared);
        let answered = blocking(&shared.store, move || after.after_wait(waited)).await?;
        match answered {
            Some((task, value)) => {
                self.job.task = task;
                Ok(Some(value))
            }
            None => Ok(None),
        }
    }
}
