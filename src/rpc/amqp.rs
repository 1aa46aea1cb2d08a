//! RabbitMQ implementation of [`Transport`], on lapin.
//!
//! It owns the AMQP topology of the RPC layer: queue names, queue arguments, message
//! properties, publisher confirms and the reply queue. It must not look inside bodies; the
//! rpc module encodes and decodes them.
//!
//! Topology:
//! - Each conductor host consumes `<prefix>.conductor.<host>` ([`conductor_queue`]), of one of
//!   two [`QueueType`]s:
//!   - classic (the default): non-durable and auto-delete, so when its last consumer goes (the
//!     conductor stopped or was killed) the queue goes too, and requests to it come back at once
//!     as [`TransportError::Unroutable`] instead of timing out;
//!   - quorum: durable and replicated over the cluster's nodes, so it, and the requests in it,
//!     outlive the loss of any one broker node (its leader's too, and the one its conductor was
//!     connected to: the conductor reconnects to another node and serves them). It stays when
//!     its conductor goes; what auto-delete gave is kept by its callers: a queue without a
//!     consumer, and with requests waiting, for [`QUEUE_UNSERVED_CHECKS`] checks is deleted by
//!     the first caller that sees it, and its callers stop waiting ([`TransportError::Lost`], as for a queue gone), so
//!     nothing sent to a conductor that went away runs later. A request rejected, delivered
//!     [`DELIVERY_LIMIT`] times (never redelivered for ever) or expired unserved (its caller
//!     gave up) is dead-lettered to `<prefix>.dead-letter` ([`dead_letter_queue`]).
//!
//!   Either has an `x-expires` argument, which removes a queue left without a consumer (a
//!   conductor gone for good, leftovers of a crashed test).
//! - Requests are published to the default exchange with the queue name as routing key,
//!   `mandatory` set, on one channel in confirm mode: the confirm tells whether the broker
//!   took the message or returned it.
//! - Each transport has one private, exclusive, server-named reply queue, consumed without
//!   acks by one task that hands replies to the waiting callers by `correlation_id`.
//!
//! One connection, to one of the brokers of the URL ([`crate::broker`]), is shared by callers
//! and servers. When it is lost, calls fail with
//! [`TransportError::Unavailable`] while a supervisor task reconnects with capped
//! exponential backoff; servers re-attach to their queue on the new connection: to the same
//! queue if it is still there (the requests the lost consumer held are redelivered to the new
//! one, and answered with the outcome they had: `unacked.rs`), or, when it went with the lost
//! consumer, to a new one declared only after [`QUEUE_GONE_HOLD`], so that the callers whose
//! requests went with it learn it ([`TransportError::Lost`]) rather than wait for their timeout. A connection
//! whose peer goes silent is lost too, after a few seconds of AMQP heartbeats
//! ([`HEARTBEAT_SECS`]), on both sides.
//!
//! The session (connection, publishing, replies, reconnection) is `session.rs`, the consuming
//! side `server.rs`; the settings of both (the constants below) are here, in one place.

mod server;
mod session;
mod unacked;

