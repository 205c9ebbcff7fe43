//! A property test: random operation sequences run against the file store and
//! against a tiny in-memory model of docs/architecture.md's rules must agree on every
//! answer (applied / unchanged / error kind) and on every task's status,
//! input, result, error, lease and revision — including across reopening the
//! store (a fresh `Store::open` on the same path, as a restarted process would).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use proptest::sample::Index;
use rudder_store::task::{Actor, Change, Status, Task};
use rudder_store::{Clock, ErrorKind, NewTask, Outcome, Store, StoreError};
use rudder_testkit::stores;
use serde_json::{Value, json};

const LEASE_SECS: i64 = 60;
const HOLDERS: [&str; 2] = ["w1", "w2"];

fn schema(i: u8) -> Value {
    match i {
        0 => json!({"type": "object", "required": ["service"],
                    "properties": {"service": {"type": "string"}}}),
        _ => json!({"type": "object", "required": ["n"],
                    "properties": {"n": {"type": "integer"}}}),
    }
}

fn value(i: u8) -> Value {
    match i {
        0 => json!({"service": "payments"}),
        1 => json!({"service": "db"}),
        2 => json!({"service": 5}),
        _ => json!({"n": 3}),
    }
}

/// Which input values satisfy which schema (the model's own table, not the validator).
fn valid(schema: u8, value: u8) -> bool {
    matches!((schema, value), (0, 0) | (0, 1) | (1, 3))
}

/// 2 is `null` (what `rudder complete ID` without `--result` sends).
fn result(i: u8) -> Value {
    match i {
        0 | 1 => {
            let summary = ["no active incident", "rewritten!"][i as usize];
            json!({ "summary": summary })
        }
        _ => Value::Null,
    }
}

/// What the file holds for a result: a `null` result reads back as none.
fn stored_result(i: Option<u8>) -> Option<Value> {
    i.map(result).filter(|r| !r.is_null())
}

/// 0 is no request, 3 an explicit `null` (the same thing once stored).
fn request(i: u8) -> Option<Value> {
    match i {
        0 => None,
        3 => Some(Value::Null),
        i => Some(json!({ "incident": i })),
    }
}

fn normalized_request(i: u8) -> u8 {
    if i == 3 { 0 } else { i }
}

#[derive(Debug, Clone)]
enum Op {
    Create {
        schema: Option<u8>,
        key: Option<u8>,
        request: u8,
    },
    RequestInput {
        t: Index,
        schema: u8,
    },
    Provide {
        t: Index,
        value: u8,
        /// `Some(0)`: the current revision; `Some(1)`: one behind.
        behind: Option<u8>,
    },
    Heartbeat {
        t: Index,
        worker: Option<u8>,
    },
    Complete {
        t: Index,
        result: u8,
        worker: Option<u8>,
    },
    Fail {
        t: Index,
        msg: u8,
    },
    Cancel {
        t: Index,
    },
    Claim {
        t: Index,
        holder: u8,
    },
    Release {
        t: Index,
        holder: u8,
    },
    Advance {
        secs: i64,
    },
    Reopen,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let t = any::<Index>;
    let holder = || 0..2u8;
    prop_oneof![
        3 => (proptest::option::of(0..2u8), proptest::option::of(0..3u8), 0..4u8)
            .prop_map(|(schema, key, request)| Op::Create { schema, key, request }),
        1 => (t(), 0..2u8).prop_map(|(t, schema)| Op::RequestInput { t, schema }),
        3 => (t(), 0..4u8, proptest::option::of(0..2u8))
            .prop_map(|(t, value, behind)| Op::Provide { t, value, behind }),
        1 => (t(), proptest::option::of(holder()))
            .prop_map(|(t, worker)| Op::Heartbeat { t, worker }),
        2 => (t(), 0..3u8, proptest::option::of(holder()))
            .prop_map(|(t, result, worker)| Op::Complete { t, result, worker }),
        1 => (t(), 0..2u8).prop_map(|(t, msg)| Op::Fail { t, msg }),
        1 => t().prop_map(|t| Op::Cancel { t }),
        2 => (t(), holder()).prop_map(|(t, holder)| Op::Claim { t, holder }),
        1 => (t(), holder()).prop_map(|(t, holder)| Op::Release { t, holder }),
        1 => (0..120i64).prop_map(|secs| Op::Advance { secs }),
        1 => Just(Op::Reopen),
    ]
}

