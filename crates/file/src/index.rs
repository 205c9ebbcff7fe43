//! Checking a task's JSON without building it: the fields the store's scans
//! need, and a verdict on all the others.
//!
//! [`TaskIndex`] accepts a task's JSON only if [`Task`]'s own deserializer
//! would: every typed field is read with the same type (status, times,
//! progress, revision, history, the integers, origin and owner), and every
//! opaque one (`input_schema`, `input_value`, `result`, `request`, `error`,
//! unknown fields, and the values of `answered`'s entries) is walked the
//! way a `serde_json::Value` is read (numbers in range,
//! strings with valid escapes) without allocating it. It is stricter than
//! `Task` in one place: opaque values nested as deep as [`MAX_LEVEL`] are
//! refused, which is serde_json's own recursion limit as it applies in the
//! whole file: a task checked on its own starts one level shallower, where
//! serde_json alone would accept one level more.
//! Whatever it refuses goes to the full parse, whose answer is final.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use rudder_core::query::SummaryFields;
use rudder_model::task::time::Time;
use rudder_model::task::{Origin, Progress, Status, Task};

/// A task's summary fields, borrowed from the file's text where possible,
/// read from JSON that is known to deserialize as a [`Task`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskIndex<'a>(pub SummaryFields<Cow<'a, str>>);

impl<'a> std::ops::Deref for TaskIndex<'a> {
    type Target = SummaryFields<Cow<'a, str>>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

pub use rudder_model::limits::{FIELD_LEVEL, MAX_LEVEL};

/// A string, borrowed from the input when it holds no escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A string that is only checked (`String`'s acceptance, nothing kept).
struct CheckStr;

impl<'de> Deserialize<'de> for CheckStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = CheckStr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(CheckStr)
            }
        }
        d.deserialize_string(V)
    }
}

/// Any JSON value, checked as `serde_json::Value` reads it, at container
/// level `level` (see [`MAX_LEVEL`]).
#[derive(Clone, Copy)]
struct Opaque {
    level: usize,
}

impl<'de> DeserializeSeed<'de> for Opaque {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Opaque {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        Opaque { level: self.level }.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        while seq.next_element_seed(inner)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Checked before the first key: a number at the deepest level, which
        // serde_json (with `arbitrary_precision`) also hands over as a map,
        // is thus refused here and left to the full parse. Refusing more
        // than the full parse is safe; accepting more is not.
        let inner = self.nested()?;
        let Some(first) = map.next_key::<Str>()? else {
            return Ok(());
        };
        if first.0 == rudder_core::RESERVED_KEY {
            // A number, kept as its text; `serde_json::Value` reads this
            // entry, and only it, as the number.
            let text = map.next_value::<Str>()?;
            return text
                .0
                .parse::<serde_json::Number>()
                .map(drop)
                .map_err(de::Error::custom);
        }
        map.next_value_seed(inner)?;
        while map.next_key::<CheckStr>()?.is_some() {
            map.next_value_seed(inner)?;
        }
        Ok(())
    }
}

impl Opaque {
    /// The seed for the elements of a container at this level.
    fn nested<E: de::Error>(self) -> Result<Opaque, E> {
        if self.level >= MAX_LEVEL {
            return Err(E::custom("nested too deeply for the quick check"));
        }
        Ok(Opaque {
            level: self.level + 1,
        })
    }
}

/// The value of a task's field.
const FIELD: Opaque = Opaque { level: FIELD_LEVEL };

/// The value of an earlier answer's `input_schema` or `input_value`: in
/// the field's list, in its entry.
const ANSWER_VALUE: Opaque = Opaque {
    level: FIELD_LEVEL + 2,
};

/// `Vec<Answered>`'s acceptance, nothing kept: a sequence of entries.
struct CheckAnswered;

impl<'de> Deserialize<'de> for CheckAnswered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CheckAnswered;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CheckAnswered, A::Error> {
                while seq.next_element::<CheckAnswer>()?.is_some() {}
                Ok(CheckAnswered)
            }
        }
        d.deserialize_seq(V)
    }
}

/// [`rudder_model::task::Answered`]'s acceptance, nothing kept: an object
/// with `input_schema` and `input_value` (any JSON, walked at their
/// level), `message` (a string or null) optional; other keys are walked
/// as any JSON, as the derived deserializer ignores them.
struct CheckAnswer;

impl<'de> Deserialize<'de> for CheckAnswer {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CheckAnswer;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an earlier answer")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CheckAnswer, A::Error> {
                let (mut message, mut schema, mut value) = (None, None, None);
                while let Some(key) = map.next_key::<Str>()? {
                    match key.0.as_ref() {
                        "message" => {
                            map.next_value::<Option<CheckStr>>()?;
                            once(&mut message, "message", ())?;
                        }
                        "input_schema" => {
                            map.next_value_seed(ANSWER_VALUE)?;
                            once(&mut schema, "input_schema", ())?;
                        }
                        "input_value" => {
                            map.next_value_seed(ANSWER_VALUE)?;
                            once(&mut value, "input_value", ())?;
                        }
                        _ => map.next_value_seed(ANSWER_VALUE)?,
                    }
                }
                schema.ok_or_else(|| de::Error::missing_field("input_schema"))?;
                value.ok_or_else(|| de::Error::missing_field("input_value"))?;
                Ok(CheckAnswer)
            }
        }
        d.deserialize_map(V)
    }
}

