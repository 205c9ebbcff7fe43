//! A tiny deterministic generator for tests that pick at random: the
//! seed is printed, and `RUDDER_TEST_SEED` replays a failure.

use std::time::{SystemTime, UNIX_EPOCH};

/// A tiny deterministic generator (the seed is printed, so a failure can be replayed).
pub struct Rng(u64);

impl Rng {
    /// Seeded from `RUDDER_TEST_SEED`, else the clock; the seed is printed.
    pub fn from_env_or_time() -> Rng {
        let seed = std::env::var("RUDDER_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos() as u64
            });
        eprintln!("RUDDER_TEST_SEED={seed}");
        Rng(seed | 1)
    }
    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
