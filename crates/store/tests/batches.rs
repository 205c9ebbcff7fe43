//! Reclaim, prune and a streamed list work in bounded batches (issue 10
//! item 7): no transaction fails or removes more than the batch size, and
//! the answer is the same as one step over everything gives — on every
//! backend.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use rudder_model::task::{Actor, Status, TaskMap};
use rudder_store::StoreError;
use rudder_store::{AnyBackend, Backend, NewTask, PageQuery, SortKey, Store, StoreOf, Transaction};

/// A backend that counts its transactions and, after each, how many tasks
/// it changed (by comparing the whole store before and after).
struct Counting {
    inner: AnyBackend,
    transactions: AtomicUsize,
    largest_change: AtomicUsize,
}

impl Counting {
    /// Count from zero again.
    fn reset(&self) {
        self.transactions.store(0, Ordering::SeqCst);
        self.largest_change.store(0, Ordering::SeqCst);
    }
}

impl Backend for Counting {
    fn location(&self) -> rudder_store::Location {
        self.inner.location()
    }
    fn snapshot(
        &self,
        f: &mut dyn FnMut(&dyn Transaction) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.inner.snapshot(f)
    }
    fn exists(&self) -> Result<bool, StoreError> {
        self.inner.exists()
    }
    fn batch_size(&self) -> Option<usize> {
        self.inner.batch_size()
    }
    fn feed_source(&self, task: Option<String>) -> Box<dyn rudder_store::watch::FeedSource> {
        self.inner.feed_source(task)
    }

    fn delivery(
        &self,
        name: &str,
        key: &rudder_store::delivery::EventKey,
        f: &mut rudder_store::delivery::Update<'_>,
    ) -> Result<(), StoreError> {
        self.inner.delivery(name, key, f)
    }
    fn transaction(
        &self,
        f: &mut dyn FnMut(&mut dyn Transaction) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let before = everything(&self.inner)?;
        self.inner.transaction(f)?;
        let after = everything(&self.inner)?;
        let changed = before
            .iter()
            .filter(|(id, t)| after.get(*id) != Some(t))
            .count()
            + after.keys().filter(|id| !before.contains_key(*id)).count();
        self.transactions.fetch_add(1, Ordering::SeqCst);
        self.largest_change.fetch_max(changed, Ordering::SeqCst);
        Ok(())
    }
}

/// Every task of `backend`, from one snapshot.
fn everything(backend: &AnyBackend) -> Result<TaskMap, StoreError> {
    let mut all = TaskMap::new();
    backend.snapshot(&mut |txn| {
        for task in txn.get_where(&|_| true)? {
            all.insert(task.task_id.clone(), task);
        }
        Ok(())
    })?;
    Ok(all)
}

type Clock = Arc<Mutex<DateTime<Utc>>>;

fn clocked(store: StoreOf<Counting>, clock: &Clock) -> StoreOf<Counting> {
    let c = clock.clone();
    store.with_clock(Arc::new(move || *c.lock().expect("clock")))
}

fn counting(path: &std::path::Path) -> StoreOf<Counting> {
    StoreOf::with_backend(Counting {
        inner: <AnyBackend as rudder_store::Connect>::connect(
            &rudder_store::StoreUrl::parse(path).expect("a store URL"),
            &rudder_store::Settings::of_process(),
        )
        .expect("a store this build opens"),
        transactions: AtomicUsize::new(0),
        largest_change: AtomicUsize::new(0),
    })
}

const STALE: usize = 11;
const BATCH: usize = 3;

/// A store at `path` with stale, leased, active and finished tasks.
fn populate(store: &StoreOf<Counting>, clock: &Clock) {
    let advance = |minutes| *clock.lock().expect("clock") += TimeDelta::minutes(minutes);
    let create = |title: String, ttl_ms| {
        store
            .create(NewTask {
                title: Some(title),
                ttl_ms,
                ..NewTask::default()
            })
            .expect("create")
            .task
            .task_id
    };
    for i in 0..STALE {
        create(format!("stale {i}"), None);
    }
    for i in 0..4 {
        let id = create(format!("done {i}"), None);
        store.cancel(&id, None).expect("cancel");
    }
    let kept = create("kept by its ttl".into(), Some(3_600_000));
    store.cancel(&kept, None).expect("cancel");
    advance(19);
    for i in 0..2 {
        let id = create(format!("leased {i}"), None);
        store
            .claim(&id, "w", Duration::from_secs(3600))
            .expect("claim");
    }
    advance(1);
    for i in 0..3 {
        create(format!("active {i}"), None);
    }
}

/// Two stores with the same tasks, ids included: one in one step, one in
/// batches of [`BATCH`].
fn twin_stores(dir: &std::path::Path) -> (StoreOf<Counting>, StoreOf<Counting>, Clock) {
    let start: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
    let clock = Arc::new(Mutex::new(start));
    let one_path = rudder_testkit::stores::store_in(&dir.join("one"));
    let one = clocked(counting(&one_path), &clock).with_batch_size(usize::MAX);
    populate(&one, &clock);
    let batched_path = rudder_testkit::stores::store_in(&dir.join("batched"));
    rudder_store::copy::copy(
        &Store::connect(&one_path).expect("a store URL"),
        &Store::connect(&batched_path).expect("a store URL"),
        |_| {},
    )
    .expect("copy");
    let batched = clocked(counting(&batched_path), &clock).with_batch_size(BATCH);
    for s in [&one, &batched] {
        s.backend().reset();
    }
    (one, batched, clock)
}

fn same_tasks(a: &StoreOf<Counting>, b: &StoreOf<Counting>) {
    let text = |s: &StoreOf<Counting>| serde_json::to_string(&s.load().expect("load")).unwrap();
    assert_eq!(text(a), text(b), "the two stores differ");
}

