//! The tools catalogue of `rudder mcp`: which tools it lists, and what task
//! each call becomes. A TOML file (see the README's "MCP" section):
//!
//! ```toml
//! [[tool]]
//! name = "diagnose"
//! description = "Diagnose an incident"
//! kind = "diagnose"          # the task kind; default: the name
//! ttl = "24h"                # kept this long after creation (ttlMs)
//! poll_interval = "2s"       # suggested tasks/get interval (pollIntervalMs)
//! wait = "0s"                # how long a call may wait for the result inline
//! task = "optional"          # or "required": clients without the extension get -32021
//! input_schema = { type = "object", properties = { incident = { type = "string" } } }
//! key_prefix = "demo:mcp:"   # optional: each task's idempotency key is this and a fresh id
//! principals = ["alice"]     # optional: only these principals list and call it
//! ```
//!
//! and at the top, `operators = ["alice"]`: the principals that reach the
//! tasks created outside MCP (the CLI, Python, workers).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

/// How long a client that did not declare the tasks extension may wait
/// for the result of an optional-task tool when the catalogue says nothing.
pub const DEFAULT_SYNC_WAIT: Duration = Duration::from_secs(300);

/// One tool of the catalogue, checked.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub kind: String,
    pub input_schema: Value,
    /// `input_schema` compiled once, for every call's arguments.
    pub arguments: rudder_model::schema::Compiled,
    pub output_schema: Option<Value>,
    pub ttl: Option<Duration>,
    pub poll_interval: Option<Duration>,
    /// How long a call from a client with the extension waits for the task
    /// to finish before it is answered with the task instead.
    pub wait: Duration,
    /// How long a call from a client without the extension waits for the
    /// result (then it is answered with an error naming the task).
    pub sync_wait: Duration,
    /// A client without the extension is refused (`-32021`) instead of
    /// waiting for the result.
    pub task_required: bool,
    /// Questions asked before the task exists (a `tools/call` answered with
    /// `input_required` until the client retries with the answers).
    pub ask: Vec<Ask>,
    /// Each task's idempotency key is this prefix and a fresh id (the
    /// demo's tools use `demo:mcp:`, which marks the tasks as the demo's:
    /// its worker diagnoses them and `--fresh` removes them).
    pub key_prefix: Option<String>,
    /// The principals that may list and call the tool when requests are
    /// authorized; `None`: every principal.
    pub principals: Option<Vec<String>>,
}

/// A question asked before the task is created.
#[derive(Debug, Clone)]
pub struct Ask {
    pub key: String,
    pub message: String,
    pub schema: Value,
}

/// The catalogue: its tools in file order, and the upstream MCP servers
/// whose tools it serves through the gateway (docs/gateway.md).
#[derive(Debug, Clone, Default)]
pub struct Catalogue {
    pub tools: Vec<ToolSpec>,
    pub upstreams: Vec<rudder_gateway::Upstream>,
    /// The principals that reach, over MCP, the tasks that belong to no
    /// principal (created by the CLI, Python, a worker, or `rudder mcp`
    /// without authorization).
    pub operators: Vec<String>,
}

