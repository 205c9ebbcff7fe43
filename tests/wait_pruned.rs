//! `rudder wait` on a task that completes and is pruned at once (the wait
//! stopped meanwhile, so that it sees only the task gone): over SQLite and
//! PostgreSQL the change log says how it ended, and `wait` reports that
//! outcome; over the JSON file, which keeps no trace, it stays `vanished`.

mod common;

use std::io::Read;
use std::time::Duration;

use common::Kind;

/// With the waiting `child` stopped, complete the task `id` and prune it,
/// so that the wait sees both together; its exit status and stdout.
#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn complete_and_prune_under(
    mut child: std::process::Child,
    store: &std::path::Path,
    id: &str,
) -> (std::process::ExitStatus, String) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: signals to our own child, which has not been waited for.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let r = common::run(store, &["complete", id, "--result", "{\"ok\":true}"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let r = common::run(store, &["prune", "--older-than", "0s"]);
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
    (status, stdout)
}

#[test]
fn wait_on_a_task_completed_and_pruned_at_once_reports_the_completion() {
    common::each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let store = common::store_in(dir.path());
        let id = common::create(&store, &["--title", "pruned at once"]);
        let err = dir.path().join("wait.err");
        let child = common::rudder()
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
        let (status, stdout) = complete_and_prune_under(child, &store, &id);
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

/// Issue 30, item 8: the answer of such a wait says the result is gone;
/// it never shows the result as null (the task completed with one).
#[test]
fn wait_json_on_a_task_completed_and_pruned_at_once_says_its_result_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tasks.db");
    let id = common::create(&store, &["--title", "pruned at once"]);
    for json in [true, false] {
        let id = if json {
            id.clone()
        } else {
            common::create(&store, &["--title", "pruned at once, human"])
        };
        let mut args = vec!["wait", id.as_str(), "--timeout", "120s"];
        if json {
            args.push("--json");
        }
        let child = common::rudder()
            .arg("--store")
            .arg(&store)
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The wait has read the task (on one connection, kept) once its
        // feed has the database open too (a second connection).
        let pid = child.id() as libc::pid_t;
        // The kernel names an open file by its real path.
        let store = std::fs::canonicalize(&store).unwrap_or_else(|_| store.clone());
        common::wait_for(Duration::from_secs(60), || {
            let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .ok()?
                .flatten()
                .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == store))
                .count();
            (open >= 2).then_some(())
        })
        .expect("the wait opened the store");
        let (status, stdout) = complete_and_prune_under(child, &store, &id);
        assert_eq!(status.code(), Some(0), "{stdout}");
        if json {
            let v = common::one_json_value(&stdout).expect("one JSON value");
            assert_eq!(v["status"], "completed", "{stdout}");
            assert!(v.get("result").is_none(), "a result made up: {stdout}");
            assert!(
                v["removed"]
                    .as_str()
                    .is_some_and(|s| s.contains("not kept")),
                "{stdout}"
            );
        } else {
            assert!(
                stdout.contains("completed") && stdout.contains("its result was not kept"),
                "{stdout}"
            );
        }
    }
}
