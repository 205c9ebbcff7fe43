//! One call through the gateway: the claimed task's `tools/call` made
//! upstream, its progress and questions turned into the task's, its result
//! stored, a loss retried only when the tool is idempotent.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelTaskParams, CancelledNotification,
    CancelledNotificationParam, ClientRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ErrorData, GetTaskParams, InputRequest, InputRequests, InputResponses,
    RequestId, ServerResult, TaskPayload, UpdateTaskParams,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rudder_store::Store;
use rudder_store::task::{Progress, Status, Task};
use rudder_store::watch::FeedOptions;
use rudder_store::worker::{AsyncJob, WorkError};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::Say;
use crate::catalogue::Upstream;
use crate::upstream::{self, Event, Handler, Session};

/// The largest result the gateway stores (its JSON text); a larger one
/// fails the task saying so.
pub const MAX_RESULT_BYTES: usize = 4 * 1024 * 1024;

/// What every attempt's history note starts with: how a worker taking a
/// task over counts the attempts made before it.
pub const ATTEMPT_NOTE: &str = "gateway: attempt ";

/// How many rounds of questions one call may ask (protocol 2026-07-28).
const MAX_ROUNDS: usize = 32;

/// How often progress is written at most (a flood is coalesced).
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// How one attempt ended.
enum Ended {
    /// The upstream answered: the task is finished (or was refused).
    Done,
    /// The task was cancelled, finished elsewhere or taken over: the call
    /// was cancelled upstream; nothing more to write.
    Stopped,
    /// The call was lost before an answer (the upstream could not be
    /// started or reached, died, or dropped the connection): why.
    Lost(String),
}

/// Fail the task with `message` (the upstream's answer ends the call):
/// a failed write is the store's to report, and a task taken or finished
/// meanwhile needs nothing more.
async fn give_up(job: &mut AsyncJob, message: String) -> Ended {
    let _ = job.fail(message).await;
    Ended::Done
}

/// The history note of attempt `attempt` of `max`, made by `holder`.
pub fn attempt_note(attempt: u32, max: u32, tool: &str, up: &Upstream, holder: &str) -> String {
    format!(
        "{ATTEMPT_NOTE}{attempt} of {max}: calling {tool} on upstream {:?} (holder {holder})",
        up.name
    )
}

/// Serve the claimed `job` by calling `tool` of `up`; `noted`: the task
/// was created held by this worker with its first attempt's note
/// ([`crate::Handoff`]), which is not written again.
///
/// When `stop` is cancelled (the gateway is stopping: SIGTERM, a deploy)
/// the call ends where it is and its lease is given back at once, so that
/// another gateway worker takes the task over under the same rules without
/// waiting for the lease to lapse.
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    mut job: AsyncJob,
    up: &Upstream,
    tool: &str,
    store: Arc<Store>,
    changes: Changes,
    say: Say,
    stop: CancellationToken,
    noted: bool,
) {
    work(&mut job, up, tool, store, changes, &say, &stop, noted).await;
    if stop.is_cancelled() {
        // Refused when the task is no longer this worker's (it finished,
        // or waits for a person): then there is nothing to give back.
        let _ = job.release().await;
    }
}

