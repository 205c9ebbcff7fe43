//! The upstream part of a tools catalogue: its `[[upstream]]` tables.
//!
//! ```toml
//! [[upstream]]
//! name = "bridge"
//! command = ["python", "bridge.py"]   # a child over stdio …
//! env = { BRIDGE_LOG = "info" }
//! cwd = "servers"                      # relative to the catalogue's directory
//! tools = ["diagnose"]                 # or "*"
//! idempotent = false                   # defaults for every tool of it
//! attempts = 3
//!
//! [upstream.tool.diagnose]             # one tool's settings
//! kind = "diagnose"
//! ttl = "24h"
//! poll_interval = "2s"
//! wait = "0s"
//! idempotent = true
//!
//! [[upstream]]
//! name = "remote"
//! url = "https://mcp.example.com/mcp"  # … or Streamable HTTP
//! headers = { X-Team = "oncall" }
//! token_env = "REMOTE_MCP_TOKEN"       # or token_file = "remote.token"
//! tools = "*"
//! ```
//!
//! The `[[tool]]` tables of the same file belong to `rudder mcp`'s own
//! catalogue; this module reads `[[upstream]]` only.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// How many attempts an idempotent tool gets when the catalogue says nothing.
pub const DEFAULT_ATTEMPTS: u32 = 3;

/// The most attempts a catalogue may ask for.
pub const MAX_ATTEMPTS: u32 = 100;

/// One upstream MCP server, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Upstream {
    /// Its name (`[A-Za-z0-9_.-]`, 1-64): in messages, lease holders, the TUI.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// Which of its tools rudder serves.
    pub tools: Selection,
    /// The settings of its tools that `[upstream.tool.NAME]` does not set.
    pub defaults: ToolSettings,
    /// Per-tool settings, by tool name.
    pub per_tool: BTreeMap<String, ToolSettings>,
}

/// How an upstream is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking MCP over its stdin and stdout.
    Stdio {
        /// The program and its arguments (no shell).
        command: Vec<String>,
        /// Variables set for the child, over the gateway's environment.
        env: BTreeMap<String, String>,
        /// Its working directory (relative paths are the catalogue's).
        cwd: Option<PathBuf>,
        /// Variables of the gateway's environment the child must not see:
        /// every `token_env` of the catalogue (another upstream's token is
        /// not this program's to read), unless `env` sets it itself.
        withheld: Vec<String>,
    },
    /// A server over Streamable HTTP.
    Http {
        /// The endpoint (`http://` or `https://`).
        url: String,
        /// Extra headers sent with every request, checked and parsed once.
        headers: HashMap<http::HeaderName, http::HeaderValue>,
        /// Where the bearer token comes from, if any.
        token: Option<TokenSource>,
    },
}

/// Where an upstream's bearer token is read from when a connection is
/// made: never the catalogue text.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenSource {
    /// An environment variable of the gateway's process.
    Env(String),
    /// A file (relative paths are the catalogue's); surrounding
    /// whitespace is trimmed.
    File(PathBuf),
}

/// Which tools of an upstream are served.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// Every tool its `tools/list` names.
    All,
    /// These tools, in this order.
    Named(Vec<String>),
}

impl Selection {
    /// Whether the tool `name` is served.
    pub fn serves(&self, name: &str) -> bool {
        match self {
            Selection::All => true,
            Selection::Named(names) => names.iter().any(|n| n == name),
        }
    }
}

/// The settings of one upstream tool.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolSettings {
    /// The task kind its calls become; `None`: the tool's name.
    pub kind: Option<String>,
    /// How long its tasks are kept after creation.
    pub ttl: Option<Duration>,
    /// The poll interval suggested to MCP clients.
    pub poll_interval: Option<Duration>,
    /// How long a call from a client with the tasks extension waits inline.
    pub wait: Option<Duration>,
    /// Whether a call lost mid-way may be made again.
    pub idempotent: Option<bool>,
    /// How many times in all an idempotent call is made at most.
    pub attempts: Option<u32>,
}

