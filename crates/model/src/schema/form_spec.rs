//! From a JSON Schema to a form: which fields to ask for and how.
//!
//! [`super::secret::form_spec`] is pure and bounded: it never fetches anything, follows at
//! most [`MAX_REF_HOPS`] local `$ref`s per property (a cycle ends as a JSON
//! field), inlines nested objects at most [`MAX_INLINE_DEPTH`] levels deep and
//! gives up on forms of more than [`MAX_FIELDS`] fields (one JSON field for
//! the whole input instead). The TUI form, `--set` typing and the MCP check
//! all read the schema through it.

use serde::Serialize;
use serde_json::Value;

/// The most fields a form gets; a schema with more is one JSON field.
pub const MAX_FIELDS: usize = 200;
/// How deep nested objects are inlined (1: `window › minutes`; 2:
/// `a › b › c`); deeper objects are JSON fields.
pub const MAX_INLINE_DEPTH: usize = 2;
/// The most `$ref`s followed one after the other.
pub const MAX_REF_HOPS: usize = 16;
/// The most characters of a sub-schema shown with a JSON field.
pub const MAX_SCHEMA_TEXT: usize = 400;
/// The most options of a choice (more: a JSON field).
pub const MAX_OPTIONS: usize = 1_000;

/// The type of a typed scalar (and of a list's items).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scalar {
    Text,
    Integer,
    Number,
}

/// One option of a choice: what is sent, and what is shown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    pub value: Value,
    /// The `title` of a `{const, title}` option, else the value as text.
    pub label: String,
}

/// How a field is entered.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Kind {
    /// Typed text, sent as a string, an integer or a number.
    Scalar { of: Scalar },
    /// Yes or no.
    Boolean,
    /// One of the options (`enum`, `const`, `oneOf`/`anyOf` of consts).
    Choice { options: Vec<Choice> },
    /// Any number of the options (an array of an enum), Space toggles.
    Multi {
        options: Vec<Choice>,
        min: Option<u64>,
        max: Option<u64>,
    },
    /// An array of scalars, typed comma-separated (or as a JSON array).
    List {
        of: Scalar,
        min: Option<u64>,
        max: Option<u64>,
    },
    /// Any JSON value.
    Json,
}

/// One field of a form.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldSpec {
    /// Property names from the input's root; empty for the whole input.
    pub path: Vec<String>,
    /// The JSON pointer of the value (`/window/minutes`, `""` for the whole).
    pub pointer: String,
    /// `title`, else the name; nested fields are labelled by path
    /// (`window › minutes`).
    pub label: String,
    /// The whole `description`.
    pub hint: Option<String>,
    pub kind: Kind,
    /// The value must be given (required here and in every parent).
    pub required: bool,
    /// `null` is allowed too (`["string", "null"]`).
    pub nullable: bool,
    pub default: Option<Value>,
    /// Constraints to show: lengths, range, pattern, format, item counts.
    pub constraints: Vec<String>,
    /// The `format` of a string, if any.
    pub format: Option<String>,
    /// From the first of `examples`.
    pub placeholder: Option<String>,
    /// Why the field is what it is (a remote `$ref`, a cycle, a sub-schema).
    pub note: Option<String>,
    /// The value is, holds or lies inside a secret (`writeOnly` or
    /// `format: password`, see [`super::secret`]): typed as a password,
    /// shown masked.
    pub secret: bool,
}

impl FieldSpec {
    /// The name of the property (the last path segment).
    pub fn name(&self) -> &str {
        self.path.last().map_or("", String::as_str)
    }
}

/// The form for a schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FormSpec {
    pub fields: Vec<FieldSpec>,
    /// Object paths that must exist even when none of their fields is
    /// given (a required nested object), parents first.
    pub required_objects: Vec<Vec<String>>,
    /// Said about the form as a whole (too many fields, …).
    pub notes: Vec<String>,
}

impl FormSpec {
    /// Whether the form is one JSON field for the whole input.
    pub fn whole(&self) -> bool {
        matches!(self.fields.as_slice(), [only] if only.path.is_empty())
    }

    /// The field at `path`.
    pub fn field(&self, path: &[&str]) -> Option<&FieldSpec> {
        self.fields
            .iter()
            .find(|f| f.path.iter().map(String::as_str).eq(path.iter().copied()))
    }
}

