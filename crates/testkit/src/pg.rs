//! A real PostgreSQL server for the tests: a throwaway cluster (`initdb` in
//! a temp dir) listening on a unix socket in that dir and on 127.0.0.1 at a
//! free port, started as an unprivileged user (the server refuses to run as
//! root: as root, the `postgres` user the Debian package creates runs it).
//! Finding the server's programs and running them as that user is the job
//! of `scripts/pg-local.sh`, which the README's local recipe uses too, so
//! that both work as root and as anyone else alike.
//!
//! One cluster per test process, shared ([`shared`]), with one database
//! per process and one schema per store ([`store_url`]); fault tests that
//! stop the server get a cluster of their own ([`Cluster::start`]). A
//! cluster is removed when its value is dropped and, since statics are
//! never dropped, by a watchdog process that stops the server and deletes
//! the dir as soon as the test process is gone.
//!
//! Without PostgreSQL's binaries the PostgreSQL tests are skipped, loudly;
//! with `RUDDER_REQUIRE_PG=1` (CI) they fail instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Run `f` on a thread of its own: the `postgres` crate's blocking client
/// cannot run on a thread inside a tokio runtime (the async tests).
pub fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().expect("no panic"))
}

/// The role the tests connect as (the cluster's superuser).
pub const SUPERUSER: &str = "rudder";

/// `scripts/pg-local.sh`, the repository's (two folders above this crate).
fn script() -> Command {
    Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/pg-local.sh"
    ))
}

/// Where PostgreSQL's server programs are, if anywhere, as
/// `scripts/pg-local.sh bindir` finds them: `$RUDDER_TEST_PG_BINDIR` when
/// set (and only there; else the script's `$RUDDER_PG_BINDIR`), else
/// `pg_config --bindir`, `/usr/lib/postgresql/*/bin` (the newest), `PATH`.
pub fn bindir() -> Option<PathBuf> {
    let mut c = script();
    c.arg("bindir");
    if let Some(d) = std::env::var_os("RUDDER_TEST_PG_BINDIR") {
        c.env("RUDDER_PG_BINDIR", d);
    }
    let out = c.stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && !dir.as_os_str().is_empty()).then_some(dir)
}

