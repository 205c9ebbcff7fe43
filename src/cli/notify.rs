//! `rudder notify`: the command line of `rudder-notify` (docs/notify.md).

use std::sync::Arc;
use std::time::Duration;

use rudder_notify::{HeaderSpec, LogLine, Notifier, On, Options, Secret, Sink, Webhook};

use super::CliError;
use super::args::NotifyArgs;
use super::output;
use crate::store::Store;

/// Run the notifier until it is stopped (or its feed stops).
pub(super) fn run(store: &Store, a: NotifyArgs) -> Result<i32, CliError> {
    let opts = options(&a)?;
    // The notifier's tasks share a store of their own, over what the
    // command opened, with its settings.
    let store = crate::store::reopen(store)
        .map_err(|e| CliError::usage("--store", format!("--store: {e}")))?;
    let sink = sink(&a, opts.timeout)?;
    let json = a.json;
    let log: rudder_notify::Log = Arc::new(move |line: LogLine| {
        if json {
            // Best effort: a log reader that went away does not stop
            // the deliveries.
            let _ = output::emit_line(&line.json().to_string());
        } else {
            output::note(&output::sanitize_line(&human(&line)));
        }
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::Other(e.into()))?;
    let notifier = Notifier::new(store, sink, opts, log);
    let ran = runtime.block_on(async {
        // Before the first claim: from here on SIGTERM (a service
        // manager's stop) and SIGINT end the deliveries and give their
        // claims back instead of leaving them held until the lease lapses.
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let stop = async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        };
        Ok::<_, std::io::Error>(notifier.run_until(stop).await)
    });
    // A store call still running on the blocking pool (a server that does
    // not answer) does not hold the exit up.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match ran {
        Ok(Ok(())) => Ok(0),
        Ok(Err(rudder_notify::NotifyError::Store(e))) => Err(CliError::Store(e)),
        Ok(Err(e)) => Err(CliError::Other(e.into())),
        Err(e) => Err(CliError::Other(
            anyhow::Error::new(e).context("cannot handle SIGTERM and SIGINT"),
        )),
    }
}

/// A log line for people.
fn human(line: &LogLine) -> String {
    let what = match &line.key {
        Some(k) => format!(
            "{} of task {} (round {})",
            k.event,
            rudder_model::task::short_id(&k.task_id),
            k.round
        ),
        None => String::new(),
    };
    let message = line.message.as_deref().unwrap_or("");
    match line.outcome {
        "started" => format!("rudder notify: {message}"),
        "delivered" => format!("rudder notify: delivered {what} to {message}"),
        "retry" => format!(
            "rudder notify: {what}: attempt {} failed: {message}",
            line.attempt
        ),
        "gave_up" => format!("rudder notify: {what}: gave up (not retried): {message}"),
        "moot" => format!("rudder notify: {what}: {message}"),
        "held" => format!("rudder notify: {what}: {message}"),
        "stopped" => format!("rudder notify: {message}"),
        other => format!("rudder notify: {other}: {what} {message}"),
    }
}

fn duration(flag: &str, text: &str) -> Result<Duration, CliError> {
    let d = crate::duration::parse_duration(text)
        .map_err(|e| CliError::usage(flag, format!("{flag}: {e}")))?;
    if d.is_zero() {
        return Err(CliError::usage(
            flag,
            format!("{flag}: must be more than 0"),
        ));
    }
    Ok(d)
}

fn options(a: &NotifyArgs) -> Result<Options, CliError> {
    if a.name.is_empty() || a.name.chars().any(char::is_control) {
        return Err(CliError::usage(
            "--name",
            "--name: a name is a non-empty text without control characters",
        ));
    }
    let mut opts = Options::new(a.name.clone());
    let mut on: Vec<On> = Vec::new();
    for o in &a.on {
        let o: On = o
            .parse()
            .map_err(|e: String| CliError::usage("--on", format!("--on: {e}")))?;
        if !on.contains(&o) {
            on.push(o);
        }
    }
    opts.on = on;
    for k in &a.kind {
        crate::task::check_kind(k)
            .map_err(|e| CliError::usage("--kind", format!("--kind: {e}")))?;
    }
    opts.kinds = a.kind.clone();
    opts.timeout = duration("--timeout", &a.timeout)?;
    opts.backoff = duration("--backoff", &a.backoff)?;
    opts.max_backoff = opts.max_backoff.max(opts.backoff);
    Ok(opts)
}

/// `NAME=REST` of a header option.
fn header(flag: &'static str, text: &str) -> Result<(String, String), CliError> {
    match text.split_once('=') {
        Some((n, v)) if !n.is_empty() && !v.is_empty() => Ok((n.to_string(), v.to_string())),
        _ => Err(CliError::usage(
            flag,
            format!(
                "{flag}: expected NAME=SOURCE, got {:?}",
                output::sanitize_line(text)
            ),
        )),
    }
}

fn sink(a: &NotifyArgs, timeout: Duration) -> Result<Sink, CliError> {
    if let Some(exec) = &a.exec {
        let Some((program, args)) = exec.split_first() else {
            return Err(CliError::usage(
                "--exec",
                "--exec: a program to run is needed",
            ));
        };
        let mut args = args.to_vec();
        args.extend(a.exec_args.iter().cloned());
        return Ok(Sink::Exec {
            program: program.clone(),
            args,
        });
    }
    let Some(url) = &a.webhook else {
        return Err(CliError::usage(
            "--webhook",
            "--exec or --webhook is needed",
        ));
    };
    let mut headers = Vec::new();
    for h in &a.header_env {
        let (name, var) = header("--header-env", h)?;
        headers.push(HeaderSpec {
            name,
            prefix: "",
            value: Secret::Env(var),
            flag: "--header-env",
        });
    }
    for h in &a.header_file {
        let (name, path) = header("--header-file", h)?;
        headers.push(HeaderSpec {
            name,
            prefix: "",
            value: Secret::File(path.into()),
            flag: "--header-file",
        });
    }
    if let Some(var) = &a.bearer_env {
        headers.push(HeaderSpec {
            name: "authorization".into(),
            prefix: "Bearer ",
            value: Secret::Env(var.clone()),
            flag: "--bearer-env",
        });
    }
    if let Some(path) = &a.bearer_file {
        headers.push(HeaderSpec {
            name: "authorization".into(),
            prefix: "Bearer ",
            value: Secret::File(path.clone()),
            flag: "--bearer-file",
        });
    }
    let hook = Webhook::new(url, &headers, timeout).map_err(|e| {
        let flag = match &e {
            rudder_notify::SinkError::Header { flag, .. } => flag,
            _ => "--webhook",
        };
        CliError::usage(flag, e.to_string())
    })?;
    Ok(Sink::Webhook(Arc::new(hook)))
}
