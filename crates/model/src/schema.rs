//! JSON Schema handling: validating input with the `jsonschema` crate
//! (formats included), the form a schema asks for ([`form_spec`]), typing
//! `--set FIELD=VALUE` arguments by that form, and whether a schema fits MCP
//! elicitation ([`mcp`]).

use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt;

pub mod form_spec;
pub mod mcp;
pub mod secret;

pub use form_spec::{Choice, FieldSpec, FormSpec, Kind, Scalar};
pub use mcp::{McpFit, mcp_fit};
pub use secret::{MASK, form_spec, mask_task, masked_input, masked_task, secret_fields};

/// One way in which a value fails its schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// JSON pointer to the offending value (`""` is the whole input). For a
    /// missing required property it points at the property that is missing.
    pub pointer: String,
    pub message: String,
    /// A required property that is absent (not a value that is wrong):
    /// a form shows it as a field still to fill in, not as an error.
    #[serde(skip)]
    pub missing: bool,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "(input)"
        } else {
            &self.pointer
        };
        write!(f, "{at}: {}", self.message)
    }
}

/// Check that `schema` is itself a valid JSON Schema object.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    Compiled::new(schema).map(|_| ())
}

/// The validator of `schema`: formats (`date-time`, `email`, `uri`, …) are
/// checked, not only annotations, so every caller agrees on them.
fn validator(
    schema: &Value,
) -> Result<jsonschema::Validator, jsonschema::ValidationError<'static>> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
}

/// Validate `value` against `schema`, reporting every violation with its pointer.
pub fn validate(schema: &Value, value: &Value) -> Result<(), Vec<Violation>> {
    let validator = validator(schema).map_err(|e| {
        vec![Violation {
            pointer: String::new(),
            message: format!("the task's input schema is invalid: {e}"),
            missing: false,
        }]
    })?;
    violations(&validator, &secret::secret_pointers(schema), value)
}

/// A schema compiled once to validate many values (a tool's arguments on
/// every call: compiling is most of a validation's cost).
#[derive(Clone)]
pub struct Compiled {
    validator: std::sync::Arc<jsonschema::Validator>,
    /// The schema's secret values ([`secret::secret_pointers`]), which
    /// messages do not quote.
    secrets: std::sync::Arc<[String]>,
}

impl Compiled {
    /// Compile `schema`: an error says why it is not a valid JSON Schema
    /// object (what [`check_schema`] says).
    pub fn new(schema: &Value) -> Result<Compiled, String> {
        if !schema.is_object() {
            return Err("an input schema must be a JSON object".into());
        }
        validator(schema)
            .map(|v| Compiled {
                validator: std::sync::Arc::new(v),
                secrets: secret::secret_pointers(schema).into(),
            })
            .map_err(|e| format!("invalid JSON Schema: {e}"))
    }

    /// [`validate`] against this schema.
    pub fn validate(&self, value: &Value) -> Result<(), Vec<Violation>> {
        violations(&self.validator, &self.secrets, value)
    }
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Compiled(..)")
    }
}

/// Every way `value` fails `validator`. A message about a value that is,
/// holds or lies inside one of the `secrets` (pointers) shows [`MASK`]
/// where it would quote the value: messages reach people and logs.
fn violations(
    validator: &jsonschema::Validator,
    secrets: &[String],
    value: &Value,
) -> Result<(), Vec<Violation>> {
    let violations: Vec<Violation> = validator
        .iter_errors(value)
        .map(|e| {
            let mut pointer = e.instance_path().as_str().to_string();
            let message = if secret::touches_secret(secrets, &pointer) {
                e.masked_with(MASK).to_string()
            } else {
                e.to_string()
            };
            let mut missing = false;
            if let jsonschema::error::ValidationErrorKind::Required { property } = e.kind()
                && let Some(name) = property.as_str()
            {
                pointer.push('/');
                pointer.push_str(&escape_pointer(name));
                missing = true;
            }
            Violation {
                pointer,
                message,
                missing,
            }
        })
        .collect();
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations)
    }
}

