//! What the MCP face's transports and its server share about a request:
//! the size limit, the HTTP request slot a request holds, and a JSON-RPC
//! error as an HTTP answer. Apart from `http` so that the stdio transport
//! (`listen`) and the server reach them without importing the HTTP face.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode, header};
use tokio::sync::OwnedSemaphorePermit;

/// The largest request body taken, in bytes.
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// The request slot an HTTP request holds, in its extensions (rmcp hands
/// a request's `http::request::Parts` to the handler).
#[derive(Clone)]
pub struct Slot(Arc<std::sync::Mutex<Option<OwnedSemaphorePermit>>>);

impl Slot {
    /// The slot of a request that holds `permit`.
    pub(crate) fn new(permit: OwnedSemaphorePermit) -> Slot {
        Slot(Arc::new(std::sync::Mutex::new(Some(permit))))
    }

    /// Give the slot back (once; later calls do nothing).
    pub fn release(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

pub(crate) fn error(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message},
    });
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The `reason` of an HTTP `tasks/cancel` request, in its extensions:
/// rmcp 3.11's `CancelTaskParams` drops fields it does not know, and the
/// trail records why a task was cancelled.
#[derive(Debug, Clone)]
pub struct CancelReason(pub String);
