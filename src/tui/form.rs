//! The input form of a waiting task, generated from its `input_schema`.
//!
//! Strings, integers, numbers, booleans (a toggle) and enums (a choice) are
//! edited natively; any other property (objects, arrays, unions) is a JSON
//! field, and a schema without `properties` is one JSON field for the whole
//! value. Whatever the fields, the value is validated against the whole schema
//! with the `jsonschema` crate before it is sent, so there is no dead end.

use serde_json::{Map, Value};
use tui_input::Input;

use crate::schema::{self, FieldType, Violation};
use crate::task::Task;
use crate::text::sanitize;

/// How a field is edited.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    /// Typed text, parsed by type (string, integer or number).
    Text(FieldType),
    /// A boolean toggled with Space; `None` is "not given" (optional fields only).
    Toggle(Option<bool>),
    /// One of the `enum` values, chosen with ←/→ or Space; `None` is "not given".
    Choice {
        /// The allowed values.
        options: Vec<Value>,
        /// The chosen one, `None` when not given.
        chosen: Option<usize>,
    },
    /// Raw JSON, validated against the whole schema.
    Json,
}

/// One field of the form.
#[derive(Debug, Clone)]
pub struct Field {
    /// The property name; empty for the whole value.
    pub name: String,
    /// How it is edited.
    pub kind: FieldKind,
    /// Whether the schema requires it.
    pub required: bool,
    /// The property's description (sanitized), shown as a hint.
    pub hint: Option<String>,
    /// The text of text and JSON fields.
    pub input: Input,
    /// What is wrong with the value, shown under the field.
    pub error: Option<String>,
}

impl Field {
    /// A short name of the kind, shown next to the label.
    pub fn type_label(&self) -> &'static str {
        match &self.kind {
            FieldKind::Text(FieldType::String) => "text",
            FieldKind::Text(FieldType::Integer) => "integer",
            FieldKind::Text(FieldType::Number) => "number",
            FieldKind::Text(_) | FieldKind::Json => "JSON",
            FieldKind::Toggle(_) => "yes/no",
            FieldKind::Choice { .. } => "choice",
        }
    }

    /// Whether this field takes typed text.
    pub fn is_text(&self) -> bool {
        matches!(self.kind, FieldKind::Text(_) | FieldKind::Json)
    }

    /// The label shown for the field.
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            "input".into()
        } else {
            escape_unsafe(&self.name)
        }
    }

    /// Toggle a boolean or move a choice by `step` (±1).
    pub fn cycle(&mut self, step: isize) {
        let required = self.required;
        match &mut self.kind {
            FieldKind::Toggle(v) => {
                *v = match (*v, required) {
                    (Some(true), true) => Some(false),
                    (_, true) => Some(true),
                    (None, false) => Some(true),
                    (Some(true), false) => Some(false),
                    (Some(false), false) => None,
                };
            }
            FieldKind::Choice { options, chosen } => {
                // Optional choices have an extra "not given" slot before the first.
                let slots = options.len() as isize + isize::from(!required);
                if slots == 0 {
                    return;
                }
                let cur = match (*chosen, required) {
                    (Some(i), true) => i as isize,
                    (Some(i), false) => i as isize + 1,
                    (None, _) => 0,
                };
                let next = (cur + step).rem_euclid(slots);
                *chosen = if required {
                    Some(next as usize)
                } else if next == 0 {
                    None
                } else {
                    Some(next as usize - 1)
                };
            }
            _ => {}
        }
    }

    /// The value entered, `Ok(None)` when left empty.
    fn value(&self) -> Result<Option<Value>, String> {
        match &self.kind {
            FieldKind::Toggle(v) => Ok(v.map(Value::Bool)),
            FieldKind::Choice { options, chosen } => {
                Ok(chosen.and_then(|i| options.get(i)).cloned())
            }
            FieldKind::Text(ty) => {
                let raw = self.input.value();
                if raw.is_empty() {
                    return Ok(None);
                }
                schema::parse_field(*ty, &self.label(), raw).map(Some)
            }
            FieldKind::Json => {
                let raw = self.input.value().trim();
                if raw.is_empty() {
                    return Ok(None);
                }
                crate::json::parse(raw).map(Some).map_err(|e| e.to_string())
            }
        }
    }
}

