//! The change feed's wake-up: `LISTEN` on a connection of its own.
//!
//! Every writing transaction sends `NOTIFY rudder_changes` (delivered at
//! its commit); a notification only says "look": the feed always reads
//! what changed from the `changes` table after its cursor, so a lost or
//! merged notification costs latency, never a change. The feed is also
//! woken when the listening connection is (re)made, to catch up on what was
//! committed while it was not listening, and its own periodic tick checks
//! the table whatever happens here.

use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use super::PostgresBackend;
use super::schema::CHANNEL;

/// How long to wait between tries to reach the server, at most.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

impl PostgresBackend {
    /// Listen for commits until `wake` returns false, calling it at every
    /// notification, at every (re)connection, and once a second while the
    /// server cannot be reached (so that the caller finds out and reports
    /// it). Blocks: run it on a thread of its own. The connection names
    /// itself `rudder-feed-PID` (`application_name`), so an operator can
    /// tell feeds from writers in `pg_stat_activity`.
    pub fn listen(&self, wake: &mut dyn FnMut() -> bool, alive: &dyn Fn() -> bool) {
        let name = format!("rudder-feed-{}", std::process::id());
        let mut backoff = Duration::from_millis(50);
        while alive() {
            let mut client = match self.connect_as(&name) {
                Ok(c) => c,
                Err(_) => {
                    if !wake() {
                        return;
                    }
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            if client.batch_execute(&format!("LISTEN {CHANNEL}")).is_err() {
                std::thread::sleep(backoff);
                continue;
            }
            backoff = Duration::from_millis(50);
            // Catch up on what was committed while not listening.
            if !wake() {
                return;
            }
            loop {
                let got = client
                    .notifications()
                    .timeout_iter(Duration::from_secs(1))
                    .next();
                match got {
                    Ok(Some(_)) => {
                        if !wake() {
                            return;
                        }
                    }
                    // A quiet second (or a connection that ended).
                    Ok(None) if !client.is_closed() => {
                        if !alive() {
                            return;
                        }
                    }
                    _ => break,
                }
            }
            // The connection broke: tell the caller at once (it reads, fails
            // and reports the server unreachable), then reconnect.
            if !wake() {
                return;
            }
        }
    }
}
