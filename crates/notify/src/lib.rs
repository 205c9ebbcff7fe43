//! `rudder notify` (docs/notify.md): follow a store's change feed and, for
//! each task that starts waiting for input, fails or stalls, deliver one
//! event to a program or a webhook, once per event across restarts and
//! between notifiers of one name.
//!
//! - [`event`]: which tasks make an event, its key (task, event, round) and
//!   its JSON.
//! - [`sink`]: one attempt at a delivery (a program without a shell, or an
//!   HTTP POST).
//! - [`Notifier`]: the loop. At start (and whenever the feed resets) it
//!   reads the tasks in the chosen states; then it takes the feed's
//!   changes; for stalled tasks, which change without a write, it wakes
//!   at the earliest lease expiry it knows. Each event is claimed in the
//!   store's delivery record (`rudder_store::delivery`) before it is
//!   delivered and recorded delivered after: a restarted notifier skips
//!   what was delivered, and a claim left by one killed mid-delivery is
//!   taken over when its lease lapses, so delivery is at least once (an
//!   event delivered but not yet recorded when the process died is
//!   delivered again). [`Notifier::run_until`] stops on a signal: it
//!   ends its attempts and gives their claims back, so that a notifier
//!   started next delivers them at once instead of after the lease.

pub mod event;
pub mod sink;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::AbortHandle;

use rudder_model::task::{Status, Task};
use rudder_store::delivery::{Claimed, EventKey};
use rudder_store::watch::{FeedEvent, FeedOptions};
use rudder_store::{PageQuery, Store, StoreError};

pub use event::On;
pub use sink::{Attempt, HeaderSpec, Secret, Sink, SinkError, Webhook};

/// How long a stopping notifier tries to give its claims back (a store
/// that is down must not keep it from exiting; the claims then lapse).
const RELEASE_PATIENCE: Duration = Duration::from_secs(5);

/// Tasks read per page when the notifier scans the store: a scan holds a
/// page at a time, never every waiting task of a large store.
const SCAN_PAGE: usize = 500;

/// How many deliveries run at once (a catch-up over many waiting tasks
/// does not start a program for each at the same moment).
const PARALLEL: usize = 8;

/// What the notifier does, besides where it delivers.
#[derive(Debug, Clone)]
pub struct Options {
    /// The record's name (`--name`): notifiers of one name deliver each
    /// event once between them.
    pub name: String,
    /// The events to tell (`--on`).
    pub on: Vec<On>,
    /// Only tasks of these kinds (`--kind`; any when empty).
    pub kinds: Vec<String>,
    /// How long one attempt may take (a program's run, a POST).
    pub timeout: Duration,
    /// The first retry's delay; each next one doubles, up to [`Options::max_backoff`].
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// This notifier's claims' holder.
    pub holder: String,
}

impl Options {
    /// The defaults for `name`: `input_required` only, 10 s per attempt,
    /// retries after 1 s doubling to a minute.
    pub fn new(name: impl Into<String>) -> Self {
        Options {
            name: name.into(),
            on: vec![On::InputRequired],
            kinds: Vec::new(),
            timeout: Duration::from_secs(10),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            holder: default_holder(),
        }
    }

    /// How long a claim holds: an attempt and a margin. A claim is renewed
    /// before each attempt and while a retry waits, so a live notifier
    /// keeps its events; one that died lets them go this long after.
    pub fn lease(&self) -> Duration {
        self.timeout + Duration::from_secs(5)
    }
}

/// `host/pid/random`: unique per process, readable in the record.
pub fn default_holder() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".into());
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}/{}/{}", std::process::id(), &random[..8])
}

/// What the notifier did, for its log (`--json`: one JSON line each).
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// `started`, `delivered`, `retry`, `gave_up`, `moot` (the task left
    /// the state before a retry), `held` (another notifier of the name
    /// holds it), `store` (the store could not be read or written),
    /// `stopped` (a signal: the claims under way are given back).
    pub outcome: &'static str,
    pub key: Option<EventKey>,
    pub attempt: u32,
    pub message: Option<String>,
}

impl LogLine {
    pub fn json(&self) -> Value {
        json!({
            "outcome": self.outcome,
            "task_id": self.key.as_ref().map(|k| &k.task_id),
            "event": self.key.as_ref().map(|k| &k.event),
            "round": self.key.as_ref().map(|k| k.round),
            "attempt": self.attempt,
            "message": self.message,
        })
    }
}

/// Where log lines go.
pub type Log = Arc<dyn Fn(LogLine) + Send + Sync>;

