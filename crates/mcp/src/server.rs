//! The MCP server: rmcp's `ServerHandler` over a rudder store.
//!
//! Every task lives in the store, never in this process: `tools/call`
//! answers `CreateTaskResult` only after the create is durable, and every
//! `tasks/*` request reads the store again, so a server started anew (or
//! another one on the same store) answers every task it ever handed out.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock, CreateTaskResult, ErrorCode, ErrorData, GetTaskParams, GetTaskResult,
    Implementation, InputRequests, InputRequiredResult, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, SubscriptionFilter,
    Tool, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

use super::catalogue::{Catalogue, ToolSpec};
use super::requested::Requested;
use super::wire;
use crate::say;
use rudder_model::task::{Actor, Author, ClientInfo, Face, Origin, Status, Task};
use rudder_store::watch::{FeedEvent, FeedOptions};
use rudder_store::{ErrorKind, NewTask, Store, StoreError};

/// What changed in the store, as the feed said.
#[derive(Debug, Clone)]
pub enum Changed {
    Tasks(Arc<Vec<String>>),
    /// Re-read everything (the feed started, recovered or lost its place).
    All,
}

/// The server; cheap to clone (one per HTTP request or stdio session).
#[derive(Clone)]
pub struct RudderMcp {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<Store>,
    catalogue: Catalogue,
    tools: Vec<Tool>,
    /// Bumped on every feed event: waiters re-read when it moves.
    generation: watch::Receiver<u64>,
    changes: broadcast::Sender<Changed>,
    /// Answers to some parts of a several-question round, until all are in
    /// (then they go to the store as one input): task id and round.
    partial: Mutex<HashMap<(String, u64), BTreeMap<String, Value>>>,
    /// The task ids of stdio listen requests (rmcp drops them).
    requested: Requested,
    /// Places for inline waits ([`MAX_INLINE_WAITS`]).
    inline_waits: Arc<tokio::sync::Semaphore>,
    /// The upstreams' tools as last listed (docs/gateway.md), after the
    /// catalogue's own.
    gateway: std::sync::RwLock<Arc<Vec<(ToolSpec, Tool)>>>,
    /// The door of this process's gateway workers: an upstream's call is
    /// created held by the worker that makes it (docs/gateway.md).
    handoff: Option<rudder_gateway::Handoff>,
    /// Whether upstreams' tools are served: their list may change, which
    /// clients are told (`listChanged`).
    upstreams: bool,
    /// The sessions of clients that initialized (up to 2025-11-25): told
    /// `notifications/tools/list_changed` when an upstream's tools change.
    peers: Mutex<Vec<rmcp::Peer<RoleServer>>>,
    /// Bumped when the tools served change: a 2026 client's listen that
    /// asked for tool list changes is told then.
    tools_changed: watch::Sender<u64>,
    /// Who may reach which task and tool.
    access: Access,
}

/// How requests are authorized, as `rudder mcp` was started.
#[derive(Debug, Clone, Default)]
pub enum Access {
    /// No authorization configured (HTTP on loopback without a token):
    /// every task and tool, as before principals; writes as
    /// `mcp:CLIENT-NAME`.
    #[default]
    Open,
    /// stdio: every request is the local user's (`USER@HOST`), who is an
    /// operator and sees every tool.
    Local(String),
    /// HTTP with authorization: each request's principal, which the guard
    /// put in its extensions ([`crate::auth::Principal`]).
    Authorized,
}

/// Which tasks a request reaches.
#[derive(Debug, Clone)]
enum Reach {
    /// Every task (no authorization configured).
    All,
    /// The principal's own tasks and, for an operator, the tasks that
    /// belong to no principal (created by the CLI, Python, a worker).
    Owner { name: String, operator: bool },
    /// None: a request that should have had a principal and has not
    /// (never expected: the guard refuses such a request first).
    Nothing,
}

/// Who a request comes from: what it reaches, and how its writes are
/// recorded.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    reach: Reach,
    /// Whether the catalogue's per-tool `principals` apply.
    limited: bool,
    author: Author,
}

impl Caller {
    /// Whether this caller may see `task` at all: another principal's task
    /// is answered exactly as an unknown one.
    fn reaches(&self, task: &Task) -> bool {
        match &self.reach {
            Reach::All => true,
            Reach::Owner { name, operator } => match &task.owned_by {
                Some(owner) => owner == name,
                None => *operator,
            },
            Reach::Nothing => false,
        }
    }

