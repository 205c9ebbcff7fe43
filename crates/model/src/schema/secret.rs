//! Secret answers: a property of a task's `input_schema` marked
//! `writeOnly: true` or `"format": "password"` holds a value that people
//! and logs never see ([`MASK`] instead): the TUI, the CLI's output, MCP
//! answers, the notifier's event and validation messages. Only the worker
//! (which needs it to do the work) and `rudder get --reveal` read it.
//!
//! The rules live here, once, so every face masks the same fields.

use serde_json::Value;

use super::form_spec::{
    FormSpec, MAX_FIELDS, MAX_INLINE_DEPTH, pointer, resolve, unmarked_form_spec,
};
use crate::task::Task;

/// What is shown in place of a secret value.
pub const MASK: &str = "••••";

/// How deep nested objects are searched for secrets: one deeper than the
/// form inlines, so a secret inside an object the form shows as one JSON
/// field still masks that field's value.
const MAX_DEPTH: usize = MAX_INLINE_DEPTH + 1;

/// Whether the (resolved) property schema `prop` itself says its value is
/// secret: `writeOnly: true` or `"format": "password"`.
pub fn is_secret(prop: &Value) -> bool {
    prop.get("writeOnly") == Some(&Value::Bool(true))
        || prop.get("format").and_then(Value::as_str) == Some("password")
}

/// The paths (property names from the input's root) of the secret values
/// of `schema`: properties marked secret, at the top level and in nested
/// objects, and arrays whose items are marked secret (the whole array is
/// then secret). A schema marked secret as a whole gives one empty path
/// (the whole input). A path inside a secret one is not listed again.
/// Bounded: local `$ref`s only (as the form follows them), at most
/// [`MAX_FIELDS`] paths.
pub fn secret_fields(schema: &Value) -> Vec<Vec<String>> {
    let root = resolve(schema, schema).unwrap_or_else(|_| schema.clone());
    if is_secret(&root) {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    walk(schema, &root, &mut Vec::new(), 0, &mut out);
    out
}

fn walk(
    root: &Value,
    obj: &Value,
    path: &mut Vec<String>,
    depth: usize,
    out: &mut Vec<Vec<String>>,
) {
    let Some(props) = obj.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, raw) in props {
        if out.len() >= MAX_FIELDS {
            return;
        }
        // An unresolvable `$ref` (remote, a cycle): the keywords beside it
        // still count.
        let prop = resolve(root, raw).unwrap_or_else(|_| raw.clone());
        path.push(name.clone());
        let items_secret = prop
            .get("items")
            .map(|i| resolve(root, i).unwrap_or_else(|_| i.clone()))
            .is_some_and(|i| is_secret(&i));
        if is_secret(&prop) || items_secret {
            out.push(path.clone());
        } else if depth < MAX_DEPTH {
            walk(root, &prop, path, depth + 1, out);
        }
        path.pop();
    }
}

/// Replace the secret values of `value` (an input of `schema`) by [`MASK`];
/// values not given stay absent. Whether anything was masked.
pub fn mask_value(schema: &Value, value: &mut Value) -> bool {
    let mut masked = false;
    for path in secret_fields(schema) {
        if let Some(slot) = path
            .iter()
            .try_fold(&mut *value, |cur, seg| cur.get_mut(seg.as_str()))
        {
            *slot = Value::String(MASK.into());
            masked = true;
        }
    }
    masked
}

/// The task's input as people see it: its secret values masked.
pub fn masked_input(task: &Task) -> Option<Value> {
    let mut value = task.input_value.clone()?;
    if let Some(schema) = &task.input_schema {
        mask_value(schema, &mut value);
    }
    Some(value)
}

/// Mask the secret values of `task`'s input in place, and of every earlier
/// answer it keeps ([`Task::answered`]), each by the schema it answered
/// (see [`masked_task`]).
pub fn mask_task(task: &mut Task) {
    if let (Some(schema), Some(value)) = (&task.input_schema, &mut task.input_value) {
        mask_value(schema, value);
    }
    for earlier in &mut task.answered {
        mask_value(&earlier.input_schema, &mut earlier.input_value);
    }
}

/// `task` as people see it: the secret values of its input and of its
/// earlier answers masked, the rest as it is. What every face but the
/// worker's shows.
pub fn masked_task(task: &Task) -> Task {
    let mut t = task.clone();
    mask_task(&mut t);
    t
}

/// The JSON pointers of `schema`'s secret values (for [`touches_secret`]).
pub fn secret_pointers(schema: &Value) -> Vec<String> {
    secret_fields(schema).iter().map(|p| pointer(p)).collect()
}

/// Whether the value at JSON pointer `at` is, holds or lies inside one of
/// the `secrets` (pointers): a message about it must not quote it.
pub fn touches_secret(secrets: &[String], at: &str) -> bool {
    secrets.iter().any(|s| {
        s == at
            || s.is_empty()
            || at.is_empty()
            || s.strip_prefix(at).is_some_and(|r| r.starts_with('/'))
            || at
                .strip_prefix(s.as_str())
                .is_some_and(|r| r.starts_with('/'))
    })
}

/// `message` (a parser's, which quotes what was typed as `{raw:?}`)
/// with the typed text of a secret replaced by [`MASK`].
pub fn unquoted(message: &str, raw: &str) -> String {
    message.replace(&format!("{raw:?}"), MASK)
}

