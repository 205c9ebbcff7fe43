//! A claimed task: [`Job`] (sync) and what it shares with
//! [`AsyncJob`](super::AsyncJob): the writes and the lease renewal.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub(crate) use super::lease::Shared;
use super::renewers::Renewers;
use super::wait::follow;
use super::{Settings, WorkError};
use crate::task::{Actor, Progress, Status, Task};
use crate::watch::FeedOptions;
use crate::{Outcome, Store, StoreError};

/// Whether a wait for an answer is over: the task no longer waits for it.
pub(crate) fn no_longer_asking(task: &Task) -> bool {
    task.status != Status::InputRequired
}

/// A task this worker claimed, with its lease renewed in the background
/// (by a thread) while the job is alive. Dropping the job gives the lease
/// back, unless it was completed or failed.
///
/// Every write returns [`WorkError::Stop`] once the store refused one
/// (cancelled, taken over, finished, gone): stop working and drop the job.
/// A task cancelled while the job writes nothing is found by the next
/// renewal, so within one renewal interval [`Job::check`] (and every write
/// after it) says [`Stop::Cancelled`].
pub struct Job {
    shared: Arc<Shared>,
    task: Task,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("task", &self.task.task_id)
            .field("holder", &self.shared.settings.holder)
            .finish_non_exhaustive()
    }
}

impl Job {
    pub(crate) fn start(
        settings: Arc<Settings>,
        store: Arc<Store>,
        renewers: &Renewers,
        task: Task,
    ) -> Job {
        let shared = Arc::new(Shared::new(settings, store, task.task_id.clone()));
        renewers.renew(Arc::clone(&shared));
        Job { shared, task }
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

    /// Whether the store refused a write or a renewal of this job: the
    /// [`Stop`] to obey, for a job that computes for long without writing.
    pub fn check(&self) -> Result<(), WorkError> {
        self.shared.check()
    }

    fn write(
        &mut self,
        f: impl FnOnce(&Store, Actor<'_>) -> Result<Outcome, StoreError>,
    ) -> Result<(), WorkError> {
        self.task = self.shared.write(f)?;
        Ok(())
    }

    /// Say how far the job is: `current` steps done of `total`.
    pub fn progress(&mut self, current: u64, total: u64) -> Result<(), WorkError> {
        let id = self.shared.id.clone();
        let progress = Progress { current, total };
        self.write(|store, actor| store.heartbeat(&id, None, Some(progress), actor))
    }

    /// Set the task's status message (what the TUI shows).
    pub fn message(&mut self, message: impl Into<String>) -> Result<(), WorkError> {
        let (id, message) = (self.shared.id.clone(), message.into());
        self.write(|store, actor| store.heartbeat(&id, Some(message), None, actor))
    }

    /// A message and the progress, in one write.
    pub fn report(
        &mut self,
        message: impl Into<String>,
        current: u64,
        total: u64,
    ) -> Result<(), WorkError> {
        let (id, message) = (self.shared.id.clone(), message.into());
        let progress = Progress { current, total };
        self.write(|store, actor| store.heartbeat(&id, Some(message), Some(progress), actor))
    }

    /// Ask a person: the task waits for input described by `schema` (a
    /// JSON Schema), with `message` as the question. The job keeps its
    /// lease meanwhile; [`Answer::wait`] waits for the answer and this
    /// worker continues with it. If this worker dies, its lease lapses and
    /// another worker claims the task once it has its answer.
    pub fn ask(
        &mut self,
        message: impl Into<String>,
        schema: Value,
    ) -> Result<Answer<'_>, WorkError> {
        let (id, message) = (self.shared.id.clone(), message.into());
        let (holder, lease) = (
            self.shared.settings.holder.clone(),
            self.shared.settings.lease,
        );
        self.write(|store, _| {
            store.request_input_holding(&id, schema, Some(message), &holder, lease)
        })?;
        Ok(Answer { job: self })
    }

    /// The answer to the question this job asked last ([`Job::ask`]), to
    /// wait for it again later: for a caller that cannot keep the
    /// [`Answer`] borrowed between calls (the Python binding, whose
    /// `ask(...)` and `wait(...)` are separate calls).
    pub fn answer(&mut self) -> Answer<'_> {
        Answer { job: self }
    }

