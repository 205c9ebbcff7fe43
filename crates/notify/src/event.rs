//! What a notifier tells: which tasks make an event ([`event_of`]) and the
//! event's JSON (docs/notify.md "The event").

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use rudder_model::task::{Status, Task};
use rudder_model::text::sanitize;
use rudder_store::delivery::EventKey;

/// The states a notifier can tell of (`--on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum On {
    /// The task asks a person a question.
    InputRequired,
    /// The task failed.
    Failed,
    /// The task is working but its worker's lease lapsed with no successor
    /// ([`Task::stalled`]).
    Stalled,
}

impl On {
    pub fn as_str(self) -> &'static str {
        match self {
            On::InputRequired => "input_required",
            On::Failed => "failed",
            On::Stalled => "stalled",
        }
    }

    /// The status a task of this event has.
    pub fn status(self) -> Status {
        match self {
            On::InputRequired => Status::InputRequired,
            On::Failed => Status::Failed,
            On::Stalled => Status::Working,
        }
    }
}

impl fmt::Display for On {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for On {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "input_required" => Ok(On::InputRequired),
            "failed" => Ok(On::Failed),
            "stalled" => Ok(On::Stalled),
            other => Err(format!(
                "unknown event {other:?}: expected input_required, failed or stalled"
            )),
        }
    }
}

/// The event `on` of `task` at `now`, if the task is in that state: its
/// key (the round being the index of the history entry that entered the
/// status, or for `stalled` the lapsed lease's expiry in milliseconds).
pub fn event_of(task: &Task, on: On, now: DateTime<Utc>) -> Option<EventKey> {
    let round = match on {
        On::Stalled => {
            if !task.stalled(now) {
                return None;
            }
            task.lease_expires_at?.timestamp_millis()
        }
        _ if task.status != on.status() => return None,
        // The entry that entered the status: the last one, as the status
        // is the current one (a task written without history: round 0).
        _ => task
            .history
            .iter()
            .rposition(|h| h.status == task.status)
            .map_or(0, |i| i as i64),
    };
    Some(EventKey {
        task_id: task.task_id.clone(),
        event: on.as_str().to_string(),
        round,
    })
}

/// When the task entered the state the event tells of.
fn since(task: &Task, on: On) -> Option<DateTime<Utc>> {
    match on {
        On::Stalled => task.lease_expires_at,
        _ => task
            .history
            .iter()
            .rev()
            .find(|h| h.status == task.status)
            .map(|h| h.at)
            .or(task.updated_at),
    }
}