impl ToolSettings {
    /// These settings, with what they leave unset taken from `defaults`.
    fn over(&self, defaults: &ToolSettings) -> ToolSettings {
        ToolSettings {
            kind: self.kind.clone().or_else(|| defaults.kind.clone()),
            ttl: self.ttl.or(defaults.ttl),
            poll_interval: self.poll_interval.or(defaults.poll_interval),
            wait: self.wait.or(defaults.wait),
            idempotent: self.idempotent.or(defaults.idempotent),
            attempts: self.attempts.or(defaults.attempts),
        }
    }

    /// Whether the tool is marked idempotent (default: not).
    pub fn is_idempotent(&self) -> bool {
        self.idempotent.unwrap_or(false)
    }

    /// How many attempts a call gets: 1 unless idempotent.
    pub fn max_attempts(&self) -> u32 {
        if self.is_idempotent() {
            self.attempts.unwrap_or(DEFAULT_ATTEMPTS)
        } else {
            1
        }
    }
}

impl Upstream {
    /// The settings of its tool `tool`: the tool's own over the upstream's.
    pub fn settings(&self, tool: &str) -> ToolSettings {
        match self.per_tool.get(tool) {
            Some(own) => own.over(&self.defaults),
            None => self.defaults.clone(),
        }
    }

    /// The task kind of its tool `tool`.
    pub fn kind_of(&self, tool: &str) -> String {
        self.settings(tool).kind.unwrap_or_else(|| tool.to_string())
    }
}

/// Why the upstream part of a catalogue was refused: the file, where in
/// it, which upstream and field, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{}: {}{reason}", path.display(), at.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default(), place(upstream.as_deref(), field.as_deref()))]
pub struct CatalogueError {
    /// The catalogue file.
    pub path: PathBuf,
    /// Line and column (1-based), when the reason has a place.
    pub at: Option<(usize, usize)>,
    /// The upstream's name, when known.
    pub upstream: Option<String>,
    /// The field, when one is at fault.
    pub field: Option<String>,
    /// What is wrong.
    pub reason: String,
}

impl CatalogueError {
    /// What is wrong, with the upstream and field but without the file and
    /// place (for a caller that reports those its own way).
    pub fn described(&self) -> String {
        format!(
            "{}{}",
            place(self.upstream.as_deref(), self.field.as_deref()),
            self.reason
        )
    }
}

fn place(upstream: Option<&str>, field: Option<&str>) -> String {
    match (upstream, field) {
        (Some(u), Some(f)) => format!("upstream {u:?}, field {f:?}: "),
        (Some(u), None) => format!("upstream {u:?}: "),
        (None, Some(f)) => format!("upstream field {f:?}: "),
        (None, None) => String::new(),
    }
}

