use crate::store::Work as _;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::args::*;
use super::output;
use super::{CliError, store_url};
use crate::duration::parse_duration;
use crate::schema;
use crate::store::{MAX_STORE_BYTES, NewTask, Outcome, Store, human_bytes};
use crate::task::{Actor, Face, Task};
use crate::worker::{Until, WaitError, WaitNote};

/// Run one scriptable command; returns the process exit code. Errors are
/// printed here: as one JSON object on stdout with `--json`, else on stderr.
pub fn run(
    store: Option<crate::store::StoreUrl>,
    read_only: bool,
    actor: Option<String>,
    command: Command,
) -> i32 {
    // The store is opened once, here; a URL this build cannot open is a
    // usage error of wherever it came from.
    let from_flag = store.is_some();
    let url = store_url(store);
    let json = wants_json(&command);
    let opened = match writes(&command) {
        Some(name) if read_only => Err(CliError::ReadOnly { command: name }),
        None if read_only && matches!(&command, Command::Get(a) if a.reveal) => {
            Err(CliError::RevealRefused {
                why: "--read-only was given".into(),
            })
        }
        writing => url
            .and_then(|url| {
                Store::connect(url).map_err(|e| match from_flag {
                    true => CliError::usage("--store", format!("--store: {e}")),
                    false => CliError::environment("RUDDER_STORE", format!("RUDDER_STORE: {e}")),
                })
            })
            .and_then(|store| match writing {
                // Only a command that writes needs to know who writes: a
                // bad $RUDDER_ACTOR does not stop a `list`.
                Some(_) => {
                    let author = super::author::resolve(actor.as_deref(), Face::Cli)?;
                    Ok(store.by(author))
                }
                None => Ok(store),
            }),
    };
    match opened
        .and_then(|store| dispatch(&store, command).map_err(|e| name_a_missing_store(e, &store)))
    {
        Ok(code) => code,
        Err(e) => {
            report(&e, json);
            e.exit_code()
        }
    }
}

/// An unknown task in a store that does not exist says so (as `list`
/// does), instead of a bare `unknown task`.
fn name_a_missing_store(e: CliError, store: &Store) -> CliError {
    match e {
        CliError::Store(crate::store::StoreError::UnknownTask { id }) => {
            match crate::store::Backend::exists(store.backend()) {
                Ok(false) => CliError::NoStore {
                    id,
                    store: store.location(),
                },
                _ => CliError::Store(crate::store::StoreError::UnknownTask { id }),
            }
        }
        other => other,
    }
}

/// Print an error: one JSON object on stdout with `--json` (on stderr if
/// stdout is what failed), else a line on stderr.
fn report(e: &CliError, json: bool) {
    let stdout_broken = matches!(e, CliError::Output { error, .. } if error.stream == "stdout");
    if json && !stdout_broken {
        match output::emit_line(&e.to_json().to_string()) {
            Ok(()) => return,
            Err(broken) => {
                let e = CliError::Output {
                    error: broken,
                    done: Some(format!("the error was: {e}")),
                };
                return report(&e, false);
            }
        }
    }
    output::note(&format!(
        "rudder: {}",
        output::sanitize_line(&e.to_string())
    ));
    if let CliError::Store(se) = e
        && let Some(task) = se.task()
    {
        output::note(&output::current_state(task));
    }
}

/// The name of `command` if it may write to a store (so `--read-only`
/// refuses it before the store is even opened), else `None`.
pub fn writes(command: &Command) -> Option<&'static str> {
    Some(match command {
        Command::Create(_) => "create",
        Command::Input(_) => "input",
        Command::RequestInput(_) => "request-input",
        Command::Heartbeat(_) => "heartbeat",
        Command::Complete(_) => "complete",
        Command::Fail(_) => "fail",
        Command::Claim(_) => "claim",
        Command::Cancel(_) => "cancel",
        Command::Reclaim(a) if !a.dry_run => "reclaim",
        Command::Prune(_) => "prune",
        Command::Copy(_) => "copy",
        Command::Migrate(_) => "migrate",
        Command::Demo(_) => "demo",
        Command::Worker(_) => "worker",
        Command::Mcp(_) => "mcp",
        Command::Gateway(_) => "gateway",
        Command::Notify(_) => "notify",
        Command::Reclaim(_)
        | Command::Log(_)
        | Command::List(_)
        | Command::Get(_)
        | Command::Wait(_)
        | Command::Watch(_)
        | Command::Completions(_)
        | Command::Man => return None,
    })
}

