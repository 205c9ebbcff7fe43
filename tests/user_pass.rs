//! What a user's-eye test pass found: each test is a mistake a script or an
//! on-call engineer made easily, and what rudder now says.

mod common;

use common::{create, run};

#[test]
fn an_empty_idempotency_key_is_refused_not_shared() {
    // `rudder create --key "$KEY"` with KEY unset: two unrelated creates
    // must not silently become one task.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.json");
    let r = run(&store, &["create", "--json", "--message", "a", "--key", ""]);
    assert_eq!(r.code, 2, "{r:#?}");
    let e = r.json();
    assert_eq!(e["error"], "usage");
    assert_eq!(e["argument"], "--key <KEY>");
    assert!(!store.exists(), "a refused create writes nothing");
    // A real key still works.
    create(&store, &["--message", "a", "--key", "k"]);
}

#[test]
fn copy_from_a_store_that_does_not_exist_says_so() {
    // A mistyped FROM copies nothing; exit 0 as `list` on a missing store,
    // but stderr names it, with --json too (stdout stays one value).
    let dir = tempfile::tempdir().expect("tempdir");
    let from = dir.path().join("typo.json");
    let to = dir.path().join("tasks.db");
    for json in [true, false] {
        let mut args = vec![
            "copy",
            from.to_str().expect("utf-8"),
            to.to_str().expect("utf-8"),
        ];
        if json {
            args.push("--json");
        }
        let r = common::run_plain(&args);
        assert_eq!(r.code, 0, "{r:#?}");
        assert!(
            r.stderr.contains("no store at") && r.stderr.contains("typo.json"),
            "{r:#?}"
        );
        if json {
            assert_eq!(r.json()["copied"], 0);
        }
    }
}