#[derive(Deserialize)]
struct RawFile {
    #[serde(default)]
    upstream: Vec<RawUpstream>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUpstream {
    name: Spanned<String>,
    command: Option<Spanned<Vec<String>>>,
    env: Option<Spanned<BTreeMap<String, String>>>,
    cwd: Option<Spanned<String>>,
    url: Option<Spanned<String>>,
    headers: Option<Spanned<BTreeMap<String, String>>>,
    token_env: Option<Spanned<String>>,
    token_file: Option<Spanned<String>>,
    tools: Option<Spanned<toml::Value>>,
    ttl: Option<Spanned<String>>,
    poll_interval: Option<Spanned<String>>,
    wait: Option<Spanned<String>>,
    idempotent: Option<bool>,
    attempts: Option<Spanned<i64>>,
    #[serde(default)]
    tool: BTreeMap<String, Spanned<RawSettings>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    kind: Option<Spanned<String>>,
    ttl: Option<Spanned<String>>,
    poll_interval: Option<Spanned<String>>,
    wait: Option<Spanned<String>>,
    idempotent: Option<bool>,
    attempts: Option<Spanned<i64>>,
}

/// Read the `[[upstream]]` tables of the catalogue at `path`.
pub fn load(path: &Path) -> Result<Vec<Upstream>, CatalogueError> {
    let text = std::fs::read_to_string(path).map_err(|e| CatalogueError {
        path: path.to_path_buf(),
        at: None,
        upstream: None,
        field: None,
        reason: format!("cannot read it: {e}"),
    })?;
    parse(path, &text)
}

/// Check the `[[upstream]]` tables of the catalogue `text` (read from
/// `path`: relative `cwd` and `token_file` are resolved against its
/// directory, and messages name it).
pub fn parse(path: &Path, text: &str) -> Result<Vec<Upstream>, CatalogueError> {
    let file: RawFile = toml::from_str(text).map_err(|e| {
        let span = e.span();
        let (upstream, field) = match &span {
            Some(s) => where_in(text, s.start),
            None => (None, None),
        };
        CatalogueError {
            path: path.to_path_buf(),
            at: span.map(|s| line_col(text, s.start)),
            upstream,
            field,
            reason: e.message().to_string(),
        }
    })?;
    let base = path.parent().unwrap_or(Path::new(""));
    let mut upstreams: Vec<Upstream> = Vec::new();
    for raw in file.upstream {
        let up = check(path, text, base, raw)?;
        if upstreams.iter().any(|u| u.name == up.name) {
            return Err(CatalogueError {
                path: path.to_path_buf(),
                at: None,
                upstream: Some(up.name.clone()),
                field: Some("name".into()),
                reason: "the name is given to two upstreams".into(),
            });
        }
        upstreams.push(up);
    }
    // A tool of two upstreams, or a kind of two tools, would be ambiguous.
    let mut tools: Vec<(String, String, String)> = Vec::new();
    for up in &upstreams {
        if let Selection::Named(names) = &up.tools {
            for name in names {
                let kind = up.kind_of(name);
                if let Some((other, _, _)) = tools.iter().find(|(_, n, _)| n == name) {
                    return Err(CatalogueError {
                        path: path.to_path_buf(),
                        at: None,
                        upstream: Some(up.name.clone()),
                        field: Some("tools".into()),
                        reason: format!("tool {name:?} is also served by upstream {other:?}"),
                    });
                }
                if let Some((other, tool, _)) = tools.iter().find(|(_, _, k)| *k == kind) {
                    return Err(CatalogueError {
                        path: path.to_path_buf(),
                        at: None,
                        upstream: Some(up.name.clone()),
                        field: Some("kind".into()),
                        reason: format!(
                            "kind {kind:?} of tool {name:?} is also the kind of tool {tool:?} of upstream {other:?}"
                        ),
                    });
                }
                tools.push((up.name.clone(), name.clone(), kind));
            }
        }
    }
    // Every token variable of the catalogue is withheld from every stdio
    // child (a child that sets one in its own `env` gets that value).
    let tokens: Vec<String> = upstreams
        .iter()
        .filter_map(|u| match &u.transport {
            Transport::Http {
                token: Some(TokenSource::Env(var)),
                ..
            } => Some(var.clone()),
            _ => None,
        })
        .collect();
    for up in &mut upstreams {
        if let Transport::Stdio { env, withheld, .. } = &mut up.transport {
            *withheld = tokens
                .iter()
                .filter(|t| !env.contains_key(*t))
                .cloned()
                .collect();
        }
    }
    Ok(upstreams)
}

fn check(
    path: &Path,
    text: &str,
    base: &Path,
    raw: RawUpstream,
) -> Result<Upstream, CatalogueError> {
    let name = raw.name.get_ref().clone();
    let upstream = valid_name(&name, 64).then(|| name.clone());
    let fail = |span: Option<std::ops::Range<usize>>, field: &str, reason: String| CatalogueError {
        path: path.to_path_buf(),
        at: span.map(|s| line_col(text, s.start)),
        upstream: upstream.clone(),
        field: Some(field.to_string()),
        reason,
    };
    if upstream.is_none() {
        return Err(fail(
            Some(raw.name.span()),
            "name",
            format!("{name:?} is not 1-64 letters, digits, '_', '-' or '.'"),
        ));
    }
    let transport = match (&raw.command, &raw.url) {
        (Some(_), Some(url)) => {
            return Err(fail(
                Some(url.span()),
                "url",
                "an upstream has either `command` (a child over stdio) or `url` (Streamable HTTP), not both".into(),
            ));
        }
        (None, None) => {
            return Err(fail(
                Some(raw.name.span()),
                "command",
                "an upstream needs `command` (a child over stdio) or `url` (Streamable HTTP)"
                    .into(),
            ));
        }
        (Some(command), None) => {
            for (field, span) in [
                ("headers", raw.headers.as_ref().map(Spanned::span)),
                ("token_env", raw.token_env.as_ref().map(Spanned::span)),
                ("token_file", raw.token_file.as_ref().map(Spanned::span)),
            ] {
                if let Some(span) = span {
                    return Err(fail(
                        Some(span),
                        field,
                        format!("{field} is for an upstream reached by `url`, not a `command`"),
                    ));
                }
            }
            let program = command.get_ref();
            if program.first().is_none_or(|p| p.trim().is_empty()) {
                return Err(fail(
                    Some(command.span()),
                    "command",
                    "the command is empty: it is [\"program\", \"arg\", …]".into(),
                ));
            }
            let env = raw
                .env
                .as_ref()
                .map(|e| e.get_ref().clone())
                .unwrap_or_default();
            if let Some((k, _)) = env
                .iter()
                .find(|(k, _)| k.is_empty() || k.contains('=') || k.contains('\0'))
            {
                return Err(fail(
                    raw.env.as_ref().map(Spanned::span),
                    "env",
                    format!("{k:?} cannot name an environment variable"),
                ));
            }
            Transport::Stdio {
                command: program.clone(),
                env,
                cwd: raw.cwd.as_ref().map(|c| base.join(c.get_ref())),
                // Filled in once every upstream is read (see `parse`).
                withheld: Vec::new(),
            }
        }
        (None, Some(url)) => {
            for (field, span) in [
                ("env", raw.env.as_ref().map(Spanned::span)),
                ("cwd", raw.cwd.as_ref().map(Spanned::span)),
            ] {
                if let Some(span) = span {
                    return Err(fail(
                        Some(span),
                        field,
                        format!(
                            "{field} is for an upstream started by `command`, not one reached by `url`"
                        ),
                    ));
                }
            }
            let u = url.get_ref();
            if !(u.starts_with("http://") || u.starts_with("https://"))
                || u.contains(char::is_whitespace)
            {
                return Err(fail(
                    Some(url.span()),
                    "url",
                    // Not quoted: a URL may carry a password or a key.
                    "not an http:// or https:// URL".to_string(),
                ));
            }
            // Parsed once here, as the transport sends them, rather than at
            // every call (where a bad one could only fail the call).
            let mut headers = HashMap::new();
            let raw_headers = raw
                .headers
                .as_ref()
                .map(|h| h.get_ref().clone())
                .unwrap_or_default();
            for (k, v) in &raw_headers {
                let span = raw.headers.as_ref().map(Spanned::span);
                let name = match http::HeaderName::from_bytes(k.as_bytes()) {
                    Ok(n) if !k.is_empty() => n,
                    _ => {
                        return Err(fail(
                            span,
                            "headers",
                            format!("{k:?} is not an HTTP header name"),
                        ));
                    }
                };
                if name == http::header::AUTHORIZATION {
                    return Err(fail(
                        span,
                        "headers",
                        "the Authorization header is not taken from the catalogue text: name the token with token_env or token_file".into(),
                    ));
                }
                if v.chars().any(|c| c.is_control() && c != '\t') {
                    return Err(fail(
                        span,
                        "headers",
                        format!("the value of header {k:?} holds a control character"),
                    ));
                }
                let Ok(value) = http::HeaderValue::from_str(v) else {
                    return Err(fail(
                        span,
                        "headers",
                        format!("the value of header {k:?} cannot be sent in an HTTP header"),
                    ));
                };
                headers.insert(name, value);
            }
            let token = match (&raw.token_env, &raw.token_file) {
                (Some(_), Some(f)) => {
                    return Err(fail(
                        Some(f.span()),
                        "token_file",
                        "give the token by token_env or token_file, not both".into(),
                    ));
                }
                (Some(e), None) if e.get_ref().is_empty() || e.get_ref().contains(['=', '\0']) => {
                    return Err(fail(
                        Some(e.span()),
                        "token_env",
                        format!("{:?} cannot name an environment variable", e.get_ref()),
                    ));
                }
                (Some(e), None) => Some(TokenSource::Env(e.get_ref().clone())),
                (None, Some(f)) => Some(TokenSource::File(base.join(f.get_ref()))),
                (None, None) => None,
            };
            Transport::Http {
                url: u.clone(),
                headers,
                token,
            }
        }
    };
    let tools = match &raw.tools {
        None => {
            return Err(fail(
                Some(raw.name.span()),
                "tools",
                "say which tools to serve: tools = [\"name\", …] or tools = \"*\"".into(),
            ));
        }
        Some(t) => match t.get_ref() {
            toml::Value::String(s) if s == "*" => Selection::All,
            toml::Value::Array(items) if !items.is_empty() => {
                let mut names: Vec<String> = Vec::new();
                for item in items {
                    let Some(n) = item.as_str().filter(|n| valid_name(n, 128)) else {
                        return Err(fail(
                            Some(t.span()),
                            "tools",
                            format!(
                                "{item} is not a tool name (1-128 letters, digits, '_', '-' or '.')"
                            ),
                        ));
                    };
                    if names.iter().any(|x| x == n) {
                        return Err(fail(
                            Some(t.span()),
                            "tools",
                            format!("tool {n:?} is named twice"),
                        ));
                    }
                    names.push(n.to_string());
                }
                Selection::Named(names)
            }
            _ => {
                return Err(fail(
                    Some(t.span()),
                    "tools",
                    "tools is a non-empty list of tool names, or \"*\" for every tool".into(),
                ));
            }
        },
    };
    let duration =
        |d: &Option<Spanned<String>>, field: &str| -> Result<Option<Duration>, CatalogueError> {
            d.as_ref()
                .map(|d| {
                    rudder_model::duration::parse_duration(d.get_ref())
                        .map_err(|e| fail(Some(d.span()), field, e.to_string()))
                })
                .transpose()
        };
    let attempts = |a: &Option<Spanned<i64>>| -> Result<Option<u32>, CatalogueError> {
        match a {
            None => Ok(None),
            Some(a) => match u32::try_from(*a.get_ref()) {
                Ok(n) if (1..=MAX_ATTEMPTS).contains(&n) => Ok(Some(n)),
                _ => Err(fail(
                    Some(a.span()),
                    "attempts",
                    format!("attempts is {}; it takes 1 to {MAX_ATTEMPTS}", a.get_ref()),
                )),
            },
        }
    };
    let defaults = ToolSettings {
        kind: None,
        ttl: duration(&raw.ttl, "ttl")?,
        poll_interval: duration(&raw.poll_interval, "poll_interval")?,
        wait: duration(&raw.wait, "wait")?,
        idempotent: raw.idempotent,
        attempts: attempts(&raw.attempts)?,
    };
    let mut per_tool = BTreeMap::new();
    for (tool, settings) in &raw.tool {
        if !tools.serves(tool) {
            return Err(fail(
                Some(settings.span()),
                "tool",
                format!("[upstream.tool.{tool}] sets a tool that `tools` does not serve"),
            ));
        }
        let s = settings.get_ref();
        let kind = match &s.kind {
            Some(k) => {
                rudder_model::task::check_kind(k.get_ref()).map_err(|e| {
                    fail(
                        Some(k.span()),
                        "kind",
                        format!("kind {:?} cannot be used: {e}", k.get_ref()),
                    )
                })?;
                Some(k.get_ref().clone())
            }
            None => None,
        };
        per_tool.insert(
            tool.clone(),
            ToolSettings {
                kind,
                ttl: duration(&s.ttl, "ttl")?,
                poll_interval: duration(&s.poll_interval, "poll_interval")?,
                wait: duration(&s.wait, "wait")?,
                idempotent: s.idempotent,
                attempts: attempts(&s.attempts)?,
            },
        );
    }
    let up = Upstream {
        name,
        transport,
        tools,
        defaults,
        per_tool,
    };
    if let Selection::Named(names) = &up.tools {
        for n in names {
            let kind = up.kind_of(n);
            rudder_model::task::check_kind(&kind).map_err(|e| {
                fail(
                    Some(raw.name.span()),
                    "kind",
                    format!("tool {n:?}: kind {kind:?} cannot be used: {e}"),
                )
            })?;
        }
    }
    Ok(up)
}

/// MCP's names: 1-`max` of `A-Za-z0-9_-.`.
pub fn valid_name(name: &str, max: usize) -> bool {
    (1..=max).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// For an error at `offset` the TOML parser reported: the upstream whose
/// table holds it (its name, as far as the text says) and the key on its
/// line.
fn where_in(text: &str, offset: usize) -> (Option<String>, Option<String>) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let field = line
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"').to_string())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    let upstream = before.rfind("[[upstream]]").and_then(|at| {
        text[at..]
            .lines()
            .skip(1)
            .take_while(|l| !l.trim_start().starts_with('['))
            .find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == "name").then(|| v.trim().trim_matches('"').to_string())
            })
    });
    (upstream, field)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Vec<Upstream> {
        parse(Path::new("/cat/tools.toml"), text).expect("accepted")
    }

    fn err(text: &str) -> CatalogueError {
        parse(Path::new("tools.toml"), text).expect_err("refused")
    }

    #[test]
    fn a_stdio_upstream_with_per_tool_settings() {
        let u = ok(r#"
[[tool]]
name = "local"

[[upstream]]
name = "bridge"
command = ["python3", "bridge.py"]
env = { A = "1" }
cwd = "srv"
tools = ["diagnose", "greet"]
attempts = 5

[upstream.tool.diagnose]
kind = "diag"
idempotent = true
ttl = "1h"
"#);
        assert_eq!(u.len(), 1);
        let b = &u[0];
        assert_eq!(
            b.transport,
            Transport::Stdio {
                command: vec!["python3".into(), "bridge.py".into()],
                env: [("A".to_string(), "1".to_string())].into(),
                cwd: Some(PathBuf::from("/cat/srv")),
                withheld: Vec::new(),
            }
        );
        assert_eq!(b.kind_of("diagnose"), "diag");
        assert_eq!(b.kind_of("greet"), "greet");
        assert_eq!(b.settings("diagnose").max_attempts(), 5);
        assert_eq!(b.settings("diagnose").ttl, Some(Duration::from_secs(3600)));
        assert_eq!(
            b.settings("greet").max_attempts(),
            1,
            "not idempotent: one attempt"
        );
    }

    #[test]
    fn an_http_upstream_takes_its_token_from_outside_the_text() {
        let u = ok(r#"
[[upstream]]
name = "remote"
url = "https://mcp.example.com/mcp"
headers = { X-Team = "oncall" }
token_file = "remote.token"
tools = "*"
"#);
        match &u[0].transport {
            Transport::Http { token, headers, .. } => {
                assert_eq!(
                    token,
                    &Some(TokenSource::File(PathBuf::from("/cat/remote.token")))
                );
                assert_eq!(
                    headers
                        .get(&http::HeaderName::from_static("x-team"))
                        .and_then(|v| v.to_str().ok()),
                    Some("oncall")
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(u[0].tools, Selection::All);
        let e = err(
            "[[upstream]]\nname = \"r\"\nurl = \"http://h/mcp\"\nheaders = { Authorization = \"Bearer x\" }\ntools = \"*\"\n",
        );
        assert_eq!(e.field.as_deref(), Some("headers"));
        assert!(e.reason.contains("token_env or token_file"), "{e}");
    }

    #[test]
    fn every_token_variable_is_withheld_from_every_stdio_child() {
        let u = ok(r#"
[[upstream]]
name = "local"
command = ["server"]
tools = "*"

[[upstream]]
name = "own"
command = ["server"]
env = { B_TOKEN = "its own" }
tools = "*"

[[upstream]]
name = "a"
url = "https://a.example.com/mcp"
token_env = "A_TOKEN"
tools = "*"

[[upstream]]
name = "b"
url = "https://b.example.com/mcp"
token_env = "B_TOKEN"
tools = "*"
"#);
        let withheld = |i: usize| match &u[i].transport {
            Transport::Stdio { withheld, .. } => withheld.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(withheld(0), ["A_TOKEN", "B_TOKEN"]);
        // A variable the upstream's own env sets is that value, not ours.
        assert_eq!(withheld(1), ["A_TOKEN"]);
    }

    #[test]
    fn a_refused_url_is_not_quoted() {
        let e = err(
            "[[upstream]]\nname = \"b\"\nurl = \"ftp://u:hunter2secret@x/?key=k3y\"\ntools = \"*\"\n",
        );
        assert_eq!(e.field.as_deref(), Some("url"));
        let shown = e.described();
        assert!(
            !shown.contains("hunter2secret") && !shown.contains("k3y"),
            "{shown}"
        );
    }

    #[test]
    fn errors_name_the_file_the_upstream_and_the_field() {
        let e = err(
            "[[upstream]]\nname = \"bridge\"\ncommand = [\"x\"]\ntools = [\"a\"]\nattempts = 0\n",
        );
        assert_eq!(e.upstream.as_deref(), Some("bridge"));
        assert_eq!(e.field.as_deref(), Some("attempts"));
        assert_eq!(e.at, Some((5, 12)));
        assert!(
            e.to_string()
                .starts_with("tools.toml:5:12: upstream \"bridge\", field \"attempts\": "),
            "{e}"
        );
        let e = err(
            "[[upstream]]\nname = \"bridge\"\ncommand = [\"x\"]\ntools = [\"a\"]\ntoken = \"s3cret\"\n",
        );
        assert_eq!(e.upstream.as_deref(), Some("bridge"));
        assert_eq!(e.field.as_deref(), Some("token"));
        assert!(e.reason.contains("unknown field"), "{e}");
        let e = err(
            "[[upstream]]\nname = \"b\"\ncommand = [\"x\"]\nurl = \"http://h\"\ntools = \"*\"\n",
        );
        assert_eq!(e.field.as_deref(), Some("url"));
        let e = err("[[upstream]]\nname = \"b\"\ncommand = [\"x\"]\n");
        assert_eq!(e.field.as_deref(), Some("tools"));
        let e = err("[[upstream]]\nname = \"b\"\ncommand = []\ntools = \"*\"\n");
        assert_eq!(e.field.as_deref(), Some("command"));
        let e = err(
            "[[upstream]]\nname = \"b\"\ncommand = [\"x\"]\ntools = [\"a\"]\n[upstream.tool.z]\nidempotent = true\n",
        );
        assert_eq!(e.field.as_deref(), Some("tool"));
        let e = err(
            "[[upstream]]\nname = \"b\"\ncommand = [\"x\"]\ntools = [\"a\"]\nwait = \"soon\"\n",
        );
        assert_eq!(e.field.as_deref(), Some("wait"));
    }

    #[test]
    fn a_tool_or_kind_of_two_upstreams_is_refused() {
        let e = err(
            "[[upstream]]\nname = \"a\"\ncommand = [\"x\"]\ntools = [\"t\"]\n\n[[upstream]]\nname = \"b\"\ncommand = [\"y\"]\ntools = [\"t\"]\n",
        );
        assert_eq!(e.upstream.as_deref(), Some("b"));
        assert!(e.reason.contains("also served by upstream \"a\""), "{e}");
        let e = err(
            "[[upstream]]\nname = \"a\"\ncommand = [\"x\"]\ntools = [\"t\"]\n\n[[upstream]]\nname = \"a\"\ncommand = [\"y\"]\ntools = [\"u\"]\n",
        );
        assert_eq!(e.field.as_deref(), Some("name"));
    }
}
