//! RabbitMQ implementation of [`Transport`], on lapin.
//!
//! It owns the AMQP topology of the RPC layer: queue names, queue arguments, message
//! properties, publisher confirms and the reply queue. It must not look inside bodies; the
//! rpc module encodes and decodes them.
//!
//! Topology:
//! - Each conductor host consumes `<prefix>.conductor.<host>` ([`conductor_queue`]):
//!   non-durable and auto-delete, so when its last consumer goes (the conductor stopped or
//!   was killed) the queue goes too, and requests to it come back at once as
//!   [`TransportError::Unroutable`] instead of timing out. An `x-expires` argument removes
//!   queues that never got a consumer (e.g. leftovers of a crashed test).
//! - Requests are published to the default exchange with the queue name as routing key,
//!   `mandatory` set, on one channel in confirm mode: the confirm tells whether the broker
//!   took the message or returned it.
//! - Each transport has one private, exclusive, server-named reply queue, consumed without
//!   acks by one task that hands replies to the waiting callers by `correlation_id`.
//!
//! One connection is shared by callers and servers. When it is lost, calls fail with
//! [`TransportError::Unavailable`] while a supervisor task reconnects with capped
//! exponential backoff; servers re-attach to their queue on the new connection. A connection
//! whose peer goes silent is lost too, after a few seconds of AMQP heartbeats
//! ([`HEARTBEAT_SECS`]), on both sides.
use std::{
    collections::HashMap,
    future::{Future, poll_fn},
    panic::AssertUnwindSafe,
    pin::pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use futures::{FutureExt, StreamExt};
use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, Consumer,
    message::{BasicReturnMessage, Delivery},
    options::{
        BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicPublishOptions,
        BasicQosOptions, BasicRejectOptions, ConfirmSelectOptions, QueueDeclareOptions,
    },
    types::{AMQPValue, FieldTable, LongString, ShortString},
};
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore, oneshot, watch},
    task::{JoinError, JoinSet},
};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};
use uuid::Uuid;

use super::transport::{Listener, RequestHandler, Transport, TransportError};

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

/// The queue a conductor on `host` consumes. Every queue name is built here.
pub fn conductor_queue(prefix: &str, host: &str) -> String {
    format!("{prefix}.conductor.{host}")
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
    /// Connects to the broker at `url` (it carries credentials: never log it) and opens the
    /// reply queue. All queue names start with `prefix`.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, TransportError> {
        let name = format!("ferrum {prefix}");
        let session = Session::open(url, &name).await?;
        let (sessions, session) = watch::channel(session);
        let stop = CancellationToken::new();
        tokio::spawn(reconnect_when_lost(
            url.to_owned(),
            name,
            sessions,
            stop.clone(),
        ));
        Ok(Self {
            prefix: prefix.to_owned(),
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
                () = session.queue_gone(&routing_key) => Err(TransportError::Lost(host.to_owned())),
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
            handler,
            max_in_flight: max_in_flight.max(1),
            shutdown,
            attached: attached_tx,
            _supervisor: self.supervisor.clone(),
        };
        let attached = server.attach().await?;
        server.attached.send_replace(true);
        Ok(Listener::new(server.run(attached), attached_rx))
    }
}

/// One connection with its publishing channel and reply queue.
///
/// Dropping the last `Arc` closes the connection (lapin closes it when its last handle
/// goes), so a replaced session lives on only while calls made on it are still running.
struct Session {
    connection: Connection,
    /// In confirm mode; shared by every call and cast.
    publisher: Channel,
    /// Keeps the reply consumer's channel open.
    _replies: Channel,
    reply_queue: ShortString,
    /// Held while a publish is handed to lapin, so publishes enter the channel in the
    /// order lapin numbers them; see [`Session::publish`].
    publish_order: Mutex<()>,
    pending: Arc<PendingReplies>,
    /// Cancelled once the session cannot be used any more; the supervisor then reconnects.
    lost: CancellationToken,
}

