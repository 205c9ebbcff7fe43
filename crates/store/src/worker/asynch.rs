//! The worker API for tokio code: [`AsyncWorker`], [`AsyncJob`],
//! [`AsyncAnswer`]. The same calls as the sync form; each store call runs
//! on a few store threads the worker keeps for its life (outside the
//! runtime, where the PostgreSQL client may block without a thread of its
//! own per call), never on the runtime's threads, and waits are the change
//! feed's async side.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::job::{Shared, no_longer_asking};
use super::wait::follow;
use super::{Core, Look, Settings, WorkError};
use crate::task::{Actor, Progress, Task};
use crate::watch::{ChangeFeed, FeedOptions};
use crate::{Outcome, Store, StoreError};

/// How many store threads an async worker keeps.
const STORE_THREADS: usize = 4;

type Call = Box<dyn FnOnce() + Send>;

/// Long-lived threads outside any tokio runtime that run blocking store
/// calls for an async worker and its jobs. They end when the last handle
/// is dropped.
pub(crate) struct Executor {
    tx: Mutex<std::sync::mpsc::Sender<Call>>,
}

impl Executor {
    fn new() -> Arc<Executor> {
        let (tx, rx) = std::sync::mpsc::channel::<Call>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..STORE_THREADS {
            let rx = Arc::clone(&rx);
            // A thread that cannot start leaves the others to do the work.
            let _ = std::thread::Builder::new()
                .name(format!("rudder-store-{i}"))
                .spawn(move || {
                    loop {
                        let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        match next {
                            // A call that panicked answers nobody (its
                            // caller sees the reply dropped); the thread
                            // goes on.
                            Ok(call) => {
                                drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)))
                            }
                            Err(_) => return,
                        }
                    }
                });
        }
        Arc::new(Executor { tx: Mutex::new(tx) })
    }

    /// Run `f` on a store thread without waiting for it.
    fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        let _ = self
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Box::new(f));
    }

    /// Run `f` on a store thread and wait for its answer.
    async fn run<T: Send + 'static>(
        &self,
        store: &Store,
        f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.spawn(move || {
            let _ = tx.send(f());
        });
        rx.await.unwrap_or_else(|_| {
            Err(StoreError::Database {
                location: store.backend().store_location(),
                action: "run a store call",
                message: "the call panicked".into(),
            })
        })
    }

    /// [`Executor::run`] for the job's own calls.
    async fn work<T: Send + 'static>(
        &self,
        store: &Store,
        f: impl FnOnce() -> Result<T, WorkError> + Send + 'static,
    ) -> Result<T, WorkError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.spawn(move || {
            let _ = tx.send(f());
        });
        rx.await.unwrap_or_else(|_| {
            Err(WorkError::Store(StoreError::Database {
                location: store.backend().store_location(),
                action: "run a store call",
                message: "the call panicked".into(),
            }))
        })
    }
}

/// A worker for tokio code: [`super::Worker`]'s API with `async` calls.
/// Made by [`super::WorkerBuilder::start_async`].
pub struct AsyncWorker {
    core: Core,
    feed: Option<ChangeFeed>,
    calls: Arc<Executor>,
}

impl AsyncWorker {
    pub(crate) fn new(core: Core) -> AsyncWorker {
        AsyncWorker {
            core,
            feed: None,
            calls: Executor::new(),
        }
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
    /// `spawn_blocking`, or from sync code).
    pub fn store(&self) -> &Arc<Store> {
        &self.core.store
    }

    /// [`super::Worker::next`]: wait on the change feed until this worker
    /// holds a claimed job or `timeout` passes.
    pub async fn next(&mut self, timeout: Duration) -> Result<Option<AsyncJob>, WorkError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let (settings, store) = (
                Arc::clone(&self.core.settings),
                Arc::clone(&self.core.store),
            );
            let got = self
                .calls
                .run(&self.core.store, move || Core::claim(&settings, &store))
                .await;
            if let Look::Claimed(task) = self.core.looked(got)? {
                // A busy worker keeps no feed (see `Core::feed`).
                self.feed = None;
                return Ok(Some(AsyncJob::start(
                    Arc::clone(&self.core.settings),
                    Arc::clone(&self.core.store),
                    Arc::clone(&self.calls),
                    *task,
                )));
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let Some(feed) = self.feed.as_mut() else {
                self.feed = Some(self.core.feed());
                // Look again: a task made before the feed started is told
                // by no one.
                continue;
            };
            let pause = self.core.pause(left);
            if let Ok(None) = tokio::time::timeout(pause, feed.next()).await {
                // The feed stopped: start another at the next turn.
                self.feed = None;
            }
        }
    }
}

