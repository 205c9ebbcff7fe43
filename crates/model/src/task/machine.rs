//! The state machine: every mutation of a single task, as a pure function.
//!
//! [`apply`] either changes the task and says [`Change::Applied`], finds the
//! effect already recorded and says [`Change::Unchanged`] without touching it,
//! or refuses with a [`Refusal`] and leaves the task exactly as it was. The
//! store turns refusals into typed errors carrying the task's snapshot.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    ASKED_OPEN, Answered, HistoryEntry, INPUT_PROVIDED, MAX_ANSWERED, MAX_ANSWERED_BYTES, Progress,
    Status, Task,
};
use crate::schema::{self, Violation};

/// A mutation of one existing task.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// working → input_required, asking for input described by `schema`.
    /// An answer the task holds (`input_value`) moves, with its question
    /// and schema, to [`Task::answered`].
    RequestInput {
        schema: Value,
        message: Option<String>,
    },
    /// input_required → working with `value`, which must validate against the
    /// task's `input_schema`. With `expected_revision`, only if the task has not
    /// changed since that revision.
    ProvideInput {
        value: Value,
        expected_revision: Option<u64>,
    },
    /// A live worker says it is still alive; may update the message and progress.
    Heartbeat {
        message: Option<String>,
        progress: Option<Progress>,
    },
    Complete {
        result: Value,
    },
    /// `error` is an object with at least a `message` string.
    Fail {
        error: Value,
    },
    Cancel {
        reason: Option<String>,
    },
    /// Take (or renew) the lease on a working task for `lease`.
    Claim {
        holder: String,
        lease: Duration,
    },
    /// Give the lease back.
    Release {
        holder: String,
    },
}

/// The name of an operation, for messages and reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    RequestInput,
    ProvideInput,
    Heartbeat,
    Complete,
    Fail,
    Cancel,
    Claim,
    Release,
    Reclaim,
}

impl OpKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::RequestInput => "request input for",
            OpKind::ProvideInput => "provide input to",
            OpKind::Heartbeat => "heartbeat",
            OpKind::Complete => "complete",
            OpKind::Fail => "fail",
            OpKind::Cancel => "cancel",
            OpKind::Claim => "claim",
            OpKind::Release => "release",
            OpKind::Reclaim => "reclaim",
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Op {
    pub fn kind(&self) -> OpKind {
        match self {
            Op::RequestInput { .. } => OpKind::RequestInput,
            Op::ProvideInput { .. } => OpKind::ProvideInput,
            Op::Heartbeat { .. } => OpKind::Heartbeat,
            Op::Complete { .. } => OpKind::Complete,
            Op::Fail { .. } => OpKind::Fail,
            Op::Cancel { .. } => OpKind::Cancel,
            Op::Claim { .. } => OpKind::Claim,
            Op::Release { .. } => OpKind::Release,
        }
    }
}

/// How long a lease lasts when neither the write nor the claim said
/// (a claim written by a rudder that recorded no lease length).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// Who writes. A worker's writes carry its claim: they are refused once its
/// lease has been taken over, so a stalled worker cannot overwrite its
/// successor's work. Anyone else (a person at the CLI or TUI) is not bound by
/// leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor<'a> {
    Anyone,
    /// A worker holding a lease, renewed by each write: for `lease` when
    /// given (which becomes the claim's recorded length), else for the
    /// length recorded with the claim ([`Task::lease_ms`]; [`DEFAULT_LEASE`]
    /// for a claim that recorded none).
    Worker {
        holder: &'a str,
        lease: Option<Duration>,
    },
}

/// What a successful mutation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// The task changed and was written.
    Applied,
    /// The effect was already recorded: nothing was written.
    Unchanged,
}

/// Why a mutation was refused. The task is untouched.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The state machine does not allow this operation in the current status.
    NotAllowed(String),
    /// The caller expected another revision: the task moved on meanwhile.
    StaleRevision { expected: u64 },
    /// The caller's lease is not (or no longer) the one on the task.
    Lease,
    /// The input does not validate against the task's schema.
    InvalidInput(Vec<Violation>),
    /// The given JSON Schema is itself not valid.
    InvalidSchema(String),
    /// The task's revision is already `u64::MAX`: one more change would wrap
    /// it to 0, and a writer's "only if unchanged since revision r" could
    /// then match a revision the task had long ago.
    RevisionExhausted,
}