fn escape_pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Turn the text typed for a scalar into the JSON value its type asks for.
/// The error says what was expected (`expected an integer, got "soon"`).
pub fn parse_scalar(of: Scalar, raw: &str) -> Result<Value, String> {
    let bad = |what: &str| format!("expected {what}, got {raw:?}");
    match of {
        Scalar::Text => Ok(Value::String(raw.to_string())),
        Scalar::Integer => raw
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .or_else(|_| {
                // 3.0 is an integer to JSON Schema; 1e3 too.
                let n: f64 = raw.trim().parse().map_err(|_| ())?;
                if n.fract() == 0.0 && n.abs() < 9.0e15 {
                    Ok(Value::from(n as i64))
                } else {
                    Err(())
                }
            })
            .map_err(|()| bad("an integer")),
        Scalar::Number => {
            let n: f64 = raw.trim().parse().map_err(|_| bad("a number"))?;
            serde_json::Number::from_f64(n)
                .map(Value::Number)
                .ok_or_else(|| bad("a finite number"))
        }
    }
}

/// Read a yes/no answer.
pub fn parse_bool(raw: &str) -> Result<bool, String> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "y" | "on" | "1" => Ok(true),
        "false" | "no" | "n" | "off" | "0" => Ok(false),
        _ => Err(format!("expected true or false, got {raw:?}")),
    }
}

/// The option `raw` names: its value as text, else its title (any case),
/// else a JSON value equal to an option's.
pub fn parse_choice(options: &[Choice], raw: &str) -> Result<Value, String> {
    if let Some(c) = options
        .iter()
        .find(|c| form_spec::value_label(&c.value) == raw)
        .or_else(|| options.iter().find(|c| c.label == raw))
        .or_else(|| {
            options
                .iter()
                .find(|c| c.label.eq_ignore_ascii_case(raw.trim()))
        })
    {
        return Ok(c.value.clone());
    }
    if let Ok(v) = serde_json::from_str::<Value>(raw)
        && options.iter().any(|c| c.value == v)
    {
        return Ok(v);
    }
    let names: Vec<String> = options
        .iter()
        .take(20)
        .map(|c| {
            let v = form_spec::value_label(&c.value);
            if v == c.label {
                v
            } else {
                format!("{v} ({})", c.label)
            }
        })
        .collect();
    Err(format!(
        "expected one of {}{}, got {raw:?}",
        names.join(", "),
        if options.len() > 20 { ", …" } else { "" }
    ))
}

/// Why `--set` arguments make no input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetError {
    /// Not `FIELD=VALUE` (exit 2).
    Usage(String),
    /// Values their fields' types cannot take (exit 5, like `--value`),
    /// with whatever else the schema finds wrong with the input.
    Invalid(Vec<Violation>),
}

impl fmt::Display for SetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetError::Usage(m) => f.write_str(m),
            SetError::Invalid(v) => {
                let all: Vec<String> = v.iter().map(ToString::to_string).collect();
                f.write_str(&all.join("; "))
            }
        }
    }
}

