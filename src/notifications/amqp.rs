//! The publisher of notifications to RabbitMQ: one task per process, draining the bounded queue
//! of a [`Sink`] on a connection of its own (not the RPC one: a slow or blocked notification bus
//! must not hold up RPC, and the bus may be another broker).
//!
//! Topology, as oslo.messaging's RabbitMQ driver sets it up for a notifier (`notify_send`,
//! `_publish_and_creates_default_queue`) with its defaults: a topic exchange (`ironic`; not
//! durable, not auto-delete); each message routed by `<topic>.<priority>`
//! (`ironic_versioned_notifications.info`); and, before the first message of a routing key on a
//! connection, the queue of that name declared (same flags, no arguments) and bound to the
//! exchange by that key, so notifications sent before any listener started wait for it. A
//! stock listener declares the same queue and binding, so either may come first.
//!
//! The same publisher carries the watch's node events (`watch.rs`) to RabbitMQ's built-in
//! `amq.topic` exchange: nothing is declared for them ([`Target::oslo`] false).
//!
//! When the broker is away (the design, also in the README):
//! - Emitters never wait and never fail: they push into a bounded [`Queue`]
//!   (`notifications.queue_size`) and go on.
//! - The publisher reconnects with capped exponential backoff (100 ms to 5 s) and, once
//!   connected, publishes what waited, oldest first.
//! - A full queue drops its *oldest* entry for each new one, counts it ([`Queue::dropped`]) and
//!   logs a warning at the 1st, 2nd, 4th, 8th... drop.
//! - Publisher confirms, in batches (up to [`BATCH`] publishes, then their confirms): a batch
//!   whose confirms did not all come back positive is kept, and what was not confirmed is
//!   published again on the next connection (at least once: a message confirmed while its
//!   connection broke may come twice).
//! - At a graceful stop ([`Publisher::flush`]) the queue is closed, what it holds is published
//!   and confirmed within `notifications.flush_timeout`, and what is left then is logged as
//!   lost.
use std::{collections::HashSet, sync::Arc, time::Duration};

use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ExchangeKind,
    options::{
        BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions,
        QueueDeclareOptions,
    },
    types::{FieldTable, ShortString},
};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::{Notification, Queue, Sink};
use crate::broker::Brokers;

/// How many notifications are published before their confirms are awaited.
pub const BATCH: usize = 256;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A broker that blocks publishers (memory or disk alarm) sends no confirm: after this the
/// connection is given up and made again.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);
const RECONNECT_MIN: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(5);
/// How long closing a connection that failed may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);
/// Frames as small as the RPC transport's: notifications are a few KiB.
const FRAME_MAX: u32 = 16 * 1024;

/// Where the publisher sends.
#[derive(Debug, Clone)]
pub struct Target {
    /// The brokers of the transport URL (it carries credentials: never logged).
    pub brokers: Arc<Brokers>,
    /// The exchange (Ironic's `control_exchange`, `ironic`; `amq.topic` for the watch).
    pub exchange: String,
    /// oslo.messaging's notifier topology: the topic exchange declared, and the default queue
    /// of each routing key. False for a built-in exchange and no queues (the watch).
    pub oslo: bool,
    /// The connection's name in the broker's management views.
    pub connection_name: &'static str,
}

/// A publisher task and its queue, to flush at a graceful stop.
pub struct Publisher {
    close: Box<dyn Fn() + Send + Sync>,
    pending: Box<dyn Fn() -> usize + Send + Sync>,
    what: &'static str,
    task: JoinHandle<()>,
}

impl Publisher {
    /// Closes the queue and waits, up to `within`, until what it held is published and
    /// confirmed; what is left then is logged as lost and the task stopped.
    pub async fn flush(self, within: Duration) {
        (self.close)();
        let mut task = self.task;
        if tokio::time::timeout(within, &mut task).await.is_err() {
            task.abort();
            warn!(
                lost = (self.pending)(),
                "Stopping with {}s unsent: not published within {within:?}", self.what
            );
        }
    }
}