use std::{
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use lapin::{
    BasicProperties,
    types::{AMQPValue, FieldTable, LongString, ShortString},
};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use self::{
    server::Server,
    session::{Session, live_session, reconnect_when_lost},
};
use super::transport::{Listener, RequestHandler, Transport, TransportError};
use crate::broker::Brokers;

/// How long opening a connection may take before the broker counts as unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest AMQP frame this side offers (the URL's `frame_max` wins when it gives one).
/// lapin keeps a receive and a send buffer of 32 frames each, written through when the
/// connection is tuned: at RabbitMQ's default of 128 KiB that is 8 MiB per process, idle, half
/// of what a Ferrum process otherwise holds. Ferrum's messages are a few KiB (a node in
/// MessagePack), so 16 KiB frames carry nearly all in one frame, and the buffers take 1 MiB.
const FRAME_MAX: u32 = 16 * 1024;
/// The AMQP heartbeat this side asks for, in seconds (the URL's `heartbeat` wins when it gives
/// one; the two sides then use the lower of their values). A side that hears nothing from its
/// peer for two to three heartbeats counts the connection as dead: RabbitMQ closes a paused or
/// silenced conductor's connection, which deletes its auto-delete queue, so calls waiting on it
/// end as [`TransportError::Lost`] at the next queue check and new ones are unroutable; and lapin
/// fails the connection of a conductor that hears nothing, which takes it off the hash rings
/// (its consumer is detached). With RabbitMQ's default (60 s) a wedged conductor kept its nodes
/// for minutes. Heartbeat frames are sent only on an idle connection: nothing per RPC.
const HEARTBEAT_SECS: u16 = 2;
/// How long cancelling the consumer, or closing its channel, may take at shutdown. Such a call
/// made while lapin is closing a connection it found dead (missed heartbeats) may never be
/// answered, and a conductor fenced for a lost lease would then never exit to be restarted.
const STOP_CONSUMING_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a call still waiting for its reply checks that its conductor's queue still exists.
const QUEUE_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// How many queue checks in a row may find a conductor's queue without a consumer (and with
/// requests waiting) before a caller deletes it and stops waiting: longer than a conductor takes to reconnect to another
/// broker node and consume its queue again (well under a second once its connection is found
/// lost), much shorter than a call's timeout.
const QUEUE_UNSERVED_CHECKS: u32 = 3;
/// How long a conductor whose queue went with its lost connection waits before it declares the
/// queue again: longer than two queue checks, so that every call waiting for a request that went
/// with the old queue sees it gone (a queue declared again at once under the same name, between
/// two checks, hid that, and such a call waited for its full timeout).
const QUEUE_GONE_HOLD: Duration = Duration::from_millis(2500);
/// How long a cast waits for its confirm: a blocked broker (memory or disk alarm) sends none.
const CAST_CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a conductor queue may stay unused (no consumer) before the broker deletes it.
/// Auto-delete only fires once a queue has had a consumer; this covers the others.
const QUEUE_EXPIRES: Duration = Duration::from_secs(60);
/// First and largest delay between reconnection attempts: a refused connection costs the
/// broker next to nothing, and a short cap serves again within ~2 s of its return.
const RECONNECT_MIN: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(2);
/// RabbitMQ refuses a per-message TTL above 2^32-1 ms by closing the channel.
const MAX_EXPIRATION_MS: u128 = u32::MAX as u128;
/// RabbitMQ 4's default `max_message_size`. A larger message closes the publishing
/// channel, so it is refused here instead.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Header carrying the caller's request id, for the server's tracing span.
const REQUEST_ID_HEADER: &str = "request_id";

/// How often a quorum queue delivers a request before dead-lettering it: a request whose
/// handling kills the conductor is not handed to it for ever.
const DELIVERY_LIMIT: i64 = 5;
/// How long a dead-lettered request is kept, and how many at most (the oldest go first). A
/// request carries the node as the API read it, `driver_info` secrets included: a day to look
/// at what went wrong, not an archive.
const DEAD_LETTER_TTL: Duration = Duration::from_secs(24 * 3600);
const DEAD_LETTER_MAX: i64 = 10_000;

/// The queue a conductor on `host` consumes. Every queue name is built here.
pub fn conductor_queue(prefix: &str, host: &str) -> String {
    format!("{prefix}.conductor.{host}")
}

/// Where quorum conductor queues put the requests they reject or give up on, for an operator
/// to read.
pub fn dead_letter_queue(prefix: &str) -> String {
    format!("{prefix}.dead-letter")
}

/// The kind of the conductor queues (`transport.quorum_queues`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueType {
    /// Non-durable, auto-delete: on the broker node of the conductor's connection.
    Classic,
    /// Durable, replicated over a cluster (RabbitMQ 3.10 or later: per-message TTL).
    Quorum,
}