/// Why a notifier stopped.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("the change feed stopped")]
    FeedStopped,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A notifier over one store.
pub struct Notifier {
    store: Arc<Store>,
    shown: String,
    sink: Sink,
    opts: Arc<Options>,
    log: Log,
    /// Events being handled by a delivery of this process, and how to
    /// stop that delivery.
    inflight: Arc<Mutex<HashMap<EventKey, AbortHandle>>>,
    permits: Arc<Semaphore>,
}

impl Notifier {
    /// A notifier on `store`, delivering to `sink`.
    pub fn new(store: Store, sink: Sink, opts: Options, log: Log) -> Self {
        Notifier {
            shown: store.location(),
            store: Arc::new(store),
            sink,
            opts: Arc::new(opts),
            log,
            inflight: Arc::default(),
            permits: Arc::new(Semaphore::new(PARALLEL)),
        }
    }

    fn wants(&self, task: &Task) -> bool {
        self.opts.kinds.is_empty()
            || task
                .kind
                .as_ref()
                .is_some_and(|k| self.opts.kinds.contains(k))
    }

    /// Follow the store until the feed stops (it runs until the process
    /// is stopped).
    pub async fn run(self) -> Result<(), NotifyError> {
        self.run_until(std::future::pending()).await
    }

    /// [`Notifier::run`] until `stop` completes (a signal): then the
    /// deliveries under way are ended (a program is killed) and their
    /// claims given back, so that the next notifier of the name delivers
    /// them at once rather than when the claims' lease lapses.
    pub async fn run_until(self, stop: impl Future<Output = ()>) -> Result<(), NotifyError> {
        let follow = self.follow();
        tokio::select! {
            r = follow => r,
            () = stop => {
                self.stop().await;
                Ok(())
            }
        }
    }

    /// End the deliveries under way and give their claims back.
    async fn stop(&self) {
        let under_way: Vec<(EventKey, AbortHandle)> = self
            .inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for (_, handle) in &under_way {
            // Dropping the delivery's future kills its program
            // (`kill_on_drop`) or drops its request.
            handle.abort();
        }
        (self.log)(LogLine {
            outcome: "stopped",
            key: None,
            attempt: 0,
            message: Some(format!(
                "stopping: giving back the claims of {} deliveries under way",
                under_way.len()
            )),
        });
        // Together: a store that is slow to answer costs the patience
        // once, not once per claim.
        let mut releases = tokio::task::JoinSet::new();
        for (key, _) in under_way {
            let (store, opts) = (Arc::clone(&self.store), Arc::clone(&self.opts));
            releases.spawn(async move {
                let k = key.clone();
                let r =
                    blocking(move || store.release_delivery(&opts.name, &k, &opts.holder)).await;
                (key, r)
            });
        }
        let all = async {
            while let Some(done) = releases.join_next().await {
                if let Ok((key, Err(e))) = done {
                    (self.log)(LogLine {
                        outcome: "store",
                        key: Some(key),
                        attempt: 0,
                        message: Some(format!("the claim could not be given back: {e}")),
                    });
                }
            }
        };
        if tokio::time::timeout(RELEASE_PATIENCE, all).await.is_err() {
            (self.log)(LogLine {
                outcome: "store",
                key: None,
                attempt: 0,
                message: Some(format!(
                    "the claims could not all be given back within {}; they lapse with their lease",
                    humantime::format_duration(RELEASE_PATIENCE)
                )),
            });
        }
    }

