//! Who wrote a change: the author every history entry records.
//!
//! An author is a name and the face it wrote through. On a local store the
//! name is a declaration (the file's permissions are the gate: whoever may
//! write the file may write any name); through `rudder mcp` with
//! authorization it is the authenticated principal.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest author name, in characters.
pub const MAX_AUTHOR_CHARS: usize = 128;

/// Why a name cannot be an author's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthorError {
    #[error("it is empty")]
    Empty,
    #[error("it is {0} characters long, more than the {MAX_AUTHOR_CHARS} a name may have")]
    TooLong(usize),
    /// A control character (a terminal escape among them) would make the
    /// name rewrite the screen of whoever reads the trail.
    #[error("it holds the control character {0:?}; a name is printable text")]
    Control(char),
}

/// Check that `name` may be an author's: not empty or blank, at most
/// [`MAX_AUTHOR_CHARS`] characters, no control characters.
pub fn check_author(name: &str) -> Result<(), AuthorError> {
    if name.trim().is_empty() {
        return Err(AuthorError::Empty);
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(AuthorError::Control(c));
    }
    let n = name.chars().count();
    if n > MAX_AUTHOR_CHARS {
        return Err(AuthorError::TooLong(n));
    }
    Ok(())
}

/// The way a change reached the store.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Face {
    /// A `rudder` command (`input`, `cancel`, `reclaim`, …).
    Cli,
    /// The terminal UI.
    Tui,
    /// `rudder mcp`, on a client's request.
    Mcp,
    /// The Python package.
    Python,
    /// A worker holding the task's lease (any language).
    Worker,
    /// rudder's gateway to another MCP server.
    Gateway,
    /// A face this version does not know, kept as it was written.
    Other(String),
}

impl Face {
    pub fn as_str(&self) -> &str {
        match self {
            Face::Cli => "cli",
            Face::Tui => "tui",
            Face::Mcp => "mcp",
            Face::Python => "python",
            Face::Worker => "worker",
            Face::Gateway => "gateway",
            Face::Other(s) => s,
        }
    }

    /// The face named `s` (a name this version does not know is kept).
    pub fn parse(s: &str) -> Face {
        match s {
            "cli" => Face::Cli,
            "tui" => Face::Tui,
            "mcp" => Face::Mcp,
            "python" => Face::Python,
            "worker" => Face::Worker,
            "gateway" => Face::Gateway,
            other => Face::Other(other.to_string()),
        }
    }
}

impl fmt::Display for Face {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Face {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Face {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(Face::parse(&s))
    }
}

/// Who writes, and through which face.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Author {
    name: String,
    face: Face,
}

impl Author {
    /// The author `name` writing through `face`; a name [`check_author`]
    /// refuses is an error.
    pub fn new(name: impl Into<String>, face: Face) -> Result<Author, AuthorError> {
        let name = name.into();
        check_author(&name)?;
        Ok(Author { name, face })
    }

    /// The author `name` from a source that cannot be refused (a client's
    /// self-given name, a host name): control characters become `?`, an
    /// over-long name is cut, an empty one is `unknown`.
    pub fn lossy(name: &str, face: Face) -> Author {
        let mut clean: String = name
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .take(MAX_AUTHOR_CHARS)
            .collect();
        if clean.trim().is_empty() {
            clean = "unknown".into();
        }
        Author { name: clean, face }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn face(&self) -> &Face {
        &self.face
    }
}

impl fmt::Display for Author {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.face)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_printable_text() {
        for ok in [
            "alice",
            "alice@db-3",
            "Jane Doe",
            "mcp:claude-code",
            "w#1a2b",
            "支付",
        ] {
            assert_eq!(check_author(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_author(""), Err(AuthorError::Empty));
        assert_eq!(check_author("  "), Err(AuthorError::Empty));
        assert_eq!(
            check_author("a\u{1b}[2Jb"),
            Err(AuthorError::Control('\u{1b}'))
        );
        assert_eq!(check_author(&"n".repeat(MAX_AUTHOR_CHARS)), Ok(()));
        assert_eq!(
            check_author(&"n".repeat(MAX_AUTHOR_CHARS + 1)),
            Err(AuthorError::TooLong(MAX_AUTHOR_CHARS + 1))
        );
    }

    #[test]
    fn a_lossy_name_is_always_an_author() {
        for raw in ["", "\u{1b}[31mred", &"x".repeat(500), "ok"] {
            let a = Author::lossy(raw, Face::Mcp);
            assert_eq!(check_author(a.name()), Ok(()), "{raw:?}");
        }
        assert_eq!(Author::lossy("\u{1b}x", Face::Mcp).name(), "?x");
    }

    #[test]
    fn faces_round_trip_and_unknown_ones_are_kept() {
        for f in [
            Face::Cli,
            Face::Tui,
            Face::Mcp,
            Face::Python,
            Face::Worker,
            Face::Gateway,
        ] {
            let text = serde_json::to_string(&f).unwrap();
            assert_eq!(serde_json::from_str::<Face>(&text).unwrap(), f);
        }
        let odd: Face = serde_json::from_str("\"pager\"").unwrap();
        assert_eq!(odd, Face::Other("pager".into()));
        assert_eq!(serde_json::to_string(&odd).unwrap(), "\"pager\"");
    }
}
