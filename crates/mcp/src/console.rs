//! What `rudder mcp` says on stderr (stdout is the protocol's over stdio),
//! and its exit codes: apart from the crate root so that the transports
//! reach them without importing the module that starts them.

use std::io::Write as _;

/// Exit code of a usage error (a catalogue or address that cannot be used).
pub const EXIT_USAGE: i32 = 2;

/// Say something on stderr (stdout is the protocol's over stdio).
pub(crate) fn say(text: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "rudder mcp: {}",
        rudder_model::text::sanitize(text)
    );
}