/// Build an input object from `FIELD=VALUE` pairs, typing each value by the
/// form [`form_spec`] makes of `schema`: names only `required` lists are
/// strings, a choice takes its value or its title, a multi-select or a list
/// collects repeated `--set`s (or takes a JSON array), a nested field is
/// `parent.child`; a field the form does not know takes JSON, else a string.
pub fn input_from_assignments(
    schema: Option<&Value>,
    assignments: &[String],
) -> Result<Value, SetError> {
    let spec = schema.map(form_spec);
    let mut obj = Value::Object(Map::new());
    let mut wrong: Vec<Violation> = Vec::new();
    for a in assignments {
        let (name, raw) = a
            .split_once('=')
            .ok_or_else(|| SetError::Usage(format!("--set {a:?}: expected FIELD=VALUE")))?;
        if name.is_empty() {
            return Err(SetError::Usage(format!(
                "--set {a:?}: the field name is empty"
            )));
        }
        let field = spec.as_ref().filter(|s| !s.whole()).and_then(|s| {
            s.field(&[name])
                .or_else(|| s.field(&name.split('.').collect::<Vec<_>>()))
        });
        let path: Vec<String> = match field {
            Some(f) => f.path.clone(),
            None => vec![name.to_string()],
        };
        let secret = field.is_some_and(|f| f.secret);
        let invalid = |message: String| Violation {
            pointer: form_spec::pointer(&path),
            // The parsers quote what was typed; not a secret's.
            message: if secret {
                format!("{name}: {}", secret::unquoted(&message, raw))
            } else {
                format!("{name}: {message}")
            },
            missing: false,
        };
        let slot = slot(&mut obj, &path).ok_or_else(|| {
            SetError::Usage(format!(
                "--set {a:?}: {name} is set both as a value and as an object"
            ))
        })?;
        let Some(f) = field else {
            // Free-form: JSON, or a bare word as a string. JSON the store
            // would refuse or change (a key twice, too deep) is an error,
            // not silently a string.
            *slot = match crate::json::parse(raw) {
                Ok(v) => v,
                Err(e) if e.is_syntax() => Value::String(raw.into()),
                Err(e) => return Err(SetError::Usage(format!("--set {name}: {e}"))),
            };
            continue;
        };
        let null_ok = f.nullable && raw.trim() == "null";
        let typed: Result<(), Violation> = (|| {
            match &f.kind {
                _ if null_ok && !matches!(f.kind, Kind::Scalar { of: Scalar::Text }) => {
                    *slot = Value::Null;
                }
                Kind::Scalar { of } => *slot = parse_scalar(*of, raw).map_err(invalid)?,
                Kind::Boolean => *slot = Value::Bool(parse_bool(raw).map_err(invalid)?),
                Kind::Choice { options } => *slot = parse_choice(options, raw).map_err(invalid)?,
                Kind::Multi { .. } | Kind::List { .. } => {
                    let items: Vec<Value> = if raw.trim_start().starts_with('[') {
                        match crate::json::parse(raw) {
                            Ok(Value::Array(items)) => items
                                .iter()
                                .map(|i| match (&f.kind, i) {
                                    (Kind::Multi { options, .. }, _)
                                        if options.iter().any(|c| c.value == *i) =>
                                    {
                                        Ok(i.clone())
                                    }
                                    (Kind::Multi { options, .. }, _) => {
                                        parse_choice(options, &form_spec::value_label(i))
                                    }
                                    _ => Ok(i.clone()),
                                })
                                .collect::<Result<_, _>>()
                                .map_err(invalid)?,
                            _ => {
                                return Err(invalid(format!("expected a JSON array, got {raw:?}")));
                            }
                        }
                    } else {
                        vec![match &f.kind {
                            Kind::Multi { options, .. } => {
                                parse_choice(options, raw).map_err(invalid)?
                            }
                            Kind::List { of, .. } => parse_scalar(*of, raw).map_err(invalid)?,
                            _ => unreachable!("a multi-select or a list"),
                        }]
                    };
                    match slot {
                        Value::Array(have) => have.extend(items),
                        other => *other = Value::Array(items),
                    }
                }
                Kind::Json => {
                    *slot = match crate::json::parse(raw) {
                        Ok(v) => v,
                        Err(e) if e.is_syntax() => Value::String(raw.into()),
                        Err(e) => return Err(invalid(e.to_string())),
                    };
                }
            }
            Ok(())
        })();
        if let Err(v) = typed {
            // Sent on as text, so the schema reports the rest as well.
            *slot_at(&mut obj, &path) = Value::String(raw.to_string());
            wrong.push(v);
        }
    }
    if !wrong.is_empty() {
        if let Some(schema) = schema
            && let Err(more) = validate(schema, &obj)
        {
            let have: Vec<String> = wrong.iter().map(|v| v.pointer.clone()).collect();
            wrong.extend(more.into_iter().filter(|v| !have.contains(&v.pointer)));
        }
        return Err(SetError::Invalid(wrong));
    }
    Ok(obj)
}

/// [`slot`], which is known to exist.
fn slot_at<'a>(obj: &'a mut Value, path: &[String]) -> &'a mut Value {
    slot(obj, path).expect("the slot was made before")
}

