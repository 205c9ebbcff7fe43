//! Legacy (2025-11-25) HTTP sessions, bounded.
//!
//! A client that `initialize`s gets a session that rmcp keeps in memory
//! (about 58 KB each). Without a bound, a burst of `initialize`s (3,000 in
//! 4 s) held 170 MB. At most [`MAX_SESSIONS`] are kept: a new one closes
//! the one used least recently; and a session unused for [`IDLE`] (no
//! request, no stream open to it, no message sent on one) is closed. The
//! client of a closed session gets HTTP 404 and initializes again, as the
//! transport spec tells a client to do for an unknown session.
//!
//! The idle clock is ours, and rmcp's keep-alive is off: it stopped an
//! idle session's worker but left the session listed, so its client's
//! next request was answered 500 (the worker is gone), which tells a
//! client nothing it can act on; and it counted a request that waits
//! without a message for longer than the keep-alive (an inline wait of
//! a tool's `sync_wait`, which the catalogue does not bound) as idle.
//! Idle sessions are closed when asked about, when room is made, and by
//! [`sweep_every`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
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

/// A live session's use.
#[derive(Debug, Clone, Copy)]
struct Use {
    /// Its last request, or the last message or end of a stream to it.
    last: Instant,
    /// Streams open to it (a request being answered, a standalone stream).
    open: usize,
}

type Uses = Arc<Mutex<HashMap<SessionId, Use>>>;

fn uses(map: &Uses) -> std::sync::MutexGuard<'_, HashMap<SessionId, Use>> {
    map.lock().unwrap_or_else(|e| e.into_inner())
}

/// Session `id` is used now.
fn touch(map: &Uses, id: &SessionId) {
    if let Some(u) = uses(map).get_mut(id) {
        u.last = Instant::now();
    }
}

/// Counts a stream open to a session while it lives, and its messages as
/// use.
struct OpenStream {
    used: Uses,
    id: SessionId,
}

impl OpenStream {
    fn new(used: &Uses, id: &SessionId) -> OpenStream {
        if let Some(u) = uses(used).get_mut(id) {
            u.open += 1;
            u.last = Instant::now();
        }
        OpenStream {
            used: Arc::clone(used),
            id: id.clone(),
        }
    }

    fn touch(&self) {
        touch(&self.used, &self.id);
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        if let Some(u) = uses(&self.used).get_mut(&self.id) {
            u.open = u.open.saturating_sub(1);
            u.last = Instant::now();
        }
    }
}

/// rmcp's in-memory sessions, at most `cap` of them, each closed once idle.
pub struct Bounded {
    inner: LocalSessionManager,
    cap: usize,
    idle: Duration,
    /// The use of each live session.
    used: Uses,
    /// Held from making room to the new session's creation, so that
    /// initializes arriving together cannot all see room for one.
    creating: tokio::sync::Mutex<()>,
}

impl Bounded {
    /// At most `cap` sessions (at least one), each closed after [`IDLE`]
    /// unused.
    pub fn new(cap: usize) -> Bounded {
        Bounded::with_idle(cap, IDLE)
    }

    /// At most `cap` sessions (at least one), each closed after `idle`
    /// unused.
    pub fn with_idle(cap: usize, idle: Duration) -> Bounded {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = None;
        Bounded {
            inner,
            cap: cap.max(1),
            idle,
            used: Arc::new(Mutex::new(HashMap::new())),
            creating: tokio::sync::Mutex::new(()),
        }
    }

    fn touch(&self, id: &SessionId) {
        touch(&self.used, id);
    }

    /// Whether `use_` is of a session unused for the idle time.
    fn idle(&self, use_: &Use) -> bool {
        use_.open == 0 && use_.last.elapsed() >= self.idle
    }

    /// `stream`, to session `id`, counted as its use while it lives.
    fn counted<S: Stream + Send + Sync + 'static>(
        &self,
        id: &SessionId,
        stream: S,
    ) -> impl Stream<Item = S::Item> + Send + Sync + 'static {
        let open = OpenStream::new(&self.used, id);
        stream.map(move |item| {
            open.touch();
            item
        })
    }

    /// Close session `id`; gone from the list even if closing failed, so
    /// the bound holds and its client is answered 404.
    async fn end(&self, id: &SessionId) {
        uses(&self.used).remove(id);
        self.close_inner(id).await;
    }

    /// Close session `id` in rmcp's list (its use already forgotten).
    async fn close_inner(&self, id: &SessionId) {
        if SessionManager::close_session(&self.inner, id)
            .await
            .is_err()
        {
            self.inner.sessions.write().await.remove(id);
        }
    }

    /// Close every idle session.
    pub async fn close_idle(&self) {
        let idle: Vec<SessionId> = {
            let mut used = uses(&self.used);
            let idle: Vec<SessionId> = used
                .iter()
                .filter(|(_, u)| self.idle(u))
                .map(|(id, _)| id.clone())
                .collect();
            for id in &idle {
                used.remove(id);
            }
            idle
        };
        for id in idle {
            self.close_inner(&id).await;
        }
    }

    /// Close the idle sessions, then the least recently used ones until
    /// one more fits.
    async fn make_room(&self) {
        self.close_idle().await;
        loop {
            let live: Vec<SessionId> = self.inner.sessions.read().await.keys().cloned().collect();
            if live.len() < self.cap {
                return;
            }
            let oldest = {
                let mut used = uses(&self.used);
                used.retain(|id, _| live.contains(id));
                // A session being answered is closed last.
                live.iter()
                    .min_by_key(|id| used.get(*id).map(|u| (u.open > 0, u.last)))
                    .cloned()
            };
            let Some(oldest) = oldest else { return };
            self.end(&oldest).await;
        }
    }
}

