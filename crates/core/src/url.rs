//! Store URLs (docs/architecture.md "Stores and backends"): which backend, and where.
//!
//! | given | backend |
//! |---|---|
//! | `PATH`, `file:PATH` | the JSON file |
//! | `sqlite:PATH`, or a `PATH` ending in `.db`, `.sqlite`, `.sqlite3` | SQLite |
//! | `postgres://…`, `postgresql://…` | PostgreSQL (libpq-style URL: user, password, host, port, dbname, `?host=/socket/dir`, `sslmode`, `sslrootcert`) |
//! | `memory:NAME` | a store in this process's memory: the backend contract's smallest backend, for tests (feature `memory` of `rudder-store`; the binary is built without it) |
//!
//! `file://PATH` and `sqlite://PATH` are read like `file:PATH` and
//! `sqlite:PATH` (so `sqlite:///var/lib/rudder.db` is the absolute path).
//! A file whose name starts with one of these schemes is reached with
//! `./` before it. Any other `WORD:` or `WORD://` is refused
//! ([`UrlError::UnknownScheme`], naming the nearest known scheme) unless a
//! file of that name exists: a typo never makes a local store. Passwords are never shown: [`StoreUrl`]'s `Display` and
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
    /// A store in this process's memory (`memory:NAME`), shared by every
    /// store of the process opened with the same name and gone with the
    /// process: the backend contract's smallest backend, for tests
    /// ([`crate::memory`]); the binary is built without it.
    Memory(String),
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
        if let Userinfo::Ambiguous { .. } = userinfo(text) {
            // libpq would read such a URL otherwise than the `postgres`
            // crate (`/` ends libpq's user info), so it is not guessed at.
            return Err(UrlError::Postgres {
                url: url.redacted,
                message: "its user name or password holds an unencoded '/', '?', '#' or '@': \
                          percent-encode them (%2F, %3F, %23, %40)"
                    .into(),
            });
        }
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
    /// `WORD:` or `WORD://` that is no scheme rudder knows, and no
    /// existing file: a typo must not quietly make a local store.
    #[error(
        "{url}: {scheme}: is not a store scheme rudder knows{}; the known ones are postgres://, \
         postgresql://, sqlite:PATH and file:PATH (or a plain PATH; a file whose name holds \
         a colon: ./NAME or file:NAME)",
        match nearest {
            Some((s, true)) => format!(" (did you mean {s}?)"),
            Some((s, false)) => format!(" (the nearest is {s})"),
            None => String::new(),
        }
    )]
    UnknownScheme {
        /// The URL as given, passwords redacted.
        url: String,
        /// The scheme as given, without its `:`.
        scheme: String,
        /// The known scheme nearest to it, and whether it is near enough
        /// to be a typo.
        nearest: Option<(&'static str, bool)>,
    },
}

/// The schemes [`StoreUrl::parse`] knows, as they are written.
// `memory:` is left out: no user is pointed at a store that dies with its
// process (and the binary is built without it).
const KNOWN_SCHEMES: [&str; 4] = ["postgres://", "postgresql://", "sqlite:", "file:"];

/// The scheme of `WORD:...` (RFC 3986: a letter, then letters, digits,
/// `+`, `-`, `.`), if `bytes` starts with one.
fn scheme_word(bytes: &[u8]) -> Option<&str> {
    let colon = bytes.iter().position(|&b| b == b':')?;
    let word = &bytes[..colon];
    let first = *word.first()?;
    let ok = first.is_ascii_alphabetic()
        && word
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b));
    ok.then(|| std::str::from_utf8(word).ok()).flatten()
}

/// The known scheme nearest to `scheme` (edit distance), and whether it is
/// within two edits (a typo).
fn nearest_scheme(scheme: &str) -> Option<(&'static str, bool)> {
    let scheme = scheme.to_ascii_lowercase();
    KNOWN_SCHEMES
        .iter()
        .map(|k| {
            let name = k.trim_end_matches(['/', ':']);
            (*k, strsim::levenshtein(&scheme, name))
        })
        .min_by_key(|&(_, d)| d)
        .map(|(k, d)| (k, d <= 2))
}