/// `Vec<HistoryEntry>`'s acceptance, nothing kept.
struct CheckHistory;

/// [`rudder_model::task::HistoryEntry`] with the same field types, nothing kept.
#[derive(Deserialize)]
#[allow(dead_code)]
struct CheckEntry {
    status: Status,
    at: Time,
    #[serde(default)]
    note: Option<CheckStr>,
    #[serde(default)]
    actor: Option<CheckStr>,
    /// Any string is a face (`Face` keeps ones it does not know).
    #[serde(default)]
    face: Option<CheckStr>,
    #[serde(default)]
    reason: Option<CheckStr>,
    #[serde(default)]
    fields: Vec<CheckStr>,
}

impl<'de> Deserialize<'de> for CheckHistory {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CheckHistory;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CheckHistory, A::Error> {
                while seq.next_element::<CheckEntry>()?.is_some() {}
                Ok(CheckHistory)
            }
        }
        d.deserialize_seq(V)
    }
}

/// The fields of [`Task`], by their names in the file.
enum Field {
    TaskId,
    Status,
    IdempotencyKey,
    Title,
    Kind,
    UpdatedAt,
    ClaimedBy,
    LeaseExpiresAt,
    LeaseMs,
    TtlMs,
    CreatedAt,
    StatusMessage,
    Progress,
    PollIntervalMs,
    Revision,
    History,
    /// The earlier answers: entries of a message and two opaque values.
    Answered,
    /// The tool and client that created the task: read as `Task` reads it.
    Origin,
    OwnedBy,
    /// input_schema, input_value, result, request, error: any JSON.
    Opaque(&'static str),
    /// A field this version does not know: any JSON, kept by `Task::extra`.
    Unknown,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Field, E> {
                Ok(match v {
                    "task_id" => Field::TaskId,
                    "status" => Field::Status,
                    "idempotency_key" => Field::IdempotencyKey,
                    "title" => Field::Title,
                    "kind" => Field::Kind,
                    "updated_at" => Field::UpdatedAt,
                    "claimed_by" => Field::ClaimedBy,
                    "lease_expires_at" => Field::LeaseExpiresAt,
                    "lease_ms" => Field::LeaseMs,
                    "ttl_ms" => Field::TtlMs,
                    "created_at" => Field::CreatedAt,
                    "status_message" => Field::StatusMessage,
                    "progress" => Field::Progress,
                    "poll_interval_ms" => Field::PollIntervalMs,
                    "revision" => Field::Revision,
                    "history" => Field::History,
                    "answered" => Field::Answered,
                    "origin" => Field::Origin,
                    "owned_by" => Field::OwnedBy,
                    "input_schema" => Field::Opaque("input_schema"),
                    "input_value" => Field::Opaque("input_value"),
                    "result" => Field::Opaque("result"),
                    "request" => Field::Opaque("request"),
                    "error" => Field::Opaque("error"),
                    _ => Field::Unknown,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

/// Set a field once; a second occurrence is refused (as `Task`'s
/// deserializer refuses it).
fn once<T, E: de::Error>(slot: &mut Option<T>, name: &'static str, value: T) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(name));
    }
    *slot = Some(value);
    Ok(())
}

impl<'de> Deserialize<'de> for TaskIndex<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // `Task` flattens its unknown fields, which makes its deserializer
        // read a map (never a sequence): so does this one.
        d.deserialize_map(TaskVisitor)
    }
}

struct TaskVisitor;

impl<'de> Visitor<'de> for TaskVisitor {
    type Value = TaskIndex<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a task object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut task_id = None;
        let mut status = None;
        let mut idempotency_key = None;
        let mut title = None;
        let mut kind = None;
        let mut updated_at = None;
        let mut claimed_by = None;
        let mut lease_expires_at = None;
        let mut ttl_ms = None;
        // Checked only.
        let mut created_at = None;
        let mut status_message = None;
        let mut progress = None;
        let mut poll_interval_ms = None;
        let mut lease_ms = None;
        let mut revision = None;
        let mut history = None;
        let mut answered = None;
        let mut origin = None;
        let mut owned_by = None;
        let mut opaque: [Option<()>; 5] = [None; 5];
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::TaskId => {
                    once(&mut task_id, "task_id", map.next_value::<Str<'de>>()?.0)?;
                }
                Field::Status => once(&mut status, "status", map.next_value::<Status>()?)?,
                Field::IdempotencyKey => {
                    let v = map.next_value::<Option<Str<'de>>>()?;
                    once(&mut idempotency_key, "idempotency_key", v.map(|s| s.0))?;
                }
                Field::Title => {
                    let v = map.next_value::<Option<Str<'de>>>()?;
                    once(&mut title, "title", v.map(|s| s.0))?;
                }
                Field::Kind => {
                    let v = map.next_value::<Option<Str<'de>>>()?;
                    once(&mut kind, "kind", v.map(|s| s.0))?;
                }
                Field::UpdatedAt => {
                    let v = map.next_value::<Option<Time>>()?;
                    once(&mut updated_at, "updated_at", v.map(|t| t.0))?;
                }
                Field::ClaimedBy => {
                    let v = map.next_value::<Option<Str<'de>>>()?;
                    once(&mut claimed_by, "claimed_by", v.map(|s| s.0))?;
                }
                Field::LeaseExpiresAt => {
                    let v = map.next_value::<Option<Time>>()?;
                    once(&mut lease_expires_at, "lease_expires_at", v.map(|t| t.0))?;
                }
                Field::TtlMs => once(&mut ttl_ms, "ttl_ms", map.next_value::<Option<u64>>()?)?,
                Field::CreatedAt => {
                    let v = map.next_value::<Option<Time>>()?;
                    once(&mut created_at, "created_at", v.map(|t| t.0))?;
                }
                Field::StatusMessage => {
                    let v = map.next_value::<Option<CheckStr>>()?;
                    once(&mut status_message, "status_message", v.map(|_| ()))?;
                }
                Field::Progress => {
                    let v = map.next_value::<Option<Progress>>()?;
                    once(&mut progress, "progress", v)?;
                }
                Field::PollIntervalMs => {
                    let v = map.next_value::<Option<u64>>()?;
                    once(&mut poll_interval_ms, "poll_interval_ms", v)?;
                }
                Field::LeaseMs => {
                    let v = map.next_value::<Option<u64>>()?;
                    once(&mut lease_ms, "lease_ms", v)?;
                }
                Field::Revision => once(&mut revision, "revision", map.next_value::<u64>()?)?,
                Field::History => {
                    map.next_value::<CheckHistory>()?;
                    once(&mut history, "history", ())?;
                }
                Field::Answered => {
                    map.next_value::<CheckAnswered>()?;
                    once(&mut answered, "answered", ())?;
                }
                Field::Origin => {
                    let v = map.next_value::<Option<Origin>>()?;
                    once(&mut origin, "origin", v.map(drop))?;
                }
                Field::OwnedBy => {
                    let v = map.next_value::<Option<CheckStr>>()?;
                    once(&mut owned_by, "owned_by", v.map(drop))?;
                }
                Field::Opaque(name) => {
                    map.next_value_seed(FIELD)?;
                    let slot = match name {
                        "input_schema" => 0,
                        "input_value" => 1,
                        "result" => 2,
                        "request" => 3,
                        _ => 4,
                    };
                    once(&mut opaque[slot], name, ())?;
                }
                Field::Unknown => map.next_value_seed(FIELD)?,
            }
        }
        Ok(TaskIndex(SummaryFields {
            task_id: task_id.ok_or_else(|| de::Error::missing_field("task_id"))?,
            status: status.ok_or_else(|| de::Error::missing_field("status"))?,
            idempotency_key: idempotency_key.flatten(),
            title: title.flatten(),
            kind: kind.flatten(),
            updated_at: updated_at.flatten(),
            claimed_by: claimed_by.flatten(),
            lease_expires_at: lease_expires_at.flatten(),
            ttl_ms: ttl_ms.flatten(),
            revision: revision.unwrap_or_default(),
        }))
    }
}

