//! What connecting to PostgreSQL needs, from a [`PgUrl`] and libpq's
//! environment variables and files.

use std::path::PathBuf;

use rudder_core::url::{PgUrl, UrlError, percent_decode};

use crate::libpq;
pub use crate::libpq::Environment;

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

/// Check that `url` can be connected with: every parameter known and valid
/// (nothing is connected yet).
pub fn check(url: &PgUrl) -> Result<(), UrlError> {
    url.connect_config().map(drop)
}

/// The connection settings of a [`PgUrl`].
pub trait Connect {
    /// The connection settings, what the URL leaves out taken from the
    /// process's `PG*` variables and libpq's files.
    fn connect_config(&self) -> Result<PgConnect, UrlError> {
        self.connect_config_in(&Environment::of_process())
    }

    /// [`Connect::connect_config`] in the environment `env`.
    fn connect_config_in(&self, env: &Environment) -> Result<PgConnect, UrlError>;
}

impl Connect for PgUrl {
    /// [`PgUrl::connect_config`] in the environment `env`. The TLS and
    /// password-file parameters are read here, the others by the
    /// `postgres` crate; then [`libpq::fill`] and [`libpq::TlsFiles`] fill
    /// in what is missing.
    fn connect_config_in(&self, env: &Environment) -> Result<PgConnect, UrlError> {
        let bad = |why: String| UrlError::Postgres {
            url: self.redacted(),
            message: why,
        };
        let (base, query) = match self.secret_text().split_once('?') {
            Some((b, q)) => (b, q.split('#').next().unwrap_or("")),
            None => (self.secret_text().split('#').next().unwrap_or(""), ""),
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

#[cfg(test)]
mod tests {
    use super::*;
    use rudder_core::url::{StoreUrl, redact};
    use std::time::Duration;

    fn parse(s: &str) -> Result<StoreUrl, UrlError> {
        let url = StoreUrl::parse(s)?;
        if let StoreUrl::Postgres(u) = &url {
            check(u)?;
        }
        Ok(url)
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
        let err = check(&pg("postgres://h/d?sslcert=/c.pem"))
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
