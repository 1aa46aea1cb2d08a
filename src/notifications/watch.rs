//! The node event stream behind `GET /ferrum/v1/watch` (beyond Ironic): the node events the
//! notifier emits (`baremetal.node.*`, the same payloads as the versioned notifications), handed
//! to every API process so that a client can wait for a state instead of polling.
//!
//! Independent of `notification_level`: a [`Feed`] is what the notifier hands each node event
//! to, whatever the level, and a [`Hub`] is what an API process's streams subscribe to.
//!
//! - All-in-one: the feed *is* the hub (an in-process broadcast channel); no event is built
//!   while nobody watches.
//! - Multi-host: events happen in conductors (and in API processes: create, update, delete,
//!   maintenance) while a client streams from one API process. Every process publishes its
//!   events to RabbitMQ's built-in topic exchange `amq.topic` with the routing key
//!   `<transport prefix>.watch` (through the notification publisher, `notifications::amqp`: a
//!   bounded queue, confirms, never waiting); every API process has an exclusive, auto-delete,
//!   server-named queue of its own ([`consume`]) and rebroadcasts what arrives to its hub.
//!   The queue is bound to that key only while the process has streams (and for
//!   [`UNBIND_AFTER`] after the last one ends): with nobody watching, the broker drops the
//!   events at the exchange instead of routing them to every API process. A stream starts
//!   once the binding is in place ([`Hub::open_stream`]), so it misses nothing that happens
//!   after its first event. `amq.topic` always exists, so nothing is declared, left behind or
//!   deleted under a publisher, and the prefix keeps deployments sharing a broker apart.
//!
//! Nothing here waits for a client: the hub is a bounded ring (`watch.client_buffer`); a
//! client that falls behind loses the oldest events and is told how many (`lagged`). An API
//! process that loses the broker tells its clients that events may have been missed (`gap`)
//! once it is back.

use std::{sync::Arc, time::Duration};

use futures::StreamExt as _;
use lapin::{
    ConnectionProperties,
    options::{BasicConsumeOptions, QueueBindOptions, QueueDeclareOptions},
    types::{FieldTable, ShortString},
};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Level, Payload, Primitive, Queue, oslo_timestamp, to_json};
use crate::broker::Brokers;

/// The exchange watch events travel by between processes (RabbitMQ's built-in topic exchange).
pub const EXCHANGE: &str = "amq.topic";

/// The routing key of a deployment's watch events.
pub fn routing_key(prefix: &str) -> String {
    format!("{prefix}.watch")
}

/// One node event, with what a stream filters on, and its JSON text (made once, sent as is to
/// every client and over the broker).
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    pub event_type: String,
    pub node_uuid: String,
    pub node_name: Option<String>,
    pub json: String,
}

impl WatchEvent {
    /// The event of a node notification: its type, priority, time, the node's identity and
    /// states (read from the payload, which every node payload carries), and the payload.
    pub fn new(
        event_type: &str,
        level: Level,
        payload: &Payload,
        at: &chrono::NaiveDateTime,
    ) -> WatchEvent {
        /// The event's JSON text, written from the payload it borrows.
        #[derive(Serialize)]
        struct Text<'a> {
            event_type: &'a str,
            priority: &'static str,
            timestamp: String,
            node_uuid: &'a str,
            node_name: Option<&'a str>,
            provision_state: &'a Value,
            target_provision_state: &'a Value,
            power_state: &'a Value,
            target_power_state: &'a Value,
            payload: Primitive<'a>,
        }
        static NULL: Value = Value::Null;
        let field = |k: &str| payload.data.get(k).unwrap_or(&NULL);
        let node_uuid = field("uuid").as_str().unwrap_or_default();
        let node_name = field("name").as_str();
        let json = to_json(&Text {
            event_type,
            priority: level.priority(),
            timestamp: oslo_timestamp(at),
            node_uuid,
            node_name,
            provision_state: field("provision_state"),
            target_provision_state: field("target_provision_state"),
            power_state: field("power_state"),
            target_power_state: field("target_power_state"),
            payload: payload.primitive(),
        });
        WatchEvent {
            event_type: event_type.to_owned(),
            node_uuid: node_uuid.to_owned(),
            node_name: node_name.map(str::to_owned),
            json,
        }
    }

    /// The event as it arrived from the broker (its JSON text); None when it is not one.
    pub fn parse(json: &[u8]) -> Option<WatchEvent> {
        let value: Value = serde_json::from_slice(json).ok()?;
        Some(WatchEvent {
            event_type: value.get("event_type")?.as_str()?.to_owned(),
            node_uuid: value.get("node_uuid")?.as_str()?.to_owned(),
            node_name: value
                .get("node_name")
                .and_then(Value::as_str)
                .map(str::to_owned),
            json: String::from_utf8(json.to_vec()).ok()?,
        })
    }
}

