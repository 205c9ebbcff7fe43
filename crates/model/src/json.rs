//! JSON that people give (CLI arguments, form fields), read strictly.
//!
//! serde_json on its own keeps the last of two equal keys in an object, and
//! parses values that the store could not hold. [`parse`] reads the text as
//! serde_json does (numbers are kept exactly: the crate is built with
//! `arbitrary_precision`) and then refuses, with what and where:
//!
//! * a key that appears twice in one object, at any depth (`"a"` and
//!   `"\u0061"` are the same key);
//! * nesting deeper than [`MAX_VALUE_DEPTH`], the most a value in the store
//!   may have;
//! * an object whose first key is serde_json's private number marker
//!   ([`RESERVED_KEY`]), which serde_json silently reads as a number.
//!
//! The last two need the text: once parsed, a marker object is already a
//! number, and a duplicate key already gone.

use std::collections::HashSet;
use std::fmt;

use serde_json::Value;

use crate::limits::{MAX_VALUE_DEPTH, RESERVED_KEY};

/// Why a JSON text was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON at all.
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// `key` appears twice in the object at `pointer` (a JSON pointer, empty
    /// for the top level).
    DuplicateKey { key: String, pointer: String },
    /// Nested deeper than `limit` levels.
    TooDeep { limit: usize },
    /// The object at `pointer` starts with [`RESERVED_KEY`].
    ReservedKey { pointer: String },
}

impl JsonError {
    /// Whether the text was not JSON at all (rather than JSON the store
    /// refuses), for callers that then take the text as a plain string.
    pub fn is_syntax(&self) -> bool {
        matches!(self, JsonError::Syntax { .. })
    }
}

fn place(pointer: &str) -> String {
    if pointer.is_empty() {
        "the top-level object".to_string()
    } else {
        format!("the object at {pointer}")
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Syntax {
                line,
                column,
                message,
            } => write!(f, "not valid JSON (line {line} column {column}): {message}"),
            JsonError::DuplicateKey { key, pointer } => write!(
                f,
                "the key {key:?} appears twice in {} (a key may appear once per object)",
                place(pointer)
            ),
            JsonError::TooDeep { limit } => write!(
                f,
                "nested deeper than the {limit} levels a value in the store may have"
            ),
            JsonError::ReservedKey { pointer } => write!(
                f,
                "{} starts with the key {RESERVED_KEY:?}, which is reserved (it would be read back as a number)",
                place(pointer)
            ),
        }
    }
}

impl std::error::Error for JsonError {}

/// Parse `text` as one JSON value, refusing what [the module](self) says.
pub fn parse(text: &str) -> Result<Value, JsonError> {
    match serde_json::from_str::<Value>(text) {
        Ok(value) => {
            Scan {
                text,
                at: 0,
                path: Vec::new(),
            }
            .value(0)?;
            Ok(value)
        }
        // serde_json gives up at its recursion limit with a message that
        // hides what the limit is: say it plainly.
        Err(_) if deeper_than(text, MAX_VALUE_DEPTH) => Err(JsonError::TooDeep {
            limit: MAX_VALUE_DEPTH,
        }),
        Err(e) => {
            let message = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            Err(JsonError::Syntax {
                line: e.line(),
                column: e.column(),
                message: message
                    .strip_suffix(&suffix)
                    .unwrap_or(&message)
                    .to_string(),
            })
        }
    }
}