/// A sink of notifications that a new task publishes to `target`, routed by
/// `<topic>.<priority>`, and its publisher (to flush at a graceful stop).
pub fn start(target: Target, topic: String, queue_size: usize) -> (Arc<Sink>, Publisher) {
    let queue = Queue::new("notification", queue_size);
    let publisher = spawn(
        target,
        queue.clone(),
        "notification",
        move |n: &Notification| (format!("{topic}.{}", n.level.name()), n.body()),
    );
    (Arc::new(Sink::Queue(queue)), publisher)
}

/// A task publishing what `queue` receives to `target`, each entry routed and encoded by
/// `encode`.
pub fn spawn<T: Send + 'static>(
    target: Target,
    queue: Arc<Queue<T>>,
    what: &'static str,
    encode: impl Fn(&T) -> (String, Vec<u8>) + Send + 'static,
) -> Publisher {
    let task = tokio::spawn(publish(target, queue.clone(), encode));
    Publisher {
        close: Box::new({
            let queue = queue.clone();
            move || queue.close()
        }),
        pending: Box::new(move || queue.len()),
        what,
        task,
    }
}

/// One connection with its channel in confirm mode, and the routing keys whose default queue
/// it declared.
struct Session {
    connection: Connection,
    channel: Channel,
    declared: HashSet<String>,
}

async fn publish<T>(
    target: Target,
    queue: Arc<Queue<T>>,
    encode: impl Fn(&T) -> (String, Vec<u8>),
) {
    // Encoded and routed, not yet confirmed.
    let mut batch: Vec<(String, Vec<u8>)> = Vec::new();
    let mut delay = RECONNECT_MIN;
    let mut connected_once = false;
    loop {
        let mut session = match connect(&target).await {
            Ok(session) => {
                if connected_once {
                    info!("Reconnected to the notification broker");
                }
                connected_once = true;
                session
            }
            Err(err) => {
                // Also while flushing: the flush's time limit ends the attempts.
                warn!(error = %err, retry_in = ?delay, "Cannot connect to the notification broker; notifications wait in their queue");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RECONNECT_MAX);
                continue;
            }
        };
        loop {
            if batch.is_empty() {
                let Some(first) = queue.next().await else {
                    let _ = session.connection.close(200, "OK".into()).await;
                    return;
                };
                batch.push(encode(&first));
                while batch.len() < BATCH {
                    match queue.pop() {
                        Some(next) => batch.push(encode(&next)),
                        None => break,
                    }
                }
            }
            match session.publish_all(&target, &mut batch).await {
                // The backoff starts again only once a batch went through: a broker that
                // accepts connections but refuses what is published (a queue declared with
                // other arguments, a nack) is not reconnected to in a tight loop.
                Ok(()) => delay = RECONNECT_MIN,
                Err(err) => {
                    warn!(error = %err, unconfirmed = batch.len(), retry_in = ?delay,
                        "Lost the notification broker, or it refused what was published; reconnecting");
                    let _ = tokio::time::timeout(
                        CLOSE_TIMEOUT,
                        session.connection.close(200, "OK".into()),
                    )
                    .await;
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(RECONNECT_MAX);
                    break;
                }
            }
        }
    }
}

async fn connect(target: &Target) -> Result<Session, String> {
    let properties =
        ConnectionProperties::default().with_connection_name(target.connection_name.into());
    let (connection, _) = target
        .brokers
        .connect(&properties, CONNECT_TIMEOUT, |uri| {
            uri.query.frame_max.get_or_insert(FRAME_MAX);
        })
        .await?;
    declare_exchange(target, connection)
        .await
        .map_err(|e| e.to_string())
}

/// A channel in confirm mode.
async fn open_channel(connection: &Connection) -> lapin::Result<Channel> {
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    Ok(channel)
}

