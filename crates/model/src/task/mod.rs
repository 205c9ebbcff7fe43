//! The task model: the record stored for each task and its wire format.
//!
//! The layout is the seed's Python `TaskStore` layout (a JSON object mapping
//! `task_id` to a task) extended with the fields of docs/architecture.md's format table.
//! Fields this version does not know are kept in [`Task::extra`] and written
//! back unchanged; optional fields missing from a file take their defaults.

mod author;
mod kind;
pub mod machine;
mod status;
pub mod time;

use chrono::{DateTime, Utc};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use author::{Author, AuthorError, Face, MAX_AUTHOR_CHARS, check_author};
pub use kind::{KindError, MAX_KIND_CHARS, check_kind};
pub use machine::{Actor, Change, Op, OpKind, Refusal};
pub use status::{ParseStatusError, Status};

/// All tasks of a store, keyed by `task_id`, in file order (creation order for
/// files rudder wrote).
pub type TaskMap = IndexMap<String, Task>;

/// Steps done out of steps planned, as reported by a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub current: u64,
    pub total: u64,
}

/// Where a task came from when a front end such as `rudder mcp` created
/// it: the tool that was called and the client that called it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The tool of the catalogue that was called (`diagnose`).
    pub tool: String,
    /// The calling client, from its `clientInfo`, if it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientInfo>,
}

/// A client's name and version, as it gave them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl Origin {
    /// One line for people: `tool diagnose, client claude-code 1.2`.
    pub fn line(&self) -> String {
        let mut line = format!("tool {}", self.tool);
        if let Some(c) = &self.client {
            line.push_str(&format!(", client {}", c.name));
            if let Some(v) = &c.version {
                line.push_str(&format!(" {v}"));
            }
        }
        line
    }
}

/// One status transition, oldest first in [`Task::history`]: one line of
/// the store's trail (`rudder log`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub status: Status,
    #[serde(deserialize_with = "time::one", serialize_with = "time::fixed")]
    pub at: DateTime<Utc>,
    /// What rudder says of the change (`created`, the question asked, a
    /// failure's message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Who made the change ([`Author`]'s name). Unset in entries written
    /// before rudder recorded authors: an unknown actor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// Through which face the change came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub face: Option<Face>,
    /// The reason the actor gave (a cancel, a failure, a reclaim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The fields an answer gave, by name: the values stay in the task's
    /// input, never in the trail.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

impl HistoryEntry {
    /// An entry with no author, reason or fields yet.
    pub fn new(status: Status, at: DateTime<Utc>, note: Option<String>) -> Self {
        HistoryEntry {
            status,
            at,
            note,
            actor: None,
            face: None,
            reason: None,
            fields: Vec::new(),
        }
    }

    /// Record `author` as the entry's.
    pub fn by(&mut self, author: &Author) {
        self.actor = Some(author.name().to_string());
        self.face = Some(author.face().clone());
    }
}

/// An answer a task was given before its current one: the question, the
/// input schema it answered and the answer. A worker that asks the same
/// question again (a gateway's call made again after a restart) can be
/// given it at once instead of asking a person twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answered {
    /// The question as it stood when it was answered (the task's message
    /// then), if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The input schema the answer was given for.
    pub input_schema: Value,
    /// The answer as given: secret fields in clear (masked by
    /// [`crate::schema::mask_task`] wherever a person sees it).
    pub input_value: Value,
}

/// How many earlier answers a task keeps at most ([`Task::answered`]): a
/// call that asks more questions than this asks the oldest again after a
/// restart, which is safe, only slower.
pub const MAX_ANSWERED: usize = 32;

/// How many bytes of JSON text a task's earlier answers take at most
/// ([`Task::answered`]): every write of a task rewrites it, so the list is
/// kept small; the oldest are dropped first, and one answer larger than
/// this on its own is not kept.
pub const MAX_ANSWERED_BYTES: usize = 64 * 1024;

/// One task as stored in the file.
///
/// The seed's six fields, `revision` and `history` are always written; the
/// other optional fields are omitted while they are unset, which keeps large
/// stores small and reads back as the same defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub task_id: String,
    pub status: Status,
    #[serde(default)]
    pub input_schema: Option<Value>,
    #[serde(default)]
    pub input_value: Option<Value>,
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "time::opt"
    )]
    pub created_at: Option<DateTime<Utc>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "time::opt"
    )]
    pub updated_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What sort of work the task is (`diagnose`, `backup`): workers claim
    /// by kind. Unset for tasks of any kind (and in files written before
    /// kinds existed). [`check_kind`] says what a kind may be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_by: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "time::opt"
    )]
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// The lease length the holder claimed with (milliseconds): a write of
    /// the holder that names no length renews the lease for this long.
    /// Unset while nobody holds the task, and in claims written before
    /// rudder recorded it ([`machine::DEFAULT_LEASE`] then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<u64>,
    /// The answers the task was given before its current one
    /// (`input_value`), oldest first: when a task that holds an answer
    /// asks a new question, the answer moves here with its question (see
    /// [`machine`]'s `RequestInput`). Bounded ([`MAX_ANSWERED`],
    /// [`MAX_ANSWERED_BYTES`], the oldest dropped first). Secret values are
    /// in clear, as in `input_value`: every face but the worker's shows the
    /// task through [`crate::schema::mask_task`]. Omitted while empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answered: Vec<Answered>,
    #[serde(default)]
    pub revision: u64,
    #[serde(default)]
    pub history: Vec<HistoryEntry>,
    /// The tool and client that created the task (`rudder mcp`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// The MCP principal that created the task through `rudder mcp` with
    /// authorization: only it reaches the task over MCP (the Tasks
    /// extension's auth binding). `None` for tasks created otherwise (the
    /// CLI, Python, a worker, `rudder mcp` without authorization), which
    /// over MCP only the catalogue's operators reach. Part of the task's
    /// document, so every backend and `copy` carry it as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned_by: Option<String>,
    /// Fields written by other tools or newer versions, kept verbatim.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

