//! The input form for the main schema shapes, drawn at 80×24 and 120×40 on
//! ratatui's `TestBackend` (fixed clock and ids, so stable), compared with
//! `insta` snapshots.

use crossterm::event::KeyCode;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use rudder_model::task::{Status, TaskMap};
use rudder_testkit::tui::*;
use rudder_tui::app::App;
use rudder_tui::view::{self, Theme};
use serde_json::{Value, json};

fn screen(app: &mut App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    terminal
        .draw(|f| view::draw(f, app, &Theme::DEFAULT))
        .expect("draw");
    screen_text(&terminal)
}

fn open(schema: Value, message: &str) -> App {
    let mut t = task(1, Status::InputRequired, "INC-1042 checkout latency", 20, 3);
    t.input_schema = Some(schema);
    t.status_message = Some(message.into());
    let tasks: TaskMap = [(t.task_id.clone(), t)].into_iter().collect();
    let mut app = app_with(tasks);
    app.handle_key(ch('i'));
    app
}

/// Both sizes of one form, in one snapshot each.
fn both(name: &str, app: &mut App) {
    insta::assert_snapshot!(format!("{name}_80x24"), screen(app, 80, 24));
    insta::assert_snapshot!(format!("{name}_120x40"), screen(app, 120, 40));
}

