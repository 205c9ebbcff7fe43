//! A complete rudder worker (docs/workers.md): it takes tasks of kind
//! `greet`, asks a person for a name when the request has none, reports
//! three steps of progress, and completes the task with a greeting.
//!
//! ```text
//! cargo run --example worker -- sqlite:tasks.db          # runs until stopped
//! cargo run --example worker -- sqlite:tasks.db --once   # one task, then exits
//! ```
//!
//! Kill it at any point: its lease lapses and another worker resumes the
//! task from the progress it recorded.

use std::time::Duration;

use rudder::Store;
use rudder::worker::{Job, WorkError};
use serde_json::{Value, json};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(|| "tasks.json".into());
    let once = args.any(|a| a == "--once");
    let done = run(&url, once)?;
    eprintln!("worker: {done} task(s) done");
    Ok(())
}

/// Work tasks of kind `greet` on the store at `url`; with `once`, return
/// after the first task this worker finished (or gave up on).
pub fn run(url: &str, once: bool) -> anyhow::Result<usize> {
    // A mistyped URL is refused here, not at the first claim.
    let store = Store::connect(url)?;
    let mut worker = store
        .worker("greeter")
        .lease(Duration::from_secs(30))
        .kinds(["greet"])
        .start()?;
    let mut done = 0;
    loop {
        // Blocks on the store's change feed: no polling.
        let mut job = match worker.next(Duration::from_secs(60)) {
            Ok(Some(job)) => job,
            Ok(None) => continue,
            // The store is unreachable or unreadable: said once; `next`
            // waits for it to come back.
            Err(e) => {
                eprintln!("worker: {e}");
                continue;
            }
        };
        match work(&mut job) {
            Ok(()) => done += 1,
            // Cancelled, taken over, finished by someone else: obey and
            // move on (dropping the job gives the lease back, if it is ours).
            Err(WorkError::Stop(stop)) => eprintln!("worker: stopped: {stop}"),
            // The store failed: drop the job; the task is claimed again
            // from its recorded progress.
            Err(e) => eprintln!("worker: {e}"),
        }
        if once {
            return Ok(done);
        }
    }
}

/// Greet the person the task names (asking for the name if it has none).
fn work(job: &mut Job) -> Result<(), WorkError> {
    // Resume where a dead worker left off: the progress is in the store.
    let start = job.task().progress.map_or(0, |p| p.current);
    let name = match name_in(job.task().request.as_ref())
        .or_else(|| name_in(job.task().input_value.as_ref()))
    {
        Some(name) => name,
        None => {
            let schema = json!({
                "type": "object",
                "properties": {"name": {"type": "string", "title": "Name"}},
                "required": ["name"]
            });
            // The lease is kept while a person answers; this worker
            // continues with the answer.
            let mut answer = job.ask("Whom should I greet?", schema)?;
            let value = loop {
                if let Some(value) = answer.wait(Some(Duration::from_secs(60)))? {
                    break value;
                }
            };
            name_in(Some(&value)).unwrap_or_else(|| "stranger".into())
        }
    };
    for step in start + 1..=3 {
        // Real work goes here; each report renews the lease too.
        job.report(format!("step {step}/3: greeting {name}"), step, 3)?;
    }
    job.complete(json!({ "greeting": format!("hello, {name}") }))?;
    Ok(())
}

fn name_in(value: Option<&Value>) -> Option<String> {
    Some(value?.get("name")?.as_str()?.to_string())
}
