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
//! Reliability: publisher confirms, in batches (up to [`BATCH`] publishes, then their confirms).
//! A batch whose confirms did not all come back positive is kept, and what was not confirmed is
//! published again on the next connection (at least once: a message confirmed while its
//! connection broke may come twice). While the broker is away the task reconnects with capped
//! exponential backoff; the queue in front of it fills, and what does not fit is dropped and
//! counted by the sink ([`Sink::dropped`]). Nothing here ever waits on behalf of an emitter.
use std::{collections::HashSet, sync::Arc, time::Duration};

use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ExchangeKind,
    options::{
        BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions,
        QueueDeclareOptions,
    },
    types::{FieldTable, ShortString},
};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::{Notification, Sink};

/// How many notifications are published before their confirms are awaited.
pub const BATCH: usize = 256;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A broker that blocks publishers (memory or disk alarm) sends no confirm: after this the
/// connection is given up and made again.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);
const RECONNECT_MIN: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(5);
/// Frames as small as the RPC transport's: notifications are a few KiB.
const FRAME_MAX: u32 = 16 * 1024;

/// Where the publisher sends.
#[derive(Debug, Clone)]
pub struct Target {
    /// The broker's URL; it carries credentials: never log it.
    pub url: String,
    /// The topic exchange (Ironic's `control_exchange`, `ironic`).
    pub exchange: String,
    /// The routing key's first part (`versioned_notifications_topics`,
    /// `ironic_versioned_notifications`).
    pub topic: String,
}

/// A sink whose notifications a new task publishes to `target`. The task ends once every
/// notifier holding the sink is gone and the queue is drained (or, with the broker away, once
/// they are gone: what is left is then lost, and logged).
pub fn start(target: Target, queue_size: usize) -> Arc<Sink> {
    let (sink, queue) = Sink::queue(queue_size);
    tokio::spawn(publish(target, queue));
    sink
}

/// One connection with its channel in confirm mode, and the routing keys whose default queue
/// it declared.
struct Session {
    connection: Connection,
    channel: Channel,
    declared: HashSet<String>,
}

async fn publish(target: Target, mut queue: mpsc::Receiver<Notification>) {
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
                delay = RECONNECT_MIN;
                session
            }
            Err(err) => {
                warn!(error = %err, retry_in = ?delay, "Cannot connect to the notification broker; notifications wait in their queue");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RECONNECT_MAX);
                if queue.is_closed() {
                    let lost = batch.len() + queue.len();
                    if lost > 0 {
                        warn!(
                            lost,
                            "Stopping with notifications unsent: the notification broker is away"
                        );
                    }
                    return;
                }
                continue;
            }
        };
        loop {
            if batch.is_empty() {
                let Some(first) = queue.recv().await else {
                    let _ = session.connection.close(200, "OK".into()).await;
                    return;
                };
                batch.push(encode(&target, &first));
                while batch.len() < BATCH {
                    match queue.try_recv() {
                        Ok(next) => batch.push(encode(&target, &next)),
                        Err(_) => break,
                    }
                }
            }
            match session.publish_all(&target, &mut batch).await {
                Ok(()) => {}
                Err(err) => {
                    warn!(error = %err, unconfirmed = batch.len(), "Lost the notification broker; reconnecting");
                    break;
                }
            }
        }
    }
}

fn encode(target: &Target, n: &Notification) -> (String, Vec<u8>) {
    let routing_key = format!("{}.{}", target.topic, n.level.name());
    (routing_key, n.body())
}

async fn connect(target: &Target) -> Result<Session, String> {
    let mut uri: lapin::uri::AMQPUri = target
        .url
        .parse()
        .map_err(|e: String| format!("bad notification transport URL: {e}"))?;
    uri.query.frame_max.get_or_insert(FRAME_MAX);
    let properties =
        ConnectionProperties::default().with_connection_name("ferrum notifications".into());
    let connection =
        tokio::time::timeout(CONNECT_TIMEOUT, Connection::connect_uri(uri, properties))
            .await
            .map_err(|_| format!("connecting timed out after {CONNECT_TIMEOUT:?}"))?
            .map_err(|e| e.to_string())?;
    declare_exchange(target, connection)
        .await
        .map_err(|e| e.to_string())
}

async fn declare_exchange(target: &Target, connection: Connection) -> lapin::Result<Session> {
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
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
        if self.declared.contains(routing_key) {
            return Ok(());
        }
        let name = ShortString::from(routing_key);
        self.channel
            .queue_declare(
                name.clone(),
                QueueDeclareOptions {
                    durable: false,
                    auto_delete: false,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await?;
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
        for (sent, confirm) in std::mem::take(batch).into_iter().zip(confirms) {
            let outcome = match tokio::time::timeout(CONFIRM_TIMEOUT, confirm).await {
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
