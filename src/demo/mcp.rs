//! `rudder demo --mcp ADDR`: the demo's diagnosis as an MCP tool, served
//! over Streamable HTTP beside the TUI, on the demo store.
//!
//! The catalogue is `assets/mcp-demo.toml`, embedded: its one tool,
//! `diagnose {incident, service?}`, creates a task the demo's worker
//! diagnoses like a seeded incident (its key starts with `demo:`). The face
//! runs in this process on threads of its own; it never writes to the
//! terminal, which is the TUI's: where it listens goes to its log file.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::mcp::http::BindError;
use crate::mcp::{Access, RudderMcp, catalogue};
use crate::store::Store;

/// The demo's tools catalogue.
pub const CATALOGUE: &str = include_str!("../../assets/mcp-demo.toml");

/// The MCP face of a running demo.
#[derive(Debug)]
pub struct Face {
    /// `http://HOST:PORT/mcp`.
    pub url: String,
    /// Where the face logs.
    pub log: PathBuf,
}

/// The face bound to its address, not serving yet.
pub struct Bound {
    runtime: tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
    tools: catalogue::Catalogue,
    token: Option<String>,
    store: Store,
    face: Face,
}

/// Bind `addr` (the loopback rule of `rudder mcp --http`: beyond loopback
/// only with `$RUDDER_MCP_TOKEN`) for the demo's catalogue on `store`. The
/// demo binds before it writes anything, so a refused address changes
/// nothing, and says why while the terminal is still the user's.
pub fn bind(addr: &str, store: Store, log: PathBuf) -> anyhow::Result<Bound> {
    let tools = catalogue::parse(Path::new("assets/mcp-demo.toml"), CATALOGUE)
        .context("the demo's tools catalogue")?;
    let token = crate::mcp::http::token(None).map_err(|message| BindError {
        message,
        usage: true,
    })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the MCP face")?;
    let listener = runtime.block_on(crate::mcp::http::bind(addr, token.is_some(), "--mcp"))?;
    let local = listener
        .local_addr()
        .with_context(|| format!("--mcp {addr}"))?;
    Ok(Bound {
        runtime,
        listener,
        tools,
        token,
        store,
        face: Face {
            url: format!("http://{local}/mcp"),
            log,
        },
    })
}

impl Bound {
    /// Serve until the process ends, on threads of its own.
    pub fn serve(self) -> anyhow::Result<Face> {
        let Bound {
            runtime,
            listener,
            tools,
            token,
            store,
            face,
        } = self;
        write_log(&face.log, &format!("listening on {}", face.url));
        let log = face.log.clone();
        std::thread::Builder::new()
            .name("mcp".into())
            .spawn(move || {
                runtime.block_on(async move {
                    // With $RUDDER_MCP_TOKEN its principal (`mcp-token`)
                    // owns the tasks its calls create, as with `rudder mcp`.
                    let access = if token.is_some() {
                        Access::Authorized
                    } else {
                        Access::Open
                    };
                    let server = RudderMcp::with_access(store, tools, access);
                    if let Err(e) = crate::mcp::http::serve_on(
                        listener,
                        server,
                        crate::mcp::auth::Auth::single(token.as_deref()),
                        &[],
                    )
                    .await
                    {
                        write_log(&log, &format!("stopped serving: {e}"));
                    }
                });
            })
            .context("cannot start the MCP face")?;
        Ok(face)
    }
}

/// The log beside the store: `rudder-demo.json.mcp.log`.
pub fn log_path_for(store: &crate::store::StoreUrl) -> PathBuf {
    let worker = super::supervisor::Supervisor::log_path_for(store);
    let name = worker.to_string_lossy().replace(".worker.log", ".mcp.log");
    PathBuf::from(name)
}

/// One line in the face's log (best effort: a log that cannot be written
/// must not stop the demo).
fn write_log(path: &Path, message: &str) {
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
    {
        let _ = writeln!(
            file,
            "{} rudder demo --mcp: {}",
            chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ"),
            crate::text::sanitize(message)
        );
    }
}