impl Catalogue {
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// Why a catalogue was refused: the file, where in it, and why.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {reason}", path.display(), at.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default())]
pub struct CatalogueError {
    pub path: PathBuf,
    /// Line and column (1-based), when the reason has a place.
    pub at: Option<(usize, usize)>,
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    operators: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    tool: Vec<RawTool>,
    /// Read by `rudder_gateway::catalogue`.
    #[serde(default, rename = "upstream")]
    _upstream: Vec<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    kind: Option<Spanned<String>>,
    input_schema: Option<Spanned<Value>>,
    output_schema: Option<Spanned<Value>>,
    ttl: Option<Spanned<String>>,
    poll_interval: Option<Spanned<String>>,
    wait: Option<Spanned<String>>,
    sync_wait: Option<Spanned<String>>,
    task: Option<Spanned<String>>,
    #[serde(default)]
    ask: Vec<RawAsk>,
    key_prefix: Option<Spanned<String>>,
    principals: Option<Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAsk {
    key: Spanned<String>,
    #[serde(default)]
    message: String,
    schema: Spanned<Value>,
}

/// Read and check the catalogue at `path`.
pub fn load(path: &Path) -> Result<Catalogue, CatalogueError> {
    let text = std::fs::read_to_string(path).map_err(|e| CatalogueError {
        path: path.to_path_buf(),
        at: None,
        reason: format!("cannot read it: {e}"),
    })?;
    parse(path, &text)
}

/// Check the catalogue `text` (read from `path`, for messages).
pub fn parse(path: &Path, text: &str) -> Result<Catalogue, CatalogueError> {
    let fail = |span: Option<std::ops::Range<usize>>, reason: String| CatalogueError {
        path: path.to_path_buf(),
        at: span.map(|s| line_col(text, s.start)),
        reason,
    };
    let file: File = toml::from_str(text).map_err(|e| fail(e.span(), e.message().to_string()))?;
    // Principal names as a tokens file or a JWT's `sub` give them.
    let names = |list: &Spanned<Vec<String>>, what: &str| -> Result<Vec<String>, CatalogueError> {
        for name in list.get_ref() {
            if let Err(e) = rudder_model::task::check_author(name) {
                return Err(fail(
                    Some(list.span()),
                    format!("{what}: {name:?} cannot be a principal's name: {e}"),
                ));
            }
        }
        Ok(list.get_ref().clone())
    };
    let operators = match &file.operators {
        Some(list) => names(list, "operators")?,
        None => Vec::new(),
    };
    let mut tools: Vec<ToolSpec> = Vec::new();
    let mut kinds: Vec<(String, String)> = Vec::new();
    for raw in file.tool {
        let name = raw.name.get_ref().clone();
        if !valid_name(&name) {
            return Err(fail(
                Some(raw.name.span()),
                format!("tool name {name:?} is not 1-128 letters, digits, '_', '-' or '.'"),
            ));
        }
        if tools.iter().any(|t| t.name == name) {
            return Err(fail(
                Some(raw.name.span()),
                format!("tool {name:?} is named twice"),
            ));
        }
        let (kind, kind_span) = match &raw.kind {
            Some(k) => (k.get_ref().clone(), k.span()),
            None => (name.clone(), raw.name.span()),
        };
        if let Err(e) = rudder_model::task::check_kind(&kind) {
            return Err(fail(
                Some(kind_span),
                format!("kind {kind:?} cannot be used: {e}"),
            ));
        }
        if let Some((_, other)) = kinds.iter().find(|(k, _)| *k == kind) {
            return Err(fail(
                Some(kind_span),
                format!("kind {kind:?} is named twice (tools {other:?} and {name:?})"),
            ));
        }
        kinds.push((kind.clone(), name.clone()));
        // Each schema checked by compiling it, once.
        let schema = |v: Value, span: Option<std::ops::Range<usize>>, what: &str| {
            if v.get("type").and_then(Value::as_str) != Some("object") {
                return Err(fail(
                    span,
                    format!("{what} of tool {name:?} must have type \"object\""),
                ));
            }
            let compiled = rudder_model::schema::Compiled::new(&v)
                .map_err(|e| fail(span.clone(), format!("{what} of tool {name:?}: {e}")))?;
            Ok((v, compiled))
        };
        let spanned =
            |s: &Spanned<Value>, what: &str| schema(s.get_ref().clone(), Some(s.span()), what);
        let (input_schema, arguments) = match &raw.input_schema {
            Some(s) => spanned(s, "input_schema")?,
            None => schema(serde_json::json!({"type": "object"}), None, "input_schema")?,
        };
        let output_schema = raw
            .output_schema
            .as_ref()
            .map(|s| spanned(s, "output_schema").map(|(v, _)| v))
            .transpose()?;
        let duration = |d: &Option<Spanned<String>>| -> Result<Option<Duration>, CatalogueError> {
            d.as_ref()
                .map(|d| {
                    rudder_model::duration::parse_duration(d.get_ref())
                        .map_err(|e| fail(Some(d.span()), e.to_string()))
                })
                .transpose()
        };
        let task_required = match raw.task.as_ref().map(|t| (t.get_ref().as_str(), t.span())) {
            None | Some(("optional", _)) => false,
            Some(("required", _)) => true,
            Some((other, span)) => {
                return Err(fail(
                    Some(span),
                    format!("task is {other:?}; it takes \"optional\" or \"required\""),
                ));
            }
        };
        let mut ask = Vec::new();
        for a in &raw.ask {
            let key = a.key.get_ref().clone();
            if key.is_empty() || ask.iter().any(|x: &Ask| x.key == key) {
                return Err(fail(
                    Some(a.key.span()),
                    format!("ask key {key:?} is empty or named twice"),
                ));
            }
            let (s, _) = spanned(&a.schema, "the schema of ask")?;
            let fit = rudder_model::schema::mcp::mcp_fit(&s);
            if let Some(reason) = fit.reason {
                return Err(fail(
                    Some(a.schema.span()),
                    format!("the schema of ask {key:?} does not fit MCP elicitation: {reason}"),
                ));
            }
            ask.push(Ask {
                key,
                message: a.message.clone(),
                schema: s,
            });
        }
        let key_prefix = match &raw.key_prefix {
            Some(p) if p.get_ref().is_empty() || p.get_ref().len() > 64 => {
                return Err(fail(
                    Some(p.span()),
                    "key_prefix must be 1 to 64 bytes".to_string(),
                ));
            }
            Some(p) => Some(p.get_ref().clone()),
            None => None,
        };
        let principals = raw
            .principals
            .as_ref()
            .map(|list| names(list, "principals"))
            .transpose()?;
        tools.push(ToolSpec {
            name: name.clone(),
            description: raw.description,
            kind,
            input_schema,
            arguments,
            output_schema,
            ttl: duration(&raw.ttl)?,
            poll_interval: duration(&raw.poll_interval)?,
            wait: duration(&raw.wait)?.unwrap_or(Duration::ZERO),
            sync_wait: duration(&raw.sync_wait)?.unwrap_or(DEFAULT_SYNC_WAIT),
            task_required,
            ask,
            key_prefix,
            principals,
        });
    }
    let upstreams = rudder_gateway::catalogue::parse(path, text).map_err(|e| CatalogueError {
        path: path.to_path_buf(),
        at: e.at,
        reason: e.described(),
    })?;
    // An upstream's tool named in the catalogue, or its kind, must not be a
    // [[tool]]'s too (a `"*"` one that is is not served: see the gateway).
    for up in &upstreams {
        // The tools it names, or (for `"*"`) those it sets a kind for.
        let names: Vec<&String> = match &up.tools {
            rudder_gateway::catalogue::Selection::Named(names) => names.iter().collect(),
            rudder_gateway::catalogue::Selection::All => up.per_tool.keys().collect(),
        };
        {
            for name in names {
                let kind = up.kind_of(name);
                if let Some(t) = tools.iter().find(|t| t.name == *name || t.kind == kind) {
                    return Err(CatalogueError {
                        path: path.to_path_buf(),
                        at: None,
                        reason: format!(
                            "upstream {:?}: its tool {name:?} (kind {kind:?}) is also the [[tool]] {:?} (kind {:?})",
                            up.name, t.name, t.kind
                        ),
                    });
                }
            }
        }
    }
    Ok(Catalogue {
        tools,
        upstreams,
        operators,
    })
}

/// An upstream's tool as `rudder mcp` serves it: the upstream's name,
/// description and schemas, the catalogue's settings. An input schema
/// rudder cannot compile (or that is not an object's) is still shown to
/// clients as the upstream gave it; the arguments are then checked by the
/// upstream alone. `None` if not even that can be set up.
pub fn upstream_tool(t: &rudder_gateway::UpstreamTool) -> Option<ToolSpec> {
    let own = (t.input_schema.get("type").and_then(Value::as_str) == Some("object"))
        .then(|| rudder_model::schema::Compiled::new(&t.input_schema).ok())
        .flatten();
    let arguments = match own {
        Some(c) => c,
        None => rudder_model::schema::Compiled::new(&serde_json::json!({"type": "object"})).ok()?,
    };
    Some(ToolSpec {
        name: t.name.clone(),
        description: t.description.clone(),
        kind: t.kind.clone(),
        input_schema: t.input_schema.clone(),
        arguments,
        output_schema: t.output_schema.clone(),
        ttl: t.settings.ttl,
        poll_interval: t.settings.poll_interval,
        wait: t.settings.wait.unwrap_or(Duration::ZERO),
        sync_wait: DEFAULT_SYNC_WAIT,
        task_required: false,
        ask: Vec::new(),
        key_prefix: None,
        // Every principal may use an upstream's tool.
        principals: None,
    })
}

/// MCP's tool names: 1-128 of `A-Za-z0-9_-.`.
fn valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> CatalogueError {
        parse(Path::new("tools.toml"), text).expect_err("refused")
    }

