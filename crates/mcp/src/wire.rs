//! A rudder task as the Tasks extension shows it: status, times, the
//! question as `elicitation/create` form requests, the result as a
//! `CallToolResult`, a protocol failure as a JSON-RPC error object.

use std::collections::{BTreeMap, BTreeSet};

use chrono::SecondsFormat;
use rmcp::model::{
    self as m, CallToolResult, ContentBlock, DetailedTask, InputRequest, InputRequests, JsonObject,
    TaskPayload, TaskStatus,
};
use serde_json::{Value, json};

use rudder_model::task::{Status, Task};

/// The keyword of an input schema that asks several questions at once:
/// `{"x-mcp-input-requests": {KEY: {"message": ...}}, "properties": {KEY:
/// FORM-SCHEMA}}`; each KEY is its own elicitation, answered separately, and
/// the input given to the task is `{KEY: answer, ...}` once all are in.
pub const MULTI: &str = "x-mcp-input-requests";

/// Which round of questions a waiting task is in: the number of times it
/// entered `input_required` (so a key is never reused within a task), or
/// its revision for a task written without history.
pub fn round(task: &Task) -> u64 {
    let n = task
        .history
        .iter()
        .filter(|h| h.status == Status::InputRequired)
        .count() as u64;
    if n == 0 { task.revision } else { n }
}

/// One question of the current round: its key, message and form schema.
#[derive(Debug, Clone)]
pub struct Question {
    /// The key on the wire (`input-3`, or `input-3.KEY` for a part).
    pub key: String,
    /// The part's name for a several-question schema.
    pub part: Option<String>,
    pub message: String,
    pub schema: Value,
}

/// The questions a waiting task asks now (none unless `input_required`).
pub fn questions(task: &Task) -> Vec<Question> {
    if task.status != Status::InputRequired {
        return Vec::new();
    }
    let round = round(task);
    let schema = task
        .input_schema
        .clone()
        .unwrap_or(json!({"type": "object"}));
    let message = task
        .status_message
        .clone()
        .unwrap_or_else(|| "The task needs input".into());
    if let Some(parts) = schema.get(MULTI).and_then(Value::as_object) {
        let props = schema.get("properties").and_then(Value::as_object);
        return parts
            .iter()
            .map(|(part, spec)| Question {
                key: format!("input-{round}.{part}"),
                part: Some(part.clone()),
                message: spec
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or(&message)
                    .to_string(),
                schema: props
                    .and_then(|p| p.get(part))
                    .cloned()
                    .unwrap_or(json!({"type": "object"})),
            })
            .collect();
    }
    vec![Question {
        key: format!("input-{round}"),
        part: None,
        message,
        schema,
    }]
}

/// The `elicitation/create` form request of a question, or why its schema
/// does not fit form mode.
pub fn elicitation(q: &Question) -> Result<InputRequest, String> {
    let fit = rudder_model::schema::mcp::mcp_fit(&q.schema);
    if let Some(reason) = fit.reason {
        return Err(reason);
    }
    let request = json!({
        "method": "elicitation/create",
        "params": {"mode": "form", "message": q.message, "requestedSchema": q.schema},
    });
    serde_json::from_value(request).map_err(|e| e.to_string())
}

/// Whether a failed task failed at the protocol level (`failed` on the
/// wire): a worker that gave a JSON-RPC `code`, or a task reclaimed because
/// its worker died. Any other failure is the tool's own error.
pub fn protocol_failure(task: &Task) -> bool {
    let error = task.error.as_ref();
    error.and_then(|e| e.get("code")).is_some_and(Value::is_i64)
        || error.and_then(|e| e.get("reclaimed")) == Some(&Value::Bool(true))
}

/// The JSON-RPC error object of a protocol failure.
pub fn error_object(task: &Task) -> JsonObject {
    let error = task.error.clone().unwrap_or(Value::Null);
    let code = error
        .get("code")
        .and_then(Value::as_i64)
        .unwrap_or(m::ErrorCode::INTERNAL_ERROR.0 as i64);
    let message = task
        .error_message()
        .unwrap_or("the task failed")
        .to_string();
    let mut out = JsonObject::new();
    out.insert("code".into(), code.into());
    out.insert("message".into(), message.into());
    if let Some(data) = error.get("data") {
        out.insert("data".into(), data.clone());
    } else if error.is_object() {
        out.insert("data".into(), error);
    }
    out
}

