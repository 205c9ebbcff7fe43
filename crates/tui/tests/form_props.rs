//! Properties of the form over generated schemas in the supported subset
//! (every native field kind, required or not, nested one level):
//!
//! - any value the form produces from in-domain typing validates against
//!   the schema (and the form sends it);
//! - every value that validates can be entered in the fields (the form is
//!   filled from it and sends the same value back).

use crossterm::event::KeyCode;
use proptest::prelude::*;
use rudder_model::schema;
use rudder_model::task::{Status, TaskMap};
use rudder_testkit::tui::*;
use rudder_tui::app::{App, Popup};
use rudder_tui::form::{Form, same};
use rudder_tui::update::Effect;
use serde_json::{Map, Value, json};

const FORMATS: &[(&str, &[&str])] = &[
    ("date", &["2026-01-15", "1999-12-31"]),
    (
        "date-time",
        &["2026-01-15T12:00:00Z", "2020-02-29T23:59:59+01:00"],
    ),
    ("email", &["a@example.com", "on.call@example.org"]),
    ("uri", &["https://example.com/x", "urn:isbn:0451450523"]),
    ("uuid", &["8f1c6f7e-3f6a-4e2b-9a1d-0c2b3d4e5f60"]),
    ("ipv4", &["192.0.2.1", "10.0.0.255"]),
];

/// One property of a generated schema.
#[derive(Debug, Clone)]
enum P {
    Str {
        min: usize,
        max: usize,
    },
    Fmt(usize),
    Int {
        min: i64,
        max: i64,
    },
    Num {
        min: i64,
        max: i64,
    },
    Bool,
    Enum(usize),
    Titled(usize),
    Multi {
        n: usize,
        min: usize,
        max: usize,
    },
    ListStr,
    ListInt,
    /// `{"a": string (required), "n": integer}`
    Nested,
    NullStr,
}

fn prop_schema(p: &P) -> Value {
    match p {
        P::Str { min, max } => json!({"type": "string", "minLength": min, "maxLength": max}),
        P::Fmt(i) => json!({"type": "string", "format": FORMATS[*i].0}),
        P::Int { min, max } => json!({"type": "integer", "minimum": min, "maximum": max}),
        P::Num { min, max } => json!({"type": "number", "minimum": min, "maximum": max}),
        P::Bool => json!({"type": "boolean", "title": "Yes?"}),
        P::Enum(n) => json!({"enum": (0..*n).map(|i| format!("o{i}")).collect::<Vec<_>>()}),
        P::Titled(n) => json!({"type": "string", "oneOf": (0..*n)
            .map(|i| json!({"const": format!("c{i}"), "title": format!("Title {i}")}))
            .collect::<Vec<_>>()}),
        P::Multi { n, min, max } => json!({"type": "array", "minItems": min, "maxItems": max,
            "items": {"type": "string", "enum": (0..*n).map(|i| format!("m{i}")).collect::<Vec<_>>()}}),
        P::ListStr => json!({"type": "array", "items": {"type": "string"}}),
        P::ListInt => json!({"type": "array", "items": {"type": "integer"}}),
        P::Nested => json!({"type": "object", "required": ["a"], "properties": {
            "a": {"type": "string"}, "n": {"type": "integer"}}}),
        P::NullStr => json!({"type": ["string", "null"]}),
    }
}

fn arb_prop() -> impl Strategy<Value = P> {
    prop_oneof![
        (0usize..3, 0usize..8).prop_map(|(min, extra)| P::Str {
            min,
            max: min.max(1) + extra
        }),
        (0..FORMATS.len()).prop_map(P::Fmt),
        (-50i64..50, 0i64..100).prop_map(|(min, w)| P::Int { min, max: min + w }),
        (-50i64..50, 0i64..100).prop_map(|(min, w)| P::Num { min, max: min + w }),
        Just(P::Bool),
        (1usize..5).prop_map(P::Enum),
        (1usize..5).prop_map(P::Titled),
        (1usize..5)
            .prop_flat_map(|n| (Just(n), 0..=n))
            .prop_flat_map(|(n, min)| (Just(n), Just(min), min..=n))
            .prop_map(|(n, min, max)| P::Multi { n, min, max }),
        Just(P::ListStr),
        Just(P::ListInt),
        Just(P::Nested),
        Just(P::NullStr),
    ]
}

/// Properties, each with whether it is required.
fn arb_props() -> impl Strategy<Value = Vec<(P, bool)>> {
    prop::collection::vec((arb_prop(), any::<bool>()), 1..6)
}