    #[test]
    fn a_tool_takes_its_defaults() {
        let c = parse(Path::new("t.toml"), "[[tool]]\nname = \"greet\"\n").unwrap();
        let t = &c.tools[0];
        assert_eq!(t.kind, "greet");
        assert_eq!(t.wait, Duration::ZERO);
        assert!(!t.task_required);
        assert_eq!(t.input_schema, serde_json::json!({"type": "object"}));
    }

    #[test]
    fn the_shipped_catalogues_load() {
        // The workspace root: the catalogues ship with the repository.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let demo = load(&root.join("assets/mcp-demo.toml")).expect("the demo catalogue");
        assert_eq!(
            demo.tool("diagnose").map(|t| t.kind.as_str()),
            Some("diagnose")
        );
        assert_eq!(
            demo.tool("diagnose").and_then(|t| t.key_prefix.as_deref()),
            Some("demo:mcp:"),
            "the demo's worker diagnoses the tool's tasks"
        );
        let fixtures = load(&root.join("tests/fixtures/mcp-conformance.toml")).expect("fixtures");
        assert_eq!(fixtures.tools.len(), 7);
        assert_eq!(
            fixtures.tool("test_tool_with_task").map(|t| t.ask.len()),
            Some(1)
        );
    }

    #[test]
    fn operators_and_the_principals_of_a_tool_are_read() {
        let c = parse(
            Path::new("t.toml"),
            "operators = [\"ops\"]\n[[tool]]\nname = \"a\"\nprincipals = [\"alice\", \"bob\"]\n[[tool]]\nname = \"b\"\n",
        )
        .unwrap();
        assert_eq!(c.operators, ["ops"]);
        assert_eq!(
            c.tool("a").and_then(|t| t.principals.clone()),
            Some(vec!["alice".to_string(), "bob".to_string()])
        );
        assert_eq!(c.tool("b").and_then(|t| t.principals.clone()), None);
        let e = err("operators = [\"\"]\n");
        assert!(e.reason.contains("operators"), "{}", e.reason);
    }

