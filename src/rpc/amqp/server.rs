//! The server side: a conductor's queue declared and consumed on a channel of its own, attached
//! again whenever the consumer is lost (see [`Server::run`]), each delivery handled in a task of its own (bounded by
//! the prefetch), replied to and acked, or rejected without requeue.

use std::{panic::AssertUnwindSafe, sync::Arc, time::Duration};

use futures::{FutureExt, StreamExt};
use lapin::{
    BasicProperties, Channel, Consumer,
    message::Delivery,
    options::{
        BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicPublishOptions,
        BasicQosOptions, BasicRejectOptions, QueueDeclareOptions,
    },
    types::{AMQPValue, FieldTable, ShortString},
};
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore, watch},
    task::{JoinError, JoinSet},
};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use super::{
    CONNECT_TIMEOUT, DEAD_LETTER_MAX, DEAD_LETTER_TTL, DELIVERY_LIMIT, QUEUE_EXPIRES,
    QUEUE_GONE_HOLD, QueueType, RECONNECT_MAX, RECONNECT_MIN, STOP_CONSUMING_TIMEOUT, StopOnDrop,
    check_size, is_not_found, request_id,
    session::{Session, live_session},
    unacked::{Outcome, Taken, Unacked},
    unavailable,
};
use crate::rpc::transport::{RequestHandler, TransportError};

/// Serves one conductor queue; see
/// [`Transport::listen`](crate::rpc::transport::Transport::listen).
pub(super) struct Server {
    pub(super) sessions: watch::Receiver<Arc<Session>>,
    pub(super) queue: ShortString,
    pub(super) queues: QueueType,
    /// Where a quorum queue dead-letters (see [`super::dead_letter_queue`]).
    pub(super) dead_letters: ShortString,
    pub(super) handler: Arc<dyn RequestHandler>,
    pub(super) max_in_flight: usize,
    pub(super) shutdown: CancellationToken,
    /// Whether the consumer is on its queue.
    pub(super) attached: watch::Sender<bool>,
    /// The requests taken and not surely acked, shared by every attachment.
    pub(super) unacked: Arc<Unacked>,
    pub(super) _supervisor: Arc<StopOnDrop>,
}

/// A channel consuming the server's queue.
pub(super) struct Attached {
    channel: Channel,
    consumer: Consumer,
}

/// How a consumer attaches to its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Attach {
    /// Declares the queue (creating it when missing) and consumes it: at start, and after the
    /// hold once the queue was found gone.
    Declare,
    /// Consumes the queue only if it is still there (never creates it): after the consumer was
    /// lost. A queue that went with the lost consumer is [`TransportError::Unroutable`].
    Existing,
}

