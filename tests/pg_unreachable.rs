//! An unreachable PostgreSQL (issue 30, item 9): a read fails after a few
//! seconds, not after the lock timeout; a write keeps trying for the lock
//! timeout and, on a terminal, says at once which server it waits for and
//! for how long, never with the password.

mod common;

use std::time::{Duration, Instant};

const PASSWORD: &str = "s3cret-pw";

/// A store URL on a local port nothing listens on (a listener's port,
/// closed again: refused at once, as a server that is down).
fn unreachable_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    format!("postgres://rudder:{PASSWORD}@127.0.0.1:{port}/tasks")
}

fn port_of(url: &str) -> &str {
    let after = url.rsplit_once(':').expect("a port").1;
    after.split('/').next().expect("a port")
}

#[test]
fn a_read_of_an_unreachable_server_fails_in_seconds_not_after_the_lock_timeout() {
    let url = unreachable_url();
    let start = Instant::now();
    let out = common::rudder()
        .args(["--store", &url, "list", "--json"])
        // A minute: a read that waited for it would be plain to see.
        .env("RUDDER_LOCK_TIMEOUT", "60s")
        .output()
        .expect("run rudder");
    let took = start.elapsed();
    let r = common::Run::from(out);
    assert_eq!(r.code, 6, "{r:#?}");
    assert_eq!(r.json()["error"], "database", "{r:#?}");
    assert!(
        r.stdout.contains(&format!("port {}", port_of(&url))),
        "the error names the server: {r:#?}"
    );
    assert!(!r.stdout.contains(PASSWORD) && !r.stderr.contains(PASSWORD));
    // Not a speed figure: the difference between the read patience (a few
    // seconds) and the 60 s lock timeout it used to wait out.
    assert!(
        took < Duration::from_secs(30),
        "a read waited {took:?} for an unreachable server"
    );
    // Not on a terminal: nothing but the error (a script's stderr).
    assert!(!r.stderr.contains("waiting for"), "{r:#?}");
}

#[test]
fn a_write_waiting_for_the_server_says_so_on_a_terminal() {
    let url = unreachable_url();
    let (code, lines) = common::on_a_terminal(
        &["--store", &url, "heartbeat", "0123abcd"],
        200,
        &[("RUDDER_LOCK_TIMEOUT", "3s")],
    );
    assert_eq!(code, 6, "{lines:?}");
    let text = lines.join("\n");
    // First what it waits for (host, port, how long), then the error.
    assert!(lines.len() >= 2, "{text}");
    let notice = &lines[0];
    assert!(
        notice.contains("waiting for the PostgreSQL server at host 127.0.0.1")
            && notice.contains(&format!("port {}", port_of(&url)))
            && notice.contains("for up to"),
        "{text}"
    );
    assert!(
        lines[1..].iter().any(|l| l.contains("cannot connect")),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");
}
