//! Reading the file's timestamps quickly.
//!
//! A store holds several timestamps per task, and chrono's general RFC 3339
//! parser is a large part of the cost of reading one. Timestamps in the form
//! rudder writes (`2026-11-29T17:35:15.123456789Z`) are read here directly;
//! anything else (offsets, lower case, spaces, leap seconds, odd lengths)
//! goes to chrono as before, so exactly the same strings are accepted, with
//! the same values.

use std::fmt;

use chrono::{DateTime, FixedOffset, NaiveDate, Utc};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// Write a time as `YYYY-MM-DDTHH:MM:SS.fffffffffZ`, always nine
/// fraction digits: text whose byte order is time order (a history
/// entry's time is ordered as text by the databases' trail indexes).
pub fn fixed<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    match fixed_bytes(t) {
        // Written digit by digit: chrono's `format` reads its format string
        // again for every time, a visible share of `list --json`.
        Some(b) => s.serialize_str(std::str::from_utf8(&b).map_err(serde::ser::Error::custom)?),
        // A year outside 0..=9999 or a leap second: chrono says how.
        None => s.collect_str(&t.format(FIXED)),
    }
}

/// [`fixed`]'s format, as chrono spells it.
const FIXED: &str = "%Y-%m-%dT%H:%M:%S%.9fZ";

/// `t` as [`fixed`] writes it, for a year in 0..=9999 and no leap second.
fn fixed_bytes(t: &DateTime<Utc>) -> Option<[u8; 30]> {
    use chrono::{Datelike, Timelike};
    let year = u32::try_from(t.year()).ok().filter(|y| *y <= 9999)?;
    let nanos = Some(t.nanosecond()).filter(|n| *n < 1_000_000_000)?;
    let mut b = *b"0000-00-00T00:00:00.000000000Z";
    let mut put = |at: std::ops::Range<usize>, mut v: u32| {
        for d in b[at].iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0..4, year);
    put(5..7, t.month());
    put(8..10, t.day());
    put(11..13, t.hour());
    put(14..16, t.minute());
    put(17..19, t.second());
    put(20..29, nanos);
    Some(b)
}

/// `YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z` with every field in range; `None` for
/// any other string (which may still be valid RFC 3339).
pub fn parse_canonical(s: &str) -> Option<DateTime<Utc>> {
    let b = s.as_bytes();
    if b.len() < 20 || b[b.len() - 1] != b'Z' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        b[range].iter().try_fold(0u32, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
        })
    };
    let punctuation = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if punctuation.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    // 60 is a leap second to chrono: leave it to chrono.
    if second > 59 {
        return None;
    }
    let nanos = match b.len() - 20 {
        0 => 0,
        n @ 2..=10 if b[19] == b'.' => num(20..19 + n)? * 10u32.pow(10 - n as u32),
        _ => return None,
    };
    let date = NaiveDate::from_ymd_opt(year as i32, month, day)?;
    Some(
        date.and_hms_nano_opt(hour, minute, second, nanos)?
            .and_utc(),
    )
}

/// Exactly what `DateTime<Utc>`'s `Deserialize` accepts, faster.
pub struct Time(pub DateTime<Utc>);

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Time;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                // chrono's own wording.
                f.write_str("an RFC 3339 formatted date and time string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Time, E> {
                match parse_canonical(s) {
                    Some(t) => Ok(Time(t)),
                    None => s
                        .parse::<DateTime<FixedOffset>>()
                        .map(|t| Time(t.with_timezone(&Utc)))
                        .map_err(E::custom),
                }
            }
        }
        d.deserialize_str(V)
    }
}

/// `deserialize_with` for a `DateTime<Utc>` field.
pub fn one<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    Time::deserialize(d).map(|t| t.0)
}

/// `deserialize_with` for an `Option<DateTime<Utc>>` field.
pub fn opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    Option::<Time>::deserialize(d).map(|t| t.map(|t| t.0))
}