/// Whether `command` was asked for `--json`.
pub fn wants_json(command: &Command) -> bool {
    match command {
        Command::Create(a) => a.output.json,
        Command::List(a) => a.output.json,
        Command::Get(a) => a.output.json,
        Command::Input(a) => a.output.json,
        Command::RequestInput(a) => a.output.json,
        Command::Heartbeat(a) => a.output.json,
        Command::Complete(a) => a.output.json,
        Command::Fail(a) => a.output.json,
        Command::Claim(a) => a.output.json,
        Command::Cancel(a) => a.output.json,
        Command::Reclaim(a) => a.output.json,
        Command::Prune(a) => a.output.json,
        Command::Wait(a) => a.output.json,
        Command::Copy(a) => a.output.json,
        Command::Migrate(a) => a.output.json,
        Command::Notify(a) => a.json,
        Command::Log(a) => a.json,
        Command::Watch(_)
        | Command::Demo(_)
        | Command::Worker(_)
        | Command::Mcp(_)
        | Command::Gateway(_)
        | Command::Completions(_)
        | Command::Man => false,
    }
}

/// A JSON argument given inline or as `@FILE`, read strictly
/// ([`crate::json::parse`]: no key twice in an object, numbers kept exactly,
/// no deeper than the store holds) and no larger than a store may be.
fn json_arg(flag: &str, text: &str) -> Result<Value, CliError> {
    let too_large = |source: &str, size: u64| {
        CliError::usage(
            flag,
            format!(
                "{flag}: {source} is {size} bytes, more than the {} a store may hold",
                human_bytes(MAX_STORE_BYTES)
            ),
        )
    };
    let (source, content) = match text.strip_prefix('@') {
        Some(file) => {
            let source = format!("@{file}");
            let cannot = |e: std::io::Error| {
                CliError::usage(flag, format!("{flag} {source}: cannot read the file: {e}"))
            };
            let opened = std::fs::File::open(file).map_err(cannot)?;
            // Never read more than could be stored: a huge file (or a
            // device that never ends) is refused, not loaded.
            let mut content = String::new();
            opened
                .take(MAX_STORE_BYTES + 1)
                .read_to_string(&mut content)
                .map_err(cannot)?;
            (source, content)
        }
        None => ("the argument".to_string(), text.to_string()),
    };
    if content.len() as u64 > MAX_STORE_BYTES {
        return Err(too_large(&source, content.len() as u64));
    }
    crate::json::parse(&content).map_err(|e| {
        CliError::usage(
            flag,
            if e.is_syntax() {
                format!("{flag}: {source} is {e}")
            } else {
                format!("{flag}: {source} is refused: {e}")
            },
        )
    })
}

pub(super) fn duration_arg(flag: &str, text: &str) -> Result<Duration, CliError> {
    parse_duration(text).map_err(|e| CliError::usage(flag, format!("{flag}: {e}")))
}

/// Print what a mutation did. If the answer cannot be written the error
/// says what was done all the same, so nobody retries blindly.
fn print_outcome(outcome: &Outcome, verb: &str, json: bool) -> Result<(), CliError> {
    let text = if json {
        json!({ "change": outcome.change, "task": schema::masked_task(&outcome.task) }).to_string()
    } else {
        output::outcome_line(outcome, verb)
    };
    output::emit_line(&text).map_err(|error| CliError::Output {
        error,
        done: Some(match outcome.change {
            crate::task::Change::Applied => format!(
                "the change stands: task {} is now {} (revision {})",
                output::sanitize_line(&outcome.task.task_id),
                outcome.task.status,
                outcome.task.revision
            ),
            crate::task::Change::Unchanged => format!(
                "nothing was changed: task {} is {} (revision {})",
                output::sanitize_line(&outcome.task.task_id),
                outcome.task.status,
                outcome.task.revision
            ),
        }),
    })
}

