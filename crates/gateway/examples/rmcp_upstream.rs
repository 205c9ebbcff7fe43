//! An MCP server on rmcp's own server API, knowing nothing of rudder: an
//! upstream to put behind rudder's gateway (`cargo run -p rudder-gateway
//! --example rmcp_upstream` serves it over stdio). The gateway's tests
//! also serve it over Streamable HTTP, in process, with [`router`].
//!
//! Its tools: `echo {text}` (a short call), `flood {n}` (`n` progress
//! notifications, one of them going backwards, then a result), `big
//! {bytes}` (a text result that long), `sleep {ms}` (a long call), `ask`
//! (asks its client a question with `elicitation/create`, then says the
//! answer; [`ASKED_AT`] keeps when it last asked, for the bench).

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};

/// The server.
#[derive(Clone, Default)]
pub struct RmcpUpstream;

/// When `ask` last sent its `elicitation/create` (the bench measures from
/// then until the rudder task is seen waiting for input).
pub static ASKED_AT: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

fn schema(v: Value) -> Arc<JsonObject> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "echo",
            "Say the text back",
            schema(
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
        ),
        Tool::new(
            "flood",
            "Report progress many times, once backwards, then answer",
            schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}})),
        ),
        Tool::new(
            "sleep",
            "Answer after the given milliseconds",
            schema(json!({"type": "object", "properties": {"ms": {"type": "integer"}}})),
        ),
        Tool::new(
            "ask",
            "Ask the client whether to go on, then say the answer",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "big",
            "Answer with a text of the given length",
            schema(json!({"type": "object", "properties": {"bytes": {"type": "integer"}}})),
        ),
    ]
}

impl ServerHandler for RmcpUpstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("rmcp-upstream", "1.0.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let number = |k: &str| args.get(k).and_then(Value::as_u64).unwrap_or(0);
        let text = match request.name.as_ref() {
            "echo" => args
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            "flood" => {
                let n = number("n").min(100_000);
                if let Some(token) = cx.meta.get_progress_token() {
                    for i in 1..=n {
                        // Once, the progress goes backwards.
                        let at = if i == n / 2 { 1 } else { i };
                        let p = ProgressNotificationParam::new(token.clone(), at as f64)
                            .with_total(n as f64)
                            .with_message(format!("step {at} of {n}"));
                        let _ = cx.peer.notify_progress(p).await;
                    }
                }
                format!("flooded {n}")
            }
            "sleep" => {
                let ms = number("ms").min(600_000);
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                format!("slept {ms} ms")
            }
            "big" => "x".repeat(number("bytes").min(256 * 1024 * 1024) as usize),
            "ask" => {
                let form = serde_json::from_value(json!({
                    "type": "object",
                    "properties": {"go": {"type": "boolean"}},
                    "required": ["go"],
                }))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                *ASKED_AT.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(std::time::Instant::now());
                let params = rmcp::model::ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: "Go on?".into(),
                    requested_schema: form,
                };
                let asked = cx
                    .peer
                    .send_request(rmcp::model::ServerRequest::ElicitRequest(
                        rmcp::model::ElicitRequest::new(params),
                    ))
                    .await;
                match asked {
                    Ok(rmcp::model::ClientResult::ElicitResult(answer)) => {
                        format!("{:?} {}", answer.action, json!(answer.content))
                    }
                    other => {
                        return Err(ErrorData::internal_error(
                            format!("no answer: {other:?}"),
                            None,
                        ));
                    }
                }
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other}"),
                    None,
                ));
            }
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// The server over Streamable HTTP at `/mcp`.
pub fn router() -> axum::Router {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let service = StreamableHttpService::new(
        || Ok(RmcpUpstream),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    axum::Router::new().nest_service("/mcp", service)
}

#[allow(dead_code)]
#[tokio::main]
async fn main() {
    use rmcp::ServiceExt;
    match RmcpUpstream.serve(rmcp::transport::stdio()).await {
        Ok(running) => {
            let _ = running.waiting().await;
        }
        Err(e) => eprintln!("rmcp_upstream: {e}"),
    }
}
