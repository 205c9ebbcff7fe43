//! The Streamable HTTP face: `http://ADDR/mcp`, and its guards.
//!
//! - Loopback only, unless authorization is configured (`$RUDDER_MCP_TOKEN`
//!   or `--token-file`, a tokens file, JWTs: never a token as an argument,
//!   argv is visible to every user); then every request must carry
//!   `Authorization: Bearer TOKEN`, which names its principal
//!   ([`crate::auth`]).
//! - A request from a browser page of a foreign `Origin` is refused with
//!   403 (DNS rebinding); loopback origins and `--allow-origin` ones pass.
//! - `Mcp-Method` / `Mcp-Name` must match the body (400, `-32020`); rmcp
//!   checks them.
//! - Bodies over [`MAX_BODY`] get 413; more than [`MAX_CONCURRENT`]
//!   requests at once get 503, each with a JSON-RPC error, and other
//!   clients are not disturbed. A request that waits inline for its task
//!   (a client without the tasks extension) gives its slot back while it
//!   waits: those waits have a budget of their own
//!   ([`crate::server::MAX_INLINE_WAITS`]), so `tasks/*` are always served.
//! - A body that is not JSON gets 400 with `-32700` (JSON that is not a
//!   JSON-RPC message: 400, `-32600`).
//! - Legacy (2025-11-25) sessions are bounded: see [`crate::sessions`].

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use axum::middleware::{self, Next};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::Semaphore;

use crate::auth::{Auth, Refusal};
use crate::console::{EXIT_USAGE, say};
use crate::server::RudderMcp;

pub use crate::guard::MAX_BODY;
/// How many requests are handled at once; more are refused (503).
pub const MAX_CONCURRENT: usize = 64;

/// The bearer token: from `file` if given (its first line), else
/// `$RUDDER_MCP_TOKEN`; `None` when neither is set. A token file that
/// group or others may read is refused, as `ssh` refuses such a key.
pub fn token(file: Option<&Path>) -> Result<Option<String>, String> {
    let raw = match file {
        Some(path) => {
            crate::auth::private(path, "the token file")?;
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?
        }
        None => match std::env::var("RUDDER_MCP_TOKEN") {
            Ok(t) => t,
            Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(_) => return Err("$RUDDER_MCP_TOKEN is not UTF-8".into()),
        },
    };
    let token = raw.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        return Err(match file {
            Some(path) => format!("the token file {} is empty", path.display()),
            None => "$RUDDER_MCP_TOKEN is empty".into(),
        });
    }
    if token.len() < 16 {
        return Err("the bearer token is shorter than 16 characters".into());
    }
    Ok(Some(token))
}

/// Why an address cannot be served: the message, and whether it is a usage
/// error (exit 2: the address or the missing token) or the system's (1).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct BindError {
    pub message: String,
    pub usage: bool,
}

/// Bind `addr` (named `flag` in messages: `--http`, `--mcp`) under the
/// loopback rule: an address beyond this machine needs a bearer token.
pub async fn bind(
    addr: &str,
    has_token: bool,
    flag: &str,
) -> Result<tokio::net::TcpListener, BindError> {
    let fail = |message: String, usage: bool| BindError { message, usage };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| {
            fail(
                format!("{flag} {addr}: not an address (HOST:PORT): {e}"),
                true,
            )
        })?
        .collect();
    if !has_token && let Some(open) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        return Err(fail(
            format!(
                "{flag} {addr}: {open} is not a loopback address; serving beyond this machine needs a bearer token ($RUDDER_MCP_TOKEN or --token-file)"
            ),
            true,
        ));
    }
    tokio::net::TcpListener::bind(&addrs[..])
        .await
        .map_err(|e| fail(format!("{flag} {addr}: cannot listen: {e}"), false))
}

/// Serve until the process is stopped; the exit code if it cannot.
pub async fn serve(server: RudderMcp, addr: &str, auth: Auth, allow_origins: &[String]) -> i32 {
    let listener = match bind(addr, auth.is_set(), "--http").await {
        Ok(l) => l,
        Err(e) => {
            say(&e.message);
            return if e.usage { EXIT_USAGE } else { 1 };
        }
    };
    let local = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            say(&format!("--http {addr}: {e}"));
            return 1;
        }
    };
    say(&format!("listening on http://{local}/mcp"));
    match serve_on(listener, server, auth, allow_origins).await {
        Ok(()) => 0,
        Err(e) => {
            say(&format!("http: {e}"));
            1
        }
    }
}

/// Serve on a bound listener until the process is stopped.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    server: RudderMcp,
    auth: Auth,
    allow_origins: &[String],
) -> std::io::Result<()> {
    // Answers go out in several writes (headers, event-stream frames):
    // without TCP_NODELAY each waits for the client's delayed ACK (~40 ms).
    use axum::serve::ListenerExt as _;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router(server, auth, allow_origins)).await
}

