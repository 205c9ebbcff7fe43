//! The input form of a waiting task, generated from its `input_schema` by
//! [`schema::form_spec`].
//!
//! Text, integers and numbers are typed; booleans are a toggle and choices
//! are picked with Space or ←/→ (a required one starts unchosen: nothing is
//! answered that nobody picked); a multi-select toggles each option with
//! Space; a list of strings or numbers is typed comma-separated (or as a
//! JSON array); anything else is a JSON field. Ctrl-R switches to one JSON
//! field for the whole input and back. Whatever the fields, the value is
//! validated against the whole schema with the `jsonschema` crate (formats
//! included) before it is sent, so there is no dead end.

use serde_json::{Map, Value};
use tui_input::Input;

use rudder_model::schema::{self, FieldSpec, FormSpec, Kind, Scalar, Violation};
use rudder_model::task::Task;
use rudder_model::text::sanitize;

/// How a field is edited, and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    /// Typed text, parsed as its scalar type.
    Text(Scalar),
    /// A boolean toggled with Space; `None` is "not chosen".
    Toggle(Option<bool>),
    /// One of the options, chosen with ←/→ or Space; `None` is "not chosen".
    Choice {
        /// What each option sends.
        options: Vec<Value>,
        /// What each option shows (its title, else its value; drawable).
        labels: Vec<String>,
        /// The chosen one.
        chosen: Option<usize>,
    },
    /// Any of the options: ←/→ move, Space toggles.
    Multi {
        /// What each option sends.
        options: Vec<Value>,
        /// What each option shows.
        labels: Vec<String>,
        /// Which options are chosen.
        chosen: Vec<bool>,
        /// The option ←/→ are on.
        cursor: usize,
    },
    /// Values of a scalar type, typed comma-separated or as a JSON array.
    List(Scalar),
    /// Raw JSON.
    Json,
}

/// One field of the form.
#[derive(Debug, Clone)]
pub struct Field {
    /// The property name; empty for the whole value.
    pub name: String,
    /// What the schema says about the field.
    pub spec: FieldSpec,
    /// How it is edited.
    pub kind: FieldKind,
    /// Whether the value must be given.
    pub required: bool,
    /// The property's whole description (sanitized), shown as a hint.
    pub hint: Option<String>,
    /// The text of text, list and JSON fields.
    pub input: Input,
    /// What is wrong with the value, shown under the field.
    pub error: Option<String>,
    /// The field holds its schema default, untouched.
    pub is_default: bool,
}

impl Field {
    fn new(spec: FieldSpec) -> Field {
        let kind = match &spec.kind {
            Kind::Scalar { of } => FieldKind::Text(*of),
            Kind::Boolean => FieldKind::Toggle(None),
            Kind::Choice { options } => FieldKind::Choice {
                labels: options.iter().map(choice_label).collect(),
                options: options.iter().map(|c| c.value.clone()).collect(),
                chosen: None,
            },
            Kind::Multi { options, .. } => FieldKind::Multi {
                labels: options.iter().map(choice_label).collect(),
                chosen: vec![false; options.len()],
                options: options.iter().map(|c| c.value.clone()).collect(),
                cursor: 0,
            },
            Kind::List { of, .. } => FieldKind::List(*of),
            Kind::Json => FieldKind::Json,
        };
        let mut f = Field {
            name: spec.name().to_string(),
            required: spec.required,
            // Capped like every text from the store (2000 characters).
            hint: spec.hint.as_deref().map(crate::shown::shown),
            kind,
            input: Input::default(),
            error: None,
            is_default: false,
            spec,
        };
        if let Some(d) = f.spec.default.clone() {
            // A default that does not fit the field is not filled in.
            f.is_default = f.set(Some(&d)).is_ok();
            if !f.is_default {
                f.set(None).ok();
            }
        }
        f
    }

