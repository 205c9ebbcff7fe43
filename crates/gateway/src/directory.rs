//! The tools the upstreams serve, as their `tools/list` says: one session
//! per upstream kept open to list them, listed again on
//! `notifications/tools/list_changed` (which a 2026-07-28 upstream sends on
//! a `subscriptions/listen` the session opens), and reopened (with
//! backoff) while the upstream does not answer.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::service::Subscription;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::Say;
use crate::catalogue::{Selection, ToolSettings, Upstream, valid_name};
use crate::upstream::{self, Event, Handler};

/// One tool of an upstream, as rudder serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamTool {
    /// The upstream that serves it.
    pub upstream: String,
    /// Its name (the upstream's).
    pub name: String,
    /// Its description (the upstream's).
    pub description: String,
    /// Its input schema (the upstream's).
    pub input_schema: Value,
    /// Its output schema, if the upstream gives one.
    pub output_schema: Option<Value>,
    /// The task kind its calls become.
    pub kind: String,
    /// The catalogue's settings for it.
    pub settings: ToolSettings,
}

/// Every upstream's tools, kept current. Cheap to clone.
#[derive(Clone)]
pub struct Directory {
    tools: watch::Receiver<Arc<Vec<UpstreamTool>>>,
}

/// How long the lister waits before trying an upstream that did not
/// answer again, at first and at most.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MOST: Duration = Duration::from_secs(30);

impl Directory {
    /// Start listing the tools of `upstreams` (a session each, kept open);
    /// `say` tells the operator when one does not answer and when it does.
    /// Must be called inside tokio.
    pub fn start(upstreams: Arc<Vec<Upstream>>, say: Say) -> Directory {
        let (tx, tools) = watch::channel(Arc::new(Vec::new()));
        let lists: Arc<std::sync::Mutex<BTreeMap<usize, Vec<UpstreamTool>>>> = Arc::default();
        let tx = Arc::new(tx);
        for index in 0..upstreams.len() {
            let (upstreams, say, lists, tx) = (
                Arc::clone(&upstreams),
                Arc::clone(&say),
                Arc::clone(&lists),
                Arc::clone(&tx),
            );
            tokio::spawn(async move {
                let publish = |listed: Vec<UpstreamTool>| {
                    let mut all = lists.lock().unwrap_or_else(|p| p.into_inner());
                    all.insert(index, listed);
                    let mut merged: Vec<UpstreamTool> = Vec::new();
                    for tool in all.values().flatten() {
                        if let Some(first) = merged.iter().find(|t| t.name == tool.name) {
                            say(&format!(
                                "gateway: tool {:?} of upstream {:?} is not served: upstream {:?} serves a tool of that name",
                                tool.name, tool.upstream, first.upstream
                            ));
                            continue;
                        }
                        merged.push(tool.clone());
                    }
                    tx.send_replace(Arc::new(merged));
                };
                follow(&upstreams[index], &say, &publish).await;
            });
        }
        Directory { tools }
    }

    /// The tools as last listed.
    pub fn tools(&self) -> Arc<Vec<UpstreamTool>> {
        Arc::clone(&self.tools.borrow())
    }

    /// A receiver that wakes when the tools change.
    pub fn watch(&self) -> watch::Receiver<Arc<Vec<UpstreamTool>>> {
        self.tools.clone()
    }
}

