//! The input form driven by keys: every kind of field typed into, choices
//! toggled, unchosen required fields refused, the raw JSON mode, and the
//! value that is sent.

use crossterm::event::KeyCode;
use rudder_model::schema::Scalar;
use rudder_model::task::{Status, TaskMap};
use rudder_testkit::tui::*;
use rudder_tui::app::{App, Popup};
use rudder_tui::form::{FieldKind, Form};
use rudder_tui::update::Effect;
use serde_json::{Value, json};

fn form(app: &App) -> &Form {
    match &app.popup {
        Popup::Form(f) => f,
        other => panic!("expected the form, got {other:?}"),
    }
}

/// An app whose only task waits for input with `schema`, form open.
fn open(schema: Value) -> App {
    let mut t = task(1, Status::InputRequired, "INC-7 ask", 10, 1);
    t.input_schema = Some(schema);
    t.status_message = Some("which service?".into());
    let tasks: TaskMap = [(t.task_id.clone(), t)].into_iter().collect();
    let mut app = app_with(tasks);
    app.handle_key(ch('i'));
    form(&app);
    app
}

fn sent(effects: &[Effect]) -> Option<&Value> {
    match effects {
        [Effect::ProvideInput { value, .. }] => Some(value),
        [] => None,
        other => panic!("unexpected effects {other:?}"),
    }
}

fn tab(app: &mut App) {
    app.handle_key(key(KeyCode::Tab));
}

/// Every kind of field in one schema.
pub fn every_kind() -> Value {
    json!({
        "type": "object",
        "required": ["service", "severity", "page", "window", "tags", "at"],
        "properties": {
            "at": {"type": "string", "title": "Started at", "format": "date-time", "description": "when it began"},
            "severity": {"type": "string", "title": "Severity", "oneOf": [
                {"const": "p1", "title": "Page now"}, {"const": "p3", "title": "Tomorrow"}]},
            "page": {"type": "boolean", "title": "Page the owner"},
            "env": {"enum": ["prod", "staging"], "default": "prod"},
            "tags": {"type": "array", "minItems": 1, "items": {"enum": ["db", "net", "disk"]}},
            "ports": {"type": "array", "items": {"type": "integer"}},
            "ratio": {"type": "number", "maximum": 1},
            "window": {"type": "object", "required": ["minutes"], "properties": {
                "minutes": {"type": "integer", "minimum": 1, "default": 30}}},
            "note": {"type": ["string", "null"]},
            "target": {"oneOf": [{"type": "object", "required": ["host"]}, {"type": "object", "required": ["ip"]}]}
        }
    })
}

#[test]
fn the_seed_schema_takes_a_plain_name() {
    let mut app = open(json!({"type": "object", "required": ["service"]}));
    let f = form(&app);
    assert_eq!(f.fields.len(), 1);
    assert_eq!(f.fields[0].name, "service");
    assert_eq!(f.fields[0].kind, FieldKind::Text(Scalar::Text));
    assert!(f.fields[0].required);
    type_text(&mut app, "payments");
    let effects = app.handle_key(ctrl('s'));
    assert_eq!(sent(&effects), Some(&json!({"service": "payments"})));
}

