//! `rudder wait` on a task that completes and is pruned at once (the wait
//! stopped meanwhile, so that it sees only the task gone): over SQLite and
//! PostgreSQL the change log says how it ended, and `wait` reports that
//! outcome; over the JSON file, which keeps no trace, it stays `vanished`.

mod common;

use std::io::Read;
use std::time::Duration;

use common::Kind;

#[test]
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn wait_on_a_task_completed_and_pruned_at_once_reports_the_completion() {
    common::each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let store = common::store_in(dir.path());
        let id = common::create(&store, &["--title", "pruned at once"]);
        let err = dir.path().join("wait.err");
        let mut child = common::rudder()
            .arg("--store")
            .arg(&store)
            .args(["wait", &id, "--timeout", "120s"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        common::wait_for(Duration::from_secs(60), || {
            std::fs::read_to_string(&err)
                .unwrap_or_default()
                .contains("waiting for task")
                .then_some(())
        })
        .expect("wait began");
        // Stopped, the wait sees the completion and the prune together.
        let pid = child.id() as libc::pid_t;
        // SAFETY: kill(2) has no memory-safety preconditions; our child.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        let r = common::run(&store, &["complete", &id, "--result", "{\"ok\":true}"]);
        assert_eq!(r.code, 0, "{r:#?}");
        let r = common::run(&store, &["prune", "--older-than", "0s"]);
        assert_eq!(r.code, 0, "{r:#?}");
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        let status = child.wait().unwrap();
        let mut stdout = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        let stderr = std::fs::read_to_string(&err).unwrap_or_default();
        match common::kind() {
            Kind::File => assert_eq!(status.code(), Some(3), "{stdout}{stderr}"),
            _ => {
                assert_eq!(status.code(), Some(0), "{stdout}{stderr}");
                assert!(stdout.contains("completed"), "{stdout}");
            }
        }
    });
}
