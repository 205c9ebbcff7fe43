//! The command line, as clap sees it (docs/architecture.md "The binary").

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::store::StoreUrl;
use crate::task::Status;

/// How clap reads `--store`: into a [`StoreUrl`], once, here. A value that
/// names no store is a usage error in rudder's words, `--store: WHY` (the
/// URL's password redacted: clap's own message would quote the raw value).
#[derive(Debug, Clone, Copy)]
pub struct StoreUrlParser;

impl clap::builder::TypedValueParser for StoreUrlParser {
    type Value = StoreUrl;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<StoreUrl, clap::Error> {
        use clap::error::{ContextKind, ContextValue, ErrorKind};
        StoreUrl::parse(value).map_err(|e| {
            let mut err = clap::Error::raw(ErrorKind::ValueValidation, format!("--store: {e}\n"))
                .with_cmd(cmd);
            err.insert(
                ContextKind::InvalidArg,
                ContextValue::String("--store".into()),
            );
            err
        })
    }
}

/// Watch and steer long-running tasks kept in a durable store (a JSON file, SQLite or PostgreSQL).
#[derive(Debug, Parser)]
#[command(name = "rudder", version, about, long_about = None)]
pub struct Cli {
    /// The store: a path or URL (a JSON file: PATH or file:PATH; SQLite: sqlite:PATH, or a PATH ending in .db, .sqlite or .sqlite3; PostgreSQL: postgres://USER@HOST/DB) [default: $RUDDER_STORE, else ./tasks.json]
    #[arg(long, global = true, value_name = "URL", value_parser = StoreUrlParser)]
    pub store: Option<StoreUrl>,

    /// Refuse every write to the store, from any command (exit 4, nothing written); the TUI shows the store and refuses input, cancel and reclaim
    #[arg(long, global = true)]
    pub read_only: bool,

    /// Who you are, recorded on every change you make (the trail, `rudder log`) [default: $RUDDER_ACTOR, else the config file's actor, else USER@HOST]. On a local store this is a declaration: the file's permissions are the gate
    #[arg(long = "as", global = true, value_name = "NAME")]
    pub actor: Option<String>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open the live TUI on the store (the default command)
    #[command(
        after_help = "Keys and theme: $XDG_CONFIG_HOME/rudder/config.toml (else ~/.config/rudder/config.toml), e.g. theme = \"mono\" and [keys] quit = \"x\"; ? in the TUI lists the keys in force."
    )]
    Watch(WatchArgs),
    /// The TUI over a demo store, with a simulated diagnosis worker you can kill and restart
    Demo(DemoArgs),
    /// Run the simulated diagnosis worker (on --store, else $RUDDER_STORE, else ./rudder-demo.json)
    Worker(WorkerArgs),
    /// Create a task: working, or input_required with --schema; with --key a repeat returns the same task
    Create(CreateArgs),
    /// List tasks: every match unless --limit, in store order unless --sort
    List(ListArgs),
    /// Show one task in full
    Get(GetArgs),
    /// Give a task that waits for input its input, validated by its schema: input_required -> working
    Input(InputArgs),
    /// Ask for input: working -> input_required (the worker's lease is released)
    RequestInput(RequestInputArgs),
    /// Record that a working task is alive (its update time, and a new message if given)
    Heartbeat(HeartbeatArgs),
    /// Complete a task with a result (terminal)
    Complete(CompleteArgs),
    /// Fail a task with an error message (terminal)
    Fail(FailArgs),
    /// Cancel a task (terminal; no lease needed)
    Cancel(CancelArgs),
    /// Fail every unfinished task idle for --older-than whose worker holds no live lease
    Reclaim(ReclaimArgs),
    /// Print the store's trail (or one task's), oldest first: time, task, transition, actor, face, reason
    Log(LogArgs),
    /// Remove finished tasks past their ttl, or (without one) older than --older-than
    Prune(PruneArgs),
    /// Claim the next working task no live lease holds, for a shell worker: prints it and its lease holder; exit 10 if nothing was claimable within --wait
    Claim(ClaimArgs),
    /// Wait until a task is finished or waits for input (--until terminal: finished); exit 0 completed, 7 failed, 8 cancelled, 9 input required, 124 timed out
    Wait(WaitArgs),
    /// Copy every task of one store into another (e.g. a JSON file into SQLite or PostgreSQL)
    Copy(CopyArgs),
    /// Create or upgrade a PostgreSQL store's tables now (as an owner role)
    Migrate(MigrateArgs),
    /// Serve the store to MCP clients (Tasks extension): stdio, or Streamable HTTP with --http
    #[command(
        after_help = "The bearer token of --http comes from $RUDDER_MCP_TOKEN or --token-file, never the command line; without one only loopback addresses are served. docs/mcp.md describes the catalogue."
    )]
    Mcp(McpArgs),
    /// Make the calls to the catalogue's upstream MCP servers: claim their tools' tasks under a lease and call upstream (docs/gateway.md)
    #[command(
        after_help = "Runs until interrupted. Several gateways may run on one store (PostgreSQL for several machines); `rudder mcp` with the same catalogue runs gateway workers of its own too. Upstream tokens come from the variable or file the catalogue names, never the command line."
    )]
    Gateway(GatewayArgs),
    /// Tell a person when a task starts waiting for input, fails or stalls: run a program or post to a webhook, once per event across restarts
    #[command(
        after_help = "--exec PROGRAM ARGS… runs no shell; arguments of the program that begin with a dash go after `--`. Secrets for --webhook come from the environment or a file, never the command line. docs/notify.md describes the event and the record."
    )]
    Notify(NotifyArgs),
    /// Print a shell completion script (e.g. `rudder completions bash > ~/.local/share/bash-completion/completions/rudder`)
    Completions(CompletionsArgs),
    /// Print the manual page (roff; e.g. `rudder man | man -l -`)
    Man,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args, Default)]
