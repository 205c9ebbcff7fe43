#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use std::io::Write;

use rudder::cli::exit::{
    self, EXIT_REFUSED, EXIT_STORE, EXIT_USAGE, clap_error_json, environment_error_json,
};
use rudder::cli::output::{emit, emit_line, note};
use rudder::cli::{Cli, Command, args::WatchArgs, wants_json};
use rudder::text::sanitize;

#[allow(unsafe_code)] // each unsafe block below has its SAFETY comment
fn main() -> ExitCode {
    // Like every Unix tool: `rudder list | head` ends quietly when the
    // reader goes away, instead of panicking on a broken pipe.
    // SAFETY: setting a signal disposition to its default before any thread
    // starts has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args = rudder::cli::argv::json_after_subcommand(std::env::args_os().collect());
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return usage_error(with_tips(e, &args)),
    };
    let json = cli.command.as_ref().is_some_and(wants_json);
    // The store's settings, read once here and used by every store this
    // process opens; a typo must not silently mean the default.
    match rudder::store::Settings::from_env() {
        Ok(settings) => {
            // Nothing has read them yet: this is the first and only time.
            let _ = settings.set_for_process();
        }
        Err(e) => {
            if json {
                report_json(&environment_error_json(e.variable, &e.message), EXIT_USAGE);
            } else {
                note(&format!("rudder: {e}"));
            }
            return ExitCode::from(EXIT_USAGE as u8);
        }
    }
    match cli.command {
        Some(Command::Completions(a)) => {
            let mut out = Vec::new();
            clap_complete::generate(a.shell, &mut Cli::command(), "rudder", &mut out);
            return print_generated(&out);
        }
        Some(Command::Man) => {
            let mut out = Vec::new();
            if let Err(e) = clap_mangen::Man::new(Cli::command()).render(&mut out) {
                note(&format!("rudder: cannot render the manual page: {e}"));
                return ExitCode::from(1);
            }
            return print_generated(&out);
        }
        _ => {}
    }
    if cli.read_only
        && let Some(name @ ("demo" | "worker" | "gateway")) =
            cli.command.as_ref().and_then(rudder::cli::writes)
    {
        note(&format!(
            "rudder: --read-only: {name} runs a worker that writes to its store, and every write is refused; nothing was done"
        ));
        return ExitCode::from(EXIT_REFUSED as u8);
    }
    // The demo never touches $RUDDER_STORE: seeding incidents into a real
    // store would be a nasty surprise. `rudder worker` takes the store the
    // user gave like every other command (and only ever claims demo
    // incidents); the demo hands its own store to its worker that way.
    let demo_url = || rudder::store::StoreUrl::from_path(std::path::Path::new("rudder-demo.json"));
    let command = cli.command.unwrap_or(Command::Watch(WatchArgs {}));
    // The store, typed once: `--store` by clap, `$RUDDER_STORE` here. The
    // scriptable commands report a bad one themselves (as JSON with
    // --json); the others here, before anything starts.
    let serves = matches!(
        command,
        Command::Watch(_)
            | Command::Demo(_)
            | Command::Worker(_)
            | Command::Mcp(_)
            | Command::Gateway(_)
    );
    if !serves {
        return ExitCode::from(
            rudder::cli::run(cli.store, cli.read_only, cli.actor, command) as u8,
        );
    }
    let store = match &command {
        Command::Demo(a) => Ok(a
            .store
            .store
            .clone()
            .or_else(|| cli.store.clone())
            .unwrap_or_else(demo_url)),
        Command::Worker(a) => rudder::cli::store_given(a.store.clone().or(cli.store.clone()))
            .map(|given| given.unwrap_or_else(demo_url)),
        _ => rudder::cli::store_url(cli.store.clone()),
    };
    let store = match store {
        Ok(url) => url,
        Err(e) => {
            note(&format!("rudder: {}", sanitize(&e.to_string())));
            return ExitCode::from(EXIT_USAGE as u8);
        }
    };
    // Opened here, once, for the commands that serve a store; a URL this
    // build cannot open is a usage error, before the terminal is taken.
    let open = || match rudder::store::Store::connect(&store) {
        Ok(opened) => Ok(opened),
        Err(e) => {
            note(&format!("rudder: {}", sanitize(&e.to_string())));
            Err(ExitCode::from(EXIT_USAGE as u8))
        }
    };
    // The person at the TUI (and the demo's) writes as an author.
    let author = match &command {
        Command::Watch(_) | Command::Demo(_) => {
            match rudder::cli::author::resolve(cli.actor.as_deref(), rudder::task::Face::Tui) {
                Ok(author) => Some(author),
                Err(e) => {
                    note(&format!("rudder: {}", sanitize(&e.to_string())));
                    return ExitCode::from(EXIT_USAGE as u8);
                }
            }
        }
        _ => None,
    };
    let interactive = match command {
        // The store is opened here, once; a URL this build cannot open is
        // refused before the terminal is taken.
        Command::Watch(_) => match open() {
            Ok(store) => rudder::tui::run(rudder::tui::Options {
                store,
                read_only: cli.read_only,
                author,
                worker: None,
            }),
            Err(code) => return code,
        },
        Command::Demo(a) if a.serve_upstream.is_some() => {
            rudder::demo::upstream::serve(a.serve_upstream.as_deref().unwrap_or_default(), a.speed)
        }
        Command::Demo(a) => rudder::demo::run_demo(rudder::demo::DemoOptions {
            store,
            fresh: a.fresh,
            speed: a.speed,
            python_worker: a.python_worker,
            mcp: a.mcp,
            notify: a.notify,
            gateway: a.gateway,
            author,
        }),
        Command::Worker(a) => rudder::demo::run_worker(rudder::demo::WorkerOptions {
            store,
            speed: a.speed,
            name: a.name,
        }),
        Command::Mcp(a) => {
            let store = match open() {
                Ok(store) => store,
                Err(code) => return code,
            };
            return ExitCode::from(rudder::mcp::run(
                store,
                rudder::mcp::McpOptions {
                    tools: a.tools,
                    http: a.http,
                    token_file: a.token_file,
                    tokens: a.tokens,
                    jwt: a.jwks.map(|jwks| rudder::mcp::auth::JwtOptions {
                        jwks,
                        // clap requires both with --jwks.
                        issuer: a.issuer.unwrap_or_default(),
                        resource: a.resource.unwrap_or_default(),
                        audience: a.audience,
                    }),
                    allow_origins: a.allow_origin,
                    gateway_max_calls: a.max_calls as usize,
                },
            ) as u8);
        }
        Command::Gateway(a) => {
            let store = match open() {
                Ok(store) => store,
                Err(code) => return code,
            };
            return ExitCode::from(rudder::gateway::standalone(
                store,
                &a.tools,
                rudder::gateway::GatewayOptions {
                    max_calls: a.max_calls as usize,
                    ..rudder::gateway::GatewayOptions::default()
                },
            ) as u8);
        }
        other => {
            return ExitCode::from(
                rudder::cli::run(Some(store), cli.read_only, cli.actor, other) as u8,
            );
        }
    };
    match interactive {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Store errors can quote the file's content: keep it inert.
            note(&format!("rudder: {}", sanitize(&format!("{e:#}"))));
            ExitCode::from(exit::interactive_exit_code(&e) as u8)
        }
    }
}

