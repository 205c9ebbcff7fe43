//! The lease a job holds: what a job's writes and its renewal share (the
//! renewal due, the stop a refused write said, whether the job is over), so
//! that the renewers ([`super::renewers`]) and the job ([`super::job`])
//! both stand on it and neither on the other.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::wait::WaitError;
use super::{Settings, Stop, WorkError};
use crate::task::{Actor, OpKind, Status, Task};
use crate::{Outcome, Store, StoreError};

/// What a job's writes and its renewal share.
pub(crate) struct Shared {
    pub settings: Arc<Settings>,
    pub store: Arc<Store>,
    pub id: String,
    state: Mutex<State>,
    /// Wakes the async renewer when the job ends.
    pub ended: tokio::sync::Notify,
}

struct State {
    /// When the lease is next renewed, unless the job writes before.
    due: Instant,
    /// What a refused write or renewal said: every later write says it too.
    stop: Option<Stop>,
    /// The task is finished or given back: nothing more to renew or release.
    over: bool,
}

impl Shared {
    pub fn new(settings: Arc<Settings>, store: Arc<Store>, id: String) -> Shared {
        let due = Instant::now() + settings.renew;
        Shared {
            settings,
            store,
            id,
            state: Mutex::new(State {
                due,
                stop: None,
                over: false,
            }),
            ended: tokio::sync::Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere cannot leave the state half-changed: every
        // change is one assignment.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn actor(&self) -> Actor<'_> {
        Actor::Worker {
            holder: &self.settings.holder,
            lease: Some(self.settings.lease),
        }
    }

    /// The stop a refused write or renewal recorded, if any.
    pub fn check(&self) -> Result<(), WorkError> {
        match &self.state().stop {
            Some(stop) => Err(WorkError::Stop(stop.clone())),
            None => Ok(()),
        }
    }

    /// Run one write of the job (a blocking call): refused at once after a
    /// stop; a success renews the lease, so the next renewal is due a whole
    /// interval later.
    pub fn write(
        &self,
        f: impl FnOnce(&Store, Actor<'_>) -> Result<Outcome, StoreError>,
    ) -> Result<Task, WorkError> {
        self.check()?;
        if self.state().over {
            return Err(WorkError::Stop(Stop::Finished(Arc::new(
                StoreError::Refused {
                    op: OpKind::Heartbeat,
                    reason: "this job already ended".into(),
                    task: Box::new(Task::new(self.id.clone(), Status::Completed)),
                },
            ))));
        }
        let got = f(&self.store, self.actor());
        let mut state = self.state();
        match got {
            Ok(outcome) => {
                state.due = Instant::now() + self.settings.renew;
                Ok(outcome.task)
            }
            Err(e) => {
                let e = WorkError::of(e);
                if let WorkError::Stop(stop) = &e {
                    state.stop = Some(stop.clone());
                }
                Err(e)
            }
        }
    }

    /// A write that ends the job: nothing is renewed or released after it.
    pub fn finish(
        &self,
        f: impl FnOnce(&Store, Actor<'_>) -> Result<Outcome, StoreError>,
    ) -> Result<Task, WorkError> {
        let task = self.write(f)?;
        self.end();
        Ok(task)
    }

    /// How long until the lease must be renewed; `None` once the job is
    /// over or stopped.
    pub fn renew_in(&self) -> Option<Duration> {
        let state = self.state();
        if state.over || state.stop.is_some() {
            return None;
        }
        Some(state.due.saturating_duration_since(Instant::now()))
    }

    /// Renew the lease now (a heartbeat that changes nothing else). A
    /// refusal is recorded as the job's stop; a failed store is tried again
    /// soon, before the lease lapses.
    pub fn renew(&self) {
        let id = self.id.clone();
        if let Err(WorkError::Store(_)) =
            self.write(|store, actor| store.heartbeat(&id, None, None, actor))
        {
            self.state().due = Instant::now() + self.settings.renew / 4;
        }
    }

    /// Mark the job over and wake the async renewer (the sync one drops
    /// the job when it next wakes).
    pub fn end(&self) {
        self.state().over = true;
        self.ended.notify_one();
    }

    /// Give the lease back unless the job is over (a blocking call). A
    /// failure leaves the lease to lapse.
    pub fn give_back(&self) {
        let over = std::mem::replace(&mut self.state().over, true);
        self.ended.notify_one();
        if !over {
            let _ = self.store.release(&self.id, &self.settings.holder);
        }
    }

    /// After a wait for an answer ended: the answer, if the task is
    /// working again and still this worker's. A renewal both confirms the
    /// lease and turns anything else into the store's own refusal.
    pub fn answered(&self) -> Result<(Task, Value), WorkError> {
        let id = self.id.clone();
        let task = self.write(|store, actor| store.heartbeat(&id, None, None, actor))?;
        let value = task.input_value.clone().unwrap_or(Value::Null);
        Ok((task, value))
    }

    /// The end of a wait for an answer: `None` when it timed out.
    pub fn after_wait(
        &self,
        waited: Result<Task, WaitError>,
    ) -> Result<Option<(Task, Value)>, WorkError> {
        match waited {
            Ok(_) | Err(WaitError::Vanished { .. }) => self.answered().map(Some),
            Err(WaitError::TimedOut { .. }) => {
                self.check()?;
                Ok(None)
            }
            Err(WaitError::Store(e)) => Err(WorkError::of(e)),
            Err(WaitError::FeedStopped) => Err(WorkError::Store(StoreError::Database {
                location: self.store.backend().store_location(),
                action: "follow the change feed",
                message: "the change feed stopped".into(),
            })),
        }
    }
}