pub struct WatchArgs {}

/// `--store` of `demo` and `worker`, whose default is their own store.
#[derive(Debug, Args, Default)]
pub struct DemoStore {
    /// The demo's store: a path or URL like the global --store, but never $RUDDER_STORE [default: ./rudder-demo.json]
    #[arg(long, value_name = "URL", value_parser = StoreUrlParser)]
    pub store: Option<StoreUrl>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub store: DemoStore,
    /// Start over: replace the demo store with freshly seeded incidents
    #[arg(long)]
    pub fresh: bool,
    /// Run the simulated diagnoses this many times faster (0.01 to 10000)
    #[arg(long, default_value_t = 1.0, value_name = "FACTOR", value_parser = crate::demo::worker::parse_speed)]
    pub speed: f64,
    /// Run the Python diagnosis worker (python/examples/diagnosis_worker.py of this checkout, or SCRIPT) instead of the built-in one; needs the Python package (pip install ./python), run by $RUDDER_PYTHON or python3
    #[arg(long, value_name = "SCRIPT", num_args = 0..=1, default_missing_value = crate::demo::PYTHON_WORKER)]
    pub python_worker: Option<PathBuf>,
    /// Also serve the diagnosis as the MCP tool `diagnose` over Streamable HTTP at http://ADDR/mcp (e.g. 127.0.0.1:8765; loopback unless $RUDDER_MCP_TOKEN is set); where it listens is in the store's .mcp.log
    #[arg(long, value_name = "ADDR")]
    pub mcp: Option<String>,
    /// Also run `rudder notify --exec PROGRAM` on the demo store: PROGRAM gets each question an incident asks (the event as JSON on its standard input); its log is the store's .notify.log
    #[arg(long, value_name = "PROGRAM")]
    pub notify: Option<PathBuf>,
    /// Run the diagnosis as an ordinary MCP server behind rudder's gateway (docs/gateway.md) instead of as a rudder worker: the TUI's worker keys kill and restart that server; its log is the store's .worker.log, the gateway's its .gateway.log (with a store seeded without it, add --fresh)
    #[arg(long, conflicts_with = "python_worker")]
    pub gateway: bool,
    /// Only serve the diagnosis as a plain MCP server at http://ADDR/mcp, with no store and no TUI, until killed (the upstream of --gateway; docs/gateway.md)
    #[arg(long, value_name = "ADDR")]
    pub serve_upstream: Option<String>,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The tools catalogue (TOML): each tool's name, description, schemas and task kind
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (e.g. 127.0.0.1:8765)
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Read the bearer token of --http from FILE (else $RUDDER_MCP_TOKEN); its principal is `mcp-token`
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Named bearer tokens of --http: `NAME TOKEN` or `NAME sha256:HEX` a line, the file private to its owner (chmod 600)
    #[arg(long, value_name = "FILE", requires = "http")]
    pub tokens: Option<PathBuf>,
    /// Take JWT access tokens on --http, their signatures checked against this JWKS file; the principal is the token's `sub`
    #[arg(long, value_name = "FILE", requires_all = ["http", "issuer", "resource"])]
    pub jwks: Option<PathBuf>,
    /// The authorization server whose JWTs are taken (their `iss`)
    #[arg(long, value_name = "URL", requires = "jwks")]
    pub issuer: Option<String>,
    /// This server's URL as clients reach it (e.g. https://mcp.example.com/mcp): its protected resource metadata, and the audience JWTs must name
    #[arg(long, value_name = "URL", requires = "jwks")]
    pub resource: Option<String>,
    /// The audience JWTs must name, if not --resource
    #[arg(long, value_name = "AUD", requires = "jwks")]
    pub audience: Option<String>,
    /// A browser Origin allowed to call --http besides loopback ones (repeatable)
    #[arg(long, value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// How many calls to the catalogue's upstreams (docs/gateway.md) are made at once
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_calls: u32,
}