/// What a stream receives.
#[derive(Debug, Clone)]
pub enum Item {
    Event(Arc<WatchEvent>),
    /// Events may have been missed (the API process lost the broker for a while).
    Gap(&'static str),
}

/// An API process's broadcast of node events to its streams; cheap to clone.
#[derive(Debug, Clone)]
pub struct Hub {
    tx: broadcast::Sender<Item>,
    /// Cancelled at shutdown: every stream ends, so a graceful stop does not wait for clients.
    pub closed: CancellationToken,
    pub keepalive: Duration,
    /// Multi-host: asks the broker consumer to bind this process's queue, and is answered
    /// once it is bound ([`consume`]). None all-in-one, where events come from the process.
    binder: Option<mpsc::Sender<oneshot::Sender<()>>>,
}

/// How long a new stream waits for its process's queue to be bound before it starts anyway,
/// with a `gap` notice (the broker is away).
const BIND_WAIT: Duration = Duration::from_secs(5);

/// How long the queue stays bound after the last stream ended: a client that reconnects at
/// once does not make the binding churn.
pub const UNBIND_AFTER: Duration = Duration::from_secs(30);

impl Hub {
    pub fn new(client_buffer: usize, keepalive: Duration, closed: CancellationToken) -> Hub {
        let (tx, _) = broadcast::channel(client_buffer.max(1));
        Hub {
            tx,
            closed,
            keepalive,
            binder: None,
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Item> {
        self.tx.subscribe()
    }

    /// A new stream's receiver, and whether it gets every event from now on. Multi-host it
    /// returns once the process's queue is bound; false when the binding could not be made
    /// within [`BIND_WAIT`] (the broker is away: the consumer binds once it is back).
    pub async fn open_stream(&self) -> (broadcast::Receiver<Item>, bool) {
        let rx = self.subscribe();
        let Some(binder) = &self.binder else {
            return (rx, true);
        };
        let (bound, answer) = oneshot::channel();
        let asked = async {
            binder.send(bound).await.ok()?;
            answer.await.ok()
        };
        let complete = matches!(tokio::time::timeout(BIND_WAIT, asked).await, Ok(Some(())));
        (rx, complete)
    }

    /// Never waits: a full ring overwrites its oldest item (its slow readers are told).
    pub fn send(&self, item: Item) {
        // An error only says that nobody watches.
        let _ = self.tx.send(item);
    }

    /// Whether any stream is open.
    pub fn watched(&self) -> bool {
        self.tx.receiver_count() > 0
    }
}

/// Where a process's notifier hands node events.
#[derive(Debug, Clone)]
pub enum Feed {
    /// Straight to this process's streams (all-in-one).
    Local(Hub),
    /// To the broker, for every API process (multi-host): the queue of a publisher task.
    Broker(Arc<Queue<Arc<WatchEvent>>>),
}

impl Feed {
    /// Whether an event would go anywhere (all-in-one: only while someone watches).
    pub fn wanted(&self) -> bool {
        match self {
            Feed::Local(hub) => hub.watched(),
            Feed::Broker(_) => true,
        }
    }

    pub fn send(&self, event: WatchEvent) {
        match self {
            Feed::Local(hub) => hub.send(Item::Event(Arc::new(event))),
            Feed::Broker(queue) => queue.push(Arc::new(event)),
        }
    }
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const RECONNECT_MIN: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// Starts the task that feeds `hub` with the deployment's watch events from the broker at
/// `brokers` (one exclusive, auto-delete queue for this process, bound while streams want it),
/// reconnecting until the hub is closed; the hub returned asks it for the binding.
pub fn consume(brokers: Arc<Brokers>, prefix: &str, hub: Hub) -> Hub {
    let key = routing_key(prefix);
    let (binder, mut requests) = mpsc::channel(64);
    let hub = Hub {
        binder: Some(binder),
        ..hub
    };
    let feeding = hub.clone();
    tokio::spawn(async move {
        let closed = feeding.closed.clone();
        tokio::select! {
            () = closed.cancelled() => {}
            () = consume_forever(&brokers, &key, &feeding, &mut requests) => {}
        }
    });
    hub
}

type BindRequests = mpsc::Receiver<oneshot::Sender<()>>;

async fn consume_forever(brokers: &Brokers, key: &str, hub: &Hub, requests: &mut BindRequests) {
    let mut delay = RECONNECT_MIN;
    let mut lost = false;
    loop {
        match consume_once(brokers, key, hub, requests, lost).await {
            Ok(()) => delay = RECONNECT_MIN,
            Err(err) => {
                warn!(error = %err, retry_in = ?delay, "The watch stream lost the broker; reconnecting");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RECONNECT_MAX);
            }
        }
        lost = true;
    }
}

/// One connection's life: the queue, bound while streams want it, rebroadcast until the
/// connection breaks. Returns Ok when it broke after it had been set up (reconnect at once),
/// Err when it could not be set up.
async fn consume_once(
    brokers: &Brokers,
    key: &str,
    hub: &Hub,
    requests: &mut BindRequests,
    lost: bool,
) -> Result<(), String> {
    let properties = ConnectionProperties::default().with_connection_name("ferrum watch".into());
    let (connection, _) = brokers
        .connect(&properties, CONNECT_TIMEOUT, |_| {})
        .await?;
    let channel = connection
        .create_channel()
        .await
        .map_err(|e| e.to_string())?;
    let queue = channel
        .queue_declare(
            ShortString::from(""),
            QueueDeclareOptions {
                exclusive: true,
                auto_delete: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|e| e.to_string())?;
    let binding = Binding {
        channel: &channel,
        queue: queue.name().clone(),
        key,
    };
    let mut bound = false;
    // Streams that were open when the broker went away need the binding back at once.
    if hub.watched() {
        binding.bind().await?;
        bound = true;
    }
    let mut consumer = channel
        .basic_consume(
            queue.name().clone(),
            ShortString::from("ferrum-watch"),
            BasicConsumeOptions {
                no_ack: true,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|e| e.to_string())?;
    if lost {
        info!("The watch stream is back on the broker");
        hub.send(Item::Gap(
            "the API process lost the message broker for a while: events may have been missed",
        ));
    }
    // The consumer does not always end when the connection breaks: its error event does.
    let mut events = std::pin::pin!(connection.events_listener());
    let mut idle_check = tokio::time::interval(UNBIND_AFTER / 2);
    let mut idle_checks = 0;
    loop {
        tokio::select! {
            request = requests.recv() => {
                let Some(answer) = request else { break };
                if !bound {
                    if let Err(err) = binding.bind().await {
                        warn!(error = %err, "The watch stream could not bind its queue");
                        break;
                    }
                    bound = true;
                }
                idle_checks = 0;
                let _ = answer.send(());
            }
            _ = idle_check.tick() => {
                // Unbound after two checks in a row without streams: between UNBIND_AFTER / 2
                // and UNBIND_AFTER after the last one ended.
                idle_checks = if hub.watched() { 0 } else { idle_checks + 1 };
                if bound && idle_checks >= 2 {
                    if let Err(err) = binding.unbind().await {
                        warn!(error = %err, "The watch stream could not unbind its queue");
                        break;
                    }
                    bound = false;
                }
            }
            delivery = consumer.next() => match delivery {
                Some(Ok(delivery)) => match WatchEvent::parse(&delivery.data) {
                    Some(event) => hub.send(Item::Event(Arc::new(event))),
                    None => warn!("Ignored a watch message that is not a node event"),
                },
                Some(Err(err)) => {
                    warn!(error = %err, "The watch stream's broker connection broke");
                    break;
                }
                None => break,
            },
            event = events.next() => match event {
                Some(lapin::Event::Error(err)) => {
                    warn!(error = %err, "The watch stream's broker connection broke");
                    break;
                }
                Some(_) => {}
                None => break,
            },
        }
    }
    let _ = connection.close(200, "OK".into()).await;
    Ok(())
}

/// The binding of an API process's queue to the deployment's watch events.
struct Binding<'a> {
    channel: &'a lapin::Channel,
    queue: ShortString,
    key: &'a str,
}

impl Binding<'_> {
    async fn bind(&self) -> Result<(), String> {
        self.channel
            .queue_bind(
                self.queue.clone(),
                ShortString::from(EXCHANGE),
                ShortString::from(self.key),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| e.to_string())
    }

    async fn unbind(&self) -> Result<(), String> {
        self.channel
            .queue_unbind(
                self.queue.clone(),
                ShortString::from(EXCHANGE),
                ShortString::from(self.key),
                FieldTable::default(),
            )
            .await
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;
    use serde_json::{Map, json};

    use super::*;

    #[test]
    fn an_event_carries_the_node_its_states_and_the_payload_and_survives_the_broker() {
        let mut data = Map::new();
        for (k, v) in [
            ("uuid", json!("u-1")),
            ("name", json!("n1")),
            ("provision_state", json!("active")),
            ("target_provision_state", Value::Null),
            ("power_state", json!("power on")),
        ] {
            data.insert(k.to_owned(), v);
        }
        let payload = Payload {
            name: "NodeSetProvisionStatePayload",
            version: "1.18",
            data,
        };
        let at = NaiveDate::from_ymd_opt(2026, 12, 3)
            .unwrap()
            .and_hms_opt(1, 2, 3)
            .unwrap();
        let event = WatchEvent::new(
            "baremetal.node.provision_set.end",
            Level::Info,
            &payload,
            &at,
        );
        assert_eq!(event.node_uuid, "u-1");
        assert_eq!(event.node_name.as_deref(), Some("n1"));
        let v: Value = serde_json::from_str(&event.json).unwrap();
        assert_eq!(v["provision_state"], "active");
        assert_eq!(v["power_state"], "power on");
        assert_eq!(v["priority"], "INFO");
        assert_eq!(v["timestamp"], "2026-12-03 01:02:03");
        assert_eq!(
            v["payload"]["ironic_object.name"],
            "NodeSetProvisionStatePayload"
        );
        assert_eq!(WatchEvent::parse(event.json.as_bytes()), Some(event));
        assert_eq!(WatchEvent::parse(b"{\"x\": 1}"), None);
    }

    #[tokio::test]
    async fn a_slow_reader_is_told_what_it_lost_and_the_sender_never_waits() {
        let hub = Hub::new(2, Duration::from_secs(1), CancellationToken::new());
        let feed = Feed::Local(hub.clone());
        assert!(!feed.wanted(), "nobody watches yet");
        let mut rx = hub.subscribe();
        assert!(feed.wanted());
        for i in 0..5 {
            feed.send(WatchEvent {
                event_type: format!("e{i}"),
                node_uuid: "u".to_owned(),
                node_name: None,
                json: "{}".to_owned(),
            });
        }
        assert!(matches!(
            rx.recv().await,
            Err(broadcast::error::RecvError::Lagged(3))
        ));
        match rx.recv().await {
            Ok(Item::Event(e)) => assert_eq!(e.event_type, "e3"),
            other => panic!("{other:?}"),
        }
    }
}
