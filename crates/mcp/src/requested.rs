//! The task ids of `subscriptions/listen` requests seen on stdio, kept
//! while their listens are open: written by the stdio transport (`listen`),
//! held by the server. Apart from both so that neither imports the other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// The JSON-RPC method this module answers.
pub const METHOD: &str = "subscriptions/listen";

/// The method whose `params.reason` is noted ([`Requested::reason`]).
pub const CANCEL: &str = "tasks/cancel";

/// How many cancel reasons are held at most: one whose request never
/// reached the server (refused by rmcp) is otherwise never taken.
const MAX_REASONS: usize = 1024;

/// The `taskIds` of listen requests seen on stdio, by request id (its JSON
/// text), while the listen is open; and the `reason` of `tasks/cancel`
/// requests until the server takes it (rmcp 3.11 drops both fields).
#[derive(Debug, Clone, Default)]
pub struct Requested {
    listens: Arc<Mutex<HashMap<String, Vec<String>>>>,
    reasons: Arc<Mutex<HashMap<String, String>>>,
}

impl Requested {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<String>>> {
        self.listens.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Note the reason of `message` if it is a `tasks/cancel` giving one.
    pub(crate) fn note_reason(&self, message: &Value) {
        if let Some((id, reason)) = cancel_reason(message) {
            let mut reasons = self.reasons.lock().unwrap_or_else(|e| e.into_inner());
            if reasons.len() >= MAX_REASONS {
                reasons.clear();
            }
            reasons.insert(id.to_string(), reason.to_string());
        }
    }

    /// The reason of the cancel request whose id is `id` (as JSON), taken.
    pub(crate) fn reason(&self, id: &Value) -> Option<String> {
        self.reasons
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id.to_string())
    }

    /// Note the task ids of `message` if it is a listen request naming some.
    pub(crate) fn note(&self, message: &Value) {
        if let Some((id, ids)) = task_ids(message) {
            self.lock().insert(id.to_string(), ids);
        }
    }

    /// The ids of the listen request whose id is `id` (as JSON).
    pub(crate) fn get(&self, id: &Value) -> Option<Vec<String>> {
        self.lock().get(&id.to_string()).cloned()
    }

    pub(crate) fn forget(&self, id: &Value) {
        self.lock().remove(&id.to_string());
    }
}

/// The request id and the task ids of a listen request that names some.
pub(crate) fn task_ids(message: &Value) -> Option<(&Value, Vec<String>)> {
    if message.get("method").and_then(Value::as_str) != Some(METHOD) {
        return None;
    }
    let id = message.get("id")?;
    let mut ids: Vec<String> = Vec::new();
    for v in message
        .pointer("/params/notifications/taskIds")?
        .as_array()?
    {
        if let Some(s) = v.as_str()
            && !ids.iter().any(|i| i == s)
        {
            ids.push(s.to_string());
        }
    }
    Some((id, ids))
}

/// The request id and the reason of a `tasks/cancel` request that gives
/// one (`params.reason`).
pub(crate) fn cancel_reason(message: &Value) -> Option<(&Value, &str)> {
    if message.get("method").and_then(Value::as_str) != Some(CANCEL) {
        return None;
    }
    Some((
        message.get("id")?,
        message.pointer("/params/reason")?.as_str()?,
    ))
}