#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// The tools catalogue (TOML) whose [[upstream]] tables name the MCP servers to call
    #[arg(long, value_name = "FILE")]
    pub tools: PathBuf,
    /// How many calls are made at once
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_calls: u32,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The store whose demo incidents to work: a path or URL like the global --store [default: $RUDDER_STORE, else ./rudder-demo.json]
    #[arg(long, value_name = "URL", value_parser = StoreUrlParser)]
    pub store: Option<StoreUrl>,
    /// Run the simulated diagnoses this many times faster (0.01 to 10000)
    #[arg(long, default_value_t = 1.0, value_name = "FACTOR", value_parser = crate::demo::worker::parse_speed)]
    pub speed: f64,
    /// The worker's readable name; its leases are held as NAME#random, unique to this process [default: worker-PID]
    #[arg(long)]
    pub name: Option<String>,
}

/// `--json`, shared by every scriptable command.
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct Output {
    /// Print exactly one JSON value
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// JSON Schema of the input the task waits for (JSON or @FILE); the task starts input_required
    #[arg(long, value_name = "JSON|@FILE")]
    pub schema: Option<String>,
    /// Idempotency key: creating again with the same key returns the same task
    // Not empty: `--key "$UNSET"` would make every such create one task.
    #[arg(long, value_name = "KEY", value_parser = non_empty_key)]
    pub key: Option<String>,
    /// Short human label
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    /// What sort of work it is, e.g. diagnose: workers claim by kind (one word, at most 64 characters)
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// What the task was asked to do (JSON or @FILE)
    #[arg(long, value_name = "JSON|@FILE")]
    pub request: Option<String>,
    /// Initial status message
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// Retention after the task finishes, e.g. 7d (prune removes it then) [default: prune's --older-than]
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
    #[command(flatten)]
    pub output: Output,
}