/// The routing key for `host`. A name longer than AMQP allows cannot be a queue, so
/// nobody can be listening on it.
fn routing_key(prefix: &str, host: &str) -> Result<ShortString, TransportError> {
    ShortString::try_new(conductor_queue(prefix, host))
        .map_err(|_| TransportError::Unroutable(host.to_owned()))
}

/// A RabbitMQ [`Transport`]; cheap to share behind an `Arc`.
pub struct AmqpTransport {
    prefix: String,
    queues: QueueType,
    /// The live session; the supervisor replaces it after a reconnection.
    session: watch::Receiver<Arc<Session>>,
    /// Stops the supervisor when the transport and every server it started are dropped.
    supervisor: Arc<StopOnDrop>,
}

/// Cancels its token when dropped. Shared by the transport and its servers, so the supervisor
/// that reconnects runs as long as any of them: a conductor keeps only its listener, and
/// without this its consumer would wait forever for a reconnection nobody makes.
struct StopOnDrop(CancellationToken);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl AmqpTransport {
    /// Connects to a broker of `url` (one or several, see [`crate::broker`]; it carries
    /// credentials: never log it) and opens the reply queue. All queue names start with
    /// `prefix`; conductor queues are classic.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, TransportError> {
        Self::connect_with(url, prefix, QueueType::Classic).await
    }

    /// As [`connect`](Self::connect), with conductor queues of type `queues`.
    pub async fn connect_with(
        url: &str,
        prefix: &str,
        queues: QueueType,
    ) -> Result<Self, TransportError> {
        let brokers = Arc::new(
            Brokers::parse(url)
                .map_err(|e| TransportError::Unavailable(format!("bad transport URL: {e}")))?,
        );
        let name = format!("ferrum {prefix}");
        let session = Session::open(&brokers, &name).await?;
        let (sessions, session) = watch::channel(session);
        let stop = CancellationToken::new();
        tokio::spawn(reconnect_when_lost(brokers, name, sessions, stop.clone()));
        Ok(Self {
            prefix: prefix.to_owned(),
            queues,
            session,
            supervisor: Arc::new(StopOnDrop(stop)),
        })
    }

    fn session(&self) -> Result<Arc<Session>, TransportError> {
        live_session(&self.session)
    }

    /// How many calls are still waiting for a reply on the current session. Every call
    /// stops waiting when it ends, however it ends, so with no call in progress this is 0.
    pub fn waiting_calls(&self) -> usize {
        self.session.borrow().pending.len()
    }
}

