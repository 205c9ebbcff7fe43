//! `$RUDDER_LOCK_TIMEOUT`: how long a writer waits for the store lock,
//! parsed and bounded here for every backend (read from the environment
//! once, by [`crate::settings`]).
//!
//! The bound is what every backend can honour: SQLite takes its busy
//! timeout in milliseconds as a C `int` (rusqlite panics past about 24.8
//! days) and PostgreSQL's connection and socket timeouts refuse huge
//! values. A day is already far longer than any writer should wait.

use std::time::Duration;

/// The longest lock timeout rudder accepts.
pub const MAX_LOCK_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// The environment variable that sets the lock timeout.
pub const LOCK_TIMEOUT_VAR: &str = "RUDDER_LOCK_TIMEOUT";

/// A lock timeout as `$RUDDER_LOCK_TIMEOUT` spells it (`5s`, `2m`, at most
/// [`MAX_LOCK_TIMEOUT`]); the error says why not.
pub fn parse_lock_timeout(text: &str) -> Result<Duration, String> {
    let d = rudder_model::duration::parse_duration(text)?;
    if d > MAX_LOCK_TIMEOUT {
        return Err(format!(
            "{text:?} is longer than the longest lock timeout, 24h"
        ));
    }
    Ok(d)
}

/// A lock timeout a library caller chose, brought within what every
/// backend can honour.
pub fn bounded(timeout: Duration) -> Duration {
    timeout.min(MAX_LOCK_TIMEOUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_is_the_longest_lock_timeout() {
        assert_eq!(parse_lock_timeout("24h"), Ok(MAX_LOCK_TIMEOUT));
        assert_eq!(parse_lock_timeout("5s"), Ok(Duration::from_secs(5)));
        let e = parse_lock_timeout("25d").unwrap_err();
        assert!(e.contains("24h"), "{e}");
        assert!(parse_lock_timeout("5").is_err());
        assert_eq!(bounded(Duration::from_secs(u64::MAX)), MAX_LOCK_TIMEOUT);
    }
}