/// Whether brackets outside strings open more than `limit` levels at some
/// point of `text` (which need not be valid JSON).
fn deeper_than(text: &str, limit: usize) -> bool {
    let b = text.as_bytes();
    let (mut i, mut depth) = (0, 0usize);
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => {
                i = skip_str(b, i);
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    false
}

/// `b[i]` is a string's opening quote: the index just past its closing one
/// (or the end of the text).
fn skip_str(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => return i + 1,
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    b.len()
}

/// A walk over text that serde_json has accepted as JSON: the structure
/// only (scalars are skipped), with the JSON pointer of where it is.
struct Scan<'a> {
    text: &'a str,
    at: usize,
    path: Vec<String>,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn pointer(&self) -> String {
        self.path.iter().map(|s| format!("/{s}")).collect()
    }

    /// One value, inside `enclosing` containers. The text is valid JSON no
    /// deeper than serde_json's limit, so the recursion is bounded; anything
    /// unexpected ends the walk quietly (serde_json's verdict stands).
    fn value(&mut self, enclosing: usize) -> Result<(), JsonError> {
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.object(enclosing + 1),
            Some(b'[') => self.array(enclosing + 1),
            Some(b'"') => {
                self.at = skip_str(self.text.as_bytes(), self.at);
                Ok(())
            }
            Some(_) => {
                // A number, `true`, `false` or `null`.
                while let Some(c) = self.peek() {
                    if matches!(c, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.at += 1;
                }
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn object(&mut self, depth: usize) -> Result<(), JsonError> {
        if depth > MAX_VALUE_DEPTH {
            return Err(JsonError::TooDeep {
                limit: MAX_VALUE_DEPTH,
            });
        }
        self.at += 1;
        let mut keys = HashSet::new();
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                // `}` of an empty object (or, in theory, a surprise).
                self.at += 1;
                return Ok(());
            }
            let start = self.at;
            self.at = skip_str(self.text.as_bytes(), self.at);
            let Some(Ok(key)) = self
                .text
                .get(start..self.at)
                .map(serde_json::from_str::<String>)
            else {
                return Ok(());
            };
            if keys.is_empty() && key == RESERVED_KEY {
                return Err(JsonError::ReservedKey {
                    pointer: self.pointer(),
                });
            }
            if keys.contains(&key) {
                return Err(JsonError::DuplicateKey {
                    key,
                    pointer: self.pointer(),
                });
            }
            self.skip_ws();
            self.at += 1; // the colon
            self.path.push(key.replace('~', "~0").replace('/', "~1"));
            self.value(depth)?;
            self.path.pop();
            keys.insert(key);
            self.skip_ws();
            let next = self.peek();
            self.at += 1;
            if next != Some(b',') {
                return Ok(());
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), JsonError> {
        if depth > MAX_VALUE_DEPTH {
            return Err(JsonError::TooDeep {
                limit: MAX_VALUE_DEPTH,
            });
        }
        self.at += 1;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(());
        }
        for index in 0usize.. {
            self.path.push(index.to_string());
            self.value(depth)?;
            self.path.pop();
            self.skip_ws();
            let next = self.peek();
            self.at += 1;
            if next != Some(b',') {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dup(text: &str) -> (String, String) {
        match parse(text) {
            Err(JsonError::DuplicateKey { key, pointer }) => (key, pointer),
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn duplicate_keys_are_found_at_any_depth() {
        assert_eq!(dup(r#"{"a":1,"a":2}"#), ("a".into(), "".into()));
        assert_eq!(
            dup(r#"{"x": [0, {"b": {}, "c": 1, "b": []}]}"#),
            ("b".into(), "/x/1".into())
        );
        assert_eq!(
            dup(r#"{"k/~": {"a":1, "\u0061":2}}"#),
            ("a".into(), "/k~1~0".into())
        );
        assert_eq!(
            dup(" [ { \"é\" : 1 , \"é\" : 1 } ] "),
            ("é".into(), "/0".into())
        );
        let msg = parse(r#"{"a":1,"a":2}"#).unwrap_err().to_string();
        assert!(
            msg.contains("\"a\" appears twice in the top-level object"),
            "{msg}"
        );
        // Equal keys in different objects, keys that look alike, strings
        // holding brackets and quotes: fine.
        let ok = r#"{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}], "A": "}\"{,", "a ": null}"#;
        assert_eq!(
            parse(ok).unwrap(),
            serde_json::from_str::<Value>(ok).unwrap()
        );
    }

    #[test]
    fn depth_is_limited_as_the_store_limits_it() {
        let nested = |d: usize| "[".repeat(d) + "1" + &"]".repeat(d);
        assert!(parse(&nested(MAX_VALUE_DEPTH)).is_ok());
        for d in [MAX_VALUE_DEPTH + 1, 127, 128, 10_000] {
            assert_eq!(
                parse(&nested(d)),
                Err(JsonError::TooDeep {
                    limit: MAX_VALUE_DEPTH
                }),
                "{d}"
            );
        }
        let objects =
            "{\"a\":".repeat(MAX_VALUE_DEPTH + 1) + "1" + &"}".repeat(MAX_VALUE_DEPTH + 1);
        assert!(matches!(parse(&objects), Err(JsonError::TooDeep { .. })));
        // Brackets inside strings do not count.
        let text = format!("[\"{}\"]", "[".repeat(500));
        assert!(parse(&text).is_ok());
    }

    #[test]
    fn numbers_are_kept_exactly_and_the_marker_key_is_refused() {
        let v = parse(r#"{"big": 12345678901234567890123, "x": 1.50, "e": 1E400}"#).unwrap();
        // (serde_json spells an exponent `e+`: the same number.)
        assert_eq!(
            v.to_string(),
            r#"{"big":12345678901234567890123,"x":1.50,"e":1e+400}"#
        );
        assert_eq!(
            parse(r#"{"a": [{"$serde_json::private::Number": "1"}]}"#),
            Err(JsonError::ReservedKey {
                pointer: "/a/0".into()
            })
        );
        assert!(parse(r#"{"a": 1, "$serde_json::private::Number": "1"}"#).is_ok());
    }

    #[test]
    fn syntax_errors_keep_their_position() {
        match parse("{\n  \"a\": [1,,]\n}") {
            Err(e @ JsonError::Syntax { line: 2, .. }) => assert!(e.is_syntax()),
            other => panic!("{other:?}"),
        }
        assert!(parse("").unwrap_err().is_syntax());
        assert_eq!(parse(" 5 ").unwrap(), json!(5));
    }
}