/// The form for `schema` ([`super::form_spec`]), its secret fields
/// marked from the one list of secrets, so a field inside a secret object
/// or a JSON field holding a secret is masked too.
pub fn form_spec(schema: &Value) -> FormSpec {
    let mut spec = unmarked_form_spec(schema);
    let secrets = secret_pointers(schema);
    if !secrets.is_empty() {
        for f in &mut spec.fields {
            f.secret = touches_secret(&secrets, &f.pointer);
        }
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Status;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "$defs": { "pw": { "type": "string", "format": "password" } },
            "properties": {
                "service": { "type": "string" },
                "token": { "type": "string", "writeOnly": true },
                "pin": { "$ref": "#/$defs/pw" },
                "db": {
                    "type": "object",
                    "properties": {
                        "host": { "type": "string" },
                        "password": { "type": "string", "format": "password" }
                    }
                },
                "keys": { "type": "array", "items": { "type": "string", "writeOnly": true } },
                "plain_false": { "type": "string", "writeOnly": false }
            }
        })
    }

    #[test]
    fn write_only_and_password_properties_are_secret_at_any_depth() {
        let paths = secret_fields(&schema());
        let want: Vec<Vec<String>> = vec![
            vec!["token".into()],
            vec!["pin".into()],
            vec!["db".into(), "password".into()],
            vec!["keys".into()],
        ];
        assert_eq!(paths, want);
        assert_eq!(
            secret_pointers(&schema()),
            ["/token", "/pin", "/db/password", "/keys"]
        );
    }

    #[test]
    fn a_schema_without_secrets_or_a_secret_whole_input() {
        assert!(secret_fields(&json!({"properties": {"a": {"type": "string"}}})).is_empty());
        assert!(secret_fields(&json!(true)).is_empty());
        assert!(secret_fields(&json!("nonsense")).is_empty());
        assert_eq!(
            secret_fields(&json!({"type": "string", "writeOnly": true})),
            vec![Vec::<String>::new()]
        );
    }

    #[test]
    fn a_self_referring_schema_ends() {
        let s = json!({
            "$defs": { "node": { "type": "object", "properties": {
                "next": { "$ref": "#/$defs/node" },
                "key": { "type": "string", "writeOnly": true } } } },
            "$ref": "#/$defs/node"
        });
        let paths = secret_fields(&s);
        assert_eq!(
            paths[0],
            vec![
                "next".to_string(),
                "next".into(),
                "next".into(),
                "key".into()
            ]
        );
        assert!(paths.len() <= MAX_DEPTH + 1);
    }

    #[test]
    fn masking_replaces_given_secret_values_only() {
        let mut v = json!({
            "service": "payments",
            "token": "tok-123",
            "db": { "host": "h", "password": "hunter2" },
            "keys": ["a", "b"]
        });
        assert!(mask_value(&schema(), &mut v));
        assert_eq!(
            v,
            json!({
                "service": "payments",
                "token": MASK,
                "db": { "host": "h", "password": MASK },
                "keys": MASK
            })
        );
        // Nothing secret given: nothing changes, nothing is added.
        let mut plain = json!({ "service": "x" });
        assert!(!mask_value(&schema(), &mut plain));
        assert_eq!(plain, json!({ "service": "x" }));
        // An input that is not an object is left as it is.
        let mut odd = json!([1, 2]);
        assert!(!mask_value(&schema(), &mut odd));
    }

    #[test]
    fn a_masked_task_keeps_all_but_the_secret() {
        let mut t = Task::new("t1", Status::Working);
        t.input_schema = Some(schema());
        t.input_value = Some(json!({ "service": "payments", "pin": "1234" }));
        let m = masked_task(&t);
        assert_eq!(
            m.input_value,
            Some(json!({ "service": "payments", "pin": MASK }))
        );
        assert_eq!(masked_input(&t), m.input_value);
        assert_eq!(m.input_schema, t.input_schema);
        // The original is untouched: the worker reads it in clear.
        assert_eq!(t.input_value.as_ref().unwrap()["pin"], "1234");
        assert_eq!(masked_input(&Task::new("t2", Status::Working)), None);
    }

    /// An earlier answer is masked by the schema it answered, not by the
    /// task's current one (which may ask for something else entirely).
    #[test]
    fn every_earlier_answer_is_masked_by_its_own_schema() {
        let mut t = Task::new("t1", Status::InputRequired);
        t.input_schema = Some(json!({"properties": {"service": {"type": "string"}}}));
        t.answered = vec![
            crate::task::Answered {
                message: Some("Which token?".into()),
                input_schema: schema(),
                input_value: json!({"service": "payments", "token": "tok-1"}),
            },
            crate::task::Answered {
                message: None,
                input_schema: json!({"type": "object", "writeOnly": true}),
                input_value: json!({"key": "k-2"}),
            },
        ];
        let m = masked_task(&t);
        assert_eq!(
            m.answered[0].input_value,
            json!({"service": "payments", "token": MASK})
        );
        assert_eq!(m.answered[1].input_value, json!(MASK));
        assert_eq!(m.answered[0].message.as_deref(), Some("Which token?"));
        let shown = serde_json::to_string(&m).unwrap();
        assert!(
            !shown.contains("tok-1") && !shown.contains("k-2"),
            "{shown}"
        );
        // The worker's copy is untouched.
        assert_eq!(t.answered[0].input_value["token"], "tok-1");
    }

    #[test]
    fn a_message_about_a_secret_or_what_holds_it_is_masked() {
        let s = secret_pointers(&schema());
        assert!(touches_secret(&s, "/token"));
        assert!(touches_secret(&s, "/db/password"));
        assert!(touches_secret(&s, "/db"));
        assert!(touches_secret(&s, "/keys/0"));
        assert!(touches_secret(&s, ""));
        assert!(!touches_secret(&s, "/service"));
        assert!(!touches_secret(&s, "/tokenish"));
        assert!(!touches_secret(&s, "/db/host"));
        assert!(!touches_secret(&[], ""));
    }
}
