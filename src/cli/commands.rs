use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::args::*;
use super::output;
use super::{CliError, store_path};
use crate::duration::parse_duration;
use crate::schema;
use crate::store::{NewTask, Outcome, Store, StoreError};
use crate::task::{Actor, Status, Task};
use crate::watch::{ChangeFeed, FeedEvent, FeedOptions};

/// Run one scriptable command; returns the process exit code. Errors are
/// printed here: as one JSON object on stdout with `--json`, else on stderr.
pub fn run(store: Option<std::path::PathBuf>, command: Command) -> i32 {
    let path = store_path(store);
    let json = command_json(&command);
    match dispatch(&path, command) {
        Ok(()) => 0,
        Err(e) => {
            if json {
                println!("{}", e.to_json());
            } else {
                eprintln!("rudder: {}", output::sanitize_line(&e.to_string()));
                if let CliError::Store(se) = &e
                    && let Some(task) = se.task()
                {
                    eprintln!("{}", output::current_state(task));
                }
            }
            e.exit_code()
        }
    }
}

fn command_json(command: &Command) -> bool {
    match command {
        Command::Create(a) => a.output.json,
        Command::List(a) => a.output.json,
        Command::Get(a) => a.output.json,
        Command::Input(a) => a.output.json,
        Command::RequestInput(a) => a.output.json,
        Command::Heartbeat(a) => a.output.json,
        Command::Complete(a) => a.output.json,
        Command::Fail(a) => a.output.json,
        Command::Cancel(a) => a.output.json,
        Command::Reclaim(a) => a.output.json,
        Command::Prune(a) => a.output.json,
        Command::Wait(a) => a.output.json,
        Command::Copy(a) => a.output.json,
        Command::Watch(_) | Command::Demo(_) | Command::Worker(_) => false,
    }
}

/// A JSON argument given inline or as `@FILE`.
fn json_arg(flag: &str, text: &str) -> Result<Value, CliError> {
    let (source, content) = match text.strip_prefix('@') {
        Some(file) => (
            file.to_string(),
            std::fs::read_to_string(file).map_err(|e| {
                CliError::Usage(format!("{flag} @{file}: cannot read the file: {e}"))
            })?,
        ),
        None => ("the argument".to_string(), text.to_string()),
    };
    serde_json::from_str(&content).map_err(|e| {
        CliError::Usage(format!(
            "{flag}: {source} is not valid JSON (line {} column {}): {e}",
            e.line(),
            e.column()
        ))
    })
}

fn duration_arg(flag: &str, text: &str) -> Result<Duration, CliError> {
    parse_duration(text).map_err(|e| CliError::Usage(format!("{flag}: {e}")))
}

fn print_outcome(outcome: &Outcome, verb: &str, json: bool) {
    if json {
        println!(
            "{}",
            json!({ "change": outcome.change, "task": outcome.task })
        );
    } else {
        println!("{}", output::outcome_line(outcome, verb));
    }
}

fn dispatch(path: &Path, command: Command) -> Result<(), CliError> {
    // A URL rudder cannot open (PostgreSQL, for now) is a usage error.
    crate::store::StoreUrl::parse(path).map_err(|e| CliError::Usage(e.to_string()))?;
    let store = Store::open(path);
    match command {
        Command::Create(a) => {
            let new = NewTask {
                input_schema: a
                    .schema
                    .as_deref()
                    .map(|s| json_arg("--schema", s))
                    .transpose()?,
                idempotency_key: a.key,
                title: a.title,
                request: a
                    .request
                    .as_deref()
                    .map(|s| json_arg("--request", s))
                    .transpose()?,
                status_message: a.message,
                ttl_ms: a
                    .ttl
                    .as_deref()
                    .map(|s| duration_arg("--ttl", s).map(|d| d.as_millis() as u64))
                    .transpose()?,
                poll_interval_ms: None,
            };
            let outcome = store.create(new)?;
            print_outcome(&outcome, "created", a.output.json);
        }
        Command::List(a) => {
            let tasks = store.page(&crate::store::PageQuery {
                statuses: a.status,
                sort: a.sort,
                limit: a.limit,
                after: a.after,
            })?;
            if a.output.json {
                println!(
                    "{}",
                    serde_json::to_string(&tasks).map_err(anyhow::Error::from)?
                );
            } else {
                print!("{}", output::task_table(&tasks, store.now()));
            }
        }
        Command::Get(a) => {
            let task = store.get(&a.id)?;
            if a.output.json {
                println!(
                    "{}",
                    serde_json::to_string(&task).map_err(anyhow::Error::from)?
                );
            } else {
                print!("{}", output::task_detail(&task, store.now()));
            }
        }
        Command::Input(a) => {
            let value = match &a.value {
                Some(v) => json_arg("--value", v)?,
                None => {
                    let task = store.get(&a.id)?;
                    schema::input_from_assignments(task.input_schema.as_ref(), &a.set)
                        .map_err(CliError::Usage)?
                }
            };
            let outcome = store.provide_input(&a.id, value, a.revision)?;
            print_outcome(&outcome, "input accepted", a.output.json);
        }
        Command::RequestInput(a) => {
            let schema = json_arg("--schema", &a.schema)?;
            let outcome = store.request_input(&a.id, schema, a.message, Actor::Anyone)?;
            print_outcome(&outcome, "input requested", a.output.json);
        }
        Command::Heartbeat(a) => {
            let outcome = store.heartbeat(&a.id, a.message, None, Actor::Anyone)?;
            print_outcome(&outcome, "heartbeat recorded", a.output.json);
        }
        Command::Complete(a) => {
            let result = match &a.result {
                Some(r) => json_arg("--result", r)?,
                None => Value::Null,
            };
            let outcome = store.complete(&a.id, result, Actor::Anyone)?;
            print_outcome(&outcome, "completed", a.output.json);
        }
        Command::Fail(a) => {
            let outcome = store.fail(&a.id, &a.error, Actor::Anyone)?;
            print_outcome(&outcome, "failed", a.output.json);
        }
        Command::Cancel(a) => {
            let outcome = store.cancel(&a.id, a.reason)?;
            print_outcome(&outcome, "cancelled", a.output.json);
        }
        Command::Reclaim(a) => {
            let older = duration_arg("--older-than", &a.older_than)?;
            let report = store.reclaim(older, a.dry_run)?;
            if a.output.json {
                println!(
                    "{}",
                    serde_json::to_string(&report).map_err(anyhow::Error::from)?
                );
            } else {
                print!("{}", output::reclaim_report(&report));
            }
        }
        Command::Prune(a) => {
            let older = duration_arg("--older-than", &a.older_than)?;
            let report = store.prune(older)?;
            if a.output.json {
                println!(
                    "{}",
                    serde_json::to_string(&report).map_err(anyhow::Error::from)?
                );
            } else {
                print!("{}", output::prune_report(&report));
            }
        }
        Command::Wait(a) => {
            let timeout = a
                .timeout
                .as_deref()
                .map(|t| duration_arg("--timeout", t))
                .transpose()?;
            let task = wait(path, &a.id, timeout)?;
            if a.output.json {
                println!(
                    "{}",
                    serde_json::to_string(&task).map_err(anyhow::Error::from)?
                );
            } else {
                println!("{}", output::wait_line(&task));
            }
        }
        Command::Copy(a) => copy(&a.from, &a.to, a.output.json)?,
        Command::Watch(_) | Command::Demo(_) | Command::Worker(_) => {
            unreachable!("interactive commands are dispatched by main")
        }
    }
    Ok(())
}