#[test]
fn every_field_kind_is_built_from_the_spec() {
    let app = open(every_kind());
    let f = form(&app);
    let labels: Vec<String> = f.fields.iter().map(|f| f.label()).collect();
    assert_eq!(
        labels,
        [
            "Started at",
            "Severity",
            "Page the owner",
            "env",
            "tags",
            "ports",
            "ratio",
            "window › minutes",
            "note",
            "target",
            "service"
        ]
    );
    let kinds: Vec<&str> = f.fields.iter().map(|f| f.type_label()).collect();
    assert_eq!(
        kinds,
        [
            "text",
            "choice",
            "yes/no",
            "choice",
            "choose any",
            "list of integers",
            "number",
            "integer",
            "text",
            "JSON",
            "text"
        ]
    );
    // Nothing answered that nobody picked.
    assert!(matches!(
        f.fields[1].kind,
        FieldKind::Choice { chosen: None, .. }
    ));
    assert_eq!(f.fields[2].kind, FieldKind::Toggle(None));
    // Defaults are filled, and marked.
    assert!(matches!(
        f.fields[3].kind,
        FieldKind::Choice {
            chosen: Some(0),
            ..
        }
    ));
    assert!(f.fields[3].is_default);
    assert_eq!(f.fields[7].input.value(), "30");
    assert!(f.fields[7].is_default);
    assert!(!f.fields[0].is_default);
    // Titles are shown, consts are sent.
    match &f.fields[1].kind {
        FieldKind::Choice {
            labels, options, ..
        } => {
            assert_eq!(labels, &["Page now", "Tomorrow"]);
            assert_eq!(options, &[json!("p1"), json!("p3")]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.message.as_deref(), Some("which service?"));
}

#[test]
fn unchosen_required_fields_refuse_the_submit_until_chosen() {
    let mut app = open(every_kind());
    let effects = app.handle_key(ctrl('s'));
    assert!(sent(&effects).is_none(), "nothing is sent");
    let f = form(&app);
    let err = |i: usize| f.fields[i].error.clone().unwrap_or_default();
    assert!(err(1).contains("not chosen yet"), "severity: {}", err(1));
    assert!(err(2).contains("not chosen yet"), "page: {}", err(2));
    assert!(err(0).contains("required"), "at: {}", err(0));
    assert!(
        err(4).contains("/tags") || err(4).contains("fewer") || !err(4).is_empty(),
        "tags: {}",
        err(4)
    );
    assert_eq!(f.focus, 0, "the focus goes to the first problem");
    // Choosing clears the field's error.
    tab(&mut app);
    app.handle_key(key(KeyCode::Right));
    let f = form(&app);
    assert!(f.fields[1].error.is_none());
    assert!(matches!(
        f.fields[1].kind,
        FieldKind::Choice {
            chosen: Some(0),
            ..
        }
    ));
}

#[test]
fn typing_into_every_kind_sends_the_typed_value() {
    let mut app = open(every_kind());
    type_text(&mut app, "2026-01-15T12:00:00Z");
    tab(&mut app);
    app.handle_key(key(KeyCode::Left)); // severity: the last, "Tomorrow"
    tab(&mut app);
    app.handle_key(ch(' ')); // page: yes
    app.handle_key(ch(' ')); // page: no
    tab(&mut app);
    app.handle_key(key(KeyCode::Right)); // env: staging
    tab(&mut app);
    app.handle_key(ch(' ')); // tags: db
    app.handle_key(key(KeyCode::Right));
    app.handle_key(key(KeyCode::Right));
    app.handle_key(ch(' ')); // tags: disk
    tab(&mut app);
    type_text(&mut app, "80, 443");
    tab(&mut app);
    type_text(&mut app, "0.25");
    tab(&mut app);
    app.handle_key(key(KeyCode::Backspace));
    app.handle_key(key(KeyCode::Backspace));
    type_text(&mut app, "45");
    assert!(
        !form(&app).fields[7].is_default,
        "an edited default is the person's"
    );
    tab(&mut app);
    tab(&mut app); // note: left empty
    type_text(&mut app, "{\"host\": \"db1\"}");
    tab(&mut app);
    type_text(&mut app, "payments");
    let effects = app.handle_key(key(KeyCode::Enter));
    assert_eq!(
        sent(&effects),
        Some(&json!({
            "at": "2026-01-15T12:00:00Z",
            "severity": "p3",
            "page": false,
            "env": "staging",
            "tags": ["db", "disk"],
            "ports": [80, 443],
            "ratio": 0.25,
            "window": {"minutes": 45},
            "target": {"host": "db1"},
            "service": "payments"
        }))
    );
}

#[test]
fn a_wrong_format_shows_at_its_field_when_the_focus_leaves_it() {
    let mut app = open(every_kind());
    type_text(&mut app, "yesterday");
    tab(&mut app);
    let f = form(&app);
    let e = f.fields[0].error.clone().expect("an error at the field");
    assert!(e.contains("date-time"), "{e}");
    assert_eq!(f.focus, 1, "the focus moved on all the same");
    // A default left alone is not checked on the way past.
    assert!(f.fields[7].error.is_none());
}

#[test]
fn multi_select_bounds_are_enforced() {
    let mut app = open(json!({"type": "object", "properties": {
        "tags": {"type": "array", "maxItems": 1, "items": {"anyOf": [
            {"const": "a", "title": "Alpha"}, {"const": "b", "title": "Beta"}]}}}}));
    app.handle_key(ch(' '));
    app.handle_key(key(KeyCode::Right));
    app.handle_key(ch(' '));
    assert!(sent(&app.handle_key(ctrl('s'))).is_none());
    let e = form(&app).fields[0].error.clone().unwrap_or_default();
    assert!(!e.is_empty(), "too many chosen is said at the field");
    app.handle_key(ch(' ')); // Beta off again
    assert_eq!(
        sent(&app.handle_key(ctrl('s'))),
        Some(&json!({"tags": ["a"]}))
    );
}

#[test]
fn an_optional_choice_and_toggle_can_go_back_to_not_given() {
    let mut app = open(json!({"type": "object", "properties": {
        "env": {"enum": ["prod", "dev"]}, "deep": {"type": "boolean"}}}));
    app.handle_key(key(KeyCode::Right)); // prod
    app.handle_key(key(KeyCode::Left)); // not given
    tab(&mut app);
    app.handle_key(ch(' ')); // yes
    app.handle_key(ch(' ')); // no
    app.handle_key(ch(' ')); // not given
    assert_eq!(sent(&app.handle_key(ctrl('s'))), Some(&json!({})));
}

#[test]
fn raw_json_mode_round_trips_with_the_fields() {
    let mut app = open(every_kind());
    type_text(&mut app, "2026-01-15T12:00:00Z");
    app.handle_key(ctrl('r'));
    let f = form(&app);
    let raw = f.raw.as_ref().expect("raw mode");
    let shown: Value = serde_json::from_str(raw.input.value()).expect("JSON");
    assert_eq!(
        shown,
        json!({"at": "2026-01-15T12:00:00Z", "env": "prod", "tags": [], "window": {"minutes": 30}})
    );
    // Edit the whole input as JSON and go back: the fields show it.
    app.handle_key(ctrl('u'));
    type_text(
        &mut app,
        r#"{"service": "db", "severity": "p1", "page": true, "tags": ["net"], "window": {"minutes": 5}, "at": "2026-01-15T12:00:00Z"}"#,
    );
    app.handle_key(ctrl('r'));
    let f = form(&app);
    assert!(f.raw.is_none(), "back to the fields");
    assert_eq!(f.fields[10].input.value(), "db");
    assert_eq!(f.fields[2].kind, FieldKind::Toggle(Some(true)));
    assert_eq!(f.fields[7].input.value(), "5");
    assert!(
        matches!(f.fields[3].kind, FieldKind::Choice { chosen: None, .. }),
        "env was left out of the JSON"
    );
    let effects = app.handle_key(ctrl('s'));
    assert_eq!(
        sent(&effects),
        Some(
            &json!({"service": "db", "severity": "p1", "page": true, "tags": ["net"],
            "window": {"minutes": 5}, "at": "2026-01-15T12:00:00Z"})
        )
    );
}

#[test]
fn raw_json_mode_keeps_what_the_fields_cannot_show_and_submits_it() {
    let mut app = open(json!({"type": "object", "required": ["service"]}));
    app.handle_key(ctrl('r'));
    app.handle_key(ctrl('u'));
    type_text(&mut app, r#"{"service": "db", "extra": [1]}"#);
    app.handle_key(ctrl('r'));
    let f = form(&app);
    let raw = f.raw.as_ref().expect("still in raw mode");
    assert!(
        raw.error
            .clone()
            .unwrap_or_default()
            .contains("staying in JSON mode")
    );
    // Not JSON at all: also stays.
    app.handle_key(ctrl('u'));
    type_text(&mut app, "{nope");
    app.handle_key(ctrl('r'));
    assert!(form(&app).raw.is_some());
    app.handle_key(ctrl('u'));
    type_text(&mut app, r#"{"service": "db", "extra": [1]}"#);
    let effects = app.handle_key(key(KeyCode::Enter));
    assert_eq!(
        sent(&effects),
        Some(&json!({"service": "db", "extra": [1]}))
    );
}

#[test]
fn a_nullable_required_field_left_empty_sends_null() {
    let mut app = open(json!({"type": "object", "required": ["note"],
        "properties": {"note": {"type": ["string", "null"]}}}));
    assert_eq!(
        sent(&app.handle_key(ctrl('s'))),
        Some(&json!({"note": null}))
    );
}

#[test]
fn list_fields_take_commas_or_a_json_array() {
    let mut app = open(json!({"type": "object", "properties": {
        "hosts": {"type": "array", "items": {"type": "string"}}}}));
    type_text(&mut app, "a, b ,c");
    assert_eq!(
        sent(&app.handle_key(ctrl('s'))),
        Some(&json!({"hosts": ["a", "b", "c"]}))
    );
    let mut app = open(json!({"type": "object", "properties": {
        "hosts": {"type": "array", "items": {"type": "string"}}}}));
    type_text(&mut app, r#"["a,b", "c"]"#);
    assert_eq!(
        sent(&app.handle_key(ctrl('s'))),
        Some(&json!({"hosts": ["a,b", "c"]}))
    );
    let mut app = open(json!({"type": "object", "properties": {
        "ports": {"type": "array", "items": {"type": "integer"}}}}));
    type_text(&mut app, "80, http");
    assert!(sent(&app.handle_key(ctrl('s'))).is_none());
    let e = form(&app).fields[0].error.clone().unwrap_or_default();
    assert!(e.contains("expected an integer"), "{e}");
}

#[test]
fn a_question_too_long_for_the_form_says_it_goes_on() {
    let mut t = task(1, Status::InputRequired, "INC-7 ask", 10, 1);
    t.input_schema = Some(json!({"type": "object", "properties": {"s": {"type": "string"}}}));
    let question = format!("{}END", "why? ".repeat(4000));
    t.status_message = Some(question.clone());
    let f = Form::for_task(&t);
    let shown = f.message.as_deref().expect("the question");
    assert!(!shown.contains("END"), "the form shows the head of it");
    let total = question.chars().count();
    // The form keeps the first 2 × MAX_CHARS characters.
    let kept = 2 * rudder_tui::shown::MAX_CHARS;
    assert!(
        shown.ends_with(&format!(
            "… ({} more characters: `rudder get ID` shows them all)",
            total - kept
        )),
        "{}",
        &shown[shown.len() - 80..]
    );
    // A question that fits is shown as is.
    t.status_message = Some("which service?".into());
    assert_eq!(
        Form::for_task(&t).message.as_deref(),
        Some("which service?")
    );
}
