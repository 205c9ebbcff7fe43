//! Any bytes given as a store file: loading never panics, and a store that
//! loads writes back to a file that loads to the same tasks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    rudder_testkit::fuzzing::check_store_bytes(Path::new("fuzz.json"), data);
});
