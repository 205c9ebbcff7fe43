//! `subscriptions/listen` for task ids: a client names the tasks it follows
//! (`params.notifications.taskIds`) and hears `notifications/tasks`, the
//! task as `tasks/get` shows it, whenever the store changes one of them,
//! whoever changed it (a worker, `rudder complete`, the TUI, another
//! `rudder mcp`). The store's change feed drives it; nothing polls.
//!
//! rmcp 3.11 parses `subscriptions/listen` into a filter that has no
//! `taskIds` (it drops the field) and acknowledges that filter itself, so
//! the transports look at the listen request's bytes before rmcp does, and
//! at the acknowledgement's after:
//!
//! - stdio through [`stdio`]: each line in is noted in [`Requested`]
//!   (request id → task ids) and passed on unchanged; each line out that
//!   acknowledges a listen for task ids gets them added;
//! - HTTP in [`note_http`] and [`patch_sse`]: the ids go to the handler in
//!   the request's extensions, and into the acknowledgement on the way out;
//! - a listen for task ids from a 2026 client that did not declare the
//!   extension is answered `-32021` there, before rmcp sees it;
//! - the listen then sends each task as it is now, and again after each
//!   change the feed reports, until the client cancels the request or goes
//!   away.
//!
//! The acknowledgement lists the task ids asked for; an id that is not a
//! task in the store is never heard of.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{Method, Request, Response};
use futures::StreamExt as _;
use rmcp::model::{
    ClientCapabilities, ErrorData, NotificationMetaObject, ServerNotification,
    TaskStatusNotification, TaskStatusNotificationParams,
};
use rmcp::service::SubscriptionContext;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::broadcast;

use crate::requested::{CANCEL, Requested, cancel_reason, task_ids};
use crate::server::{Changed, RudderMcp};

pub use crate::requested::METHOD;
/// The acknowledgement's method.
const ACK: &str = "notifications/subscriptions/acknowledged";
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The `-32021` answer to a listen for task ids from a client of the 2026
/// protocol that did not declare the extension (a legacy client is rmcp's
/// to answer: the method does not exist for it).
fn refusal(message: &Value) -> Option<Value> {
    let (id, _) = task_ids(message)?;
    let meta = message.pointer("/params/_meta")?;
    let version = meta
        .get("io.modelcontextprotocol/protocolVersion")
        .and_then(Value::as_str)?;
    if version < "2026-07-28" {
        return None;
    }
    let declared = meta
        .pointer("/io.modelcontextprotocol~1clientCapabilities/extensions/io.modelcontextprotocol~1tasks")
        .is_some();
    if declared {
        return None;
    }
    let error = ErrorData::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    );
    Some(json!({"jsonrpc": "2.0", "id": id, "error": error}))
}

/// Add the task ids to an acknowledgement for a listen that asked for
/// some: `ids_of` gives them by the subscription id. Whether it changed.
fn patch_ack(message: &mut Value, ids_of: impl Fn(&Value) -> Option<Vec<String>>) -> bool {
    if message.get("method").and_then(Value::as_str) != Some(ACK) {
        return false;
    }
    let Some(subscription) = message
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(SUBSCRIPTION_ID))
    else {
        return false;
    };
    let Some(ids) = ids_of(subscription) else {
        return false;
    };
    let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
        return false;
    };
    let notifications = params.entry("notifications").or_insert_with(|| json!({}));
    if let Some(n) = notifications.as_object_mut() {
        n.insert("taskIds".into(), json!(ids));
        return true;
    }
    false
}

/// The longest request line taken over stdio, in bytes (the HTTP body
/// limit).
pub const MAX_LINE: usize = crate::guard::MAX_BODY;

/// What [`read_line`] read.
#[derive(Debug, PartialEq)]
enum Line {
    /// A whole line (or the last one, without its newline).
    Whole,
    /// The end of input.
    End,
    /// A line longer than the limit: its first bytes are kept, the rest
    /// read and dropped; how many bytes were seen.
    TooLong(usize),
}

/// How much of a refused line is kept, to find its request id.
const HEAD: usize = 4096;