#[allow(clippy::too_many_arguments)]
async fn work(
    job: &mut AsyncJob,
    up: &Upstream,
    tool: &str,
    store: Arc<Store>,
    changes: Changes,
    say: &Say,
    stop: &CancellationToken,
    noted: bool,
) {
    let settings = up.settings(tool);
    let max = settings.max_attempts();
    // The note made with the task is this attempt's, not an earlier one's.
    let before = attempts_made(job.task()).saturating_sub(u32::from(noted));
    let id = job.id().to_string();
    if before > 0 {
        // A gateway worker made this call before and lost the task (its
        // lease lapsed: a restart or a crash).
        let what = format!(
            "the call of {tool} on upstream {:?} was interrupted: the gateway worker that made it stopped holding the task (it was stopped, or its lease lapsed: a restart or a crash)",
            up.name
        );
        if !settings.is_idempotent() {
            finish_failed(
                job,
                format!("{what}; it was not retried because the tool is not marked idempotent"),
                say,
            )
            .await;
            return;
        }
        if before >= max {
            finish_failed(job, format!("{what}; gave up after {max} attempts"), say).await;
            return;
        }
    }
    // Every answer the call was given, by question: an idempotent retry
    // that asks one again gets it at once. The store keeps them all (the
    // task's earlier answers and its current one), so a takeover after a
    // restart has them too.
    let mut answers = Replay::default();
    answers.learn(job.task());
    let mut attempt = before;
    let mut noted = noted;
    loop {
        attempt += 1;
        if !std::mem::take(&mut noted) {
            let note = attempt_note(attempt, max, tool, up, job.holder());
            if let Err(e) = job.note(note).await
                && e.stop().is_some()
            {
                return;
            }
            // An answer given while no call was open (the upstream was
            // down between attempts) is the one the retry's question gets.
            answers.learn(job.task());
        }
        let attempted = tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            a = attempt_once(job, up, tool, (&store, &changes), &id, &mut answers) => a,
        };
        if stop.is_cancelled() {
            return;
        }
        match attempted {
            Ended::Done | Ended::Stopped => return,
            Ended::Lost(what) => {
                if !settings.is_idempotent() {
                    finish_failed(
                        job,
                        format!(
                            "{what}; it was not retried because the tool is not marked idempotent"
                        ),
                        say,
                    )
                    .await;
                    return;
                }
                if attempt >= max {
                    finish_failed(job, format!("{what}; gave up after {max} attempts"), say).await;
                    return;
                }
                let wait = backoff(attempt);
                let note = format!(
                    "gateway: attempt {attempt} of {max} was lost: {what}; the tool is idempotent: trying again in {} ms",
                    wait.as_millis()
                );
                if let Err(e) = job.note(note).await
                    && e.stop().is_some()
                {
                    return;
                }
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// The pause before attempt `after + 1`: 250 ms, doubling, at most 10 s.
fn backoff(after: u32) -> Duration {
    Duration::from_millis(250u64.saturating_mul(1 << after.min(6).saturating_sub(1)))
        .min(Duration::from_secs(10))
}

/// How many attempts the task's history records.
pub fn attempts_made(task: &Task) -> u32 {
    let n = task
        .history
        .iter()
        .filter(|e| {
            e.note
                .as_deref()
                .is_some_and(|n| n.starts_with(ATTEMPT_NOTE) && !n.contains(" was lost: "))
        })
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The answers a call can give again, each by the question it answered
/// (its message and schema; schemas compared as JSON values, so the order
/// of their keys does not matter). Bounded by what the store keeps
/// ([`rudder_store::task::MAX_ANSWERED`]) plus what one process asked.
#[derive(Debug, Default)]
struct Replay(Vec<(String, Value, Value)>);

impl Replay {
    /// Take every answer `task` holds (its earlier answers, then its
    /// current one), a later answer to the same question replacing an
    /// earlier one. Answers to questions asked without a message are not
    /// replayed: an upstream's question always has one.
    pub fn learn(&mut self, task: &Task) {
        for (question, schema, value) in task.answers() {
            if let Some(question) = question {
                self.keep(question.to_string(), schema.clone(), value.clone());
            }
        }
    }

    /// The answer given to `message` with `schema`, if any.
    pub fn get(&self, message: &str, schema: &Value) -> Option<&Value> {
        self.0
            .iter()
            .find(|(m, s, _)| m == message && s == schema)
            .map(|(_, _, v)| v)
    }

    /// Keep `value` as the answer to `message` with `schema`.
    fn keep(&mut self, message: String, schema: Value, value: Value) {
        match self
            .0
            .iter_mut()
            .find(|(m, s, _)| *m == message && *s == schema)
        {
            Some(slot) => slot.2 = value,
            None => self.0.push((message, schema, value)),
        }
    }
}

async fn finish_failed(job: &mut AsyncJob, message: String, say: &Say) {
    if let Err(e) = job.fail(message.clone()).await
        && e.stop().is_none()
    {
        say(&format!(
            "gateway: task {}: cannot record its failure ({e}): {message}",
            job.id()
        ));
    }
}

/// What the store's change feed said, shared by every call of a gateway
/// (one feed, not one per call): the ids of the tasks that changed, or
/// `None` for "re-read everything".
pub type Changes = tokio::sync::broadcast::Sender<Option<Arc<Vec<String>>>>;

/// Follow `store`'s change feed into `changes`, until the last handle
/// of it is dropped.
pub fn follow_changes(store: &Store) -> Changes {
    use rudder_store::watch::FeedEvent;
    let (tx, _) = tokio::sync::broadcast::channel(256);
    let weak = tx.downgrade();
    let mut feed = store.feed(FeedOptions::default());
    tokio::spawn(async move {
        while let Some(event) = feed.next().await {
            let Some(sender) = weak.upgrade() else { return };
            let changed = match event {
                FeedEvent::Changes(c) => Some(Arc::new(c.into_iter().map(|c| c.task_id).collect())),
                FeedEvent::Reset(_) => None,
                FeedEvent::Unavailable(_) => continue,
            };
            // No call listens now: nothing to tell.
            let _ = sender.send(changed);
        }
    });
    tx
}

/// Resolves once the task `id` is no longer the gateway's to work
/// (cancelled, or finished by someone else): its status then.
async fn ended(store: Arc<Store>, id: String, changes: Changes) -> Status {
    let mut heard = changes.subscribe();
    loop {
        let task = if store.quick_reads() {
            store.get(&id).ok()
        } else {
            let (s, i) = (Arc::clone(&store), id.clone());
            tokio::task::spawn_blocking(move || s.get(&i))
                .await
                .ok()
                .and_then(Result::ok)
        };
        if let Some(task) = task
            && task.status.is_terminal()
        {
            return task.status;
        }
        // Until the feed names this task (or says to re-read everything);
        // a safety tick in case a wake-up went missing.
        let tick = tokio::time::sleep(Duration::from_secs(5));
        tokio::pin!(tick);
        loop {
            tokio::select! {
                got = heard.recv() => match got {
                    Ok(Some(ids)) if !ids.contains(&id) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        break;
                    }
                    _ => break,
                },
                _ = &mut tick => break,
            }
        }
    }
}

/// Send `notifications/cancelled` for `request` and close the session.
async fn cancel_upstream(session: Session, request: RequestId, reason: &str) {
    let notification = CancelledNotification::new(CancelledNotificationParam::new(
        Some(request),
        Some(reason.to_string()),
    ));
    let _ = session.peer().send_notification(notification.into()).await;
    close(session).await;
}

async fn close(session: Session) {
    let _ = tokio::time::timeout(Duration::from_secs(2), session.cancel()).await;
}

/// One attempt: a session, the call, its events, its end.
async fn attempt_once(
    job: &mut AsyncJob,
    up: &Upstream,
    tool: &str,
    (store, changes): (&Arc<Store>, &Changes),
    id: &str,
    answers: &mut Replay,
) -> Ended {
    let (events, mut rx) = mpsc::channel(64);
    let session = match upstream::connect(up, Handler::new(events, true)).await {
        Ok(s) => s,
        Err(e) => return Ended::Lost(format!("upstream {:?} could not be reached: {e}", up.name)),
    };
    let arguments = match job.task().request.clone() {
        Some(Value::Object(mut o)) => {
            o.remove("_inputs");
            o
        }
        _ => serde_json::Map::new(),
    };
    let stopped = ended(Arc::clone(store), id.to_string(), changes.clone());
    tokio::pin!(stopped);
    let mut progress = Reported::default();
    let mut flush = tokio::time::interval(PROGRESS_EVERY);
    let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    let mut rounds = 0usize;
    let answered = loop {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
        let handle = match session
            .peer()
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(h) => h,
            Err(e) => {
                close(session).await;
                return Ended::Lost(format!(
                    "upstream {:?} could not be sent the call: {}",
                    up.name,
                    upstream::scrubbed(&e)
                ));
            }
        };
        let request_id = handle.id.clone();
        let response = handle.await_response();
        tokio::pin!(response);
        let answered = loop {
            tokio::select! {
                r = &mut response => break r,
                status = &mut stopped => {
                    let reason = format!("the rudder task was {status}");
                    cancel_upstream(session, request_id, &reason).await;
                    return Ended::Stopped;
                }
                _ = flush.tick(), if progress.pending.is_some() => {
                    if let Some((message, p)) = progress.pending.take() {
                        let written = match p {
                            Some(p) => job.report(message.unwrap_or_default(), p.current, p.total).await,
                            None => job.message(message.unwrap_or_default()).await,
                        };
                        if let Err(e) = written && e.stop().is_some() {
                            cancel_upstream(session, request_id, "the rudder task was taken from this gateway worker").await;
                            return Ended::Stopped;
                        }
                    }
                }
                event = rx.recv() => match event {
                    Some(Event::Progress(p)) => progress.take(&p),
                    Some(Event::Refused(method)) => {
                        let note = format!("gateway: upstream {:?} sent {method}, which the gateway does not serve; it was answered with a JSON-RPC error (method not found)", up.name);
                        if let Err(e) = job.note(note).await && e.stop().is_some() {
                            cancel_upstream(session, request_id, "the rudder task was taken from this gateway worker").await;
                            return Ended::Stopped;
                        }
                    }
                    Some(Event::Unfit(reason)) => {
                        if let Err(e) = job.note(unfit_note(up, &reason)).await && e.stop().is_some() {
                            cancel_upstream(session, request_id, "the rudder task was taken from this gateway worker").await;
                            return Ended::Stopped;
                        }
                    }
                    Some(Event::ToolsChanged) | None => {}
                    Some(Event::Elicit(params, reply)) => {
                        // Progress held back is written before the question.
                        if let Some((message, p)) = progress.pending.take() {
                            let _ = match p {
                                Some(p) => job.report(message.unwrap_or_default(), p.current, p.total).await,
                                None => job.message(message.unwrap_or_default()).await,
                            };
                        }
                        match elicit(job, up, params, answers, &mut response).await {
                            Asked::Answered(result) => {
                                let _ = reply.send(result);
                            }
                            Asked::Stopped => {
                                let _ = reply.send(Ok(ElicitResult::new(ElicitationAction::Cancel)));
                                cancel_upstream(session, request_id, "the rudder task was cancelled while its question waited").await;
                                return Ended::Stopped;
                            }
                            Asked::CallEnded(r) => {
                                let _ = reply.send(Ok(ElicitResult::new(ElicitationAction::Cancel)));
                                break *r;
                            }
                        }
                    }
                }
            }
        };
        // A 2026-07-28 upstream asks its questions by answering the call
        // with them (input_required); the call is made again with the
        // answers.
        match answered {
            Ok(ServerResult::InputRequiredResult(r)) => {
                rounds += 1;
                if rounds > MAX_ROUNDS {
                    close(session).await;
                    let why = format!(
                        "upstream {:?} asked questions for tools/call {tool} more than {MAX_ROUNDS} rounds; the call was given up",
                        up.name
                    );
                    return give_up(job, why).await;
                }
                let requests = r.input_requests.unwrap_or_default();
                match round(job, up, tool, requests, answers).await {
                    Ok(responses) => {
                        params.input_responses = Some(responses);
                        params.request_state = r.request_state;
                    }
                    Err(ended) => {
                        close(session).await;
                        return ended;
                    }
                }
            }
            other => break other,
        }
    };
    let result = match answered {
        Ok(ServerResult::CallToolResult(r)) => {
            // The result is kept without waiting for the session's end.
            tokio::spawn(close(session));
            r
        }
        Ok(ServerResult::CreateTaskResult(created)) => {
            let ended = mirror(job, up, tool, &session, created.task, answers, &mut stopped).await;
            close(session).await;
            return ended;
        }
        Ok(other) => {
            let seen = serde_json::to_value(&other).unwrap_or_default();
            if let Some(reason) = unreadable_question(&seen) {
                let _ = job.note(unfit_note(up, &reason)).await;
                let why = format!(
                    "upstream {:?} asked a question for tools/call {tool} with a schema that is not a flat form ({reason}); the call was given up",
                    up.name
                );
                return give_up(job, why).await;
            }
            let what = serde_json::to_value(&other)
                .ok()
                .and_then(|v| {
                    v.as_object()
                        .map(|o| o.keys().cloned().collect::<Vec<_>>().join(", "))
                })
                .unwrap_or_default();
            let why = format!(
                "upstream {:?} answered tools/call {tool} with something that is not a CallToolResult (fields: {}); nothing was stored",
                up.name,
                rudder_model::text::clean(&what, 200)
            );
            return give_up(job, why).await;
        }
        Err(ServiceError::McpError(e)) => {
            return give_up(
                job,
                format!(
                    "upstream {:?} refused tools/call {tool}: JSON-RPC error {}: {}",
                    up.name,
                    e.code.0,
                    rudder_model::text::clean(&e.message, 500)
                ),
            )
            .await;
        }
        Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
            return Ended::Lost(format!(
                "upstream {:?} closed the connection during tools/call {tool} (the server died or dropped it) before it answered",
                up.name
            ));
        }
        Err(e) => {
            return Ended::Lost(format!(
                "tools/call {tool} on upstream {:?} was lost: {}",
                up.name,
                upstream::scrubbed(&e)
            ));
        }
    };
    keep(job, up, tool, result).await
}

/// Keep the upstream's `result` as the task's (bounded).
async fn keep(
    job: &mut AsyncJob,
    up: &Upstream,
    tool: &str,
    result: impl serde::Serialize,
) -> Ended {
    let value = match serde_json::to_value(&result) {
        Ok(v) => v,
        Err(e) => {
            let why = format!("the result of {tool} could not be kept: {e}");
            return give_up(job, why).await;
        }
    };
    let size = value.to_string().len();
    if size > MAX_RESULT_BYTES {
        let why = format!(
            "upstream {:?} answered tools/call {tool} with a result of {size} bytes, more than the {MAX_RESULT_BYTES} the gateway stores; it was not kept",
            up.name
        );
        return give_up(job, why).await;
    }
    match job.complete(value).await {
        Ok(_) => Ended::Done,
        Err(WorkError::Rejected(e)) => {
            let _ = job
                .fail(format!(
                    "the store refused the result of {tool} from upstream {:?}: {e}",
                    up.name
                ))
                .await;
            Ended::Done
        }
        Err(_) => Ended::Stopped,
    }
}

/// For an `input_required` answer rmcp could not read: why its question
/// is not a flat form.
fn unreadable_question(answer: &Value) -> Option<String> {
    if answer.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return None;
    }
    let requests = answer.get("inputRequests")?.as_object()?;
    requests.values().find_map(|r| {
        let schema = r.pointer("/params/requestedSchema")?;
        rudder_model::schema::mcp::mcp_fit(schema).reason
    })
}

