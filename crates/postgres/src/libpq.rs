//! libpq's conventions for what a PostgreSQL URL leaves out, so that a
//! user's `PG*` variables and `~/.pgpass` work with rudder as with `psql`:
//!
//! - the environment variables `PGHOST`, `PGHOSTADDR`, `PGPORT`, `PGUSER`,
//!   `PGPASSWORD`, `PGPASSFILE`, `PGDATABASE`, `PGOPTIONS`, `PGAPPNAME`,
//!   `PGCONNECT_TIMEOUT`, `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`,
//!   `PGSSLKEY` (an empty one counts as unset);
//! - the password file (`passfile`, else `$PGPASSFILE`, else `~/.pgpass`),
//!   read only when no password was given and only if no one else may read
//!   it (mode 0600 or less), as libpq;
//! - the TLS files in `~/.postgresql/`: `postgresql.crt` and
//!   `postgresql.key` (the client certificate) and `root.crt` (the roots),
//!   each when it exists;
//! - the defaults: the login name as the user, the local server's socket
//!   (the first of `/run/postgresql`, `/var/run/postgresql`, `/tmp` that
//!   has one for the port), else `localhost` over TCP.
//!
//! What the URL says always wins. The [`Environment`] is a value, so that
//! the rules are tested without touching the process's environment.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use postgres::config::Host;

/// The variables read, in the order the docs list them.
pub const VARS: [&str; 14] = [
    "PGHOST",
    "PGHOSTADDR",
    "PGPORT",
    "PGUSER",
    "PGPASSWORD",
    "PGPASSFILE",
    "PGDATABASE",
    "PGOPTIONS",
    "PGAPPNAME",
    "PGCONNECT_TIMEOUT",
    "PGSSLMODE",
    "PGSSLROOTCERT",
    "PGSSLCERT",
    "PGSSLKEY",
];

/// Where the defaults come from: the process, or (in tests) given values.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// The `PG*` variables that are set and not empty.
    pub vars: HashMap<String, String>,
    /// The home directory (`~/.pgpass`, `~/.postgresql/`).
    pub home: Option<PathBuf>,
    /// The login name, the default user.
    pub login: Option<String>,
    /// Where to look for the local server's socket when no host is given.
    pub socket_dirs: Vec<PathBuf>,
}

impl Environment {
    /// The process's environment.
    pub fn of_process() -> Environment {
        let vars = VARS
            .iter()
            .filter_map(|&name| {
                let value = std::env::var(name).ok()?;
                (!value.is_empty()).then(|| (name.to_string(), value))
            })
            .collect();
        Environment {
            vars,
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            login: login_name(),
            socket_dirs: ["/run/postgresql", "/var/run/postgresql", "/tmp"]
                .iter()
                .map(PathBuf::from)
                .collect(),
        }
    }

    /// A variable, if set and not empty.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// `~/.postgresql/NAME`, if that file exists.
    fn home_file(&self, name: &str) -> Option<PathBuf> {
        let path = self.home.as_ref()?.join(".postgresql").join(name);
        path.is_file().then_some(path)
    }
}

