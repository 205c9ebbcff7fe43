//! Legacy (2025-11-25) HTTP sessions, bounded.
//!
//! A client that `initialize`s gets a session that rmcp keeps in memory
//! (about 58 KB each) until it is closed or idle for [`IDLE`]. Without a
//! bound, a burst of `initialize`s (3,000 in 4 s) held 170 MB. At most
//! [`MAX_SESSIONS`] are kept: a new one closes the one used least
//! recently, whose client then gets HTTP 404 and initializes again, as the
//! transport spec tells a client to do for an unknown session.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};

/// How many legacy sessions are kept at once.
pub const MAX_SESSIONS: usize = 256;
/// A legacy session unused this long is closed.
pub const IDLE: Duration = Duration::from_secs(5 * 60);

/// rmcp's in-memory sessions, at most `cap` of them.
pub struct Bounded {
    inner: LocalSessionManager,
    cap: usize,
    /// When each live session was last used.
    used: Mutex<HashMap<SessionId, Instant>>,
    /// Held from making room to the new session's creation, so that
    /// initializes arriving together cannot all see room for one.
    creating: tokio::sync::Mutex<()>,
}

impl Bounded {
    /// At most `cap` sessions (at least one).
    pub fn new(cap: usize) -> Bounded {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(IDLE);
        Bounded {
            inner,
            cap: cap.max(1),
            used: Mutex::new(HashMap::new()),
            creating: tokio::sync::Mutex::new(()),
        }
    }

    fn used(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Instant>> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn touch(&self, id: &SessionId) {
        if let Some(t) = self.used().get_mut(id) {
            *t = Instant::now();
        }
    }

    /// Close the least recently used sessions until one more fits.
    async fn make_room(&self) {
        loop {
            let live: Vec<SessionId> = self.inner.sessions.read().await.keys().cloned().collect();
            if live.len() < self.cap {
                return;
            }
            let oldest = {
                let mut used = self.used();
                // Sessions rmcp ended itself (idle, closed) are forgotten.
                used.retain(|id, _| live.contains(id));
                live.iter().min_by_key(|id| used.get(*id).copied()).cloned()
            };
            let Some(oldest) = oldest else { return };
            self.used().remove(&oldest);
            if SessionManager::close_session(&self.inner, &oldest)
                .await
                .is_err()
            {
                // Closing failed: drop it from the map all the same, so the
                // bound holds.
                self.inner.sessions.write().await.remove(&oldest);
            }
        }
    }
}

impl SessionManager for Bounded {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _one_at_a_time = self.creating.lock().await;
        self.make_room().await;
        let (id, transport) = SessionManager::create_session(&self.inner).await?;
        self.used().insert(id.clone(), Instant::now());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        SessionManager::initialize_session(&self.inner, id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        SessionManager::has_session(&self.inner, id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.used().remove(id);
        SessionManager::close_session(&self.inner, id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        SessionManager::create_stream(&self.inner, id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        SessionManager::accept_message(&self.inner, id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        SessionManager::create_standalone_stream(&self.inner, id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        SessionManager::resume(&self.inner, id, last_event_id).await
    }
}