/// The form for `schema` before its secret fields are marked
/// ([`super::secret::form_spec`] marks them: the form every reader uses).
pub(crate) fn unmarked_form_spec(schema: &Value) -> FormSpec {
    let mut b = Builder {
        root: schema,
        fields: Vec::new(),
        required_objects: Vec::new(),
        notes: Vec::new(),
        too_many: false,
    };
    let root = match resolve(schema, schema) {
        Ok(r) => r,
        Err(note) => return whole_json(schema, Some(note)),
    };
    if !is_object_schema(&root) || has_alternatives(&root) {
        return whole_json(&root, None);
    }
    b.object(&root, &[], true, 0);
    if b.too_many {
        return whole_json(
            &root,
            Some(format!(
                "more than {MAX_FIELDS} fields: too many for a form, enter the input as JSON"
            )),
        );
    }
    if b.fields.is_empty() {
        return whole_json(&root, None);
    }
    FormSpec {
        fields: b.fields,
        required_objects: b.required_objects,
        notes: b.notes,
    }
}

fn whole_json(schema: &Value, note: Option<String>) -> FormSpec {
    let hint = str_of(schema, "description");
    FormSpec {
        fields: vec![FieldSpec {
            path: Vec::new(),
            pointer: String::new(),
            label: "input".into(),
            hint: Some(hint.unwrap_or_else(|| "the whole input as JSON".into())),
            kind: Kind::Json,
            required: true,
            nullable: false,
            default: schema.get("default").cloned(),
            constraints: Vec::new(),
            format: None,
            placeholder: examples(schema),
            note,
            secret: false,
        }],
        required_objects: Vec::new(),
        notes: Vec::new(),
    }
}

struct Builder<'a> {
    root: &'a Value,
    fields: Vec<FieldSpec>,
    required_objects: Vec<Vec<String>>,
    notes: Vec<String>,
    too_many: bool,
}

