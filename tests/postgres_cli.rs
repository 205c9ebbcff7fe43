//! The binary over PostgreSQL against a real server (see
//! crates/testkit/src/pg.rs): a newer schema refused, errors that name the
//! server and never show the password, exit codes for bad credentials, a
//! missing database and a denied permission, a zombie worker refused, the
//! least-privileged role, TLS and client certificates, the text index and
//! `migrate`, `wait` and writes through a restart of the server, `copy`
//! into PostgreSQL (byte-for-byte round trips, NUL characters), the demo
//! worker's log. The backend's own tests (through
//! the store) are in crates/store/tests/postgres_store.rs.

mod common;
use std::path::PathBuf;
use std::time::Duration;

use common::{CliKind, pg};
use rudder::store::{PostgresBackend, StoreUrl};
use rudder::task::{Actor, Status};
use rudder::{NewTask, Store};
use serde_json::json;

/// Skip (loudly, see `pg::available`) without PostgreSQL.
macro_rules! need_pg {
    () => {
        if !pg::available() {
            return;
        }
    };
}

fn backend(url: &str) -> PostgresBackend {
    match StoreUrl::parse(url).expect("a URL") {
        StoreUrl::Postgres(u) => PostgresBackend::new(u),
        other => panic!("not postgres: {other:?}"),
    }
}

/// docs/stores.md's least-privilege set-up ("Many machines"), as written there: the owner
/// migrates, the application role only reads and writes rows.
const APP_ROLE_SQL: &str = "
CREATE ROLE rudder_app LOGIN;
GRANT CONNECT ON DATABASE {db} TO rudder_app;
GRANT USAGE ON SCHEMA public TO rudder_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON rudder_tasks, rudder_counts, rudder_changes, rudder_deliveries, rudder_trail TO rudder_app;
GRANT SELECT ON rudder_schema TO rudder_app;
";

/// A certificate authority made for one test.
struct Ca {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    /// Its certificate (PEM).
    pem: String,
}

impl Ca {
    fn new() -> Ca {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            issuer: rcgen::Issuer::new(params, key),
            pem,
        }
    }

    /// A certificate it signed for the host `names` (or, for a client,
    /// common name `cn`): PEM certificate and key.
    fn sign(&self, names: &[&str], cn: Option<&str>) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        if let Some(cn) = cn {
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
        }
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    need_pg!();
    let url = pg::store_url();
    let store = Store::connect(&url).expect("a store URL");
    store.create(NewTask::default()).unwrap();
    let cluster = pg::shared();
    let StoreUrl::Postgres(u) = StoreUrl::parse(&url).unwrap() else {
        unreachable!()
    };
    let mut admin = postgres::Client::connect(u.secret_text(), postgres::NoTls).expect("connect");
    admin
        .batch_execute("UPDATE rudder_schema SET version = 99")
        .unwrap();
    let _ = cluster;
    for r in [
        common::run(&PathBuf::from(&url), &["list"]),
        common::run(&PathBuf::from(&url), &["create", "--title", "x"]),
    ] {
        assert_eq!(r.code, 6, "{r:#?}");
        assert!(r.stderr.contains("newer rudder"), "{r:#?}");
    }
    let n: i64 = admin
        .query_one("SELECT count(*) FROM rudder_tasks", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
}

#[test]
fn errors_name_the_server_and_never_show_the_password() {
    need_pg!();
    let cluster = pg::shared();
    // Nothing listens on this port (bound and released just now).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = format!("postgres://alice:s3cret@127.0.0.1:{port}/nowhere");
    let missing = format!(
        "postgres://{}:s3cret@127.0.0.1:{}/no_such_db",
        pg::SUPERUSER,
        cluster.port
    );
    for (url, what) in [
        (unreachable.as_str(), "nowhere"),
        (missing.as_str(), "no_such_db"),
    ] {
        // An unreachable server is asked again until the lock timeout.
        let r: common::Run = common::rudder()
            .env("RUDDER_LOCK_TIMEOUT", "1s")
            .args(["--store", url, "list"])
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, 6, "{r:#?}");
        assert!(r.stderr.contains(what), "{r:#?}");
        assert!(!r.stderr.contains("s3cret"), "{r:#?}");
        assert!(r.stderr.contains("***"), "{r:#?}");
    }
}

#[test]
fn a_zombie_worker_whose_claim_was_taken_over_is_refused() {
    need_pg!();
    let url = pg::store_url();
    let id = common::create(&PathBuf::from(&url), &[]);
    let zombie = Store::connect(&url).expect("a store URL");
    zombie
        .claim(&id, "zombie", Duration::from_millis(1))
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    // The lease lapsed: another machine takes the task over.
    let taken = Store::connect(&url)
        .expect("a store URL")
        .claim_next("rescuer", Duration::from_secs(600), &[])
        .unwrap()
        .expect("the lapsed task is claimable");
    assert_eq!(taken.task_id, id);
    let lease = Duration::from_secs(600);
    let refused = zombie
        .complete(
            &id,
            json!({"late": true}),
            Actor::Worker {
                holder: "zombie",
                lease: Some(lease),
            },
        )
        .unwrap_err();
    assert_eq!(refused.cli_kind(), "lease_lost", "{refused}");
    assert_eq!(refused.exit_code(), 4);
    let task = Store::connect(&url).expect("a store URL").get(&id).unwrap();
    assert_eq!(task.status, Status::Working);
    assert_eq!(task.claimed_by.as_deref(), Some("rescuer"));
}