/// Apply `op` to `task` at time `now`.
///
/// On [`Change::Applied`] the task's `revision` is bumped, `updated_at` set to
/// `now`, and a status change appended to `history`. On `Unchanged` or a
/// refusal the task is left as it was. A task whose revision is already
/// `u64::MAX` takes no further change ([`Refusal::RevisionExhausted`]).
pub fn apply(
    task: &mut Task,
    op: &Op,
    actor: Actor<'_>,
    now: DateTime<Utc>,
) -> Result<Change, Refusal> {
    let Some(next) = task.revision.checked_add(1) else {
        // No further change can be recorded, but a safe repeat still
        // answers "unchanged": decide on a copy, so that the task is left
        // exactly as it was whatever the answer.
        let mut probe = task.clone();
        return match decide(&mut probe, op, actor, now)? {
            Change::Unchanged => Ok(Change::Unchanged),
            Change::Applied => Err(Refusal::RevisionExhausted),
        };
    };
    let before = task.status;
    let asked = task.status_message.clone();
    let change = decide(task, op, actor, now)?;
    if change == Change::Applied {
        touch(task, next, before, op, now);
        if matches!(op, Op::ProvideInput { .. }) {
            answered(task, asked);
        }
    }
    Ok(change)
}

fn not_allowed(why: &str) -> Refusal {
    Refusal::NotAllowed(why.to_string())
}

fn terminal() -> Refusal {
    not_allowed("a terminal task never changes again")
}

/// A worker may only write to a task it holds the claim on (expired or not, as
/// long as nobody took it over).
fn check_claim(task: &Task, actor: Actor<'_>) -> Result<(), Refusal> {
    match actor {
        Actor::Anyone => Ok(()),
        Actor::Worker { holder, .. } if task.claimed_by.as_deref() == Some(holder) => Ok(()),
        Actor::Worker { .. } => Err(Refusal::Lease),
    }
}

fn renew(task: &mut Task, actor: Actor<'_>, now: DateTime<Utc>) {
    if let Actor::Worker { holder, lease } = actor {
        hold(task, holder, lease, now);
    }
}

/// Give `holder` the lease on `task` from `now`: for `lease` when given
/// (recorded as the claim's length, so that later writes that name no
/// length renew for it), else for the length the claim recorded.
pub fn hold(task: &mut Task, holder: &str, lease: Option<Duration>, now: DateTime<Utc>) {
    let lease = match lease {
        Some(lease) => {
            task.lease_ms = Some(duration_ms(lease));
            lease
        }
        None => task.lease_length(),
    };
    task.claimed_by = Some(holder.to_string());
    // A recorded length comes from the store, where a hand-edited one may
    // be absurd: past the calendar's end it is held until that end, never
    // a panic of every worker that writes.
    task.lease_expires_at = Some(
        chrono::TimeDelta::from_std(lease)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC),
    );
}

/// A lease length in whole milliseconds (at least 1 for a nonzero one, so
/// that a recorded length never reads back as no lease).
fn duration_ms(lease: Duration) -> u64 {
    let ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 && !lease.is_zero() { 1 } else { ms }
}

fn drop_claim(task: &mut Task) {
    task.claimed_by = None;
    task.lease_expires_at = None;
    task.lease_ms = None;
}

