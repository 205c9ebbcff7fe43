#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

use std::process::ExitCode;

use clap::Parser;
use std::io::Write;

use rudder::StoreError;
use rudder::cli::output::note;
use rudder::cli::{Cli, Command, EXIT_STORE, EXIT_USAGE, OutputError, args::WatchArgs, store_path};
use rudder::demo::seed::FreshError;
use rudder::text::sanitize;

fn main() -> ExitCode {
    // Like every Unix tool: `rudder list | head` ends quietly when the
    // reader goes away, instead of panicking on a broken pipe.
    // SAFETY: setting a signal disposition to its default before any thread
    // starts has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    // The store reads it when it opens; a typo must not silently mean 30 s.
    if let Some(text) = std::env::var_os("RUDDER_LOCK_TIMEOUT")
        && let Err(e) = rudder::duration::parse_duration(&text.to_string_lossy())
    {
        note(&format!("rudder: RUDDER_LOCK_TIMEOUT: {e}"));
        return ExitCode::from(EXIT_USAGE as u8);
    }
    if let Some(text) = std::env::var_os("RUDDER_MAX_STORE_BYTES")
        && let Err(e) = rudder::store::parse_max_bytes(&text.to_string_lossy())
    {
        note(&format!("rudder: RUDDER_MAX_STORE_BYTES: {e}"));
        return ExitCode::from(EXIT_USAGE as u8);
    }
    // The demo and its simulated worker never touch $RUDDER_STORE: seeding
    // incidents into a real store, or letting a simulated diagnosis fail
    // real tasks, would be a nasty surprise.
    let demo_store = cli
        .store
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("rudder-demo.json"));
    let store = store_path(cli.store);
    // The scriptable commands report this themselves (as JSON with --json).
    let interactive_store = match &cli.command {
        None | Some(Command::Watch(_)) => Some(&store),
        Some(Command::Demo(_) | Command::Worker(_)) => Some(&demo_store),
        Some(_) => None,
    };
    if let Some(Err(e)) = interactive_store.map(rudder::store::StoreUrl::parse) {
        note(&format!("rudder: {e}"));
        return ExitCode::from(EXIT_USAGE as u8);
    }
    let default_watch = Command::Watch(WatchArgs {
        read_only: cli.read_only,
    });
    let interactive = match cli.command.unwrap_or(default_watch) {
        Command::Watch(a) => rudder::tui::run(rudder::tui::Options {
            store,
            read_only: a.read_only || cli.read_only,
            worker: None,
        }),
        Command::Demo(a) => rudder::demo::run_demo(rudder::demo::DemoOptions {
            store: demo_store,
            fresh: a.fresh,
            speed: a.speed,
        }),
        Command::Worker(a) => rudder::demo::run_worker(rudder::demo::WorkerOptions {
            store: demo_store,
            speed: a.speed,
            name: a.name,
        }),
        other => return ExitCode::from(rudder::cli::run(Some(store), other) as u8),
    };
    match interactive {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Store errors can quote the file's content: keep it inert.
            note(&format!("rudder: {}", sanitize(&format!("{e:#}"))));
            ExitCode::from(exit_code(&e) as u8)
        }
    }
}

/// The exit code of an interactive command's error: the README's table for
/// the errors it knows (the store's, a store the demo refuses, output that
/// cannot be written), 1 for anything else.
fn exit_code(e: &anyhow::Error) -> i32 {
    e.chain()
        .find_map(|c| {
            if let Some(e) = c.downcast_ref::<StoreError>() {
                Some(e.exit_code())
            } else if let Some(e) = c.downcast_ref::<FreshError>() {
                Some(e.exit_code())
            } else {
                c.downcast_ref::<OutputError>().map(|_| EXIT_STORE)
            }
        })
        .unwrap_or(1)
}

/// Report a command-line error. With `--json` anywhere in the arguments the
/// answer is one JSON object on stdout, like every other error; help and
/// version requests print as usual.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let wants_json = std::env::args_os().any(|a| a == "--json");
    if !wants_json || matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let code = e.exit_code();
        let printed = e.print().and_then(|()| {
            std::io::stdout().flush()?;
            std::io::stderr().flush()
        });
        return match printed {
            // Help that cannot be written is an output error; a usage
            // error stays one even if its message could not be written.
            Err(err) if !e.use_stderr() => {
                note(&format!("rudder: cannot write the output to stdout: {err}"));
                ExitCode::from(EXIT_STORE as u8)
            }
            _ => ExitCode::from(code as u8),
        };
    }
    let message = e.to_string();
    let first = message.lines().next().unwrap_or("invalid arguments");
    let json = serde_json::json!({
        "error": "usage",
        "message": first.trim_start_matches("error: "),
        "exit_code": EXIT_USAGE,
    });
    match rudder::cli::output::emit_line(&json.to_string()) {
        Ok(()) => ExitCode::from(EXIT_USAGE as u8),
        // The usage error is what went wrong; say it where it can be read.
        Err(err) => {
            note(&format!("rudder: {err}; the error was: {first}"));
            ExitCode::from(EXIT_USAGE as u8)
        }
    }
}