/// The model of one task.
#[derive(Debug, Clone, PartialEq)]
struct M {
    id: String,
    status: Status,
    schema: Option<u8>,
    input: Option<u8>,
    result: Option<u8>,
    error: Option<u8>,
    claimed_by: Option<u8>,
    lease_until: i64,
    revision: u64,
    key: Option<u8>,
    request: u8,
}

impl M {
    fn terminal(&self) -> bool {
        self.status.is_terminal()
    }
    fn lease_live(&self, now: i64) -> bool {
        self.claimed_by.is_some() && self.lease_until > now
    }
    fn drop_claim(&mut self) {
        self.claimed_by = None;
    }
    /// What the store must hold for this task.
    fn check(&self, t: &Task, ctx: &str) {
        assert_eq!(t.task_id, self.id, "{ctx}");
        assert_eq!(t.status, self.status, "{ctx}: status");
        assert_eq!(t.input_schema, self.schema.map(schema), "{ctx}: schema");
        assert_eq!(t.input_value, self.input.map(value), "{ctx}: input_value");
        assert_eq!(t.result, stored_result(self.result), "{ctx}: result");
        let error = self.error.map(|m| json!({ "message": msg(m) }));
        assert_eq!(t.error, error, "{ctx}: error");
        let holder = self.claimed_by.map(|h| HOLDERS[h as usize].to_string());
        assert_eq!(t.claimed_by, holder, "{ctx}: claimed_by");
        assert_eq!(t.revision, self.revision, "{ctx}: revision");
        assert_eq!(t.idempotency_key, self.key.map(key), "{ctx}: key");
        assert_eq!(
            t.request,
            request(self.request).filter(|r| !r.is_null()),
            "{ctx}: request"
        );
    }
}

fn msg(i: u8) -> String {
    format!("error {i}")
}

fn key(i: u8) -> String {
    format!("key-{i}")
}

/// The model's answer: a change, or the kind of error.
type Answer = Result<Change, ErrorKind>;

#[derive(Debug, Default)]
struct Model {
    tasks: Vec<M>,
    now: i64,
}

impl Model {
    /// The task an index designates: one of the tasks, or (one slot in
    /// `len + 1`) an id that does not exist.
    fn pick(&self, t: &Index) -> Option<usize> {
        let i = t.index(self.tasks.len() + 1);
        (i < self.tasks.len()).then_some(i)
    }

    fn create(
        &mut self,
        schema: Option<u8>,
        k: Option<u8>,
        request: u8,
    ) -> (Answer, Option<usize>) {
        let request = normalized_request(request);
        if let Some(k) = k
            && let Some(i) = self.tasks.iter().position(|t| t.key == Some(k))
        {
            let t = &self.tasks[i];
            if t.schema != schema || t.request != request {
                return (Err(ErrorKind::IdempotencyConflict), Some(i));
            }
            return (Ok(Change::Unchanged), Some(i));
        }
        self.tasks.push(M {
            id: String::new(), // filled in from the store's answer
            status: if schema.is_some() {
                Status::InputRequired
            } else {
                Status::Working
            },
            schema,
            input: None,
            result: None,
            error: None,
            claimed_by: None,
            lease_until: 0,
            revision: 1,
            key: k,
            request,
        });
        (Ok(Change::Applied), Some(self.tasks.len() - 1))
    }