fn decide(
    task: &mut Task,
    op: &Op,
    actor: Actor<'_>,
    now: DateTime<Utc>,
) -> Result<Change, Refusal> {
    match op {
        Op::RequestInput { schema, message } => {
            if task.status == Status::InputRequired && task.input_schema.as_ref() == Some(schema) {
                return Ok(Change::Unchanged);
            }
            match task.status {
                Status::Working => {}
                Status::InputRequired => {
                    return Err(not_allowed("it already waits for different input"));
                }
                _ => return Err(terminal()),
            }
            check_claim(task, actor)?;
            schema::check_schema(schema).map_err(Refusal::InvalidSchema)?;
            // The answer to the question before is kept (with it), so that a
            // worker asked it again later finds it: `input_value` holds the
            // answer to the question now standing only.
            keep_answer(task);
            task.status = Status::InputRequired;
            task.input_schema = Some(schema.clone());
            if message.is_some() {
                task.status_message = message.clone();
            }
            // Nobody works on a task that waits for a person: give the lease
            // back so that any worker can pick the task up once it has input.
            drop_claim(task);
            Ok(Change::Applied)
        }
        Op::ProvideInput {
            value,
            expected_revision,
        } => {
            if task.status != Status::InputRequired && task.input_value.as_ref() == Some(value) {
                return Ok(Change::Unchanged);
            }
            if let Some(expected) = *expected_revision
                && expected != task.revision
            {
                return Err(Refusal::StaleRevision { expected });
            }
            match task.status {
                Status::InputRequired => {}
                Status::Working => {
                    return Err(not_allowed("only a task waiting for input takes input"));
                }
                _ => return Err(terminal()),
            }
            check_claim(task, actor)?;
            if !value.is_object() {
                return Err(Refusal::InvalidInput(vec![Violation {
                    pointer: String::new(),
                    message: "input must be a JSON object".into(),
                    missing: false,
                }]));
            }
            if let Some(schema) = &task.input_schema {
                schema::validate(schema, value).map_err(Refusal::InvalidInput)?;
            }
            task.status = Status::Working;
            task.input_value = Some(value.clone());
            renew(task, actor, now);
            Ok(Change::Applied)
        }
        Op::Heartbeat { message, progress } => {
            if task.status.is_terminal() {
                return Err(terminal());
            }
            check_claim(task, actor)?;
            if message.is_some() {
                task.status_message = message.clone();
            }
            if progress.is_some() {
                task.progress = *progress;
            }
            renew(task, actor, now);
            Ok(Change::Applied)
        }
        Op::Complete { result } => {
            // The file cannot tell a `null` result from none (both read back
            // as `None`): compare and store them as one.
            let recorded = task.result.as_ref().unwrap_or(&Value::Null);
            if task.status == Status::Completed && recorded == result {
                return Ok(Change::Unchanged);
            }
            if task.status.is_terminal() {
                return Err(terminal());
            }
            check_claim(task, actor)?;
            task.status = Status::Completed;
            task.result = (!result.is_null()).then(|| result.clone());
            drop_claim(task);
            Ok(Change::Applied)
        }
        Op::Fail { error } => {
            if task.status == Status::Failed && task.error.as_ref() == Some(error) {
                return Ok(Change::Unchanged);
            }
            if task.status.is_terminal() {
                return Err(terminal());
            }
            check_claim(task, actor)?;
            task.status = Status::Failed;
            task.error = Some(error.clone());
            drop_claim(task);
            Ok(Change::Applied)
        }
        Op::Cancel { reason } => {
            match task.status {
                Status::Cancelled => return Ok(Change::Unchanged),
                s if s.is_terminal() => return Err(terminal()),
                _ => {}
            }
            check_claim(task, actor)?;
            task.status = Status::Cancelled;
            if reason.is_some() {
                task.status_message = reason.clone();
            }
            drop_claim(task);
            Ok(Change::Applied)
        }
        Op::Claim { holder, lease } => {
            match task.status {
                Status::Working => {}
                Status::InputRequired => {
                    return Err(not_allowed(
                        "a task waiting for input needs a person, not a worker",
                    ));
                }
                _ => return Err(terminal()),
            }
            if task.claimed_by.as_deref().is_some_and(|h| h != holder) && task.lease_live(now) {
                return Err(Refusal::Lease);
            }
            hold(task, holder, Some(*lease), now);
            Ok(Change::Applied)
        }
        Op::Release { holder } => match task.claimed_by.as_deref() {
            // A terminal task holds nothing that matters, and never changes.
            _ if task.status.is_terminal() => Ok(Change::Unchanged),
            None => Ok(Change::Unchanged),
            Some(h) if h == holder => {
                drop_claim(task);
                Ok(Change::Applied)
            }
            Some(_) => Err(Refusal::Lease),
        },
    }
}

