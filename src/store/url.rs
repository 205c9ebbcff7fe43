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
//! `./` before it. Any other `WORD:` or `WORD://` is refused
//! ([`UrlError::UnknownScheme`], naming the nearest known scheme) unless a
//! file of that name exists: a typo never makes a local store. Passwords are never shown: [`StoreUrl`]'s `Display` and
//! every error redact them.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

pub mod libpq;

pub use libpq::Environment;

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

/// What connecting needs, taken from a [`PgUrl`] and, for what it leaves
/// out, libpq's environment variables and files (see [`libpq`]).
#[derive(Debug, Clone)]
pub struct PgConnect {
    /// Everything but TLS.
    pub config: postgres::Config,
    pub ssl_mode: SslMode,
    /// `sslrootcert`: a PEM file of the roots to trust (default:
    /// `~/.postgresql/root.crt` if it exists, else the Mozilla roots built
    /// in); `system` means the built-in ones.
    pub root_cert: Option<PathBuf>,
    /// `sslcert` and `sslkey`: the client certificate (PEM) and its key
    /// (PEM, unencrypted), sent when the server asks for one.
    pub client_cert: Option<(PathBuf, PathBuf)>,
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

    /// The connection settings, what the URL leaves out taken from the
    /// process's `PG*` variables and libpq's files.
    pub fn connect_config(&self) -> Result<PgConnect, UrlError> {
        self.connect_config_in(&Environment::of_process())
    }

    /// [`PgUrl::connect_config`] in the environment `env`. The TLS and
    /// password-file parameters are read here, the others by the
    /// `postgres` crate; then [`libpq::fill`] and [`libpq::TlsFiles`] fill
    /// in what is missing.
    pub fn connect_config_in(&self, env: &Environment) -> Result<PgConnect, UrlError> {
        let bad = |why: String| UrlError::Postgres {
            url: self.redacted(),
            message: why,
        };
        let (base, query) = match self.text.split_once('?') {
            Some((b, q)) => (b, q.split('#').next().unwrap_or("")),
            None => (self.text.split('#').next().unwrap_or(""), ""),
        };
        // `postgres://:5433/db`: a port without a host. The crate would
        // take "" for a host; libpq takes its default host, so the port
        // goes to a parameter and the host is left out.
        let (base, port_only) = without_empty_host(base);
        let mut ssl_mode = None;
        let (mut root_cert, mut cert, mut key, mut passfile) = (None, None, None, None);
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let path = || Some(PathBuf::from(percent_decode(value)));
            match name {
                "sslmode" => ssl_mode = Some(("sslmode", percent_decode(value))),
                "sslrootcert" => root_cert = path(),
                "sslcert" => cert = path(),
                "sslkey" => key = path(),
                "passfile" => passfile = path(),
                _ => rest.push(pair),
            }
        }
        let ssl_mode =
            match ssl_mode.or_else(|| env.var("PGSSLMODE").map(|m| ("PGSSLMODE", m.into()))) {
                None => SslMode::Prefer,
                Some((from, mode)) => match mode.as_str() {
                    "disable" => SslMode::Disable,
                    "allow" | "prefer" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => {
                        return Err(bad(format!(
                            "{from} {other:?} is not one of disable, allow, prefer, \
                         require, verify-ca, verify-full"
                        )));
                    }
                },
            };
        let port_param = port_only.map(|p| format!("port={p}"));
        rest.extend(port_param.as_deref());
        let text = if rest.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        let mut config: postgres::Config = text
            .parse()
            .map_err(|e: postgres::Error| bad(e.to_string()))?;
        libpq::fill(&mut config, passfile.as_deref(), env).map_err(bad)?;
        let files = libpq::TlsFiles::resolve(root_cert, cert, key, env);
        let mut ssl_mode = ssl_mode;
        if files.root_cert.is_some() && ssl_mode == SslMode::Require {
            // libpq: with a root certificate, `require` checks the chain.
            ssl_mode = SslMode::VerifyCa;
        }
        let client_cert = match (files.cert, files.key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(cert), None) => {
                return Err(bad(format!(
                    "a client certificate ({}) needs its key: give sslkey (or PGSSLKEY)",
                    cert.display()
                )));
            }
            (None, Some(key)) => {
                return Err(bad(format!(
                    "a client key ({}) needs its certificate: give sslcert (or PGSSLCERT)",
                    key.display()
                )));
            }
        };
        Ok(PgConnect {
            config,
            ssl_mode,
            root_cert: files.root_cert.filter(|p| p.as_os_str() != "system"),
            client_cert,
        })
    }
}