/// Write a generated completion script or manual page to stdout.
fn print_generated(out: &[u8]) -> ExitCode {
    match emit(&String::from_utf8_lossy(out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            note(&format!("rudder: {e}"));
            ExitCode::from(EXIT_STORE as u8)
        }
    }
}

/// Print one JSON error object on stdout; if stdout cannot take it, say
/// so and what the error was on stderr.
fn report_json(json: &serde_json::Value, code: i32) {
    if let Err(err) = emit_line(&json.to_string()) {
        note(&format!(
            "rudder: {err}; the error was: {} (exit {code})",
            json["message"].as_str().unwrap_or("")
        ));
    }
}

/// `e` with a tip for a slip clap does not know: `input ID FIELD=VALUE`
/// without `--set`.
fn with_tips(mut e: clap::Error, args: &[std::ffi::OsString]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue};
    let fields = rudder::cli::argv::set_without_flag(args);
    if fields.is_empty() {
        return e;
    }
    let set: Vec<String> = fields.iter().map(|f| format!("--set {f}")).collect();
    e.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![
            format!(
                "did you mean `{}`? (each field is given with --set)",
                set.join(" ")
            )
            .into(),
        ]),
    );
    e
}

/// Report a command-line error. With `--json` anywhere in the arguments the
/// answer is one JSON object on stdout, like every other error; help and
/// version requests print as usual.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let wants_json = std::env::args_os().any(|a| a == "--json");
    let is_help = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    if !wants_json || is_help {
        // Every usage error is exit 2, whatever clap would use.
        let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
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
    report_json(&clap_error_json(&e), EXIT_USAGE);
    ExitCode::from(EXIT_USAGE as u8)
}