/// Takes as this worker's job a task created already held by its holder
/// ([`crate::Store::create_held`]), as if [`AsyncWorker::next`] had
/// claimed it: a process that makes a task for its own worker hands it
/// over without a claim or a wait for the change feed. Cheap to clone.
#[derive(Clone)]
pub struct Adopter {
    settings: Arc<Settings>,
    store: Arc<Store>,
    calls: Arc<Executor>,
}

impl Adopter {
    /// The lease holder a task must be created held by.
    pub fn holder(&self) -> &str {
        &self.settings.holder
    }

    /// The lease it must be created held for.
    pub fn lease(&self) -> Duration {
        self.settings.lease
    }

    /// The job of `task`, if this worker holds it (`None`: another holder
    /// has it, or nobody; the task is not this worker's to work). Call
    /// from within a runtime (the job renews its lease on it).
    pub fn adopt(&self, task: Task) -> Option<AsyncJob> {
        if task.claimed_by.as_deref() != Some(self.settings.holder.as_str())
            || task.status.is_terminal()
        {
            return None;
        }
        Some(AsyncJob::start(
            Arc::clone(&self.settings),
            Arc::clone(&self.store),
            Arc::clone(&self.calls),
            task,
        ))
    }
}

impl AsyncWorker {
    /// What takes tasks created held by this worker as its jobs.
    pub fn adopter(&self) -> Adopter {
        Adopter {
            settings: Arc::clone(&self.core.settings),
            store: Arc::clone(&self.core.store),
            calls: Arc::clone(&self.calls),
        }
    }
}

/// [`super::Job`] for tokio code: its lease is renewed by a tokio task
/// while it is alive; dropping it gives the lease back (on a store thread,
/// without waiting).
pub struct AsyncJob {
    shared: Arc<Shared>,
    task: Task,
    renewer: tokio::task::JoinHandle<()>,
    calls: Arc<Executor>,
}

impl AsyncJob {
    fn start(
        settings: Arc<Settings>,
        store: Arc<Store>,
        calls: Arc<Executor>,
        task: Task,
    ) -> AsyncJob {
        let shared = Arc::new(Shared::new(settings, store, task.task_id.clone()));
        let renewing = Arc::clone(&shared);
        let renew_calls = Arc::clone(&calls);
        let renewer = tokio::spawn(async move {
            while let Some(wait) = renewing.renew_in() {
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = renewing.ended.notified() => continue,
                }
                if renewing.renew_in().is_some_and(|w| w.is_zero()) {
                    let shared = Arc::clone(&renewing);
                    // A failed renewal is recorded in the job's state.
                    let store = Arc::clone(&shared.store);
                    let _ = renew_calls
                        .work(&store, move || {
                            shared.renew();
                            Ok(())
                        })
                        .await;
                }
            }
        });
        AsyncJob {
            shared,
            task,
            renewer,
            calls,
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
        let task = self
            .calls
            .work(&self.shared.store, move || match finish {
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

    /// Record `note` in the task's history (its status unchanged; the
    /// lease renewed): what the trail should keep of this work, such as
    /// a gateway's attempts.
    pub async fn note(&mut self, note: impl Into<String>) -> Result<(), WorkError> {
        let (id, note) = (self.shared.id.clone(), note.into());
        self.write(false, move |store, actor| store.note(&id, &note, actor))
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
        self.calls.spawn(move || shared.give_back());
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
        let calls = Arc::clone(&self.job.calls);
        let read = |shared: Arc<Shared>| {
            let calls = Arc::clone(&calls);
            async move {
                let store = Arc::clone(&shared.store);
                calls
                    .run(&store, move || shared.store.get(&shared.id))
                    .await
            }
        };
        let waited = async {
            let task = read(Arc::clone(&shared)).await?;
            if no_longer_asking(&task) {
                return Ok(task);
            }
            let feed = shared.store.feed(FeedOptions {
                task: Some(shared.id.clone()),
                ..FeedOptions::default()
            });
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
        let answered = calls
            .work(&shared.store, move || after.after_wait(waited))
            .await?;
        match answered {
            Some((task, value)) => {
                self.job.task = task;
                Ok(Some(value))
            }
            None => Ok(None),
        }
    }
}