    async fn follow(&self) -> Result<(), NotifyError> {
        let mut feed = self.store.feed(FeedOptions::default());
        (self.log)(LogLine {
            outcome: "started",
            key: None,
            attempt: 0,
            message: Some(format!(
                "{} on {} for {} to {}",
                self.opts.name,
                self.shown,
                self.opts
                    .on
                    .iter()
                    .map(|o| o.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
                self.sink.describe()
            )),
        });
        let stalled = self.opts.on.contains(&On::Stalled);
        // The working tasks' lease expiries, to wake when one lapses.
        let mut leases: HashMap<String, DateTime<Utc>> = HashMap::new();
        let mut unavailable = false;
        loop {
            let wake = leases.values().min().copied();
            let sleep = async {
                match wake {
                    Some(at) => {
                        let left = (at - Utc::now()).to_std().unwrap_or_default();
                        // A hair after the expiry: `stalled` is `<=`.
                        tokio::time::sleep(left + Duration::from_millis(1)).await
                    }
                    None => std::future::pending().await,
                }
            };
            let ids: Vec<String> = tokio::select! {
                ev = feed.next() => match ev {
                    None => return Err(NotifyError::FeedStopped),
                    Some(FeedEvent::Reset(_)) => {
                        unavailable = false;
                        leases.clear();
                        if let Err(e) = self.scan(&mut leases).await {
                            self.store_error(&e);
                        }
                        Vec::new()
                    }
                    Some(FeedEvent::Changes(changes)) => {
                        unavailable = false;
                        changes
                            .into_iter()
                            .filter(|c| {
                                c.to.is_some_and(|s| self.opts.on.iter().any(|o| o.status() == s))
                                    || (stalled && c.from == Some(Status::Working))
                                    || c.to.is_none()
                            })
                            .map(|c| c.task_id)
                            .collect()
                    }
                    Some(FeedEvent::Unavailable(u)) => {
                        if !unavailable {
                            unavailable = true;
                            (self.log)(LogLine {
                                outcome: "store",
                                key: None,
                                attempt: 0,
                                message: Some(format!("the store cannot be read now: {u:?}; waiting")),
                            });
                        }
                        Vec::new()
                    }
                },
                () = sleep => {
                    let now = Utc::now();
                    leases.iter().filter(|(_, t)| **t <= now).map(|(id, _)| id.clone()).collect()
                }
            };
            for id in ids {
                match self.read(id.clone()).await {
                    Ok(Some(task)) => self.consider(&task, &mut leases),
                    Ok(None) => {
                        leases.remove(&id);
                    }
                    Err(e) => self.store_error(&e),
                }
            }
        }
    }

    fn store_error(&self, e: &StoreError) {
        (self.log)(LogLine {
            outcome: "store",
            key: None,
            attempt: 0,
            message: Some(e.to_string()),
        });
    }

    /// Consider every task in the chosen states now, a page at a time.
    /// Events recorded delivered are left out within the page's read, so
    /// that what stays in memory is the events still to tell (none, on a
    /// store whose events were all told) and the working tasks' leases.
    async fn scan(&self, leases: &mut HashMap<String, DateTime<Utc>>) -> Result<(), StoreError> {
        let mut after: Option<String> = None;
        loop {
            let store = Arc::clone(&self.store);
            let opts = Arc::clone(&self.opts);
            let q = PageQuery {
                statuses: self.opts.on.iter().map(|o| o.status()).collect(),
                kinds: self.opts.kinds.clone(),
                limit: Some(SCAN_PAGE),
                after: after.take(),
                ..PageQuery::default()
            };
            let (kept, last, full) = blocking(move || {
                let page = store.page(&q)?;
                let full = page.len() == SCAN_PAGE;
                let last = page.last().map(|t| t.task_id.clone());
                let mut kept = Vec::new();
                let now = Utc::now();
                for t in page {
                    let stalls = opts.on.contains(&On::Stalled) && t.status == Status::Working;
                    let mut untold = false;
                    for &on in &opts.on {
                        if let Some(key) = event::event_of(&t, on, now)
                            && store
                                .delivery_record(&opts.name, &key)?
                                .is_none_or(|d| d.delivered_at.is_none())
                        {
                            untold = true;
                        }
                    }
                    if stalls || untold {
                        kept.push(t);
                    }
                }
                Ok((kept, last, full))
            })
            .await?;
            for t in &kept {
                self.consider(t, leases);
            }
            match last {
                Some(id) if full => after = Some(id),
                _ => return Ok(()),
            }
        }
    }

    async fn read(&self, id: String) -> Result<Option<Task>, StoreError> {
        let store = Arc::clone(&self.store);
        blocking(move || match store.get(&id) {
            Ok(t) if t.task_id == id => Ok(Some(t)),
            Ok(_) => Ok(None),
            Err(StoreError::UnknownTask { .. }) => Ok(None),
            Err(e) => Err(e),
        })
        .await
    }

    /// Start a delivery for each event `task` makes now; note its lease
    /// if it may stall later.
    fn consider(&self, task: &Task, leases: &mut HashMap<String, DateTime<Utc>>) {
        leases.remove(&task.task_id);
        if !self.wants(task) {
            return;
        }
        let now = Utc::now();
        if self.opts.on.contains(&On::Stalled)
            && task.status == Status::Working
            && !task.stalled(now)
            && let Some(until) = task.lease_expires_at
        {
            leases.insert(task.task_id.clone(), until);
        }
        for &on in &self.opts.on {
            if let Some(key) = event::event_of(task, on, now) {
                self.spawn(key, on, task.clone());
            }
        }
    }

    fn spawn(&self, key: EventKey, on: On, task: Task) {
        // Held until the delivery's handle is in: the delivery removes its
        // key when it ends, which must come after.
        let mut inflight = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
        if inflight.contains_key(&key) {
            return;
        }
        let d = Delivery {
            store: Arc::clone(&self.store),
            sink: self.sink.clone(),
            opts: Arc::clone(&self.opts),
            log: Arc::clone(&self.log),
            shown: self.shown.clone(),
            permits: Arc::clone(&self.permits),
        };
        let shared = Arc::clone(&self.inflight);
        let k = key.clone();
        let handle = tokio::spawn(async move {
            d.run(&k, on, task).await;
            shared.lock().unwrap_or_else(|p| p.into_inner()).remove(&k);
        });
        inflight.insert(key, handle.abort_handle());
    }
}

/// One event's delivery, from its claim to its record.
struct Delivery {
    store: Arc<Store>,
    sink: Sink,
    opts: Arc<Options>,
    log: Log,
    shown: String,
    permits: Arc<Semaphore>,
}

impl Delivery {
    fn log(&self, outcome: &'static str, key: &EventKey, attempt: u32, message: Option<String>) {
        (self.log)(LogLine {
            outcome,
            key: Some(key.clone()),
            attempt,
            message,
        });
    }