impl Session {
    async fn open(url: &str, name: &str) -> Result<Arc<Self>, TransportError> {
        let properties = ConnectionProperties::default().with_connection_name(name.into());
        let mut uri: lapin::uri::AMQPUri = url
            .parse()
            .map_err(|e: String| TransportError::Unavailable(format!("bad transport URL: {e}")))?;
        uri.query.frame_max.get_or_insert(FRAME_MAX);
        uri.query.heartbeat.get_or_insert(HEARTBEAT_SECS);
        let connection =
            tokio::time::timeout(CONNECT_TIMEOUT, Connection::connect_uri(uri, properties))
                .await
                .map_err(|_| {
                    TransportError::Unavailable(format!(
                        "connecting timed out after {CONNECT_TIMEOUT:?}"
                    ))
                })?
                .map_err(unavailable)?;

        let publisher = connection.create_channel().await.map_err(unavailable)?;
        publisher
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(unavailable)?;

        let replies = connection.create_channel().await.map_err(unavailable)?;
        let reply_queue = replies
            .queue_declare(
                ShortString::default(),
                QueueDeclareOptions {
                    exclusive: true,
                    auto_delete: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(unavailable)?
            .name()
            .clone();
        let consumer = replies
            .basic_consume(
                reply_queue.clone(),
                ShortString::default(),
                BasicConsumeOptions {
                    no_ack: true,
                    exclusive: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(unavailable)?;

        let pending = Arc::new(PendingReplies::default());
        let lost = CancellationToken::new();
        tokio::spawn(route_replies(consumer, pending.clone(), lost.clone()));
        tokio::spawn(lose_on_connection_error(
            connection.events_listener(),
            lost.clone(),
        ));
        Ok(Arc::new(Self {
            connection,
            publisher,
            _replies: replies,
            reply_queue,
            publish_order: Mutex::new(()),
            pending,
            lost,
        }))
    }

    fn ensure_usable(&self) -> Result<(), TransportError> {
        if self.lost.is_cancelled() {
            return Err(TransportError::Unavailable(
                "the connection to the message broker was lost; reconnecting".to_owned(),
            ));
        }
        Ok(())
    }

    /// Returns once `queue` is gone, checking every [`QUEUE_CHECK_INTERVAL`] (with a passive
    /// declare on a channel of its own: a missing queue closes it). A conductor that dies takes
    /// its auto-delete queue with it, and the requests it had taken or queued with it; their
    /// callers learn it here within a check instead of at their timeout. Pends forever while
    /// the queue exists or cannot be checked.
    async fn queue_gone(&self, queue: &ShortString) {
        loop {
            tokio::time::sleep(QUEUE_CHECK_INTERVAL).await;
            let Ok(channel) = self.connection.create_channel().await else {
                continue;
            };
            let options = QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            };
            match channel
                .queue_declare(queue.clone(), options, FieldTable::default())
                .await
            {
                Ok(_) => {
                    let _ = channel.close(200, "OK".into()).await;
                }
                Err(err) if matches!(err.kind(), lapin::ErrorKind::ProtocolError(e) if e.get_id() == 404) =>
                {
                    return;
                }
                Err(err) => debug!(error = %err, "Cannot check the conductor queue"),
            }
        }
    }

    /// Marks the session lost after a channel or connection error and describes it.
    fn broken(&self, err: lapin::Error) -> TransportError {
        self.lost.cancel();
        unavailable(err)
    }

    /// Publishes a mandatory message to the default exchange and waits for its confirm.
    async fn publish(
        &self,
        routing_key: ShortString,
        body: &[u8],
        properties: BasicProperties,
        correlation_id: &str,
        host: &str,
    ) -> Result<(), TransportError> {
        let options = BasicPublishOptions {
            mandatory: true,
            ..BasicPublishOptions::default()
        };
        let mut publish = pin!(self.publisher.basic_publish(
            ShortString::default(),
            routing_key,
            options,
            body,
            properties,
        ));
        // lapin numbers a publish for its confirm and queues its frames in two steps. Both
        // happen within one poll, but two threads publishing at once could queue their frames
        // in the other order than they were numbered, and confirms (with their returned
        // messages) would go to the wrong publisher. The lock makes the two steps one; it is
        // held for one poll at a time, never across an await.
        let confirm = poll_fn(|cx| {
            let _order = lock(&self.publish_order);
            publish.as_mut().poll(cx)
        })
        .await
        .map_err(|err| self.broken(err))?;

        match confirm.await.map_err(|err| self.broken(err))? {
            Confirmation::Ack(None) => Ok(()),
            Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => {
                self.returned(&returned, correlation_id, host)
            }
            Confirmation::Nack(None) => Err(TransportError::Unavailable(
                "the broker refused the message".to_owned(),
            )),
            Confirmation::NotRequested => Err(TransportError::Unavailable(
                "publisher confirms are not enabled".to_owned(),
            )),
        }
    }

    /// Handles a message the broker returned as unroutable.
    fn returned(
        &self,
        returned: &BasicReturnMessage,
        correlation_id: &str,
        host: &str,
    ) -> Result<(), TransportError> {
        let returned_id = returned.properties.correlation_id().as_ref();
        if returned_id.map(ShortString::as_str) == Some(correlation_id) {
            return Err(TransportError::Unroutable(host.to_owned()));
        }
        // The broker sends a return just before the confirm of the same message, so this
        // should not happen; if it does, the returned message's own caller learns of it.
        warn!(
            queue = %returned.routing_key,
            "A returned message was paired with another message's confirm"
        );
        if let Some(waiting) = returned_id.and_then(|id| self.pending.take(id.as_str())) {
            let _ = waiting.send(Err(TransportError::Unroutable(
                returned.routing_key.to_string(),
            )));
        }
        Ok(())
    }
}

/// Callers waiting for a reply, by correlation id.
///
/// A std mutex: it is only held to insert, remove or drain, never across an await.
#[derive(Default)]
struct PendingReplies(Mutex<HashMap<String, oneshot::Sender<Reply>>>);

type Reply = Result<Vec<u8>, TransportError>;

impl PendingReplies {
    /// Registers a waiting caller until the returned guard is dropped.
    fn wait_for<'a>(&'a self, correlation_id: &str, reply: oneshot::Sender<Reply>) -> Waiting<'a> {
        lock(&self.0).insert(correlation_id.to_owned(), reply);
        Waiting {
            pending: self,
            correlation_id: correlation_id.to_owned(),
        }
    }

    fn take(&self, correlation_id: &str) -> Option<oneshot::Sender<Reply>> {
        lock(&self.0).remove(correlation_id)
    }

    fn fail_all(&self, reason: &str) {
        let waiting: Vec<_> = lock(&self.0).drain().map(|(_, reply)| reply).collect();
        for reply in waiting {
            let _ = reply.send(Err(TransportError::Unavailable(reason.to_owned())));
        }
    }

    fn len(&self) -> usize {
        lock(&self.0).len()
    }
}

/// Removes its caller from [`PendingReplies`] when the call ends, however it ends.
struct Waiting<'a> {
    pending: &'a PendingReplies,
    correlation_id: String,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.pending.take(&self.correlation_id);
    }
}

