//! The worker of `examples/worker.rs` for tokio code (docs/workers.md):
//! the same API with `async` calls; store calls run on tokio's blocking
//! threads, waits on the change feed's async side.
//!
//! ```text
//! cargo run --example worker_async -- sqlite:tasks.db --once
//! ```

use std::time::Duration;

use rudder::Store;
use rudder::worker::{AsyncJob, WorkError};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(|| "tasks.json".into());
    let once = args.any(|a| a == "--once");
    let done = run(&url, once).await?;
    eprintln!("worker_async: {done} task(s) done");
    Ok(())
}

/// Work tasks of kind `greet` on the store at `url`; with `once`, return
/// after the first one.
pub async fn run(url: &str, once: bool) -> anyhow::Result<usize> {
    let store = Store::connect(url)?;
    let mut worker = store
        .worker("greeter-async")
        .lease(Duration::from_secs(30))
        .kinds(["greet"])
        .start_async()?;
    let mut done = 0;
    loop {
        let mut job = match worker.next(Duration::from_secs(60)).await {
            Ok(Some(job)) => job,
            Ok(None) => continue,
            Err(e) => {
                eprintln!("worker_async: {e}");
                continue;
            }
        };
        match work(&mut job).await {
            Ok(()) => done += 1,
            Err(WorkError::Stop(stop)) => eprintln!("worker_async: stopped: {stop}"),
            Err(e) => eprintln!("worker_async: {e}"),
        }
        if once {
            return Ok(done);
        }
    }
}

async fn work(job: &mut AsyncJob) -> Result<(), WorkError> {
    let start = job.task().progress.map_or(0, |p| p.current);
    let name = match name_in(job.task().request.as_ref()) {
        Some(name) => name,
        None => {
            let schema = json!({
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            });
            let mut answer = job.ask("Whom should I greet?", schema).await?;
            let value = loop {
                if let Some(value) = answer.wait(Some(Duration::from_secs(60))).await? {
                    break value;
                }
            };
            name_in(Some(&value)).unwrap_or_else(|| "stranger".into())
        }
    };
    for step in start + 1..=3 {
        job.report(format!("step {step}/3: greeting {name}"), step, 3)
            .await?;
    }
    job.complete(json!({ "greeting": format!("hello, {name}") }))
        .await?;
    Ok(())
}

fn name_in(value: Option<&Value>) -> Option<String> {
    Some(value?.get("name")?.as_str()?.to_string())
}