impl Task {
    /// A fresh task with every optional field unset.
    pub fn new(task_id: impl Into<String>, status: Status) -> Self {
        Task {
            task_id: task_id.into(),
            status,
            input_schema: None,
            input_value: None,
            result: None,
            idempotency_key: None,
            created_at: None,
            updated_at: None,
            title: None,
            kind: None,
            request: None,
            status_message: None,
            progress: None,
            claimed_by: None,
            lease_expires_at: None,
            lease_ms: None,
            error: None,
            ttl_ms: None,
            poll_interval_ms: None,
            answered: Vec::new(),
            revision: 0,
            history: Vec::new(),
            origin: None,
            owned_by: None,
            extra: IndexMap::new(),
        }
    }

    /// The first eight characters of the id, as shown in lists.
    pub fn short_id(&self) -> &str {
        short_id(&self.task_id)
    }

    /// The message of `error`, if the task failed with one.
    pub fn error_message(&self) -> Option<&str> {
        self.error.as_ref()?.get("message")?.as_str()
    }

    /// What a list shows as the task's message now: a failed task's error
    /// (its last progress message no longer says what matters); for a task
    /// answered while no worker held it, [`AWAITING_RESUME`] until a worker
    /// claims it or writes a message (the answer took the question out of
    /// `status_message`, and a blank row would say nothing of what it now
    /// waits for); else the status message. The CLI's `list`, the TUI's
    /// table and the MCP `statusMessage` all show this.
    pub fn current_message(&self) -> Option<&str> {
        match self.status {
            Status::Failed => self.error_message().or(self.status_message.as_deref()),
            _ if self.awaits_resume() => Some(AWAITING_RESUME),
            _ => self.status_message.as_deref(),
        }
    }

    /// How long a write of the holder that names no length renews the
    /// lease for: the length recorded with the claim.
    pub fn lease_length(&self) -> std::time::Duration {
        self.lease_ms
            .map(std::time::Duration::from_millis)
            .unwrap_or(machine::DEFAULT_LEASE)
    }

    /// Working, without a message or a worker, and its last transition was
    /// the answer to its question (that entry's note says so, whether the
    /// task asked with a message or not).
    fn awaits_resume(&self) -> bool {
        self.status == Status::Working
            && self.status_message.is_none()
            && self.claimed_by.is_none()
            && self.history.last().is_some_and(|h| {
                h.status == Status::Working
                    && h.note
                        .as_deref()
                        .is_some_and(|n| n.starts_with(INPUT_PROVIDED))
            })
    }

    /// Whether a worker holds a lease on this task that has not expired at `now`.
    pub fn lease_live(&self, now: DateTime<Utc>) -> bool {
        self.claimed_by.is_some() && self.lease_expires_at.is_some_and(|until| until > now)
    }

    /// Whether this task is working but nobody is: its lease lapsed at or
    /// before `now` (the worker stopped renewing it, which every write
    /// does), and no one has reclaimed it yet. A task never claimed (no
    /// lease) is waiting for a worker, not stalled.
    pub fn stalled(&self, now: DateTime<Utc>) -> bool {
        self.status == Status::Working && self.lease_expires_at.is_some_and(|until| until <= now)
    }

    /// The question the task's current answer (`input_value`) answered, as
    /// it stood then: the note rudder wrote on the answer's history entry
    /// (the first `working` entry after the last `input_required` one).
    /// `None` when the task has no answer, was asked without a message, or
    /// its history does not say.
    pub fn answered_question(&self) -> Option<&str> {
        self.input_value.as_ref()?;
        let asked = self
            .history
            .iter()
            .rposition(|h| h.status == Status::InputRequired)?;
        let answer = self.history[asked + 1..]
            .iter()
            .find(|h| h.status == Status::Working)?;
        answer
            .note
            .as_deref()?
            .strip_prefix(INPUT_PROVIDED)?
            .strip_prefix(ASKED_OPEN)?
            .strip_suffix(')')
    }

    /// Every answer the task holds, oldest first, each with its question
    /// and input schema: the earlier ones ([`Task::answered`]) and the
    /// current one (`input_value`, its question from the history, see
    /// [`Task::answered_question`]). Secret values in clear: for the worker.
    pub fn answers(&self) -> impl Iterator<Item = (Option<&str>, &Value, &Value)> {
        let current = match (&self.input_schema, &self.input_value) {
            (Some(schema), Some(value)) => Some((self.answered_question(), schema, value)),
            _ => None,
        };
        self.answered
            .iter()
            .map(|a| (a.message.as_deref(), &a.input_schema, &a.input_value))
            .chain(current)
    }

    /// A short label for lists: the title, else the idempotency key.
    pub fn label(&self) -> Option<&str> {
        self.title.as_deref().or(self.idempotency_key.as_deref())
    }
}

/// The message of a task answered while no worker held it, until a worker
/// claims it or writes one ([`Task::current_message`]).
pub const AWAITING_RESUME: &str = "answered; waiting for a worker to resume";

/// How the history entry of an answer begins ([`machine`]'s note on it).
pub(crate) const INPUT_PROVIDED: &str = "input provided";

/// What follows [`INPUT_PROVIDED`] in that note when the task was asked
/// with a message: ` (asked: QUESTION)`.
pub(crate) const ASKED_OPEN: &str = " (asked: ";

/// The first eight characters of a task id (the whole id if it is shorter).
pub fn short_id(id: &str) -> &str {
    match id.char_indices().nth(8) {
        Some((i, _)) => &id[..i],
        None => id,
    }
}