/// The broker's 406 PRECONDITION_FAILED: a declare whose arguments differ from the existing
/// queue's.
fn is_precondition_failed(err: &lapin::Error) -> bool {
    matches!(err.kind(), lapin::ErrorKind::ProtocolError(e) if e.get_id() == 406)
}

async fn declare_exchange(target: &Target, connection: Connection) -> lapin::Result<Session> {
    let channel = open_channel(&connection).await?;
    if !target.oslo {
        return Ok(Session {
            connection,
            channel,
            declared: HashSet::new(),
        });
    }
    channel
        .exchange_declare(
            ShortString::from(target.exchange.as_str()),
            ExchangeKind::Topic,
            ExchangeDeclareOptions {
                durable: false,
                auto_delete: false,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await?;
    Ok(Session {
        connection,
        channel,
        declared: HashSet::new(),
    })
}

impl Session {
    /// Declares the default queue of `routing_key` (once per connection), as oslo.messaging's
    /// notifier does, so nothing is lost before a listener binds.
    async fn declare_queue(&mut self, target: &Target, routing_key: &str) -> lapin::Result<()> {
        if !target.oslo || self.declared.contains(routing_key) {
            return Ok(());
        }
        let name = ShortString::from(routing_key);
        let declared = self
            .channel
            .queue_declare(
                name.clone(),
                QueueDeclareOptions {
                    durable: false,
                    auto_delete: false,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await;
        match declared {
            Ok(_) => {}
            // The queue is there, declared with other arguments (durable, quorum) by a listener
            // or an Ironic configured so: that is all the declare is for. The refusal closed
            // the channel; the queue is bound on a new one.
            Err(err) if is_precondition_failed(&err) => {
                info!(queue = %name, "The notification queue exists with other arguments; publishing to it as it is");
                self.channel = open_channel(&self.connection).await?;
            }
            Err(err) => return Err(err),
        }
        self.channel
            .queue_bind(
                name.clone(),
                ShortString::from(target.exchange.as_str()),
                name,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
        self.declared.insert(routing_key.to_owned());
        Ok(())
    }

    /// Publishes the batch, then waits for every confirm; what was confirmed leaves the batch.
    /// An error leaves in it what must be published again.
    async fn publish_all(
        &mut self,
        target: &Target,
        batch: &mut Vec<(String, Vec<u8>)>,
    ) -> Result<(), String> {
        let exchange = ShortString::from(target.exchange.as_str());
        let properties = BasicProperties::default()
            .with_content_type("application/json".into())
            .with_content_encoding("utf-8".into());
        let mut confirms = Vec::with_capacity(batch.len());
        for (routing_key, body) in batch.iter() {
            self.declare_queue(target, routing_key)
                .await
                .map_err(|e| e.to_string())?;
            let confirm = self
                .channel
                .basic_publish(
                    exchange.clone(),
                    ShortString::from(routing_key.as_str()),
                    BasicPublishOptions::default(),
                    body,
                    properties.clone(),
                )
                .await
                .map_err(|e| e.to_string())?;
            confirms.push(confirm);
        }
        let mut unconfirmed = Vec::new();
        let mut failure = None;
        // One time limit for the batch's confirms, not one each in turn.
        let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
        for (sent, confirm) in std::mem::take(batch).into_iter().zip(confirms) {
            let outcome = match tokio::time::timeout_at(deadline, confirm).await {
                Ok(Ok(Confirmation::Ack(_))) => Ok(()),
                Ok(Ok(Confirmation::Nack(_))) => {
                    Err("the broker refused a notification".to_owned())
                }
                Ok(Ok(Confirmation::NotRequested)) => Err("confirms are off".to_owned()),
                Ok(Err(err)) => Err(err.to_string()),
                Err(_) => Err(format!("no confirm within {CONFIRM_TIMEOUT:?}")),
            };
            if let Err(err) = outcome {
                unconfirmed.push(sent);
                failure.get_or_insert(err);
            }
        }
        *batch = unconfirmed;
        match failure {
            None => Ok(()),
            Some(err) => Err(err),
        }
    }
}
