//! The seam between RPC callers/servers and a message transport. Bodies are opaque bytes
//! (the rpc module encodes its versioned MessagePack envelope); a transport only moves them.
//!
//! This module owns the contract only: it must not know queue names, brokers or encodings.
//! Implementations live beside it (`amqp.rs` for RabbitMQ).
use std::{fmt, future::Future, sync::Arc, time::Duration};

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// Nobody consumes the host's queue (e.g. the conductor is gone): the broker returned the message.
    #[error("no conductor is listening on {0}")]
    Unroutable(String),
    #[error("RPC to {host} timed out after {after:?}")]
    Timeout { host: String, after: Duration },
    #[error("message broker unavailable: {0}")]
    Unavailable(String),
    /// The host's queue went away while the call waited for its reply: the conductor died or
    /// stopped with the request delivered or queued, so it may or may not have been applied.
    #[error("conductor {0} went away before it replied")]
    Lost(String),
}

/// What a server does with one request body.
#[async_trait::async_trait]
pub trait RequestHandler: Send + Sync + 'static {
    /// Returns the reply body, or a [`Rejection`] when the body cannot be decoded.
    async fn handle(&self, body: Vec<u8>) -> Result<Vec<u8>, Rejection>;
}

/// A request its handler cannot take (it cannot decode it): logged and rejected without
/// requeue, so it cannot come back forever. If the handler still has something to tell the
/// caller (`reply`), that is sent first, so the caller fails at once instead of at its timeout.
#[derive(Debug)]
pub struct Rejection {
    pub reason: String,
    pub reply: Option<Vec<u8>>,
}

impl Rejection {
    /// A rejection with nothing for the caller.
    pub fn silent(reason: impl Into<String>) -> Self {
        Rejection {
            reason: reason.into(),
            reply: None,
        }
    }
}

#[async_trait::async_trait]
pub trait Transport: Send + Sync + 'static {
    /// Request/reply: deliver `body` to `host`'s queue and wait at most `timeout` for the reply.
    async fn call(
        &self,
        host: &str,
        request_id: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError>;

    /// Whether the transport's connection (to its broker) is up now, for the health check;
    /// None for a transport without one (the in-process transport).
    fn connected(&self) -> Option<bool> {
        None
    }

    /// Fire and forget, but confirmed by the broker (publisher confirms) and routable.
    async fn cast(&self, host: &str, request_id: &str, body: Vec<u8>)
    -> Result<(), TransportError>;

    /// Attaches a consumer to `host`'s queue and returns once calls to `host` route.
    ///
    /// Nothing is handled until [`Listener::run`] is awaited; requests that arrive in
    /// between wait for it. Dropping the listener without running it detaches the consumer.
    /// The other arguments mean what they mean for [`Transport::serve`].
    async fn listen(
        &self,
        host: &str,
        handler: Arc<dyn RequestHandler>,
        max_in_flight: usize,
        shutdown: CancellationToken,
    ) -> Result<Listener, TransportError>;

    /// Consume `host`'s queue until `shutdown` is cancelled, handing each request to `handler`
    /// concurrently (at most `max_in_flight` at once). Returns when the consumer has stopped and every
    /// in-flight request has been replied to and acked.
    ///
    /// A caller that must know when calls start to route (tests, a conductor announcing
    /// itself) uses [`Transport::listen`] and then [`Listener::run`], which is what this does.
    async fn serve(
        &self,
        host: &str,
        handler: Arc<dyn RequestHandler>,
        max_in_flight: usize,
        shutdown: CancellationToken,
    ) -> Result<(), TransportError> {
        self.listen(host, handler, max_in_flight, shutdown)
            .await?
            .run()
            .await
    }
}

/// A consumer that is attached to its queue (so calls route) and waits to be run.
///
/// It is transport-agnostic: a transport builds it from the future that serves the queue.
pub struct Listener {
    serve: BoxFuture<'static, Result<(), TransportError>>,
    attached: watch::Receiver<bool>,
}

impl Listener {
    /// Wraps the future that handles requests until shutdown, then drains. `attached` says,
    /// as it changes, whether the consumer is on its queue (false while a lost one re-attaches).
    pub fn new(
        serve: impl Future<Output = Result<(), TransportError>> + Send + 'static,
        attached: watch::Receiver<bool>,
    ) -> Self {
        Self {
            serve: Box::pin(serve),
            attached,
        }
    }

    /// Whether the consumer is attached to its queue now, and its changes: a conductor that
    /// cannot be reached must not offer itself to the hash ring.
    pub fn attached(&self) -> watch::Receiver<bool> {
        self.attached.clone()
    }

    /// Handles requests until the listener's shutdown token is cancelled, then stops
    /// consuming and returns once every in-flight request has been replied to and acked.
    pub async fn run(self) -> Result<(), TransportError> {
        self.serve.await
    }
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener").finish_non_exhaustive()
    }
}