    /// The principal a task this caller creates belongs to.
    fn owner(&self) -> Option<String> {
        match &self.reach {
            Reach::Owner { name, .. } => Some(name.clone()),
            Reach::All | Reach::Nothing => None,
        }
    }

    /// Whether this caller may list and call `spec`.
    fn may_use(&self, spec: &ToolSpec) -> bool {
        if !self.limited {
            return true;
        }
        match (&self.reach, &spec.principals) {
            (_, None) => !matches!(self.reach, Reach::Nothing),
            (Reach::Owner { name, .. }, Some(allowed)) => allowed.iter().any(|a| a == name),
            _ => false,
        }
    }
}

/// How many `tools/call`s may wait inline for their task at once (each
/// client without the tasks extension waits up to the tool's `sync_wait`;
/// one with it, up to `wait`). They hold no HTTP request slot meanwhile.
pub const MAX_INLINE_WAITS: usize = 128;

/// The JSON-RPC code of a `tools/call` refused because too many wait
/// inline (a server error, in the range JSON-RPC leaves to servers).
pub const BUSY: i32 = -32000;

impl Inner {
    /// The tools served changed: tell every client that can hear it
    /// (`notifications/tools/list_changed`); a client gone is forgotten.
    async fn tools_listed_anew(&self) {
        self.tools_changed.send_modify(|g| *g += 1);
        let peers = self.peers.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut gone = Vec::new();
        for (i, peer) in peers.iter().enumerate() {
            if peer.is_transport_closed() || peer.notify_tool_list_changed().await.is_err() {
                gone.push(i);
            }
        }
        if !gone.is_empty() {
            let mut kept = self.peers.lock().unwrap_or_else(|p| p.into_inner());
            kept.retain(|p| !p.is_transport_closed());
        }
    }
}

/// Why an answer was refused, kept in the task's message.
const REFUSED: &str = "\n(the last answer was refused: ";

impl RudderMcp {
    /// A server over `store` (which its own change feed follows) with the
    /// tools of `catalogue`. Must run inside tokio.
    pub fn new(store: Store, catalogue: Catalogue) -> RudderMcp {
        RudderMcp::serving(store, catalogue, Access::Open, None)
    }

    /// [`RudderMcp::new`], its requests authorized as `access` says.
    pub fn with_access(store: Store, catalogue: Catalogue, access: Access) -> RudderMcp {
        RudderMcp::serving(store, catalogue, access, None)
    }

    /// [`RudderMcp::new`], its requests authorized as `access` says, also
    /// serving the tools `directory` lists (the catalogue's upstreams),
    /// kept current as they change, their calls handed to this process's
    /// gateway workers by `handoff`. A tool of an upstream named as one of
    /// the catalogue's `[[tool]]`s is not served (stderr says so).
    pub fn serving(
        store: Store,
        catalogue: Catalogue,
        access: Access,
        gateway: Option<(rudder_gateway::Directory, rudder_gateway::Handoff)>,
    ) -> RudderMcp {
        let (directory, handoff) = gateway.unzip();
        let (gen_tx, generation) = watch::channel(0u64);
        let (changes, _) = broadcast::channel(256);
        let tx = changes.clone();
        let mut feed = store.feed(FeedOptions::default());
        tokio::spawn(async move {
            while let Some(event) = feed.next().await {
                gen_tx.send_modify(|g| *g += 1);
                let changed = match event {
                    FeedEvent::Changes(c) => {
                        Changed::Tasks(Arc::new(c.into_iter().map(|c| c.task_id).collect()))
                    }
                    FeedEvent::Reset(_) => Changed::All,
                    FeedEvent::Unavailable(_) => continue,
                };
                let _ = tx.send(changed);
            }
        });
        let tools = catalogue.tools.iter().map(tool_of).collect();
        let server = RudderMcp {
            inner: Arc::new(Inner {
                store: Arc::new(store),
                catalogue,
                tools,
                generation,
                changes,
                partial: Mutex::new(HashMap::new()),
                requested: Requested::default(),
                inline_waits: Arc::new(tokio::sync::Semaphore::new(MAX_INLINE_WAITS)),
                gateway: std::sync::RwLock::default(),
                upstreams: directory.is_some(),
                handoff,
                peers: Mutex::default(),
                tools_changed: watch::channel(0).0,
                access,
            }),
        };
        if let Some(directory) = directory {
            let weak = Arc::downgrade(&server.inner);
            let mut listed = directory.watch();
            tokio::spawn(async move {
                loop {
                    let tools = Arc::clone(&listed.borrow_and_update());
                    let Some(inner) = weak.upgrade() else { return };
                    let served: Vec<(ToolSpec, Tool)> = tools
                        .iter()
                        .filter(|t| {
                            let own = inner
                                .catalogue
                                .tools
                                .iter()
                                .any(|c| c.name == t.name || c.kind == t.kind);
                            if own {
                                say(&format!(
                                    "gateway: tool {:?} (kind {:?}) of upstream {:?} is not served: the catalogue has a [[tool]] of that name or kind",
                                    t.name, t.kind, t.upstream
                                ));
                            }
                            !own
                        })
                        .filter_map(|t| {
                            let spec = super::catalogue::upstream_tool(t)?;
                            let tool = tool_of(&spec);
                            Some((spec, tool))
                        })
                        .collect();
                    let changed = {
                        let mut now = inner.gateway.write().unwrap_or_else(|p| p.into_inner());
                        let changed = now.len() != served.len()
                            || now.iter().zip(&served).any(|((_, a), (_, b))| a != b);
                        *now = Arc::new(served);
                        changed
                    };
                    if changed {
                        inner.tools_listed_anew().await;
                    }
                    drop(inner);
                    if listed.changed().await.is_err() {
                        return;
                    }
                }
            });
        }
        server
    }

