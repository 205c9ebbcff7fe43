//! Reaching an upstream MCP server as a client (rmcp's): a child over stdio
//! or Streamable HTTP, with what the server may send back routed to the
//! gateway.

// Sampling and roots are deprecated (SEP-2577) but still sent by servers
// of earlier protocol versions: the gateway answers them with an error.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    CustomRequest, CustomResult, ElicitRequestParams, ElicitResult, ErrorCode, ErrorData,
    Implementation, ListRootsResult, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::{ClientHandler, RoleClient};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::catalogue::{TokenSource, Transport, Upstream};

/// A session with an upstream.
pub type Session = RunningService<RoleClient, Handler>;

/// The largest JSON answer taken from an HTTP upstream (a larger one is
/// refused by the transport; the call fails saying so).
pub const MAX_HTTP_ANSWER: usize = 16 * 1024 * 1024;

/// Why an upstream could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The child could not be started.
    #[error("cannot start {program:?}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    /// The token could not be read (the message never holds the token).
    #[error("cannot read its token: {0}")]
    Token(String),
    /// The MCP handshake failed (the server died, or does not speak MCP).
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
}

/// What the upstream sent during a session that the gateway acts on.
#[derive(Debug)]
pub enum Event {
    /// `notifications/progress`.
    Progress(ProgressNotificationParam),
    /// `elicitation/create`: answer on the sender.
    Elicit(
        ElicitRequestParams,
        oneshot::Sender<Result<ElicitResult, ErrorData>>,
    ),
    /// A request the gateway cannot serve (its method), refused with a
    /// JSON-RPC error.
    Refused(String),
    /// An `elicitation/create` whose schema is not a flat form (why),
    /// refused with a JSON-RPC error.
    Unfit(String),
    /// `notifications/tools/list_changed`.
    ToolsChanged,
}

/// The client side of a session: forwards what the upstream sends as
/// [`Event`]s (bounded: progress that finds the queue full is dropped, a
/// later one carries the news).
#[derive(Clone)]
pub struct Handler {
    events: mpsc::Sender<Event>,
    elicits: bool,
}

impl Handler {
    /// A handler sending to `events`; `elicits`: whether the client says it
    /// takes `elicitation/create` (a call's session does, a listing's not).
    pub fn new(events: mpsc::Sender<Event>, elicits: bool) -> Handler {
        Handler { events, elicits }
    }
}

/// The answer to an `elicitation/create` whose schema is not a flat form.
pub fn unfit(reason: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "rudder's gateway asks a person with a flat form only (an object of string, number, integer, boolean or enum properties); this requestedSchema is not one: {reason}"
        ),
        None,
    )
}

fn unserved(method: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "{method} is not served by rudder's gateway: a call made through it cannot ask its client for this"
        ),
        None,
    )
}