/// The tool result of a finished task that is not a protocol failure: a
/// result written as a `CallToolResult` (it has `content`) is passed on;
/// any other result becomes `structuredContent` with a text rendering; a
/// worker's `fail` is a tool error. Every one says `"resultType":
/// "complete"`, as every 2026-07-28 result must: the extension's clients
/// refuse a task's `result` without it.
pub fn tool_result(task: &Task) -> CallToolResult {
    let mut r = result_of(task);
    // Also over a worker's own `resultType`: a finished task's result is
    // never anything but complete.
    r.result_type = Some(m::ResultType::COMPLETE);
    r
}

fn result_of(task: &Task) -> CallToolResult {
    match task.status {
        Status::Failed => {
            let message = task
                .error_message()
                .unwrap_or("the task failed")
                .to_string();
            let mut r = CallToolResult::error(vec![ContentBlock::text(message)]);
            r.structured_content = task.error.clone().filter(Value::is_object);
            r
        }
        Status::Cancelled => CallToolResult::error(vec![ContentBlock::text(
            task.status_message
                .clone()
                .unwrap_or_else(|| "the task was cancelled".into()),
        )]),
        _ => {
            let result = task.result.clone().unwrap_or(Value::Null);
            if result.get("content").is_some_and(Value::is_array)
                && let Ok(r) = serde_json::from_value::<CallToolResult>(result.clone())
            {
                return r;
            }
            let text = match &result {
                Value::String(s) => s.clone(),
                Value::Null => "done".into(),
                other => serde_json::to_string_pretty(other).unwrap_or_default(),
            };
            let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
            r.structured_content = match result {
                Value::Object(_) => Some(result),
                Value::Null => None,
                other => Some(json!({ "result": other })),
            };
            r
        }
    }
}