/// Print a read's answer: `value` as compact JSON, else `human()`.
fn print_answer<T: serde::Serialize>(
    json: bool,
    value: &T,
    human: impl FnOnce() -> String,
) -> Result<(), CliError> {
    let text = if json {
        let mut text = serde_json::to_string(value).map_err(anyhow::Error::from)?;
        text.push('\n');
        text
    } else {
        human()
    };
    output::emit(&text).map_err(|error| CliError::Output { error, done: None })
}

/// A report of a command that changed the store: an output error says so.
fn print_report<T: serde::Serialize>(
    json: bool,
    value: &T,
    human: impl FnOnce() -> String,
    done: impl FnOnce() -> Option<String>,
) -> Result<(), CliError> {
    print_answer(json, value, human).map_err(|e| match e {
        CliError::Output { error, .. } => CliError::Output {
            error,
            done: done(),
        },
        other => other,
    })
}

/// Run `command`; its exit code (0 but for `wait`, which says how the task ended).
fn dispatch(store: &Store, command: Command) -> Result<i32, CliError> {
    // A person at a terminal hears what an operation waits for (a
    // database server that does not answer) instead of silence; a script's
    // stderr stays for the error alone.
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        crate::store::notice::set_waiting_hook(|m| output::note(&format!("rudder: {m}")));
    }
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
                kind: a.kind,
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
                origin: None,
                owned_by: None,
            };
            let outcome = store.create(new)?;
            print_outcome(&outcome, "created", a.output.json)?;
        }
        Command::List(a) => {
            // A mistyped path must not look like an empty store.
            if !crate::store::Backend::exists(store.backend())? {
                output::note(&format!(
                    "rudder: no store at {}: it does not exist (yet), so it holds no tasks",
                    output::sanitize_line(&store.location())
                ));
            }
            let query = crate::store::PageQuery {
                statuses: a.status,
                kinds: a.kind,
                sort: a.sort,
                limit: a.limit,
                after: a.after,
                ..crate::store::PageQuery::default()
            };
            list(store, &query, a.output.json)?;
        }
        Command::Get(a) => {
            if a.reveal {
                reveal_allowed(store)?;
            }
            let mut task = store.get(&a.id)?;
            if !a.reveal {
                schema::mask_task(&mut task);
            }
            // With an input schema, `get` also says whether it fits MCP
            // elicitation (docs/cli.md "Input forms").
            let mut shown = serde_json::to_value(&task).map_err(anyhow::Error::from)?;
            if let (Some(schema), Some(obj)) = (&task.input_schema, shown.as_object_mut()) {
                obj.insert("mcp_elicitation".into(), json!(schema::mcp_fit(schema)));
            }
            print_answer(a.output.json, &shown, || {
                output::task_detail(&task, store.now(), a.reveal)
            })?;
        }
        Command::Input(a) => {
            let value = match &a.value {
                Some(v) => json_arg("--value", v)?,
                None => {
                    let task = store.get(&a.id)?;
                    schema::input_from_assignments(task.input_schema.as_ref(), &a.set).map_err(
                        |e| match e {
                            schema::SetError::Usage(m) => CliError::usage("--set", m),
                            // Typed like `--value`: exit 5, the field named.
                            schema::SetError::Invalid(violations) => {
                                CliError::Store(crate::store::StoreError::InvalidInput {
                                    id: task.task_id.clone(),
                                    violations,
                                })
                            }
                        },
                    )?
                }
            };
            let outcome = store.provide_input(&a.id, value, a.revision)?;
            print_outcome(&outcome, "input accepted", a.output.json)?;
        }
        Command::RequestInput(a) => {
            let schema = json_arg("--schema", &a.schema)?;
            let holder = holder_arg(a.holder.as_deref())?;
            let outcome = store.request_input(&a.id, schema, a.message, actor(&holder, None))?;
            print_outcome(&outcome, "input requested", a.output.json)?;
        }
        Command::Heartbeat(a) => {
            let holder = holder_arg(a.holder.as_deref())?;
            let lease = a
                .lease
                .as_deref()
                .map(|l| duration_arg("--lease", l))
                .transpose()?;
            let outcome = store.heartbeat(&a.id, a.message, None, actor(&holder, lease))?;
            print_outcome(&outcome, "heartbeat recorded", a.output.json)?;
        }
        Command::Complete(a) => {
            let result = match &a.result {
                Some(r) => json_arg("--result", r)?,
                None => Value::Null,
            };
            let holder = holder_arg(a.holder.as_deref())?;
            let outcome = store.complete(&a.id, result, actor(&holder, None))?;
            print_outcome(&outcome, "completed", a.output.json)?;
        }
        Command::Fail(a) => {
            let holder = holder_arg(a.holder.as_deref())?;
            let outcome = store.fail(&a.id, &a.error, actor(&holder, None))?;
            print_outcome(&outcome, "failed", a.output.json)?;
        }
        Command::Cancel(a) => {
            let outcome = store.cancel(&a.id, a.reason)?;
            print_outcome(&outcome, "cancelled", a.output.json)?;
        }
        Command::Reclaim(a) => {
            let older = duration_arg("--older-than", &a.older_than)?;
            let report = store.reclaim_because(older, a.dry_run, a.reason.as_deref())?;
            print_report(
                a.output.json,
                &report,
                || output::reclaim_report(&report),
                || {
                    (!report.dry_run && !report.reclaimed.is_empty()).then(|| {
                        format!(
                            "the reclaim stands: {} task(s) are now failed",
                            report.reclaimed.len()
                        )
                    })
                },
            )?;
        }
        Command::Prune(a) => {
            let older = duration_arg("--older-than", &a.older_than)?;
            let report = store.prune(older)?;
            print_report(
                a.output.json,
                &report,
                || output::prune_report(&report),
                || {
                    (!report.removed.is_empty()).then(|| {
                        format!(
                            "the prune stands: {} task(s) were removed",
                            report.removed.len()
                        )
                    })
                },
            )?;
        }
        Command::Claim(a) => claim(store, a)?,
        Command::Log(a) => return super::log::run(store, a),
        Command::Wait(a) => {
            let timeout = a
                .timeout
                .as_deref()
                .map(|t| duration_arg("--timeout", t))
                .transpose()?;
            let mut task = wait(
                store,
                &a.id,
                timeout,
                match a.until {
                    WaitUntil::Terminal => Until::Terminal,
                    WaitUntil::Settled => Until::Settled,
                },
                !a.output.json,
            )?;
            // A task removed right after it ended: how it ended is known,
            // its result is not; the answer says so rather than show null.
            let removed = crate::worker::removed_after_ending(&task);
            schema::mask_task(&mut task);
            let mut answer = serde_json::to_value(&task).map_err(|e| CliError::Other(e.into()))?;
            if removed && let Some(fields) = answer.as_object_mut() {
                fields.remove("result");
                fields.remove("error");
            }
            print_answer(a.output.json, &answer, || {
                let line = output::wait_line(&task);
                if removed {
                    format!("{line} (removed right after it ended: its result was not kept)\n")
                } else {
                    format!("{line}\n")
                }
            })?;
            return Ok(super::wait_exit_code(task.status));
        }
        Command::Copy(a) => copy(&a.from, &a.to, a.output.json)?,
        Command::Migrate(a) => migrate(store, a.output.json)?,
        Command::Notify(a) => return super::notify::run(store, a),
        Command::Watch(_)
        | Command::Demo(_)
        | Command::Worker(_)
        | Command::Mcp(_)
        | Command::Gateway(_)
        | Command::Completions(_)
        | Command::Man => {
            return Err(CliError::Usage {
                message: "watch, demo, worker, completions and man are not store commands".into(),
                culprit: None,
            });
        }
    }
    Ok(0)
}