impl Builder<'_> {
    /// Add the fields of object schema `obj` at `path`.
    fn object(&mut self, obj: &Value, path: &[String], required: bool, depth: usize) {
        let req: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let props = obj.get("properties").and_then(Value::as_object);
        let count = props.map_or(0, |p| p.len()) + req.len();
        if self.fields.len() + count > MAX_FIELDS * 2 {
            // Cheap early exit before walking a huge schema.
            self.too_many = true;
            return;
        }
        if !path.is_empty() && required {
            self.required_objects.push(path.to_vec());
        }
        if let Some(props) = props {
            for (name, prop) in props {
                if self.too_many {
                    return;
                }
                let mut p = path.to_vec();
                p.push(name.clone());
                self.property(prop, p, required && req.contains(&name.as_str()), depth);
            }
        }
        // Names only `required` lists: a text field each (the seed's schemas).
        for name in req {
            if props.is_some_and(|p| p.contains_key(name)) {
                continue;
            }
            let mut p = path.to_vec();
            p.push(name.to_string());
            if self.fields.iter().any(|f| f.path == p) {
                continue;
            }
            self.push(FieldSpec {
                pointer: pointer(&p),
                label: self.label(&p, name.to_string()),
                path: p,
                hint: None,
                kind: Kind::Scalar { of: Scalar::Text },
                required,
                nullable: false,
                default: None,
                constraints: Vec::new(),
                format: None,
                placeholder: None,
                note: Some("listed as required, with no schema of its own".into()),
                secret: false,
            });
        }
    }

    fn push(&mut self, f: FieldSpec) {
        if self.fields.len() >= MAX_FIELDS {
            self.too_many = true;
        } else {
            self.fields.push(f);
        }
    }

    /// The label of the field at `path` whose own label is `own`: nested
    /// fields are prefixed with their parents' labels.
    fn label(&self, path: &[String], own: String) -> String {
        if path.len() <= 1 {
            return own;
        }
        let mut parts: Vec<String> = Vec::new();
        let mut node = resolve(self.root, self.root).ok();
        for seg in &path[..path.len() - 1] {
            let next = node
                .as_ref()
                .and_then(|n| n.get("properties"))
                .and_then(|p| p.get(seg))
                .and_then(|p| resolve(self.root, p).ok());
            parts.push(
                next.as_ref()
                    .and_then(|n| str_of(n, "title"))
                    .unwrap_or_else(|| seg.clone()),
            );
            node = next;
        }
        parts.push(own);
        parts.join(" › ")
    }

    fn property(&mut self, raw: &Value, path: Vec<String>, required: bool, depth: usize) {
        let name = path.last().cloned().unwrap_or_default();
        let (prop, note) = match resolve(self.root, raw) {
            Ok(p) => (p, None),
            Err(note) => (raw.clone(), Some(note)),
        };
        let own_label = str_of(&prop, "title").unwrap_or_else(|| name.clone());
        let mut f = FieldSpec {
            pointer: pointer(&path),
            label: self.label(&path, own_label),
            path,
            hint: str_of(&prop, "description"),
            kind: Kind::Json,
            required,
            nullable: false,
            default: prop.get("default").cloned(),
            constraints: Vec::new(),
            format: None,
            placeholder: examples(&prop),
            note,
            secret: false,
        };
        if f.note.is_some() {
            self.push(f);
            return;
        }
        let (types, nullable) = types(&prop);
        f.nullable = nullable;
        if let Some(options) = choices(self.root, &prop) {
            f.kind = Kind::Choice { options };
            self.push(f);
            return;
        }
        let ty = match types.as_slice() {
            [one] => Some(one.as_str()),
            [] if prop.get("properties").is_some() => Some("object"),
            [] if prop.get("items").is_some() => Some("array"),
            _ => None,
        };
        match ty {
            Some("string") => {
                f.kind = Kind::Scalar { of: Scalar::Text };
                f.constraints = string_constraints(&prop);
                f.format = str_of(&prop, "format");
            }
            Some("integer") => {
                f.kind = Kind::Scalar {
                    of: Scalar::Integer,
                };
                f.constraints = number_constraints(&prop);
            }
            Some("number") => {
                f.kind = Kind::Scalar { of: Scalar::Number };
                f.constraints = number_constraints(&prop);
            }
            Some("boolean") => f.kind = Kind::Boolean,
            Some("array") => {
                let min = prop.get("minItems").and_then(Value::as_u64);
                let max = prop.get("maxItems").and_then(Value::as_u64);
                let items = prop.get("items").map(|i| resolve(self.root, i));
                match items {
                    Some(Ok(items)) if items.is_object() => {
                        if let Some(options) = choices(self.root, &items) {
                            f.kind = Kind::Multi { options, min, max };
                        } else if let Some(of) = scalar_items(&items) {
                            f.kind = Kind::List { of, min, max };
                            f.constraints = string_constraints(&items)
                                .into_iter()
                                .chain(number_constraints(&items))
                                .map(|c| format!("each {c}"))
                                .collect();
                        } else {
                            f.note = Some(schema_note(&prop));
                        }
                    }
                    Some(Err(note)) => f.note = Some(note),
                    _ => f.note = Some(schema_note(&prop)),
                }
                f.constraints.extend(count_constraint(min, max, "item"));
                if prop.get("uniqueItems") == Some(&Value::Bool(true)) {
                    f.constraints.push("no repeats".into());
                }
            }
            Some("object") => {
                if depth < MAX_INLINE_DEPTH
                    && !nullable
                    && !has_alternatives(&prop)
                    && f.default.is_none()
                    && prop
                        .get("properties")
                        .and_then(Value::as_object)
                        .is_some_and(|p| !p.is_empty())
                {
                    let path = f.path.clone();
                    self.object(&prop, &path, required, depth + 1);
                    return;
                }
                f.note = Some(schema_note(&prop));
            }
            _ => {
                if prop != Value::Bool(true) && prop.as_object().is_some_and(|o| !o.is_empty()) {
                    f.note = Some(schema_note(&prop));
                }
            }
        }
        self.push(f);
    }
}

/// Whether `s` describes an object (a form of fields).
fn is_object_schema(s: &Value) -> bool {
    let (types, _) = types(s);
    match types.as_slice() {
        [one] => one == "object",
        [] => s.get("properties").is_some() || s.get("required").is_some(),
        _ => false,
    }
}

/// Whether `s` branches (`oneOf`, `anyOf`, `if`, …): a form of fixed
/// fields cannot show that.
fn has_alternatives(s: &Value) -> bool {
    ["oneOf", "anyOf", "if", "not", "dependentSchemas"]
        .iter()
        .any(|k| s.get(*k).is_some())
}

/// The non-null type names of `s`, and whether `null` is allowed.
fn types(s: &Value) -> (Vec<String>, bool) {
    match s.get("type") {
        Some(Value::String(t)) if t == "null" => (Vec::new(), true),
        Some(Value::String(t)) => (vec![t.clone()], false),
        Some(Value::Array(ts)) => {
            let names: Vec<String> = ts
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect();
            let nullable = names.iter().any(|t| t == "null");
            (
                names.into_iter().filter(|t| t != "null").collect(),
                nullable,
            )
        }
        _ => (Vec::new(), false),
    }
}