impl Server {
    /// Attaches to the queue on a channel of its own, within [`CONNECT_TIMEOUT`]. A failure
    /// on a connection that is no longer connected marks its session lost, so that the
    /// supervisor replaces it.
    pub(super) async fn attach(&self, how: Attach) -> Result<Attached, TransportError> {
        let session = live_session(&self.sessions)?;
        let attached = tokio::time::timeout(CONNECT_TIMEOUT, self.attach_on(&session, how))
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

    async fn attach_on(&self, session: &Session, how: Attach) -> Result<Attached, TransportError> {
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
        if how == Attach::Declare {
            self.declare(&channel).await?;
        }

        // Consuming a missing queue fails (404) and declares nothing: joining the queue the
        // lost consumer had is one step, with no moment in which it could be created afresh.
        let consumer = channel
            .basic_consume(
                self.queue.clone(),
                ShortString::default(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|err| {
                if is_not_found(&err) {
                    TransportError::Unroutable(self.queue.to_string())
                } else {
                    unavailable(err)
                }
            })?;
        debug!(queue = %self.queue, ?how, "Consuming");
        Ok(Attached { channel, consumer })
    }

    /// Declares the queue: classic auto-delete, or quorum with its dead-letter queue.
    async fn declare(&self, channel: &Channel) -> Result<(), TransportError> {
        let millis =
            |d: Duration| AMQPValue::LongLongInt(i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut arguments = FieldTable::default();
        arguments.insert("x-expires".into(), millis(QUEUE_EXPIRES));
        let options = match self.queues {
            QueueType::Classic => QueueDeclareOptions {
                auto_delete: true,
                ..QueueDeclareOptions::default()
            },
            QueueType::Quorum => {
                let mut dead = FieldTable::default();
                dead.insert("x-queue-type".into(), quorum());
                dead.insert("x-message-ttl".into(), millis(DEAD_LETTER_TTL));
                dead.insert(
                    "x-max-length".into(),
                    AMQPValue::LongLongInt(DEAD_LETTER_MAX),
                );
                channel
                    .queue_declare(self.dead_letters.clone(), durable(), dead)
                    .await
                    .map_err(unavailable)?;
                arguments.insert("x-queue-type".into(), quorum());
                arguments.insert(
                    "x-delivery-limit".into(),
                    AMQPValue::LongLongInt(DELIVERY_LIMIT),
                );
                arguments.insert(
                    "x-dead-letter-exchange".into(),
                    AMQPValue::LongString("".into()),
                );
                arguments.insert(
                    "x-dead-letter-routing-key".into(),
                    AMQPValue::LongString(self.dead_letters.as_str().into()),
                );
                durable()
            }
        };
        channel
            .queue_declare(self.queue.clone(), options, arguments)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    /// Serves until shutdown, attaching again (with capped backoff) whenever the consumer
    /// is lost with its channel or connection: to the same queue while it is there, else to a
    /// new one once [`QUEUE_GONE_HOLD`] has passed. At shutdown, every request taken runs to
    /// its end.
    pub(super) async fn run(self, attached: Attached) -> Result<(), TransportError> {
        // Shared by every attachment: requests taken before a loss still run while the next
        // consumer takes new ones, and together they stay within `max_in_flight`.
        let permits = Arc::new(Semaphore::new(self.max_in_flight));
        let mut in_flight = JoinSet::new();
        self.serve(attached, &permits, &mut in_flight).await;
        while let Some(done) = in_flight.join_next().await {
            log_join(done);
        }
        Ok(())
    }

    async fn serve(
        &self,
        mut attached: Attached,
        permits: &Arc<Semaphore>,
        in_flight: &mut JoinSet<()>,
    ) {
        loop {
            let consumed = self.consume(attached, permits, in_flight).await;
            self.attached.send_replace(false);
            match consumed {
                Ok(()) => return,
                Err(err) => {
                    warn!(queue = %self.queue, error = %err, "Lost the consumer; attaching again")
                }
            }
            let mut delay = RECONNECT_MIN;
            let mut how = Attach::Existing;
            let mut sessions = self.sessions.clone();
            attached = loop {
                // While the connection is down, wait for the supervisor's new session rather
                // than a backoff of our own, so the queue is served again as soon as it can be.
                let wait_for_session = live_session(&sessions).is_err();
                tokio::select! {
                    () = self.shutdown.cancelled() => return,
                    changed = sessions.changed(), if wait_for_session => {
                        if changed.is_err() {
                            // The transport is gone; nothing will reconnect.
                            return;
                        }
                        sessions.borrow_and_update();
                    }
                    () = tokio::time::sleep(delay), if !wait_for_session => {}
                }
                match self.attach(how).await {
                    Ok(attached) => break attached,
                    Err(TransportError::Unroutable(_)) => {
                        // The broker dropped the lost consumer and its queue, with the requests
                        // in it. Their callers learn that at their next queue check, unless a
                        // queue of the same name is back by then: it is, only after the hold.
                        info!(queue = %self.queue, hold = ?QUEUE_GONE_HOLD,
                            "The queue went with the lost consumer; declaring it again after the hold");
                        tokio::select! {
                            () = self.shutdown.cancelled() => return,
                            () = tokio::time::sleep(QUEUE_GONE_HOLD) => {}
                        }
                        how = Attach::Declare;
                    }
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
    /// is lost before shutdown, at once: the tasks running then finish meanwhile (their acks
    /// are lost with the channel, and the broker delivers their requests again, which are
    /// answered with these tasks' outcomes: `unacked.rs`), while the queue is attached again.
    async fn consume(
        &self,
        attached: Attached,
        permits: &Arc<Semaphore>,
        in_flight: &mut JoinSet<()>,
    ) -> Result<(), TransportError> {
        let Attached {
            channel,
            mut consumer,
        } = attached;
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
                        // so this waits at most for a task that is finishing, or, just after a
                        // lost consumer, for one taken before the loss.
                        let Ok(permit) = permits.clone().acquire_owned().await else {
                            break;
                        };
                        let span = info_span!(
                            "rpc.request",
                            queue = %self.queue,
                            request_id = %request_id(&delivery.properties),
                        );
                        let task = handle(
                            channel.clone(),
                            delivery,
                            self.handler.clone(),
                            self.unacked.clone(),
                            permit,
                        );
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
        if stopping_until.is_none() {
            return outcome;
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

fn durable() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    }
}

fn quorum() -> AMQPValue {
    AMQPValue::LongString("quorum".into())
}

/// Sleeps until `until`; never ends for None.
async fn sleep_until_some(until: Option<tokio::time::Instant>) {
    match until {
        Some(until) => tokio::time::sleep_until(until).await,
        None => std::future::pending().await,
    }
}

/// Runs the handler on one delivery, replies if asked to, then acks; rejects (without
/// requeue) what the handler cannot decode. A request taken before (its ack was lost with its
/// channel) is answered with its first handling's outcome instead (`unacked.rs`). The permit is
/// released at the end.
async fn handle(
    channel: Channel,
    delivery: Delivery,
    handler: Arc<dyn RequestHandler>,
    unacked: Arc<Unacked>,
    _permit: OwnedSemaphorePermit,
) {
    let Delivery {
        properties,
        data,
        acker,
        ..
    } = delivery;
    let id = properties.correlation_id().clone();
    loop {
        match unacked.take(id.as_ref()) {
            Taken::First(handling) => {
                let outcome = run(&*handler, data).await;
                let acked = settle(&channel, &properties, &acker, &outcome).await;
                handling.ended(outcome, acked);
                return;
            }
            Taken::Again(mut first) => {
                let outcome = match first.wait_for(Option::is_some).await {
                    Ok(outcome) => outcome.clone(),
                    // Its first handling was stopped before it ended: handled anew.
                    Err(_) => continue,
                };
                let Some(outcome) = outcome else { continue };
                info!("A request taken before was delivered again; answering it as the first time");
                let acked = settle(&channel, &properties, &acker, &outcome).await;
                unacked.answered_again(id.as_ref(), acked);
                return;
            }
        }
    }
}

/// What the handler makes of a request; a panic rejects it.
async fn run(handler: &dyn RequestHandler, data: Vec<u8>) -> Outcome {
    match AssertUnwindSafe(handler.handle(data)).catch_unwind().await {
        Ok(Ok(reply)) => Outcome::Replied(reply.into()),
        Ok(Err(rejection)) => {
            warn!(reason = %rejection.reason, "Rejecting a request that cannot be handled");
            Outcome::Rejected(rejection.reply.map(Into::into))
        }
        Err(_) => {
            error!("The request handler panicked; rejecting the request");
            Outcome::Rejected(None)
        }
    }
}

/// Sends the reply `outcome` has, where the request asked for one, and acks or rejects the
/// request: whether that ack or reject went out.
async fn settle(
    channel: &Channel,
    properties: &BasicProperties,
    acker: &lapin::Acker,
    outcome: &Outcome,
) -> bool {
    match outcome {
        Outcome::Replied(reply) => {
            if let Some(reply_to) = properties.reply_to() {
                if check_size(reply.len()).is_err() {
                    error!(
                        size = reply.len(),
                        "The reply is too large for the broker; rejecting the request"
                    );
                    return reject(acker).await;
                }
                send_reply(channel, properties, reply_to, reply).await;
            }
            // Ok(false): the channel is gone (or the delivery settled already).
            match acker.ack(BasicAckOptions::default()).await {
                Ok(acked) => acked,
                Err(err) => {
                    warn!(error = %err, "Cannot ack the request");
                    false
                }
            }
        }
        Outcome::Rejected(reply) => {
            if let (Some(reply), Some(reply_to)) = (reply, properties.reply_to())
                && check_size(reply.len()).is_ok()
            {
                send_reply(channel, properties, reply_to, reply).await;
            }
            reject(acker).await
        }
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

/// Rejects without requeue: whether the reject went out.
async fn reject(acker: &lapin::Acker) -> bool {
    match acker.reject(BasicRejectOptions { requeue: false }).await {
        Ok(rejected) => rejected,
        Err(err) => {
            warn!(error = %err, "Cannot reject the request");
            false
        }
    }
}

fn log_join(done: Result<(), JoinError>) {
    if let Err(err) = done {
        error!(error = %err, "A request task failed");
    }
}