    /// Ask a person and give the task back: it waits for input described
    /// by `schema`, and whichever worker is free claims it once it has the
    /// answer (this one included). The job is over.
    pub fn hand_over(
        &mut self,
        message: impl Into<String>,
        schema: Value,
    ) -> Result<Task, WorkError> {
        let (id, message) = (self.shared.id.clone(), message.into());
        let task = self
            .shared
            .finish(|store, actor| store.request_input(&id, schema, Some(message), actor))?;
        self.task = task.clone();
        Ok(task)
    }

    /// Complete the task with `result`. The job is over; a retry after a
    /// [`WorkError::Store`] is safe (the same result again is "unchanged").
    pub fn complete(&mut self, result: Value) -> Result<Task, WorkError> {
        let id = self.shared.id.clone();
        self.task = self
            .shared
            .finish(|store, actor| store.complete(&id, result, actor))?;
        Ok(self.task.clone())
    }

    /// Fail the task with `{"message": message}`. The job is over.
    pub fn fail(&mut self, message: &str) -> Result<Task, WorkError> {
        let id = self.shared.id.clone();
        self.task = self
            .shared
            .finish(|store, actor| store.fail(&id, message, actor))?;
        Ok(self.task.clone())
    }

    /// Give the lease back now (as dropping the job does, but saying
    /// whether it worked): another worker may claim the task at once. The
    /// job is over.
    pub fn release(&mut self) -> Result<Task, WorkError> {
        let (id, holder) = (self.shared.id.clone(), self.shared.settings.holder.clone());
        self.task = self.shared.finish(|store, _| store.release(&id, &holder))?;
        Ok(self.task.clone())
    }

    /// Stop renewing the lease without giving it back, and hand the task
    /// as claimed to whoever writes as this job's holder next (`rudder
    /// claim` prints it for a shell worker). The lease lapses unless that
    /// one renews it.
    pub fn detach(self) -> Task {
        self.shared.end();
        self.task.clone()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // Gives the lease back unless the job ended; the renewer drops the
        // job at its next wake-up.
        self.shared.give_back();
    }
}

/// The answer a [`Job::ask`] waits for.
pub struct Answer<'j> {
    job: &'j mut Job,
}

impl Answer<'_> {
    /// Wait until a person answered (`Some(value)`, the input given) or
    /// `timeout` passed (`None`: ask again with `wait`); `None` for the
    /// timeout waits as long as it takes. The job's lease is renewed while
    /// it waits. A task cancelled meanwhile is [`Stop::Cancelled`].
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<Option<Value>, WorkError> {
        let shared = Arc::clone(&self.job.shared);
        let store = &shared.store;
        let waited = (|| {
            let task = store.get(&shared.id)?;
            if no_longer_asking(&task) {
                return Ok(task);
            }
            let runtime = super::feed_runtime(store)?;
            runtime.block_on(async {
                let feed = store.feed(FeedOptions {
                    task: Some(shared.id.clone()),
                    ..FeedOptions::default()
                });
                let id = shared.id.clone();
                let mut read =
                    || -> std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send + '_>> {
                        Box::pin(std::future::ready(store.get(&id)))
                    };
                let exists = || crate::Backend::exists(store.backend()).unwrap_or(true);
                follow(
                    feed,
                    task,
                    &no_longer_asking,
                    &mut read,
                    &exists,
                    timeout,
                    &mut |_| {},
                )
                .await
            })
        })();
        match shared.after_wait(waited)? {
            Some((task, value)) => {
                self.job.task = task;
                Ok(Some(value))
            }
            None => Ok(None),
        }
    }
}