    /// Subscribe to changes of the tools served (2026 listens).
    pub(crate) fn tools_changes(&self) -> watch::Receiver<u64> {
        self.inner.tools_changed.subscribe()
    }

    /// The tool `name`: the catalogue's, else an upstream's.
    fn spec(&self, name: &str) -> Option<ToolSpec> {
        if let Some(spec) = self.inner.catalogue.tool(name) {
            return Some(spec.clone());
        }
        self.upstream_tools()
            .iter()
            .find(|(s, _)| s.name == name)
            .map(|(s, _)| s.clone())
    }

    fn upstream_tools(&self) -> Arc<Vec<(ToolSpec, Tool)>> {
        Arc::clone(&self.inner.gateway.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Who `cx`'s request comes from.
    pub(crate) fn caller(&self, cx: &RequestContext<RoleServer>) -> Caller {
        let operator = |name: &str| self.inner.catalogue.operators.iter().any(|o| o == name);
        match &self.inner.access {
            Access::Open => {
                let client = cx.client_info().map(|i| i.name);
                let name = format!("mcp:{}", client.as_deref().unwrap_or("unknown"));
                Caller {
                    reach: Reach::All,
                    limited: false,
                    author: Author::lossy(&name, Face::Mcp),
                }
            }
            Access::Local(name) => Caller {
                reach: Reach::Owner {
                    name: name.clone(),
                    operator: true,
                },
                limited: false,
                author: Author::lossy(name, Face::Mcp),
            },
            Access::Authorized => {
                let principal = cx
                    .extensions
                    .get::<axum::http::request::Parts>()
                    .and_then(|p| p.extensions.get::<crate::auth::Principal>());
                match principal {
                    Some(p) => Caller {
                        reach: Reach::Owner {
                            name: p.name().to_string(),
                            operator: operator(p.name()),
                        },
                        limited: true,
                        author: Author::lossy(p.name(), Face::Mcp),
                    },
                    None => Caller {
                        reach: Reach::Nothing,
                        limited: true,
                        author: Author::lossy("mcp:unauthorized", Face::Mcp),
                    },
                }
            }
        }
    }

    /// Where stdio notes the task ids of listen requests.
    pub fn requested(&self) -> &Requested {
        &self.inner.requested
    }

    /// What the feed says from now on.
    pub(crate) fn changes(&self) -> broadcast::Receiver<Changed> {
        self.inner.changes.subscribe()
    }

    /// Run a store call off the async threads (the store blocks on locks
    /// and I/O).
    async fn blocking<T: Send + 'static>(
        &self,
        by: &Caller,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, ErrorData> {
        self.store_call(by, f).await?.map_err(store_error)
    }

    /// [`RudderMcp::blocking`], with the store's error as it was raised, for
    /// the callers that decide by its kind. Writes are recorded as `by`'s.
    async fn store_call<T: Send + 'static>(
        &self,
        by: &Caller,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<Result<T, StoreError>, ErrorData> {
        let store = self.inner.store.by(by.author.clone());
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| ErrorData::internal_error(format!("store call: {e}"), None))
    }

    /// The task `id`, exactly (a prefix is not a handle: it would let a
    /// client find tasks it was never given), if `by` reaches it: another
    /// principal's task is refused exactly as an unknown id is, so that an
    /// answer tells nothing of whether the id exists.
    pub(crate) async fn task(&self, id: &str, by: &Caller) -> Result<Task, ErrorData> {
        let wanted = id.to_string();
        let unknown = || unknown_task(id);
        if uuid::Uuid::parse_str(id).is_err() {
            return Err(unknown());
        }
        // A quick read (SQLite) costs less than the hop to the blocking
        // pool and back, which was a fifth of a `tasks/get`.
        let read = if self.inner.store.quick_reads() {
            self.inner.store.get(&wanted).map_err(store_error)
        } else {
            self.blocking(by, move |s| s.get(&wanted)).await
        };
        match read {
            Ok(t) if t.task_id == id && by.reaches(&t) => Ok(t),
            Ok(_) => Err(unknown()),
            Err(e) if e.code == ErrorCode::INVALID_PARAMS => Err(unknown()),
            Err(e) => Err(e),
        }
    }

    fn poll_of(&self, task: &Task) -> Option<u64> {
        let tool = task.origin.as_ref()?.tool.as_str();
        let spec = self.spec(tool)?;
        spec.poll_interval.map(|d| d.as_millis() as u64)
    }

    fn answered(&self, task: &Task) -> BTreeSet<String> {
        let key = (task.task_id.clone(), wire::round(task));
        let partial = self.inner.partial.lock().unwrap_or_else(|e| e.into_inner());
        partial
            .get(&key)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The task on the wire, as `tasks/get` and notifications show it.
    pub fn detailed(&self, task: &Task) -> rmcp::model::DetailedTask {
        wire::detailed(task, self.poll_of(task), &self.answered(task))
    }

    /// Wait until `done` holds for the task, `limit` passes or `cancel`
    /// fires; the task as last read. `over`, when given, also wakes the
    /// wait (the gateway's call of the task ended in this process).
    async fn wait_for(
        &self,
        by: &Caller,
        id: &str,
        limit: Duration,
        cancel: &tokio_util::sync::CancellationToken,
        over: &mut Option<tokio::sync::oneshot::Receiver<()>>,
        done: impl Fn(&Task) -> bool,
    ) -> Result<Task, ErrorData> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut generation = self.inner.generation.clone();
        loop {
            generation.borrow_and_update();
            let task = self.task(id, by).await?;
            if done(&task) || tokio::time::Instant::now() >= deadline {
                return Ok(task);
            }
            // The feed wakes us; the tick is a safety net for a wake-up
            // that went missing.
            let tick = tokio::time::Instant::now() + Duration::from_secs(1);
            tokio::select! {
                _ = generation.changed() => {}
                _ = tokio::time::sleep_until(deadline.min(tick)) => {}
                _ = cancel.cancelled() => return Ok(task),
                _ = async {
                    if let Some(o) = over.as_mut() {
                        let _ = o.await;
                    }
                }, if over.is_some() => *over = None,
            }
        }
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller(&cx);
        // A tool the caller may not use is answered as one that does not
        // exist.
        let Some(spec) = self.spec(&request.name).filter(|t| caller.may_use(t)) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        };
        let tasks_ok = client_takes_tasks(&cx);
        if spec.task_required && !tasks_ok {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        if let Err(violations) = spec.arguments.validate(&arguments) {
            // Before any task exists: a tool error the caller can correct
            // (SEP-1303), with every violation and where it is.
            let text = violations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            let mut r = CallToolResult::error(vec![ContentBlock::text(format!(
                "invalid arguments for {}: {text}",
                spec.name
            ))]);
            r.structured_content = Some(json!({
                "violations": violations
                    .iter()
                    .map(|v| json!({"pointer": v.pointer, "message": v.message}))
                    .collect::<Vec<_>>(),
            }));
            return Ok(r.into());
        }
        let mut request_value = arguments.clone();
        if !spec.ask.is_empty() {
            match ask_first(&spec, request.input_responses.as_ref()) {
                Asked::Missing(requests) => {
                    return Ok(InputRequiredResult::from_input_requests(requests).into());
                }
                Asked::Declined(key) => {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                        "{}: the question {key:?} was declined; nothing was started",
                        spec.name
                    ))])
                    .into());
                }
                Asked::All(answers) => {
                    if let Value::Object(o) = &mut request_value {
                        o.insert("_inputs".into(), Value::Object(answers));
                    }
                }
            }
        }
        // An inline wait takes a place in its own budget, so that waiting
        // clients never take the request slots `tasks/*` are served from;
        // a client without the extension that finds no place is refused
        // before anything is written.
        let waits = !tasks_ok || !spec.wait.is_zero();
        let place = if waits {
            Arc::clone(&self.inner.inline_waits)
                .try_acquire_owned()
                .ok()
        } else {
            None
        };
        if !tasks_ok && place.is_none() {
            return Err(ErrorData::new(
                ErrorCode(BUSY),
                format!(
                    "{} clients already wait inline for their tools' results (the limit); nothing was started: try again later, or use a client with the tasks extension, which is never limited this way",
                    MAX_INLINE_WAITS
                ),
                Some(json!({"limit": MAX_INLINE_WAITS})),
            ));
        }
        let origin = Origin {
            tool: spec.name.clone(),
            client: cx.client_info().map(|i| ClientInfo {
                name: i.name,
                version: Some(i.version).filter(|v| !v.is_empty()),
            }),
        };
        let new = NewTask {
            title: Some(title(&spec, &arguments)),
            request: Some(request_value),
            ttl_ms: spec.ttl.map(|d| d.as_millis() as u64),
            poll_interval_ms: spec.poll_interval.map(|d| d.as_millis() as u64),
            origin: Some(origin),
            owned_by: caller.owner(),
            kind: Some(spec.kind.clone()),
            idempotency_key: spec
                .key_prefix
                .as_ref()
                .map(|p| format!("{p}{}", uuid::Uuid::new_v4())),
            ..NewTask::default()
        };
        // An upstream's call is made held by the gateway worker of this
        // process that calls it, which starts at once (no claim, no wait
        // for the change feed).
        let offer = self
            .inner
            .handoff
            .as_ref()
            .and_then(|h| h.offer(&spec.kind));
        let (created, mut over) = match offer {
            None => {
                // Durable once `create` returns: every backend commits
                // (fsync, synchronous=FULL, a committed transaction)
                // before it answers.
                let created = self.blocking(&caller, move |s| s.create(new)).await?;
                (created.task, None)
            }
            Some(offer) => {
                // Made and started on a task of its own: a task made held
                // is started even if this request goes away meanwhile
                // (else it would wait for its lease to lapse).
                let store = self.inner.store.by(caller.author.clone());
                let made = tokio::spawn(async move {
                    let held = offer.held().clone();
                    let created =
                        tokio::task::spawn_blocking(move || store.create_held(new, &held))
                            .await
                            .map_err(|e| {
                                ErrorData::internal_error(format!("store call: {e}"), None)
                            })?
                            .map_err(store_error)?
                            .task;
                    // Told when the gateway's call is over: the result is
                    // read then, not when the change feed gets to it.
                    let over = offer.start(created.clone());
                    Ok::<_, ErrorData>((created, over))
                });
                made.await
                    .map_err(|e| ErrorData::internal_error(format!("store call: {e}"), None))??
            }
        };
        let id = created.task_id.clone();
        if place.is_some() {
            release_slot(&cx);
        }
        if tasks_ok {
            let task = if place.is_none() {
                created
            } else {
                self.wait_for(&caller, &id, spec.wait, &cx.ct, &mut over, |t| {
                    t.status.is_terminal() || t.status == Status::InputRequired
                })
                .await?
            };
            if task.status.is_terminal() {
                return self.inline(&task);
            }
            let base = wire::base(&task, self.poll_of(&task));
            return Ok(CreateTaskResult::new(base).into());
        }
        let task = self
            .wait_for(&caller, &id, spec.sync_wait, &cx.ct, &mut over, |t| {
                t.status.is_terminal()
            })
            .await?;
        if task.status.is_terminal() {
            return self.inline(&task);
        }
        Err(ErrorData::internal_error(
            format!(
                "task {id} is still {} after {}; a client with the tasks extension can follow it, or `rudder get {id}`",
                task.status,
                humantime::format_duration(spec.sync_wait)
            ),
            Some(json!({"taskId": id})),
        ))
    }

    /// A finished task as the answer of its `tools/call`.
    fn inline(&self, task: &Task) -> Result<CallToolResponse, ErrorData> {
        if task.status == Status::Failed && wire::protocol_failure(task) {
            let e = wire::error_object(task);
            return Err(ErrorData::new(
                ErrorCode(e.get("code").and_then(Value::as_i64).unwrap_or(-32603) as i32),
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the task failed")
                    .to_string(),
                e.get("data").cloned(),
            ));
        }
        Ok(wire::tool_result(task).into())
    }

    async fn update(&self, request: UpdateTaskParams, by: &Caller) -> Result<(), ErrorData> {
        let id = request.task_id.clone();
        let task = self.task(&id, by).await?;
        if task.status != Status::InputRequired {
            // An answer to a question no longer asked: ignored, as the
            // extension says for a stale key.
            return Ok(());
        }
        let round = wire::round(&task);
        let questions = wire::questions(&task);
        let mut parts: BTreeMap<String, Value> = BTreeMap::new();
        let mut whole: Option<Value> = None;
        for q in &questions {
            let Some(response) = request.input_responses.get(&q.key) else {
                continue;
            };
            match response.get("action").and_then(Value::as_str) {
                Some("accept") => {
                    let content = response
                        .get("content")
                        .cloned()
                        .unwrap_or_else(|| json!({}));
                    match &q.part {
                        Some(p) => {
                            parts.insert(p.clone(), content);
                        }
                        None => whole = Some(content),
                    }
                }
                Some("decline") => {
                    // The person said no to the question: the work cannot go
                    // on without it, so the task ends cancelled.
                    let reason = format!("the MCP client declined the question ({})", q.key);
                    let cancel_id = id.clone();
                    return cancel_answer(
                        self.store_call(by, move |s| s.cancel(&cancel_id, Some(reason)))
                            .await?,
                    );
                }
                // `cancel` (the person dismissed the form without choosing)
                // and anything else: the question stays open, to be answered
                // later here, in the TUI or with `rudder input`.
                _ => {}
            }
        }
        let value = if let Some(v) = whole {
            v
        } else if !parts.is_empty() {
            let all: Vec<String> = questions.iter().filter_map(|q| q.part.clone()).collect();
            let mut partial = self.inner.partial.lock().unwrap_or_else(|e| e.into_inner());
            let have = partial.entry((id.clone(), round)).or_default();
            have.extend(parts);
            if !all.iter().all(|p| have.contains_key(p)) {
                return Ok(());
            }
            Value::Object(have.clone().into_iter().collect())
        } else {
            return Ok(());
        };
        let revision = task.revision;
        let given = value.clone();
        let provide_id = id.clone();
        let outcome = self
            .store_call(by, move |s| {
                s.provide_input(&provide_id, given, Some(revision))
            })
            .await?;
        self.inner
            .partial
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(id.clone(), round));
        match outcome {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == ErrorKind::InvalidInput => {
                // The task keeps waiting; its message says why the
                // answer was not taken, for whoever answers next.
                let question = task
                    .status_message
                    .as_deref()
                    .map(|m| m.split(REFUSED).next().unwrap_or(m).to_string())
                    .unwrap_or_default();
                let shown = rudder_model::text::sanitize(&e.to_string()).into_owned();
                let message = format!("{question}{REFUSED}{shown})");
                let _ = self
                    .blocking(by, move |s| {
                        s.heartbeat(&id, Some(message), None, Actor::Anyone)
                    })
                    .await;
                Ok(())
            }
            // A stale revision (someone answered first, in the TUI or
            // elsewhere) or a refusal: the task moved on; ignored.
            Err(e) if moved_on(&e) => Ok(()),
            Err(e) => Err(store_error(e)),
        }
    }

    async fn cancel(
        &self,
        id: String,
        given: Option<String>,
        cx: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let by = self.caller(cx);
        self.task(&id, &by).await?;
        // The client's reason when it gives one (the trail's "why"), else
        // which client cancelled.
        let reason = match given
            .map(|r| rudder_model::text::clean(&r, 500))
            .filter(|r| !r.trim().is_empty())
        {
            Some(r) => r,
            None => {
                let who = cx
                    .client_info()
                    .map(|i| format!(" ({} {})", i.name, i.version))
                    .unwrap_or_default();
                format!("cancelled by the MCP client{who}")
            }
        };
        cancel_answer(
            self.store_call(&by, move |s| s.cancel(&id, Some(reason)))
                .await?,
        )
    }
}