/// Whether `get --reveal` may show secret answers in clear: to someone
/// who may write the store, as far as the CLI can tell. Someone who can
/// write a file or SQLite store can read it too, so the clear value is no
/// news to them; a store this process certainly cannot write (a file or
/// its directory not writable by this user, a read-only file system:
/// [`crate::store::Backend::cannot_write`]) is refused. PostgreSQL cannot
/// tell before a write: there the database's own grants on the tasks
/// table decide who reads what (docs/cli.md "Secret answers").
fn reveal_allowed(store: &Store) -> Result<(), CliError> {
    match crate::store::Backend::cannot_write(store.backend()) {
        Some(why) => Err(CliError::RevealRefused { why }),
        None => Ok(()),
    }
}

/// `--holder`, checked: no empty holder, no control characters.
fn holder_arg(holder: Option<&str>) -> Result<Option<String>, CliError> {
    holder
        .map(|h| {
            crate::worker::check_name("holder", h)
                .map(|()| h.to_string())
                .map_err(|e| CliError::usage("--holder", format!("--holder: {e}")))
        })
        .transpose()
}

/// Who writes: the lease holder given with `--holder` (its lease renewed
/// for `lease`, else for the length the claim recorded), else anyone.
fn actor(holder: &Option<String>, lease: Option<Duration>) -> Actor<'_> {
    match holder {
        Some(holder) => Actor::Worker { holder, lease },
        None => Actor::Anyone,
    }
}