/// The HTTP routes: `/mcp` behind the guards, and with JWTs the protected
/// resource metadata (RFC 9728), which a client reads before it has a
/// token, so it stands outside the guards.
pub fn router(server: RudderMcp, auth: Auth, allow_origins: &[String]) -> axum::Router {
    let mut origins: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .into_iter()
        .map(String::from)
        .collect();
    origins.extend(allow_origins.iter().cloned());
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_BODY);
    if auth.is_set() {
        // With a token the server may face a network: the Host header is
        // whatever name clients use, and the token is the guard.
        config = config.disable_allowed_hosts();
    }
    let sessions = Arc::new(crate::sessions::Bounded::new(crate::sessions::MAX_SESSIONS));
    crate::sessions::sweep_every(Arc::downgrade(&sessions), crate::sessions::IDLE / 5);
    let service = StreamableHttpService::new(move || Ok(server.clone()), sessions, config);
    let metadata = auth
        .jwt
        .as_ref()
        .map(|jwt| jwt.metadata(&auth.issuer).to_string());
    let paths = auth.metadata_paths();
    let challenge = challenge_base(&auth);
    let guard = Arc::new(Guard {
        auth: auth.is_set().then_some(auth),
        challenge,
        slots: Arc::new(Semaphore::new(MAX_CONCURRENT)),
    });
    let mut router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn(move |req, next| {
            let guard = Arc::clone(&guard);
            async move { guard.check(req, next).await }
        }));
    if let Some(metadata) = metadata {
        for path in paths {
            let body = metadata.clone();
            router = router.route(
                &path,
                axum::routing::get(move || async move {
                    ([(header::CONTENT_TYPE, "application/json")], body)
                }),
            );
        }
    }
    router
}

/// `WWW-Authenticate` of a 401 before its error: `Bearer`, and with JWTs
/// where the protected resource metadata is (RFC 9728 section 5.1), so a
/// client finds the authorization server.
fn challenge_base(auth: &Auth) -> String {
    match auth.metadata_url() {
        Some(url) => format!("Bearer resource_metadata=\"{url}\""),
        None => "Bearer".into(),
    }
}

struct Guard {
    /// `None`: no authorization configured (loopback only, as before).
    auth: Option<Auth>,
    challenge: String,
    slots: Arc<Semaphore>,
}

impl Guard {
    /// A 401 for `refusal`: the reason (never the token) in the body and,
    /// for a token that was given, as RFC 6750's `invalid_token`.
    fn unauthorized(&self, refusal: Refusal) -> Response<Body> {
        let (message, challenge) = match refusal {
            Refusal::Missing => (
                "a valid bearer token is required".to_string(),
                self.challenge.clone(),
            ),
            Refusal::Invalid(why) => {
                let sep = if self.challenge == "Bearer" {
                    " "
                } else {
                    ", "
                };
                (
                    format!("the bearer token was refused: {why}"),
                    format!(
                        "{}{sep}error=\"invalid_token\", error_description=\"{why}\"",
                        self.challenge
                    ),
                )
            }
        };
        let mut r = error(StatusCode::UNAUTHORIZED, -32001, &message);
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        r
    }

    async fn check(&self, req: Request<Body>, next: Next) -> Response<Body> {
        let principal = match &self.auth {
            Some(auth) => {
                let given = req
                    .headers()
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok());
                match auth.principal(given) {
                    Ok(p) => Some(p),
                    Err(refusal) => return self.unauthorized(refusal),
                }
            }
            None => None,
        };
        let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                "too many requests at once; try again",
            );
        };
        let (mut req, listen) = match crate::listen::note_http(req, MAX_BODY).await {
            Ok(r) => r,
            Err(refused) => return refused,
        };
        // The handler may give the slot back (an inline wait); else it is
        // held until the answer's head is out.
        let slot = Slot::new(slot);
        req.extensions_mut().insert(slot.clone());
        // The server reads who is calling from here (rmcp hands the
        // request's parts to the handler).
        if let Some(p) = principal {
            req.extensions_mut().insert(p);
        }
        let response = next.run(req).await;
        slot.release();
        let response = match listen {
            Some(ids) if response.status().is_success() => crate::listen::patch_sse(response, ids),
            _ => response,
        };
        jsonrpc_error_body(response).await
    }
}

use crate::guard::Slot;

/// A refusal rmcp answers in plain text (a body that does not parse, too
/// large, a foreign Origin) as a JSON-RPC error, with the same status.
async fn jsonrpc_error_body(response: Response<Body>) -> Response<Body> {
    let status = response.status();
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/event-stream"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return response;
    }
    let text = match axum::body::to_bytes(response.into_body(), 4096).await {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(_) => String::new(),
    };
    let message = match rudder_model::text::clean(&text, 300) {
        m if m.is_empty() => status.canonical_reason().unwrap_or("refused").to_string(),
        m => m,
    };
    // rmcp answers a body it cannot take as a JSON-RPC message with 415;
    // the transport spec asks for 400: -32700 for text that is not JSON,
    // -32600 for JSON that is not a message.
    if status == StatusCode::UNSUPPORTED_MEDIA_TYPE && message.starts_with(UNPARSED) {
        let detail = &message[UNPARSED.len()..];
        let code = if not_a_message(detail) {
            -32600
        } else {
            -32700
        };
        let what = if code == -32700 {
            "the request body is not JSON"
        } else {
            "the request body is not a JSON-RPC message"
        };
        return error(
            StatusCode::BAD_REQUEST,
            code,
            &format!("{what}: {}", detail.trim()),
        );
    }
    let code = match status {
        StatusCode::BAD_REQUEST if message.to_lowercase().contains("json") => -32700,
        StatusCode::BAD_REQUEST | StatusCode::PAYLOAD_TOO_LARGE => -32600,
        _ => -32000,
    };
    error(status, code, &message)
}

/// How rmcp 3.11 begins its answer to a body it cannot deserialize.
const UNPARSED: &str = "fail to deserialize request body";

/// Whether serde_json's message is about the shape of valid JSON (not a
/// JSON-RPC message) rather than its syntax.
fn not_a_message(detail: &str) -> bool {
    [
        "did not match any variant",
        "missing field",
        "invalid type",
        "unknown variant",
        "invalid value",
        "unknown field",
        "unrecognized JSON-RPC message",
    ]
    .iter()
    .any(|m| detail.contains(m))
}

use crate::guard::error;
