use std::process::ExitCode;

use clap::Parser;
use rudder::StoreError;
use rudder::cli::{Cli, Command, args::WatchArgs, store_path};
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
        eprintln!("rudder: RUDDER_LOCK_TIMEOUT: {e}");
        return ExitCode::from(rudder::cli::EXIT_USAGE as u8);
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
        eprintln!("rudder: {e}");
        return ExitCode::from(rudder::cli::EXIT_USAGE as u8);
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
            eprintln!("rudder: {}", sanitize(&format!("{e:#}")));
            let code = e
                .chain()
                .find_map(|c| c.downcast_ref::<StoreError>())
                .map_or(1, StoreError::exit_code);
            ExitCode::from(code as u8)
        }
    }
}

/// Report a command-line error. With `--json` anywhere in the arguments the
/// answer is one JSON object on stdout, like every other error; help and
/// version requests print as usual.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let wants_json = std::env::args_os().any(|a| a == "--json");
    if !wants_json || matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit();
    }
    let message = e.to_string();
    let first = message.lines().next().unwrap_or("invalid arguments");
    let json = serde_json::json!({
        "error": "usage",
        "message": first.trim_start_matches("error: "),
        "exit_code": rudder::cli::EXIT_USAGE,
    });
    println!("{json}");
    ExitCode::from(rudder::cli::EXIT_USAGE as u8)
}
