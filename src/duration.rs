//! Durations as on-call engineers type them: `90s`, `15m`, `2h`, `1h30m`, `500ms`.

use std::time::Duration;

/// Parse a duration such as `90s`, `15m`, `2h`, `1d` or `1h30m`. A bare
/// number is refused: the unit is part of what the user means.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("{text:?}: add a unit, e.g. {t}s, {t}m or {t}h"));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("{text:?} is not a duration like 90s, 15m or 2h: {e}"))
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
    }
}
