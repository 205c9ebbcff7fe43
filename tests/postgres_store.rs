//! PostgreSQL specifics against a real server (see tests/common/pg.rs):
//! schema creation and refusal of a newer one, readers of an empty
//! database, byte-for-byte round trips, errors that name the server and
//! never show the password, many processes on one database, and faults
//! (the server stopped mid-burst, backends terminated mid-transaction).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::pg;
use rudder::store::{Backend, PostgresBackend, StoreUrl};
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

#[test]
fn a_new_database_reads_empty_and_the_first_write_creates_the_schema() {
    need_pg!();
    let url = pg::store_url();
    let store = Store::open(&url);
    assert!(store.load().unwrap().is_empty());
    assert!(!store.backend().exists().unwrap());
    assert_eq!(backend(&url).last_change().unwrap(), None);
    let created = store
        .create(NewTask {
            title: Some("first".into()),
            idempotency_key: Some("k1".into()),
            ..NewTask::default()
        })
        .unwrap();
    assert!(store.backend().exists().unwrap());
    let again = store
        .create(NewTask {
            title: Some("first".into()),
            idempotency_key: Some("k1".into()),
            ..NewTask::default()
        })
        .unwrap();
    assert_eq!(again.task.task_id, created.task.task_id);
    let id = created.task.task_id.clone();
    let claimed = store
        .claim_next("w1", Duration::from_secs(60))
        .unwrap()
        .expect("a claimable task");
    assert_eq!(claimed.task_id, id);
    assert!(
        store
            .claim_next("w2", Duration::from_secs(60))
            .unwrap()
            .is_none()
    );
    store
        .complete(
            &id[..8],
            json!({"ok": true}),
            Actor::Worker {
                holder: "w1",
                lease: Duration::from_secs(60),
            },
        )
        .unwrap();
    let counts = store.counts().unwrap();
    assert_eq!(counts.get(Status::Completed), 1);
    assert_eq!(counts.total(), 1);
    assert!(backend(&url).last_change().unwrap().unwrap() >= 3);
}

#[test]
fn unknown_fields_and_number_spelling_round_trip_through_copy() {
    need_pg!();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.json");
    let text = r#"{
  "a1": {"task_id": "a1", "status": "working", "revision": 3, "x-extra": {"z": 1, "a": 1.50}, "title": "t"}
}
"#;
    std::fs::write(&file, text).unwrap();
    let url = pg::store_url();
    let r = common::run_plain(&["copy", file.to_str().unwrap(), &url]);
    assert_eq!(r.code, 0, "{r:#?}");
    let back = dir.path().join("back.json");
    let r = common::run_plain(&["copy", &url, back.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:#?}");
    let original = rudder::store::decode(&file, text.as_bytes()).unwrap();
    let copied = Store::open(&back).load().unwrap();
    assert_eq!(
        serde_json::to_string(&original).unwrap(),
        serde_json::to_string(&copied).unwrap()
    );
    let doc = serde_json::to_string(&copied["a1"]).unwrap();
    assert!(doc.contains(r#""x-extra":{"z":1,"a":1.50}"#), "{doc}");
}

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    need_pg!();
    let url = pg::store_url();
    let store = Store::open(&url);
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
        let r = common::run(&PathBuf::from(url), &["list"]);
        assert_eq!(r.code, 6, "{r:#?}");
        assert!(r.stderr.contains(what), "{r:#?}");
        assert!(!r.stderr.contains("s3cret"), "{r:#?}");
        assert!(r.stderr.contains("***"), "{r:#?}");
    }
}