/// The input form for one task.
#[derive(Debug, Clone)]
pub struct Form {
    /// The task the input is for.
    pub task_id: String,
    /// The task's label and message when the form was opened (sanitized).
    pub label: String,
    /// The task's status message when the form was opened.
    pub message: Option<String>,
    /// The revision the form was opened at: the submit carries it.
    pub revision: u64,
    /// The task's input schema, the whole value is validated against.
    pub schema: Value,
    /// One per property (or one JSON field for the whole value).
    pub fields: Vec<Field>,
    /// The focused field.
    pub focus: usize,
    /// Problems not tied to one field.
    pub errors: Vec<String>,
    /// Set when the task changed after the form was opened.
    pub moved_on: Option<String>,
    /// A submit is in flight.
    pub submitting: bool,
}

impl Form {
    /// Build the form for a waiting task from its schema.
    pub fn for_task(task: &Task) -> Form {
        let schema = task
            .input_schema
            .clone()
            .unwrap_or_else(|| Value::Object(Map::new()));
        let required = required(&schema);
        let fields = match schema.get("properties").and_then(Value::as_object) {
            Some(props) if !props.is_empty() => props
                .iter()
                .map(|(name, prop)| field_for(name, prop, required.contains(&name.as_str())))
                .collect(),
            _ => vec![whole_value_field(&schema)],
        };
        Form {
            task_id: task.task_id.clone(),
            label: sanitize(task.label().unwrap_or(task.short_id())).into_owned(),
            message: task
                .status_message
                .as_deref()
                .map(|m| sanitize(m).into_owned()),
            revision: task.revision,
            schema,
            fields,
            focus: 0,
            errors: Vec::new(),
            moved_on: None,
            submitting: false,
        }
    }

    /// Whether the form is one JSON field for the whole value (a schema
    /// without `properties`).
    fn whole(&self) -> bool {
        matches!(self.fields.as_slice(), [only] if only.name.is_empty())
    }

    /// The focused field.
    pub fn focused(&mut self) -> Option<&mut Field> {
        self.fields.get_mut(self.focus)
    }

    /// Move the focus by `step`, wrapping around.
    pub fn move_focus(&mut self, step: isize) {
        let n = self.fields.len() as isize;
        if n > 0 {
            self.focus = (self.focus as isize + step).rem_euclid(n) as usize;
        }
    }

    /// Whether the focus is on the last field.
    pub fn on_last(&self) -> bool {
        self.focus + 1 >= self.fields.len()
    }

    /// Build the value and validate it against the schema; errors are put at
    /// their fields. Returns the value when it is valid.
    pub fn validate(&mut self) -> Option<Value> {
        self.errors.clear();
        for f in &mut self.fields {
            f.error = None;
        }
        let whole = self.whole();
        let mut obj = Map::new();
        let mut whole_value = None;
        let mut parse_failed = false;
        for f in &mut self.fields {
            match f.value() {
                Ok(Some(v)) if whole => whole_value = Some(v),
                Ok(Some(v)) => {
                    obj.insert(f.name.clone(), v);
                }
                Ok(None) => {}
                Err(e) => {
                    f.error = Some(e);
                    parse_failed = true;
                }
            }
        }
        let value = if whole {
            whole_value.unwrap_or(Value::Null)
        } else {
            Value::Object(obj)
        };
        // Validate even when a field did not parse, so every problem shows at
        // once; a field that did not parse keeps its own message.
        let result = schema::validate(&self.schema, &value);
        if let Err(violations) = &result {
            let keep: Vec<Option<String>> = self.fields.iter().map(|f| f.error.clone()).collect();
            self.show_violations(violations);
            for (f, kept) in self.fields.iter_mut().zip(keep) {
                if kept.is_some() {
                    f.error = kept;
                }
            }
        }
        if let Some(i) = self.fields.iter().position(|f| f.error.is_some()) {
            self.focus = i;
        }
        match result {
            Ok(()) if !parse_failed => Some(value),
            _ => None,
        }
    }