fn schema_of(props: &[(P, bool)]) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (i, (p, req)) in props.iter().enumerate() {
        properties.insert(format!("p{i}"), prop_schema(p));
        if *req {
            required.push(format!("p{i}"));
        }
    }
    json!({"type": "object", "properties": properties, "required": required})
}

fn open(schema: Value) -> App {
    let mut t = task(1, Status::InputRequired, "INC-1 gen", 10, 1);
    t.input_schema = Some(schema);
    let tasks: TaskMap = [(t.task_id.clone(), t)].into_iter().collect();
    let mut app = app_with(tasks);
    app.handle_key(ch('i'));
    app
}

fn form_mut(app: &mut App) -> &mut Form {
    match &mut app.popup {
        Popup::Form(f) => f,
        other => panic!("expected the form, got {other:?}"),
    }
}

/// What to type into one property's fields: a choice of in-domain entries.
#[derive(Debug, Clone)]
struct Entry {
    /// A pick among options, a length, a number: scaled into the domain.
    pick: usize,
    text: String,
    flags: Vec<bool>,
}

fn arb_entry() -> impl Strategy<Value = Entry> {
    (
        0usize..1000,
        "[a-z][a-z ]{0,10}",
        prop::collection::vec(any::<bool>(), 5),
    )
        .prop_map(|(pick, text, flags)| Entry { pick, text, flags })
}

fn type_into(app: &mut App, text: &str) {
    for c in text.chars() {
        app.handle_key(ch(c));
    }
}

/// Press the keys for property `p` (its fields), then Tab past them.
fn enter(app: &mut App, p: &P, e: &Entry) {
    let tab = |app: &mut App| {
        app.handle_key(key(KeyCode::Tab));
    };
    match p {
        P::Str { min, max } => {
            let len = (*min).max(1) + e.pick % (max - (*min).max(1) + 1);
            let text: String = e
                .text
                .chars()
                .chain(std::iter::repeat('x'))
                .take(len)
                .collect();
            type_into(app, &text);
        }
        P::Fmt(i) => type_into(app, FORMATS[*i].1[e.pick % FORMATS[*i].1.len()]),
        P::Int { min, max } => {
            type_into(app, &(min + (e.pick as i64 % (max - min + 1))).to_string());
        }
        P::Num { min, max } => {
            let n = *min as f64 + (e.pick as f64 / 1000.0) * (*max - *min) as f64;
            type_into(app, &n.to_string());
        }
        P::Bool => {
            for _ in 0..=(e.pick % 3) {
                app.handle_key(ch(' '));
            }
        }
        P::Enum(n) | P::Titled(n) => {
            for _ in 0..=(e.pick % n) {
                app.handle_key(key(KeyCode::Right));
            }
        }
        P::Multi { n, min, max } => {
            // A subset of a size within the bounds.
            let size = min + e.pick % (max - min + 1);
            let mut chosen: Vec<usize> = (0..*n).filter(|i| e.flags[*i]).collect();
            chosen.truncate(size);
            let mut i = 0;
            while chosen.len() < size {
                if !chosen.contains(&i) {
                    chosen.push(i);
                }
                i += 1;
            }
            for i in 0..*n {
                if chosen.contains(&i) {
                    app.handle_key(ch(' '));
                }
                app.handle_key(key(KeyCode::Right));
            }
        }
        P::ListStr => type_into(app, &e.text.replace(' ', ", ")),
        P::ListInt => type_into(app, &format!("{}, -{}", e.pick, e.pick / 3)),
        P::Nested => {
            type_into(app, &e.text);
            tab(app);
            type_into(app, &e.pick.to_string());
        }
        P::NullStr => {
            if e.pick.is_multiple_of(2) {
                type_into(app, &e.text);
            }
        }
    }
    tab(app);
}

