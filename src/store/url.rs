//! Store URLs (DESIGN.md "Stores and backends"): which backend, and where.
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

/// How a PostgreSQL connection uses TLS (libpq's `sslmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it, without checking its certificate
    /// (`allow` and `prefer`, the default, as libpq; never over a unix
    /// socket).
    Prefer,
    /// TLS or no connection; the certificate is not checked (libpq's
    /// `require` without a root certificate).
    Require,
    /// TLS with a certificate signed by a trusted root, for any host name.
    VerifyCa,
    /// TLS with a certificate signed by a trusted root for this host name.
    VerifyFull,
}

/// What connecting needs, taken from a [`PgUrl`].
#[derive(Debug, Clone)]
pub struct PgConnect {
    /// Everything but TLS.
    pub config: postgres::Config,
    pub ssl_mode: SslMode,
    /// `sslrootcert`: a PEM file of the roots to trust (default: the
    /// Mozilla roots built in); `system` means the built-in ones too.
    pub root_cert: Option<PathBuf>,
}

impl PgUrl {
    /// Check `text` as a PostgreSQL URL.
    pub fn parse(text: &str) -> Result<PgUrl, UrlError> {
        let url = PgUrl {
            text: text.to_string(),
            redacted: redact(text),
        };
        url.connect_config()?;
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

    /// The connection settings; `sslmode` and `sslrootcert` are read here,
    /// everything else by the `postgres` crate.
    pub fn connect_config(&self) -> Result<PgConnect, UrlError> {
        let bad = |why: String| UrlError::Postgres {
            url: self.redacted(),
            message: why,
        };
        let (base, query) = match self.text.split_once('?') {
            Some((b, q)) => (b, q.split('#').next().unwrap_or("")),
            None => (self.text.split('#').next().unwrap_or(""), ""),
        };
        let mut ssl_mode = SslMode::Prefer;
        let mut root_cert = None;
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "sslmode" => {
                    ssl_mode = match percent_decode(value).as_str() {
                        "disable" => SslMode::Disable,
                        "allow" | "prefer" => SslMode::Prefer,
                        "require" => SslMode::Require,
                        "verify-ca" => SslMode::VerifyCa,
                        "verify-full" => SslMode::VerifyFull,
                        other => {
                            return Err(bad(format!(
                                "sslmode {other:?} is not one of disable, allow, prefer, \
                                 require, verify-ca, verify-full"
                            )));
                        }
                    }
                }
                "sslrootcert" => root_cert = Some(PathBuf::from(percent_decode(value))),
                _ => rest.push(pair),
            }
        }
        let text = if rest.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        let config: postgres::Config = text
            .parse()
            .map_err(|e: postgres::Error| bad(e.to_string()))?;
        if root_cert.is_some() && ssl_mode == SslMode::Require {
            // libpq: a root certificate given with `require` checks the chain.
            ssl_mode = SslMode::VerifyCa;
        }
        Ok(PgConnect {
            config,
            ssl_mode,
            root_cert: root_cert.filter(|p| p.as_os_str() != "system"),
        })
    }
}

/// `%XX` escapes of a URL component decoded (invalid ones kept as they are).
fn percent_decode(s: &str) -> String {
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
    fn postgres_urls_are_parsed_with_the_password_redacted() {
        for (url, mode) in [
            (
                "postgres://alice:s3cret@db.example:5432/rudder",
                SslMode::Prefer,
            ),
            (
                "postgresql://alice:s3cret@db/rudder?sslmode=require",
                SslMode::Require,
            ),
            (
                "postgres://alice:s3cret@db/r?sslmode=verify-full&connect_timeout=3",
                SslMode::VerifyFull,
            ),
            (
                "postgres://alice:s3cret@db/r?sslmode=require&sslrootcert=%2Fca.pem",
                SslMode::VerifyCa,
            ),
            (
                "postgres://alice:s3cret@db/r?sslmode=disable",
                SslMode::Disable,
            ),
        ] {
            let parsed = parse(url).unwrap();
            let StoreUrl::Postgres(pg) = &parsed else {
                panic!("{url}: {parsed:?}")
            };
            assert_eq!(pg.connect_config().unwrap().ssl_mode, mode, "{url}");
            for shown in [parsed.to_string(), format!("{parsed:?}")] {
                assert!(!shown.contains("s3cret"), "{shown}");
                assert!(shown.contains("alice:***@db"), "{shown}");
            }
            assert_eq!(parse(parsed.to_arg().to_str().unwrap()).unwrap(), parsed);
            assert!(!parsed.path().to_string_lossy().contains("s3cret"));
        }
        let socket = parse("postgres://bob@/rudder?host=%2Frun%2Fpostgresql&password=pw").unwrap();
        let StoreUrl::Postgres(pg) = &socket else {
            panic!()
        };
        let hosts = pg.connect_config().unwrap().config.get_hosts().to_vec();
        assert_eq!(
            hosts,
            [postgres::config::Host::Unix(PathBuf::from(
                "/run/postgresql"
            ))]
        );
        assert!(!socket.to_string().contains("pw"), "{socket}");
        for (bad, why) in [
            (
                "postgres://a:s3cret@db/r?sslmode=sometimes",
                "sslmode \"sometimes\"",
            ),
            ("postgres://a:s3cret@db:notaport/r", "invalid"),
            ("postgres://a:s3cret@db/r?frobnicate=1", "frobnicate"),
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
        assert_eq!(redact("postgres://db/x"), "postgres://db/x");
        assert_eq!(redact("postgres://bob@db/x"), "postgres://bob@db/x");
        assert_eq!(redact("postgres://a:b:c@d@h/x"), "postgres://a:***@h/x");
        assert_eq!(
            redact("postgres://h/x?user=a&password=b&sslmode=require"),
            "postgres://h/x?user=a&password=***&sslmode=require"
        );
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