    async fn claim(&self, key: &EventKey) -> Result<Claimed, StoreError> {
        let (store, opts, key) = (Arc::clone(&self.store), Arc::clone(&self.opts), key.clone());
        blocking(move || store.claim_delivery(&opts.name, &key, &opts.holder, opts.lease())).await
    }

    /// Record the event delivered, trying again while the store is away
    /// (the delivery happened; forgetting it would repeat it).
    async fn finish(&self, key: &EventKey) {
        let mut delay = self.opts.backoff;
        loop {
            let (store, opts, k) = (Arc::clone(&self.store), Arc::clone(&self.opts), key.clone());
            match blocking(move || store.finish_delivery(&opts.name, &k, &opts.holder)).await {
                Ok(()) => return,
                Err(e) => {
                    self.log("store", key, 0, Some(e.to_string()));
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(self.opts.max_backoff);
                }
            }
        }
    }

    /// Whether the event is still the task's current one (a retry of an
    /// event the task has left behind tells of something that is over).
    async fn current(&self, key: &EventKey, on: On) -> Result<Option<Task>, StoreError> {
        let (store, id) = (Arc::clone(&self.store), key.task_id.clone());
        let task = blocking(move || match store.get(&id) {
            Ok(t) if t.task_id == id => Ok(Some(t)),
            Ok(_) | Err(StoreError::UnknownTask { .. }) => Ok(None),
            Err(e) => Err(e),
        })
        .await?;
        Ok(task.filter(|t| event::event_of(t, on, Utc::now()).as_ref() == Some(key)))
    }

    /// Wait `total`, renewing the claim so that it outlives the wait;
    /// `false` once the event is no longer this notifier's to deliver
    /// (another holder took it over, or it was delivered).
    async fn wait_holding(&self, key: &EventKey, total: Duration) -> bool {
        let step = self.opts.lease() / 2;
        let mut left = total;
        while !left.is_zero() {
            let now = left.min(step);
            tokio::time::sleep(now).await;
            left -= now;
            if !left.is_zero() {
                match self.claim(key).await {
                    Ok(Claimed::Won { .. }) => {}
                    Ok(Claimed::Held { .. } | Claimed::Delivered) => return false,
                    // The store is out of reach: the next claim says.
                    Err(_) => {}
                }
            }
        }
        true
    }