/// Give back the HTTP request slot this request holds (none over stdio).
fn release_slot(cx: &RequestContext<RoleServer>) {
    if let Some(slot) = cx
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<crate::guard::Slot>())
    {
        slot.release();
    }
}

/// Whether this request's client takes tasks: it declared the extension
/// (in the request's `_meta`, or at `initialize` for a session) and speaks
/// the 2026 protocol (a 2025-11-25 client gets plain tools).
pub(crate) fn client_takes_tasks(cx: &RequestContext<RoleServer>) -> bool {
    modern(cx)
        && cx
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks())
}

/// Whether this request speaks the 2026 protocol (no `initialize`, or a
/// session that negotiated 2026-07-28).
pub(crate) fn modern(cx: &RequestContext<RoleServer>) -> bool {
    cx.protocol_version()
        .is_some_and(|v| !v.has_initialize() || v >= ProtocolVersion::V_2026_07_28)
}

enum Asked {
    Missing(InputRequests),
    Declined(String),
    All(JsonObject),
}

/// The questions a tool asks before its task exists, against the answers
/// this call carries.
fn ask_first(spec: &ToolSpec, responses: Option<&rmcp::model::InputResponses>) -> Asked {
    let mut missing = InputRequests::new();
    let mut answers = JsonObject::new();
    for a in &spec.ask {
        let response = responses.and_then(|r| r.get(&a.key));
        match response
            .and_then(|r| r.get("action"))
            .and_then(Value::as_str)
        {
            Some("accept") => {
                let content = response
                    .and_then(|r| r.get("content"))
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                if rudder_model::schema::validate(&a.schema, &content).is_ok() {
                    answers.insert(a.key.clone(), content);
                    continue;
                }
            }
            Some("decline") => return Asked::Declined(a.key.clone()),
            _ => {}
        }
        let q = wire::Question {
            key: a.key.clone(),
            part: None,
            message: a.message.clone(),
            schema: a.schema.clone(),
        };
        // The catalogue checked that the schema fits form elicitation.
        if let Ok(r) = wire::elicitation(&q) {
            missing.insert(a.key.clone(), r);
        }
    }
    if missing.is_empty() {
        Asked::All(answers)
    } else {
        Asked::Missing(missing)
    }
}

