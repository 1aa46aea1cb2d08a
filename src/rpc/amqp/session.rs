//! The AMQP session: one connection with its publishing channel (publisher confirms, returned
//! messages) and its reply queue, whose task hands each reply to the caller waiting for it; the
//! detection of a lost connection, and the supervisor that opens a new session when it is lost.

use std::{
    collections::HashMap,
    future::{Future, poll_fn},
    pin::pin,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;
use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, Consumer,
    message::BasicReturnMessage,
    options::{
        BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
        QueueDeleteOptions,
    },
    types::{FieldTable, ShortString},
};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::{
    CONNECT_TIMEOUT, FRAME_MAX, HEARTBEAT_SECS, QUEUE_CHECK_INTERVAL, QUEUE_UNSERVED_CHECKS,
    RECONNECT_MAX, RECONNECT_MIN, is_not_found, lock, unavailable,
};
use crate::{broker::Brokers, rpc::transport::TransportError};

/// One connection with its publishing channel and reply queue.
///
/// Dropping the last `Arc` closes the connection (lapin closes it when its last handle
/// goes), so a replaced session lives on only while calls made on it are still running.
pub(super) struct Session {
    pub(super) connection: Connection,
    /// In confirm mode; shared by every call and cast.
    publisher: Channel,
    /// Keeps the reply consumer's channel open.
    _replies: Channel,
    pub(super) reply_queue: ShortString,
    /// Held while a publish is handed to lapin, so publishes enter the channel in the
    /// order lapin numbers them; see [`Session::publish`].
    publish_order: Mutex<()>,
    pub(super) pending: Arc<PendingReplies>,
    /// Cancelled once the session cannot be used any more; the supervisor then reconnects.
    pub(super) lost: CancellationToken,
}

