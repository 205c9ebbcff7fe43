//! A schema, `--set` assignments and a JSON input: typing and validation
//! never panic, and whatever validates is an object.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        rudder_testkit::fuzzing::check_schema_input(text);
    }
});