/// A short label for lists: the tool and its string arguments.
fn title(spec: &ToolSpec, arguments: &Value) -> String {
    let mut title = spec.name.clone();
    if let Some(o) = arguments.as_object() {
        for v in o.values().filter_map(Value::as_str) {
            title.push(' ');
            title.push_str(v);
        }
    }
    rudder_model::text::clean(&title, 80)
}

fn tool_of(spec: &ToolSpec) -> Tool {
    let schema = match &spec.input_schema {
        Value::Object(o) => o.clone(),
        _ => JsonObject::new(),
    };
    let mut tool = Tool::new(
        spec.name.clone(),
        spec.description.clone(),
        Arc::new(schema),
    );
    if let Some(Value::Object(o)) = &spec.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(o.clone()));
    }
    tool
}

fn unknown_task(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("unknown task: {}", rudder_model::text::clean(id, 80)),
        None,
    )
}

/// A store error on the wire: an unknown task is `-32602`; a refusal
/// carries what was refused; anything else is internal (its message never
/// holds a password: store locations are shown redacted).
pub fn store_error(e: StoreError) -> ErrorData {
    let refusal = match (&e, e.kind()) {
        (StoreError::UnknownTask { id } | StoreError::AmbiguousId { prefix: id, .. }, _) => {
            return unknown_task(id);
        }
        (
            _,
            kind @ (ErrorKind::Refused
            | ErrorKind::StaleRevision
            | ErrorKind::LeaseLost
            | ErrorKind::InvalidInput),
        ) => kind.as_str(),
        _ => "error",
    };
    ErrorData::internal_error(
        rudder_model::text::sanitize(&e.to_string()).into_owned(),
        Some(json!({ "refusal": refusal, "kind": e.kind().as_str() })),
    )
}