/// Once input is given, the question no longer stands as the task's
/// current message (a row that still asked it would look as if the answer
/// were lost): it moves into the history, on the entry of the answer.
fn answered(task: &mut Task, asked: Option<String>) {
    task.status_message = None;
    if let (Some(question), Some(entry)) = (asked, task.history.last_mut()) {
        entry.note = Some(format!("{INPUT_PROVIDED}{ASKED_OPEN}{question})"));
    }
}

/// Move the task's answer (`input_value`, which is left unset), with the
/// question it answered and its input schema, to [`Task::answered`], then
/// bound the list:
/// at most [`MAX_ANSWERED`] entries and [`MAX_ANSWERED_BYTES`] of JSON,
/// the oldest dropped first. An answer without a schema (a hand-edited
/// task) or one too deep to be stored two levels further down is not
/// kept: a worker then asks its question again, which is safe.
fn keep_answer(task: &mut Task) {
    let message = task.answered_question().map(str::to_string);
    let Some(value) = task.input_value.take() else {
        return;
    };
    let Some(schema) = task.input_schema.clone() else {
        return;
    };
    // An entry's values sit two containers below the field's (the list,
    // the entry): the store's depth limit for them is two less.
    let limit = crate::limits::MAX_VALUE_DEPTH.saturating_sub(2);
    if !crate::limits::within_depth(&schema, limit) || !crate::limits::within_depth(&value, limit) {
        return;
    }
    let entry = Answered {
        message,
        input_schema: schema,
        input_value: value,
    };
    let size = |a: &Answered| serde_json::to_string(a).map_or(usize::MAX, |t| t.len());
    let mut total = size(&entry);
    if total > MAX_ANSWERED_BYTES {
        return;
    }
    // Newest first, while they fit: the oldest are the ones dropped.
    let kept = task
        .answered
        .iter()
        .rev()
        .take(MAX_ANSWERED - 1)
        .take_while(|a| {
            total = total.saturating_add(size(a));
            total <= MAX_ANSWERED_BYTES
        })
        .count();
    let dropped = task.answered.len() - kept;
    task.answered.drain(..dropped);
    task.answered.push(entry);
}