/// The history note of a question refused for its schema.
fn unfit_note(up: &Upstream, reason: &str) -> String {
    format!(
        "gateway: upstream {:?} asked a question with a schema that is not a flat form ({reason}); it was refused with a JSON-RPC error",
        up.name
    )
}

/// An upstream that answered the call with a task of its own (the Tasks
/// extension): its status, message and questions mirrored into the rudder
/// task (answers sent with `tasks/update`), a rudder cancel sent with
/// `tasks/cancel`, its result kept.
async fn mirror(
    job: &mut AsyncJob,
    up: &Upstream,
    tool: &str,
    session: &Session,
    task: rmcp::model::Task,
    answers: &mut Replay,
    stopped: &mut (impl std::future::Future<Output = Status> + Unpin),
) -> Ended {
    let id = task.task_id.clone();
    let shown = rudder_model::text::clean(&id, 80);
    let note = format!(
        "gateway: upstream {:?} answered tools/call {tool} with a task of its own ({shown}); it is mirrored here",
        up.name
    );
    if let Err(e) = job.note(note).await
        && e.stop().is_some()
    {
        let _ = session.peer().cancel_task(CancelTaskParams::new(id)).await;
        return Ended::Stopped;
    }
    let every = Duration::from_millis(task.poll_interval_ms.unwrap_or(500).clamp(50, 5_000));
    let mut message = task.status_message.clone();
    let mut rounds = 0usize;
    loop {
        let got = tokio::select! {
            got = session.peer().get_task(GetTaskParams::new(id.clone())) => got,
            _ = &mut *stopped => {
                let _ = session.peer().cancel_task(CancelTaskParams::new(id)).await;
                return Ended::Stopped;
            }
        };
        let detailed = match got {
            Ok(r) => r.task,
            Err(ServiceError::McpError(e)) => {
                let why = format!(
                    "upstream {:?} no longer answers for its task {shown}: JSON-RPC error {}: {}",
                    up.name,
                    e.code.0,
                    rudder_model::text::clean(&e.message, 300)
                );
                return give_up(job, why).await;
            }
            Err(e) => {
                return Ended::Lost(format!(
                    "the session with upstream {:?} was lost while it worked its task {shown}: {}",
                    up.name,
                    upstream::scrubbed(&e)
                ));
            }
        };
        let now = detailed.task.status_message.clone();
        if now.is_some() && now != message {
            message = now;
            let text = rudder_model::text::clean(message.as_deref().unwrap_or_default(), 500);
            if let Err(e) = job.message(text).await
                && e.stop().is_some()
            {
                let _ = session.peer().cancel_task(CancelTaskParams::new(id)).await;
                return Ended::Stopped;
            }
        }
        match detailed.payload {
            TaskPayload::Completed { result } => return keep(job, up, tool, result).await,
            TaskPayload::Failed { error } => {
                let said = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message");
                return give_up(
                    job,
                    format!(
                        "upstream {:?}'s task {shown} failed: {}",
                        up.name,
                        rudder_model::text::clean(said, 500)
                    ),
                )
                .await;
            }
            TaskPayload::Cancelled => {
                return give_up(
                    job,
                    format!("upstream {:?} cancelled its task {shown}", up.name),
                )
                .await;
            }
            TaskPayload::InputRequired { input_requests } => {
                rounds += 1;
                if rounds > MAX_ROUNDS {
                    let _ = session.peer().cancel_task(CancelTaskParams::new(id)).await;
                    let why = format!(
                        "upstream {:?}'s task {shown} asked questions more than {MAX_ROUNDS} times; it was cancelled",
                        up.name
                    );
                    return give_up(job, why).await;
                }
                let responses = match round(job, up, tool, input_requests, answers).await {
                    Ok(r) => r,
                    Err(ended) => {
                        let _ = session.peer().cancel_task(CancelTaskParams::new(id)).await;
                        return ended;
                    }
                };
                let update = UpdateTaskParams::new(id.clone(), responses);
                if let Err(e) = session.peer().update_task(update).await {
                    return Ended::Lost(format!(
                        "the answer could not be sent to upstream {:?}'s task {shown}: {}",
                        up.name,
                        upstream::scrubbed(&e)
                    ));
                }
                continue;
            }
            _ => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = &mut *stopped => {
                let _ = session.peer().cancel_task(CancelTaskParams::new(id)).await;
                return Ended::Stopped;
            }
        }
    }
}

