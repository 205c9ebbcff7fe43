//! `rudder mcp`: the store served to MCP clients with the Tasks extension
//! (`io.modelcontextprotocol/tasks`, protocol 2026-07-28), over stdio or
//! Streamable HTTP.
//!
//! - [`catalogue`]: the tools file (which tools, which task kind each);
//! - [`wire`]: a task as the extension shows it;
//! - [`server`]: rmcp's `ServerHandler` over the store;
//! - [`listen`]: `subscriptions/listen` for task ids, fed by the change feed;
//! - [`http`]: the HTTP face and its guards (token, Origin, limits).
//! - [`auth`]: who calls over HTTP (named tokens, JWT access tokens).
//! - [`sessions`]: legacy (2025-11-25) HTTP sessions, bounded.
//!
//! It depends on `rudder-store` (the store, its feed, the worker API) and
//! `rudder-model` only, never on the binary: `rudder mcp` calls [`run`].

pub mod auth;
pub mod catalogue;
mod console;
mod guard;
pub mod http;
pub mod listen;
mod requested;
pub mod server;
pub mod sessions;
pub mod wire;

/// Signing keys for the JWT tests (shared with the bench).
#[cfg(test)]
#[path = "../tests/fixtures/keys.rs"]
mod test_keys;

use std::path::PathBuf;

pub use catalogue::{Catalogue, CatalogueError};
pub use server::{Access, RudderMcp};

use rudder_store::Store;

pub use console::EXIT_USAGE;
pub(crate) use console::say;

/// What `rudder mcp` was asked to do (besides the store it serves).
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// The tools catalogue; none: no tools (tasks/* still answer).
    pub tools: Option<PathBuf>,
    /// Serve Streamable HTTP at `http://ADDR/mcp` instead of stdio.
    pub http: Option<String>,
    /// A file holding the bearer token (else `$RUDDER_MCP_TOKEN`); its
    /// principal is [`auth::SINGLE_TOKEN_NAME`].
    pub token_file: Option<PathBuf>,
    /// A tokens file: `NAME TOKEN` or `NAME sha256:HEX` a line.
    pub tokens: Option<PathBuf>,
    /// JWT access tokens, checked against a JWKS file.
    pub jwt: Option<auth::JwtOptions>,
    /// Origins a browser page may call from, besides loopback ones.
    pub allow_origins: Vec<String>,
    /// How many calls to the catalogue's upstreams the gateway workers
    /// inside make at once (docs/gateway.md).
    pub gateway_max_calls: usize,
}

/// Serve `store` (opened once by the caller) to MCP clients until stdin
/// closes (stdio) or forever (HTTP); the exit code.
pub fn run(store: Store, options: McpOptions) -> i32 {
    let catalogue = match &options.tools {
        Some(path) => match catalogue::load(path) {
            Ok(c) => c,
            Err(e) => {
                say(&e.to_string());
                return EXIT_USAGE;
            }
        },
        None => Catalogue::default(),
    };
    let auth = match authorization(&options) {
        Ok(a) => a,
        Err(e) => {
            say(&e);
            return EXIT_USAGE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            say(&format!("cannot start: {e}"));
            return 1;
        }
    };
    // The gateway workers' store: the same store, their own handle.
    let gateway_store = if catalogue.upstreams.is_empty() {
        None
    } else {
        match rudder_store::reopen(&store) {
            Ok(s) => Some(s),
            Err(e) => {
                say(&e.to_string());
                return EXIT_USAGE;
            }
        }
    };
    let code = runtime.block_on(async move {
        // Stopped when the MCP face ends or on SIGINT/SIGTERM: the gateway
        // workers then give their calls' leases back before the process
        // exits, so another process takes the calls over at once.
        let stopping = tokio_util::sync::CancellationToken::new();
        let gateway = gateway_store.map(|gateway_store| {
            let upstreams = std::sync::Arc::new(catalogue.upstreams.clone());
            let told: rudder_gateway::Say = std::sync::Arc::new(|s: &str| say(s));
            let directory = rudder_gateway::Directory::start(
                std::sync::Arc::clone(&upstreams),
                std::sync::Arc::clone(&told),
            );
            let listed = directory.clone();
            let handoff = rudder_gateway::Handoff::default();
            let options = rudder_gateway::GatewayOptions {
                max_calls: options.gateway_max_calls,
                reserved_kinds: catalogue.tools.iter().map(|t| t.kind.clone()).collect(),
                handoff: handoff.clone(),
                ..rudder_gateway::GatewayOptions::default()
            };
            let stop = stopping.clone();
            let running = tokio::spawn(async move {
                if let Err(e) =
                    rudder_gateway::run(&gateway_store, upstreams, listed, options, told, stop)
                        .await
                {
                    say(&e.to_string());
                }
            });
            ((directory, handoff), running)
        });
        let (gateway, running) = gateway.unzip();
        let serving = async {
            match &options.http {
                Some(addr) => {
                    let access = if auth.is_set() {
                        Access::Authorized
                    } else {
                        Access::Open
                    };
                    let server = RudderMcp::serving(store, catalogue, access, gateway);
                    http::serve(server, addr, auth, &options.allow_origins).await
                }
                None => {
                    let server =
                        RudderMcp::serving(store, catalogue, Access::Local(local_user()), gateway);
                    stdio(server).await
                }
            }
        };
        match running {
            // Without upstreams the signals keep their default: the
            // process ends at once, as it always did.
            None => serving.await,
            Some(running) => {
                let code = tokio::select! {
                    biased;
                    () = rudder_gateway::interrupted() => 0,
                    code = serving => code,
                };
                stopping.cancel();
                let _ = running.await;
                code
            }
        }
    });
    // Not waiting for the blocking thread that reads stdin, which a signal
    // leaves blocked in its read: the process would never exit.
    runtime.shutdown_background();
    code
}

/// How HTTP requests are authorized: the single token, the tokens file
/// and the JWKS, each checked before anything is served.
fn authorization(options: &McpOptions) -> Result<auth::Auth, String> {
    let mut tokens = match &options.tokens {
        Some(path) => auth::load_tokens(path)?,
        None => auth::Tokens::default(),
    };
    if let Some(single) = http::token(options.token_file.as_deref())? {
        tokens.add_single(&single)?;
    }
    let jwt = options.jwt.as_ref().map(auth::Jwt::load).transpose()?;
    Ok(auth::Auth {
        tokens,
        issuer: options
            .jwt
            .as_ref()
            .map(|j| j.issuer.clone())
            .unwrap_or_default(),
        jwt,
    })
}

/// The local user over stdio, `USER@HOST`: whoever runs `rudder mcp` on
/// this machine may open the store anyway.
fn local_user() -> String {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    rudder_model::task::Author::lossy(&format!("{user}@{host}"), rudder_model::task::Face::Mcp)
        .name()
        .to_string()
}

async fn stdio(server: RudderMcp) -> i32 {
    use rmcp::ServiceExt;
    let transport = listen::stdio(server.requested().clone());
    match server.serve(transport).await {
        Ok(running) => match running.waiting().await {
            Ok(_) => 0,
            Err(e) => {
                say(&format!("stdio: {e}"));
                1
            }
        },
        Err(e) => {
            say(&format!("stdio: {e}"));
            1
        }
    }
}