#[test]
fn a_least_privileged_role_runs_everything_once_the_owner_migrated() {
    need_pg!();
    let cluster = pg::shared();
    let db = cluster.create_database();
    let owner = PathBuf::from(cluster.url(&db));
    let app = PathBuf::from(cluster.url(&db).replacen(
        &format!("{}@", pg::SUPERUSER),
        "rudder_app@",
        1,
    ));
    cluster.sql(&db, "CREATE ROLE rudder_app LOGIN");
    cluster.sql(
        &db,
        &format!(
            "REVOKE CREATE ON SCHEMA public FROM PUBLIC; REVOKE ALL ON DATABASE {db} FROM PUBLIC"
        ),
    );
    // Before the owner migrated: the role cannot create the tables, and
    // says why (exit 6); a read sees an empty store.
    cluster.sql(&db, &format!("GRANT CONNECT ON DATABASE {db} TO rudder_app; GRANT USAGE ON SCHEMA public TO rudder_app"));
    let r = common::run(&app, &["create", "--title", "x"]);
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(r.stderr.contains("permission denied"), "{r:#?}");
    let r = common::run(&app, &["list", "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json(), json!([]));

    let r = common::run(&owner, &["migrate", "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()["schema_version_before"], json!(null));
    let r = common::run(&owner, &["migrate"]);
    assert!(r.stdout.contains("already"), "{r:#?}");
    let grants = APP_ROLE_SQL
        .replace("{db}", &db)
        .replace("CREATE ROLE rudder_app LOGIN;", "");
    cluster.sql(&db, &grants);

    let id = common::create(&app, &["--title", "least privilege"]);
    let r = common::run(&app, &["get", &id, "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let store = Store::connect(&app).expect("a store URL");
    let claimed = store
        .claim_next("w", Duration::from_secs(60), &[])
        .unwrap()
        .expect("claimable");
    assert_eq!(claimed.task_id, id);
    let r = common::run(&app, &["complete", &id, "--result", "{}"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let r = common::run(&app, &["prune", "--older-than", "0s", "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(store.load().unwrap().is_empty());
    // `migrate` on a file store is a usage error.
    let dir = tempfile::tempdir().unwrap();
    let r = common::run(&dir.path().join("t.json"), &["migrate"]);
    assert_eq!(r.code, 2, "{r:#?}");
}

/// A CA, and a server certificate it signed for `names` (PEM: CA cert,
/// server cert, server key).
fn certificates(names: &[&str]) -> (String, String, String) {
    let ca = Ca::new();
    let (cert, key) = ca.sign(names, None);
    (ca.pem, cert, key)
}

#[test]
fn sslmode_encrypts_and_verifies_as_libpq_does() {
    need_pg!();
    let cluster = pg::Cluster::start().expect("a cluster of its own");
    // Valid for 127.0.0.1 (what the URL names) and for another name.
    let (ca, cert, key) = certificates(&["127.0.0.1", "db.example"]);
    cluster.enable_tls(&cert, &key);
    let db = cluster.create_database();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    let base = format!(
        "postgres://{}:pw@127.0.0.1:{}/{db}",
        pg::SUPERUSER,
        cluster.port
    );
    let with = |q: &str| PathBuf::from(format!("{base}?{q}"));
    let root = format!("sslrootcert={}", pg::encode(&ca_file.display().to_string()));

    // The server refuses TCP without TLS: a command that works used it.
    let r = common::run(&with("sslmode=disable"), &["create", "--title", "x"]);
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(!r.stderr.contains(":pw@"), "{r:#?}");
    for q in [
        "sslmode=require".to_string(),
        "sslmode=prefer".to_string(),
        format!("sslmode=verify-full&{root}"),
        format!("sslmode=verify-ca&{root}"),
    ] {
        let r = common::run(&with(&q), &["create", "--title", &q]);
        assert_eq!(r.code, 0, "{q}: {r:#?}");
    }
    // verify-full against the built-in roots: our CA is not one of them.
    let r = common::run(&with("sslmode=verify-full"), &["list"]);
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(r.stderr.contains("127.0.0.1"), "{r:#?}");
    assert!(!r.stderr.contains(":pw@"), "{r:#?}");

    // A certificate for another host: verify-ca accepts it, verify-full not.
    let (ca2, cert2, key2) = certificates(&["db.example"]);
    cluster.enable_tls(&cert2, &key2);
    std::fs::write(&ca_file, &ca2).unwrap();
    let r = common::run(&with(&format!("sslmode=verify-ca&{root}")), &["list"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let r = common::run(&with(&format!("sslmode=verify-full&{root}")), &["list"]);
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(r.stderr.to_lowercase().contains("certificate"), "{r:#?}");
}

#[test]
fn the_demo_worker_log_of_a_postgres_store_is_a_plain_file_without_the_url() {
    let url = rudder::store::StoreUrl::parse("postgres://alice:s3cret@db.example/rudder")
        .expect("a store URL");
    let log = rudder::demo::supervisor::Supervisor::log_path_for(&url);
    assert_eq!(log, PathBuf::from("rudder-demo.worker.log"));
}

#[test]
fn a_lock_held_elsewhere_is_waited_for_at_most_the_lock_timeout() {
    need_pg!();
    let url = pg::store_url();
    let id = common::create(&PathBuf::from(&url), &[]);
    let StoreUrl::Postgres(u) = StoreUrl::parse(&url).unwrap() else {
        unreachable!()
    };
    // Another session holds the task's row.
    let mut other = postgres::Client::connect(u.secret_text(), postgres::NoTls).unwrap();
    let mut tx = other.transaction().unwrap();
    tx.execute(
        "SELECT 1 FROM rudder_tasks WHERE task_id = $1 FOR UPDATE",
        &[&id],
    )
    .unwrap();
    let started = std::time::Instant::now();
    let r: common::Run = common::rudder()
        .env("RUDDER_LOCK_TIMEOUT", "300ms")
        .args(["--store", &url, "heartbeat", &id])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(r.stderr.contains("RUDDER_LOCK_TIMEOUT"), "{r:#?}");
    // The same kind as a lock timeout on the file or SQLite.
    let r: common::Run = common::rudder()
        .env("RUDDER_LOCK_TIMEOUT", "300ms")
        .args(["--store", &url, "heartbeat", &id, "--json"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 6, "{r:#?}");
    let v = r.json();
    assert_eq!(v["error"], "lock_timeout", "{v}");
    assert!(v["message"].as_str().unwrap().contains("300ms"), "{v}");
    // Not a timing assertion: only that it did not wait for the holder.
    assert!(started.elapsed() < Duration::from_secs(60));
    tx.rollback().unwrap();
    let r = common::run(&PathBuf::from(&url), &["heartbeat", &id]);
    assert_eq!(r.code, 0, "{r:#?}");
}

/// docs/architecture.md, issue 11: bad credentials, a missing database and a permission
/// denied are exit 6, say what was wrong, name the host and database, and
/// never show the password (in the human message or in `--json`).
#[test]
fn bad_credentials_a_missing_database_and_a_denied_permission_are_exit_6() {
    need_pg!();
    let cluster = pg::Cluster::start_with_password("right-pw-7f3a").expect("a cluster");
    let db = cluster.create_database();
    // The owner (the superuser, over the trusted socket) makes the tables;
    // a role without grants cannot read them.
    let r = common::run(&PathBuf::from(cluster.url(&db)), &["migrate"]);
    assert_eq!(r.code, 0, "{r:#?}");
    cluster.sql(
        &db,
        "CREATE ROLE nogrants LOGIN PASSWORD 'nogrants-pw-91c2'",
    );
    let port = cluster.port;
    let tcp = |user: &str, pw: &str, db: &str| {
        PathBuf::from(format!("postgres://{user}:{pw}@127.0.0.1:{port}/{db}"))
    };
    // The right password works: what fails below are the credentials.
    let r = common::run(&PathBuf::from(cluster.tcp_url(&db)), &["list", "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    // ... given in the URL, in PGPASSWORD or in ~/.pgpass (as libpq), the
    // URL's winning over the variable, the variable over the file.
    let home = tempfile::tempdir().unwrap();
    let pgpass = home.path().join(".pgpass");
    std::fs::write(&pgpass, format!("127.0.0.1:{port}:*:*:right-pw-7f3a\n")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let without = format!("postgres://{}@127.0.0.1:{port}/{db}", pg::SUPERUSER);
    let with_url_pw = format!(
        "postgres://{}:right-pw-7f3a@127.0.0.1:{port}/{db}",
        pg::SUPERUSER
    );
    for (url, pgpassword, code) in [
        (&without, Some("right-pw-7f3a"), 0),
        (&without, None, 0),
        (&without, Some("wrong-pw-0b9d"), 6),
        (&with_url_pw, Some("wrong-pw-0b9d"), 0),
    ] {
        let mut c = common::rudder();
        c.env("HOME", home.path()).env_remove("PGPASSWORD");
        if let Some(pw) = pgpassword {
            c.env("PGPASSWORD", pw);
        }
        let r: common::Run = c.args(["--store", url, "list"]).output().unwrap().into();
        assert_eq!(r.code, code, "{url} PGPASSWORD={pgpassword:?}: {r:#?}");
        assert!(!r.stderr.contains("-pw-"), "{r:#?}");
    }
    let socket = cluster.dir().display().to_string();
    let unknown_on_socket = PathBuf::from(format!(
        "postgres://nobody:sock-pw-55e1@/{db}?host={}&port={port}",
        pg::encode(&socket)
    ));
    let cases = [
        (
            tcp(pg::SUPERUSER, "wrong-pw-0b9d", &db),
            "wrong-pw-0b9d",
            "127.0.0.1",
            db.as_str(),
            "password authentication failed for user \"rudder\"",
        ),
        // Over a password-checked line the server does not say whether
        // the role exists (it fakes the exchange); over a trusted one it
        // does.
        (
            tcp("nobody", "nobody-pw-3c8e", &db),
            "nobody-pw-3c8e",
            "127.0.0.1",
            &db,
            "password authentication failed for user \"nobody\"",
        ),
        (
            unknown_on_socket,
            "sock-pw-55e1",
            &socket,
            &db,
            "role \"nobody\" does not exist",
        ),
        (
            tcp(pg::SUPERUSER, "right-pw-7f3a", "no_such_db"),
            "right-pw-7f3a",
            "127.0.0.1",
            "no_such_db",
            "database \"no_such_db\" does not exist",
        ),
        (
            tcp("nogrants", "nogrants-pw-91c2", &db),
            "nogrants-pw-91c2",
            "127.0.0.1",
            &db,
            "permission denied for table rudder_schema",
        ),
    ];
    for (url, password, host, db, why) in cases {
        let named = format!("host {host} port {port}, database \"{db}\"");
        for args in [
            &["list"][..],
            &["create", "--title", "x"],
            &["list", "--json"],
            &["create", "--title", "x", "--json"],
        ] {
            let r = common::run(&url, args);
            assert_eq!(r.code, 6, "{url:?} {args:?}: {r:#?}");
            let message = if args.contains(&"--json") {
                let v = r.json();
                assert_eq!(v["exit_code"], 6, "{v}");
                v["message"].as_str().unwrap_or_default().to_string()
            } else {
                r.stderr.clone()
            };
            assert!(message.contains(why), "{args:?}: {message}");
            assert!(message.contains(&named), "{args:?}: {message}");
            assert!(
                !r.stdout.contains(password) && !r.stderr.contains(password),
                "{args:?}: {r:#?}"
            );
        }
    }
}

/// A server that authenticates by client certificate (`pg_hba` method
/// `cert`): `sslcert`/`sslkey` in the URL, or `PGSSLCERT`/`PGSSLKEY`
/// (and `PGSSLROOTCERT`, `PGSSLMODE`) in the environment, are presented;
/// without one, or with one for another role, the connection is refused
/// (exit 6, naming the server).
#[test]
fn a_client_certificate_authenticates_from_the_url_or_the_pg_variables() {
    need_pg!();
    let cluster = pg::Cluster::start().expect("a cluster of its own");
    let server_ca = Ca::new();
    let (cert, key) = server_ca.sign(&["127.0.0.1"], None);
    let client_ca = Ca::new();
    cluster.require_client_certificates(&cert, &key, &client_ca.pem);
    let db = cluster.create_database();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path.display().to_string()
    };
    let root = file("root.pem", &server_ca.pem);
    let (mine, mine_key) = client_ca.sign(&[], Some(pg::SUPERUSER));
    let (cert_file, key_file) = (file("me.crt", &mine), file("me.key", &mine_key));
    let (other, other_key) = client_ca.sign(&[], Some("someone_else"));
    let (other_file, other_key_file) = (file("other.crt", &other), file("other.key", &other_key));
    let base = format!(
        "postgres://{}@127.0.0.1:{}/{db}",
        pg::SUPERUSER,
        cluster.port
    );
    let url = |q: String| PathBuf::from(format!("{base}?sslmode=verify-full&{q}"));
    let enc = |p: &str| pg::encode(p);

    let with_cert = url(format!(
        "sslrootcert={}&sslcert={}&sslkey={}",
        enc(&root),
        enc(&cert_file),
        enc(&key_file)
    ));
    let r = common::run(&with_cert, &["create", "--title", "by certificate"]);
    assert_eq!(r.code, 0, "{r:#?}");

    // No certificate: the server refuses, and the message says why and where.
    let r = common::run(&url(format!("sslrootcert={}", enc(&root))), &["list"]);
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(r.stderr.contains("certificate"), "{r:#?}");
    assert!(
        r.stderr
            .contains(&format!("host 127.0.0.1 port {}", cluster.port)),
        "{r:#?}"
    );
    // A certificate for another role.
    let r = common::run(
        &url(format!(
            "sslrootcert={}&sslcert={}&sslkey={}",
            enc(&root),
            enc(&other_file),
            enc(&other_key_file)
        )),
        &["list"],
    );
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(
        r.stderr.contains("certificate authentication failed"),
        "{r:#?}"
    );

    // The same from the PG* variables, the URL naming only the server.
    let r: common::Run = common::rudder()
        .env("PGSSLMODE", "verify-full")
        .env("PGSSLROOTCERT", &root)
        .env("PGSSLCERT", &cert_file)
        .env("PGSSLKEY", &key_file)
        .env("PGUSER", pg::SUPERUSER)
        .env("PGDATABASE", &db)
        .args(["--store", &format!("postgres://127.0.0.1:{}", cluster.port)])
        .args(["list", "--json"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()[0]["title"], "by certificate");
    // ... where the URL's own setting wins: `sslmode=disable` is refused.
    let r: common::Run = common::rudder()
        .env("PGSSLMODE", "verify-full")
        .env("PGSSLROOTCERT", &root)
        .env("PGSSLCERT", &cert_file)
        .env("PGSSLKEY", &key_file)
        .args(["--store", &format!("{base}?sslmode=disable")])
        .args(["list"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 6, "{r:#?}");
    assert!(r.stderr.contains("no encryption"), "{r:#?}");
}

/// How many times the index `name` was scanned, as the statistics say once
/// every other session flushed them (a session flushes when it ends).
fn index_scans(cluster: &pg::Cluster, db: &str, name: &str) -> i64 {
    let url = cluster.url(db);
    let name = name.to_string();
    pg::off_runtime(move || {
        let mut c = postgres::Client::connect(&url, postgres::NoTls)?;
        c.query_one(
            "SELECT coalesce(sum(idx_scan), 0)::int8 FROM pg_stat_user_indexes \
             WHERE indexrelname = $1",
            &[&name],
        )
        .map(|r| r.get(0))
    })
    .expect("read the index statistics")
}

/// Issue 11: pages walking backwards and the text filter are index scans
/// over PostgreSQL (and give what the reference gives). The session says
/// `enable_seqscan=off`, so the planner takes an index wherever one fits
/// the query; the statistics then show which index each query read.
#[test]
fn backwards_pages_and_the_text_filter_read_an_index() {
    need_pg!();
    let cluster = pg::shared();
    let db = cluster.create_database();
    let url = format!(
        "{}&options={}",
        cluster.url(&db),
        pg::encode("-c enable_seqscan=off")
    );
    // 2000 tasks (copied in from a file: quicker than 2000 creates), two
    // of them with a rare text, as one searches for.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.json");
    let mut tasks = serde_json::Map::new();
    for i in 0..2000u32 {
        let id = format!(
            "{:08x}-0000-4000-8000-{:012x}",
            i.wrapping_mul(2654435761),
            i
        );
        let at = format!("2026-01-01T00:{:02}:{:02}.{:06}Z", i / 60 % 60, i % 60, i);
        let title = match i {
            7 | 1777 => json!(format!("the NEEDLE in {i}")),
            _ if i % 3 == 0 => json!(null),
            _ => json!(format!("incident {i}")),
        };
        tasks.insert(
            id.clone(),
            json!({"task_id": id, "status": "working", "title": title, "created_at": at,
                   "updated_at": at, "revision": 1, "history": []}),
        );
    }
    std::fs::write(&file, serde_json::Value::Object(tasks).to_string()).unwrap();
    let r = common::run(&file, &["copy", file.to_str().unwrap(), &url]);
    assert_eq!(r.code, 0, "{r:#?}");
    let store = Store::connect(&url).expect("a store URL");
    let all: Vec<_> = store.load().unwrap().into_values().collect();
    // A task with a title ("incident 61"), so that the title page is a
    // range of that index.
    let anchor = all[61].task_id.clone();
    assert!(all[61].title.is_some());
    drop(store);
    // As autovacuum would: statistics, and the trigram index's pending
    // list (where a GIN index keeps recent entries) merged.
    cluster.sql(&db, "VACUUM ANALYZE rudder_tasks");
    use rudder::store::query::{PageQuery, SortKey, page_in_memory};
    let queries = [
        (
            "rudder_tasks_by_updated",
            PageQuery {
                sort: SortKey::Updated,
                descending: true,
                after: Some(anchor.clone()),
                limit: Some(10),
                ..PageQuery::default()
            },
        ),
        (
            "rudder_tasks_by_created",
            PageQuery {
                sort: SortKey::Created,
                descending: true,
                limit: Some(10),
                ..PageQuery::default()
            },
        ),
        (
            "rudder_tasks_by_title",
            PageQuery {
                sort: SortKey::Title,
                descending: true,
                after: Some(anchor.clone()),
                limit: Some(50),
                ..PageQuery::default()
            },
        ),
        (
            "rudder_tasks_by_text",
            PageQuery {
                text: Some("needle".into()),
                limit: Some(10),
                ..PageQuery::default()
            },
        ),
    ];
    for (index, q) in queries {
        let before = index_scans(cluster, &db, index);
        let store = Store::connect(&url).expect("a store URL");
        let ids = |v: Vec<rudder::Task>| v.into_iter().map(|t| t.task_id).collect::<Vec<_>>();
        let page = ids(store.page(&q).unwrap());
        assert_eq!(page, ids(page_in_memory(all.clone(), &q)), "{q:?}");
        assert!(!page.is_empty(), "{q:?}");
        // Closing the connection flushes its statistics.
        drop(store);
        let read = common::wait_for(Duration::from_secs(20), || {
            (index_scans(cluster, &db, index) > before).then_some(())
        });
        assert!(read.is_some(), "{q:?} did not read {index}");
    }
}

/// Where `pg_trgm` cannot be installed by the role that migrates (no
/// `CREATE` on the database), the tables are made without the trigram
/// index, `migrate` says so and what to do, and the text filter still
/// answers right; once an administrator installed the extension, `migrate`
/// adds the index.
#[test]
fn without_pg_trgm_the_text_filter_is_unindexed_and_migrate_says_so() {
    need_pg!();
    let cluster = pg::shared();
    let db = cluster.create_database();
    cluster.sql(
        &db,
        "CREATE ROLE lowowner LOGIN; GRANT CREATE, USAGE ON SCHEMA public TO lowowner",
    );
    let url = PathBuf::from(cluster.url(&db).replacen(
        &format!("{}@", pg::SUPERUSER),
        "lowowner@",
        1,
    ));
    let r = common::run(&url, &["migrate", "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()["text_index"], json!(false), "{r:#?}");
    let why = r.json()["text_index_missing"].as_str().unwrap().to_string();
    assert!(why.contains("permission denied"), "{why}");
    let r = common::run(&url, &["migrate"]);
    assert!(
        r.stdout.contains("not indexed") && r.stdout.contains("CREATE EXTENSION pg_trgm"),
        "{r:#?}"
    );
    common::create(&url, &["--title", "find the needle"]);
    common::create(&url, &["--title", "hay"]);
    let store = Store::connect(&url).expect("a store URL");
    let found = store
        .page(&rudder::store::query::PageQuery {
            text: Some("NEEDLE".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].title.as_deref(), Some("find the needle"));
    drop(store);
    cluster.sql(&db, "CREATE EXTENSION pg_trgm");
    let r = common::run(&url, &["migrate", "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()["text_index"], json!(true), "{r:#?}");
    assert_eq!(r.json()["text_index_missing"], json!(null), "{r:#?}");
}

/// `rudder wait` on a PostgreSQL store outlives the server's restart (a
/// deploy restarting the database is waited out, and said on stderr):
/// once the server is back, the task's completion ends the wait with 0.
#[test]
fn wait_outlives_a_restart_of_the_server() {
    need_pg!();
    let cluster = pg::Cluster::start().expect("a cluster of its own");
    let db = cluster.create_database();
    let url = cluster.url(&db);
    let id = Store::connect(&url)
        .expect("a store URL")
        .create(NewTask {
            title: Some("outlives a restart".into()),
            ..NewTask::default()
        })
        .unwrap()
        .task
        .task_id;
    let err = cluster.dir().join("wait.err");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_rudder"))
        .args(["--store", &url, "wait", &id, "--timeout", "600s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let said = |what: &str| {
        common::wait_for(Duration::from_secs(60), || {
            std::fs::read_to_string(&err)
                .unwrap_or_default()
                .contains(what)
                .then_some(())
        })
        .unwrap_or_else(|| {
            panic!(
                "wait never said {what:?}: {}",
                std::fs::read_to_string(&err).unwrap_or_default()
            )
        })
    };
    said(&format!("rudder: waiting for task {id}"));
    cluster.stop_immediate();
    said("still waiting");
    cluster.start_server().expect("restart");
    Store::connect(&url)
        .expect("a store URL")
        .complete(&id, json!({"ok": true}), Actor::Anyone)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&id),
        "the completed task is printed: {stdout}"
    );
}

/// A TCP relay to `upstream` that tells (on the channel) each time a
/// client connects, and hangs up on a client whose upstream cannot be
/// reached (a server down: the client sees its connection lost).
fn relay(upstream: u16) -> (u16, std::sync::mpsc::Receiver<()>) {
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let _ = tx.send(());
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                continue; // dropped: the client's connection is lost
            };
            let pipe = |mut from: TcpStream, mut to: TcpStream| {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Both);
                });
            };
            pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
            pipe(server, client);
        }
    });
    (port, rx)
}

/// A write while the server restarts is not refused at once: the server
/// that cannot be reached is asked again until `$RUDDER_LOCK_TIMEOUT`,
/// and the heartbeat lands once it is back (it used to fail, exit 6,
/// after 6 ms).
#[test]
fn a_write_during_a_restart_of_the_server_waits_for_it() {
    need_pg!();
    let cluster = pg::Cluster::start().expect("a cluster of its own");
    let db = cluster.create_database();
    let created = Store::connect(cluster.url(&db))
        .expect("a store URL")
        .create(NewTask::default())
        .unwrap()
        .task;
    let id = created.task_id.clone();
    let tcp = cluster.tcp_url(&db);
    let port = tcp
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split_once('/'))
        .map(|(p, _)| p.parse::<u16>().unwrap())
        .unwrap();
    let (relay_port, connected) = relay(port);
    let url = tcp.replace(&format!(":{port}/"), &format!(":{relay_port}/"));
    cluster.stop_immediate();
    let child = common::rudder()
        .env("RUDDER_LOCK_TIMEOUT", "120s")
        .args(["--store", &url, "heartbeat", &id, "--message", "across"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The heartbeat is under way (it has tried the server, and lost the
    // connection): bring the server back.
    connected
        .recv_timeout(Duration::from_secs(60))
        .expect("the heartbeat tried to connect");
    cluster.start_server().expect("restart");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let task = Store::connect(cluster.url(&db))
        .expect("a store URL")
        .get(&id)
        .unwrap();
    assert_eq!(task.status_message.as_deref(), Some("across"));
    assert_eq!(
        task.revision,
        created.revision + 1,
        "the heartbeat landed once"
    );
}

/// `copy` into PostgreSQL (the bulk path: `COPY FROM STDIN` into a
/// staging table) keeps every field and the store order, records one
/// change per task written with the counts, and run again leaves the
/// tasks as they are and brings forward only what changed in FROM.
#[test]
fn copy_into_postgres_in_bulk_is_exact_and_can_be_run_again() {
    need_pg!();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("from.json");
    let from = Store::connect(&file).expect("a store URL");
    let mut ids = Vec::new();
    for i in 0..300 {
        let t = from
            .create(NewTask {
                title: Some(format!("task {i}")),
                idempotency_key: Some(format!("key-{i}")),
                request: Some(json!({"n": i, "x": [1, 2.50, "три"]})),
                ..NewTask::default()
            })
            .unwrap()
            .task;
        if i % 7 == 0 {
            from.complete(&t.task_id, json!({"ok": i}), Actor::Anyone)
                .unwrap();
        }
        ids.push(t.task_id);
    }
    let url = pg::store_url();
    let copy = || {
        let r = common::run_plain(&["copy", file.to_str().unwrap(), &url, "--json"]);
        assert_eq!(r.code, 0, "{r:#?}");
        r.json()
    };
    let changes = || backend(&url).last_change().unwrap().unwrap_or(0);
    let r = copy();
    assert_eq!(r["copied"], 300, "{r}");
    let to = Store::connect(&url).expect("a store URL");
    let loaded = to.load().unwrap();
    let original = from.load().unwrap();
    assert_eq!(
        serde_json::to_string(&loaded).unwrap(),
        serde_json::to_string(&original).unwrap(),
        "every field, in store order"
    );
    let counts = to.counts().unwrap();
    assert_eq!(counts.total(), 300);
    assert_eq!(counts.get(Status::Completed), 43);
    let after_first = changes();
    // Again: nothing to do, nothing recorded.
    let r = copy();
    assert_eq!(r["unchanged"], 300, "{r}");
    assert_eq!(changes(), after_first);
    // One task moved on in FROM: only it is brought forward.
    from.complete(&ids[1], json!({"late": true}), Actor::Anyone)
        .unwrap();
    let r = copy();
    assert_eq!(
        (r["updated"].as_u64(), r["unchanged"].as_u64()),
        (Some(1), Some(299)),
        "{r}"
    );
    assert_eq!(to.get(&ids[1]).unwrap(), from.get(&ids[1]).unwrap());
    assert_eq!(to.counts().unwrap().get(Status::Completed), 44);
    assert_eq!(changes(), after_first + 1);
}

/// `pg_trgm` goes into a schema of its own (`rudder_extensions`), not the
/// schema of the first store that wanted it: dropping that store's schema
/// leaves another store's trigram index in place.
#[test]
fn dropping_one_stores_schema_keeps_another_stores_text_index() {
    need_pg!();
    let cluster = pg::shared();
    let db = cluster.create_database();
    cluster.sql(&db, "CREATE SCHEMA first; CREATE SCHEMA second");
    let url = |schema: &str| cluster.url_in(&db, schema);
    for schema in ["first", "second"] {
        let r = common::run(&PathBuf::from(url(schema)), &["migrate", "--json"]);
        assert_eq!(r.json()["text_index"], json!(true), "{r:#?}");
    }
    let indexes = || {
        cluster
            .query(
                &db,
                "SELECT schemaname::text FROM pg_indexes WHERE indexname = 'rudder_tasks_by_text' \
                 ORDER BY 1",
                &[],
            )
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
    };
    assert_eq!(indexes(), ["first", "second"]);
    cluster.sql(&db, "DROP SCHEMA first CASCADE");
    assert_eq!(indexes(), ["second"]);
}

/// `copy` into PostgreSQL merges the text index's new entries once per
/// batch, inside the batch's transaction (`crates/postgres/src/bulk.rs`):
/// after a copy the trigram index is there, valid, with nothing left in
/// its pending list (which every later search would read through, and
/// some later writer would pay for merging), and the text filter finds
/// what was copied. A copy that fails inside its batch leaves the store as
/// it was, its index there and answering.
#[test]
fn copy_into_postgres_leaves_the_text_index_whole_and_a_failed_copy_changes_nothing() {
    need_pg!();
    let cluster = pg::shared();
    let db = cluster.create_database();
    let url = cluster.url(&db);
    let dir = tempfile::tempdir().unwrap();
    // Fewer tasks than fill GIN's default pending list (4 MB): kept up
    // row by row, they would all still be waiting in it.
    let tasks = |n: u32, key: &dyn Fn(u32) -> String| {
        let mut tasks = serde_json::Map::new();
        for i in 0..n {
            let id = format!(
                "{:08x}-0000-4000-8000-{:012x}",
                i.wrapping_mul(2654435761),
                i
            );
            let title = if i == 7 {
                "the NEEDLE".to_string()
            } else {
                format!("INC-{i} checkout latency")
            };
            tasks.insert(
                id.clone(),
                json!({"task_id": id, "status": "working", "title": title,
                       "idempotency_key": key(i), "status_message": "correlating deploys",
                       "revision": 1, "history": []}),
            );
        }
        serde_json::Value::Object(tasks).to_string()
    };
    let file = dir.path().join("tasks.json");
    std::fs::write(&file, tasks(1000, &|i| format!("key-{i}"))).unwrap();
    let r = common::run_plain(&["copy", file.to_str().unwrap(), &url, "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()["copied"], 1000, "{r:#?}");
    let index = || {
        let url = url.clone();
        pg::off_runtime(move || {
            let mut c = postgres::Client::connect(&url, postgres::NoTls)?;
            c.batch_execute("CREATE EXTENSION IF NOT EXISTS pageinspect")?;
            let valid: Vec<bool> = c
                .query(
                    "SELECT i.indisvalid FROM pg_index i \
                     WHERE i.indexrelid = to_regclass('rudder_tasks_by_text')",
                    &[],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            let pending: i64 = c
                .query_one(
                    "SELECT n_pending_tuples FROM \
                     gin_metapage_info(get_raw_page('rudder_tasks_by_text', 0))",
                    &[],
                )?
                .get(0);
            Ok::<_, postgres::Error>((valid, pending))
        })
        .expect("read the text index")
    };
    assert_eq!(index(), (vec![true], 0), "the index is there, merged");
    let needle = rudder::store::query::PageQuery {
        text: Some("needle".into()),
        ..Default::default()
    };
    let found = |store: &Store| -> Vec<String> {
        store
            .page(&needle)
            .unwrap()
            .into_iter()
            .map(|t| t.title.unwrap_or_default())
            .collect()
    };
    let store = Store::connect(&url).expect("a store URL");
    assert_eq!(found(&store), ["the NEEDLE"]);
    // The same tasks and 500 more, a hundred of them with one key (which
    // a JSON file accepts): PostgreSQL's unique index refuses the batch
    // inside its transaction.
    let bad = dir.path().join("bad.json");
    let key = |i: u32| match i {
        0..1000 => format!("key-{i}"),
        _ => format!("other-{}", i.min(1400)),
    };
    std::fs::write(&bad, tasks(1500, &key)).unwrap();
    let before = store.load().unwrap();
    let r = common::run_plain(&["copy", bad.to_str().unwrap(), &url]);
    assert_ne!(r.code, 0, "{r:#?}");
    assert_eq!(
        serde_json::to_string(&store.load().unwrap()).unwrap(),
        serde_json::to_string(&before).unwrap(),
        "the failed copy wrote nothing"
    );
    // The failed batch's entries stay in the pending list, as a rolled
    // back insert leaves its index entries (pointing at dead rows) until
    // the next merge or vacuum; the index is there and answers.
    assert_eq!(index().0, vec![true], "the index is there");
    assert_eq!(found(&store), ["the NEEDLE"]);
}

/// `copy` into a PostgreSQL store that holds no task is one transaction
/// that sets the secondary indexes aside and builds them once at the end
/// (`crates/postgres/src/bulk.rs`, `load_into_empty`). A load that fails
/// (two tasks with one idempotency key, in the second batch's worth:
/// the unique index refuses to be built) says which key and leaves the
/// store empty, with every index, where a copy in batches would have
/// kept the first;
/// a load that succeeds leaves exactly the indexes, valid, of a store its
/// own writes made, and one change per task with the counts.
#[test]
fn copy_into_an_empty_postgres_store_builds_its_indexes_once_and_a_failed_one_changes_nothing() {
    need_pg!();
    let cluster = pg::shared();
    let (made, loaded) = (cluster.create_database(), cluster.create_database());
    Store::connect(cluster.url(&made))
        .expect("a store URL")
        .create(NewTask::default())
        .unwrap();
    let url = cluster.url(&loaded);
    let r = common::run_plain(&["--store", &url, "migrate"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let indexes = |db: &str| {
        let url = cluster.url(db);
        pg::off_runtime(move || {
            let mut c = postgres::Client::connect(&url, postgres::NoTls)?;
            let rows = c.query(
                "SELECT x.indexname::text, x.indexdef, i.indisvalid FROM pg_indexes x \
                 JOIN pg_index i ON i.indexrelid = to_regclass(x.indexname) \
                 WHERE x.tablename = 'rudder_tasks' ORDER BY 1",
                &[],
            )?;
            Ok::<_, postgres::Error>(
                rows.iter()
                    .map(|r| {
                        (
                            r.get::<_, String>(0),
                            r.get::<_, String>(1),
                            r.get::<_, bool>(2),
                        )
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .expect("read the indexes")
    };
    let reference = indexes(&made);
    assert!(
        reference.len() >= 10 && reference.iter().all(|(_, _, valid)| *valid),
        "{reference:#?}"
    );
    // More tasks than one write batch of the batched copy (10,000), which
    // would commit the first batch before the second failed; written by
    // hand, as a JSON file may hold two tasks with one key.
    let dir = tempfile::tempdir().unwrap();
    let n = rudder::store::copy::WRITE_BATCH + 500;
    let file = |name: &str, key: &dyn Fn(usize) -> String| {
        let mut tasks = serde_json::Map::new();
        for i in 0..n {
            let id = format!("{:08x}-0000-4000-8000-{i:012x}", i.wrapping_mul(2654435761));
            let status = if i % 4 == 0 { "completed" } else { "working" };
            tasks.insert(
                id.clone(),
                json!({"task_id": id, "status": status, "title": format!("INC-{i} checkout latency"),
                       "idempotency_key": key(i), "revision": 2,
                       "created_at": "2026-12-01T10:00:00Z", "updated_at": "2026-12-01T10:00:30Z",
                       "history": [{"status": "working", "at": "2026-12-01T10:00:00Z"}]}),
            );
        }
        let path = dir.path().join(name);
        std::fs::write(&path, serde_json::Value::Object(tasks).to_string()).unwrap();
        path
    };
    let good = file("good.json", &|i| format!("key-{i}"));
    let bad = file("bad.json", &|i| match i {
        10_200 | 10_300 => "the-same-key".into(),
        _ => format!("key-{i}"),
    });
    let r = common::run_plain(&["copy", bad.to_str().unwrap(), &url]);
    assert_ne!(r.code, 0, "{r:#?}");
    assert!(r.stderr.contains("the-same-key"), "{}", r.stderr);
    let store = Store::connect(&url).expect("a store URL");
    assert_eq!(store.counts().unwrap().total(), 0, "nothing was written");
    assert_eq!(indexes(&loaded), reference, "every index is there");
    let before = backend(&url).last_change().unwrap().unwrap_or(0);
    let r = common::run_plain(&["copy", good.to_str().unwrap(), &url, "--json"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.json()["copied"], n, "{r:#?}");
    assert_eq!(indexes(&loaded), reference, "the same indexes, valid");
    // Every page of the table frozen and all-visible (`COPY ... FREEZE`).
    let pages = {
        let url = url.clone();
        pg::off_runtime(move || {
            let mut c = postgres::Client::connect(&url, postgres::NoTls)?;
            c.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_visibility")?;
            let r = c.query_one(
                "SELECT all_frozen, pg_relation_size('rudder_tasks') / \
                 current_setting('block_size')::int8 FROM pg_visibility_map_summary('rudder_tasks')",
                &[],
            )?;
            Ok::<_, postgres::Error>((r.get::<_, i64>(0), r.get::<_, i64>(1)))
        })
        .expect("read the visibility map")
    };
    assert!(
        pages.1 > 0 && pages.0 == pages.1,
        "frozen, total: {pages:?}"
    );
    assert_eq!(
        serde_json::to_string(&store.load().unwrap()).unwrap(),
        serde_json::to_string(&Store::connect(&good).expect("a store URL").load().unwrap())
            .unwrap(),
        "every field, in store order"
    );
    let counts = store.counts().unwrap();
    assert_eq!(
        (counts.total(), counts.get(Status::Completed)),
        (n, n.div_ceil(4))
    );
    let n_changes = i64::try_from(n).unwrap();
    assert_eq!(
        backend(&url).last_change().unwrap(),
        Some(before + n_changes)
    );
    let found = store
        .page(&rudder::store::query::PageQuery {
            text: Some("INC-123 ".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(found.len(), 1, "the text filter finds the task");
}

/// Into an empty PostgreSQL store `copy` reads a JSON FROM once, in one
/// transaction: a task that does not read, past the first write batch,
/// rolls it all back, and the copy then refuses FROM as for any store,
/// with the line, having written nothing.
#[test]
fn a_corrupt_source_copied_into_an_empty_postgres_store_is_refused_with_its_line() {
    need_pg!();
    let cluster = pg::shared();
    let url = cluster.url(&cluster.create_database());
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("from.json");
    let line =
        common::write_store_with_a_bad_last_status(&from, rudder::store::copy::WRITE_BATCH + 2000);
    let r = common::run_plain(&["copy", from.to_str().unwrap(), &url, "--json"]);
    assert_eq!(r.code, 6, "{r:#?}");
    assert_eq!(r.json()["error"], "corrupt_store");
    assert_eq!(r.json()["line"].as_u64(), Some(line as u64), "{r:#?}");
    assert_eq!(
        Store::connect(&url)
            .expect("a store URL")
            .counts()
            .unwrap()
            .total(),
        0
    );
}

/// A copy run again into a PostgreSQL store in use (to bring changes
/// forward) does not lock its table to find that it holds tasks: with a
/// reader's transaction open on the table, the copy is done, where an
/// `ACCESS EXCLUSIVE` lock would wait for that reader to its lock timeout.
#[test]
fn copy_again_into_a_postgres_store_in_use_waits_for_no_reader() {
    need_pg!();
    let cluster = pg::shared();
    let url = cluster.url(&cluster.create_database());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("from.json");
    let from = Store::connect(&file).expect("a store URL");
    for i in 0..20 {
        from.create(NewTask {
            title: Some(format!("task {i}")),
            ..NewTask::default()
        })
        .unwrap();
    }
    let r = common::run_plain(&["copy", file.to_str().unwrap(), &url]);
    assert_eq!(r.code, 0, "{r:#?}");
    let reader_url = url.clone();
    pg::off_runtime(move || {
        let mut reader = postgres::Client::connect(&reader_url, postgres::NoTls).unwrap();
        let mut tx = reader.transaction().unwrap();
        // Holds the table's ACCESS SHARE lock until the end of the test.
        tx.query("SELECT count(*) FROM rudder_tasks", &[]).unwrap();
        let r: common::Run = common::rudder()
            .env("RUDDER_LOCK_TIMEOUT", "2s")
            .args(["copy", file.to_str().unwrap(), &url, "--json"])
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, 0, "{r:#?}");
        assert_eq!(r.json()["unchanged"], 20, "{r:#?}");
        tx.rollback().unwrap();
    });
}

#[test]
fn unknown_fields_and_number_spelling_round_trip_through_copy() {
    need_pg!();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.json");
    let text = r#"{
  "a1": {"task_id": "a1", "status": "working", "revision": 3, "x-extra": {"z": 1, "a": 1.50}, "title": "t", "kind": "diagnose"}
}
"#;
    std::fs::write(&file, text).unwrap();
    let url = pg::store_url();
    let r = common::run_plain(&["copy", file.to_str().unwrap(), &url]);
    assert_eq!(r.code, 0, "{r:#?}");
    // The kind is in the indexed column too: a claim by kind finds it.
    let claimed = Store::connect(&url)
        .expect("a store URL")
        .claim_next("w", Duration::from_secs(60), &["diagnose".into()])
        .unwrap();
    assert_eq!(claimed.map(|t| t.task_id).as_deref(), Some("a1"));
    let text = text.replace(r#""revision": 3"#, r#""revision": 4"#);
    std::fs::write(&file, &text).unwrap();
    let r = common::run_plain(&["copy", file.to_str().unwrap(), &url]);
    assert_eq!(r.code, 0, "{r:#?}");
    let back = dir.path().join("back.json");
    let r = common::run_plain(&["copy", &url, back.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:#?}");
    let original = rudder::store::decode(&file, text.as_bytes()).unwrap();
    let copied = Store::connect(&back).expect("a store URL").load().unwrap();
    assert_eq!(
        serde_json::to_string(&original).unwrap(),
        serde_json::to_string(&copied).unwrap()
    );
    let doc = serde_json::to_string(&copied["a1"]).unwrap();
    assert!(doc.contains(r#""x-extra":{"z":1,"a":1.50}"#), "{doc}");
}

/// PostgreSQL's `text` cannot hold a NUL character. In a task's values
/// (JSON's `\u0000`) and free text it is kept, through `copy`'s bulk path
/// too; an identifier holding one is refused with what and why, nothing
/// written.
#[test]
fn nul_characters_through_copy_and_in_identifiers() {
    need_pg!();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.json");
    let text = r#"{
  "n1": {"task_id": "n1", "status": "working", "revision": 1, "title": "a\u0000b", "status_message": "m\u0000", "kind": "diagnose", "request": {"x": "\u0000"}}
}
"#;
    std::fs::write(&file, text).unwrap();
    let url = pg::store_url();
    let r = common::run_plain(&["copy", file.to_str().unwrap(), &url]);
    assert_eq!(r.code, 0, "{r:#?}");
    let store = Store::connect(&url).expect("a store URL");
    let task = store.get("n1").unwrap();
    assert_eq!(task.title.as_deref(), Some("a\u{0}b"));
    assert_eq!(task.status_message.as_deref(), Some("m\u{0}"));
    assert_eq!(task.request, Some(serde_json::json!({"x": "\u{0}"})));
    // The kind column is the writer's now: a claim by kind finds it.
    let claimed = store
        .claim_next("w", Duration::from_secs(60), &["diagnose".into()])
        .unwrap();
    assert_eq!(claimed.map(|t| t.task_id).as_deref(), Some("n1"));
    let before = store.load().unwrap();
    let e = store
        .create(rudder::NewTask {
            idempotency_key: Some("key\u{0}".into()),
            ..rudder::NewTask::default()
        })
        .unwrap_err();
    let message = e.to_string();
    assert!(
        message.contains("idempotency_key holds a NUL character")
            && message.contains("nothing was written"),
        "{message}"
    );
    assert_eq!(store.load().unwrap(), before);
}
