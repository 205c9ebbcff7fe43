//! Where an event goes: a program (`--exec`) or a webhook (`--webhook`).
//! One [`Sink::deliver`] is one attempt; the notifier retries (see
//! `lib.rs`). Task text is data here: the program gets no shell and its
//! arguments are the user's alone, the event goes on its standard input
//! and, sanitised, in its environment; a webhook gets it as a JSON body.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use rudder_model::text::sanitize;

/// Why a notifier could not be set up (before anything is delivered).
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("--webhook: {0}")]
    Url(String),
    #[error("{flag}: {message}")]
    Header { flag: &'static str, message: String },
    #[error("the HTTPS client could not be set up: {0}")]
    Client(String),
}

/// Where a header's value (a secret) comes from: never the command line.
#[derive(Debug, Clone)]
pub enum Secret {
    /// The environment variable of this name.
    Env(String),
    /// The file at this path (one trailing line break dropped).
    File(PathBuf),
}

impl Secret {
    /// The value; the error names the variable or file, never the value.
    fn read(&self, flag: &'static str) -> Result<String, SinkError> {
        let fail = |message: String| SinkError::Header { flag, message };
        match self {
            Secret::Env(var) => std::env::var(var).map_err(|e| {
                fail(match e {
                    std::env::VarError::NotPresent => format!("${var} is not set"),
                    std::env::VarError::NotUnicode(_) => format!("${var} is not UTF-8"),
                })
            }),
            Secret::File(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
                let text = text.strip_suffix('\n').unwrap_or(&text);
                Ok(text.strip_suffix('\r').unwrap_or(text).to_string())
            }
        }
    }
}

/// A header of the webhook's request and where its value comes from.
#[derive(Debug, Clone)]
pub struct HeaderSpec {
    pub name: String,
    /// Prefixed to the secret (`Bearer ` for `--bearer-*`).
    pub prefix: &'static str,
    pub value: Secret,
    /// The option it came from, for messages.
    pub flag: &'static str,
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    Delivered,
    /// Worth another try later (what went wrong).
    Retry(String),
    /// Not worth another try (what went wrong): a webhook's 4xx but 429.
    GiveUp(String),
}

/// Where events go.
#[derive(Clone)]
pub enum Sink {
    Exec {
        program: OsString,
        args: Vec<OsString>,
    },
    Webhook(Arc<Webhook>),
}

/// A webhook, ready to post.
pub struct Webhook {
    url: reqwest::Url,
    shown: String,
    client: reqwest::Client,
    headers: reqwest::header::HeaderMap,
}

/// `url` as logs show it: scheme, host and port only. Credentials may sit
/// in the user part, the query, or the path itself (a chat's incoming
/// webhook URL is its secret), so none of them is shown.
pub fn shown_url(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or("?");
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let tail = if url.path() == "/" && url.query().is_none() {
        ""
    } else {
        "/…"
    };
    format!("{}://{host}{port}{tail}", url.scheme())
}

impl Webhook {
    /// A webhook posting to `url` with `headers`, each attempt bounded by
    /// `timeout`. Secrets are read now: a missing one is an error before
    /// the notifier starts.
    pub fn new(url: &str, headers: &[HeaderSpec], timeout: Duration) -> Result<Self, SinkError> {
        let url = reqwest::Url::parse(url).map_err(|e| SinkError::Url(format!("{e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(SinkError::Url(format!(
                "{}: only http and https URLs are posted to",
                shown_url(&url)
            )));
        }
        let mut map = reqwest::header::HeaderMap::new();
        for h in headers {
            let name =
                reqwest::header::HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| {
                    SinkError::Header {
                        flag: h.flag,
                        message: format!("{:?} is not a header name", h.name),
                    }
                })?;
            let secret = h.value.read(h.flag)?;
            let mut value =
                reqwest::header::HeaderValue::from_str(&format!("{}{secret}", h.prefix)).map_err(
                    |_| SinkError::Header {
                        flag: h.flag,
                        message: "the value holds characters a header cannot".into(),
                    },
                )?;
            // Kept out of reqwest's Debug output.
            value.set_sensitive(true);
            map.insert(name, value);
        }
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| SinkError::Client(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(timeout)
            .connect_timeout(timeout)
            // A redirect would carry the secret headers elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| SinkError::Client(e.to_string()))?;
        Ok(Webhook {
            shown: shown_url(&url),
            url,
            client,
            headers: map,
        })
    }

    /// The URL as logs show it.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    async fn post(&self, body: Vec<u8>) -> Attempt {
        let sent = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await;
        match sent {
            Ok(r) => {
                let status = r.status();
                if status.is_success() {
                    Attempt::Delivered
                } else if status.as_u16() == 429 || status.is_server_error() {
                    Attempt::Retry(format!("{} answered {status}", self.shown))
                } else {
                    Attempt::GiveUp(format!("{} answered {status}", self.shown))
                }
            }
            // reqwest's message names the URL: say what happened without it.
            Err(e) => {
                let what = if e.is_timeout() {
                    "timed out"
                } else if e.is_connect() {
                    "could not be reached"
                } else {
                    "failed"
                };
                Attempt::Retry(format!("{} {what}", self.shown))
            }
        }
    }
}

