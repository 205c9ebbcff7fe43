//! JSON Schema handling: validating input with the `jsonschema` crate, and
//! typing `--set FIELD=VALUE` arguments (and TUI form fields) by the schema.

use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt;

/// One way in which a value fails its schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// JSON pointer to the offending value (`""` is the whole input). For a
    /// missing required property it points at the property that is missing.
    pub pointer: String,
    pub message: String,
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
    if !schema.is_object() {
        return Err("an input schema must be a JSON object".into());
    }
    jsonschema::validator_for(schema)
        .map(|_| ())
        .map_err(|e| format!("invalid JSON Schema: {e}"))
}

/// Validate `value` against `schema`, reporting every violation with its pointer.
pub fn validate(schema: &Value, value: &Value) -> Result<(), Vec<Violation>> {
    let validator = jsonschema::validator_for(schema).map_err(|e| {
        vec![Violation {
            pointer: String::new(),
            message: format!("the task's input schema is invalid: {e}"),
        }]
    })?;
    let violations: Vec<Violation> = validator
        .iter_errors(value)
        .map(|e| {
            let mut pointer = e.instance_path().as_str().to_string();
            if let jsonschema::error::ValidationErrorKind::Required { property } = e.kind()
                && let Some(name) = property.as_str()
            {
                pointer.push('/');
                pointer.push_str(&escape_pointer(name));
            }
            Violation {
                pointer,
                message: e.to_string(),
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

/// The JSON type a schema property expects, as far as a form or `--set` cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    String,
    Integer,
    Number,
    Boolean,
    /// Anything else (objects, arrays, unions): entered as JSON.
    Json,
}

/// The type of property `name` in an object schema (`Json` when unknown).
pub fn field_type(schema: &Value, name: &str) -> FieldType {
    let Some(prop) = schema.get("properties").and_then(|p| p.get(name)) else {
        return FieldType::Json;
    };
    property_type(prop)
}

/// The type a property schema expects: its `type` (ignoring `"null"` in a
/// list), else the type of its `enum` values when they all agree.
pub fn property_type(prop: &Value) -> FieldType {
    let from_name = |t: &str| match t {
        "string" => Some(FieldType::String),
        "integer" => Some(FieldType::Integer),
        "number" => Some(FieldType::Number),
        "boolean" => Some(FieldType::Boolean),
        _ => None,
    };
    match prop.get("type") {
        Some(Value::String(t)) => from_name(t).unwrap_or(FieldType::Json),
        Some(Value::Array(ts)) => {
            let named: Vec<&str> = ts
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            match named.as_slice() {
                [one] => from_name(one).unwrap_or(FieldType::Json),
                _ => FieldType::Json,
            }
        }
        _ => match prop.get("enum").and_then(Value::as_array) {
            Some(vals) if !vals.is_empty() && vals.iter().all(Value::is_string) => {
                FieldType::String
            }
            _ => FieldType::Json,
        },
    }
}

/// Turn the text typed for a field into the JSON value its type asks for.
pub fn parse_field(ty: FieldType, field: &str, raw: &str) -> Result<Value, String> {
    let bad = |what: &str| format!("{field}: expected {what}, got {raw:?}");
    match ty {
        FieldType::String => Ok(Value::String(raw.to_string())),
        FieldType::Integer => raw
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| bad("an integer")),
        FieldType::Number => {
            let n: f64 = raw.trim().parse().map_err(|_| bad("a number"))?;
            serde_json::Number::from_f64(n)
                .map(Value::Number)
                .ok_or_else(|| bad("a finite number"))
        }
        FieldType::Boolean => match raw.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "y" | "on" | "1" => Ok(Value::Bool(true)),
            "false" | "no" | "n" | "off" | "0" => Ok(Value::Bool(false)),
            _ => Err(bad("true or false")),
        },
        // Free-form fields take JSON; a bare word that is not JSON is a
        // string. JSON the store would refuse or change (a key twice, too
        // deep) is an error, not silently a string.
        FieldType::Json => match crate::json::parse(raw) {
            Ok(v) => Ok(v),
            Err(e) if e.is_syntax() => Ok(Value::String(raw.into())),
            Err(e) => Err(format!("{field}: {e}")),
        },
    }
}

/// Build an input object from `FIELD=VALUE` pairs, typing each value by `schema`.
pub fn input_from_assignments(
    schema: Option<&Value>,
    assignments: &[String],
) -> Result<Value, String> {
    let mut obj = Map::new();
    for a in assignments {
        let (field, raw) = a
            .split_once('=')
            .ok_or_else(|| format!("--set {a:?}: expected FIELD=VALUE"))?;
        if field.is_empty() {
            return Err(format!("--set {a:?}: the field name is empty"));
        }
        let ty = schema.map_or(FieldType::Json, |s| field_type(s, field));
        obj.insert(field.to_string(), parse_field(ty, field, raw)?);
    }
    Ok(Value::Object(obj))
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
            "window_minutes: expected an integer, got \"soon\""
        );
        assert!(input_from_assignments(None, &["novalue".into()]).is_err());
    }

    #[test]
    fn violations_carry_pointers() {
        let schema = json!({"type": "object", "required": ["service"],
            "properties": {"service": {"type": "string"}, "n": {"type": "integer", "minimum": 1}}});
        let errs = validate(&schema, &json!({"n": 0})).unwrap_err();
        let mut pointers: Vec<_> = errs.iter().map(|v| v.pointer.as_str()).collect();
        pointers.sort();
        assert_eq!(pointers, ["/n", "/service"]);
        assert!(validate(&schema, &json!({"service": "db"})).is_ok());
    }

    #[test]
    fn invalid_schemas_are_reported() {
        assert!(check_schema(&json!({"type": "nonsense"})).is_err());
        assert!(check_schema(&json!([1])).is_err());
        assert!(check_schema(&json!({"type": "object"})).is_ok());
    }
}