fn required() -> bool {
    std::env::var("RUDDER_REQUIRE_PG").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Whether the PostgreSQL tests can run here. Without the binaries, says
/// so loudly on stderr (once per process), or fails with
/// `RUDDER_REQUIRE_PG=1`.
pub fn available() -> bool {
    static ONCE: OnceLock<bool> = OnceLock::new();
    *ONCE.get_or_init(|| {
        if let Some(dir) = bindir() {
            // Said once per test binary, found or not, straight to the
            // process's stderr (below): a run that used a server says which.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "PostgreSQL tests: server binaries found in {} (a throwaway cluster per test process)",
                dir.display()
            );
            return true;
        }
        assert!(
            !required(),
            "RUDDER_REQUIRE_PG is set but no PostgreSQL server binaries were found \
             (pg_config --bindir, /usr/lib/postgresql/*/bin, PATH)"
        );
        // Straight to the process's stderr: the test harness captures
        // `eprintln!`, and this must be seen whether a test fails or not.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "\n\
             ********************************************************************\n\
             * PostgreSQL TESTS SKIPPED: no PostgreSQL server binaries found     *\n\
             * (initdb, pg_ctl via pg_config --bindir, /usr/lib/postgresql/*/bin *\n\
             * or PATH). To run them: apt-get install postgresql (Debian), then *\n\
             * cargo test; RUDDER_REQUIRE_PG=1 makes their absence an error.    *\n\
             ********************************************************************\n"
        );
        false
    })
}

/// A running throwaway cluster.
pub struct Cluster {
    root: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
    watchdog: Option<std::process::Child>,
    /// Whether the server fsyncs (benchmarks); off for tests.
    fsync: bool,
    /// The superuser's password, when TCP connections need one.
    password: Option<String>,
}

/// The cluster shared by the tests of this process (started on first use).
pub fn shared() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| Cluster::start().expect("start the test PostgreSQL cluster"))
}

/// `program` run as the server's user: `postgres` when this process is
/// root, else this process's own (`scripts/pg-local.sh run`).
fn as_server_user(program: &Path) -> Command {
    let mut c = script();
    c.arg("run").arg(program);
    c
}

/// Give `path` to the server's user (when running as root, the server
/// runs as `postgres` and must read it; `scripts/pg-local.sh own`).
fn chown_to_server_user(path: &Path) -> Result<(), String> {
    let mut c = script();
    c.arg("own").arg(path);
    run(c, "chown to the server's user")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn run(mut c: Command, what: &str) -> Result<(), String> {
    let out = c
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl Cluster {
    /// `initdb` and start a new cluster (fsync off: see `start_server`).
    pub fn start() -> Result<Cluster, String> {
        Cluster::start_with(false, None)
    }

    /// A new cluster whose server fsyncs every commit, as a real one does
    /// (for benchmarks).
    pub fn start_durable() -> Result<Cluster, String> {
        Cluster::start_with(true, None)
    }

    /// A new cluster whose TCP connections need a password (SCRAM-SHA-256,
    /// `password` for the superuser; roles made later get their own); its
    /// unix socket still trusts, so the helpers here connect as before.
    pub fn start_with_password(password: &str) -> Result<Cluster, String> {
        Cluster::start_with(false, Some(password))
    }

    fn start_with(fsync: bool, password: Option<&str>) -> Result<Cluster, String> {
        let bin = bindir().ok_or("no PostgreSQL binaries")?;
        let root = tempfile::Builder::new()
            .prefix("rudder-pg-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        chown_to_server_user(root.path())?;
        let data = root.path().join("data");
        let mut initdb = as_server_user(&bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", SUPERUSER, "-E", "UTF8", "--no-sync"])
            .args(["--no-instructions", "--locale=C"]);
        let pwfile = root.path().join("pwfile");
        match password {
            None => {
                initdb.arg("--auth=trust");
            }
            Some(pw) => {
                std::fs::write(&pwfile, pw).map_err(|e| format!("write the pwfile: {e}"))?;
                chown_to_server_user(&pwfile)?;
                initdb
                    .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
                    .arg(format!("--pwfile={}", pwfile.display()));
            }
        }
        run(initdb, "initdb")?;
        let _ = std::fs::remove_file(&pwfile);
        let mut cluster = Cluster {
            root,
            bin,
            port: 0,
            watchdog: None,
            fsync,
            password: password.map(str::to_string),
        };
        cluster.watchdog = Some(cluster.spawn_watchdog()?);
        // A port found free may be taken before the server binds it.
        let mut last = String::new();
        for _ in 0..5 {
            cluster.port = free_port();
            match cluster.start_server() {
                Ok(()) => return Ok(cluster),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    pub fn dir(&self) -> &Path {
        self.root.path()
    }

    fn data(&self) -> PathBuf {
        self.root.path().join("data")
    }

    /// Start the server (again) on its port.
    pub fn start_server(&self) -> Result<(), String> {
        // fsync off: the tests crash the server (`stop -m immediate`), not
        // the machine, and a commit's WAL is written before it returns.
        let options = format!(
            "-k {} -h 127.0.0.1 -p {} -c fsync={} -c max_connections=300 \
             -c shared_buffers=16MB",
            self.dir().display(),
            self.port,
            if self.fsync { "on" } else { "off" }
        );
        let mut c = as_server_user(&self.bin.join("pg_ctl"));
        c.arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir().join("server.log"))
            .args(["-w", "-t", "60", "-o", &options, "start"]);
        run(c, "pg_ctl start").map_err(|e| {
            let log = std::fs::read_to_string(self.dir().join("server.log")).unwrap_or_default();
            format!("{e}\n{log}")
        })
    }

    /// Stop the server at once, as a crash would (`pg_ctl stop -m immediate`).
    pub fn stop_immediate(&self) {
        let mut c = as_server_user(&self.bin.join("pg_ctl"));
        c.arg("-D")
            .arg(self.data())
            .args(["-w", "-m", "immediate", "stop"]);
        run(c, "pg_ctl stop").expect("stop the server");
    }

    /// Stop the server and every process of it with SIGSTOP, as a host
    /// that hangs: connections stay open and nothing answers. They go on
    /// when the guard is dropped (a failed test too).
    pub fn freeze(&self) -> Frozen {
        let pid_file = std::fs::read_to_string(self.data().join("postmaster.pid"))
            .expect("the server's postmaster.pid");
        let postmaster: u32 = pid_file
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .expect("a pid on postmaster.pid's first line");
        // The postmaster first, so that it starts no other process.
        let mut pids = vec![postmaster];
        pids.extend(children(postmaster));
        signal(&pids, "-STOP");
        Frozen(pids)
    }

    /// A watchdog that stops the server and removes the dir once this
    /// process is gone (the shared cluster is a static: never dropped).
    fn spawn_watchdog(&self) -> Result<std::process::Child, String> {
        let pg_ctl = self.bin.join("pg_ctl");
        let watch = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             '{pg_local}' run '{pg_ctl}' -D '{data}' -m immediate stop >/dev/null 2>&1; \
             rm -rf '{dir}'",
            pid = std::process::id(),
            pg_local = script().get_program().to_string_lossy(),
            pg_ctl = pg_ctl.display(),
            data = self.data().display(),
            dir = self.dir().display(),
        );
        Command::new("setsid")
            .args(["sh", "-c", &watch])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start the watchdog: {e}"))
    }

    /// The URL of database `db` over the unix socket.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://{SUPERUSER}@/{db}?host={}&port={}",
            encode(&self.dir().display().to_string()),
            self.port
        )
    }

    /// The URL of database `db` over TCP on 127.0.0.1 (as the superuser,
    /// with its password if the cluster has one).
    pub fn tcp_url(&self, db: &str) -> String {
        let password = self
            .password
            .as_ref()
            .map(|p| format!(":{}", encode(p)))
            .unwrap_or_default();
        format!(
            "postgres://{SUPERUSER}{password}@127.0.0.1:{}/{db}",
            self.port
        )
    }

    /// The URL of database `db` over the unix socket, its connections' search
    /// path `path` (`-c search_path=...`: a store in a schema of its own).
    pub fn url_in(&self, db: &str, path: &str) -> String {
        format!(
            "{}&options={}",
            self.url(db),
            encode(&format!("-c search_path={path}"))
        )
    }

    /// The rows `sql` answers, run as the superuser in database `db`.
    pub fn query(
        &self,
        db: &str,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Vec<postgres::Row> {
        off_runtime(|| {
            postgres::Client::connect(&self.url(db), postgres::NoTls)?.query(sql, params)
        })
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// A superuser connection to the `postgres` database.
    pub fn admin(&self) -> postgres::Client {
        off_runtime(|| postgres::Client::connect(&self.url("postgres"), postgres::NoTls))
            .expect("connect to the test cluster")
    }

    /// Run `sql` as the superuser in database `db`.
    pub fn sql(&self, db: &str, sql: &str) {
        off_runtime(|| {
            postgres::Client::connect(&self.url(db), postgres::NoTls)?.batch_execute(sql)
        })
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// A new, empty database; its name.
    pub fn create_database(&self) -> String {
        static N: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "rudder_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        self.sql("postgres", &format!("CREATE DATABASE {name}"));
        name
    }

    /// End every connection to `db` but this one (`pg_terminate_backend`).
    pub fn terminate_backends(&self, db: &str) -> u64 {
        off_runtime(|| {
            let mut admin = postgres::Client::connect(&self.url("postgres"), postgres::NoTls)?;
            admin.query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&db],
            )
        })
        .map(|rows| rows.len() as u64)
        .expect("terminate backends")
    }
}

impl Cluster {
    /// Serve TLS with this certificate and key (PEM), and refuse TCP
    /// connections without it (so a connection that works used TLS).
    /// Restarts the server.
    pub fn enable_tls(&self, cert_pem: &str, key_pem: &str) {
        self.serve_tls(cert_pem, key_pem, None);
    }

    /// [`Cluster::enable_tls`], and TCP connections authenticated by a
    /// client certificate that `client_ca_pem` signed, whose common name
    /// is the role (`pg_hba.conf` method `cert`).
    pub fn require_client_certificates(&self, cert_pem: &str, key_pem: &str, client_ca_pem: &str) {
        self.serve_tls(cert_pem, key_pem, Some(client_ca_pem));
    }

    fn serve_tls(&self, cert_pem: &str, key_pem: &str, client_ca_pem: Option<&str>) {
        let data = self.data();
        let write = |name: &str, text: &str, mode: u32| {
            use std::os::unix::fs::PermissionsExt;
            let path = data.join(name);
            std::fs::write(&path, text).expect("write a TLS file");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            chown_to_server_user(&path).expect("chown a TLS file");
        };
        write("server.crt", cert_pem, 0o644);
        write("server.key", key_pem, 0o600);
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("postgresql.conf");
        text.push_str("\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n");
        let method = match client_ca_pem {
            Some(ca) => {
                write("client_ca.crt", ca, 0o644);
                text.push_str("ssl_ca_file = 'client_ca.crt'\n");
                "cert"
            }
            None => "trust",
        };
        std::fs::write(&conf, text).expect("write postgresql.conf");
        let hba = format!(
            "local all all trust\n\
             hostssl all all 127.0.0.1/32 {method}\n\
             hostnossl all all 127.0.0.1/32 reject\n"
        );
        std::fs::write(data.join("pg_hba.conf"), hba).expect("write pg_hba.conf");
        self.stop_immediate();
        self.start_server().expect("restart with TLS");
    }

    /// The directory of PostgreSQL's programs (`psql` is there too).
    pub fn bin(&self) -> &Path {
        &self.bin
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut c = as_server_user(&self.bin.join("pg_ctl"));
        c.arg("-D")
            .arg(self.data())
            .args(["-w", "-m", "immediate", "stop"]);
        let _ = c.stdout(Stdio::null()).stderr(Stdio::null()).status();
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// Whether process `pid` listens for changes on the shared cluster (its
/// feed's connection, named `rudder-feed-PID`, has run `LISTEN`).
pub fn listening(pid: u32) -> bool {
    let cluster = shared();
    let name = format!("rudder-feed-{pid}");
    off_runtime(|| {
        let mut c = postgres::Client::connect(&cluster.url("postgres"), postgres::NoTls)?;
        c.query(
            "SELECT 1 FROM pg_stat_activity WHERE application_name = $1 \
             AND query LIKE 'LISTEN%'",
            &[&name],
        )
    })
    .map(|rows| !rows.is_empty())
    .unwrap_or(false)
}

/// Percent-encode a URL query value.
pub fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A URL naming a new, empty store on the shared cluster: a schema of its
/// own in this process's database (cheaper than a database per store: the
/// property tests make hundreds).
pub fn store_url() -> String {
    static DB: OnceLock<String> = OnceLock::new();
    static N: AtomicU64 = AtomicU64::new(0);
    let cluster = shared();
    let db = DB.get_or_init(|| cluster.create_database());
    let schema = format!("s{}", N.fetch_add(1, Ordering::Relaxed));
    cluster.sql(db, &format!("CREATE SCHEMA {schema}"));
    cluster.url_in(db, &schema)
}

/// Server processes stopped by [`Cluster::freeze`]; continued on drop.
pub struct Frozen(Vec<u32>);

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(&self.0, "-CONT");
    }
}

fn signal(pids: &[u32], sig: &str) {
    let status = Command::new("kill")
        .arg(sig)
        .args(pids.iter().map(|p| p.to_string()))
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {sig} {pids:?}: {status}");
}

/// The processes whose parent is `pid` (from /proc).
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `PID (comm) STATE PPID ...`; comm may hold spaces and `)`.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}