/// `rudder claim`: claim the next task as a shell worker, on the worker
/// API ([`crate::worker`]), and print it with its holder. The lease is
/// left to the script, which renews it with `heartbeat --holder`.
fn claim(store: &Store, a: ClaimArgs) -> Result<(), CliError> {
    let lease = duration_arg("--lease", &a.lease)?;
    if lease.is_zero() {
        return Err(CliError::usage(
            "--lease",
            "--lease: a lease must be longer than 0s",
        ));
    }
    let wait = a
        .wait
        .as_deref()
        .map(|w| duration_arg("--wait", w))
        .transpose()?;
    let config =
        |flag: &str, e: crate::worker::ConfigError| CliError::usage(flag, format!("{flag}: {e}"));
    for kind in &a.kinds {
        crate::task::check_kind(kind).map_err(|reason| {
            CliError::usage(
                "--kind",
                format!("--kind: {kind:?} is not a kind: {reason}"),
            )
        })?;
    }
    let mut builder = store.worker("shell").lease(lease).kinds(a.kinds.clone());
    if let Some(holder) = &a.holder {
        crate::worker::check_name("holder", holder).map_err(|e| config("--holder", e))?;
        builder = builder.holder(holder.clone());
    }
    let mut worker = builder.start().map_err(|e| match e {
        crate::worker::StartError::Config(e @ crate::worker::ConfigError::Kind { .. }) => {
            config("--kind", e)
        }
        crate::worker::StartError::Config(e) => config("--holder", e),
        crate::worker::StartError::Url(e) => CliError::usage("--store", format!("--store: {e}")),
        crate::worker::StartError::Runtime(e) => CliError::Other(e.into()),
    })?;
    let job = worker
        .next(wait.unwrap_or(Duration::ZERO))
        .map_err(|e| match e {
            crate::worker::WorkError::Stop(stop) => CliError::Other(anyhow::anyhow!("{stop}")),
            crate::worker::WorkError::Store(e) | crate::worker::WorkError::Rejected(e) => {
                CliError::Store(e)
            }
        })?
        .ok_or_else(|| CliError::NothingToClaim {
            waited: a
                .wait
                .as_ref()
                .map(|_| humantime::format_duration(wait.unwrap_or_default()).to_string()),
        })?;
    let holder = job.holder().to_string();
    let task = job.detach();
    let text = if a.output.json {
        json!({ "holder": holder, "task": task }).to_string()
    } else {
        output::claim_line(&task, &holder)
    };
    output::emit_line(&text).map_err(|error| CliError::Output {
        error,
        done: Some(format!(
            "the claim stands: task {} is held by {} until its lease lapses",
            output::sanitize_line(&task.task_id),
            output::sanitize_line(&holder)
        )),
    })
}