/// `base` without the port of an authority that has no host (`u@:5433`),
/// and that port.
fn without_empty_host(base: &str) -> (String, Option<&str>) {
    let Some(start) = base.find("://").map(|i| i + 3) else {
        return (base.to_string(), None);
    };
    let end = base[start..].find('/').map_or(base.len(), |i| start + i);
    let host_at = base[start..end].rfind('@').map_or(start, |i| start + i + 1);
    match base[host_at..end].strip_prefix(':') {
        Some(port) if !port.contains([',', ':']) => {
            (format!("{}{}", &base[..host_at], &base[end..]), Some(port))
        }
        _ => (base.to_string(), None),
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
    use std::time::Duration;

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
        assert_eq!(redact("postgres://a:b:c@d@h/x"), "postgres://***@h/x");
        // libpq ends the user info at a `/`, the crate at the first `@`:
        // neither reading is guessed at, and nothing of it is shown.
        for (url, shown) in [
            (
                "postgres://slash:S3cr3t/x?y@host/db",
                "postgres://***@host/db",
            ),
            ("postgres://q:S3cr3t?x@host/db", "postgres://***@host/db"),
            ("postgres://h:S3cr3t#x@host/db", "postgres://***@host/db"),
            ("postgres://at:S3c@r3t@host/db", "postgres://***@host/db"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
            let e = parse(url).unwrap_err().to_string();
            assert!(!e.contains("S3c"), "{e}");
            assert!(e.contains("percent-encode"), "{e}");
        }
        assert_eq!(
            redact("postgres://u@h/db?application_name=a@b&Password=x"),
            "postgres://u@h/db?application_name=a@b&Password=***"
        );
        assert_eq!(
            redact("postgres://h/x?user=a&password=b&sslmode=require"),
            "postgres://h/x?user=a&password=***&sslmode=require"
        );
    }

    fn env(vars: &[(&str, &str)]) -> Environment {
        Environment {
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            home: None,
            login: Some("login-name".into()),
            socket_dirs: Vec::new(),
        }
    }

    fn pg(url: &str) -> PgUrl {
        PgUrl::parse(url).unwrap()
    }

    const ALL_VARS: [(&str, &str); 9] = [
        ("PGHOST", "env.example"),
        ("PGPORT", "6543"),
        ("PGUSER", "env_user"),
        ("PGPASSWORD", "env-pw"),
        ("PGDATABASE", "env_db"),
        ("PGSSLMODE", "require"),
        ("PGAPPNAME", "env-app"),
        ("PGOPTIONS", "-c search_path=env"),
        ("PGCONNECT_TIMEOUT", "7"),
    ];

    #[test]
    fn pg_variables_fill_in_what_the_url_leaves_out() {
        let c = pg("postgres://")
            .connect_config_in(&env(&ALL_VARS))
            .unwrap();
        let config = &c.config;
        assert_eq!(
            config.get_hosts(),
            [postgres::config::Host::Tcp("env.example".into())]
        );
        assert_eq!(config.get_ports(), [6543]);
        assert_eq!(config.get_user(), Some("env_user"));
        assert_eq!(config.get_password(), Some(&b"env-pw"[..]));
        assert_eq!(config.get_dbname(), Some("env_db"));
        assert_eq!(config.get_application_name(), Some("env-app"));
        assert_eq!(config.get_options(), Some("-c search_path=env"));
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(7)));
        assert_eq!(c.ssl_mode, SslMode::Require);
    }

    #[test]
    fn what_the_url_says_wins_over_the_variables() {
        let url = pg(
            "postgres://bob:url-pw@url.example:1111/url_db?sslmode=disable\
                      &application_name=url-app&options=-c%20x%3D1&connect_timeout=3",
        );
        let c = url.connect_config_in(&env(&ALL_VARS)).unwrap();
        let config = &c.config;
        assert_eq!(
            config.get_hosts(),
            [postgres::config::Host::Tcp("url.example".into())]
        );
        assert_eq!(config.get_ports(), [1111]);
        assert_eq!(config.get_user(), Some("bob"));
        assert_eq!(config.get_password(), Some(&b"url-pw"[..]));
        assert_eq!(config.get_dbname(), Some("url_db"));
        assert_eq!(config.get_application_name(), Some("url-app"));
        assert_eq!(config.get_options(), Some("-c x=1"));
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(c.ssl_mode, SslMode::Disable);
        // A host given as a parameter counts as given.
        let c = pg("postgres:///d?host=%2Frun%2Fx")
            .connect_config_in(&env(&ALL_VARS))
            .unwrap();
        assert_eq!(
            c.config.get_hosts(),
            [postgres::config::Host::Unix("/run/x".into())]
        );
    }

    #[test]
    fn without_a_host_the_local_socket_else_localhost_and_the_login_name() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = env(&[]);
        e.socket_dirs = vec![dir.path().join("none"), dir.path().to_path_buf()];
        let c = pg("postgres:///db").connect_config_in(&e).unwrap();
        assert_eq!(
            c.config.get_hosts(),
            [postgres::config::Host::Tcp("localhost".into())]
        );
        assert_eq!(c.config.get_user(), Some("login-name"));
        assert_eq!(c.config.get_password(), None);
        std::fs::write(dir.path().join(".s.PGSQL.5432"), "").unwrap();
        let c = pg("postgres:///db").connect_config_in(&e).unwrap();
        assert_eq!(
            c.config.get_hosts(),
            [postgres::config::Host::Unix(dir.path().to_path_buf())]
        );
        // Another port: that port's socket.
        let c = pg("postgres://:5433/db").connect_config_in(&e).unwrap();
        assert_eq!(
            c.config.get_hosts(),
            [postgres::config::Host::Tcp("localhost".into())]
        );
        // PGHOST naming a directory is a socket; several hosts are kept.
        let c = pg("postgres://")
            .connect_config_in(&env(&[("PGHOST", "/sock,db2")]))
            .unwrap();
        assert_eq!(
            c.config.get_hosts(),
            [
                postgres::config::Host::Unix("/sock".into()),
                postgres::config::Host::Tcp("db2".into())
            ]
        );
    }

    #[test]
    fn the_password_file_is_read_when_no_password_is_given_and_it_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let pgpass = home.path().join(".pgpass");
        std::fs::write(
            &pgpass,
            "db.example:5432:rudder:alice:file-pw\nlocalhost:*:*:*:local-pw\n",
        )
        .unwrap();
        let private = |mode| {
            std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        private(0o600);
        let mut e = env(&[]);
        e.home = Some(home.path().to_path_buf());
        let password = |url: &str, e: &Environment| {
            let c = pg(url).connect_config_in(e).unwrap();
            c.config
                .get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned())
        };
        let url = "postgres://alice@db.example/rudder";
        assert_eq!(password(url, &e).as_deref(), Some("file-pw"));
        assert_eq!(password("postgres://alice@db.example/other", &e), None);
        // A socket in a default directory is `localhost`.
        e.socket_dirs = vec![PathBuf::from("/run/postgresql")];
        assert_eq!(
            password("postgres://bob@/x?host=/run/postgresql", &e).as_deref(),
            Some("local-pw")
        );
        assert_eq!(password("postgres://bob@/x?host=/elsewhere", &e), None);
        // The URL's password, then PGPASSWORD, come first.
        assert_eq!(
            password("postgres://alice:url-pw@db.example/rudder", &e).as_deref(),
            Some("url-pw")
        );
        let mut with_var = e.clone();
        with_var.vars.insert("PGPASSWORD".into(), "var-pw".into());
        assert_eq!(password(url, &with_var).as_deref(), Some("var-pw"));
        // A file others may read is ignored, as libpq does.
        private(0o644);
        assert_eq!(password(url, &e), None);
        private(0o600);
        // `passfile` and PGPASSFILE name another file.
        let other = home.path().join("other");
        std::fs::write(&other, "*:*:*:*:other-pw\n").unwrap();
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
        let q = format!("{url}?passfile={}", other.display());
        assert_eq!(password(&q, &e).as_deref(), Some("other-pw"));
        let mut with_file = e.clone();
        with_file
            .vars
            .insert("PGPASSFILE".into(), other.display().to_string());
        assert_eq!(password(url, &with_file).as_deref(), Some("other-pw"));
        // Never shown.
        let shown = format!("{:?} {}", pg(url), pg(url).redacted());
        assert!(!shown.contains("file-pw"), "{shown}");
    }

    #[test]
    fn tls_files_come_from_the_url_the_variables_or_the_home_directory() {
        let home = tempfile::tempdir().unwrap();
        let mut e = env(&[]);
        e.home = Some(home.path().to_path_buf());
        let c = pg("postgres://h/d?sslmode=require")
            .connect_config_in(&e)
            .unwrap();
        assert_eq!(
            (c.root_cert, c.client_cert, c.ssl_mode),
            (None, None, SslMode::Require)
        );
        let dot = home.path().join(".postgresql");
        std::fs::create_dir(&dot).unwrap();
        for f in ["root.crt", "postgresql.crt", "postgresql.key"] {
            std::fs::write(dot.join(f), "").unwrap();
        }
        // libpq: a root certificate makes `require` check the chain.
        let c = pg("postgres://h/d?sslmode=require")
            .connect_config_in(&e)
            .unwrap();
        assert_eq!(c.ssl_mode, SslMode::VerifyCa);
        assert_eq!(c.root_cert, Some(dot.join("root.crt")));
        assert_eq!(
            c.client_cert,
            Some((dot.join("postgresql.crt"), dot.join("postgresql.key")))
        );
        let vars = [
            ("PGSSLROOTCERT", "/v/ca.pem"),
            ("PGSSLCERT", "/v/c.pem"),
            ("PGSSLKEY", "/v/k.pem"),
        ];
        e.vars = env(&vars).vars;
        let c = pg("postgres://h/d?sslcert=%2Fu%2Fc.pem&sslkey=/u/k.pem")
            .connect_config_in(&e)
            .unwrap();
        assert_eq!(c.root_cert, Some(PathBuf::from("/v/ca.pem")));
        assert_eq!(
            c.client_cert,
            Some((PathBuf::from("/u/c.pem"), PathBuf::from("/u/k.pem")))
        );
        // A certificate without its key is refused, saying so.
        let err = PgUrl::parse("postgres://h/d?sslcert=/c.pem")
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs its key"), "{err}");
    }

    #[test]
    fn bad_variables_are_named() {
        for (vars, named) in [
            (&[("PGSSLMODE", "sometimes")][..], "PGSSLMODE \"sometimes\""),
            (&[("PGPORT", "x")], "PGPORT \"x\""),
            (&[("PGHOSTADDR", "not-an-ip")], "PGHOSTADDR"),
            (&[("PGCONNECT_TIMEOUT", "soon")], "PGCONNECT_TIMEOUT"),
        ] {
            let err = pg("postgres://a:s3cret@/d")
                .connect_config_in(&env(vars))
                .unwrap_err()
                .to_string();
            assert!(err.contains(named), "{err}");
            assert!(!err.contains("s3cret"), "{err}");
        }
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
