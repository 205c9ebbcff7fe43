//! The trail through the binary: `rudder copy` carries each task's
//! history, so the copy's trail is the original's, whatever the two
//! backends, on every backend. The trail's own tests (through the store)
//! are in crates/store/tests/trail.rs.

mod common;

use rudder::store::TrailQuery;
use rudder::task::Face;
use rudder::{NewTask, Store};
use rudder_testkit::trail::{night, person, reference};

/// `copy` carries each task's history, so the copy's trail is the
/// original's, whatever the two backends; a reason holding a NUL (which
/// PostgreSQL's text cannot hold) is kept.
fn a_copy_carries_the_trail_once() {
    let dir = tempfile::tempdir().unwrap();
    let from = common::store_in(dir.path());
    let store = Store::connect(&from).unwrap();
    night(&store);
    let odd = store.create(NewTask::default()).unwrap().task.task_id;
    store
        .by(person("dee", Face::Python))
        .cancel(&odd, Some("nul \u{0} here".into()))
        .unwrap();
    let all = store.trail(&TrailQuery::default()).unwrap();
    assert_eq!(all, reference(&store, &TrailQuery::default()));
    for to in [dir.path().join("copy.json"), dir.path().join("copy.db")] {
        let r = common::run_plain(&["copy", from.to_str().unwrap(), to.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{r:#?}");
        let copied = Store::connect(&to).unwrap();
        assert_eq!(
            copied.trail(&TrailQuery::default()).unwrap(),
            all,
            "{}",
            to.display()
        );
        // And back onto the first store's kind: a new store of it.
        let sub = dir.path().join(format!(
            "back-{}",
            to.extension().unwrap().to_str().unwrap()
        ));
        std::fs::create_dir_all(&sub).unwrap();
        let back = common::store_in(&sub);
        let r = common::run_plain(&["copy", to.to_str().unwrap(), back.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{r:#?}");
        assert_eq!(
            Store::connect(&back)
                .unwrap()
                .trail(&TrailQuery::default())
                .unwrap(),
            all
        );
    }
}

common::shared_backend_tests! {
    a_copy_carries_the_trail: a_copy_carries_the_trail_once,
}