/// `s` with `$ref`s followed (local ones only, at most [`MAX_REF_HOPS`]),
/// a one-element `allOf` merged, and `anyOf`/`oneOf` of a schema and
/// `{"type": "null"}` turned into a nullable schema. The keywords next to a
/// `$ref` win over the referenced ones. `Err` is the note of a JSON field.
pub(crate) fn resolve(root: &Value, s: &Value) -> Result<Value, String> {
    let mut budget = MAX_REF_HOPS;
    resolve_within(root, s, &mut budget)
}

/// [`resolve`] spending at most `budget` steps (shared with the nested
/// resolutions, so no cycle through `anyOf` recurses without end).
fn resolve_within(root: &Value, s: &Value, budget: &mut usize) -> Result<Value, String> {
    let mut cur = s.clone();
    let mut seen: Vec<String> = Vec::new();
    loop {
        if *budget == 0 {
            return Err("too many $refs in a row: enter it as JSON".into());
        }
        *budget -= 1;
        let Some(obj) = cur.as_object() else {
            return Ok(cur);
        };
        if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
            let r = r.to_string();
            if seen.contains(&r) {
                return Err(format!(
                    "$ref {} refers to itself: enter it as JSON",
                    short(&r)
                ));
            }
            let Some(target) = local_ref(root, &r) else {
                return Err(if r.starts_with('#') {
                    format!("$ref {} not found in the schema", short(&r))
                } else {
                    format!("remote $ref {} is not fetched: enter it as JSON", short(&r))
                });
            };
            seen.push(r);
            let mut merged = target.clone();
            if let Some(m) = merged.as_object_mut() {
                for (k, v) in obj {
                    if k != "$ref" {
                        m.insert(k.clone(), v.clone());
                    }
                }
            } else {
                return Ok(merged);
            }
            cur = merged;
            continue;
        }
        if let Some([one]) = obj
            .get("allOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            let mut merged = one.clone();
            if let Some(m) = merged.as_object_mut() {
                for (k, v) in obj {
                    if k != "allOf" {
                        m.insert(k.clone(), v.clone());
                    }
                }
                cur = merged;
                continue;
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = obj.get(key).and_then(Value::as_array)
                && branches.len() == 2
                && let Some(null_at) = branches
                    .iter()
                    .position(|b| b.get("type").and_then(Value::as_str) == Some("null"))
            {
                let other = resolve_within(root, &branches[1 - null_at], budget)?;
                if let Some(m) = other.as_object() {
                    let mut merged = m.clone();
                    for (k, v) in obj {
                        if k != key {
                            merged.insert(k.clone(), v.clone());
                        }
                    }
                    let (mut names, _) = types(&other);
                    if names.is_empty() {
                        return Ok(cur);
                    }
                    names.push("null".into());
                    merged.insert("type".into(), Value::from(names));
                    return Ok(Value::Object(merged));
                }
            }
        }
        return Ok(cur);
    }
}