    /// Apply a mutation to task `i` following docs/architecture.md; `None` for `i` is an unknown id.
    fn mutate(&mut self, i: Option<usize>, op: &Op) -> Answer {
        let Some(i) = i else {
            return Err(ErrorKind::UnknownTask);
        };
        let now = self.now;
        let t = &mut self.tasks[i];
        let worker_ok = |t: &M, w: Option<u8>| w.is_none() || t.claimed_by == w;
        let renew = |t: &mut M, w: Option<u8>| {
            if let Some(w) = w {
                t.claimed_by = Some(w);
                t.lease_until = now + LEASE_SECS;
            }
        };
        let answer = match *op {
            Op::RequestInput { schema, .. } => {
                if t.status == Status::InputRequired && t.schema == Some(schema) {
                    return Ok(Change::Unchanged);
                }
                if t.status != Status::Working {
                    return Err(ErrorKind::Refused);
                }
                t.status = Status::InputRequired;
                t.schema = Some(schema);
                t.input = None;
                t.drop_claim();
                Ok(Change::Applied)
            }
            Op::Provide { value, behind, .. } => {
                if t.status != Status::InputRequired && t.input == Some(value) {
                    return Ok(Change::Unchanged);
                }
                if behind.is_some_and(|b| b > 0) {
                    return Err(ErrorKind::StaleRevision);
                }
                if t.status != Status::InputRequired {
                    return Err(ErrorKind::Refused);
                }
                if !t.schema.is_some_and(|s| valid(s, value)) {
                    return Err(ErrorKind::InvalidInput);
                }
                t.status = Status::Working;
                t.input = Some(value);
                Ok(Change::Applied)
            }
            Op::Heartbeat { worker, .. } => {
                if t.terminal() {
                    return Err(ErrorKind::Refused);
                }
                if !worker_ok(t, worker) {
                    return Err(ErrorKind::LeaseLost);
                }
                renew(t, worker);
                Ok(Change::Applied)
            }
            Op::Complete { result, worker, .. } => {
                if t.status == Status::Completed
                    && stored_result(t.result) == stored_result(Some(result))
                {
                    return Ok(Change::Unchanged);
                }
                if t.terminal() {
                    return Err(ErrorKind::Refused);
                }
                if !worker_ok(t, worker) {
                    return Err(ErrorKind::LeaseLost);
                }
                t.status = Status::Completed;
                t.result = Some(result);
                t.drop_claim();
                Ok(Change::Applied)
            }
            Op::Fail { msg, .. } => {
                if t.status == Status::Failed && t.error == Some(msg) {
                    return Ok(Change::Unchanged);
                }
                if t.terminal() {
                    return Err(ErrorKind::Refused);
                }
                t.status = Status::Failed;
                t.error = Some(msg);
                t.drop_claim();
                Ok(Change::Applied)
            }
            Op::Cancel { .. } => {
                if t.status == Status::Cancelled {
                    return Ok(Change::Unchanged);
                }
                if t.terminal() {
                    return Err(ErrorKind::Refused);
                }
                t.status = Status::Cancelled;
                t.drop_claim();
                Ok(Change::Applied)
            }
            Op::Claim { holder, .. } => {
                if t.status != Status::Working {
                    return Err(ErrorKind::Refused);
                }
                if t.claimed_by.is_some_and(|h| h != holder) && t.lease_live(now) {
                    return Err(ErrorKind::LeaseLost);
                }
                t.claimed_by = Some(holder);
                t.lease_until = now + LEASE_SECS;
                Ok(Change::Applied)
            }
            Op::Release { holder, .. } => match t.claimed_by {
                None => Ok(Change::Unchanged),
                Some(h) if h == holder => {
                    t.drop_claim();
                    Ok(Change::Applied)
                }
                Some(_) => Err(ErrorKind::LeaseLost),
            },
            Op::Create { .. } | Op::Advance { .. } | Op::Reopen => unreachable!(),
        };
        if answer == Ok(Change::Applied) {
            t.revision += 1;
        }
        answer
    }
}

fn base() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 7, 28, 9, 0, 0).unwrap()
}

fn open(path: &Path, clock: &Clock) -> Store {
    Store::connect(path)
        .expect("a store URL")
        .with_clock(clock.clone())
}

/// What changes when the store is written (nothing before it exists).
fn state(path: &Path) -> Option<stores::StoreState> {
    stores::store_exists(path).then(|| stores::store_state(path))
}

fn run_store(
    store: &Store,
    model: &Model,
    op: &Op,
    target: Option<usize>,
) -> Result<Outcome, StoreError> {
    let id = target.map_or("00000000-no-such-task", |i| model.tasks[i].id.as_str());
    let lease = Duration::from_secs(LEASE_SECS as u64);
    let worker = |w: Option<u8>| match w {
        None => Actor::Anyone,
        Some(h) => Actor::Worker {
            holder: HOLDERS[h as usize],
            lease: Some(lease),
        },
    };
    match *op {
        Op::RequestInput { schema: s, .. } => {
            store.request_input(id, schema(s), None, Actor::Anyone)
        }
        Op::Provide {
            value: v, behind, ..
        } => {
            let revision = behind.map(|b| {
                let current = target.map_or(1, |i| model.tasks[i].revision);
                current - b as u64
            });
            store.provide_input(id, value(v), revision)
        }
        Op::Heartbeat { worker: w, .. } => store.heartbeat(id, None, None, worker(w)),
        Op::Complete {
            result: r,
            worker: w,
            ..
        } => store.complete(id, result(r), worker(w)),
        Op::Fail { msg: m, .. } => store.fail(id, &msg(m), Actor::Anyone),
        Op::Cancel { .. } => store.cancel(id, None),
        Op::Claim { holder, .. } => store.claim(id, HOLDERS[holder as usize], lease),
        Op::Release { holder, .. } => store.release(id, HOLDERS[holder as usize]),
        Op::Create { .. } | Op::Advance { .. } | Op::Reopen => unreachable!(),
    }
}

