//! Store URLs (DESIGN.md "Stores and backends"): which backend, and where.
//!
//! | given | backend |
//! |---|---|
//! | `PATH`, `file:PATH` | the JSON file |
//! | `sqlite:PATH`, or a `PATH` ending in `.db`, `.sqlite`, `.sqlite3` | SQLite |
//! | `postgres://…`, `postgresql://…` | PostgreSQL: not supported yet |
//!
//! `file://PATH` and `sqlite://PATH` are read like `file:PATH` and
//! `sqlite:PATH` (so `sqlite:///var/lib/rudder.db` is the absolute path).
//! A file whose name starts with one of these schemes is reached with
//! `./` before it. Passwords are never shown: [`StoreUrl`]'s `Display` and
//! every error redact them.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Where a store lives, parsed from `--store` or `$RUDDER_STORE`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StoreUrl {
    /// A JSON file.
    File(PathBuf),
    /// A SQLite database file.
    Sqlite(PathBuf),
}

/// A store URL rudder cannot open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("{url}: PostgreSQL stores are not supported yet (use a file or sqlite:PATH)")]
    Unsupported {
        /// The URL with its password redacted.
        url: String,
    },
    #[error("{url:?}: a store URL needs a path after the scheme")]
    Empty { url: String },
}

/// The file extensions that mean SQLite when a plain path is given.
const SQLITE_EXTENSIONS: [&str; 3] = ["db", "sqlite", "sqlite3"];

impl StoreUrl {
    /// Parse a store URL or path.
    pub fn parse(text: impl AsRef<OsStr>) -> Result<StoreUrl, UrlError> {
        let text = text.as_ref();
        let bytes = text.as_bytes();
        let lossy = || String::from_utf8_lossy(bytes).into_owned();
        for scheme in ["postgres://", "postgresql://"] {
            if starts_with_ignore_case(bytes, scheme) {
                return Err(UrlError::Unsupported {
                    url: redact(&lossy()),
                });
            }
        }
        let rest = |scheme: &str| -> Option<Result<PathBuf, UrlError>> {
            if !starts_with_ignore_case(bytes, scheme) {
                return None;
            }
            let mut rest = &bytes[scheme.len()..];
            if let Some(r) = rest.strip_prefix(b"//") {
                rest = r;
            }
            Some(if rest.is_empty() {
                Err(UrlError::Empty { url: lossy() })
            } else {
                Ok(PathBuf::from(OsString::from_vec(rest.to_vec())))
            })
        };
        if let Some(path) = rest("sqlite:") {
            return path.map(StoreUrl::Sqlite);
        }
        if let Some(path) = rest("file:") {
            return path.map(StoreUrl::File);
        }
        Ok(StoreUrl::from_path(Path::new(text)))
    }

    /// A plain path: SQLite by its extension, else the JSON file.
    pub fn from_path(path: &Path) -> StoreUrl {
        let sqlite = path
            .extension()
            .and_then(OsStr::to_str)
            .is_some_and(|e| SQLITE_EXTENSIONS.iter().any(|s| s.eq_ignore_ascii_case(e)));
        if sqlite {
            StoreUrl::Sqlite(path.to_path_buf())
        } else {
            StoreUrl::File(path.to_path_buf())
        }
    }

    /// The local file the store lives in.
    pub fn path(&self) -> &Path {
        match self {
            StoreUrl::File(p) | StoreUrl::Sqlite(p) => p,
        }
    }

    /// The backend's name, as in messages: `file` or `sqlite`.
    pub fn scheme(&self) -> &'static str {
        match self {
            StoreUrl::File(_) => "file",
            StoreUrl::Sqlite(_) => "sqlite",
        }
    }

    /// The URL as an argument that parses back to the same store (for a
    /// child process's `--store`).
    pub fn to_arg(&self) -> OsString {
        let mut arg = OsString::from(self.scheme());
        arg.push(":");
        arg.push(self.path());
        arg
    }
}

impl fmt::Display for StoreUrl {
    /// A JSON file shows as its path (as the user most often gave it), a
    /// database as `sqlite:PATH`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::File(p) => write!(f, "{}", p.display()),
            StoreUrl::Sqlite(p) => write!(f, "sqlite:{}", p.display()),
        }
    }
}

fn starts_with_ignore_case(bytes: &[u8], prefix: &str) -> bool {
    bytes.len() >= prefix.len() && bytes[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// `scheme://user:password@host/...` with the password replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some(at_scheme) = url.find("://") else {
        return url.to_string();
    };
    let start = at_scheme + 3;
    let authority_end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let authority = &url[start..authority_end];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &authority[..at];
    let Some(colon) = userinfo.find(':') else {
        return url.to_string();
    };
    format!(
        "{}{}:***{}",
        &url[..start],
        &userinfo[..colon],
        &url[start + at..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<StoreUrl, UrlError> {
        StoreUrl::parse(s)
    }

    #[test]
    fn paths_and_schemes_choose_the_backend() {
        let file = |p: &str| Ok(StoreUrl::File(PathBuf::from(p)));
        let sqlite = |p: &str| Ok(StoreUrl::Sqlite(PathBuf::from(p)));
        assert_eq!(parse("tasks.json"), file("tasks.json"));
        assert_eq!(parse("/var/x/tasks"), file("/var/x/tasks"));
        assert_eq!(parse("file:tasks.db"), file("tasks.db"));
        assert_eq!(parse("file:///tmp/t.json"), file("/tmp/t.json"));
        assert_eq!(parse("sqlite:tasks"), sqlite("tasks"));
        assert_eq!(parse("SQLite:tasks"), sqlite("tasks"));
        assert_eq!(parse("sqlite:///var/lib/r.db"), sqlite("/var/lib/r.db"));
        assert_eq!(parse("sqlite://rel/r.db"), sqlite("rel/r.db"));
        for p in ["t.db", "a/t.sqlite", "t.SQLITE3", "./sqlite:x.db"] {
            assert_eq!(parse(p), sqlite(p), "{p}");
        }
        assert_eq!(parse("./file:x"), file("./file:x"));
        assert!(matches!(parse("sqlite:"), Err(UrlError::Empty { .. })));
        assert!(matches!(parse("file://"), Err(UrlError::Empty { .. })));
    }

    #[test]
    fn postgres_is_refused_with_the_password_redacted() {
        for url in [
            "postgres://alice:s3cret@db.example:5432/rudder",
            "POSTGRESQL://alice:s3cret@db/rudder?sslmode=require",
        ] {
            let e = parse(url).unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, UrlError::Unsupported { .. }));
            assert!(!text.contains("s3cret"), "{text}");
            assert!(text.contains("alice:***@db"), "{text}");
            assert!(text.contains("not supported yet"), "{text}");
        }
        assert_eq!(redact("postgres://db/x"), "postgres://db/x");
        assert_eq!(redact("postgres://bob@db/x"), "postgres://bob@db/x");
        assert_eq!(redact("postgres://a:b:c@d@h/x"), "postgres://a:***@h/x");
    }

    #[test]
    fn display_and_arg_round_trip() {
        for s in [
            "tasks.json",
            "sqlite:/tmp/a.db",
            "x.db",
            "file:./sqlite:odd",
            "sqlite:plain",
        ] {
            let url = parse(s).unwrap();
            assert_eq!(StoreUrl::parse(url.to_arg()).unwrap(), url, "{s}");
        }
        assert_eq!(parse("x.db").unwrap().to_string(), "sqlite:x.db");
        assert_eq!(parse("x.json").unwrap().to_string(), "x.json");
    }
}
