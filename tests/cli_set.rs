//! `rudder input --set` follows the form spec, and `rudder get` says
//! whether the schema fits MCP elicitation.

mod common;

use common::{create, run};
use serde_json::{Value, json};

fn store() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    (dir, path)
}

fn answer(schema: &Value, sets: &[&str]) -> (i32, Value, String) {
    let (_d, path) = store();
    let id = create(&path, &["--schema", &schema.to_string()]);
    let mut args = vec!["input", &id, "--json"];
    for s in sets {
        args.push("--set");
        args.push(s);
    }
    let r = run(&path, &args);
    (r.code, r.json(), r.stderr)
}

#[test]
fn set_follows_the_form_spec() {
    // Names only `required` lists are strings, even when they look like numbers.
    let (code, v, _) = answer(
        &json!({"type": "object", "required": ["service"]}),
        &["service=42"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["task"]["input_value"], json!({"service": "42"}));

    let schema = json!({"type": "object", "properties": {
        "sev": {"type": "string", "oneOf": [{"const": "p1", "title": "Page now"}, {"const": "p3", "title": "Tomorrow"}]},
        "env": {"$ref": "#/$defs/env"},
        "tags": {"type": "array", "items": {"enum": ["db", "net"]}},
        "ports": {"type": "array", "items": {"type": "integer"}},
        "window": {"type": "object", "properties": {"minutes": {"type": "integer"}}},
        "note": {"type": ["integer", "null"]}
    }, "$defs": {"env": {"enum": ["prod", "dev"]}}});
    // A choice takes its const or its title; a multi-select and a list
    // collect repeated --set; a nested field is parent.child.
    let (code, v, e) = answer(
        &schema,
        &[
            "sev=Tomorrow",
            "env=dev",
            "tags=db",
            "tags=net",
            "ports=80",
            "ports=443",
            "window.minutes=5",
            "note=null",
        ],
    );
    assert_eq!(code, 0, "{e}");
    assert_eq!(
        v["task"]["input_value"],
        json!({"sev": "p3", "env": "dev", "tags": ["db", "net"], "ports": [80, 443],
               "window": {"minutes": 5}, "note": null})
    );
    let (code, v, _) = answer(&schema, &["sev=p1", "tags=[\"net\"]"]);
    assert_eq!(code, 0);
    assert_eq!(
        v["task"]["input_value"],
        json!({"sev": "p1", "tags": ["net"]})
    );

    // A value of the wrong type is exit 5 naming the field, with every
    // other problem the schema finds.
    for (set, pointer) in [
        ("sev=later", "/sev"),
        ("tags=disk", "/tags"),
        ("ports=http", "/ports"),
        ("window.minutes=soon", "/window/minutes"),
    ] {
        let (code, v, _) = answer(&schema, &[set]);
        assert_eq!(code, 5, "{set}: {v}");
        assert_eq!(v["error"], "invalid_input");
        let pointers: Vec<&str> = v["violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["pointer"].as_str().unwrap())
            .collect();
        assert_eq!(pointers, [pointer], "{set}: {v}");
    }
    // Formats are checked by the store.
    let (code, v, _) = answer(
        &json!({"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}),
        &["at=yesterday"],
    );
    assert_eq!(code, 5, "{v}");
    assert_eq!(v["violations"][0]["pointer"], "/at");
}

#[test]
fn get_says_whether_the_schema_fits_mcp_elicitation() {
    let (_d, path) = store();
    let seed = create(
        &path,
        &["--schema", r#"{"type":"object","required":["service"]}"#],
    );
    let flat = create(
        &path,
        &[
            "--schema",
            r#"{"type":"object","properties":{"service":{"type":"string","title":"Service"}}}"#,
        ],
    );
    let none = create(&path, &[]);
    let v = run(&path, &["get", &seed, "--json"]).json();
    assert_eq!(v["mcp_elicitation"]["fits"], false);
    assert!(
        v["mcp_elicitation"]["reason"]
            .as_str()
            .unwrap()
            .contains("`service` is required")
    );
    let v = run(&path, &["get", &flat, "--json"]).json();
    assert_eq!(v["mcp_elicitation"], json!({"fits": true, "reason": null}));
    let v = run(&path, &["get", &none, "--json"]).json();
    assert!(
        v.get("mcp_elicitation").is_none(),
        "no schema, nothing to say"
    );
    let r = run(&path, &["get", &seed]);
    assert!(
        r.stdout
            .contains("MCP elicitation: does not fit: `service` is required"),
        "{}",
        r.stdout
    );
    let r = run(&path, &["get", &flat]);
    assert!(r.stdout.contains("MCP elicitation: fits"), "{}", r.stdout);
}