impl std::fmt::Debug for AmqpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpTransport")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Transport for AmqpTransport {
    fn connected(&self) -> Option<bool> {
        let session = self.session.borrow();
        Some(!session.lost.is_cancelled() && session.connection.status().connected())
    }

    async fn call(
        &self,
        host: &str,
        request_id: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let routing_key = routing_key(&self.prefix, host)?;
        check_size(body.len())?;
        let session = self.session()?;
        let correlation_id = Uuid::new_v4().to_string();
        let (reply_tx, reply_rx) = oneshot::channel();
        // Registered before publishing, so a fast reply finds its caller; removed when this
        // call ends in any way (reply, error, timeout, dropped future).
        let _waiting = session.pending.wait_for(&correlation_id, reply_tx);
        // The reply task fails every waiting call when the connection goes; one that
        // registered after that would otherwise only learn it from its timeout.
        session.ensure_usable()?;

        let properties = request_properties(request_id, &correlation_id)
            .with_reply_to(session.reply_queue.clone())
            .with_expiration(expiration(timeout));
        let round_trip = async {
            session
                .publish(
                    routing_key.clone(),
                    &body,
                    properties,
                    &correlation_id,
                    host,
                )
                .await?;
            tokio::select! {
                reply = reply_rx => reply.unwrap_or_else(|_| {
                    Err(TransportError::Unavailable(
                        "the reply queue was closed".to_owned(),
                    ))
                }),
                () = session.queue_unserved(&routing_key) => Err(TransportError::Lost(host.to_owned())),
            }
        };
        tokio::time::timeout(timeout, round_trip)
            .await
            .unwrap_or_else(|_| {
                Err(TransportError::Timeout {
                    host: host.to_owned(),
                    after: timeout,
                })
            })
    }

    async fn cast(
        &self,
        host: &str,
        request_id: &str,
        body: Vec<u8>,
    ) -> Result<(), TransportError> {
        let routing_key = routing_key(&self.prefix, host)?;
        check_size(body.len())?;
        let session = self.session()?;
        // A cast gets no reply, but the id still tells its returned message from others.
        let correlation_id = Uuid::new_v4().to_string();
        let properties = request_properties(request_id, &correlation_id);
        let publish = session.publish(routing_key, &body, properties, &correlation_id, host);
        tokio::time::timeout(CAST_CONFIRM_TIMEOUT, publish)
            .await
            .unwrap_or_else(|_| {
                Err(TransportError::Timeout {
                    host: host.to_owned(),
                    after: CAST_CONFIRM_TIMEOUT,
                })
            })
    }

    async fn listen(
        &self,
        host: &str,
        handler: Arc<dyn RequestHandler>,
        max_in_flight: usize,
        shutdown: CancellationToken,
    ) -> Result<Listener, TransportError> {
        let (attached_tx, attached_rx) = watch::channel(false);
        let server = Server {
            sessions: self.session.clone(),
            queue: routing_key(&self.prefix, host)?,
            queues: self.queues,
            dead_letters: ShortString::from(dead_letter_queue(&self.prefix)),
            handler,
            max_in_flight: max_in_flight.max(1),
            shutdown,
            attached: attached_tx,
            unacked: Arc::default(),
            _supervisor: self.supervisor.clone(),
        };
        let attached = server.attach(server::Attach::Declare).await?;
        server.attached.send_replace(true);
        Ok(Listener::new(server.run(attached), attached_rx))
    }
}

/// Properties shared by calls and casts: the correlation id, and the request id both as
/// message id (when it fits) and as a header.
fn request_properties(request_id: &str, correlation_id: &str) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert(
        REQUEST_ID_HEADER.into(),
        AMQPValue::LongString(LongString::from(request_id)),
    );
    let mut properties = BasicProperties::default().with_headers(headers);
    if let Ok(correlation_id) = ShortString::try_new(correlation_id) {
        properties = properties.with_correlation_id(correlation_id);
    }
    if let Ok(message_id) = ShortString::try_new(request_id) {
        properties = properties.with_message_id(message_id);
    }
    properties
}

/// The request id a caller attached, for the server's span.
fn request_id(properties: &BasicProperties) -> String {
    let header = properties
        .headers()
        .as_ref()
        .and_then(|headers| headers.inner().get(REQUEST_ID_HEADER));
    match (header, properties.message_id()) {
        (Some(AMQPValue::LongString(id)), _) => id.to_string(),
        (_, Some(id)) => id.to_string(),
        _ => String::new(),
    }
}

/// A request expires in its queue when its caller stops waiting.
fn expiration(timeout: Duration) -> ShortString {
    ShortString::from(timeout.as_millis().min(MAX_EXPIRATION_MS).to_string())
}

fn check_size(len: usize) -> Result<(), TransportError> {
    if len > MAX_BODY_BYTES {
        return Err(TransportError::Unavailable(format!(
            "a message of {len} bytes exceeds the broker's limit of {MAX_BODY_BYTES}"
        )));
    }
    Ok(())
}

/// Whether the broker refused an operation because its queue does not exist (a channel error).
fn is_not_found(err: &lapin::Error) -> bool {
    matches!(err.kind(), lapin::ErrorKind::ProtocolError(e) if e.get_id() == 404)
}

fn unavailable(err: lapin::Error) -> TransportError {
    TransportError::Unavailable(err.to_string())
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