#[cfg(test)]
mod tests {
    /// The digit-by-digit writer says exactly what chrono's format says.
    #[test]
    fn fixed_is_chronos_format_digit_by_digit() {
        use proptest::prelude::*;
        let mut runner = proptest::test_runner::TestRunner::default();
        // Years 0000 to 9999, any nanosecond.
        let range = (-62_167_219_200_i64..253_402_300_800, 0u32..1_000_000_000);
        runner
            .run(&range, |(secs, nanos)| {
                let t = DateTime::from_timestamp(secs, nanos).expect("in range");
                let b = fixed_bytes(&t).expect("a year in range");
                prop_assert_eq!(
                    std::str::from_utf8(&b).expect("ASCII"),
                    t.format(FIXED).to_string()
                );
                Ok(())
            })
            .expect("the same text");
        for t in [
            DateTime::from_timestamp(0, 0),
            DateTime::from_timestamp(253_402_300_799, 999_999_999),
            DateTime::from_timestamp(-62_167_219_200, 0),
        ] {
            let t = t.expect("in range");
            assert_eq!(
                std::str::from_utf8(&fixed_bytes(&t).expect("in range")).expect("ASCII"),
                t.format(FIXED).to_string()
            );
        }
        // Out of its range it leaves the time to chrono.
        let far = DateTime::from_timestamp(253_402_300_800, 0).expect("year 10000");
        assert!(fixed_bytes(&far).is_none());
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
            .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_500_000_000))
            .expect("a leap second")
            .and_utc();
        assert!(fixed_bytes(&leap).is_none());
    }

    use super::*;

    /// chrono's verdict, as `DateTime<Utc>`'s `Deserialize` gives it.
    fn chrono(s: &str) -> Option<DateTime<Utc>> {
        serde_json::from_value::<DateTime<Utc>>(serde_json::Value::from(s)).ok()
    }

    #[test]
    fn the_quick_reading_agrees_with_chrono() {
        let mut samples: Vec<String> = [
            "2026-11-29T17:35:15Z",
            "2026-11-29T17:35:15.1Z",
            "2026-11-29T17:35:15.12Z",
            "2026-11-29T17:35:15.123Z",
            "2026-11-29T17:35:15.123456Z",
            "2026-11-29T17:35:15.123456789Z",
            "2026-11-29T17:35:15.1234567891Z",
            "2026-11-29T17:35:15.Z",
            "2026-11-29T17:35:15,5Z",
            "2026-11-29T17:35:60Z",
            "2026-11-29T17:35:60.5Z",
            "2026-11-29T24:00:00Z",
            "2026-11-29T23:60:00Z",
            "2026-02-29T00:00:00Z",
            "2024-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2000-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-00-10T00:00:00Z",
            "2026-13-10T00:00:00Z",
            "2026-12-00T00:00:00Z",
            "0000-01-01T00:00:00Z",
            "9999-12-31T23:59:59.999999999Z",
            "2026-11-29t17:35:15z",
            "2026-11-29 17:35:15Z",
            "2026-11-29T17:35:15+00:00",
            "2026-11-29T17:35:15-07:30",
            "2026-11-29T17:35:15 UTC",
            "2026-11-29T17:35:15Z ",
            " 2026-11-29T17:35:15Z",
            "2026-11-29T17:35:1Z",
            "2026-1-29T17:35:15Z",
            "+2026-11-29T17:35:15Z",
            "2026-11-29T17:35:15ZZ",
            "2026-11-29T1a:35:15Z",
            "2026-11-29T17:35:15.12a4Z",
            "yesterday",
            "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let now = Utc::now();
        for fmt in [
            chrono::SecondsFormat::Secs,
            chrono::SecondsFormat::Millis,
            chrono::SecondsFormat::Micros,
            chrono::SecondsFormat::Nanos,
            chrono::SecondsFormat::AutoSi,
        ] {
            samples.push(now.to_rfc3339_opts(fmt, true));
        }
        samples.push(
            serde_json::to_value(now)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string(),
        );
        for s in &samples {
            let quick = serde_json::from_value::<Time>(serde_json::Value::from(s.as_str()))
                .ok()
                .map(|t| t.0);
            assert_eq!(quick, chrono(s), "{s:?}");
            if let Some(t) = parse_canonical(s) {
                assert_eq!(Some(t), chrono(s), "{s:?}");
            }
        }
        assert!(parse_canonical(&samples[samples.len() - 1]).is_some());
    }
}
