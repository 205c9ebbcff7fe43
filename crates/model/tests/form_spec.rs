//! The form a schema asks for (`schema::form_spec`), over many shapes:
//! every kind of field, the seed's schema, MCP's examples, broken and
//! hostile schemas. Each field is summed up in one line:
//! `POINTER LABEL KIND [*] [=DEFAULT] [?] [(CONSTRAINTS)] [e.g. PLACEHOLDER] [!NOTE]`.

use std::time::{Duration, Instant};

use rudder_model::schema::{self, FieldSpec, Kind, Scalar, form_spec, mcp_fit};
use serde_json::{Value, json};

fn kind(k: &Kind) -> String {
    let scalar = |s: &Scalar| match s {
        Scalar::Text => "text",
        Scalar::Integer => "integer",
        Scalar::Number => "number",
    };
    let opts = |o: &[schema::Choice]| {
        o.iter()
            .map(|c| {
                let v = schema::form_spec::value_label(&c.value);
                if v == c.label {
                    v
                } else {
                    format!("{v}={}", c.label)
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    match k {
        Kind::Scalar { of } => scalar(of).into(),
        Kind::Boolean => "bool".into(),
        Kind::Choice { options } => format!("choice[{}]", opts(options)),
        Kind::Multi { options, min, max } => format!(
            "multi[{}]{}",
            opts(options),
            match (min, max) {
                (None, None) => String::new(),
                (a, b) => format!(
                    "{{{},{}}}",
                    a.map(|x| x.to_string()).unwrap_or_default(),
                    b.map(|x| x.to_string()).unwrap_or_default()
                ),
            }
        ),
        Kind::List { of, .. } => format!("list<{}>", scalar(of)),
        Kind::Json => "json".into(),
    }
}

fn line(f: &FieldSpec) -> String {
    let mut s = format!(
        "{} {} {}",
        if f.pointer.is_empty() {
            "\"\""
        } else {
            &f.pointer
        },
        f.label,
        kind(&f.kind)
    );
    if f.required {
        s.push_str(" *");
    }
    if let Some(d) = &f.default {
        s.push_str(&format!(" ={d}"));
    }
    if f.nullable {
        s.push_str(" ?");
    }
    if !f.constraints.is_empty() {
        s.push_str(&format!(" ({})", f.constraints.join("; ")));
    }
    if let Some(p) = &f.placeholder {
        s.push_str(&format!(" e.g. {p}"));
    }
    if let Some(n) = &f.note {
        s.push_str(&format!(" !{}", n.split(':').next().unwrap_or(n)));
    }
    s
}

fn lines(schema: &Value) -> Vec<String> {
    form_spec(schema).fields.iter().map(line).collect()
}

#[test]
fn schema_shapes_and_their_fields() {
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "the seed's schema: a name only under required",
            json!({"type": "object", "required": ["service"]}),
            vec!["/service service text * !listed as required, with no schema of its own"],
        ),
        (
            "required-only names next to properties",
            json!({"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "integer"}}}),
            vec![
                "/a a integer *",
                "/b b text * !listed as required, with no schema of its own",
            ],
        ),
        (
            "title, description, default, examples",
            json!({"type": "object", "properties": {"svc": {"type": "string", "title": "Service", "description": "which one", "default": "api", "examples": ["payments"]}}}),
            vec!["/svc Service text =\"api\" e.g. payments"],
        ),
        (
            "string constraints",
            json!({"type": "object", "properties": {"s": {"type": "string", "minLength": 2, "maxLength": 40, "pattern": "^[a-z]+$"}}}),
            vec!["/s s text (2–40 characters; matches ^[a-z]+$)"],
        ),
        (
            "integer range",
            json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 60}}}),
            vec!["/n n integer (1 to 60)"],
        ),
        (
            "number, exclusive bounds and a step",
            json!({"type": "object", "properties": {"r": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5}}}),
            vec!["/r r number (> 0; a multiple of 0.5)"],
        ),
        (
            "boolean",
            json!({"type": "object", "required": ["dry"], "properties": {"dry": {"type": "boolean"}}}),
            vec!["/dry dry bool *"],
        ),
        (
            "const",
            json!({"type": "object", "properties": {"v": {"const": 2, "title": "version two"}}}),
            vec!["/v version two choice[2=version two]"],
        ),
        (
            "enum",
            json!({"type": "object", "properties": {"env": {"type": "string", "enum": ["prod", "staging"]}}}),
            vec!["/env env choice[prod,staging]"],
        ),
        (
            "enum of numbers with a default",
            json!({"type": "object", "properties": {"n": {"enum": [1, 2, 3], "default": 2}}}),
            vec!["/n n choice[1,2,3] =2"],
        ),
        (
            "MCP titled single choice: oneOf of {const, title}",
            json!({"type": "object", "properties": {"sev": {"type": "string", "oneOf": [{"const": "p1", "title": "Page now"}, {"const": "p3", "title": "Tomorrow"}]}}}),
            vec!["/sev sev choice[p1=Page now,p3=Tomorrow]"],
        ),
        (
            "anyOf of consts",
            json!({"type": "object", "properties": {"c": {"anyOf": [{"const": "a"}, {"const": "b", "title": "Bee"}]}}}),
            vec!["/c c choice[a,b=Bee]"],
        ),
        (
            "legacy enumNames",
            json!({"type": "object", "properties": {"c": {"type": "string", "enum": ["a", "b"], "enumNames": ["Ay", "Bee"]}}}),
            vec!["/c c choice[a=Ay,b=Bee]"],
        ),
        (
            "MCP multi-select: array of an enum",
            json!({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "enum": ["db", "net"]}, "minItems": 1, "maxItems": 2}}}),
            vec!["/tags tags multi[db,net]{1,2} (1–2 items)"],
        ),
        (
            "MCP multi-select: array of titled consts",
            json!({"type": "object", "properties": {"tags": {"type": "array", "items": {"anyOf": [{"const": "db", "title": "Database"}, {"const": "net", "title": "Network"}]}}}}),
            vec!["/tags tags multi[db=Database,net=Network]"],
        ),
        (
            "array of strings",
            json!({"type": "object", "properties": {"hosts": {"type": "array", "items": {"type": "string"}, "maxItems": 5}}}),
            vec!["/hosts hosts list<text> (at most 5 items)"],
        ),
        (
            "array of numbers with item constraints",
            json!({"type": "object", "properties": {"ports": {"type": "array", "items": {"type": "integer", "minimum": 1}, "uniqueItems": true}}}),
            vec!["/ports ports list<integer> (each ≥ 1; no repeats)"],
        ),
        (
            "array of objects: JSON with the sub-schema",
            json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "object"}}}}),
            vec!["/xs xs json !JSON matching {\"type\""],
        ),
        (
            "local $ref into $defs",
            json!({"type": "object", "properties": {"env": {"$ref": "#/$defs/env"}}, "$defs": {"env": {"enum": ["prod", "dev"], "title": "Environment"}}}),
            vec!["/env Environment choice[prod,dev]"],
        ),
        (
            "local $ref into definitions, siblings win",
            json!({"type": "object", "properties": {"n": {"$ref": "#/definitions/n", "title": "Count"}}, "definitions": {"n": {"type": "integer", "title": "N", "minimum": 0}}}),
            vec!["/n Count integer (≥ 0)"],
        ),
        (
            "the root itself behind a $ref",
            json!({"$ref": "#/$defs/input", "$defs": {"input": {"type": "object", "required": ["service"], "properties": {"service": {"type": "string"}}}}}),
            vec!["/service service text *"],
        ),
        (
            "a remote $ref is not fetched",
            json!({"type": "object", "properties": {"x": {"$ref": "https://example.com/x.json"}}}),
            vec!["/x x json !remote $ref https"],
        ),
        (
            "a $ref to nowhere",
            json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}),
            vec!["/x x json !$ref #/$defs/missing not found in the schema"],
        ),
        (
            "a cycle through $ref",
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}),
            vec!["/a a json !$ref #/$defs/a refers to itself"],
        ),
        (
            "a recursive tree: inlined up to the depth, then JSON",
            json!({"type": "object", "properties": {"node": {"$ref": "#"}, "name": {"type": "string"}}}),
            vec![
                "/node/node/node node › node › node json !JSON matching {\"type\"",
                "/node/node/name node › node › name text",
                "/node/name node › name text",
                "/name name text",
            ],
        ),
        (
            "nullable string",
            json!({"type": "object", "required": ["note"], "properties": {"note": {"type": ["string", "null"]}}}),
            vec!["/note note text * ?"],
        ),
        (
            "nullable through anyOf with null",
            json!({"type": "object", "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}),
            vec!["/n n integer ?"],
        ),
        (
            "formats",
            json!({"type": "object", "properties": {
                "at": {"type": "string", "format": "date-time"},
                "day": {"type": "string", "format": "date"},
                "t": {"type": "string", "format": "time"},
                "mail": {"type": "string", "format": "email"},
                "url": {"type": "string", "format": "uri"},
                "id": {"type": "string", "format": "uuid"},
                "v4": {"type": "string", "format": "ipv4"},
                "v6": {"type": "string", "format": "ipv6"}
            }}),
            vec![
                "/at at text (format date-time (2026-01-15T12:00:00Z))",
                "/day day text (format date (2026-01-15))",
                "/t t text (format time (12:00:00Z))",
                "/mail mail text (format email (name@example.com))",
                "/url url text (format uri (https://example.com/x))",
                "/id id text (format uuid (8-4-4-4-12 hex digits))",
                "/v4 v4 text (format ipv4 (192.0.2.1))",
                "/v6 v6 text (format ipv6 (2001:db8::1))",
            ],
        ),
        (
            "a nested object inline, labelled by path",
            json!({"type": "object", "required": ["window"], "properties": {"window": {"type": "object", "title": "Window", "required": ["minutes"], "properties": {"minutes": {"type": "integer"}, "from": {"type": "string"}}}}}),
            vec![
                "/window/minutes Window › minutes integer *",
                "/window/from Window › from text",
            ],
        ),
        (
            "an optional parent makes its required child optional",
            json!({"type": "object", "properties": {"w": {"type": "object", "required": ["m"], "properties": {"m": {"type": "integer"}}}}}),
            vec!["/w/m w › m integer"],
        ),
        (
            "oneOf of objects: JSON with the sub-schema",
            json!({"type": "object", "properties": {"target": {"oneOf": [{"type": "object", "properties": {"host": {"type": "string"}}}, {"type": "object", "properties": {"ip": {"type": "string"}}}]}}}),
            vec!["/target target json !JSON matching {\"oneOf\""],
        ),
        (
            "a union of types",
            json!({"type": "object", "properties": {"x": {"type": ["string", "integer"]}}}),
            vec!["/x x json !JSON matching {\"type\""],
        ),
        (
            "an unconstrained property",
            json!({"type": "object", "properties": {"x": {}, "y": true}}),
            vec!["/x x json", "/y y json"],
        ),
        (
            "a free-form object",
            json!({"type": "object", "properties": {"meta": {"type": "object", "additionalProperties": {"type": "string"}}}}),
            vec!["/meta meta json !JSON matching {\"type\""],
        ),
        (
            "allOf of one $ref",
            json!({"type": "object", "properties": {"e": {"allOf": [{"$ref": "#/$defs/e"}], "description": "env"}}, "$defs": {"e": {"enum": ["a", "b"]}}}),
            vec!["/e e choice[a,b]"],
        ),
        (
            "no properties at all: the whole input as JSON",
            json!({"type": "object"}),
            vec!["\"\" input json *"],
        ),
        (
            "not an object: the whole input as JSON",
            json!({"type": "array"}),
            vec!["\"\" input json *"],
        ),
        (
            "a root oneOf: the whole input as JSON",
            json!({"oneOf": [{"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}]}),
            vec!["\"\" input json *"],
        ),
        (
            "broken: properties is not an object",
            json!({"type": "object", "properties": [1, 2]}),
            vec!["\"\" input json *"],
        ),
        (
            "broken: required holds non-strings",
            json!({"type": "object", "required": [1, null, "ok"]}),
            vec!["/ok ok text * !listed as required, with no schema of its own"],
        ),
        (
            "broken: enum is empty",
            json!({"type": "object", "properties": {"e": {"enum": []}}}),
            vec!["/e e json !JSON matching {\"enum\""],
        ),
        (
            "names that need escaping in a pointer",
            json!({"type": "object", "required": ["a/b", "c~d"]}),
            vec![
                "/a~1b a/b text * !listed as required, with no schema of its own",
                "/c~0d c~d text * !listed as required, with no schema of its own",
            ],
        ),
    ];
    assert!(cases.len() >= 30, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (name, schema, expected) in &cases {
        let got = lines(schema);
        if got != *expected {
            failures.push(format!(
                "{name}:\n  expected {expected:#?}\n  got      {got:#?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn mcp_examples_fit_and_the_rest_says_why_not() {
    // The shapes of MCP elicitation's requested schemas.
    let mcp = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "description": "Your name", "minLength": 1, "maxLength": 50},
            "email": {"type": "string", "format": "email", "default": "a@b.c"},
            "birthday": {"type": "string", "format": "date"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "subscribe": {"type": "boolean", "default": false},
            "color": {"type": "string", "enum": ["red", "green"]},
            "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
            "toppings": {"type": "array", "items": {"type": "string", "enum": ["ham", "egg"]}, "minItems": 1},
            "extras": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}}
        },
        "required": ["name", "email"]
    });
    let fit = mcp_fit(&mcp);
    assert!(fit.fits, "{fit:?}");
    assert_eq!(fit.reason, None);
    // Every field of it is native in the form.
    assert!(form_spec(&mcp).fields.iter().all(|f| f.kind != Kind::Json));
    for (schema, why) in [
        (
            json!({"type": "object", "required": ["service"]}),
            "`service` is required but has no property schema",
        ),
        (
            json!({"type": "object", "properties": {"w": {"type": "object"}}}),
            "property `w`: a nested object",
        ),
        (
            json!({"type": "object", "properties": {"t": {"type": "string", "format": "uuid"}}}),
            "property `t`: format uuid",
        ),
        (
            json!({"type": "object", "properties": {"t": {"type": ["string", "null"]}}}),
            "property `t`: a list of types",
        ),
        (
            json!({"type": "object", "properties": {"t": {"$ref": "#/$defs/t"}}, "$defs": {"t": {"type": "string"}}}),
            "uses `$defs`",
        ),
        (
            json!({"type": "object", "properties": {"t": {"type": "string", "pattern": "x"}}}),
            "property `t`: `pattern` is not allowed",
        ),
        (json!({"type": "array"}), "type is not \"object\""),
        (
            json!({"type": "object", "properties": {"h": {"type": "array", "items": {"type": "string"}}}}),
            "items are not an enum",
        ),
    ] {
        let fit = mcp_fit(&schema);
        assert!(!fit.fits, "{schema}");
        let reason = fit.reason.unwrap_or_default();
        assert!(reason.contains(why), "{schema}: {reason}");
    }
}

/// Hostile schemas are bounded: no panic, no stack overflow, little time.
#[test]
fn hostile_schemas_are_bounded() {
    let start = Instant::now();
    // 10k properties: too many for a form, one JSON field.
    let mut props = serde_json::Map::new();
    for i in 0..10_000 {
        props.insert(format!("p{i}"), json!({"type": "string"}));
    }
    let big = json!({"type": "object", "properties": props});
    let spec = form_spec(&big);
    assert!(spec.whole());
    assert!(
        spec.fields[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("too many")
    );
    // 10k names only under required.
    let names: Vec<String> = (0..10_000).map(|i| format!("n{i}")).collect();
    assert!(form_spec(&json!({"type": "object", "required": names})).whole());
    // Absurd nesting of objects (as deep as serde_json parses: 127).
    let mut deep = json!({"type": "string"});
    for _ in 0..60 {
        deep = json!({"type": "object", "properties": {"x": deep}});
    }
    let spec = form_spec(&deep);
    assert_eq!(spec.fields.len(), 1);
    assert_eq!(spec.fields[0].kind, Kind::Json);
    // Deep nesting of anyOf-null wrappers around a self reference.
    let spec = form_spec(
        &json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}},
        "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}}),
    );
    assert_eq!(spec.fields[0].kind, Kind::Json);
    // A self-referencing root.
    let spec = form_spec(&json!({"$ref": "#"}));
    assert!(spec.whole());
    // A long chain of $refs.
    let mut defs = serde_json::Map::new();
    for i in 0..1_000 {
        defs.insert(
            format!("d{i}"),
            json!({"$ref": format!("#/$defs/d{}", i + 1)}),
        );
    }
    defs.insert("d1000".into(), json!({"type": "string"}));
    let spec = form_spec(
        &json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}),
    );
    assert_eq!(
        spec.fields[0].kind,
        Kind::Json,
        "the chain is not followed to its end"
    );
    // A recursive tree is inlined to a fixed depth only.
    let tree = json!({"type": "object", "properties": {"l": {"$ref": "#"}, "r": {"$ref": "#"}, "v": {"type": "integer"}}});
    assert!(form_spec(&tree).fields.len() < 50);
    // 1k alternatives of consts: a choice; more: JSON.
    let many: Vec<Value> = (0..5_000).map(|i| json!({"const": i})).collect();
    let spec = form_spec(&json!({"type": "object", "properties": {"c": {"oneOf": many}}}));
    assert_eq!(spec.fields[0].kind, Kind::Json);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn formats_are_validated() {
    let schema = json!({"type": "object", "properties": {
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "mail": {"type": "string", "format": "email"},
        "url": {"type": "string", "format": "uri"},
        "id": {"type": "string", "format": "uuid"},
        "v4": {"type": "string", "format": "ipv4"},
        "v6": {"type": "string", "format": "ipv6"},
        "t": {"type": "string", "format": "time"}
    }});
    let good = json!({"at": "2026-01-15T12:00:00Z", "day": "2026-01-15", "mail": "a@example.com",
        "url": "https://example.com/x", "id": "8f1c6f7e-3f6a-4e2b-9a1d-0c2b3d4e5f60",
        "v4": "192.0.2.1", "v6": "2001:db8::1", "t": "12:00:00Z"});
    assert_eq!(schema::validate(&schema, &good), Ok(()));
    for (field, bad) in [
        ("at", "yesterday"),
        ("day", "2026-13-45"),
        ("mail", "nobody"),
        ("url", "not a uri"),
        ("id", "1234"),
        ("v4", "300.1.1.1"),
        ("v6", "::g"),
        ("t", "25:00"),
    ] {
        let errs = schema::validate(&schema, &json!({ field: bad })).unwrap_err();
        assert_eq!(errs.len(), 1, "{field}: {errs:?}");
        assert_eq!(errs[0].pointer, format!("/{field}"));
    }
}