/// Progress as last told, and what is still to be written.
#[derive(Default)]
struct Reported {
    current: Option<f64>,
    pending: Option<(Option<String>, Option<Progress>)>,
}

impl Reported {
    /// Take a progress notification: a value that goes backwards or is not
    /// a number is ignored (its message kept); the last one wins.
    fn take(&mut self, p: &rmcp::model::ProgressNotificationParam) {
        let message = p
            .message
            .as_deref()
            .map(|m| rudder_model::text::clean(m, 500));
        let sane = p.progress.is_finite()
            && p.progress >= 0.0
            && self.current.is_none_or(|c| p.progress >= c);
        let progress = match (sane, p.total) {
            (true, Some(total)) if total.is_finite() && total >= p.progress && total > 0.0 => {
                self.current = Some(p.progress);
                Some(Progress {
                    current: p.progress.round() as u64,
                    total: total.round() as u64,
                })
            }
            (true, _) => {
                self.current = Some(p.progress);
                None
            }
            _ => None,
        };
        let message = match (message, &progress) {
            (Some(m), _) => Some(m),
            (None, None) if sane => Some(format!("progress {}", p.progress)),
            (None, _) => self.pending.as_ref().and_then(|(m, _)| m.clone()),
        };
        if message.is_none() && progress.is_none() {
            return;
        }
        let keep = self.pending.take().and_then(|(_, p)| p);
        self.pending = Some((message, progress.or(keep)));
    }
}