/// The file extensions that mean SQLite when a plain path is given.
const SQLITE_EXTENSIONS: [&str; 3] = ["db", "sqlite", "sqlite3"];

/// What [`Store::connect`](crate::Store::connect) takes: a [`StoreUrl`]
/// parsed already (as clap gives it), or the text of one (a path or URL),
/// parsed here.
pub trait ToStoreUrl {
    /// The URL, or why the text names no store.
    fn to_store_url(self) -> Result<StoreUrl, UrlError>;
}

impl ToStoreUrl for StoreUrl {
    fn to_store_url(self) -> Result<StoreUrl, UrlError> {
        Ok(self)
    }
}

impl ToStoreUrl for &StoreUrl {
    fn to_store_url(self) -> Result<StoreUrl, UrlError> {
        Ok(self.clone())
    }
}

impl<T: AsRef<OsStr> + ?Sized> ToStoreUrl for &T {
    fn to_store_url(self) -> Result<StoreUrl, UrlError> {
        StoreUrl::parse(self)
    }
}

impl ToStoreUrl for String {
    fn to_store_url(self) -> Result<StoreUrl, UrlError> {
        StoreUrl::parse(self)
    }
}

impl ToStoreUrl for PathBuf {
    fn to_store_url(self) -> Result<StoreUrl, UrlError> {
        StoreUrl::parse(self)
    }
}

impl ToStoreUrl for OsString {
    fn to_store_url(self) -> Result<StoreUrl, UrlError> {
        StoreUrl::parse(self)
    }
}

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
        if let Some(name) = rest("memory:") {
            return name.map(|n| StoreUrl::Memory(n.to_string_lossy().into_owned()));
        }
        if let Some(scheme) = scheme_word(bytes)
            && std::fs::symlink_metadata(Path::new(text)).is_err()
        {
            return Err(UrlError::UnknownScheme {
                url: redact(&lossy()),
                scheme: scheme.to_string(),
                nearest: nearest_scheme(scheme),
            });
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
            StoreUrl::Memory(name) => Path::new(name),
        }
    }

    /// The backend's name, as in messages: `file`, `sqlite` or `postgres`.
    pub fn scheme(&self) -> &'static str {
        match self {
            StoreUrl::File(_) => "file",
            StoreUrl::Sqlite(_) => "sqlite",
            StoreUrl::Postgres(_) => "postgres",
            StoreUrl::Memory(_) => "memory",
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
            StoreUrl::Memory(name) => write!(f, "memory:{name}"),
        }
    }
}

/// How a store given as `text` (a path or URL, as on the command line) is
/// named in messages and logs: [`StoreUrl`]'s display when it parses; else
/// the text through [`redact`], so no password shows either way.
pub fn shown(text: impl AsRef<OsStr>) -> String {
    match StoreUrl::parse(text.as_ref()) {
        Ok(url) => url.to_string(),
        Err(_) => redact(&text.as_ref().to_string_lossy()),
    }
}

fn starts_with_ignore_case(bytes: &[u8], prefix: &str) -> bool {
    bytes.len() >= prefix.len() && bytes[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// `scheme://user:password@host/...?password=...` with the passwords
/// replaced by `***`.
///
/// The user info is found as the URL parsers that read it find it: the
/// `postgres` crate takes everything before the first `@` (even past a
/// `/` or `?`), libpq stops at a `/`. Where they could disagree (an
/// unencoded `/`, `?`, `#` or a second `@` in the user info: such a URL is
/// refused, see [`PgUrl::parse`]) no user info is shown at all, only
/// `***@` and what follows the last `@`.
pub fn redact(url: &str) -> String {
    let url = redact_userinfo(url);
    let Some((base, query)) = url.split_once('?') else {
        return url;
    };
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if percent_decode(k).eq_ignore_ascii_case("password") => {
                format!("{k}=***")
            }
            _ => p.to_string(),
        })
        .collect();
    format!("{base}?{}", params.join("&"))
}

/// Where the user info of a URL is, as [`redact`] reads it.
enum Userinfo {
    /// No `scheme://`, or no `@` after it.
    None,
    /// `url[start..at]` is the user info, `url[at]` its `@`, read alike by
    /// libpq and the `postgres` crate.
    Clear { start: usize, at: usize },
    /// The parsers could read the user info differently: everything from
    /// `start` to the last `@` (at `at`) may be credentials.
    Ambiguous { start: usize, at: usize },
}

