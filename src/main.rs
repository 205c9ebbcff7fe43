use std::process::ExitCode;

use clap::Parser;
use rudder::cli::{Cli, Command, args::WatchArgs, store_path};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    // The demo never touches $RUDDER_STORE: seeding incidents into a real
    // store would be a nasty surprise.
    let demo_store = cli
        .store
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("rudder-demo.json"));
    let store = store_path(cli.store);
    let interactive = match cli.command.unwrap_or(Command::Watch(WatchArgs::default())) {
        Command::Watch(a) => rudder::tui::run(rudder::tui::Options {
            store,
            read_only: a.read_only,
            worker: None,
        }),
        Command::Demo(a) => rudder::demo::run_demo(rudder::demo::DemoOptions {
            store: demo_store,
            fresh: a.fresh,
            speed: a.speed,
        }),
        Command::Worker(a) => rudder::demo::run_worker(rudder::demo::WorkerOptions {
            store,
            speed: a.speed,
            name: a.name,
        }),
        other => return ExitCode::from(rudder::cli::run(Some(store), other) as u8),
    };
    match interactive {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rudder: {e:#}");
            ExitCode::from(1)
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