/// Whether a cancel or an answer was refused because the task already
/// moved on (finished, answered by someone else, taken over): still
/// acknowledged, as the extension's operations are cooperative.
fn moved_on(e: &StoreError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Refused | ErrorKind::StaleRevision | ErrorKind::LeaseLost
    )
}

/// The answer of a cancel: acknowledged unless the store failed.
fn cancel_answer<T>(r: Result<T, StoreError>) -> Result<(), ErrorData> {
    match r {
        Ok(_) => Ok(()),
        Err(e) if moved_on(&e) => Ok(()),
        Err(e) => Err(store_error(e)),
    }
}

impl ServerHandler for RudderMcp {
    fn get_info(&self) -> ServerConfig {
        let capabilities = if self.inner.upstreams {
            // An upstream's tools come and go with it.
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_tasks()
                .build()
        } else {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build()
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("rudder", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools start durable rudder tasks: poll them with tasks/get, answer their questions with tasks/update.",
            )
    }

    async fn on_initialized(&self, cx: rmcp::service::NotificationContext<RoleServer>) {
        if self.inner.upstreams {
            let mut peers = self.inner.peers.lock().unwrap_or_else(|p| p.into_inner());
            peers.retain(|p| !p.is_transport_closed());
            peers.push(cx.peer);
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = self.caller(&cx);
        let upstream = self.upstream_tools();
        let tools = self
            .inner
            .catalogue
            .tools
            .iter()
            .zip(&self.inner.tools)
            .chain(upstream.iter().map(|(s, t)| (s, t)))
            .filter(|(spec, _)| caller.may_use(spec))
            .map(|(_, tool)| tool.clone())
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        if let Some(t) = self.inner.tools.iter().find(|t| t.name == name) {
            return Some(t.clone());
        }
        self.upstream_tools()
            .iter()
            .find(|(_, t)| t.name == name)
            .map(|(_, t)| t.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match self.call(request, cx).await? {
            // Every non-task answer says it is complete (SEP-2322).
            CallToolResponse::Complete(mut r) => {
                r.result_type
                    .get_or_insert(rmcp::model::ResultType::COMPLETE);
                Ok(CallToolResponse::Complete(r))
            }
            other => Ok(other),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let task = self.task(&request.task_id, &self.caller(&cx)).await?;
        Ok(GetTaskResult::new(self.detailed(&task)))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.update(request, &self.caller(&cx)).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let reason = cx
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<crate::guard::CancelReason>())
            .map(|r| r.0.clone())
            .or_else(|| {
                let id = serde_json::to_value(&cx.id).unwrap_or(Value::Null);
                self.requested().reason(&id)
            });
        self.cancel(request.task_id, reason, &cx).await
    }

    // A listen is acknowledged with what this server has (tool list
    // changes when it serves upstreams' tools; the transports add the task
    // ids, which rmcp drops: see `listen`).
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        RudderMcp::listen(self, context).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(owner: Option<&str>) -> Task {
        let mut t = Task::new("00000000-0000-4000-8000-000000000001", Status::Working);
        t.owned_by = owner.map(String::from);
        t
    }

    fn caller(reach: Reach) -> Caller {
        Caller {
            reach,
            limited: true,
            author: Author::lossy("x", Face::Mcp),
        }
    }

    fn owner(name: &str, operator: bool) -> Caller {
        caller(Reach::Owner {
            name: name.into(),
            operator,
        })
    }

    #[test]
    fn a_principal_reaches_its_own_tasks_and_an_operator_the_unowned() {
        let (alices, unowned) = (task(Some("alice")), task(None));
        assert!(owner("alice", false).reaches(&alices));
        assert!(!owner("bob", false).reaches(&alices));
        assert!(!owner("bob", true).reaches(&alices), "not another's");
        assert!(!owner("bob", false).reaches(&unowned));
        assert!(owner("bob", true).reaches(&unowned));
        assert!(caller(Reach::All).reaches(&alices));
        assert!(!caller(Reach::Nothing).reaches(&unowned));
        assert_eq!(owner("alice", false).owner().as_deref(), Some("alice"));
        assert_eq!(caller(Reach::All).owner(), None);
    }

    #[test]
    fn a_tools_principals_limit_who_uses_it() {
        let c = crate::catalogue::parse(
            std::path::Path::new("t.toml"),
            "[[tool]]\nname = \"a\"\nprincipals = [\"alice\"]\n[[tool]]\nname = \"b\"\n",
        )
        .unwrap();
        let (a, b) = (&c.tools[0], &c.tools[1]);
        assert!(owner("alice", false).may_use(a));
        assert!(!owner("bob", true).may_use(a));
        assert!(owner("bob", false).may_use(b));
        assert!(!caller(Reach::Nothing).may_use(b));
        let mut local = owner("ada@host", true);
        local.limited = false;
        assert!(local.may_use(a), "the local user sees every tool");
    }
}
