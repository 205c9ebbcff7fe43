//! `rudder demo --serve-upstream ADDR` (hidden): the demo's diagnosis as
//! an ordinary MCP server over Streamable HTTP at `http://ADDR/mcp`, which
//! knows nothing of rudder's store: the upstream that `rudder demo
//! --gateway` and docs/gateway.md's story put behind rudder, unchanged.
//!
//! Its one tool, `diagnose {incident, service?}`, runs the demo's steps
//! (about a minute at speed 1), reporting each as `notifications/progress`;
//! when the incident names no service (or one the trace store does not
//! know) it asks its client with `elicitation/create`; it answers the
//! conclusion as structured content. Everything lives in its memory: a
//! killed server forgets the call, as any MCP server would.

use std::sync::Arc;

use anyhow::Context;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, ContentBlock,
    ElicitRequest, ElicitRequestParams, ElicitationAction, ErrorData, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, ServerRequest, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::diagnosis::{self, Plan, STEPS, Stop, TOTAL_STEPS};
use super::scenarios::service_schema;
use crate::task::{Status, Task};

/// The server, running the steps `speed` times faster than at speed 1.
#[derive(Clone)]
pub struct DiagnosisServer {
    speed: f64,
}

fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "incident": {"type": "string", "description": "The incident id, e.g. INC-1043"},
            "service": {"type": "string", "description": "The service to follow, when known"},
        },
        "required": ["incident"],
    });
    let schema: JsonObject = schema.as_object().cloned().unwrap_or_default();
    Tool::new(
        "diagnose",
        "A cross-system root-cause diagnosis of an incident: reports progress, asks for the service when the incident names none",
        Arc::new(schema),
    )
}

fn failed(message: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(message)]).into()
}

impl ServerHandler for DiagnosisServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("demo-diagnosis", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![tool()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == "diagnose").then(tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "diagnose" {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {}", request.name),
                None,
            ));
        }
        // The demo's plan reads a task's request; this server has no task,
        // only the call's arguments.
        let mut task = Task::new("call".to_string(), Status::Working);
        task.request = Some(Value::Object(request.arguments.unwrap_or_default()));
        let mut plan = Plan::of(&task);
        let token = cx.meta.get_progress_token();
        let tell = |step: u64, message: String| {
            let (peer, token) = (cx.peer.clone(), token.clone());
            async move {
                if let Some(token) = token {
                    let p = ProgressNotificationParam::new(token, step as f64)
                        .with_total(TOTAL_STEPS as f64)
                        .with_message(message);
                    let _ = peer.notify_progress(p).await;
                }
            }
        };
        for step in 0..STEPS.len() {
            loop {
                match diagnosis::before_step(step, &plan) {
                    Ok(()) => break,
                    Err(Stop::Fail(m)) => return Ok(failed(m)),
                    Err(Stop::AskForService(question)) => {
                        let schema = serde_json::from_value(service_schema())
                            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                        let params = ElicitRequestParams::FormElicitationParams {
                            meta: None,
                            message: question,
                            requested_schema: schema,
                        };
                        let asked = cx
                            .peer
                            .send_request(ServerRequest::ElicitRequest(ElicitRequest::new(params)))
                            .await;
                        let asked = match asked {
                            Ok(ClientResult::ElicitResult(r)) => r,
                            Ok(_) => {
                                return Err(ErrorData::internal_error(
                                    "the client answered the question with something else",
                                    None,
                                ));
                            }
                            Err(e) => {
                                return Err(ErrorData::internal_error(
                                    format!("cannot ask: {e}"),
                                    None,
                                ));
                            }
                        };
                        let content = match (asked.action, asked.content) {
                            (ElicitationAction::Accept, Some(c)) => c,
                            (action, _) => {
                                return Ok(failed(format!(
                                    "{}: nothing diagnosed, the question was answered {action:?}",
                                    plan.label()
                                )));
                            }
                        };
                        // The answer as the demo worker reads a person's.
                        task.input_value = Some(content);
                        plan = Plan::of(&task);
                    }
                }
            }
            tell(step as u64, diagnosis::step_message(step, &plan, 0.0)).await;
            tokio::time::sleep(diagnosis::step_duration(step, self.speed)).await;
            if let Err(Stop::Fail(m) | Stop::AskForService(m)) = diagnosis::after_step(step, &plan)
            {
                return Ok(failed(m));
            }
            tell(step as u64 + 1, diagnosis::step_done_message(step, &plan)).await;
        }
        match diagnosis::conclusion(&plan, "demo-diagnosis", 0) {
            Ok(result) => {
                let summary = result["summary"]
                    .as_str()
                    .unwrap_or("diagnosed")
                    .to_string();
                let mut r = CallToolResult::success(vec![ContentBlock::text(summary)]);
                r.structured_content = Some(result);
                Ok(r.into())
            }
            Err(Stop::Fail(m) | Stop::AskForService(m)) => Ok(failed(m)),
        }
    }
}

/// Serve the diagnosis at `http://ADDR/mcp` until killed; `rudder demo:
/// upstream listening on URL` on stderr says where (port 0 picks one).
pub fn serve(addr: &str, speed: f64) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    super::worker::check_speed(speed).map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the upstream")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("--serve-upstream {addr}"))?;
        let local = listener
            .local_addr()
            .with_context(|| format!("--serve-upstream {addr}"))?;
        let server = DiagnosisServer { speed };
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        crate::cli::output::note(&format!(
            "rudder demo: upstream listening on http://{local}/mcp"
        ));
        axum::serve(listener, router)
            .await
            .context("the upstream stopped")
    })
}