/// The effective user's login name (libpq's default user), else `$USER`.
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn login_name() -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: an all-zero `passwd` is a valid value to be overwritten.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buf`'s length is given.
    let rc = unsafe {
        libc::getpwuid_r(
            libc::geteuid(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc == 0 && !found.is_null() && !pwd.pw_name.is_null() {
        // SAFETY: on success `pw_name` points at a NUL-terminated string in
        // `buf`, which is alive here.
        let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
        return Some(name.to_string_lossy().into_owned());
    }
    std::env::var("USER").ok().filter(|u| !u.is_empty())
}

/// Fill in what `config` lacks, as libpq: hosts, ports, user, database,
/// options, application name, connect timeout, then the password
/// (`PGPASSWORD`, else the password file `passfile`, `$PGPASSFILE` or
/// `~/.pgpass`). `Err` names the variable that is wrong.
pub fn fill(
    config: &mut postgres::Config,
    passfile: Option<&Path>,
    env: &Environment,
) -> Result<(), String> {
    if config.get_ports().is_empty()
        && let Some(ports) = env.var("PGPORT")
    {
        for port in ports.split(',') {
            let port = port
                .trim()
                .parse()
                .map_err(|_| format!("PGPORT {ports:?} is not a port number"))?;
            config.port(port);
        }
    }
    if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
        if let Some(hosts) = env.var("PGHOST") {
            for host in hosts.split(',') {
                config.host(host);
            }
        } else if let Some(addrs) = env.var("PGHOSTADDR") {
            for addr in addrs.split(',') {
                let addr = addr
                    .trim()
                    .parse()
                    .map_err(|_| format!("PGHOSTADDR {addrs:?} is not an IP address"))?;
                config.hostaddr(addr);
            }
        } else {
            let port = config.get_ports().first().copied().unwrap_or(5432);
            let socket = format!(".s.PGSQL.{port}");
            match env.socket_dirs.iter().find(|d| d.join(&socket).exists()) {
                Some(dir) => config.host_path(dir),
                None => config.host("localhost"),
            };
        }
    }
    if config.get_user().is_none()
        && let Some(user) = env.var("PGUSER").or(env.login.as_deref())
    {
        config.user(user);
    }
    if config.get_dbname().is_none()
        && let Some(db) = env.var("PGDATABASE")
    {
        config.dbname(db);
    }
    if config.get_options().is_none()
        && let Some(options) = env.var("PGOPTIONS")
    {
        config.options(options);
    }
    if config.get_application_name().is_none()
        && let Some(name) = env.var("PGAPPNAME")
    {
        config.application_name(name);
    }
    if config.get_connect_timeout().is_none()
        && let Some(t) = env.var("PGCONNECT_TIMEOUT")
    {
        let secs: i64 = t
            .trim()
            .parse()
            .map_err(|_| format!("PGCONNECT_TIMEOUT {t:?} is not a number of seconds"))?;
        if secs > 0 {
            config.connect_timeout(std::time::Duration::from_secs(secs as u64));
        }
    }
    if config.get_password().is_none() {
        if let Some(pw) = env.var("PGPASSWORD") {
            config.password(pw);
        } else {
            let file = passfile
                .map(Path::to_path_buf)
                .or_else(|| env.var("PGPASSFILE").map(PathBuf::from))
                .or_else(|| env.home.as_ref().map(|h| h.join(".pgpass")));
            if let Some(pw) = file.and_then(|f| from_passfile(&f, config, env)) {
                config.password(pw);
            }
        }
    }
    Ok(())
}

/// The TLS files: what the URL names, else the variable, else the file in
/// `~/.postgresql/` if it exists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The roots to trust (PEM).
    pub root_cert: Option<PathBuf>,
    /// The client certificate (PEM) and its key (PEM, not encrypted).
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl TlsFiles {
    pub fn resolve(
        root_cert: Option<PathBuf>,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        env: &Environment,
    ) -> TlsFiles {
        let pick = |given: Option<PathBuf>, var: &str, file: &str| {
            given
                .or_else(|| env.var(var).map(PathBuf::from))
                .or_else(|| env.home_file(file))
        };
        TlsFiles {
            root_cert: pick(root_cert, "PGSSLROOTCERT", "root.crt"),
            cert: pick(cert, "PGSSLCERT", "postgresql.crt"),
            key: pick(key, "PGSSLKEY", "postgresql.key"),
        }
    }
}

/// The password the password file gives for `config`'s first host, port,
/// database and user, if the file is there, private and has a line for
/// them. The host of a socket in one of the default directories is
/// `localhost`, as libpq.
fn from_passfile(file: &Path, config: &postgres::Config, env: &Environment) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(file).ok()?;
    // libpq ignores a file others may read (with a warning).
    if !meta.is_file() || meta.permissions().mode() & 0o077 != 0 {
        return None;
    }
    let host = match (config.get_hosts().first(), config.get_hostaddrs().first()) {
        (Some(Host::Tcp(h)), _) => h.clone(),
        (Some(Host::Unix(dir)), _) if env.socket_dirs.iter().any(|d| d == dir) => {
            "localhost".to_string()
        }
        (Some(Host::Unix(dir)), _) => dir.display().to_string(),
        (None, Some(addr)) => addr.to_string(),
        (None, None) => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user()?;
    let db = config.get_dbname().unwrap_or(user);
    let text = std::fs::read_to_string(file).ok()?;
    passfile_lookup(&text, [&host, &port, db, user])
}

/// The password of the first line of a password file whose four first
/// fields (`*` matches anything) match `want`: `host:port:db:user:password`,
/// `\:` and `\\` escaped, `#` lines comments.
pub fn passfile_lookup(text: &str, want: [&str; 4]) -> Option<String> {
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = Vec::with_capacity(5);
        let mut field = String::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => field.extend(chars.next()),
                ':' if fields.len() < 4 => fields.push(std::mem::take(&mut field)),
                c => field.push(c),
            }
        }
        fields.push(field);
        if fields.len() == 5
            && fields[..4]
                .iter()
                .zip(want)
                .all(|(f, w)| f == "*" || f == w)
        {
            return fields.pop();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_line_of_a_password_file_gives_the_password() {
        let text = "# comment\n\
                    db.example:5432:other:alice:wrong\n\
                    db.example:5432:*:alice:p\\:w\\\\1:x\n\
                    *:*:*:*:fallback\n";
        let want = |h, p, d, u| passfile_lookup(text, [h, p, d, u]);
        assert_eq!(
            want("db.example", "5432", "rudder", "alice").as_deref(),
            Some("p:w\\1:x")
        );
        assert_eq!(
            want("db.example", "5432", "other", "alice").as_deref(),
            Some("wrong")
        );
        assert_eq!(
            want("elsewhere", "1", "x", "bob").as_deref(),
            Some("fallback")
        );
        assert_eq!(passfile_lookup("a:b:c:d\n", ["a", "b", "c", "d"]), None);
        assert_eq!(
            passfile_lookup("h\\:x:1:d:u:pw", ["h:x", "1", "d", "u"]).as_deref(),
            Some("pw")
        );
    }
}