/// Close `sessions`' idle sessions every `period` while they live, on
/// the current tokio runtime (without one, an idle session is closed when
/// it is next asked about or room is made).
pub fn sweep_every(sessions: Weak<Bounded>, period: Duration) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(sessions) = sessions.upgrade() else {
                return;
            };
            sessions.close_idle().await;
        }
    });
}

impl SessionManager for Bounded {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _one_at_a_time = self.creating.lock().await;
        self.make_room().await;
        let (id, transport) = SessionManager::create_session(&self.inner).await?;
        uses(&self.used).insert(
            id.clone(),
            Use {
                last: Instant::now(),
                open: 0,
            },
        );
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
        // Asked about by a request: idle, it is closed (404); else the
        // request is its use, from now (so that nothing closes it as idle
        // before the request reaches it).
        let idle = {
            let mut used = uses(&self.used);
            match used.get_mut(id) {
                Some(u) if self.idle(u) => {
                    used.remove(id);
                    true
                }
                Some(u) => {
                    u.last = Instant::now();
                    false
                }
                None => false,
            }
        };
        if idle {
            self.close_inner(id).await;
            return Ok(false);
        }
        SessionManager::has_session(&self.inner, id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        uses(&self.used).remove(id);
        SessionManager::close_session(&self.inner, id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        let stream = SessionManager::create_stream(&self.inner, id, message).await?;
        Ok(self.counted(id, stream))
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
        let stream = SessionManager::create_standalone_stream(&self.inner, id).await?;
        Ok(self.counted(id, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = SessionManager::resume(&self.inner, id, last_event_id).await?;
        Ok(self.counted(id, stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_in_use_is_kept_and_one_unused_for_the_idle_time_is_closed() {
        let kept = Bounded::with_idle(4, Duration::from_secs(3600));
        let (id, _transport) = kept.create_session().await.unwrap();
        assert!(kept.has_session(&id).await.unwrap());

        let idle = Bounded::with_idle(4, Duration::ZERO);
        let (id, _transport) = idle.create_session().await.unwrap();
        assert!(
            !idle.has_session(&id).await.unwrap(),
            "idle for the idle time"
        );
        assert!(
            idle.inner.sessions.read().await.is_empty(),
            "closed, not only hidden"
        );
    }

    #[tokio::test]
    async fn a_session_with_a_stream_open_is_in_use_until_the_stream_ends() {
        let b = Bounded::with_idle(4, Duration::ZERO);
        let (id, _transport) = b.create_session().await.unwrap();
        let stream = b.counted(&id, futures::stream::pending::<()>());
        assert!(
            b.has_session(&id).await.unwrap(),
            "a request being answered"
        );
        drop(stream);
        assert!(
            !b.has_session(&id).await.unwrap(),
            "idle from the stream's end"
        );
    }

    #[tokio::test]
    async fn idle_sessions_are_closed_with_nobody_asking() {
        let b = Arc::new(Bounded::with_idle(4, Duration::ZERO));
        let (_id, _transport) = b.create_session().await.unwrap();
        sweep_every(Arc::downgrade(&b), Duration::from_millis(5));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !b.inner.sessions.read().await.is_empty() {
            assert!(
                Instant::now() < deadline,
                "the idle session was never closed"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn every_idle_session_is_closed_when_one_is_made() {
        // Every session is idle at once but the one with a stream open.
        let b = Bounded::with_idle(3, Duration::ZERO);
        let (_first, _t1) = b.create_session().await.unwrap();
        let (_second, _t2) = b.create_session().await.unwrap();
        let (busy, _t3) = b.create_session().await.unwrap();
        let _answering = b.counted(&busy, futures::stream::pending::<()>());
        let (fourth, _t4) = b.create_session().await.unwrap();
        let mut live: Vec<SessionId> = b.inner.sessions.read().await.keys().cloned().collect();
        live.sort();
        let mut want = vec![busy, fourth];
        want.sort();
        assert_eq!(
            live, want,
            "both idle ones closed, not only the one room was needed for"
        );
    }

    #[tokio::test]
    async fn the_least_recently_used_to_close_is_one_with_no_stream_open() {
        let b = Bounded::with_idle(2, Duration::from_secs(3600));
        let (busy, _t1) = b.create_session().await.unwrap();
        let _answering = b.counted(&busy, futures::stream::pending::<()>());
        let (quiet, _t2) = b.create_session().await.unwrap();
        let (_third, _t3) = b.create_session().await.unwrap();
        let live = b.inner.sessions.read().await;
        assert!(live.contains_key(&busy), "a session being answered is kept");
        assert!(!live.contains_key(&quiet));
    }
}