/// The schema a local `$ref` (`#`, `#/$defs/x`, `#/definitions/x`, any
/// JSON pointer into the schema) names.
fn local_ref<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let frag = r.strip_prefix('#')?;
    if frag.is_empty() {
        return Some(root);
    }
    if !frag.starts_with('/') {
        return None;
    }
    let decoded = percent_decode(frag);
    root.pointer(&decoded)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len() + 1
            && let Some(h) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(h, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

fn short(s: &str) -> String {
    crate::text::clean(s, 60)
}

/// The options of a choice schema: `const`, `enum` (labelled by
/// `enumNames` when given), or `oneOf`/`anyOf` whose every branch is a
/// `const` (labelled by its `title`).
fn choices(root: &Value, s: &Value) -> Option<Vec<Choice>> {
    if let Some(c) = s.get("const") {
        return Some(vec![Choice {
            label: str_of(s, "title").unwrap_or_else(|| value_label(c)),
            value: c.clone(),
        }]);
    }
    if let Some(vals) = s.get("enum").and_then(Value::as_array) {
        if vals.is_empty() || vals.len() > MAX_OPTIONS {
            return None;
        }
        let names = s.get("enumNames").and_then(Value::as_array);
        return Some(
            vals.iter()
                .enumerate()
                .map(|(i, v)| Choice {
                    value: v.clone(),
                    label: names
                        .filter(|n| n.len() == vals.len())
                        .and_then(|n| n[i].as_str())
                        .map(String::from)
                        .unwrap_or_else(|| value_label(v)),
                })
                .collect(),
        );
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(branches) = s.get(key).and_then(Value::as_array) {
            if branches.is_empty() || branches.len() > MAX_OPTIONS {
                return None;
            }
            let mut out = Vec::new();
            for b in branches {
                let b = resolve(root, b).ok()?;
                let c = b.get("const")?;
                out.push(Choice {
                    label: str_of(&b, "title").unwrap_or_else(|| value_label(c)),
                    value: c.clone(),
                });
            }
            return Some(out);
        }
    }
    None
}

/// A value as a choice shows it: a string as itself, anything else as JSON.
pub fn value_label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The scalar type of array items, if they are plain strings or numbers.
fn scalar_items(items: &Value) -> Option<Scalar> {
    let (types, nullable) = types(items);
    if nullable || has_alternatives(items) {
        return None;
    }
    match types.as_slice() {
        [t] if t == "string" => Some(Scalar::Text),
        [t] if t == "integer" => Some(Scalar::Integer),
        [t] if t == "number" => Some(Scalar::Number),
        _ => None,
    }
}

fn string_constraints(s: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let min = s.get("minLength").and_then(Value::as_u64);
    let max = s.get("maxLength").and_then(Value::as_u64);
    out.extend(count_constraint(min, max, "character"));
    if let Some(p) = str_of(s, "pattern") {
        out.push(format!("matches {p}"));
    }
    if let Some(f) = str_of(s, "format") {
        out.push(format!("format {f}{}", format_example(&f)));
    }
    out
}

/// An example of a format, to show how it is written.
fn format_example(format: &str) -> &'static str {
    match format {
        "date-time" => " (2026-01-15T12:00:00Z)",
        "date" => " (2026-01-15)",
        "time" => " (12:00:00Z)",
        "email" => " (name@example.com)",
        "uri" => " (https://example.com/x)",
        "uuid" => " (8-4-4-4-12 hex digits)",
        "ipv4" => " (192.0.2.1)",
        "ipv6" => " (2001:db8::1)",
        _ => "",
    }
}

fn count_constraint(min: Option<u64>, max: Option<u64>, what: &str) -> Option<String> {
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    match (min, max) {
        (Some(a), Some(b)) if a == b => Some(format!("exactly {a} {what}{}", plural(a))),
        (Some(a), Some(b)) => Some(format!("{a}–{b} {what}s")),
        (Some(a), None) if a > 0 => Some(format!("at least {a} {what}{}", plural(a))),
        (None, Some(b)) => Some(format!("at most {b} {what}{}", plural(b))),
        _ => None,
    }
}

fn number_constraints(s: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let num = |k: &str| s.get(k).filter(|v| v.is_number()).map(Value::to_string);
    match (num("minimum"), num("maximum")) {
        (Some(a), Some(b)) => out.push(format!("{a} to {b}")),
        (Some(a), None) => out.push(format!("≥ {a}")),
        (None, Some(b)) => out.push(format!("≤ {b}")),
        _ => {}
    }
    if let Some(a) = num("exclusiveMinimum") {
        out.push(format!("> {a}"));
    }
    if let Some(b) = num("exclusiveMaximum") {
        out.push(format!("< {b}"));
    }
    if let Some(m) = num("multipleOf") {
        out.push(format!("a multiple of {m}"));
    }
    out
}

/// The note of a JSON field that shows its sub-schema.
fn schema_note(s: &Value) -> String {
    // What the value must be, not the annotations shown elsewhere.
    let mut s = s.clone();
    if let Some(o) = s.as_object_mut() {
        for k in ["title", "description", "default", "examples", "$comment"] {
            o.remove(k);
        }
        if o.len() == 1
            && let Some(t) = o.get("type").and_then(Value::as_str)
        {
            return format!("any JSON {t}");
        }
    }
    let text = s.to_string();
    let cut: String = text.chars().take(MAX_SCHEMA_TEXT).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    format!("JSON matching {cut}{more}")
}

fn examples(s: &Value) -> Option<String> {
    let first = s.get("examples").and_then(Value::as_array)?.first()?;
    Some(value_label(first))
}

fn str_of(s: &Value, key: &str) -> Option<String> {
    s.get(key).and_then(Value::as_str).map(String::from)
}

/// The JSON pointer of `path`.
pub fn pointer(path: &[String]) -> String {
    path.iter()
        .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
        .collect()
}
