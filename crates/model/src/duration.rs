//! Durations as on-call engineers type them: `90s`, `15m`, `2h`, `1h30m`, `500ms`.

use std::time::Duration;

/// The length of a year as durations are read (`1y`): 365.25 days, as
/// `humantime` counts it.
const YEAR: Duration = Duration::from_secs(31_557_600);

/// The longest duration accepted, `100y` itself included: long enough for
/// any retention, short enough that every computation with it (milliseconds
/// in a `u64`, a date plus it) stays in range.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * YEAR.as_secs());

/// Parse a duration such as `90s`, `15m`, `2h`, `1d` or `1h30m`. A bare
/// number is refused: the unit is part of what the user means.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("{text:?}: add a unit, e.g. {t}s, {t}m or {t}h"));
    }
    let d = humantime::parse_duration(t)
        .map_err(|e| format!("{text:?} is not a duration like 90s, 15m or 2h: {e}"))?;
    if d > MAX_DURATION {
        return Err(format!("{text:?} is too long: at most 100 years"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("15").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("101y").is_err());
        // The cap is inclusive: exactly 100 years, however it is written.
        assert_eq!(parse_duration("100y"), Ok(MAX_DURATION));
        assert_eq!(parse_duration("36525d"), Ok(MAX_DURATION));
        assert!(parse_duration("100y 1s").is_err());
        assert!(parse_duration("584542046y 2859952616ms").is_err());
    }
}