enum Asked {
    /// The answer for the upstream.
    Answered(Result<ElicitResult, ErrorData>),
    /// The task was cancelled (or taken) while the question waited.
    Stopped,
    /// The upstream answered the call while its question waited.
    CallEnded(Box<Result<ServerResult, ServiceError>>),
}

/// What a person said to a question the upstream asked.
enum Person {
    /// The answer.
    Answer(Value),
    /// The question was refused before anyone saw it (why).
    Refused(String),
    /// The task was cancelled (or taken) while the question waited.
    Stopped,
    /// The store failed (why).
    Failed(String),
}

/// Ask a person the upstream's question: the task's question, answered by
/// whoever answers first (TUI, CLI, MCP, Python). A question answered
/// before (same message and schema) gets its stored answer at once.
async fn ask_person(
    job: &mut AsyncJob,
    up: &Upstream,
    message: String,
    schema: Value,
    answers: &mut Replay,
) -> Person {
    let fit = rudder_model::schema::mcp::mcp_fit(&schema);
    let unfit = fit.reason.or_else(|| {
        rudder_model::schema::Compiled::new(&schema)
            .err()
            .map(|e| e.to_string())
    });
    if let Some(reason) = unfit {
        let _ = job.note(unfit_note(up, &reason)).await;
        return Person::Refused(reason);
    }
    if let Some(value) = answers.get(&message, &schema) {
        let _ = job
            .note(format!(
                "gateway: upstream {:?} asked again a question already answered; the stored answer was given at once",
                up.name
            ))
            .await;
        return Person::Answer(value.clone());
    }
    let mut asked = match job.ask(message.clone(), schema.clone()).await {
        Ok(a) => a,
        Err(WorkError::Stop(_)) => return Person::Stopped,
        Err(e) => return Person::Failed(format!("rudder could not ask the question: {e}")),
    };
    match asked.wait(None).await {
        Ok(Some(value)) => {
            answers.keep(message, schema, value.clone());
            Person::Answer(value)
        }
        Ok(None) | Err(WorkError::Stop(_)) => Person::Stopped,
        Err(e) => Person::Failed(format!("rudder lost the question: {e}")),
    }
}

