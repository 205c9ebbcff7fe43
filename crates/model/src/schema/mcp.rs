//! Whether a schema fits the Model Context Protocol's elicitation, which
//! takes only a flat object of primitive properties: strings (`minLength`,
//! `maxLength`, `format` email, uri, date or date-time), numbers and
//! integers (`minimum`, `maximum`), booleans, single-choice enums (`enum`,
//! or `oneOf` of `{const, title}`) and multi-select arrays of those; each
//! with `title`, `description` and `default`.

use serde::Serialize;
use serde_json::Value;

/// The answer: whether it fits, and if not the first reason why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpFit {
    pub fits: bool,
    /// Why not (`null` when it fits).
    pub reason: Option<String>,
}

impl McpFit {
    /// One line for people: `fits` or `does not fit: REASON`.
    pub fn line(&self) -> String {
        match &self.reason {
            None => "fits".into(),
            Some(r) => format!("does not fit: {r}"),
        }
    }
}

/// Whether `schema` fits MCP elicitation, and if not, the first reason.
pub fn mcp_fit(schema: &Value) -> McpFit {
    match check_root(schema) {
        Ok(()) => McpFit {
            fits: true,
            reason: None,
        },
        Err(r) => McpFit {
            fits: false,
            reason: Some(crate::text::clean(&r, 300)),
        },
    }
}

const COMMON: &[&str] = &["type", "title", "description", "default"];

fn check_root(s: &Value) -> Result<(), String> {
    let obj = s.as_object().ok_or("the schema is not an object")?;
    if obj.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the schema's type is not \"object\"".into());
    }
    for k in obj.keys() {
        if !matches!(
            k.as_str(),
            "type" | "properties" | "required" | "title" | "description" | "$schema"
        ) {
            return Err(format!(
                "the schema uses `{k}`, which MCP elicitation does not take"
            ));
        }
    }
    let props = obj.get("properties").and_then(Value::as_object);
    if let Some(req) = obj.get("required").and_then(Value::as_array) {
        for r in req {
            let name = r.as_str().ok_or("`required` lists a non-string")?;
            if !props.is_some_and(|p| p.contains_key(name)) {
                return Err(format!(
                    "`{name}` is required but has no property schema (MCP needs each typed)"
                ));
            }
        }
    }
    let props = props.ok_or("the schema has no properties")?;
    for (name, p) in props {
        check_property(p).map_err(|r| format!("property `{name}`: {r}"))?;
    }
    Ok(())
}

fn only(p: &serde_json::Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    for k in p.keys() {
        if !COMMON.contains(&k.as_str()) && !allowed.contains(&k.as_str()) {
            return Err(format!("`{k}` is not allowed here"));
        }
    }
    Ok(())
}

fn check_property(p: &Value) -> Result<(), String> {
    // MCP forbids form elicitation of sensitive information (a client
    // shows and may log the form): a secret is answered in rudder.
    if super::secret::is_secret(p) {
        return Err("it is secret (writeOnly or format password), and MCP form elicitation must not ask for sensitive information".into());
    }
    let p = p.as_object().ok_or("not an object schema")?;
    let ty = match p.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(_) => return Err("a list of types (or a nullable type) is not primitive".into()),
        None => return Err("it has no `type`".into()),
    };
    match ty {
        "string" if p.contains_key("enum") => {
            only(p, &["enum", "enumNames"])?;
            string_enum(p.get("enum"))
        }
        "string" if p.contains_key("oneOf") => {
            only(p, &["oneOf"])?;
            titled_consts(p.get("oneOf"))
        }
        "string" => {
            only(p, &["minLength", "maxLength", "format"])?;
            match p.get("format").map(|f| f.as_str()) {
                None | Some(Some("email" | "uri" | "date" | "date-time")) => Ok(()),
                Some(f) => Err(format!(
                    "format {} is not one of email, uri, date, date-time",
                    f.unwrap_or("(not a string)")
                )),
            }
        }
        "number" | "integer" => only(p, &["minimum", "maximum"]),
        "boolean" => only(p, &[]),
        "array" => {
            only(p, &["items", "minItems", "maxItems"])?;
            let items = p
                .get("items")
                .and_then(Value::as_object)
                .ok_or("an array without `items`")?;
            if let Some(e) = items.get("enum") {
                only(items, &["enum"])?;
                string_enum(Some(e))
            } else if let Some(b) = items.get("anyOf").or_else(|| items.get("oneOf")) {
                only(items, &["anyOf", "oneOf"])?;
                titled_consts(Some(b))
            } else {
                Err("an array whose items are not an enum (only multi-select arrays fit)".into())
            }
        }
        "object" => Err("a nested object (MCP takes only primitive properties)".into()),
        other => Err(format!("type {other} is not primitive")),
    }
}

fn string_enum(e: Option<&Value>) -> Result<(), String> {
    let vals = e.and_then(Value::as_array).ok_or("`enum` is not a list")?;
    if vals.iter().all(Value::is_string) && !vals.is_empty() {
        Ok(())
    } else {
        Err("an enum of values that are not all strings".into())
    }
}

fn titled_consts(b: Option<&Value>) -> Result<(), String> {
    let branches = b.and_then(Value::as_array).ok_or("`oneOf` is not a list")?;
    for br in branches {
        let o = br.as_object().ok_or("a choice that is not an object")?;
        if !o.get("const").is_some_and(Value::is_string) {
            return Err("a choice without a string `const`".into());
        }
        if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "const" | "title")) {
            return Err(format!("a choice with `{k}` (only const and title)"));
        }
    }
    Ok(())
}