    /// Put each violation at the field its pointer names, or at the form.
    pub fn show_violations(&mut self, violations: &[Violation]) {
        let whole = self.whole();
        for v in violations {
            let message = sanitize(&v.message).into_owned();
            let target = if whole {
                Some(0)
            } else {
                let first = v.pointer.trim_start_matches('/').split('/').next();
                let name = first.map(|t| t.replace("~1", "/").replace("~0", "~"));
                name.and_then(|n| self.fields.iter().position(|f| f.name == n))
            };
            match target {
                Some(i) => {
                    let f = &mut self.fields[i];
                    // Nested pointers say where inside a JSON field.
                    let rest = v
                        .pointer
                        .trim_start_matches('/')
                        .split_once('/')
                        .map(|(_, r)| format!("/{r}: "))
                        .filter(|_| !whole)
                        .unwrap_or_default();
                    let text = format!("{rest}{message}");
                    f.error = Some(match f.error.take() {
                        Some(e) => format!("{e}; {text}"),
                        None => text,
                    });
                }
                None => self.errors.push(message),
            }
        }
        // Put the focus on the first field with a problem.
        if let Some(i) = self.fields.iter().position(|f| f.error.is_some()) {
            self.focus = i;
        }
    }
}

/// The names an object schema lists as `required`.
pub(crate) fn required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn field_for(name: &str, prop: &Value, required: bool) -> Field {
    let hint = prop
        .get("description")
        .or_else(|| prop.get("title"))
        .and_then(Value::as_str)
        .map(|d| sanitize(d).into_owned());
    let default = prop.get("default");
    let mut input = Input::default();
    let kind = if let Some(options) = prop.get("enum").and_then(Value::as_array) {
        let chosen = default
            .and_then(|d| options.iter().position(|o| o == d))
            .or(if required && !options.is_empty() {
                Some(0)
            } else {
                None
            });
        FieldKind::Choice {
            options: options.clone(),
            chosen,
        }
    } else {
        match schema::property_type(prop) {
            FieldType::Boolean => {
                let d = default.and_then(Value::as_bool);
                FieldKind::Toggle(if required {
                    Some(d.unwrap_or(false))
                } else {
                    d
                })
            }
            FieldType::Json => {
                if let Some(d) = default {
                    input = Input::new(json_text(d));
                }
                FieldKind::Json
            }
            ty => {
                match default {
                    // What is shown is what is submitted: control characters
                    // and escape sequences are dropped here, not only when
                    // drawn.
                    Some(Value::String(s)) => input = Input::new(sanitize(s).into_owned()),
                    Some(d @ Value::Number(_)) => input = Input::new(d.to_string()),
                    _ => {}
                }
                FieldKind::Text(ty)
            }
        }
    };
    Field {
        name: name.to_string(),
        kind,
        required,
        hint,
        input,
        error: None,
    }
}

fn whole_value_field(schema: &Value) -> Field {
    let default = schema
        .get("default")
        .map(json_text)
        .unwrap_or_else(|| "{}".into());
    Field {
        name: String::new(),
        kind: FieldKind::Json,
        required: true,
        hint: Some(
            schema
                .get("description")
                .and_then(Value::as_str)
                .map(|d| sanitize(d).into_owned())
                .unwrap_or_else(|| "the whole input as JSON".into()),
        ),
        input: Input::new(default),
        error: None,
    }
}

/// `value` as JSON text that is safe to draw and edit: every control or
/// bidi character inside a string is written as a `\uXXXX` escape. That is
/// the same JSON value, so the text shown is exactly what is submitted.
pub fn json_text(value: &Value) -> String {
    escape_unsafe(&value.to_string())
}

/// Write every character [`sanitize`] would drop as a `\uXXXX` escape, so it
/// is visible and inert (all such characters are in the BMP).
fn escape_unsafe(text: &str) -> String {
    if sanitize(text) == text {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut buf = [0u8; 4];
    for c in text.chars() {
        let one: &str = c.encode_utf8(&mut buf);
        if sanitize(one) == one {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        }
    }
    out
}

/// How a choice option is shown. The option itself is what is submitted
/// (it has to match the schema's `enum` exactly), so characters that cannot
/// be drawn are shown as `\uXXXX` escapes instead of being hidden: two
/// options that differ only in such characters look different.
pub fn option_label(v: &Value) -> String {
    match v {
        Value::String(s) => escape_unsafe(s),
        other => json_text(other),
    }
}
