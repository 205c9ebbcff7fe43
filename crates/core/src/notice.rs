//! What a process tells its user while an operation waits (a database
//! server that cannot be reached): backends say it here, and the binary
//! decides where it goes (stderr when that is a terminal; nowhere
//! otherwise, and nowhere in a library that set nothing).

use std::sync::OnceLock;

static HOOK: OnceLock<fn(&str)> = OnceLock::new();

/// Send every waiting notice of this process to `hook` (the first call
/// wins; later ones are ignored).
pub fn set_waiting_hook(hook: fn(&str)) {
    let _ = HOOK.set(hook);
}

/// Whether anyone listens to waiting notices (a backend need not prepare
/// one otherwise).
pub fn listening() -> bool {
    HOOK.get().is_some()
}

/// Tell the user what the process waits for (one line, no secrets).
pub fn waiting(message: &str) {
    if let Some(hook) = HOOK.get() {
        hook(message);
    }
}