fn userinfo(url: &str) -> Userinfo {
    let Some(at_scheme) = url.find("://") else {
        return Userinfo::None;
    };
    let start = at_scheme + 3;
    let rest = &url[start..];
    let Some(first_at) = rest.find('@') else {
        return Userinfo::None;
    };
    let last_at = rest.rfind('@').unwrap_or(first_at);
    // The host part libpq and the crate read after the user info ends at
    // the first of these; a second `@` in it means the password held one.
    let authority_end = rest[first_at + 1..]
        .find(['/', '?', '#'])
        .map_or(rest.len(), |i| first_at + 1 + i);
    if rest[..first_at].contains(['/', '?', '#']) || rest[first_at + 1..authority_end].contains('@')
    {
        return Userinfo::Ambiguous {
            start,
            at: start + last_at,
        };
    }
    Userinfo::Clear {
        start,
        at: start + first_at,
    }
}

fn redact_userinfo(url: &str) -> String {
    match userinfo(url) {
        Userinfo::None => url.to_string(),
        Userinfo::Ambiguous { start, at } => format!("{}***{}", &url[..start], &url[at..]),
        Userinfo::Clear { start, at } => match url[start..at].split_once(':') {
            None => url.to_string(),
            Some((user, _)) => format!("{}{user}:***{}", &url[..start], &url[at..]),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<StoreUrl, UrlError> {
        StoreUrl::parse(s)
    }

    #[test]
    fn plain_paths_and_schemes_choose_the_backend() {
        assert!(matches!(parse("t.json"), Ok(StoreUrl::File(_))));
        assert!(matches!(parse("t.db"), Ok(StoreUrl::Sqlite(_))));
        assert!(matches!(parse("sqlite:t"), Ok(StoreUrl::Sqlite(_))));
        assert!(
            matches!(parse("postgres://u:pw@h/db"), Ok(StoreUrl::Postgres(u)) if u.shown() == "postgres://u:***@h/db")
        );
        let memory = parse("memory:/tmp/a test").unwrap();
        assert_eq!(memory, StoreUrl::Memory("/tmp/a test".into()));
        assert_eq!(memory.to_string(), "memory:/tmp/a test");
        assert_eq!(StoreUrl::parse(memory.to_arg()).unwrap(), memory);
        assert!(matches!(parse("memory:"), Err(UrlError::Empty { .. })));
    }

    #[test]
    fn an_unknown_scheme_is_refused_naming_the_nearest_unless_the_file_exists() {
        let refused = |s: &str| match parse(s) {
            Err(e @ UrlError::UnknownScheme { .. }) => e.to_string(),
            other => panic!("{s}: {other:?}"),
        };
        let e = refused("postgress://u:s3cret@localhost/db");
        assert!(e.contains("did you mean postgres://?"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
        assert!(refused("sqllite:t.db").contains("did you mean sqlite:?"));
        let e = refused("mysql://u@h/db");
        assert!(
            e.contains("postgres://, postgresql://, sqlite:PATH and file:PATH"),
            "{e}"
        );
        assert!(!e.contains("did you mean"), "{e}");
        assert!(refused("Notes:x").contains("Notes:"));
        let file = |p: &str| Ok(StoreUrl::File(PathBuf::from(p)));
        assert_eq!(parse("./postgress:x"), file("./postgress:x"));
        assert_eq!(parse("file:postgress:x"), file("postgress:x"));
        assert_eq!(parse("a/b:c"), file("a/b:c"));
        let dir = tempfile::tempdir().unwrap();
        let cwd = std::env::current_dir().unwrap();
        let existing = dir.path().join("odd:name");
        std::fs::write(&existing, "{}").unwrap();
        let relative = existing.strip_prefix(&cwd).map(Path::to_path_buf);
        // An existing file of that name is that file (checked as given:
        // relative paths only where the temp dir is under the cwd).
        if let Ok(rel) = relative
            && scheme_word(rel.as_os_str().as_bytes()).is_some()
        {
            assert_eq!(parse(rel.to_str().unwrap()), file(rel.to_str().unwrap()));
        }
    }
}