/// The terminal's width: `$COLUMNS` when it is a positive number, else what
/// the terminal says.
fn terminal_width() -> Option<usize> {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
        .or_else(|| {
            crossterm::terminal::size()
                .ok()
                .map(|(columns, _)| usize::from(columns))
        })
}

/// `rudder list`: the tasks written out one by one as the store yields
/// them (never the whole answer held twice, or more than a batch of tasks
/// for a database), with the same bytes as the whole array at once.
fn list(store: &Store, query: &crate::store::PageQuery, json: bool) -> Result<(), CliError> {
    let now = store.now();
    // On a terminal the rows fit its width ($COLUMNS first, as `ls` does);
    // a pipe or a file gets them whole.
    let width = std::io::IsTerminal::is_terminal(&std::io::stdout())
        .then(terminal_width)
        .flatten();
    let layout = output::TableLayout::fit(width);
    let mut out = output::Stream::default();
    let mut written = 0usize;
    let mut failed = None;
    // A write that failed stops the listing; its error is the answer.
    let mut keep = |done: Result<(), output::OutputError>| match done {
        Ok(()) => true,
        Err(e) => {
            failed = Some(e);
            false
        }
    };
    let end = if json {
        // Tasks the store hands as their JSON text hold nothing to mask
        // (`Listed::Json`, a run of them); any other is masked here.
        store.page_listed_each(query, &mut |listed| {
            let done = out
                .text(if written == 0 { "[" } else { "," })
                .and_then(|()| match listed {
                    crate::store::Listed::Json { text, count } => {
                        written += count;
                        out.bytes(text)
                    }
                    crate::store::Listed::Task(mut task) => {
                        written += 1;
                        schema::mask_task(&mut task);
                        out.json(&*task)
                    }
                });
            keep(done)
        })?;
        if written == 0 { "[]\n" } else { "]\n" }
    } else {
        store.page_each(query, &mut |mut task| {
            schema::mask_task(&mut task);
            let row = layout.row(&task, now);
            let done = if written == 0 {
                out.text(&layout.header()).and_then(|()| out.text(&row))
            } else {
                out.text(&row)
            };
            written += 1;
            keep(done)
        })?;
        if written == 0 { output::NO_TASKS } else { "" }
    };
    failed
        .map_or(Ok(()), Err)
        .and_then(|()| out.text(end))
        .and_then(|()| out.finish())
        .map_err(|error| CliError::Output { error, done: None })
}

/// `rudder copy FROM TO`.
fn copy(from: &Path, to: &Path, json: bool) -> Result<(), CliError> {
    let parse = |p: &Path, arg: &str| {
        crate::store::StoreUrl::parse(p).map_err(|e| CliError::usage(arg, format!("{arg}: {e}")))
    };
    let (from_url, to_url) = (parse(from, "FROM")?, parse(to, "TO")?);
    let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    if same(from_url.path(), to_url.path()) {
        return Err(CliError::usage(
            "TO",
            format!("copy: FROM and TO are the same store ({from_url})"),
        ));
    }
    let connect = |url: &crate::store::StoreUrl, arg: &str| {
        Store::connect(url).map_err(|e| CliError::usage(arg, format!("{arg}: {e}")))
    };
    let (src, dst) = (connect(&from_url, "FROM")?, connect(&to_url, "TO")?);
    // A mistyped FROM must not look like an empty store copied (as `list`).
    if !crate::store::Backend::exists(src.backend())? {
        output::note(&format!(
            "rudder: no store at {}: it does not exist, so there is nothing to copy",
            output::sanitize_line(&src.location())
        ));
    }
    // A spinner with the count on a terminal; indicatif draws nothing when
    // stderr is not one (a script, a log), and `--json` keeps stderr quiet.
    let bar = if json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new_spinner()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} copied {pos} task(s) ({per_sec})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    let report = crate::store::copy::copy(&src, &dst, |done| bar.set_position(done as u64));
    bar.finish_and_clear();
    let report = report?;
    let summary = format!(
        "copied {} task(s) from {} to {} ({} new, {} updated, {} already there)",
        report.total(),
        output::sanitize_line(&report.from),
        output::sanitize_line(&report.to),
        report.copied,
        report.updated,
        report.unchanged
    );
    print_report(
        json,
        &report,
        || format!("{summary}\n"),
        || (report.copied + report.updated > 0).then(|| format!("the copy stands: {summary}")),
    )
}