/// Read one line into `line` (newline included), taking at most `limit`
/// bytes into memory.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Line> {
    let mut seen = 0usize;
    let mut too_long = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match (too_long, seen) {
                (true, _) => Line::TooLong(seen),
                (false, 0) => Line::End,
                (false, _) => Line::Whole,
            });
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let n = chunk.len();
        seen += n;
        if !too_long && seen > limit {
            too_long = true;
            line.truncate(HEAD);
        }
        if too_long {
            let room = HEAD.saturating_sub(line.len());
            line.extend_from_slice(&chunk[..room.min(n)]);
        } else {
            line.extend_from_slice(chunk);
        }
        reader.consume(n);
        if done {
            return Ok(if too_long {
                Line::TooLong(seen)
            } else {
                Line::Whole
            });
        }
    }
}

/// The error answering a request line over [`MAX_LINE`], with the request's
/// id if its first bytes name one (else `null`, as JSON-RPC says for a
/// request whose id cannot be read).
fn too_long(head: &[u8], seen: usize) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": request_id(head),
        "error": {
            "code": -32600,
            "message": format!("the request line is {seen} bytes or more; rudder mcp takes at most {MAX_LINE} bytes a line"),
            "data": {"limit": MAX_LINE},
        },
    })
}

/// The top-level `"id"` of a JSON object's first bytes, if it comes
/// before the long part (clients write `jsonrpc` and `id` first).
fn request_id(head: &[u8]) -> Value {
    let text = String::from_utf8_lossy(head);
    let mut depth = 0i32;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            '"' => {
                // A string: a key at depth 1 named `id` is what we want.
                let start = i + 1;
                let mut end = None;
                let mut escaped = false;
                for (j, c) in chars.by_ref() {
                    match c {
                        _ if escaped => escaped = false,
                        '\\' => escaped = true,
                        '"' => {
                            end = Some(j);
                            break;
                        }
                        _ => {}
                    }
                }
                let Some(end) = end else { break };
                if depth == 1 && &text[start..end] == "id" {
                    let rest = text[end + 1..].trim_start();
                    let Some(rest) = rest.strip_prefix(':') else {
                        continue;
                    };
                    let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
                    if let Some(Ok(v @ (Value::Number(_) | Value::String(_)))) = values.next() {
                        return v;
                    }
                    break;
                }
            }
            _ => {}
        }
    }
    Value::Null
}

/// stdin and stdout for rmcp: every line in is noted in `requested` (or
/// refused) before rmcp reads it, every line out passes [`patch_ack`].
pub fn stdio(requested: Requested) -> (impl AsyncRead, impl AsyncWrite) {
    let (mut to_rmcp, rmcp_reads) = tokio::io::duplex(64 * 1024);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(64 * 1024);
    let (refused_tx, mut refused) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let noted = requested.clone();
    tokio::spawn(async move {
        let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        loop {
            line.clear();
            match read_line(&mut stdin, &mut line, MAX_LINE).await {
                Ok(Line::End) | Err(_) => break,
                Ok(Line::Whole) => {}
                Ok(Line::TooLong(seen)) => {
                    // Answered here (rmcp would drop it without a word, and
                    // the client would wait for ever).
                    crate::console::say(&format!(
                        "refused a request line of {seen} bytes or more: the limit is {MAX_LINE} bytes a line"
                    ));
                    let _ = refused_tx.send(too_long(&line, seen));
                    continue;
                }
            }
            // Most lines are something else: look before parsing.
            if contains(&line, METHOD.as_bytes())
                && let Ok(message) = serde_json::from_slice::<Value>(&line)
            {
                if let Some(answer) = refusal(&message) {
                    let _ = refused_tx.send(answer);
                    continue;
                }
                noted.note(&message);
            } else if contains(&line, CANCEL.as_bytes())
                && let Ok(message) = serde_json::from_slice::<Value>(&line)
            {
                noted.note_reason(&message);
            }
            if to_rmcp.write_all(&line).await.is_err() {
                break;
            }
        }
        // Dropping `to_rmcp` is the end of input for rmcp.
    });
    tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        let mut lines = tokio::io::BufReader::new(from_rmcp);
        let mut line = Vec::new();
        loop {
            line.clear();
            let bytes = tokio::select! {
                read = lines.read_until(b'\n', &mut line) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if contains(&line, ACK.as_bytes())
                            && let Ok(mut message) = serde_json::from_slice::<Value>(&line)
                            && patch_ack(&mut message, |id| requested.get(id))
                        {
                            format!("{message}\n").into_bytes()
                        } else {
                            std::mem::take(&mut line)
                        }
                    }
                },
                Some(answer) = refused.recv() => format!("{answer}\n").into_bytes(),
            };
            if out.write_all(&bytes).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    });
    (rmcp_reads, rmcp_writes)
}

