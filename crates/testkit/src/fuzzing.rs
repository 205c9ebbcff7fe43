//! Properties checked by the fuzz targets in `fuzz/` and, on generated
//! inputs, by the test suite (`tests/fuzz_props.rs`). Each function panics
//! when the property does not hold.

use std::path::Path;

use unicode_width::UnicodeWidthStr;

use rudder_core::StoreError;
use rudder_file::{decode, encode};
use rudder_model::schema;
use rudder_model::text::{sanitize, truncate};

/// Loading any bytes either fails with a `Corrupt` error or gives tasks that
/// rudder writes back to a file that loads to the same tasks; and the quick
/// paths (the split read and the writers' check, with several threads at
/// any size, and the trusted path of a file rudder wrote) agree with the
/// whole-file parse.
pub fn check_store_bytes(path: &Path, bytes: &[u8]) {
    rudder_file::check_quick_paths(path, bytes);
    match decode(path, bytes) {
        Ok(tasks) => {
            let written = encode(&tasks, bytes.len());
            let again = match decode(path, &written) {
                Ok(t) => t,
                Err(e) => panic!("rudder cannot read what it wrote: {e}"),
            };
            assert_eq!(again, tasks, "a store does not round-trip");
        }
        Err(StoreError::Corrupt { .. }) => {}
        Err(other) => panic!("loading bytes gave a non-corrupt error: {other}"),
    }
}

/// The first line is a schema, the others `FIELD=VALUE` assignments, the last
/// also tried as a whole JSON input: typing and validation never panic, and
/// only objects validate as input.
pub fn check_schema_input(text: &str) {
    let mut lines = text.lines();
    let Some(Ok(schema)) = lines.next().map(serde_json::from_str::<serde_json::Value>) else {
        return;
    };
    if schema::check_schema(&schema).is_err() {
        return;
    }
    let assignments: Vec<String> = lines.map(str::to_string).collect();
    if let Ok(value) = schema::input_from_assignments(Some(&schema), &assignments) {
        assert!(value.is_object());
        let _ = schema::validate(&schema, &value);
    }
    if let Some(Ok(value)) = assignments
        .last()
        .map(|l| serde_json::from_str::<serde_json::Value>(l))
        && let Err(violations) = schema::validate(&schema, &value)
    {
        assert!(!violations.is_empty());
    }
}

/// Sanitised text holds nothing a terminal would interpret, and truncation
/// stays within its width.
pub fn check_sanitize(text: &str, width: usize) {
    let clean = sanitize(text);
    if let Some(c) = clean.chars().find(|c| {
        c.is_control()
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
    }) {
        panic!("sanitize({text:?}) kept {c:?}: {clean:?}");
    }
    let width = width % 200;
    let cut = truncate(&clean, width);
    assert!(
        cut.width() <= width,
        "truncate({clean:?}, {width}) is {} columns",
        cut.width()
    );
    assert_eq!(sanitize(&clean), clean, "sanitize is not idempotent");
}