/// `rudder migrate`: a PostgreSQL store's tables created or brought up to
/// date now (by a role allowed to), rather than by the first write.
fn migrate(store: &Store, json: bool) -> Result<(), CliError> {
    let Some(migrated) = store.backend().migrate() else {
        return Err(CliError::Usage {
            message: format!(
                "migrate: {} is not a PostgreSQL store (files and SQLite databases are \
                 set up by their first write)",
                store.location()
            ),
            culprit: None,
        });
    };
    let crate::store::Migrated {
        found,
        version: now,
        text_index_missing,
    } = migrated?;
    let answer = serde_json::json!({
        "store": store.location(),
        "schema_version_before": found,
        "schema_version": now,
        "text_index": text_index_missing.is_none(),
        "text_index_missing": text_index_missing,
    });
    print_answer(json, &answer, || {
        let mut out = match found {
            Some(v) if v == now => format!("the store is at schema version {now} already\n"),
            Some(v) => format!("migrated the store from schema version {v} to {now}\n"),
            None => format!("created the store's tables (schema version {now})\n"),
        };
        out.push_str(&match &text_index_missing {
            None => "the text filter is indexed (pg_trgm)\n".to_string(),
            Some(why) => format!(
                "the text filter is not indexed (it reads every task): {why}; an administrator's \
                 `CREATE EXTENSION pg_trgm` in this database, then `rudder migrate` again, adds \
                 the index\n"
            ),
        });
        out
    })
}

/// Block until the task is terminal or waits for input ([`Store::wait`]).
/// With `announce`, says on stderr what it waits for once it has read the
/// task (a person sees that it waits; a test sees that it has begun), and
/// when the store's server cannot be reached.
///
/// - The store turning unreadable or corrupt ends the wait at once (exit 6)
///   with the store's own error, once a second read confirms it.
/// - The task vanishing (pruned, or the store deleted) after it was seen
///   unfinished is [`CliError::Vanished`] (exit 3), which says how it was
///   last seen: its outcome is unknown.
fn wait(
    store: &Store,
    id: &str,
    timeout: Option<Duration>,
    until: Until,
    announce: bool,
) -> Result<Task, CliError> {
    let mut note = |note: WaitNote| {
        if !announce {
            return;
        }
        output::note(&match note {
            WaitNote::Waiting(task) => format!(
                "rudder: waiting for task {} ({}, revision {})",
                output::sanitize_line(&task.task_id),
                task.status,
                task.revision
            ),
            WaitNote::StillWaiting(message) => {
                format!("rudder: {}; still waiting", output::sanitize_line(&message))
            }
        });
    };
    store
        .wait_noting(id, until, timeout, &mut note)
        .map_err(|e| match e {
            WaitError::Store(e) => CliError::Store(e),
            WaitError::TimedOut { after, id } => {
                CliError::Timeout(humantime::format_duration(after).to_string(), id)
            }
            WaitError::Vanished { last, store_gone } => CliError::Vanished {
                last,
                // As every message names a store: no password.
                path: store.backend().url().to_string().into(),
                store_gone,
            },
            WaitError::FeedStopped => CliError::Other(anyhow::anyhow!("the change feed stopped")),
        })
}