impl ClientHandler for Handler {
    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let _ = self
            .events
            .try_send(Event::Refused("sampling/createMessage".into()));
        Err(unserved("sampling/createMessage"))
    }

    async fn list_roots(
        &self,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let _ = self.events.try_send(Event::Refused("roots/list".into()));
        Err(unserved("roots/list"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if !self.elicits {
            return Err(unserved("elicitation/create outside a tool call"));
        }
        let (tx, rx) = oneshot::channel();
        if self.events.send(Event::Elicit(request, tx)).await.is_err() {
            return Err(ErrorData::internal_error("the call is over", None));
        }
        rx.await
            .unwrap_or_else(|_| Err(ErrorData::internal_error("the call is over", None)))
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _cx: RequestContext<RoleClient>,
    ) -> Result<CustomResult, ErrorData> {
        if request.method == "elicitation/create" {
            // rmcp reads a form's schema as a flat form only: this one is not.
            let schema = request
                .params
                .as_ref()
                .and_then(|p| p.get("requestedSchema"))
                .cloned()
                .unwrap_or(Value::Null);
            let reason = rudder_model::schema::mcp::mcp_fit(&schema)
                .reason
                .unwrap_or_else(|| "it is neither a form nor a URL elicitation".into());
            let _ = self.events.try_send(Event::Unfit(reason.clone()));
            return Err(unfit(&reason));
        }
        let method = rudder_model::text::clean(&request.method, 100);
        let _ = self.events.try_send(Event::Refused(method.clone()));
        Err(unserved(&method))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        let _ = self.events.try_send(Event::Progress(params));
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        let _ = self.events.try_send(Event::ToolsChanged);
    }

    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.elicits {
            // A call takes questions mid-call, and an upstream's own task
            // (the Tasks extension), which the gateway mirrors.
            ClientCapabilities::builder()
                .enable_elicitation()
                .enable_tasks()
                .build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(
            capabilities,
            Implementation::new("rudder-gateway", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// Open a session with `upstream`, answered by `handler`: the legacy
/// `initialize` handshake first (every SDK's server takes it, and over it
/// a tool may ask its client a question mid-call, which the official
/// Python SDK's `ctx.elicit` needs); a server that refuses it is asked
/// again with `server/discover` (protocol 2026-07-28, whose questions come
/// as `input_required` answers).
pub async fn connect(upstream: &Upstream, handler: Handler) -> Result<Session, ConnectError> {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::ClientLifecycleMode;
    match open(upstream, handler.clone(), ClientLifecycleMode::Initialize).await {
        Err(ConnectError::Handshake(legacy)) => {
            let modern = ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            };
            open(upstream, handler, modern).await.map_err(|e| match e {
                ConnectError::Handshake(discover) => {
                    ConnectError::Handshake(format!("{legacy} (and server/discover: {discover})"))
                }
                other => other,
            })
        }
        other => other,
    }
}

async fn open(
    upstream: &Upstream,
    handler: Handler,
    lifecycle: rmcp::service::ClientLifecycleMode,
) -> Result<Session, ConnectError> {
    match &upstream.transport {
        Transport::Stdio {
            command,
            env,
            cwd,
            withheld,
        } => {
            let program = command.first().cloned().unwrap_or_default();
            let mut cmd = tokio::process::Command::new(&program);
            // The upstream is another program: none of rudder's secrets,
            // nor the tokens of the catalogue's other upstreams.
            for name in rudder_store::WITHHELD_FROM_CHILDREN
                .iter()
                .copied()
                .chain(withheld.iter().map(String::as_str))
            {
                cmd.env_remove(name);
            }
            cmd.args(command.iter().skip(1))
                .envs(env)
                .kill_on_drop(true);
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .map_err(|source| ConnectError::Spawn {
                    program: program.clone(),
                    source,
                })?;
            handshake(handler, transport, lifecycle).await
        }
        Transport::Http {
            url,
            headers,
            token,
        } => {
            crypto_provider();
            use rmcp::transport::StreamableHttpClientTransport;
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let mut config =
                StreamableHttpClientTransportConfig::with_uri(Arc::<str>::from(url.as_str()))
                    .custom_headers(headers.clone());
            config.max_json_response_size = MAX_HTTP_ANSWER;
            // A call's stream that breaks is resumed a few times (a blip),
            // then the call is lost: a server that died or restarted has
            // forgotten it, and the gateway's own retry (idempotent tools)
            // or failure says so, where rmcp would retry forever.
            config.retry_config = Arc::new(FewRetries);
            config.reinit_on_expired_session = false;
            if let Some(source) = token {
                config = config.auth_header(read_token(source)?);
            }
            let transport = StreamableHttpClientTransport::from_config(config);
            handshake(handler, transport, lifecycle).await
        }
    }
}

/// How often a broken event stream of an HTTP upstream is resumed: 4
/// times, 250 ms doubling (about 4 s), then the call is lost.
#[derive(Debug)]
struct FewRetries;

impl rmcp::transport::common::client_side_sse::SseRetryPolicy for FewRetries {
    fn retry(&self, current_times: usize) -> Option<std::time::Duration> {
        (current_times < 4)
            .then(|| std::time::Duration::from_millis(250u64 << current_times.min(4)))
    }
}

/// The MCP handshake `lifecycle` says.
async fn handshake<T, E, A>(
    handler: Handler,
    transport: T,
    lifecycle: rmcp::service::ClientLifecycleMode,
) -> Result<Session, ConnectError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    use rmcp::service::ClientServiceExt;
    handler
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .map_err(|e| ConnectError::Handshake(scrubbed(&e)))
}

/// reqwest panics making a client when rustls has no crypto provider (a
/// build whose features leave the choice to the program): ring's, unless
/// the program installed one. Once per process, not per session.
fn crypto_provider() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The text of an upstream's error as rudder shows it (task history,
/// stderr): every URL in it without its user info, query and fragment,
/// which may carry a password or a key (reqwest names the URL it failed
/// to reach).
pub fn scrubbed(error: &dyn std::fmt::Display) -> String {
    scrub_urls(&error.to_string())
}

/// `text` with every `http://` or `https://` URL in it cut to its scheme,
/// host, port and path.
pub fn scrub_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let found = ["http://", "https://"]
            .iter()
            .filter_map(|scheme| {
                rest.to_ascii_lowercase()
                    .find(scheme)
                    .map(|at| (at, scheme.len()))
            })
            .min();
        let Some((at, scheme)) = found else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..at + scheme]);
        let url = &rest[at + scheme..];
        let end = url
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '<' | '>' | '`'))
            .unwrap_or(url.len());
        let (whole, after) = url.split_at(end);
        // The authority ends at the first '/', '?' or '#'.
        let authority_end = whole.find(['/', '?', '#']).unwrap_or(whole.len());
        let (authority, path) = whole.split_at(authority_end);
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let path = path.split(['?', '#']).next().unwrap_or_default();
        out.push_str(host);
        out.push_str(path);
        rest = after;
    }
}

/// The bearer token, read when a session is opened (so a rotated file is
/// taken at the next one). Errors name where it was looked for, never it.
fn read_token(source: &TokenSource) -> Result<String, ConnectError> {
    let token = match source {
        TokenSource::Env(var) => std::env::var(var)
            .map_err(|_| ConnectError::Token(format!("${var} is not set (or not UTF-8)")))?,
        TokenSource::File(path) => std::fs::read_to_string(path)
            .map_err(|e| ConnectError::Token(format!("{}: {}", path.display(), e.kind())))?,
    };
    let token = token.trim().to_string();
    if token.is_empty() || token.chars().any(char::is_control) {
        return Err(ConnectError::Token(
            "it is empty or holds a control character".into(),
        ));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::scrub_urls;

    #[test]
    fn urls_lose_their_user_info_query_and_fragment() {
        assert_eq!(
            scrub_urls(
                "error sending request for url (http://u:pw@127.0.0.1:9/mcp?key=k#f): refused"
            ),
            "error sending request for url (http://127.0.0.1:9/mcp): refused"
        );
        assert_eq!(
            scrub_urls("HTTPS://tok@h.example/a/b?x=1 and https://h2/?y"),
            "HTTPS://h.example/a/b and https://h2/"
        );
        assert_eq!(scrub_urls("no url here"), "no url here");
    }
}