/// The note of a question of a mode the gateway does not serve.
fn url_note(up: &Upstream) -> String {
    format!(
        "gateway: upstream {:?} asked for a URL-mode elicitation, which the gateway does not serve; it was refused",
        up.name
    )
}

/// An `elicitation/create` during the call (protocols before
/// 2026-07-28): asked of a person while the call stays open.
async fn elicit(
    job: &mut AsyncJob,
    up: &Upstream,
    params: ElicitRequestParams,
    answers: &mut Replay,
    response: &mut (impl std::future::Future<Output = Result<ServerResult, ServiceError>> + Unpin),
) -> Asked {
    let (message, schema) = match form(params) {
        Some(form) => form,
        None => {
            let _ = job.note(url_note(up)).await;
            return Asked::Answered(Err(ErrorData::invalid_params(
                "rudder's gateway asks a person with form-mode elicitation only",
                None,
            )));
        }
    };
    tokio::select! {
        person = ask_person(job, up, message, schema, answers) => match person {
            Person::Answer(value) => Asked::Answered(Ok(
                ElicitResult::new(ElicitationAction::Accept).with_content(value),
            )),
            Person::Refused(reason) => Asked::Answered(Err(upstream::unfit(&reason))),
            Person::Stopped => Asked::Stopped,
            Person::Failed(e) => Asked::Answered(Err(ErrorData::internal_error(e, None))),
        },
        r = response => Asked::CallEnded(Box::new(r)),
    }
}