fn answer_of(r: &Result<Outcome, StoreError>) -> Answer {
    match r {
        Ok(o) => Ok(o.change),
        Err(e) => Err(e.kind()),
    }
}

fn check_sequence(ops: Vec<Op>) {
    // PostgreSQL runs one case in 8 (16 of the 128): each of its steps
    // opens connections to a server (a few milliseconds each, where a file
    // opens in microseconds), and all 128 would take minutes.
    static CASE: AtomicI64 = AtomicI64::new(0);
    let pg_case = CASE.fetch_add(1, Ordering::Relaxed) % 8 == 0;
    stores::each_backend(|| {
        if stores::kind() != stores::Kind::Postgres || pg_case {
            check_sequence_once(&ops);
        }
    });
}

fn check_sequence_once(ops: &[Op]) {
    let dir = tempfile::tempdir().unwrap();
    let path = stores::store_in(dir.path());
    let offset = Arc::new(AtomicI64::new(0));
    let clock: Clock = {
        let offset = offset.clone();
        Arc::new(move || base() + chrono::TimeDelta::seconds(offset.load(Ordering::SeqCst)))
    };
    let mut store = open(&path, &clock);
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        let ctx = format!("step {step}: {op:?}");
        let before = state(&path);
        let (expected, got, target): (Answer, Answer, Option<usize>) = match op {
            Op::Advance { secs } => {
                model.now += secs;
                offset.store(model.now, Ordering::SeqCst);
                continue;
            }
            Op::Reopen => {
                store = open(&path, &clock);
                continue;
            }
            Op::Create {
                schema: s,
                key: k,
                request: r,
            } => {
                let got = store.create(NewTask {
                    input_schema: s.map(schema),
                    idempotency_key: k.map(key),
                    request: request(*r),
                    ..NewTask::default()
                });
                let (expected, target) = model.create(*s, *k, *r);
                let answer = answer_of(&got);
                if expected == Ok(Change::Applied)
                    && let Ok(o) = &got
                {
                    let i = target.unwrap();
                    model.tasks[i].id = o.task.task_id.clone();
                }
                check_answer(&model, &got, target, &ctx);
                (expected, answer, target)
            }
            op => {
                let t = match op {
                    Op::RequestInput { t, .. }
                    | Op::Provide { t, .. }
                    | Op::Heartbeat { t, .. }
                    | Op::Complete { t, .. }
                    | Op::Fail { t, .. }
                    | Op::Cancel { t }
                    | Op::Claim { t, .. }
                    | Op::Release { t, .. } => t,
                    _ => unreachable!(),
                };
                let target = model.pick(t);
                let got = run_store(&store, &model, op, target);
                let expected = model.mutate(target, op);
                check_answer(&model, &got, target, &ctx);
                (expected, answer_of(&got), target)
            }
        };
        assert_eq!(got, expected, "{ctx}: store and model disagree");
        // Written if and only if applied.
        let written = match &before {
            None => stores::store_exists(&path),
            Some(b) => stores::written_since(b, &path),
        };
        assert_eq!(written, expected == Ok(Change::Applied), "{ctx}: write");
        // The whole store, as a freshly opened one reads it.
        let tasks = Store::connect(&path)
            .expect("a store URL")
            .list(&[])
            .unwrap();
        assert_eq!(tasks.len(), model.tasks.len(), "{ctx}: number of tasks");
        for (m, t) in model.tasks.iter().zip(&tasks) {
            m.check(t, &format!("{ctx}: stored task {}", m.id));
        }
        let _ = target;
    }
}

/// The task an answer carries (the outcome's, or a refusal's snapshot) is the model's.
fn check_answer(
    model: &Model,
    got: &Result<Outcome, StoreError>,
    target: Option<usize>,
    ctx: &str,
) {
    let task = match got {
        Ok(o) => Some(&o.task),
        Err(e) => e.task(),
    };
    if let (Some(task), Some(i)) = (task, target) {
        model.tasks[i].check(task, &format!("{ctx}: returned task"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        max_shrink_iters: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_store_behaves_like_the_model(ops in proptest::collection::vec(op_strategy(), 1..40)) {
        check_sequence(ops);
    }
}