fn mcp_schema() -> Value {
    json!({
        "type": "object",
        "required": ["name", "size"],
        "properties": {
            "name": {"type": "string", "title": "Your name", "description": "as on the badge", "minLength": 1, "maxLength": 50, "examples": ["Ada"]},
            "email": {"type": "string", "format": "email", "title": "E-mail"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "subscribe": {"type": "boolean", "default": false, "title": "Subscribe"},
            "size": {"type": "string", "title": "Size", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
            "toppings": {"type": "array", "title": "Toppings", "items": {"type": "string", "enum": ["ham", "egg", "cheese"]}, "minItems": 1}
        }
    })
}

#[test]
fn form_for_the_seed_schema() {
    let mut app = open(
        json!({"type": "object", "required": ["service"]}),
        "which service should I look at?",
    );
    type_text(&mut app, "payments");
    both("seed", &mut app);
}

#[test]
fn form_for_mcp_elicitation_shapes() {
    let mut app = open(mcp_schema(), "a few details, please");
    both("mcp", &mut app);
}

#[test]
fn form_with_a_long_question_and_descriptions_in_full() {
    let question = "The checkout latency doubled at 11:40 right after deploy 4711. \
        I compared the p99 of every service on the request path and two of them moved: \
        payments and inventory. Which one should I diagnose first? If you are not sure, \
        pick payments: its error rate moved too.";
    let mut app = open(
        json!({"type": "object", "required": ["service"], "properties": {
            "service": {"type": "string", "enum": ["payments", "inventory"],
                "description": "The service whose traces, logs and recent deploys I will read for the next twenty minutes; I will not look at the other one unless you ask again."},
            "window": {"type": "object", "title": "Window", "properties": {
                "minutes": {"type": "integer", "minimum": 1, "maximum": 120, "default": 30},
                "from": {"type": "string", "format": "date-time"}}}
        }}),
        question,
    );
    both("long_question", &mut app);
}

#[test]
fn a_long_form_scrolls_to_the_focused_field() {
    let mut props = serde_json::Map::new();
    for i in 0..25 {
        props.insert(
            format!("field_{i:02}"),
            json!({"type": "string", "description": format!("description of field {i}")}),
        );
    }
    let mut app = open(
        json!({"type": "object", "properties": props}),
        "many questions",
    );
    for _ in 0..20 {
        app.handle_key(key(KeyCode::Tab));
    }
    type_text(&mut app, "here");
    both("scrolled", &mut app);
}

#[test]
fn form_with_unchosen_fields_refused() {
    let mut app = open(mcp_schema(), "a few details, please");
    type_text(&mut app, "Ada");
    app.handle_key(ctrl('s'));
    both("refused", &mut app);
}

#[test]
fn form_in_raw_json_mode() {
    let mut app = open(mcp_schema(), "a few details, please");
    type_text(&mut app, "Ada");
    app.handle_key(ctrl('r'));
    both("raw", &mut app);
}

#[test]
fn form_with_fallbacks_to_json() {
    let mut app = open(
        json!({"type": "object", "properties": {
            "target": {"oneOf": [{"type": "object", "required": ["host"]}, {"type": "object", "required": ["ip"]}]},
            "remote": {"$ref": "https://example.com/schemas/x.json"},
            "hosts": {"type": "array", "items": {"type": "string"}},
            "note": {"type": ["string", "null"]}
        }}),
        "where?",
    );
    both("fallbacks", &mut app);
}

/// The largest form the spec allows, every field a choice of the most
/// options with a long description, draws in bounded time.
#[test]
fn a_huge_form_draws_in_bounded_time() {
    let mut props = serde_json::Map::new();
    let options: Vec<String> = (0..1_000).map(|i| format!("option-{i}")).collect();
    for i in 0..200 {
        props.insert(
            format!("f{i}"),
            json!({"enum": options, "description": "long ".repeat(2_000)}),
        );
        props.insert(
            format!("m{i}"),
            json!({"type": "array", "items": {"enum": options}}),
        );
    }
    // More than the spec allows: one JSON field.
    let mut app = open(json!({"type": "object", "properties": props.clone()}), "q");
    let start = std::time::Instant::now();
    let text = screen(&mut app, 120, 40);
    assert!(text.contains("too many"), "{text}");
    // Exactly as many as allowed.
    let few: serde_json::Map<String, Value> = props.into_iter().take(200).collect();
    let mut app = open(
        json!({"type": "object", "properties": few}),
        &"why? ".repeat(5_000),
    );
    for _ in 0..199 {
        app.handle_key(key(KeyCode::Tab));
    }
    for _ in 0..600 {
        app.handle_key(key(KeyCode::Right));
    }
    let text = screen(&mut app, 120, 40);
    assert!(text.contains("more"), "{text}");
    screen(&mut app, 80, 24);
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
}

/// Secret answers (issue 32 item 5): a `writeOnly` or `format: password`
/// field is typed as a password (bullets) and marked `· secret`.
fn secret_schema() -> Value {
    json!({"type": "object", "required": ["service"], "properties": {
        "service": {"type": "string"},
        "token": {"type": "string", "writeOnly": true, "description": "the API token"},
        "pin": {"type": "string", "format": "password"}
    }})
}

#[test]
fn a_secret_field_is_typed_as_bullets() {
    let mut app = open(secret_schema(), "credentials for the payments API");
    type_text(&mut app, "payments");
    app.handle_key(key(KeyCode::Tab));
    type_text(&mut app, "hunter2-tok");
    for (w, h) in [(80, 24), (120, 40)] {
        let shown = screen(&mut app, w, h);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("•••••••••••"), "{shown}");
    }
    both("secret", &mut app);
    // The JSON mode holds every value: masked too.
    app.handle_key(ctrl('r'));
    let raw = screen(&mut app, 120, 40);
    assert!(!raw.contains("hunter2"), "{raw}");
}

/// The detail pane and the task view show a secret answer masked, and
/// the schema's field marked `· secret`.
#[test]
fn a_secret_answer_is_masked_in_the_detail_and_the_task_view() {
    let mut t = task(1, Status::Working, "INC-1042 checkout latency", 20, 3);
    t.input_schema = Some(secret_schema());
    t.input_value = Some(json!({"service": "payments", "token": "hunter2-tok", "pin": "2718"}));
    let tasks: TaskMap = [(t.task_id.clone(), t)].into_iter().collect();
    let mut app = app_with(tasks);
    let detail = screen(&mut app, 120, 40);
    assert!(
        !detail.contains("hunter2") && !detail.contains("2718"),
        "{detail}"
    );
    insta::assert_snapshot!("secret_detail_120x40", detail);
    app.handle_key(ch('v'));
    let view = screen(&mut app, 120, 40);
    assert!(
        !view.contains("hunter2") && !view.contains("2718"),
        "{view}"
    );
    insta::assert_snapshot!("secret_task_view_120x40", view);
}