/// A form elicitation's message and schema; `None` for another mode.
fn form(params: ElicitRequestParams) -> Option<(String, Value)> {
    match params {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => serde_json::to_value(&requested_schema)
            .ok()
            .map(|s| (message, s)),
        _ => None,
    }
}

/// One round of questions a 2026-07-28 upstream answered a call with
/// (`input_required`, SEP-2322): each asked of a person in turn; the
/// responses to send with the call again, or how the attempt ended.
async fn round(
    job: &mut AsyncJob,
    up: &Upstream,
    tool: &str,
    requests: InputRequests,
    answers: &mut Replay,
) -> Result<InputResponses, Ended> {
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let response = match request {
            InputRequest::Elicitation(e) => match form(e.params) {
                Some((message, schema)) => {
                    match ask_person(job, up, message, schema, answers).await {
                        Person::Answer(value) => json!({"action": "accept", "content": value}),
                        // Refused before anyone saw it: the history says why.
                        Person::Refused(_) => json!({"action": "decline"}),
                        Person::Stopped => return Err(Ended::Stopped),
                        Person::Failed(e) => return Err(Ended::Lost(e)),
                    }
                }
                None => {
                    let _ = job.note(url_note(up)).await;
                    json!({"action": "decline"})
                }
            },
            other => {
                let method = match other {
                    InputRequest::CreateMessage(_) => "sampling/createMessage",
                    InputRequest::ListRoots(_) => "roots/list",
                    _ => "a request",
                };
                let _ = job
                    .fail(format!(
                        "upstream {:?} needs {method} to go on with tools/call {tool}, which the gateway does not serve; the call was given up",
                        up.name
                    ))
                    .await;
                return Err(Ended::Done);
            }
        };
        responses.insert(key, response);
    }
    Ok(responses)
}