    async fn run(&self, key: &EventKey, on: On, mut task: Task) {
        let mut delay = self.opts.backoff;
        let mut attempt = 0u32;
        loop {
            // A slot first, then the claim: a claim taken while waiting for
            // a slot could lapse in the queue and be delivered twice.
            let permit = self.permits.acquire().await;
            match self.claim(key).await {
                Err(e) => {
                    drop(permit);
                    self.log("store", key, attempt, Some(e.to_string()));
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(self.opts.max_backoff);
                    continue;
                }
                Ok(Claimed::Delivered) => return,
                Ok(Claimed::Held { holder, until }) => {
                    drop(permit);
                    self.log(
                        "held",
                        key,
                        attempt,
                        Some(format!("{holder} holds it until {until}")),
                    );
                    let left = (until - Utc::now()).to_std().unwrap_or_default();
                    tokio::time::sleep(left + Duration::from_millis(10)).await;
                    match self.current(key, on).await {
                        Ok(Some(t)) => task = t,
                        Ok(None) => return,
                        Err(e) => self.log("store", key, attempt, Some(e.to_string())),
                    }
                    continue;
                }
                Ok(Claimed::Won { .. }) => {}
            }
            attempt += 1;
            let outcome = {
                let _permit = permit;
                let event =
                    event::event_json(&task, key, on, Utc::now(), &self.shown, &self.opts.name);
                let body = serde_json::to_vec(&event).unwrap_or_default();
                self.sink.deliver(&event, body, self.opts.timeout).await
            };
            match outcome {
                Attempt::Delivered => {
                    self.finish(key).await;
                    self.log("delivered", key, attempt, Some(self.sink.describe()));
                    return;
                }
                Attempt::GiveUp(why) => {
                    // Recorded, so that no restart tries it again either.
                    self.finish(key).await;
                    self.log("gave_up", key, attempt, Some(why));
                    return;
                }
                Attempt::Retry(why) => {
                    self.log(
                        "retry",
                        key,
                        attempt,
                        Some(format!(
                            "{why}; again in {}",
                            humantime::format_duration(delay)
                        )),
                    );
                    if !self.wait_holding(key, delay).await {
                        return;
                    }
                    delay = (delay * 2).min(self.opts.max_backoff);
                    match self.current(key, on).await {
                        Ok(Some(t)) => task = t,
                        Ok(None) => {
                            let (store, opts, k) =
                                (Arc::clone(&self.store), Arc::clone(&self.opts), key.clone());
                            let _ = blocking(move || {
                                store.release_delivery(&opts.name, &k, &opts.holder)
                            })
                            .await;
                            self.log(
                                "moot",
                                key,
                                attempt,
                                Some("the task left this state; not retried".into()),
                            );
                            return;
                        }
                        // Try with what we have; the claim says whether.
                        Err(e) => self.log("store", key, attempt, Some(e.to_string())),
                    }
                }
            }
        }
    }
}

/// Run a store call on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Cancelled: the runtime is shutting down, and this task with it.
        Err(_) => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rudder_model::task::Task;
    use rudder_store::Backend;

    /// A start-up scan over more than two pages tells each event not yet
    /// recorded delivered exactly once, on every page (the first, a middle
    /// one, the last, short one), and none of those recorded.
    #[test]
    fn a_scan_over_several_pages_tells_each_untold_event_once() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("tasks.db").display());
        let store = Store::connect(url.as_str()).unwrap();
        let ids: Vec<String> = (0..SCAN_PAGE * 2 + 1)
            .map(|i| format!("00000000-0000-4000-8000-{i:012}"))
            .collect();
        store
            .backend()
            .transaction(&mut |txn| {
                for id in &ids {
                    txn.insert(Task::new(id.clone(), Status::InputRequired))?;
                }
                Ok(true)
            })
            .unwrap();
        let key = |id: &str| EventKey {
            task_id: id.to_string(),
            event: "input_required".into(),
            round: 0,
        };
        // All told before but one in 50, the last task among the untold.
        let untold: Vec<String> = ids
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 50 == 0)
            .map(|(_, id)| id.clone())
            .collect();
        for id in ids.iter().filter(|id| !untold.contains(id)) {
            let lease = Duration::from_secs(60);
            store
                .claim_delivery("notify", &key(id), "before", lease)
                .unwrap();
            store.finish_delivery("notify", &key(id), "before").unwrap();
        }
        let told: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = Arc::clone(&told);
        let log: Log = Arc::new(move |line: LogLine| {
            if line.outcome == "delivered"
                && let Some(k) = line.key
            {
                seen.lock().unwrap().push(k.task_id);
            }
        });
        let mut opts = Options::new("notify");
        opts.backoff = Duration::from_millis(10);
        let sink = Sink::Exec {
            program: "true".into(),
            args: Vec::new(),
        };
        let notifier = Notifier::new(Store::connect(url.as_str()).unwrap(), sink, opts, log);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let want = untold.len();
        let counted = Arc::clone(&told);
        let all_told = async move {
            while counted.lock().unwrap().len() < want {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        runtime
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(120), notifier.run_until(all_told)).await
            })
            .expect("every untold event is told")
            .unwrap();
        let mut got = told.lock().unwrap().clone();
        got.sort();
        assert_eq!(got, untold);
        for id in &ids {
            let d = store.delivery_record("notify", &key(id)).unwrap().unwrap();
            assert!(d.delivered_at.is_some(), "{id}");
            assert_eq!(d.attempts, 1, "{id} was claimed again");
        }
    }
}