/// The task ids of an HTTP listen request, in its extensions (rmcp hands a
/// request's `http::request::Parts` to the handler).
#[derive(Debug, Clone)]
pub struct HttpTaskIds(pub Vec<String>);

pub use crate::guard::CancelReason;

/// Look at an HTTP listen request (a POST whose `Mcp-Method` is
/// `subscriptions/listen`, or that names no method), reading at most
/// `limit` bytes of its body: its task ids go into its extensions (and are
/// returned), or it is refused (`-32021`, or too large, as rmcp would
/// refuse it). Anything else passes untouched.
pub async fn note_http(
    req: Request<Body>,
    limit: usize,
) -> Result<(Request<Body>, Option<Vec<String>>), Response<Body>> {
    if req.method() != Method::POST {
        return Ok((req, None));
    }
    let method = req.headers().get("mcp-method").map(|v| v.as_bytes());
    let cancel = method == Some(CANCEL.as_bytes());
    if method.is_some_and(|m| m != METHOD.as_bytes()) && !cancel {
        return Ok((req, None));
    }
    let (mut parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        return Err(crate::guard::error(
            axum::http::StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            "the request body is too large",
        ));
    };
    let mut ids = None;
    if cancel {
        if let Ok(message) = serde_json::from_slice::<Value>(&bytes)
            && let Some((_, reason)) = cancel_reason(&message)
        {
            parts.extensions.insert(CancelReason(reason.to_string()));
        }
    } else if contains(&bytes, METHOD.as_bytes())
        && let Ok(message) = serde_json::from_slice::<Value>(&bytes)
    {
        if let Some(answer) = refusal(&message) {
            let mut r = Response::new(Body::from(answer.to_string()));
            r.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static("application/json"),
            );
            return Err(r);
        }
        if let Some((_, found)) = task_ids(&message) {
            parts.extensions.insert(HttpTaskIds(found.clone()));
            ids = Some(found);
        }
    }
    Ok((Request::from_parts(parts, Body::from(bytes)), ids))
}

/// The answer to an HTTP listen for `ids`: its SSE stream with the ids
/// added to the acknowledgement, event by event.
pub fn patch_sse(response: Response<Body>, ids: Vec<String>) -> Response<Body> {
    let (parts, body) = response.into_parts();
    let events = futures::stream::unfold(
        (body.into_data_stream(), String::new(), false),
        move |(mut data, mut buffer, mut done)| {
            let ids = ids.clone();
            async move {
                loop {
                    if done {
                        // Once acknowledged, bytes pass as they come.
                        return data.next().await.map(|chunk| (chunk, (data, buffer, done)));
                    }
                    if let Some(end) = buffer.find("\n\n") {
                        let event: String = buffer.drain(..end + 2).collect();
                        let (event, acked) = patch_event(&event, &ids);
                        done = acked;
                        return Some((Ok(event.into()), (data, buffer, done)));
                    }
                    match data.next().await {
                        Some(Ok(chunk)) => buffer.push_str(&String::from_utf8_lossy(&chunk)),
                        Some(Err(e)) => return Some((Err(e), (data, buffer, true))),
                        None if buffer.is_empty() => return None,
                        None => {
                            let rest = std::mem::take(&mut buffer);
                            return Some((Ok(rest.into()), (data, buffer, true)));
                        }
                    }
                }
            }
        },
    );
    Response::from_parts(parts, Body::from_stream(events))
}

/// One SSE event, with the ids added if it is the acknowledgement.
fn patch_event(event: &str, ids: &[String]) -> (String, bool) {
    if !event.contains(ACK) {
        return (event.to_string(), false);
    }
    let mut out = String::new();
    let mut acked = false;
    for line in event.split_inclusive('\n') {
        if let Some(data) = line.strip_prefix("data:")
            && let Ok(mut message) = serde_json::from_str::<Value>(data.trim())
            && patch_ack(&mut message, |_| Some(ids.to_vec()))
        {
            out.push_str(&format!("data: {message}\n"));
            acked = true;
        } else {
            out.push_str(line);
        }
    }
    (out, acked)
}