    #[test]
    fn a_kind_named_twice_is_refused_where_it_is() {
        let e = err("[[tool]]\nname = \"a\"\n\n[[tool]]\nname = \"b\"\nkind = \"a\"\n");
        assert_eq!(e.at, Some((6, 8)));
        assert!(
            e.reason.contains("kind \"a\" is named twice"),
            "{}",
            e.reason
        );
        assert_eq!(
            e.to_string(),
            format!("tools.toml:6:8: {}", e.reason),
            "file, line and reason"
        );
    }

    #[test]
    fn a_schema_that_does_not_compile_is_refused() {
        let e = err(
            "[[tool]]\nname = \"a\"\ninput_schema = { type = \"object\", minProperties = \"x\" }\n",
        );
        assert_eq!(e.at.map(|a| a.0), Some(3));
        assert!(e.reason.contains("input_schema"), "{}", e.reason);
    }

    #[test]
    fn an_upstream_tool_or_kind_that_is_also_a_tool_of_the_catalogue_is_refused() {
        let e = err(
            "[[tool]]\nname = \"diagnose\"\n\n[[upstream]]\nname = \"b\"\ncommand = [\"x\"]\ntools = \"*\"\n[upstream.tool.other]\nkind = \"diagnose\"\n",
        );
        assert!(
            e.reason.contains("is also the [[tool]] \"diagnose\""),
            "{}",
            e.reason
        );
        let e = err(
            "[[tool]]\nname = \"greet\"\n\n[[upstream]]\nname = \"b\"\ncommand = [\"x\"]\ntools = [\"greet\"]\n",
        );
        assert!(e.reason.contains("upstream \"b\""), "{}", e.reason);
        let e = err("[[upstream]]\nname = \"b\"\ncommand = [\"x\"]\ntools = 3\n");
        assert_eq!(e.at.map(|a| a.0), Some(4));
        assert!(
            e.reason.contains("upstream \"b\", field \"tools\""),
            "{}",
            e.reason
        );
    }

    #[test]
    fn an_upstream_tool_keeps_its_schema_and_one_rudder_cannot_use_is_left_to_the_upstream() {
        let tool = |schema: Value| rudder_gateway::UpstreamTool {
            upstream: "b".into(),
            name: "t".into(),
            description: "d".into(),
            input_schema: schema,
            output_schema: None,
            kind: "t".into(),
            settings: rudder_gateway::catalogue::ToolSettings::default(),
        };
        let typed = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let spec = upstream_tool(&tool(typed.clone())).expect("served");
        assert_eq!(spec.input_schema, typed);
        assert!(
            spec.arguments
                .validate(&serde_json::json!({"n": "x"}))
                .is_err()
        );
        let odd = serde_json::json!({"type": "string"});
        let spec = upstream_tool(&tool(odd.clone())).expect("served");
        assert_eq!(spec.input_schema, odd, "shown as the upstream gave it");
        assert!(
            spec.arguments
                .validate(&serde_json::json!({"n": "x"}))
                .is_ok()
        );
    }

    #[test]
    fn toml_that_does_not_parse_is_refused_with_its_line() {
        let e = err("[[tool]]\nname = \"a\"\nwait = \n");
        assert_eq!(e.at.map(|a| a.0), Some(3));
        let e = err("[[tool]]\nname = \"a\"\nwat = \"1s\"\n");
        assert!(e.reason.contains("unknown field"), "{}", e.reason);
    }
}