/// Keep `up`'s tools listed, forever.
async fn follow(up: &Upstream, say: &Say, publish: &(dyn Fn(Vec<UpstreamTool>) + Send + Sync)) {
    let mut wait = RETRY_FIRST;
    let mut told_down = false;
    loop {
        let (events, mut rx) = mpsc::channel(16);
        let session = match upstream::connect(up, Handler::new(events, false)).await {
            Ok(s) => s,
            Err(e) => {
                if !told_down {
                    say(&format!(
                        "gateway: upstream {:?} does not answer ({e}); its tools are listed once it does",
                        up.name
                    ));
                    told_down = true;
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RETRY_MOST);
                continue;
            }
        };
        // A 2026-07-28 upstream tells of changes only on a listen: opened
        // before the first listing, so that a change after it is heard.
        let mut listen = tools_listen(&session).await;
        loop {
            match session.peer().list_all_tools().await {
                Ok(tools) => {
                    if told_down {
                        say(&format!("gateway: upstream {:?} answers now", up.name));
                        told_down = false;
                    }
                    wait = RETRY_FIRST;
                    publish(served(up, tools, say));
                }
                Err(e) => {
                    if !told_down {
                        say(&format!(
                            "gateway: upstream {:?} did not list its tools ({}); listing again later",
                            up.name,
                            upstream::scrubbed(&e)
                        ));
                        told_down = true;
                    }
                    break;
                }
            }
            // Listed again when it says its tools changed; reopened when it
            // goes away.
            let closed = loop {
                tokio::select! {
                    event = rx.recv() => match event {
                        Some(Event::ToolsChanged) => break false,
                        Some(_) => {}
                        None => break true,
                    },
                    told = next_on(&mut listen) => match told {
                        Ok(Some(ServerNotification::ToolListChangedNotification(_))) => break false,
                        Ok(Some(_)) => {}
                        // The listen ended (the upstream closed it, or the
                        // session is going): changes would go unheard, so
                        // the session is opened again.
                        Ok(None) | Err(_) => break true,
                    },
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {
                        if session.is_closed() {
                            break true;
                        }
                    }
                }
            };
            if closed {
                if !told_down {
                    say(&format!(
                        "gateway: upstream {:?} closed its session; reconnecting",
                        up.name
                    ));
                    told_down = true;
                }
                break;
            }
        }
        drop(session);
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(RETRY_MOST);
    }
}

/// A `subscriptions/listen` for tool list changes, on a session of
/// protocol 2026-07-28 with an upstream that says its tools may change
/// (`tools.listChanged`); `None` otherwise (an `initialize` session is told
/// without one) or when the upstream does not acknowledge it (its tools
/// are then listed once per session, as it answered).
async fn tools_listen(session: &upstream::Session) -> Option<Subscription> {
    let info = session.peer().peer_info()?;
    let modern = info.protocol_version >= ProtocolVersion::V_2026_07_28;
    let changes = info
        .capabilities
        .tools
        .as_ref()
        .and_then(|t| t.list_changed)
        .unwrap_or(false);
    if !(modern && changes) {
        return None;
    }
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let listen = session.peer().listen(filter).await.ok()?;
    (listen.acknowledged().tools_list_changed == Some(true)).then_some(listen)
}

/// The next notification on `listen`; never, without one.
async fn next_on(
    listen: &mut Option<Subscription>,
) -> Result<Option<ServerNotification>, rmcp::service::ServiceError> {
    match listen {
        Some(l) => l.next().await,
        None => std::future::pending().await,
    }
}

/// The tools of `listed` that the catalogue serves, with their settings.
fn served(up: &Upstream, listed: Vec<rmcp::model::Tool>, say: &Say) -> Vec<UpstreamTool> {
    let mut out = Vec::new();
    for tool in listed {
        let name = tool.name.to_string();
        if !up.tools.serves(&name) {
            continue;
        }
        if !valid_name(&name, 128) {
            say(&format!(
                "gateway: upstream {:?} lists a tool named {:?}, which is not an MCP tool name; not served",
                up.name,
                rudder_model::text::clean(&name, 80)
            ));
            continue;
        }
        let kind = up.kind_of(&name);
        if let Err(e) = rudder_model::task::check_kind(&kind) {
            say(&format!(
                "gateway: tool {name:?} of upstream {:?} is not served: its kind {kind:?} cannot be used ({e}); set one with [upstream.tool.{name}] kind = …",
                up.name
            ));
            continue;
        }
        out.push(UpstreamTool {
            upstream: up.name.clone(),
            description: tool.description.as_deref().unwrap_or_default().to_string(),
            input_schema: Value::Object((*tool.input_schema).clone()),
            output_schema: tool.output_schema.map(|o| Value::Object((*o).clone())),
            settings: up.settings(&name),
            kind,
            name,
        });
    }
    if let Selection::Named(names) = &up.tools {
        for n in names {
            if !out.iter().any(|t| &t.name == n) {
                say(&format!(
                    "gateway: upstream {:?} does not list the tool {n:?} the catalogue names",
                    up.name
                ));
            }
        }
    }
    out
}