/// Record an applied change: the `next` revision, timestamp and, for a
/// status change, history.
fn touch(task: &mut Task, next: u64, before: Status, op: &Op, now: DateTime<Utc>) {
    task.revision = next;
    task.updated_at = Some(now);
    if task.status != before {
        // rudder's own words go in the note; the why a writer gave (a
        // cancel's reason, a failure's message) in the reason.
        let (note, reason) = match op {
            Op::RequestInput { message, .. } => (message.clone(), None),
            Op::ProvideInput { .. } => (Some(INPUT_PROVIDED.into()), None),
            Op::Cancel { reason } => (None, reason.clone()),
            Op::Fail { .. } => (None, task.error_message().map(str::to_string)),
            _ => (None, None),
        };
        let mut entry = HistoryEntry::new(task.status, now, note);
        entry.reason = reason;
        if let Op::ProvideInput {
            value: Value::Object(fields),
            ..
        } = op
        {
            entry.fields = fields.keys().cloned().collect();
        }
        task.history.push(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claimed(lease_ms: Option<u64>) -> Task {
        let mut task = Task::new("t", Status::Working);
        task.claimed_by = Some("w".into());
        task.lease_ms = lease_ms;
        task
    }

    fn heartbeat(task: &mut Task, lease: Option<Duration>, now: DateTime<Utc>) {
        let op = Op::Heartbeat {
            message: Some(format!("at {now}")),
            progress: None,
        };
        let actor = Actor::Worker { holder: "w", lease };
        assert_eq!(apply(task, &op, actor, now), Ok(Change::Applied));
    }

    #[test]
    fn a_write_that_names_no_lease_renews_for_the_claims_length() {
        let now = Utc::now();
        let mut task = claimed(Some(2_000));
        heartbeat(&mut task, None, now);
        assert_eq!(task.lease_expires_at, Some(now + Duration::from_secs(2)));
        // A claim recorded by a rudder that kept no length: the default.
        let mut old = claimed(None);
        heartbeat(&mut old, None, now);
        assert_eq!(old.lease_expires_at, Some(now + DEFAULT_LEASE));
        // One that names a length renews for it and records it.
        heartbeat(&mut old, Some(Duration::from_millis(1500)), now);
        assert_eq!(old.lease_ms, Some(1500));
        heartbeat(&mut old, None, now);
        assert_eq!(
            old.lease_expires_at,
            Some(now + Duration::from_millis(1500))
        );
    }

    #[test]
    fn a_claim_records_its_length_and_a_release_forgets_it() {
        let now = Utc::now();
        let mut task = Task::new("t", Status::Working);
        let claim = Op::Claim {
            holder: "w".into(),
            lease: Duration::from_secs(5),
        };
        assert_eq!(
            apply(&mut task, &claim, Actor::Anyone, now),
            Ok(Change::Applied)
        );
        assert_eq!(task.lease_ms, Some(5_000));
        let release = Op::Release { holder: "w".into() };
        assert_eq!(
            apply(&mut task, &release, Actor::Anyone, now),
            Ok(Change::Applied)
        );
        assert_eq!(task.lease_ms, None);
    }

    fn ask(task: &mut Task, question: Option<&str>, schema: &Value) -> Result<Change, Refusal> {
        let op = Op::RequestInput {
            schema: schema.clone(),
            message: question.map(str::to_string),
        };
        apply(task, &op, Actor::Anyone, Utc::now())
    }

    fn answer(task: &mut Task, value: Value) {
        let op = Op::ProvideInput {
            value,
            expected_revision: None,
        };
        assert_eq!(
            apply(task, &op, Actor::Anyone, Utc::now()),
            Ok(Change::Applied)
        );
    }

    fn form(field: &str) -> Value {
        serde_json::json!({"type": "object", "properties": {field: {"type": "string"}}})
    }

    #[test]
    fn an_answer_moves_with_its_question_when_the_next_question_is_asked() {
        use serde_json::json;
        let mut task = Task::new("t", Status::Working);
        ask(&mut task, Some("Which service?"), &form("service")).unwrap();
        assert!(task.answered.is_empty(), "no answer yet: nothing kept");
        // Asked again while it waits: unchanged, nothing moves.
        assert_eq!(
            ask(&mut task, Some("Which service?"), &form("service")),
            Ok(Change::Unchanged)
        );
        answer(&mut task, json!({"service": "checkout"}));
        assert_eq!(task.answered_question(), Some("Which service?"));
        assert!(task.answered.is_empty(), "the answer is the current one");
        ask(&mut task, Some("Which window?"), &form("window")).unwrap();
        assert_eq!(task.input_value, None, "the new question has no answer yet");
        assert_eq!(
            task.answered,
            vec![Answered {
                message: Some("Which service?".into()),
                input_schema: form("service"),
                input_value: json!({"service": "checkout"}),
            }]
        );
        answer(&mut task, json!({"window": "1h"}));
        let answers: Vec<_> = task.answers().collect();
        assert_eq!(
            answers,
            vec![
                (
                    Some("Which service?"),
                    &form("service"),
                    &json!({"service": "checkout"})
                ),
                (
                    Some("Which window?"),
                    &form("window"),
                    &json!({"window": "1h"})
                ),
            ]
        );
        // Finishing the task leaves its answers as they are.
        let done = Op::Complete {
            result: json!("ok"),
        };
        apply(&mut task, &done, Actor::Anyone, Utc::now()).unwrap();
        assert_eq!(task.answered.len(), 1);
        assert_eq!(task.answers().count(), 2);
        // Stored and read back: the field is there; a task without earlier
        // answers does not write it at all.
        let text = serde_json::to_string(&task).unwrap();
        assert_eq!(serde_json::from_str::<Task>(&text).unwrap(), task);
        let plain = serde_json::to_string(&Task::new("u", Status::Working)).unwrap();
        assert!(!plain.contains("answered"), "{plain}");
    }

    #[test]
    fn a_refused_question_or_one_asked_without_a_message_moves_the_answer_rightly() {
        use serde_json::json;
        let mut task = Task::new("t", Status::Working);
        ask(&mut task, None, &form("a")).unwrap();
        answer(&mut task, json!({"a": "1"}));
        assert_eq!(task.answered_question(), None);
        // A worker whose lease is not on the task is refused: nothing moves.
        let op = Op::RequestInput {
            schema: form("b"),
            message: Some("B?".into()),
        };
        let stranger = Actor::Worker {
            holder: "other",
            lease: None,
        };
        task.claimed_by = Some("w".into());
        assert_eq!(
            apply(&mut task, &op, stranger, Utc::now()),
            Err(Refusal::Lease)
        );
        assert!(task.answered.is_empty());
        assert_eq!(task.input_value, Some(json!({"a": "1"})));
        ask(&mut task, Some("B?"), &form("b")).unwrap();
        assert_eq!(task.answered.len(), 1);
        assert_eq!(task.answered[0].message, None, "asked without a message");
    }

    #[test]
    fn earlier_answers_are_bounded_the_oldest_dropped_first() {
        use serde_json::json;
        let mut task = Task::new("t", Status::Working);
        let rounds = MAX_ANSWERED + 8;
        for i in 0..=rounds {
            ask(&mut task, Some(&format!("Q{i}?")), &form("a")).unwrap();
            if i < rounds {
                answer(&mut task, json!({"a": format!("{i}")}));
            }
        }
        assert_eq!(task.answered.len(), MAX_ANSWERED);
        assert_eq!(task.answered[0].message.as_deref(), Some("Q8?"));
        assert_eq!(
            task.answered.last().and_then(|a| a.message.as_deref()),
            Some(&*format!("Q{}?", rounds - 1))
        );
        // By size: answers of a quarter of the bound each, three kept.
        let mut task = Task::new("t", Status::Working);
        let big = "x".repeat(MAX_ANSWERED_BYTES / 4);
        for i in 0..6 {
            ask(&mut task, Some(&format!("Q{i}?")), &form("a")).unwrap();
            answer(&mut task, json!({"a": big}));
        }
        ask(&mut task, Some("last?"), &form("a")).unwrap();
        let size: usize = task
            .answered
            .iter()
            .map(|a| serde_json::to_string(a).unwrap().len())
            .sum();
        assert!(size <= MAX_ANSWERED_BYTES, "{size}");
        assert_eq!(task.answered.len(), 3);
        assert_eq!(task.answered[0].message.as_deref(), Some("Q3?"));
        // One answer larger than the bound on its own is not kept.
        answer(&mut task, json!({"a": "x".repeat(MAX_ANSWERED_BYTES)}));
        ask(&mut task, Some("after?"), &form("a")).unwrap();
        assert_eq!(task.answered.len(), 3);
        assert_eq!(task.answered[2].message.as_deref(), Some("Q5?"));
    }

    /// An answer nested so deeply that two levels more would pass the
    /// store's limit is not kept (the store could not be read back).
    #[test]
    fn an_answer_too_deep_to_keep_is_dropped() {
        use serde_json::json;
        let mut task = Task::new("t", Status::Working);
        ask(&mut task, Some("Deep?"), &json!({"type": "object"})).unwrap();
        let mut deep = json!(1);
        for _ in 0..crate::limits::MAX_VALUE_DEPTH - 1 {
            deep = json!([deep]);
        }
        answer(&mut task, json!({ "a": deep }));
        ask(&mut task, Some("Next?"), &form("b")).unwrap();
        assert!(task.answered.is_empty());
        assert_eq!(task.input_value, None);
    }

    /// A hand-edited `lease_ms` past what a time can hold renews to the
    /// latest time there is, never a panic.
    #[test]
    fn an_absurd_recorded_lease_length_does_not_panic() {
        let mut t = Task::new("t", Status::Working);
        t.lease_ms = Some(u64::MAX);
        let now = Utc::now();
        hold(&mut t, "w", None, now);
        assert_eq!(t.lease_expires_at, Some(DateTime::<Utc>::MAX_UTC));
    }
}
