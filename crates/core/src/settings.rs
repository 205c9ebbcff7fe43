//! The settings a store takes from the process's environment, read once at
//! the edge and passed in.
//!
//! No backend reads the environment: each takes a [`Settings`] (or the
//! defaults) when it is made. The binary reads them once at start and
//! refuses a bad value as a usage error; the facade (`rudder_store`) reads
//! them once per process for callers that open a store by URL without
//! settings of their own (see [`Settings::of_process`]).

use std::sync::OnceLock;
use std::time::Duration;

use super::DEFAULT_LOCK_TIMEOUT;
use super::error::human_bytes;
use super::lock_timeout::{LOCK_TIMEOUT_VAR, parse_lock_timeout};

/// Files larger than this are refused instead of being read into memory.
/// 10k tasks take about 5 MB; this leaves room for a hundred times that.
pub const MAX_STORE_BYTES: u64 = 512 * 1024 * 1024;

/// The environment variable that lowers the JSON file store's size limit.
pub const MAX_STORE_BYTES_VAR: &str = "RUDDER_MAX_STORE_BYTES";

/// What a store is configured with beyond its URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// How long a writer waits for the store lock, a connection or a
    /// statement (`$RUDDER_LOCK_TIMEOUT`; 30 s by default).
    pub lock_timeout: Duration,
    /// The JSON file store's size limit, when lowered
    /// (`$RUDDER_MAX_STORE_BYTES`; [`MAX_STORE_BYTES`] by default).
    pub max_store_bytes: Option<u64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            max_store_bytes: None,
        }
    }
}

/// A setting of the environment that is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct SettingsError {
    /// The variable, such as `RUDDER_LOCK_TIMEOUT`.
    pub variable: &'static str,
    /// What is wrong with its value.
    pub message: String,
}

impl Settings {
    /// The settings the process's environment gives, or the first that is
    /// not valid.
    pub fn from_env() -> Result<Settings, SettingsError> {
        Self::from_vars(env_var)
    }

    /// The settings the variables `var` gives (`None`: not set), or the
    /// first that is not valid.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Settings, SettingsError> {
        let mut settings = Settings::default();
        if let Some(text) = var(LOCK_TIMEOUT_VAR) {
            settings.lock_timeout = parse_lock_timeout(&text).map_err(|message| SettingsError {
                variable: LOCK_TIMEOUT_VAR,
                message,
            })?;
        }
        if let Some(text) = var(MAX_STORE_BYTES_VAR) {
            settings.max_store_bytes =
                Some(parse_max_bytes(&text).map_err(|message| SettingsError {
                    variable: MAX_STORE_BYTES_VAR,
                    message,
                })?);
        }
        Ok(settings)
    }

    /// The process's settings, read from its environment on first use and
    /// kept: every store opened by URL alone in this process has the same.
    /// A value that is not valid means the default here (the binary
    /// refuses it with a usage error before it opens any store; a library
    /// caller that wants the error calls [`Settings::from_env`]).
    pub fn of_process() -> Settings {
        *PROCESS.get_or_init(|| Self::lenient(env_var))
    }

    /// [`Settings::from_vars`], each value that is not valid taken as not
    /// set (so its default), the others kept.
    fn lenient(var: impl Fn(&str) -> Option<String>) -> Settings {
        let valid = |name: &str| {
            let value = var(name)?;
            Self::from_vars(|n| (n == name).then(|| value.clone()))
                .is_ok()
                .then_some(value)
        };
        Self::from_vars(valid).unwrap_or_default()
    }

    /// Make these the process's settings ([`Settings::of_process`]), as
    /// the binary does with what it read and checked at start; `Err`: the
    /// process's settings were taken already (they stay as they were).
    pub fn set_for_process(self) -> Result<(), Settings> {
        PROCESS.set(self)
    }
}

static PROCESS: OnceLock<Settings> = OnceLock::new();

/// A variable of the environment; one that is not UTF-8 is read lossily,
/// so that it is refused as not valid rather than taken as not set.
fn env_var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// Read a size limit as `$RUDDER_MAX_STORE_BYTES` gives it: a number of
/// bytes from 1 to [`MAX_STORE_BYTES`].
pub fn parse_max_bytes(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_STORE_BYTES).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a number of bytes from 1 to {MAX_STORE_BYTES} ({}), got {text:?}",
            human_bytes(MAX_STORE_BYTES)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn unset_variables_give_the_defaults() {
        assert_eq!(Settings::from_vars(vars(&[])), Ok(Settings::default()));
        assert_eq!(Settings::default().lock_timeout, Duration::from_secs(30));
    }

    #[test]
    fn each_variable_sets_its_setting() {
        let s = Settings::from_vars(vars(&[
            ("RUDDER_LOCK_TIMEOUT", "5s"),
            ("RUDDER_MAX_STORE_BYTES", "4096"),
        ]))
        .unwrap();
        assert_eq!(s.lock_timeout, Duration::from_secs(5));
        assert_eq!(s.max_store_bytes, Some(4096));
    }

    #[test]
    fn leniently_a_bad_value_is_its_default_and_the_others_are_kept() {
        let s = Settings::lenient(vars(&[
            ("RUDDER_LOCK_TIMEOUT", "soon"),
            ("RUDDER_MAX_STORE_BYTES", "4096"),
        ]));
        assert_eq!(s.lock_timeout, DEFAULT_LOCK_TIMEOUT);
        assert_eq!(s.max_store_bytes, Some(4096));
    }

    #[test]
    fn a_bad_value_names_its_variable_and_why() {
        let e = Settings::from_vars(vars(&[("RUDDER_LOCK_TIMEOUT", "soon")])).unwrap_err();
        assert_eq!(e.variable, "RUDDER_LOCK_TIMEOUT");
        assert!(e.to_string().starts_with("RUDDER_LOCK_TIMEOUT: "), "{e}");
        let e = Settings::from_vars(vars(&[("RUDDER_MAX_STORE_BYTES", "0")])).unwrap_err();
        assert_eq!(e.variable, "RUDDER_MAX_STORE_BYTES");
        assert!(e.message.contains("from 1 to"), "{e}");
        let too_big = (MAX_STORE_BYTES + 1).to_string();
        assert!(Settings::from_vars(vars(&[("RUDDER_MAX_STORE_BYTES", &too_big)])).is_err());
    }
}