/// `rudder copy FROM TO`.
fn copy(from: &Path, to: &Path, json: bool) -> Result<(), CliError> {
    let parse =
        |p: &Path| crate::store::StoreUrl::parse(p).map_err(|e| CliError::Usage(e.to_string()));
    let (from_url, to_url) = (parse(from)?, parse(to)?);
    let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    if same(from_url.path(), to_url.path()) {
        return Err(CliError::Usage(format!(
            "copy: FROM and TO are the same store ({from_url})"
        )));
    }
    let (src, dst) = (Store::open_url(&from_url), Store::open_url(&to_url));
    use std::io::IsTerminal;
    let tty = !json && std::io::stderr().is_terminal();
    let report = crate::store::copy::copy(&src, &dst, |done| {
        if tty {
            eprint!("\rcopied {done} tasks");
        }
    })?;
    if tty {
        eprintln!();
    }
    if json {
        println!(
            "{}",
            serde_json::to_string(&report).map_err(anyhow::Error::from)?
        );
    } else {
        println!(
            "copied {} task(s) from {} to {} ({} new, {} updated, {} already there)",
            report.total(),
            output::sanitize_line(&report.from),
            output::sanitize_line(&report.to),
            report.copied,
            report.updated,
            report.unchanged
        );
    }
    Ok(())
}

fn settled(task: &Task) -> bool {
    task.status.is_terminal() || task.status == Status::InputRequired
}

/// Block until the task is terminal or waits for input, using the change feed.
fn wait(path: &Path, id: &str, timeout: Option<Duration>) -> Result<Task, CliError> {
    // Resolve the prefix once, so that a later task with the same prefix
    // cannot make the wait ambiguous.
    let store = Store::open(path);
    let task = store.get(id)?;
    if settled(&task) {
        return Ok(task);
    }
    let full_id = task.task_id.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)?;
    runtime.block_on(async {
        let mut feed = ChangeFeed::start(path, FeedOptions::default());
        let watch = async {
            while let Some(event) = feed.next().await {
                match event {
                    FeedEvent::Snapshot { tasks, .. } => match tasks.get(&full_id) {
                        Some(t) if settled(t) => return Ok(t.clone()),
                        Some(_) => {}
                        None => {
                            return Err(StoreError::UnknownTask {
                                id: full_id.clone(),
                            }
                            .into());
                        }
                    },
                    FeedEvent::Missing => {
                        return Err(StoreError::UnknownTask {
                            id: full_id.clone(),
                        }
                        .into());
                    }
                    // A torn or foreign write: keep waiting for a good file.
                    FeedEvent::Unreadable { .. } => {}
                }
            }
            Err(CliError::Other(anyhow::anyhow!("the change feed stopped")))
        };
        match timeout {
            Some(t) => tokio::time::timeout(t, watch).await.unwrap_or_else(|_| {
                Err(CliError::Timeout(
                    humantime::format_duration(t).to_string(),
                    full_id.clone(),
                ))
            }),
            None => watch.await,
        }
    })
}
