use std::process::ExitCode;

use clap::Parser;
use rudder::cli::{Cli, Command, args::WatchArgs, store_path};

fn main() -> ExitCode {
    let cli = Cli::parse();
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