    /// A short name of the kind, shown next to the label.
    pub fn type_label(&self) -> &'static str {
        match &self.kind {
            FieldKind::Text(Scalar::Text) => "text",
            FieldKind::Text(Scalar::Integer) => "integer",
            FieldKind::Text(Scalar::Number) => "number",
            FieldKind::Json => "JSON",
            FieldKind::Toggle(_) => "yes/no",
            FieldKind::Choice { .. } => "choice",
            FieldKind::Multi { .. } => "choose any",
            FieldKind::List(Scalar::Text) => "list of text",
            FieldKind::List(Scalar::Integer) => "list of integers",
            FieldKind::List(Scalar::Number) => "list of numbers",
        }
    }

    /// Whether this field takes typed text.
    pub fn is_text(&self) -> bool {
        matches!(
            self.kind,
            FieldKind::Text(_) | FieldKind::List(_) | FieldKind::Json
        )
    }

    /// The label shown for the field.
    pub fn label(&self) -> String {
        if self.spec.path.is_empty() {
            "input".into()
        } else {
            escape_unsafe(&self.spec.label)
        }
    }

    /// Whether a required choice or toggle is still unchosen.
    pub fn unchosen(&self) -> bool {
        self.required
            && match &self.kind {
                FieldKind::Toggle(v) => v.is_none(),
                FieldKind::Choice { chosen, .. } => chosen.is_none(),
                _ => false,
            }
    }

    /// Toggle a boolean or move a choice by `step` (±1); on a multi-select,
    /// move between its options.
    pub fn cycle(&mut self, step: isize) {
        let required = self.required;
        self.is_default = false;
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
            FieldKind::Choice {
                options, chosen, ..
            } => {
                // Optional choices have an extra "not given" slot before the
                // first; a required one starts there too but cannot go back.
                let n = options.len() as isize;
                if n == 0 {
                    return;
                }
                *chosen = match (*chosen, required) {
                    (None, true) if step > 0 => Some(0),
                    (None, true) => Some(n as usize - 1),
                    (Some(i), true) => Some((i as isize + step).rem_euclid(n) as usize),
                    (cur, false) => {
                        let at = cur.map_or(0, |i| i as isize + 1);
                        let next = (at + step).rem_euclid(n + 1);
                        (next > 0).then(|| next as usize - 1)
                    }
                };
            }
            FieldKind::Multi {
                options, cursor, ..
            } => {
                let n = options.len() as isize;
                if n > 0 {
                    *cursor = (*cursor as isize + step).rem_euclid(n) as usize;
                }
            }
            _ => {}
        }
    }

    /// Space: toggle, the next choice, or the option under a multi-select's
    /// cursor.
    pub fn space(&mut self) {
        if let FieldKind::Multi { chosen, cursor, .. } = &mut self.kind {
            self.is_default = false;
            if let Some(c) = chosen.get_mut(*cursor) {
                *c = !*c;
            }
        } else {
            self.cycle(1);
        }
    }

    /// The value entered, `Ok(None)` when not given.
    pub fn value(&self) -> Result<Option<Value>, String> {
        let empty = || {
            Ok(if self.required && self.spec.nullable {
                Some(Value::Null)
            } else {
                None
            })
        };
        match &self.kind {
            FieldKind::Toggle(v) => Ok(v.map(Value::Bool)),
            FieldKind::Choice {
                options, chosen, ..
            } => Ok(chosen.and_then(|i| options.get(i)).cloned()),
            FieldKind::Multi {
                options, chosen, ..
            } => {
                let picked: Vec<Value> = options
                    .iter()
                    .zip(chosen)
                    .filter(|(_, c)| **c)
                    .map(|(o, _)| o.clone())
                    .collect();
                Ok((self.required || !picked.is_empty()).then_some(Value::Array(picked)))
            }
            FieldKind::Text(of) => {
                let raw = self.input.value();
                if raw.is_empty() {
                    return empty();
                }
                schema::parse_scalar(*of, raw)
                    .map(Some)
                    // The parser quotes what was typed: not a secret.
                    .map_err(|e| match self.spec.secret {
                        true => schema::secret::unquoted(&e, raw),
                        false => e,
                    })
            }
            FieldKind::List(of) => {
                let raw = self.input.value().trim();
                if raw.is_empty() {
                    return Ok(self.required.then(|| Value::Array(Vec::new())));
                }
                if raw.starts_with('[') {
                    return match rudder_model::json::parse(raw) {
                        Ok(v @ Value::Array(_)) => Ok(Some(v)),
                        Ok(_) => Err("expected a JSON array".into()),
                        Err(e) => Err(format!("not a valid JSON array: {e}")),
                    };
                }
                raw.split([',', '\n'])
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| schema::parse_scalar(*of, s))
                    .collect::<Result<Vec<_>, _>>()
                    .map(|v| Some(Value::Array(v)))
            }
            FieldKind::Json => {
                let raw = self.input.value().trim();
                if raw.is_empty() {
                    return empty();
                }
                rudder_model::json::parse(raw)
                    .map(Some)
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// Show `value` in the field (`None`: clear it). `Err` when the field
    /// cannot show it (the raw JSON mode can).
    pub fn set(&mut self, value: Option<&Value>) -> Result<(), String> {
        self.is_default = false;
        let cannot = || "the form cannot show this value".to_string();
        match (&mut self.kind, value) {
            (FieldKind::Toggle(v), None) => *v = None,
            (FieldKind::Toggle(v), Some(Value::Bool(b))) => *v = Some(*b),
            (FieldKind::Choice { chosen, .. }, None) => *chosen = None,
            (
                FieldKind::Choice {
                    options, chosen, ..
                },
                Some(x),
            ) => {
                *chosen = Some(options.iter().position(|o| o == x).ok_or_else(cannot)?);
            }
            (FieldKind::Multi { chosen, .. }, None) => chosen.iter_mut().for_each(|c| *c = false),
            (
                FieldKind::Multi {
                    options, chosen, ..
                },
                Some(Value::Array(items)),
            ) => {
                let mut next = vec![false; options.len()];
                for i in items {
                    let at = options.iter().position(|o| o == i).ok_or_else(cannot)?;
                    if next[at] {
                        return Err(cannot());
                    }
                    next[at] = true;
                }
                // Sent in the options' order: only a value in that order
                // round-trips.
                let again: Vec<&Value> = options
                    .iter()
                    .zip(&next)
                    .filter(|(_, c)| **c)
                    .map(|(o, _)| o)
                    .collect();
                if !again.iter().copied().eq(items.iter()) {
                    return Err(cannot());
                }
                *chosen = next;
            }
            (FieldKind::Text(_) | FieldKind::List(_) | FieldKind::Json, None) => {
                self.input = Input::default();
            }
            (FieldKind::Text(Scalar::Text), Some(Value::String(s))) => {
                // What is shown is what is submitted: control characters
                // and escape sequences are dropped here, not only when drawn.
                if s.is_empty() {
                    return Err(cannot());
                }
                self.input = Input::new(sanitize(s).into_owned());
            }
            (FieldKind::Text(Scalar::Integer | Scalar::Number), Some(n @ Value::Number(_))) => {
                self.input = Input::new(n.to_string());
            }
            (FieldKind::Text(_), Some(Value::Null)) if self.spec.nullable && self.required => {
                self.input = Input::default();
            }
            (FieldKind::List(of), Some(Value::Array(items))) => {
                let plain = items.iter().all(|i| match (*of, i) {
                    (Scalar::Text, Value::String(s)) => {
                        !s.is_empty()
                            && s.trim() == s
                            && !s.contains([',', '\n', '['])
                            && sanitize(s) == s.as_str()
                    }
                    (Scalar::Integer | Scalar::Number, Value::Number(_)) => true,
                    _ => false,
                });
                let text = if plain && !items.is_empty() {
                    items
                        .iter()
                        .map(schema::form_spec::value_label)
                        .collect::<Vec<_>>()
                        .join(", ")
                } else {
                    json_text(&Value::Array(items.clone()))
                };
                self.input = Input::new(text);
            }
            (FieldKind::Json, Some(v)) => {
                if v.is_null() && !self.required {
                    return Err(cannot());
                }
                self.input = Input::new(json_text(v));
            }
            _ => return Err(cannot()),
        }
        Ok(())
    }
}

/// The label of a choice option: its title (sanitized), or its value with
/// characters that cannot be drawn as escapes.
fn choice_label(c: &schema::Choice) -> String {
    if c.label == schema::form_spec::value_label(&c.value) {
        option_label(&c.value)
    } else {
        sanitize(&c.label).into_owned()
    }
}

/// The input form for one task.
#[derive(Debug, Clone)]
pub struct Form {
    /// The task the input is for.
    pub task_id: String,
    /// The task's label and message when the form was opened (sanitized).
    pub label: String,
    /// The task's status message (its question) when the form was opened,
    /// sanitized line by line (its line breaks are kept).
    pub message: Option<String>,
    /// The revision the form was opened at: the submit carries it.
    pub revision: u64,
    /// The task's input schema, the whole value is validated against.
    pub schema: Value,
    /// What the schema asks for.
    pub spec: FormSpec,
    /// One per property (or one JSON field for the whole value).
    pub fields: Vec<Field>,
    /// The focused field.
    pub focus: usize,
    /// The raw JSON mode: one field for the whole input (Ctrl-R).
    pub raw: Option<Field>,
    /// Problems not tied to one field.
    pub errors: Vec<String>,
    /// Said about the form as a whole (sanitized).
    pub notes: Vec<String>,
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
        let spec = schema::form_spec(&schema);
        let mut fields: Vec<Field> = spec.fields.iter().cloned().map(Field::new).collect();
        if spec.whole()
            && let Some(f) = fields.first_mut()
            && f.input.value().is_empty()
        {
            f.input = Input::new("{}".into());
        }
        Form {
            task_id: task.task_id.clone(),
            label: sanitize(task.label().unwrap_or(task.short_id())).into_owned(),
            message: task.status_message.as_deref().map(|m| {
                // Line breaks are kept; a question past the first few
                // thousand characters says that it goes on, and where.
                let head = crate::shown::head(m);
                let mut text = head
                    .split('\n')
                    .map(|l| sanitize(l).trim_end().to_string())
                    .collect::<Vec<_>>()
                    .join("\n");
                if head.len() < m.len() {
                    let rest = m[head.len()..].chars().count();
                    text.push_str(&format!(
                        "… ({rest} more characters: `rudder get ID` shows them all)"
                    ));
                }
                text
            }),
            revision: task.revision,
            notes: spec
                .notes
                .iter()
                .map(|n| sanitize(n).into_owned())
                .collect(),
            schema,
            spec,
            fields,
            focus: 0,
            raw: None,
            errors: Vec::new(),
            moved_on: None,
            submitting: false,
        }
    }

    /// Whether the form is one JSON field for the whole value.
    fn whole(&self) -> bool {
        self.spec.whole()
    }

    /// The focused field (the raw one in raw JSON mode).
    pub fn focused(&mut self) -> Option<&mut Field> {
        match &mut self.raw {
            Some(raw) => Some(raw),
            None => self.fields.get_mut(self.focus),
        }
    }

    /// Move the focus by `step`, wrapping around. Leaving a field that
    /// holds something checks it, so a wrong format shows at once.
    pub fn move_focus(&mut self, step: isize) {
        let n = self.fields.len() as isize;
        if n > 0 && self.raw.is_none() {
            let left = self.focus;
            self.focus = (self.focus as isize + step).rem_euclid(n) as usize;
            self.check_field(left);
        }
    }

    /// Whether the focus is on the last field.
    pub fn on_last(&self) -> bool {
        self.raw.is_some() || self.focus + 1 >= self.fields.len()
    }

    /// Switch to the raw JSON mode, filled with what the fields hold, or
    /// back to the fields, filled from the JSON. `Err` says why not (the
    /// JSON does not parse, or holds what the fields cannot show).
    pub fn toggle_raw(&mut self) -> Result<(), String> {
        if self.whole() {
            return Err("this form is already one JSON field".into());
        }
        match self.raw.take() {
            None => {
                let value = self.build(false).0;
                let mut raw = Field::new(schema::form_spec(&Value::Bool(true)).fields.remove(0));
                raw.hint = Some("the whole input as JSON (Ctrl-R: back to the fields)".into());
                raw.input = Input::new(json_text(&value));
                // The JSON holds every field's value: masked if any is secret.
                raw.spec.secret = self.fields.iter().any(|f| f.spec.secret);
                self.raw = Some(raw);
                Ok(())
            }
            Some(mut raw) => {
                let parsed = raw.value();
                let result = match parsed {
                    Ok(Some(v)) => self.fill(&v),
                    Ok(None) => self.fill(&Value::Object(Map::new())),
                    Err(e) => Err(e),
                };
                if let Err(e) = &result {
                    raw.error = Some(format!("{e}; staying in JSON mode"));
                    self.raw = Some(raw);
                }
                result
            }
        }
    }

    /// Show `value` in the fields. `Err` when a part of it has no field or
    /// the field cannot show it; the fields are then left as they were.
    pub fn fill(&mut self, value: &Value) -> Result<(), String> {
        let Some(obj) = value.as_object() else {
            return Err("the input is not a JSON object".into());
        };
        let mut next = self.fields.clone();
        for f in &mut next {
            let at = if f.spec.pointer.is_empty() {
                Some(value)
            } else {
                value.pointer(&f.spec.pointer)
            };
            f.set(at).map_err(|e| format!("{}: {e}", f.label()))?;
            f.error = None;
        }
        // Nothing may be left over: every part must be one of the fields
        // (or an object the form makes anyway).
        let mut probe = Form {
            fields: next.clone(),
            ..self.clone()
        };
        probe.raw = None;
        let (again, _) = probe.build(false);
        if !same(&again, &Value::Object(obj.clone())) {
            return Err("the JSON holds values the fields cannot show".into());
        }
        self.fields = next;
        Ok(())
    }

    /// The value the fields (or the raw field) hold, and whether every
    /// field parsed. With `mark`, fields that do not parse get their error.
    fn build(&mut self, mark: bool) -> (Value, bool) {
        if let Some(raw) = &mut self.raw {
            return match raw.value() {
                Ok(v) => (v.unwrap_or(Value::Null), true),
                Err(e) => {
                    if mark {
                        raw.error = Some(e);
                    }
                    (Value::Null, false)
                }
            };
        }
        let whole = self.whole();
        let mut obj = Value::Object(Map::new());
        for path in &self.spec.required_objects {
            if let Some(slot) = slot(&mut obj, path)
                && slot.is_null()
            {
                *slot = Value::Object(Map::new());
            }
        }
        let mut ok = true;
        let mut whole_value = None;
        for f in &mut self.fields {
            match f.value() {
                Ok(Some(v)) if whole => whole_value = Some(v),
                Ok(Some(v)) => {
                    if let Some(slot) = slot(&mut obj, &f.spec.path) {
                        *slot = v;
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    if mark {
                        f.error = Some(e);
                    }
                    ok = false;
                }
            }
            if f.unchosen() {
                if mark {
                    f.error = Some("not chosen yet: Space or ←/→ chooses".into());
                }
                ok = false;
            }
        }
        if whole {
            (whole_value.unwrap_or(Value::Null), ok)
        } else {
            (obj, ok)
        }
    }

    /// The value the form would send now, whether or not it is valid.
    pub fn current_value(&mut self) -> Value {
        self.build(false).0
    }

    /// Build the value and validate it against the schema; errors are put at
    /// their fields. Returns the value when it is valid.
    pub fn validate(&mut self) -> Option<Value> {
        self.errors.clear();
        for f in &mut self.fields {
            f.error = None;
        }
        if let Some(raw) = &mut self.raw {
            raw.error = None;
        }
        let (value, parsed) = self.build(true);
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
            Ok(()) if parsed => Some(value),
            _ => None,
        }
    }

    /// Check field `i` alone (when the focus leaves it): show what is wrong
    /// with its value, if it holds one; other fields are left as they are.
    fn check_field(&mut self, i: usize) {
        let Some(f) = self.fields.get(i) else {
            return;
        };
        match f.value() {
            Ok(Some(_)) if !f.is_default => {}
            Ok(_) => return,
            Err(e) => {
                self.fields[i].error = Some(e);
                return;
            }
        }
        let pointer = f.spec.pointer.clone();
        let (value, _) = self.build(false);
        let mut text = None;
        if let Err(violations) = schema::validate(&self.schema, &value) {
            for v in violations {
                if self.target(&v.pointer) == Some(i) && !v.missing {
                    let rest = v.pointer.strip_prefix(&pointer).unwrap_or("");
                    let m = sanitize(&v.message).into_owned();
                    let m = if rest.is_empty() {
                        m
                    } else {
                        format!("{rest}: {m}")
                    };
                    text = Some(match text {
                        Some(t) => format!("{t}; {m}"),
                        None => m,
                    });
                }
            }
        }
        self.fields[i].error = text;
    }

    /// The field a violation at `pointer` belongs to: the one whose pointer
    /// is the longest prefix of it.
    fn target(&self, pointer: &str) -> Option<usize> {
        self.fields
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                let p = f.spec.pointer.as_str();
                pointer == p || (pointer.starts_with(p) && pointer[p.len()..].starts_with('/'))
            })
            .max_by_key(|(_, f)| f.spec.pointer.len())
            .map(|(i, _)| i)
    }

    /// Put each violation at the field its pointer names, or at the form.
    pub fn show_violations(&mut self, violations: &[Violation]) {
        for v in violations {
            let message = sanitize(&v.message).into_owned();
            if let Some(raw) = &mut self.raw {
                let at = if v.pointer.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", sanitize(&v.pointer))
                };
                let text = format!("{at}{message}");
                raw.error = Some(match raw.error.take() {
                    Some(e) => format!("{e}; {text}"),
                    None => text,
                });
                continue;
            }
            match self.target(&v.pointer) {
                Some(i) => {
                    let f = &mut self.fields[i];
                    // Nested pointers say where inside a JSON or list field.
                    let rest = v
                        .pointer
                        .strip_prefix(f.spec.pointer.as_str())
                        .unwrap_or("");
                    let text = if rest.is_empty() || f.spec.pointer.is_empty() {
                        message
                    } else {
                        format!("{}: {message}", sanitize(rest))
                    };
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

/// Whether two values are the same JSON, numbers compared by value (`3`
/// and `3.0` are the same to JSON Schema).
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The place for the value at `path` inside `obj`, making objects on the
/// way; `None` when a non-object is in the way.
fn slot<'a>(obj: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut cur = obj;
    for seg in path {
        if cur.is_null() {
            *cur = Value::Object(Map::new());
        }
        cur = cur
            .as_object_mut()?
            .entry(seg.clone())
            .or_insert(Value::Null);
    }
    Some(cur)
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