impl Session {
    /// Opens a session on the first of `brokers` that accepts a connection.
    pub(super) async fn open(brokers: &Brokers, name: &str) -> Result<Arc<Self>, TransportError> {
        let properties = ConnectionProperties::default().with_connection_name(name.into());
        let (connection, broker) = brokers
            .connect(&properties, CONNECT_TIMEOUT, |uri| {
                uri.query.frame_max.get_or_insert(FRAME_MAX);
                uri.query.heartbeat.get_or_insert(HEARTBEAT_SECS);
            })
            .await
            .map_err(TransportError::Unavailable)?;
        debug!(%broker, "Connected to the message broker");
        // A broker that accepted the connection and then stalls must not hold the process
        // without a session: the channels and queue below have the connect's time limit too.
        let channels = tokio::time::timeout(CONNECT_TIMEOUT, open_channels(&connection))
            .await
            .unwrap_or_else(|_| {
                Err(TransportError::Unavailable(format!(
                    "{broker} accepted the connection but did not open its channels within {CONNECT_TIMEOUT:?}"
                )))
            });
        let (publisher, replies, reply_queue, consumer) = match channels {
            Ok(channels) => channels,
            Err(err) => {
                // Closed, not left to the broker's heartbeat: it counts against its limits.
                let _ = tokio::time::timeout(
                    Duration::from_secs(1),
                    connection.close(200, "OK".into()),
                )
                .await;
                return Err(err);
            }
        };

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

    pub(super) fn ensure_usable(&self) -> Result<(), TransportError> {
        if self.lost.is_cancelled() {
            return Err(TransportError::Unavailable(
                "the connection to the message broker was lost; reconnecting".to_owned(),
            ));
        }
        Ok(())
    }

    /// Returns once `queue` is gone, checking every [`QUEUE_CHECK_INTERVAL`] (with a passive
    /// declare on a channel of its own: a missing queue closes it), or once it has had no
    /// consumer, and requests in it, for [`QUEUE_UNSERVED_CHECKS`] checks in a row, after
    /// deleting it. A conductor that dies takes its classic auto-delete queue with it, and the
    /// requests it had taken or queued with it; their callers learn it here within a check
    /// instead of at their timeout.
    /// A quorum queue stays without a consumer: while its conductor reconnects (to another
    /// broker node) what waits in it is served when it is back, and what it had taken and not
    /// acknowledged is delivered again; once it has been away longer, the first caller to see
    /// that deletes the queue, which makes it one that went with its conductor: nothing sent to
    /// it runs later, every caller waiting on it learns so at its next check, and the conductor
    /// declares it again when it is back (see `server.rs`). Pends forever while the queue is
    /// served or cannot be checked.
    pub(super) async fn queue_unserved(&self, queue: &ShortString) {
        let mut unserved = 0;
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
                // Unserved: no consumer, and requests waiting (this caller's own, unless taken).
                // A quorum queue whose leader is being elected, or is slow to answer, reports
                // 0 consumers and 0 messages: that is no sign of a conductor gone.
                Ok(declared) if declared.consumer_count() > 0 || declared.message_count() == 0 => {
                    unserved = 0
                }
                Ok(_) => {
                    unserved += 1;
                    if unserved >= QUEUE_UNSERVED_CHECKS {
                        // Unconditional: RabbitMQ 3 cannot delete a quorum queue "if unused".
                        // A conductor that attached since the last check loses its consumer
                        // and declares the queue again after the hold; what it took meanwhile
                        // may still run, which the Lost answer allows ("may or may not have
                        // been applied").
                        match channel
                            .queue_delete(queue.clone(), QueueDeleteOptions::default())
                            .await
                        {
                            Ok(dropped) => {
                                warn!(%queue, dropped, "Deleted a conductor queue left without a consumer");
                                let _ = channel.close(200, "OK".into()).await;
                                return;
                            }
                            Err(err) if is_not_found(&err) => return,
                            Err(err) => debug!(error = %err, "Cannot delete the conductor queue"),
                        }
                        continue;
                    }
                }
                Err(err) if is_not_found(&err) => return,
                Err(err) => {
                    debug!(error = %err, "Cannot check the conductor queue");
                    continue;
                }
            }
            let _ = channel.close(200, "OK".into()).await;
        }
    }

    /// Marks the session lost after a channel or connection error and describes it.
    fn broken(&self, err: lapin::Error) -> TransportError {
        self.lost.cancel();
        unavailable(err)
    }

    /// Publishes a mandatory message to the default exchange and waits for its confirm.
    pub(super) async fn publish(
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
            Confirmation::Nack(None) => {
                // The node could not enqueue it. A node of a RabbitMQ 3.10 cluster whose
                // quorum queue leader was lost went on refusing every message for that queue
                // until the lost node was back (~20 s, in the cluster fault test), while the
                // other nodes took them: the session is given up for the next broker's.
                self.lost.cancel();
                Err(TransportError::Unavailable(
                    "the broker refused the message".to_owned(),
                ))
            }
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
pub(super) struct PendingReplies(Mutex<HashMap<String, oneshot::Sender<Reply>>>);

pub(super) type Reply = Result<Vec<u8>, TransportError>;

impl PendingReplies {
    /// Registers a waiting caller until the returned guard is dropped.
    pub(super) fn wait_for<'a>(
        &'a self,
        correlation_id: &str,
        reply: oneshot::Sender<Reply>,
    ) -> Waiting<'a> {
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

    pub(super) fn len(&self) -> usize {
        lock(&self.0).len()
    }
}

/// Removes its caller from [`PendingReplies`] when the call ends, however it ends.
pub(super) struct Waiting<'a> {
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
/// The publishing channel in confirm mode, and the reply queue with its consumer.
async fn open_channels(
    connection: &Connection,
) -> Result<(Channel, Channel, ShortString, Consumer), TransportError> {
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
    Ok((publisher, replies, reply_queue, consumer))
}

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
pub(super) async fn reconnect_when_lost(
    brokers: Arc<Brokers>,
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
            match Session::open(&brokers, &name).await {
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

pub(super) fn live_session(
    sessions: &watch::Receiver<Arc<Session>>,
) -> Result<Arc<Session>, TransportError> {
    let session = Arc::clone(&sessions.borrow());
    session.ensure_usable()?;
    Ok(session)
}
