//! Any text: the sanitised form holds no control character, escape or bidi
//! override, and truncation never exceeds its width.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    rudder_testkit::fuzzing::check_sanitize(&text, data.first().copied().unwrap_or(0) as usize);
});