/// A valid value for property `p` (`None`: left out), as the form can
/// enter it.
fn value_for(p: &P, required: bool, e: &Entry) -> Option<Value> {
    let present = required || e.flags[4];
    if !present {
        return None;
    }
    Some(match p {
        P::Str { min, max } => {
            let len = (*min).max(1) + e.pick % (max - (*min).max(1) + 1);
            Value::String(
                e.text
                    .chars()
                    .chain(std::iter::repeat('y'))
                    .take(len)
                    .collect(),
            )
        }
        P::Fmt(i) => json!(FORMATS[*i].1[e.pick % FORMATS[*i].1.len()]),
        P::Int { min, max } => json!(min + (e.pick as i64 % (max - min + 1))),
        P::Num { min, max } => json!(*min as f64 + (e.pick as f64 / 1000.0) * (*max - *min) as f64),
        P::Bool => json!(e.pick.is_multiple_of(2)),
        P::Enum(n) => json!(format!("o{}", e.pick % n)),
        P::Titled(n) => json!(format!("c{}", e.pick % n)),
        P::Multi { n, min, max } => {
            let size = min + e.pick % (max - min + 1);
            let items: Vec<Value> = (0..*n)
                .filter(|i| e.flags[*i])
                .take(size)
                .map(|i| json!(format!("m{i}")))
                .collect();
            if items.is_empty() && !required {
                return None;
            }
            Value::Array(items)
        }
        P::ListStr => {
            let items: Vec<Value> = e.text.split(' ').map(|s| json!(s)).collect();
            Value::Array(items)
        }
        P::ListInt => json!([e.pick, -(e.pick as i64)]),
        P::Nested => {
            if e.flags[3] {
                json!({"a": e.text, "n": e.pick})
            } else {
                json!({"a": e.text})
            }
        }
        P::NullStr => {
            if required && e.flags[0] {
                Value::Null
            } else {
                json!(e.text)
            }
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// What the form produces from in-domain typing validates and is sent.
    #[test]
    fn what_the_form_produces_validates(
        props in arb_props(),
        entries in prop::collection::vec(arb_entry(), 6),
    ) {
        let schema = schema_of(&props);
        let mut app = open(schema.clone());
        for ((p, _), e) in props.iter().zip(&entries) {
            enter(&mut app, p, e);
        }
        let value = form_mut(&mut app).current_value();
        prop_assert_eq!(schema::validate(&schema, &value), Ok(()), "{}", value);
        let effects = app.handle_key(ctrl('s'));
        match effects.as_slice() {
            [Effect::ProvideInput { value: sent, .. }] => prop_assert!(same(sent, &value)),
            other => {
                let f = form_mut(&mut app);
                let errors: Vec<_> = f.fields.iter().map(|f| (f.name.clone(), f.error.clone())).collect();
                prop_assert!(false, "not sent: {other:?}; {value}; {errors:?}");
            }
        }
    }

    /// Every valid value (in the subset) can be entered in the fields.
    #[test]
    fn every_valid_value_can_be_entered(
        props in arb_props(),
        entries in prop::collection::vec(arb_entry(), 6),
    ) {
        let schema = schema_of(&props);
        let mut obj = Map::new();
        for (i, ((p, req), e)) in props.iter().zip(&entries).enumerate() {
            if let Some(v) = value_for(p, *req, e) {
                obj.insert(format!("p{i}"), v);
            }
        }
        let value = Value::Object(obj);
        prop_assume!(schema::validate(&schema, &value).is_ok());
        let mut app = open(schema.clone());
        let form = form_mut(&mut app);
        prop_assert_eq!(form.fill(&value), Ok(()), "{}", value);
        let sent = form.validate();
        prop_assert!(sent.as_ref().is_some_and(|s| same(s, &value)), "{:?} != {}", sent, value);
    }
}

/// Schema-like JSON made of schema keywords, nested at random.
fn arb_schemaish() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!("string")),
        Just(json!("object")),
        Just(json!("array")),
        Just(json!("integer")),
        Just(json!(null)),
        Just(json!("#")),
        Just(json!("#/$defs/a")),
        Just(json!("#/properties/x")),
        Just(json!("https://example.com/s.json")),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        "[a-z]{0,3}".prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        let keys = prop::sample::select(vec![
            "type",
            "properties",
            "required",
            "items",
            "enum",
            "const",
            "oneOf",
            "anyOf",
            "allOf",
            "$ref",
            "$defs",
            "definitions",
            "default",
            "title",
            "description",
            "format",
            "minItems",
            "maxItems",
            "minimum",
            "examples",
            "a",
            "x",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys, inner), 0..5).prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
            )),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any schema-like JSON: the spec, the form, a submit, the raw mode and
    /// `--set` typing never panic, and a sent value validates.
    #[test]
    fn any_schema_is_handled_without_panic(schema in arb_schemaish(), text in "[a-z0-9 ,]{0,6}") {
        let spec = schema::form_spec(&schema);
        prop_assert!(!spec.fields.is_empty());
        let _ = schema::mcp_fit(&schema);
        let _ = schema::input_from_assignments(Some(&schema), &[format!("x={text}"), format!("a={text}")]);
        if schema.is_object() {
            let mut app = open(schema.clone());
            type_into(&mut app, &text);
            app.handle_key(key(KeyCode::Tab));
            app.handle_key(ch(' '));
            app.handle_key(key(KeyCode::Right));
            app.handle_key(ctrl('r'));
            app.handle_key(ctrl('r'));
            if let [Effect::ProvideInput { value, .. }] = app.handle_key(ctrl('s')).as_slice() {
                prop_assert_eq!(schema::validate(&schema, value), Ok(()));
            }
        }
    }
}
