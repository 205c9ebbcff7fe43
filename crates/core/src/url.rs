//! Store URLs (docs/architecture.md "Stores and backends"): which backend, and where.
//!
//! | given | backend |
//! |---|---|
//! | `PATH`, `file:PATH` | the JSON file |
//! | `sqlite:PATH`, or a `PATH` ending in `.db`, `.sqlite`, `.sqlite3` | SQLite |
//! | `postgres://…`, `postgresql://…` | PostgreSQL (libpq-style URL: user, password, host, port, dbname, `?host=/socket/dir`, `sslmode`, `sslrootcert`) |
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
    /// A PostgreSQL database.
    Postgres(PgUrl),
}

/// A PostgreSQL connection URL, checked when parsed. Its `Display` (and
/// every error) shows it with the password redacted.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PgUrl {
    /// The URL as given (with the password): what connects.
    text: String,
    /// The URL as shown.
    redacted: String,
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgUrl({})", self.redacted())
    }
}

impl PgUrl {
    /// Check `text` as a PostgreSQL URL.
    pub fn parse(text: &str) -> Result<PgUrl, UrlError> {
        let url = PgUrl {
            text: text.to_string(),
            redacted: redact(text),
        };
        Ok(url)
    }

    /// The URL with its password (in the user info or a `password`
    /// parameter) replaced by `***`.
    pub fn redacted(&self) -> String {
        self.redacted.clone()
    }

    /// [`PgUrl::redacted`], borrowed.
    pub fn shown(&self) -> &str {
        &self.redacted
    }

    /// The URL as given, password included (what a child process needs).
    pub fn secret_text(&self) -> &str {
        &self.text
    }
}

/// `%XX` escapes of a URL component decoded (invalid ones kept as they are).
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A store URL rudder cannot open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("{url}: not a PostgreSQL URL rudder can use: {message}")]
    Postgres {
        /// The URL with its password redacted.
        url: String,
        message: String,
    },
    #[error("{url:?}: a store URL needs a path after the scheme")]
    Empty { url: String },
    /// The URL names a backend this build was made without (a Cargo
    /// feature of `rudder-store`).
    #[error("{url}: this build of rudder has no {scheme} backend")]
    NotBuilt {
        /// The URL with its password redacted.
        url: String,
        scheme: &'static str,
    },
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
                let text = std::str::from_utf8(bytes).map_err(|_| UrlError::Postgres {
                    url: redact(&lossy()),
                    message: "the URL is not valid UTF-8".into(),
                })?;
                return PgUrl::parse(text).map(StoreUrl::Postgres);
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

    /// The local file the store lives in; for a database server, the
    /// URL as shown (password redacted: this is what messages and the TUI
    /// name; [`StoreUrl::to_arg`] is what connects).
    pub fn path(&self) -> &Path {
        match self {
            StoreUrl::File(p) | StoreUrl::Sqlite(p) => p,
            StoreUrl::Postgres(u) => Path::new(u.shown()),
        }
    }

    /// The backend's name, as in messages: `file`, `sqlite` or `postgres`.
    pub fn scheme(&self) -> &'static str {
        match self {
            StoreUrl::File(_) => "file",
            StoreUrl::Sqlite(_) => "sqlite",
            StoreUrl::Postgres(_) => "postgres",
        }
    }

    /// The URL as an argument that parses back to the same store (for a
    /// child process's `--store`; a PostgreSQL URL keeps its password).
    pub fn to_arg(&self) -> OsString {
        if let StoreUrl::Postgres(u) = self {
            return OsString::from(u.secret_text());
        }
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
            StoreUrl::Postgres(u) => f.write_str(&u.redacted()),
        }
    }
}

fn starts_with_ignore_case(bytes: &[u8], prefix: &str) -> bool {
    bytes.len() >= prefix.len() && bytes[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// `scheme://user:password@host/...?password=...` with the passwords
/// replaced by `***`.
pub fn redact(url: &str) -> String {
    let url = redact_userinfo(url);
    let Some((base, query)) = url.split_once('?') else {
        return url;
    };
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if k == "password" => format!("{k}=***"),
            _ => p.to_string(),
        })
        .collect();
    format!("{base}?{}", params.join("&"))
}

fn redact_userinfo(url: &str) -> String {
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

    #[test]
    fn plain_paths_and_schemes_choose_the_backend() {
        assert!(matches!(StoreUrl::parse("t.json"), Ok(StoreUrl::File(_))));
        assert!(matches!(StoreUrl::parse("t.db"), Ok(StoreUrl::Sqlite(_))));
        assert!(matches!(
            StoreUrl::parse("sqlite:t"),
            Ok(StoreUrl::Sqlite(_))
        ));
        assert!(
            matches!(StoreUrl::parse("postgres://u:pw@h/db"), Ok(StoreUrl::Postgres(u)) if u.shown() == "postgres://u:***@h/db")
        );
    }
}