/// Whether any JSON value of `task` nests deeper than [`MAX_LEVEL`] (see
/// there): such a task is left to the full parse of the file.
pub fn too_deep(task: &Task) -> bool {
    fn deeper(v: &serde_json::Value, level: usize) -> bool {
        match v {
            serde_json::Value::Array(items) => {
                level >= MAX_LEVEL || items.iter().any(|v| deeper(v, level + 1))
            }
            serde_json::Value::Object(map) => {
                level >= MAX_LEVEL || map.values().any(|v| deeper(v, level + 1))
            }
            // The file may have spelled a number as an object led by
            // serde_json's number marker, which its parse counts as a level:
            // to be sure, leave a number at the limit to the full parse.
            serde_json::Value::Number(_) => level >= MAX_LEVEL,
            _ => false,
        }
    }
    let fields = [
        &task.input_schema,
        &task.input_value,
        &task.result,
        &task.request,
        &task.error,
    ];
    // An earlier answer's values sit two containers below a field's.
    let earlier = task
        .answered
        .iter()
        .flat_map(|a| [&a.input_schema, &a.input_value]);
    fields
        .into_iter()
        .flatten()
        .chain(task.extra.values())
        .any(|v| deeper(v, FIELD.level))
        || earlier.into_iter().any(|v| deeper(v, ANSWER_VALUE.level))
}