/// Hands each reply to its caller until the reply consumer ends, which only happens when
/// the connection or its channel is gone; then fails every waiting call.
async fn route_replies(
    mut consumer: Consumer,
    pending: Arc<PendingReplies>,
    lost: CancellationToken,
) {
    while let Some(delivery) = consumer.next().await {
        let delivery = match delivery {
            Ok(delivery) => delivery,
            Err(err) => {
                warn!(error = %err, "The reply queue consumer failed");
                break;
            }
        };
        let Some(correlation_id) = delivery.properties.correlation_id() else {
            debug!("Dropping a reply without a correlation id");
            continue;
        };
        match pending.take(correlation_id.as_str()) {
            Some(caller) => {
                let _ = caller.send(Ok(delivery.data));
            }
            None => debug!(%correlation_id, "Dropping a reply nobody waits for any more"),
        }
    }
    // Cancel first: a call registering after the drain then sees the session is lost.
    lost.cancel();
    pending.fail_all("the connection to the message broker was lost");
}

/// Marks the session lost on the connection's first error, whoever notices it first: a
/// conductor only consumes, and nothing else of its session might fail for the supervisor to see.
async fn lose_on_connection_error(
    events: impl futures::Stream<Item = lapin::Event> + Send + 'static,
    lost: CancellationToken,
) {
    let mut events = pin!(events);
    loop {
        tokio::select! {
            () = lost.cancelled() => return,
            event = events.next() => match event {
                Some(lapin::Event::Error(err)) if is_connection_error(&err) => {
                    debug!(error = %err, "The broker connection failed");
                    lost.cancel();
                    return;
                }
                Some(_) => {}
                None => return,
            },
        }
    }
}