/// The place for the value at `path` inside `obj`, making the objects on
/// the way; `None` when a non-object is in the way.
fn slot<'a>(obj: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut cur = obj;
    for seg in path {
        if !cur.is_object() {
            if cur.is_null() {
                *cur = Value::Object(Map::new());
            } else {
                return None;
            }
        }
        cur = cur
            .as_object_mut()?
            .entry(seg.clone())
            .or_insert(Value::Null);
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_values_are_typed_by_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "service": {"type": "string"},
            "window_minutes": {"type": "integer"},
            "ratio": {"type": "number"},
            "dry": {"type": "boolean"},
            "env": {"enum": ["prod", "staging"]},
            "tags": {"type": "array"}
        }});
        let v = input_from_assignments(
            Some(&schema),
            &[
                "service=123".into(),
                "window_minutes=30".into(),
                "ratio=0.5".into(),
                "dry=yes".into(),
                "env=prod".into(),
                "tags=[\"a\"]".into(),
                "other=7".into(),
            ],
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"service": "123", "window_minutes": 30, "ratio": 0.5, "dry": true,
                   "env": "prod", "tags": ["a"], "other": 7})
        );
        let err = input_from_assignments(Some(&schema), &["window_minutes=soon".into()]);
        assert_eq!(
            err.unwrap_err(),
            SetError::Invalid(vec![Violation {
                pointer: "/window_minutes".into(),
                message: "window_minutes: expected an integer, got \"soon\"".into(),
                missing: false,
            }])
        );
        assert!(input_from_assignments(None, &["novalue".into()]).is_err());
    }

    #[test]
    fn messages_never_quote_a_secret_value() {
        let schema = json!({"type": "object", "required": ["service"], "properties": {
            "service": {"type": "string", "maxLength": 2},
            "pin": {"type": "integer", "writeOnly": true},
            "token": {"type": "string", "format": "password", "minLength": 40}
        }});
        let errs =
            validate(&schema, &json!({"token": "hunter2", "service": "payments"})).unwrap_err();
        let all: Vec<String> = errs.iter().map(ToString::to_string).collect();
        let text = all.join("; ");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains(MASK), "{text}");
        // Not a secret: quoted as before.
        assert!(text.contains("payments"), "{text}");
        let compiled = Compiled::new(&schema).unwrap();
        let errs = compiled.validate(&json!({"token": "hunter2"})).unwrap_err();
        assert!(
            errs.iter().all(|v| !v.message.contains("hunter2")),
            "{errs:?}"
        );
        // `--set`: the typed text of a secret is not quoted either.
        let err = input_from_assignments(Some(&schema), &["pin=12ab34".into()]).unwrap_err();
        assert!(!err.to_string().contains("12ab34"), "{err}");
        assert!(err.to_string().contains(MASK), "{err}");
        let spec = form_spec(&schema);
        assert!(spec.field(&["pin"]).unwrap().secret);
        assert!(!spec.field(&["service"]).unwrap().secret);
    }

    #[test]
    fn violations_carry_pointers() {
        let schema = json!({"type": "object", "required": ["service"],
            "properties": {"service": {"type": "string"}, "n": {"type": "integer", "minimum": 1}}});
        let errs = validate(&schema, &json!({"n": 0})).unwrap_err();
        let mut pointers: Vec<_> = errs.iter().map(|v| v.pointer.as_str()).collect();
        pointers.sort();
        assert_eq!(pointers, ["/n", "/service"]);
        // What is absent is told apart from what is wrong by kind, not by
        // the message's words (a form leaves an empty field unflagged).
        let missing: Vec<_> = errs
            .iter()
            .map(|v| (v.pointer.as_str(), v.missing))
            .collect();
        assert!(missing.contains(&("/service", true)), "{missing:?}");
        assert!(missing.contains(&("/n", false)), "{missing:?}");
        let json = serde_json::to_value(&errs[0]).unwrap();
        assert!(
            json.get("missing").is_none(),
            "the JSON shape stays: {json}"
        );
        assert!(validate(&schema, &json!({"service": "db"})).is_ok());
    }

    #[test]
    fn invalid_schemas_are_reported() {
        assert!(check_schema(&json!({"type": "nonsense"})).is_err());
        assert!(check_schema(&json!([1])).is_err());
        assert!(check_schema(&json!({"type": "object"})).is_ok());
    }
}