/// The fields the task's input schema asks for: name, type, title,
/// description, choices and whether required, as the schema says them.
fn fields(task: &Task) -> Vec<Value> {
    let Some(schema) = &task.input_schema else {
        return Vec::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let secrets = rudder_model::schema::secret_fields(schema);
    props
        .iter()
        .map(|(name, p)| {
            let mut f = serde_json::Map::new();
            f.insert("name".into(), json!(name));
            // A secret field says so, and not its default (which may be
            // the very value): the event goes to chat and logs.
            let secret = secrets
                .iter()
                .any(|s| s.is_empty() || s.first().is_some_and(|n| n == name));
            for k in ["type", "title", "description", "enum", "default"] {
                if let Some(v) = p.get(k)
                    && !(secret && k == "default")
                {
                    f.insert(k.into(), v.clone());
                }
            }
            if secret {
                f.insert("secret".into(), json!(true));
            }
            f.insert("required".into(), json!(required.contains(&name.as_str())));
            Value::Object(f)
        })
        .collect()
}

/// Quote `word` for a POSIX shell if it needs it (the commands the event
/// suggests are for a person to copy).
fn sh_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The event as JSON: what a person needs to act on it. `store` is the
/// store as shown (no password), `notifier` the notifier's name.
pub fn event_json(
    task: &Task,
    key: &EventKey,
    on: On,
    now: DateTime<Utc>,
    store: &str,
    notifier: &str,
) -> Value {
    let since = since(task, on);
    let waited_ms = since.map(|s| (now - s).num_milliseconds().max(0));
    let question = match on {
        On::InputRequired => task.status_message.clone(),
        _ => None,
    };
    let fields = match on {
        On::InputRequired => fields(task),
        _ => Vec::new(),
    };
    let store_arg = format!("--store {}", sh_quote(store));
    let answer = match on {
        On::InputRequired => {
            let sets: Vec<String> = fields
                .iter()
                .filter_map(|f| f.get("name").and_then(Value::as_str))
                .map(|n| format!("--set {}", sh_quote(&format!("{n}=…"))))
                .collect();
            let mut cli = format!("rudder {store_arg} input {}", sh_quote(&task.task_id));
            if sets.is_empty() {
                cli.push_str(" --value '{…}'");
            } else {
                cli.push(' ');
                cli.push_str(&sets.join(" "));
            }
            json!({ "cli": cli, "tui": format!("rudder {store_arg}") })
        }
        _ => json!({
            "cli": format!("rudder {store_arg} get {}", sh_quote(&task.task_id)),
            "tui": format!("rudder {store_arg}"),
        }),
    };
    let created_by = task.origin.as_ref().map(|o| {
        json!({
            "tool": o.tool,
            "client": o.client.as_ref().map(|c| json!({ "name": c.name, "version": c.version })),
        })
    });
    let label = task.label().unwrap_or(task.short_id());
    let waited = waited_ms.map(|ms| {
        humantime::format_duration(std::time::Duration::from_secs((ms / 1000) as u64)).to_string()
    });
    // One line for chat: control characters and escapes taken out, so
    // that a title cannot move a terminal's cursor where it is shown.
    let headline = match on {
        On::InputRequired => format!(
            "rudder: task {} \"{}\" needs input: {}",
            task.short_id(),
            sanitize(label),
            sanitize(task.status_message.as_deref().unwrap_or("(no question)"))
        ),
        On::Failed => format!(
            "rudder: task {} \"{}\" failed: {}",
            task.short_id(),
            sanitize(label),
            sanitize(task.error_message().unwrap_or("(no message)"))
        ),
        On::Stalled => format!(
            "rudder: task {} \"{}\" stalled: worker {} stopped renewing its lease",
            task.short_id(),
            sanitize(label),
            sanitize(task.claimed_by.as_deref().unwrap_or("?"))
        ),
    };
    let mut text = headline;
    if let Some(w) = &waited {
        text.push_str(&format!(" (for {w})"));
    }
    if let Some(cli) = answer.get("cli").and_then(Value::as_str) {
        text.push_str(&format!(" — {cli}"));
    }
    json!({
        "event": on.as_str(),
        "notifier": notifier,
        "task_id": task.task_id,
        "round": key.round,
        "title": task.title,
        "kind": task.kind,
        "status": task.status.as_str(),
        "question": question,
        "fields": fields,
        "error": match on { On::Failed => task.error_message(), _ => None },
        "claimed_by": match on { On::Stalled => task.claimed_by.as_deref(), _ => None },
        "since": since,
        "waited_ms": waited_ms,
        "created_at": task.created_at,
        "created_by": created_by,
        "store": store,
        "answer": answer,
        "text": text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rudder_model::task::HistoryEntry;

    fn entry(status: Status) -> HistoryEntry {
        HistoryEntry::new(status, Utc::now(), None)
    }

    #[test]
    fn a_second_question_is_a_new_round() {
        let mut t = Task::new("t1", Status::InputRequired);
        t.history = vec![entry(Status::InputRequired)];
        let first = event_of(&t, On::InputRequired, Utc::now()).unwrap();
        t.history.push(entry(Status::Working));
        t.history.push(entry(Status::InputRequired));
        let second = event_of(&t, On::InputRequired, Utc::now()).unwrap();
        assert_ne!(first, second);
        assert_eq!(second.round, 2);
        assert!(event_of(&t, On::Failed, Utc::now()).is_none());
    }

    #[test]
    fn text_from_the_task_is_data_and_the_chat_line_has_no_escapes() {
        let mut t = Task::new("t1", Status::InputRequired);
        t.title = Some("x\u{1b}]0;pwned\u{7}$(rm -rf /)".into());
        t.status_message = Some("which?\u{1b}[2J".into());
        let key = event_of(&t, On::InputRequired, Utc::now()).unwrap();
        let e = event_json(&t, &key, On::InputRequired, Utc::now(), "s.json", "n");
        assert_eq!(e["title"], json!("x\u{1b}]0;pwned\u{7}$(rm -rf /)"));
        let text = e["text"].as_str().unwrap();
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text}"
        );
        assert!(text.contains("$(rm -rf /)"));
    }

    #[test]
    fn a_secret_field_is_marked_and_its_default_not_told() {
        let mut t = Task::new("t1", Status::InputRequired);
        t.input_schema = Some(json!({"type": "object", "properties": {
            "service": {"type": "string", "default": "payments"},
            "token": {"type": "string", "writeOnly": true, "default": "tok-dflt"}
        }}));
        let key = event_of(&t, On::InputRequired, Utc::now()).unwrap();
        let e = event_json(&t, &key, On::InputRequired, Utc::now(), "s.json", "n");
        assert_eq!(e["fields"][0]["default"], json!("payments"));
        assert_eq!(e["fields"][0].get("secret"), None);
        assert_eq!(e["fields"][1]["secret"], json!(true));
        assert_eq!(e["fields"][1].get("default"), None);
        assert!(!e.to_string().contains("tok-dflt"));
    }
}