/// Whether an error ends the connection, rather than one channel (a soft protocol error such as
/// the 404 of a passive declare closes only the channel it happened on).
fn is_connection_error(err: &lapin::Error) -> bool {
    use lapin::ErrorKind as K;
    match err.kind() {
        K::ProtocolError(e) => matches!(e.kind(), lapin::protocol::AMQPErrorKind::Hard(_)),
        K::InvalidChannel(_) | K::InvalidChannelState(..) | K::ChannelsLimitReached => false,
        _ => true,
    }
}

/// Replaces the session each time it is lost, retrying with capped exponential backoff,
/// until the transport is dropped.
async fn reconnect_when_lost(
    url: String,
    name: String,
    sessions: watch::Sender<Arc<Session>>,
    stop: CancellationToken,
) {
    loop {
        let lost = sessions.borrow().lost.clone();
        tokio::select! {
            () = stop.cancelled() => return,
            () = lost.cancelled() => {}
        }
        warn!("Lost the connection to the message broker; reconnecting");
        let mut delay = RECONNECT_MIN;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
            match Session::open(&url, &name).await {
                Ok(session) => {
                    sessions.send_replace(session);
                    info!("Reconnected to the message broker");
                    break;
                }
                Err(err) => {
                    warn!(error = %err, retry_in = ?delay, "Cannot reconnect to the message broker");
                    delay = (delay * 2).min(RECONNECT_MAX);
                }
            }
        }
    }
}

fn live_session(sessions: &watch::Receiver<Arc<Session>>) -> Result<Arc<Session>, TransportError> {
    let session = Arc::clone(&sessions.borrow());
    session.ensure_usable()?;
    Ok(session)
}

/// Serves one conductor queue; see [`Transport::listen`].
struct Server {
    sessions: watch::Receiver<Arc<Session>>,
    queue: ShortString,
    handler: Arc<dyn RequestHandler>,
    max_in_flight: usize,
    shutdown: CancellationToken,
    /// Whether the consumer is on its queue.
    attached: watch::Sender<bool>,
    _supervisor: Arc<StopOnDrop>,
}

/// A channel consuming the server's queue.
struct Attached {
    channel: Channel,
    consumer: Consumer,
}

impl Server {
    /// Declares the queue and starts consuming it on a channel of its own, within
    /// [`CONNECT_TIMEOUT`]. A failure on a connection that is no longer connected marks its
    /// session lost, so that the supervisor replaces it.
    async fn attach(&self) -> Result<Attached, TransportError> {
        let session = live_session(&self.sessions)?;
        let attached = tokio::time::timeout(CONNECT_TIMEOUT, self.attach_on(&session))
            .await
            .unwrap_or_else(|_| {
                Err(TransportError::Unavailable(format!(
                    "attaching to the queue timed out after {CONNECT_TIMEOUT:?}"
                )))
            });
        if attached.is_err() && !session.connection.status().connected() {
            session.lost.cancel();
        }
        attached
    }