/// `--key`: an empty key is refused, saying why (clap's own check says no
/// value was supplied, although one was).
fn non_empty_key(key: &str) -> Result<String, String> {
    if key.is_empty() {
        Err(
            "an empty key is not a key: give a non-empty idempotency key, or leave out --key"
                .into(),
        )
    } else {
        Ok(key.to_string())
    }
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only tasks with this status (repeatable)
    #[arg(long, value_name = "STATUS")]
    pub status: Vec<Status>,
    /// Only tasks of this kind (repeatable)
    #[arg(long, value_name = "KIND")]
    pub kind: Vec<String>,
    /// Order: store (creation order, the default), updated (newest first), created, title or id
    #[arg(long, value_name = "ORDER", default_value = "store")]
    pub sort: crate::store::SortKey,
    /// At most N tasks [default: every match]
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Start after the task with this full id (the last one of the previous page)
    #[arg(long, value_name = "ID")]
    pub after: Option<String>,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// Task id or unique prefix
    pub id: String,
    /// Show secret answers (writeOnly or password fields of the input) in clear; refused under --read-only and when this user cannot write the store
    #[arg(long)]
    pub reveal: bool,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct InputArgs {
    /// Task id or unique prefix
    pub id: String,
    /// One input field, typed by the task's schema (repeatable: once per
    /// field, once per item of a list or multi-select; `parent.child` for a
    /// nested field; a choice takes its value or its title)
    #[arg(
        long = "set",
        value_name = "FIELD=VALUE",
        conflicts_with = "value",
        required_unless_present = "value"
    )]
    pub set: Vec<String>,
    /// The whole input as JSON (or @FILE)
    #[arg(long, value_name = "JSON|@FILE")]
    pub value: Option<String>,
    /// Only if the task is still at this revision
    #[arg(long, value_name = "N")]
    pub revision: Option<u64>,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct RequestInputArgs {
    /// Task id or unique prefix
    pub id: String,
    /// JSON Schema of the input to ask for (JSON or @FILE)
    #[arg(long, value_name = "JSON|@FILE")]
    pub schema: String,
    /// The question, shown as the task's status message
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// Write as the worker holding the task's lease (from `rudder claim`): refused (exit 4) once another holder took the task over
    #[arg(long, value_name = "HOLDER")]
    pub holder: Option<String>,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct HeartbeatArgs {
    /// Task id or unique prefix
    pub id: String,
    /// A new status message [default: keep the current one]
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// Write as the worker holding the task's lease (from `rudder claim`): refused (exit 4) once another holder took the task over
    #[arg(long, value_name = "HOLDER")]
    pub holder: Option<String>,
    /// With --holder: renew the lease for this long, e.g. 30s, which later writes then keep [default: the length the claim was made with]
    #[arg(long, value_name = "DURATION", requires = "holder")]
    pub lease: Option<String>,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct CompleteArgs {
    /// Task id or unique prefix
    pub id: String,
    /// The result (JSON or @FILE) [default: null]
    #[arg(long, value_name = "JSON|@FILE")]
    pub result: Option<String>,
    /// Write as the worker holding the task's lease (from `rudder claim`): refused (exit 4) once another holder took the task over
    #[arg(long, value_name = "HOLDER")]
    pub holder: Option<String>,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct FailArgs {
    /// Task id or unique prefix
    pub id: String,
    /// What went wrong (stored as the error {"message": TEXT})
    #[arg(long, value_name = "TEXT")]
    pub error: String,
    /// Write as the worker holding the task's lease (from `rudder claim`): refused (exit 4) once another holder took the task over
    #[arg(long, value_name = "HOLDER")]
    pub holder: Option<String>,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Task id or unique prefix
    pub id: String,
    /// Why: the task's status message and its history note
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct ReclaimArgs {
    /// Idle time after which an unfinished task is reclaimed, e.g. 15m
    #[arg(long, value_name = "DURATION")]
    pub older_than: String,
    /// Report what would be reclaimed without changing anything
    #[arg(long)]
    pub dry_run: bool,
    /// Why: recorded on each reclaimed task's history entry (the trail)
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only this task's trail (id or unique prefix)
    pub id: Option<String>,
    /// Only entries this recent, e.g. 1h or 30m
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// Only entries by this actor (exactly as recorded)
    #[arg(long, value_name = "NAME")]
    pub actor: Option<String>,
    /// Keep printing new entries as the store changes (until interrupted)
    #[arg(long)]
    pub follow: bool,
    /// Print JSON Lines: one object per entry
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Age after which a finished task without its own ttl is removed, e.g. 7d
    #[arg(long, value_name = "DURATION")]
    pub older_than: String,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The store to copy from (a path or store URL)
    #[arg(value_name = "FROM")]
    pub from: PathBuf,
    /// The store to copy into: empty, or holding an earlier copy of FROM
    #[arg(value_name = "TO")]
    pub to: PathBuf,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// Only a task of this kind (repeat for several) [default: any kind]
    #[arg(long = "kind", value_name = "KIND")]
    pub kinds: Vec<String>,
    /// How long the lease lasts unless renewed (`heartbeat --holder`), e.g. 5m
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub lease: String,
    /// How long to wait for a claimable task, e.g. 30s [default: look once]
    #[arg(long, value_name = "DURATION")]
    pub wait: Option<String>,
    /// The lease holder to record [default: shell# and 8 random hex digits]
    #[arg(long, value_name = "HOLDER")]
    pub holder: Option<String>,
    #[command(flatten)]
    pub output: Output,
}

/// When `wait` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WaitUntil {
    /// The task is finished (completed, failed, cancelled) or waits for input.
    Settled,
    /// The task is finished.
    Terminal,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("sink").required(true).args(["exec", "webhook"])))]
pub struct NotifyArgs {
    /// The notifier's name: what it delivered is recorded in the store under it, and notifiers of one name deliver each event once between them
    #[arg(long, default_value = "notify", value_name = "NAME")]
    pub name: String,
    /// The events to tell, comma-separated: input_required, failed, stalled (a working task whose lease lapsed)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "input_required",
        value_name = "EVENTS"
    )]
    pub on: Vec<String>,
    /// Only tasks of this kind (repeatable)
    #[arg(long, value_name = "KIND")]
    pub kind: Vec<String>,
    /// How long one delivery may take (a program's run, a webhook's answer) before it is retried
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub timeout: String,
    /// The first retry's delay; each next one doubles, up to a minute
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub backoff: String,
    /// POST each event as JSON to URL (http or https)
    #[arg(long, value_name = "URL")]
    pub webhook: Option<String>,
    /// A header of the webhook's request whose value is the environment variable VAR (repeatable)
    #[arg(long, value_name = "NAME=VAR", requires = "webhook")]
    pub header_env: Vec<String>,
    /// A header of the webhook's request whose value is the content of the file PATH (repeatable)
    #[arg(long, value_name = "NAME=PATH", requires = "webhook")]
    pub header_file: Vec<String>,
    /// Authorization: Bearer with the token in the environment variable VAR
    #[arg(
        long,
        value_name = "VAR",
        requires = "webhook",
        conflicts_with = "bearer_file"
    )]
    pub bearer_env: Option<String>,
    /// Authorization: Bearer with the token in the file PATH
    #[arg(long, value_name = "PATH", requires = "webhook")]
    pub bearer_file: Option<PathBuf>,
    /// Log as JSON lines on stdout (one per delivery, retry or failure) instead of lines for people on stderr
    #[arg(long)]
    pub json: bool,
    /// Run PROGRAM with ARGS (no shell) for each event: the event as JSON on its standard input, RUDDER_TASK_ID, RUDDER_STATUS and RUDDER_TITLE in its environment
    #[arg(long, value_name = "PROGRAM", num_args = 1.., conflicts_with = "webhook")]
    pub exec: Option<Vec<std::ffi::OsString>>,
    /// More arguments of --exec's program, after `--` (for those that begin with a dash)
    #[arg(last = true, value_name = "ARGS", requires = "exec")]
    pub exec_args: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// Task id or unique prefix
    pub id: String,
    /// settled: until the task is finished or waits for input; terminal: until it is finished, waiting past input requests
    #[arg(long, value_name = "WHEN", default_value = "settled")]
    pub until: WaitUntil,
    /// Give up after this long, e.g. 90s (exit 124) [default: wait as long as it takes]
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    #[command(flatten)]
    pub output: Output,
}