fn time(t: Option<chrono::DateTime<chrono::Utc>>) -> String {
    t.unwrap_or(chrono::DateTime::UNIX_EPOCH)
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The base task fields. `default_poll` is the tool's poll interval, for a
/// task that records none.
pub fn base(task: &Task, default_poll: Option<u64>) -> m::Task {
    let status = match task.status {
        Status::Working => TaskStatus::Working,
        Status::InputRequired => TaskStatus::InputRequired,
        Status::Completed => TaskStatus::Completed,
        Status::Failed if protocol_failure(task) => TaskStatus::Failed,
        Status::Failed => TaskStatus::Completed,
        Status::Cancelled => TaskStatus::Cancelled,
    };
    let mut t = m::Task::new(
        task.task_id.clone(),
        status,
        time(task.created_at.or(task.updated_at)),
        time(task.updated_at.or(task.created_at)),
    );
    t.ttl_ms = task.ttl_ms;
    t.poll_interval_ms = task.poll_interval_ms.or(default_poll);
    t.status_message = task
        .current_message()
        .map(|s| rudder_model::text::sanitize(s).into_owned());
    t
}

/// The task as `tasks/get` answers it. `answered` are the parts of a
/// several-question round already given (they are no longer asked).
pub fn detailed(
    task: &Task,
    default_poll: Option<u64>,
    answered: &BTreeSet<String>,
) -> DetailedTask {
    let mut base = base(task, default_poll);
    let payload = match task.status {
        Status::Working => TaskPayload::Working,
        Status::InputRequired => {
            let mut requests: InputRequests = BTreeMap::new();
            let mut unfit = Vec::new();
            for q in questions(task) {
                if q.part.as_ref().is_some_and(|p| answered.contains(p)) {
                    continue;
                }
                match elicitation(&q) {
                    Ok(r) => {
                        requests.insert(q.key, r);
                    }
                    Err(reason) => unfit.push(reason),
                }
            }
            if let Some(reason) = unfit.first() {
                let question = base.status_message.take().unwrap_or_default();
                base.status_message = Some(format!(
                    "{question} (this question cannot be asked over MCP: its schema does not fit form elicitation: {reason}; answer it with `rudder input {}` or in the TUI)",
                    task.task_id
                ));
            }
            TaskPayload::InputRequired {
                input_requests: requests,
            }
        }
        Status::Completed => TaskPayload::Completed {
            result: to_object(&tool_result(task)),
        },
        Status::Failed if protocol_failure(task) => TaskPayload::Failed {
            error: error_object(task),
        },
        Status::Failed => TaskPayload::Completed {
            result: to_object(&tool_result(task)),
        },
        Status::Cancelled => TaskPayload::Cancelled,
    };
    DetailedTask::new(base, payload)
}

fn to_object(r: &CallToolResult) -> JsonObject {
    match serde_json::to_value(r) {
        Ok(Value::Object(o)) => o,
        _ => JsonObject::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The extension's rules for a finished task's `result` (a
    /// `CallToolResult` of 2026-07-28): `resultType` is `complete`,
    /// `content` a list of typed blocks, `isError` a boolean if present,
    /// `structuredContent` an object if present.
    pub(crate) fn check_call_tool_result(result: &Value) {
        assert_eq!(result["resultType"], "complete", "{result}");
        let content = result["content"].as_array().expect("content is a list");
        assert!(
            content.iter().all(|b| b["type"].is_string()),
            "every block has a type: {result}"
        );
        if let Some(e) = result.get("isError") {
            assert!(e.is_boolean(), "{result}");
        }
        if let Some(s) = result.get("structuredContent") {
            assert!(s.is_object(), "{result}");
        }
    }

    fn finished(status: Status, result: Option<Value>, error: Option<Value>) -> Task {
        let mut t = Task::new("0b5e8f7e-3c1a-4f6e-9d2b-7a1c2e3f4a5b", status);
        t.result = result;
        t.error = error;
        t
    }

    fn wire_result(task: &Task) -> Value {
        let d = serde_json::to_value(detailed(task, None, &BTreeSet::new())).expect("serializes");
        d["result"].clone()
    }

    #[test]
    fn every_finished_result_says_it_is_complete() {
        let cases = [
            // A worker that wrote a CallToolResult (mcp_fixture_worker).
            finished(
                Status::Completed,
                Some(json!({"content": [{"type": "text", "text": "Hello, Ada!"}]})),
                None,
            ),
            // One that even wrote another resultType.
            finished(
                Status::Completed,
                Some(json!({"content": [], "resultType": "task"})),
                None,
            ),
            // A plain JSON result, a string, none.
            finished(Status::Completed, Some(json!({"answer": 42})), None),
            finished(Status::Completed, Some(json!("done")), None),
            finished(Status::Completed, None, None),
            // A tool error (`fail` without a JSON-RPC code).
            finished(Status::Failed, None, Some(json!({"message": "disk full"}))),
        ];
        for task in &cases {
            let result = wire_result(task);
            check_call_tool_result(&result);
            // The inline answer of `tools/call` is the same result.
            let inline = serde_json::to_value(tool_result(task)).expect("serializes");
            check_call_tool_result(&inline);
        }
        let error = wire_result(&cases[5]);
        assert_eq!(error["isError"], true);
        // A protocol failure has no result at all, but an error object.
        let failed = finished(Status::Failed, None, Some(json!({"code": -32603})));
        let d = serde_json::to_value(detailed(&failed, None, &BTreeSet::new())).unwrap();
        assert!(d.get("result").is_none(), "{d}");
        assert_eq!(d["error"]["code"], -32603);
    }

    /// A task's earlier answers never reach MCP's wire (the Tasks
    /// extension has no place for them), whatever its status: neither
    /// their values nor their questions.
    #[test]
    fn earlier_answers_are_not_on_the_wire() {
        for status in [
            Status::Working,
            Status::InputRequired,
            Status::Completed,
            Status::Failed,
            Status::Cancelled,
        ] {
            let mut t = finished(status, Some(json!("done")), None);
            t.input_schema =
                Some(json!({"type": "object", "properties": {"b": {"type": "string"}}}));
            t.answered = vec![rudder_model::task::Answered {
                message: Some("Which key-q?".into()),
                input_schema: json!({"properties": {"k": {"type": "string", "writeOnly": true}}}),
                input_value: json!({"k": "key-v"}),
            }];
            let d = serde_json::to_string(&detailed(&t, None, &BTreeSet::new())).unwrap();
            let inline = serde_json::to_string(&tool_result(&t)).unwrap();
            for shown in [d, inline] {
                assert!(
                    !shown.contains("key-v") && !shown.contains("key-q"),
                    "{status}: {shown}"
                );
            }
        }
    }
}