    async fn attach_on(&self, session: &Session) -> Result<Attached, TransportError> {
        let channel = session
            .connection
            .create_channel()
            .await
            .map_err(unavailable)?;
        let prefetch = u16::try_from(self.max_in_flight).unwrap_or(u16::MAX);
        channel
            .basic_qos(prefetch, BasicQosOptions::default())
            .await
            .map_err(unavailable)?;
        let mut arguments = FieldTable::default();
        let expires = i64::try_from(QUEUE_EXPIRES.as_millis()).unwrap_or(i64::MAX);
        arguments.insert("x-expires".into(), AMQPValue::LongLongInt(expires));
        channel
            .queue_declare(
                self.queue.clone(),
                QueueDeclareOptions {
                    auto_delete: true,
                    ..QueueDeclareOptions::default()
                },
                arguments,
            )
            .await
            .map_err(unavailable)?;
        let consumer = channel
            .basic_consume(
                self.queue.clone(),
                ShortString::default(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(unavailable)?;
        debug!(queue = %self.queue, "Consuming");
        Ok(Attached { channel, consumer })
    }

    /// Serves until shutdown, attaching again (with capped backoff) whenever the consumer
    /// is lost with its channel or connection.
    async fn run(self, mut attached: Attached) -> Result<(), TransportError> {
        loop {
            let consumed = self.consume(attached).await;
            self.attached.send_replace(false);
            match consumed {
                Ok(()) => return Ok(()),
                Err(err) => {
                    warn!(queue = %self.queue, error = %err, "Lost the consumer; attaching again")
                }
            }
            let mut delay = RECONNECT_MIN;
            let mut sessions = self.sessions.clone();
            attached = loop {
                // While the connection is down, wait for the supervisor's new session rather
                // than a backoff of our own, so the queue is served again as soon as it can be.
                let wait_for_session = live_session(&sessions).is_err();
                tokio::select! {
                    () = self.shutdown.cancelled() => return Ok(()),
                    changed = sessions.changed(), if wait_for_session => {
                        if changed.is_err() {
                            // The transport is gone; nothing will reconnect.
                            return Ok(());
                        }
                        sessions.borrow_and_update();
                    }
                    () = tokio::time::sleep(delay), if !wait_for_session => {}
                }
                match self.attach().await {
                    Ok(attached) => break attached,
                    Err(err) => {
                        info!(queue = %self.queue, error = %err, retry_in = ?delay, "Cannot attach yet");
                        delay = (delay * 2).min(RECONNECT_MAX);
                    }
                }
            };
            self.attached.send_replace(true);
            info!(queue = %self.queue, "Consuming again");
        }
    }

    /// Hands deliveries to handler tasks until shutdown, then cancels the consumer, handles
    /// what the broker had already sent, and waits for every task. Errs when the consumer
    /// is lost before shutdown.
    async fn consume(&self, attached: Attached) -> Result<(), TransportError> {
        let Attached {
            channel,
            mut consumer,
        } = attached;
        let permits = Arc::new(Semaphore::new(self.max_in_flight));
        let mut in_flight = JoinSet::new();
        // Set at shutdown: until when the consumer may take to end (see STOP_CONSUMING_TIMEOUT).
        let mut stopping_until: Option<tokio::time::Instant> = None;
        let mut outcome = Ok(());
        loop {
            tokio::select! {
                biased;
                () = self.shutdown.cancelled(), if stopping_until.is_none() => {
                    let until = tokio::time::Instant::now() + STOP_CONSUMING_TIMEOUT;
                    stopping_until = Some(until);
                    // The broker stops delivering; deliveries already sent still come
                    // through the stream, which then ends.
                    let cancel = channel.basic_cancel(consumer.tag(), BasicCancelOptions::default());
                    match tokio::time::timeout_at(until, cancel).await {
                        Ok(Ok(())) => {}
                        Ok(Err(err)) => {
                            outcome = Err(unavailable(err));
                            break;
                        }
                        Err(_) => {
                            outcome = Err(TransportError::Unavailable(format!(
                                "cancelling the consumer got no answer within {STOP_CONSUMING_TIMEOUT:?}"
                            )));
                            break;
                        }
                    }
                }
                () = sleep_until_some(stopping_until), if stopping_until.is_some() => {
                    outcome = Err(TransportError::Unavailable(format!(
                        "the consumer did not end within {STOP_CONSUMING_TIMEOUT:?} of its cancel"
                    )));
                    break;
                }
                Some(done) = in_flight.join_next(), if !in_flight.is_empty() => log_join(done),
                next = consumer.next() => match next {
                    Some(Ok(delivery)) => {
                        // Prefetch equals the permits and a permit is released after the ack,
                        // so this waits at most for a task that is finishing.
                        let Ok(permit) = permits.clone().acquire_owned().await else {
                            break;
                        };
                        let span = info_span!(
                            "rpc.request",
                            queue = %self.queue,
                            request_id = %request_id(&delivery.properties),
                        );
                        let task = handle(channel.clone(), delivery, self.handler.clone(), permit);
                        in_flight.spawn(task.instrument(span));
                    }
                    // The stream ends right after an error.
                    Some(Err(err)) => outcome = Err(unavailable(err)),
                    None => {
                        if stopping_until.is_none() && outcome.is_ok() {
                            outcome = Err(TransportError::Unavailable(
                                "the broker cancelled the consumer".to_owned(),
                            ));
                        }
                        break;
                    }
                },
            }
        }
        while let Some(done) = in_flight.join_next().await {
            log_join(done);
        }
        if outcome.is_ok() {
            // Every delivery is acked: the channel can go quietly.
            let close = channel.close(200, "OK".into());
            match tokio::time::timeout(STOP_CONSUMING_TIMEOUT, close).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => {
                    debug!(queue = %self.queue, error = %err, "Closing the consumer channel failed");
                }
                Err(_) => {
                    debug!(queue = %self.queue, "Closing the consumer channel got no answer");
                }
            }
        }
        outcome
    }
}

/// Sleeps until `until`; never ends for None.
async fn sleep_until_some(until: Option<tokio::time::Instant>) {
    match until {
        Some(until) => tokio::time::sleep_until(until).await,
        None => std::future::pending().await,
    }
}

/// Runs the handler on one delivery, replies if asked to, then acks; rejects (without
/// requeue) what the handler cannot decode. The permit is released at the end.
async fn handle(
    channel: Channel,
    delivery: Delivery,
    handler: Arc<dyn RequestHandler>,
    _permit: OwnedSemaphorePermit,
) {
    let Delivery {
        properties,
        data,
        acker,
        ..
    } = delivery;
    let reply = match AssertUnwindSafe(handler.handle(data)).catch_unwind().await {
        Ok(Ok(reply)) => reply,
        Ok(Err(rejection)) => {
            warn!(reason = %rejection.reason, "Rejecting a request that cannot be handled");
            if let (Some(reply), Some(reply_to)) = (rejection.reply, properties.reply_to())
                && check_size(reply.len()).is_ok()
            {
                send_reply(&channel, &properties, reply_to, &reply).await;
            }
            reject(&acker).await;
            return;
        }
        Err(_) => {
            error!("The request handler panicked; rejecting the request");
            reject(&acker).await;
            return;
        }
    };
    if let Some(reply_to) = properties.reply_to() {
        if check_size(reply.len()).is_err() {
            error!(
                size = reply.len(),
                "The reply is too large for the broker; rejecting the request"
            );
            reject(&acker).await;
            return;
        }
        send_reply(&channel, &properties, reply_to, &reply).await;
    }
    if let Err(err) = acker.ack(BasicAckOptions::default()).await {
        warn!(error = %err, "Cannot ack the request");
    }
}

/// Publishes `reply` to the caller's reply queue, with the request's correlation id.
async fn send_reply(
    channel: &Channel,
    request: &BasicProperties,
    reply_to: &ShortString,
    reply: &[u8],
) {
    let mut reply_properties = BasicProperties::default();
    if let Some(correlation_id) = request.correlation_id() {
        reply_properties = reply_properties.with_correlation_id(correlation_id.clone());
    }
    // Not mandatory: a caller that gave up has taken its reply queue with it.
    let sent = channel
        .basic_publish(
            ShortString::default(),
            reply_to.clone(),
            BasicPublishOptions::default(),
            reply,
            reply_properties,
        )
        .await;
    if let Err(err) = sent {
        warn!(error = %err, "Cannot send the reply; the caller will time out");
    }
}

async fn reject(acker: &lapin::Acker) {
    if let Err(err) = acker.reject(BasicRejectOptions { requeue: false }).await {
        warn!(error = %err, "Cannot reject the request");
    }
}

fn log_join(done: Result<(), JoinError>) {
    if let Err(err) = done {
        error!(error = %err, "A request task failed");
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

fn unavailable(err: lapin::Error) -> TransportError {
    TransportError::Unavailable(err.to_string())
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