impl Sink {
    /// What the logs call it: the program's name, or the URL as shown.
    pub fn describe(&self) -> String {
        match self {
            Sink::Exec { program, .. } => program.to_string_lossy().into_owned(),
            Sink::Webhook(w) => w.shown().to_string(),
        }
    }

    /// One attempt to deliver `event` (its JSON text `body`), bounded by
    /// `timeout` for a program (a webhook's client has its own).
    pub async fn deliver(&self, event: &Value, body: Vec<u8>, timeout: Duration) -> Attempt {
        match self {
            Sink::Exec { program, args } => run(program, args, event, body, timeout).await,
            Sink::Webhook(w) => w.post(body).await,
        }
    }
}

/// Run `program` with `args` (no shell), the event on its standard input
/// and in its environment; its output goes to the notifier's standard
/// error.
async fn run(
    program: &OsString,
    args: &[OsString],
    event: &Value,
    body: Vec<u8>,
    timeout: Duration,
) -> Attempt {
    let name = program.to_string_lossy();
    let env = |k: &str| sanitize(event.get(k).and_then(Value::as_str).unwrap_or("")).into_owned();
    let stderr = || {
        std::io::stderr()
            .lock()
            .as_fd_clone()
            .map(Stdio::from)
            .unwrap_or_else(|_| Stdio::null())
    };
    let mut cmd = tokio::process::Command::new(program);
    for name in rudder_store::WITHHELD_FROM_CHILDREN {
        cmd.env_remove(name);
    }
    cmd.args(args)
        .env("RUDDER_TASK_ID", env("task_id"))
        .env("RUDDER_STATUS", env("status"))
        .env("RUDDER_TITLE", env("title"))
        .env("RUDDER_EVENT", env("event"))
        .stdin(Stdio::piped())
        .stdout(stderr())
        .stderr(stderr())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Attempt::Retry(format!("{name} could not be started: {e}")),
    };
    let mut stdin = child.stdin.take();
    let done = tokio::time::timeout(timeout, async {
        if let Some(mut input) = stdin.take() {
            // A program that does not read its input is its business.
            let _ = input.write_all(&body).await;
            let _ = input.write_all(b"\n").await;
            drop(input);
        }
        child.wait().await
    })
    .await;
    match done {
        Ok(Ok(status)) if status.success() => Attempt::Delivered,
        Ok(Ok(status)) => Attempt::Retry(format!("{name} exited with {status}")),
        Ok(Err(e)) => Attempt::Retry(format!("{name}: {e}")),
        Err(_) => {
            let _ = child.kill().await;
            Attempt::Retry(format!(
                "{name} did not exit within {}",
                humantime::format_duration(timeout)
            ))
        }
    }
}

/// A clone of a locked standard stream's descriptor, for a child's output.
trait FdClone {
    fn as_fd_clone(&self) -> std::io::Result<std::os::fd::OwnedFd>;
}

impl FdClone for std::io::StderrLock<'_> {
    fn as_fd_clone(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        self.as_fd().try_clone_to_owned()
    }
}