impl RudderMcp {
    /// A listen rmcp acknowledged: for task ids, follow them until the
    /// request is cancelled or the client is gone; tool list changes
    /// (upstreams' tools) are sent when it asked for them; else just stay
    /// open.
    pub(crate) async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let cx = context.request_context();
        let subscription = serde_json::to_value(&cx.id).unwrap_or(Value::Null);
        let http = cx
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<HttpTaskIds>())
            .map(|ids| ids.0.clone());
        let Some(wanted) = http.or_else(|| self.requested().get(&subscription)) else {
            let mut tools = self.tools_changes();
            tools.borrow_and_update();
            loop {
                tokio::select! {
                    _ = context.cancelled() => return Ok(()),
                    changed = tools.changed() => {
                        if changed.is_err() || !self.tell_tools_changed(&context).await {
                            context.cancelled().await;
                            return Ok(());
                        }
                    }
                }
            }
        };
        let caller = self.caller(cx);
        let result = self.listen_to_tasks(&context, wanted, &caller).await;
        self.requested().forget(&subscription);
        result
    }

    async fn listen_to_tasks(
        &self,
        context: &SubscriptionContext,
        wanted: Vec<String>,
        caller: &crate::server::Caller,
    ) -> Result<(), ErrorData> {
        // Subscribe first, then read: a change after the read is heard,
        // one before it is in what is read. Each task is sent as it is now,
        // then again on every change (the revision it was last sent at).
        let mut changes = self.changes();
        let mut tools = self.tools_changes();
        tools.borrow_and_update();
        let mut shown: BTreeMap<String, Option<u64>> = BTreeMap::new();
        for id in wanted {
            // Another principal's task is never sent, as an unknown one.
            let task = self.task(&id, caller).await.ok();
            shown.insert(id, task.as_ref().map(|t| t.revision));
            if let Some(task) = task
                && !self.notify(context, &task).await
            {
                return Ok(());
            }
        }
        loop {
            let changed = tokio::select! {
                _ = context.cancelled() => return Ok(()),
                c = changes.recv() => c,
                t = tools.changed(), if tools.has_changed().is_ok() => {
                    if t.is_ok() {
                        self.tell_tools_changed(context).await;
                    }
                    continue;
                }
            };
            let ids: Vec<String> = match changed {
                Ok(Changed::Tasks(ids)) => ids
                    .iter()
                    .filter(|id| shown.contains_key(*id))
                    .cloned()
                    .collect(),
                // The feed lost its place, or this listener fell behind:
                // read every followed task again.
                Ok(Changed::All) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    shown.keys().cloned().collect()
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            };
            for id in ids {
                // Gone (pruned), never a task, or unreadable for now.
                let Ok(task) = self.task(&id, caller).await else {
                    continue;
                };
                if shown
                    .get(&id)
                    .copied()
                    .flatten()
                    .is_some_and(|r| task.revision <= r)
                {
                    continue;
                }
                shown.insert(id, Some(task.revision));
                if !self.notify(context, &task).await {
                    // The client is gone.
                    return Ok(());
                }
            }
        }
    }

    /// Send `notifications/tools/list_changed` on the subscription if it
    /// asked for it; whether it may be sent again (the client asked and is
    /// still there).
    async fn tell_tools_changed(&self, context: &SubscriptionContext) -> bool {
        if context.accepted().tools_list_changed != Some(true) {
            return false;
        }
        context.sink().notify_tool_list_changed().await.is_ok()
    }

    /// Send `task` as `notifications/tasks` on the subscription; whether
    /// the client is still there.
    async fn notify(&self, context: &SubscriptionContext, task: &rudder_model::task::Task) -> bool {
        let cx = context.request_context();
        let mut n =
            TaskStatusNotification::new(TaskStatusNotificationParams::new(self.detailed(task)));
        let mut meta = NotificationMetaObject::new();
        meta.set_subscription_id(cx.id.clone());
        n.extensions.insert(meta);
        cx.peer
            .send_notification(ServerNotification::TaskStatusNotification(n))
            .await
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_long_line_is_read_away_and_its_id_kept() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let long = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":7,\"params\":{{\"x\":\"{}\"}}}}\n{{\"id\":8}}\nlast",
                "y".repeat(100)
            );
            let mut reader = tokio::io::BufReader::with_capacity(16, long.as_bytes());
            let mut line = Vec::new();
            let first = read_line(&mut reader, &mut line, 64).await.unwrap();
            assert!(matches!(first, Line::TooLong(n) if n > 64), "{first:?}");
            assert_eq!(request_id(&line), json!(7));
            line.clear();
            assert_eq!(
                read_line(&mut reader, &mut line, 64).await.unwrap(),
                Line::Whole
            );
            assert_eq!(line, b"{\"id\":8}\n");
            line.clear();
            assert_eq!(
                read_line(&mut reader, &mut line, 64).await.unwrap(),
                Line::Whole
            );
            assert_eq!(line, b"last");
            line.clear();
            assert_eq!(
                read_line(&mut reader, &mut line, 64).await.unwrap(),
                Line::End
            );
        });
    }

    #[test]
    fn the_id_of_a_refused_line_is_found_only_at_the_top() {
        assert_eq!(
            request_id(br#"{"jsonrpc":"2.0","id":"a-1","method":"x""#),
            json!("a-1")
        );
        assert_eq!(request_id(br#"{"params":{"id":3},"id" : 4"#), json!(4));
        assert_eq!(
            request_id(br#"{"params":{"id":3,"text":"xxxx"#),
            Value::Null
        );
        assert_eq!(request_id(br#"{"method":"a\"id\"","id":5}"#), json!(5));
        assert_eq!(request_id(b"not json at all"), Value::Null);
    }

    #[test]
    fn only_a_listen_request_with_task_ids_is_noted() {
        let requested = Requested::default();
        requested.note(&parse(
            r#"{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"subscriptions/listen"}}"#,
        ));
        requested.note(&parse(
            r#"{"jsonrpc":"2.0","id":8,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#,
        ));
        requested.note(&parse(
            r#"{"jsonrpc":"2.0","id":"s-1","method":"subscriptions/listen","params":{"notifications":{"taskIds":["a","b",3,"a"]}}}"#,
        ));
        assert_eq!(requested.get(&json!(7)), None);
        assert_eq!(requested.get(&json!(8)), None);
        assert_eq!(
            requested.get(&json!("s-1")),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        requested.forget(&json!("s-1"));
        assert_eq!(requested.get(&json!("s-1")), None);
    }

    #[test]
    fn the_acknowledgement_gets_the_task_ids() {
        let mut ack = parse(
            r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{},"_meta":{"io.modelcontextprotocol/subscriptionId":"s-1"}}}"#,
        );
        assert!(patch_ack(&mut ack, |id| (id == "s-1").then(|| vec!["a".into()])));
        assert_eq!(ack["params"]["notifications"], json!({"taskIds": ["a"]}));
        let mut other = ack.clone();
        other["params"]["_meta"][SUBSCRIPTION_ID] = json!(9);
        other["params"]["notifications"] = json!({});
        assert!(!patch_ack(&mut other, |id| (id == "s-1").then(Vec::new)));
        let (event, acked) = patch_event(
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"notifications\":{},\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":1}}}\n\n",
            &["t".to_string()],
        );
        assert!(acked);
        assert!(event.starts_with("event: message\ndata: {"), "{event}");
        assert!(event.contains(r#""taskIds":["t"]"#), "{event}");
        assert!(event.ends_with("}\n\n"), "{event:?}");
    }

    #[test]
    fn a_2026_client_without_the_extension_is_refused() {
        let listen = |caps: Value| {
            parse(
                &json!({"jsonrpc": "2.0", "id": 4, "method": METHOD, "params": {
                    "notifications": {"taskIds": ["a"]},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": caps,
                    },
                }})
                .to_string(),
            )
        };
        let refused = refusal(&listen(json!({}))).expect("refused");
        assert_eq!(refused["error"]["code"], -32021);
        assert_eq!(refused["id"], 4);
        assert!(
            refusal(&listen(
                json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
            ))
            .is_none()
        );
    }
}