fn batches_used(store: &StoreOf<Counting>, expected: usize) {
    let b = store.backend();
    assert_eq!(
        b.transactions.load(Ordering::SeqCst),
        expected,
        "transactions"
    );
    let largest = b.largest_change.load(Ordering::SeqCst);
    assert!(largest <= BATCH, "a transaction changed {largest} tasks");
    b.reset();
}

fn reclaim_in_batches_gives_the_same_report_and_store_case() {
    let dir = tempfile::tempdir().unwrap();
    let (one, batched, _clock) = twin_stores(dir.path());
    let older = Duration::from_secs(15 * 60);
    let a = one.reclaim(older, false).expect("reclaim");
    let b = batched.reclaim(older, false).expect("reclaim in batches");
    assert_eq!(a, b);
    assert_eq!(a.reclaimed.len(), STALE);
    assert_eq!((a.skipped.len(), a.active), (2, 3), "{a:?}");
    same_tasks(&one, &batched);
    batches_used(&batched, STALE.div_ceil(BATCH));
    assert_eq!(one.backend().transactions.load(Ordering::SeqCst), 1);
}

fn a_previewed_reclaim_in_batches_gives_the_same_report_and_store_case() {
    let dir = tempfile::tempdir().unwrap();
    let (one, batched, clock) = twin_stores(dir.path());
    let older = Duration::from_secs(15 * 60);
    let preview = one.reclaim(older, true).expect("preview");
    let mut shown: Vec<(String, u64)> = preview
        .reclaimed
        .iter()
        .map(|r| (r.task_id.clone(), r.revision))
        .chain(preview.skipped.iter().map(|s| (s.task_id.clone(), 1)))
        .collect();
    // One changes after the preview, in both stores alike.
    let changed = shown[0].0.clone();
    for s in [&one, &batched] {
        s.heartbeat(&changed, None, None, Actor::Anyone)
            .expect("heartbeat");
    }
    shown.push(("no-such-task".into(), 1));
    *clock.lock().unwrap() += TimeDelta::minutes(16);
    for s in [&one, &batched] {
        s.backend().reset();
    }
    let a = one.reclaim_tasks(&shown, older).expect("reclaim");
    let b = batched
        .reclaim_tasks(&shown, older)
        .expect("reclaim in batches");
    assert_eq!(a, b);
    assert_eq!(a.reclaimed.len(), STALE - 1);
    let reasons: Vec<&str> = a.skipped.iter().map(|s| s.reason.as_str()).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("changed since the preview")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("lease held by w")),
        "{reasons:?}"
    );
    assert!(reasons.contains(&"it no longer exists"), "{reasons:?}");
    same_tasks(&one, &batched);
    batches_used(&batched, shown.len().div_ceil(BATCH));
}

fn prune_in_batches_gives_the_same_report_and_store_case() {
    let dir = tempfile::tempdir().unwrap();
    let (one, batched, _clock) = twin_stores(dir.path());
    // Reclaimed tasks are finished too: 4 cancelled + 11 failed.
    let older = Duration::from_secs(15 * 60);
    one.reclaim(older, false).unwrap();
    batched.reclaim(older, false).unwrap();
    let a = one.prune(Duration::ZERO).expect("prune");
    let b = batched.prune(Duration::ZERO).expect("prune in batches");
    assert_eq!(a, b);
    assert_eq!(a.removed.len(), STALE + 4, "{a:?}");
    same_tasks(&one, &batched);
    batches_used(
        &batched,
        STALE.div_ceil(BATCH) + (STALE + 4).div_ceil(BATCH),
    );
    let left = batched.list(&[]).unwrap();
    assert!(
        left.iter()
            .any(|t| t.title.as_deref() == Some("kept by its ttl"))
    );
    assert_eq!(
        left.iter()
            .filter(|t| t.status == Status::Cancelled)
            .count(),
        1
    );
}

fn a_streamed_page_is_the_page_case() {
    let dir = tempfile::tempdir().unwrap();
    let (_one, batched, _clock) = twin_stores(dir.path());
    for sort in [
        SortKey::Store,
        SortKey::Updated,
        SortKey::Created,
        SortKey::Title,
        SortKey::Id,
    ] {
        for limit in [None, Some(0), Some(2), Some(3), Some(7), Some(100)] {
            for statuses in [
                vec![],
                vec![Status::Working],
                vec![Status::Cancelled, Status::InputRequired],
            ] {
                let q = PageQuery {
                    statuses: statuses.clone(),
                    sort,
                    limit,
                    ..PageQuery::default()
                };
                let whole = batched.page(&q).expect("page");
                let mut streamed = Vec::new();
                batched
                    .page_each(&q, &mut |t| {
                        streamed.push(t);
                        true
                    })
                    .expect("page_each");
                assert_eq!(streamed, whole, "{q:?}");
            }
        }
    }
    // Stopping early stops.
    let mut seen = 0;
    batched
        .page_each(&PageQuery::default(), &mut |_| {
            seen += 1;
            seen < 4
        })
        .unwrap();
    assert_eq!(seen, 4);
}

rudder_testkit::backend_tests! {
    reclaim_in_batches_gives_the_same_report_and_store: reclaim_in_batches_gives_the_same_report_and_store_case,
    a_previewed_reclaim_in_batches_gives_the_same_report_and_store: a_previewed_reclaim_in_batches_gives_the_same_report_and_store_case,
    prune_in_batches_gives_the_same_report_and_store: prune_in_batches_gives_the_same_report_and_store_case,
    a_streamed_page_is_the_page: a_streamed_page_is_the_page_case,
}
