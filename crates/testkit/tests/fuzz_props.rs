//! Short property-test versions of the fuzz targets in `fuzz/` (the long
//! runs: `cargo +nightly fuzz run load_store`, see docs/durability.md), plus the
//! inputs the fuzzers found, kept as regression tests.

use std::path::Path;

use proptest::prelude::*;
use rudder_testkit::fuzzing::{check_sanitize, check_schema_input, check_store_bytes};

const VALID: &str = r#"{
  "t1": {"task_id": "t1", "status": "input_required",
         "input_schema": {"type": "object", "required": ["service"]},
         "input_value": null, "result": null, "idempotency_key": "k",
         "updated_at": "2026-01-01T00:00:00+02:00", "revision": 3,
         "progress": {"current": 1, "total": 4}, "extra_field": [1.5, "ü", {"x": null}],
         "history": [{"status": "working", "at": "2026-01-01T00:00:00Z"}]}
}"#;

/// Small edits of a valid store: byte flips, cuts and insertions.
fn mutated_store() -> impl Strategy<Value = Vec<u8>> {
    (
        0..VALID.len(),
        any::<u8>(),
        prop_oneof![Just(0u8), Just(1), Just(2)],
    )
        .prop_map(|(at, byte, kind)| {
            let mut b = VALID.as_bytes().to_vec();
            match kind {
                0 => b[at] = byte,
                1 => b.truncate(at),
                _ => b.insert(at, byte),
            }
            b
        })
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        ".{0,8}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn mutated_stores_load_or_are_reported(bytes in mutated_store()) {
        check_store_bytes(Path::new("p.json"), &bytes);
    }

    #[test]
    fn arbitrary_bytes_load_or_are_reported(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        check_store_bytes(Path::new("p.json"), &bytes);
    }

    #[test]
    fn unknown_fields_of_any_shape_round_trip(extra in json_value()) {
        let mut store: serde_json::Value = serde_json::from_str(VALID).expect("valid");
        store["t1"]["zz_unknown"] = extra;
        check_store_bytes(Path::new("p.json"), store.to_string().as_bytes());
    }

    #[test]
    fn schema_typing_and_validation_never_panic(
        ty in prop_oneof![Just("string"), Just("integer"), Just("number"), Just("boolean"), Just("array")],
        raw in ".{0,12}",
        input in json_value(),
    ) {
        let text = format!(
            "{{\"type\":\"object\",\"properties\":{{\"f\":{{\"type\":\"{ty}\"}}}},\"required\":[\"f\"]}}\nf={raw}\n{input}"
        );
        check_schema_input(&text);
    }

    #[test]
    fn sanitized_text_is_inert(text in "(\\PC|\\p{Cc}|\u{1b}\\[[0-9;]{0,4}[A-Za-z]|\u{1b}\\][^\u{7}]{0,5}\u{7}|[\u{202a}-\u{202e}\u{2066}-\u{2069}\u{9b}])*", width in 0usize..200) {
        check_sanitize(&text, width);
    }
}

/// Inputs kept as regression tests: edge cases of each target, and every
/// input a fuzzer ever reported (none so far). The file name's prefix says
/// which check replays it.
#[test]
fn kept_inputs_stay_fixed() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz_regressions");
    let mut replayed = [0; 3];
    for entry in std::fs::read_dir(dir).expect("tests/fuzz_regressions exists") {
        let path = entry.expect("entry").path();
        let bytes = std::fs::read(&path).expect("read regression input");
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with("load_store") {
            check_store_bytes(Path::new("r.json"), &bytes);
            replayed[0] += 1;
        } else if name.starts_with("schema_input") {
            check_schema_input(&String::from_utf8_lossy(&bytes));
            replayed[1] += 1;
        } else if name.starts_with("sanitize") {
            let width = bytes.first().copied().unwrap_or(0) as usize;
            check_sanitize(&String::from_utf8_lossy(&bytes), width);
            replayed[2] += 1;
        }
    }
    assert!(
        replayed.iter().all(|&n| n > 0),
        "each target keeps inputs: {replayed:?}"
    );
}
