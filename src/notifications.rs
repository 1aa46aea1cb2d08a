//! Versioned notifications, wire-compatible with Ironic's, so that unmodified OpenStack
//! consumers (an oslo.messaging notification listener) read them.
//!
//! A [`Notifier`] is what the API and the conductor emit through: it knows the publisher
//! (`ferrum-api.<host>`, `ferrum-conductor.<host>`) and the configured `notification_level`, and
//! hands each notification to a [`Sink`] without ever waiting: the sink is a bounded queue in
//! front of one publisher task (`amqp.rs`), or the log. With notifications off (the default, as
//! Ironic's unset `notification_level`) or below the level, nothing is built: the payload is a
//! closure that is only called when the notification is sent.
//!
//! The message is oslo.messaging's notification (`message_id`, `publisher_id`, `event_type`,
//! `priority`, `payload`, `timestamp`) in its 2.0 envelope, and the payload an Ironic versioned
//! object (`ironic_object.{namespace,name,version,data}`, Ironic's `ironic/objects/notification.py`
//! and oslo.versionedobjects' `obj_to_primitive`). The node payloads are in `node.rs`.
//!
//! Must not: block or fail the operation that emits, query the database, or know queue names
//! beyond the exchange and topic it is configured with.

pub mod amqp;
pub mod node;
pub mod watch;

use std::{
    fmt,
    str::FromStr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use chrono::{NaiveDateTime, Utc};
use crossbeam_queue::ArrayQueue;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::Notify;
use tracing::{debug, error, info, warn};
use uuid::Uuid;

/// Ironic's notification levels, in increasing severity (`NOTIFY_LEVELS`): a notification is
/// sent when its level is at least the configured one. Also the message's `priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Debug,
    Info,
    Warning,
    Error,
    Critical,
}

impl Level {
    /// The configuration's spelling (Ironic's `notification_level` values).
    pub fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warning => "warning",
            Level::Error => "error",
            Level::Critical => "critical",
        }
    }

    /// The message's `priority` as oslo.messaging's notifier writes it (`Notifier.info` sends
    /// `INFO`); its lower case ends the routing key.
    pub fn priority(self) -> &'static str {
        match self {
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warning => "WARN",
            Level::Error => "ERROR",
            Level::Critical => "CRITICAL",
        }
    }
}

impl FromStr for Level {
    type Err = String;

    fn from_str(s: &str) -> Result<Level, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "debug" => Ok(Level::Debug),
            "info" => Ok(Level::Info),
            "warning" => Ok(Level::Warning),
            "error" => Ok(Level::Error),
            "critical" => Ok(Level::Critical),
            other => Err(format!(
                "'{other}' is not a notification level (debug, info, warning, error, critical)"
            )),
        }
    }
}

/// The last part of an event type (Ironic's `NotificationStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Start,
    End,
    Error,
    Success,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Start => "start",
            Status::End => "end",
            Status::Error => "error",
            Status::Success => "success",
        }
    }

    /// Ironic sends `error` at ERROR and everything else at INFO.
    pub fn level(self) -> Level {
        match self {
            Status::Error => Level::Error,
            Status::Start | Status::End | Status::Success => Level::Info,
        }
    }
}

/// Which process kind publishes: the first half of `publisher_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Api,
    Conductor,
}

impl Service {
    fn name(self) -> &'static str {
        match self {
            Service::Api => "ferrum-api",
            Service::Conductor => "ferrum-conductor",
        }
    }
}

/// A versioned payload: an Ironic object's name and version, and its fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    pub name: &'static str,
    pub version: &'static str,
    pub data: Map<String, Value>,
}

impl Payload {
    /// The object as oslo.versionedobjects' `obj_to_primitive` gives it (its changes reset, as
    /// Ironic's `emit` resets them, so no `ironic_object.changes`), borrowed: serialized where
    /// it goes, never copied (a node's payload is its whole record).
    pub fn primitive(&self) -> Primitive<'_> {
        Primitive {
            namespace: "ironic",
            name: self.name,
            version: self.version,
            data: &self.data,
        }
    }
}

/// A [`Payload`] as oslo.versionedobjects writes it: see [`Payload::primitive`].
#[derive(Debug, Serialize)]
pub struct Primitive<'a> {
    #[serde(rename = "ironic_object.namespace")]
    namespace: &'static str,
    #[serde(rename = "ironic_object.name")]
    name: &'static str,
    #[serde(rename = "ironic_object.version")]
    version: &'static str,
    #[serde(rename = "ironic_object.data")]
    data: &'a Map<String, Value>,
}

/// One notification, as queued for the publisher.
#[derive(Debug, Clone)]
pub struct Notification {
    pub message_id: Uuid,
    pub publisher_id: Arc<str>,
    /// `baremetal.<object>.<action>.<status>`.
    pub event_type: String,
    pub level: Level,
    pub payload: Payload,
    /// When it was emitted (UTC).
    pub timestamp: NaiveDateTime,
}

impl Notification {
    /// The message oslo.messaging's notifier builds (`Notifier._notify`).
    pub fn message(&self) -> Message<'_> {
        Message {
            message_id: self.message_id.to_string(),
            publisher_id: &self.publisher_id,
            event_type: &self.event_type,
            priority: self.level.priority(),
            payload: self.payload.primitive(),
            timestamp: oslo_timestamp(&self.timestamp),
            unique_id: Uuid::new_v4().simple().to_string(),
        }
    }

    /// The AMQP body: the message, as JSON text, in oslo.messaging's 2.0 envelope
    /// (`serialize_msg`), itself JSON.
    pub fn body(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Envelope {
            #[serde(rename = "oslo.version")]
            version: &'static str,
            #[serde(rename = "oslo.message")]
            message: String,
        }
        let envelope = Envelope {
            version: "2.0",
            message: to_json(&self.message()),
        };
        to_json(&envelope).into_bytes()
    }
}

/// A notification's message: see [`Notification::message`].
#[derive(Debug, Serialize)]
pub struct Message<'a> {
    message_id: String,
    publisher_id: &'a str,
    event_type: &'a str,
    priority: &'static str,
    payload: Primitive<'a>,
    timestamp: String,
    /// What the AMQP driver adds to every message it sends (`_add_unique_id`); the listener's
    /// duplicate check reads it.
    #[serde(rename = "_unique_id")]
    unique_id: String,
}

/// JSON text of a value made of strings, numbers and JSON values, which cannot fail to
/// serialize (no map has a key that is not a string).
pub(crate) fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| {
        error!("Cannot write a notification as JSON: {e}");
        String::from("{}")
    })
}

/// `str(datetime)` of a naive UTC time, as oslo's `timeutils.utcnow()` is written into a
/// message: `2026-12-03 16:05:07.123456`, without the fraction when it is zero.
pub fn oslo_timestamp(at: &NaiveDateTime) -> String {
    if at.and_utc().timestamp_subsec_micros() == 0 {
        at.format("%Y-%m-%d %H:%M:%S").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
    }
}

/// A date-time field of a payload as oslo.versionedobjects' `DateTimeField` writes it
/// (`isotime`: seconds, `Z`).
pub fn object_time(at: &NaiveDateTime) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A bounded queue between emitters, which never wait, and one publisher task: when it is full
/// (the broker is away or slow) the oldest entry is dropped to make room, counted and logged
/// (1st, 2nd, 4th, 8th... drop, so a broker away for long does not flood the log). The oldest
/// goes because, when the broker is back, a consumer learns more from the latest states.
///
/// A lock-free ring (`crossbeam_queue::ArrayQueue::force_push`): a push is a few atomic
/// operations and a wake-up of the publisher, never a lock, an await or an allocation.
pub struct Queue<T> {
    what: &'static str,
    items: ArrayQueue<T>,
    ready: Notify,
    closed: AtomicBool,
    dropped: AtomicU64,
}

impl<T> Queue<T> {
    /// `what` names the entries in the log ("notification", "watch event").
    pub fn new(what: &'static str, capacity: usize) -> Arc<Queue<T>> {
        Arc::new(Queue {
            what,
            items: ArrayQueue::new(capacity.max(1)),
            ready: Notify::new(),
            closed: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
        })
    }

    /// Queues `item` without waiting; after [`Queue::close`] it is dropped (and counted).
    pub fn push(&self, item: T) {
        if self.closed.load(Ordering::Acquire) {
            self.count_drop("the publisher stopped");
            return;
        }
        let dropped_oldest = self.items.force_push(item).is_some();
        self.ready.notify_one();
        if dropped_oldest {
            self.count_drop("the queue is full: the broker is away or slow");
        }
    }

    fn count_drop(&self, why: &str) {
        let lost = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        if lost.is_power_of_two() {
            warn!(
                dropped = lost,
                "Dropped a {} ({why}); {lost} dropped so far", self.what
            );
        }
    }

    /// The oldest entry, if any.
    pub fn pop(&self) -> Option<T> {
        self.items.pop()
    }

    /// The oldest entry, waiting for one; None once the queue is closed and empty.
    pub async fn next(&self) -> Option<T> {
        loop {
            if let Some(item) = self.pop() {
                return Some(item);
            }
            if self.is_closed() {
                return None;
            }
            // A push or close between the check and here left a permit: no wake-up is lost.
            self.ready.notified().await;
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// No more entries are taken; the publisher sends what is queued and stops.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ready.notify_one();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// How many entries were dropped (the queue was full, or closed).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl<T> fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("what", &self.what)
            .field("capacity", &self.items.capacity())
            .field("dropped", &self.dropped())
            .finish()
    }
}

/// Where notifications go: the publisher's queue, or the log.
#[derive(Debug)]
pub enum Sink {
    Queue(Arc<Queue<Notification>>),
    Log,
}

impl Sink {
    /// Notifications written to the log at their own level (all-in-one without a broker).
    pub fn log() -> Arc<Sink> {
        Arc::new(Sink::Log)
    }

    /// How many notifications were dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        match self {
            Sink::Queue(queue) => queue.dropped(),
            Sink::Log => 0,
        }
    }

    fn send(&self, notification: Notification) {
        match self {
            Sink::Log => log_notification(&notification),
            Sink::Queue(queue) => queue.push(notification),
        }
    }
}

fn log_notification(n: &Notification) {
    let payload = to_json(&n.payload.primitive());
    match n.level {
        Level::Debug => {
            debug!(target: "ferrum::notification", event_type = %n.event_type, publisher_id = %n.publisher_id, %payload, "Notification {}", n.event_type)
        }
        Level::Info | Level::Warning => {
            info!(target: "ferrum::notification", event_type = %n.event_type, publisher_id = %n.publisher_id, %payload, "Notification {}", n.event_type)
        }
        Level::Error | Level::Critical => {
            error!(target: "ferrum::notification", event_type = %n.event_type, publisher_id = %n.publisher_id, %payload, "Notification {}", n.event_type)
        }
    }
}

/// What emits notifications for one service of a process, and hands its node events to the
/// watch feed (`watch.rs`) whatever the level; cheap to clone. Off by default.
#[derive(Clone, Default)]
pub struct Notifier(Option<Arc<Emitter>>);

struct Emitter {
    publisher_id: Arc<str>,
    /// The lowest level sent, and where; None: no notifications (the watch may still be on).
    notify: Option<(Level, Arc<Sink>)>,
    watch: Option<watch::Feed>,
}

impl Notifier {
    /// Sends nothing (Ironic's unset `notification_level`, and no watch).
    pub fn off() -> Notifier {
        Notifier(None)
    }

    /// Sends notifications of at least `level` to `sink` as `<service>.<host>`.
    pub fn new(service: Service, host: &str, level: Level, sink: Arc<Sink>) -> Notifier {
        Notifier::build(service, host, Some((level, sink)), None)
    }

    /// Notifications (`notify`: the lowest level and the sink) and node events for the watch
    /// (`watch`), each optional; off when neither is given.
    pub fn build(
        service: Service,
        host: &str,
        notify: Option<(Level, Arc<Sink>)>,
        watch: Option<watch::Feed>,
    ) -> Notifier {
        if notify.is_none() && watch.is_none() {
            return Notifier::off();
        }
        Notifier(Some(Arc::new(Emitter {
            publisher_id: format!("{}.{host}", service.name()).into(),
            notify,
            watch,
        })))
    }

    /// Whether an event at `level` would go anywhere (a notification, or the watch).
    pub fn enabled(&self, level: Level) -> bool {
        self.0.as_ref().is_some_and(|e| {
            e.notify.as_ref().is_some_and(|(min, _)| level >= *min)
                || e.watch.as_ref().is_some_and(watch::Feed::wanted)
        })
    }

    /// The sink, for its counters.
    pub fn sink(&self) -> Option<&Arc<Sink>> {
        self.0
            .as_ref()
            .and_then(|e| e.notify.as_ref().map(|(_, sink)| sink))
    }

    /// Emits `baremetal.<object>.<action>.<status>` at the status's level, and hands a node's
    /// event to the watch: `payload` is called only when either will be sent. Never waits and
    /// never fails: what cannot be queued is counted and logged.
    pub fn emit(
        &self,
        object: &str,
        action: &str,
        status: Status,
        payload: impl FnOnce() -> Payload,
    ) {
        let Some(emitter) = &self.0 else {
            return;
        };
        let level = status.level();
        let sink = emitter
            .notify
            .as_ref()
            .filter(|(min, _)| level >= *min)
            .map(|(_, sink)| sink);
        let watch = emitter
            .watch
            .as_ref()
            .filter(|feed| object == "node" && feed.wanted());
        if sink.is_none() && watch.is_none() {
            return;
        }
        let event_type = format!("baremetal.{object}.{action}.{}", status.name());
        let payload = payload();
        let timestamp = Utc::now().naive_utc();
        if let Some(feed) = watch {
            feed.send(watch::WatchEvent::new(
                &event_type,
                level,
                &payload,
                &timestamp,
            ));
        }
        if let Some(sink) = sink {
            sink.send(Notification {
                message_id: Uuid::new_v4(),
                publisher_id: emitter.publisher_id.clone(),
                event_type,
                level,
                payload,
                timestamp,
            });
        }
    }
}

impl fmt::Debug for Notifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("Notifier(off)"),
            Some(e) => f
                .debug_struct("Notifier")
                .field("publisher_id", &e.publisher_id)
                .field("level", &e.notify.as_ref().map(|(level, _)| level))
                .field("watch", &e.watch.is_some())
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use serde_json::json;

    use super::*;

    fn sample() -> Notification {
        let at = NaiveDate::from_ymd_opt(2026, 12, 3)
            .unwrap()
            .and_hms_micro_opt(16, 5, 7, 120)
            .unwrap();
        Notification {
            message_id: Uuid::nil(),
            publisher_id: "ferrum-conductor.c1".into(),
            event_type: "baremetal.node.power_set.end".to_owned(),
            level: Level::Info,
            payload: Payload {
                name: "NodeSetPowerStatePayload",
                version: "1.17",
                data: json!({"uuid": "u"}).as_object().unwrap().clone(),
            },
            timestamp: at,
        }
    }

    #[test]
    fn the_body_is_oslo_messagings_2_0_envelope_around_the_message_as_text() {
        let body: Value = serde_json::from_slice(&sample().body()).unwrap();
        let envelope = body.as_object().unwrap();
        let keys: Vec<&str> = envelope.keys().map(String::as_str).collect();
        assert_eq!(keys, ["oslo.message", "oslo.version"]);
        assert_eq!(envelope["oslo.version"], "2.0");
        let inner: Value =
            serde_json::from_str(envelope["oslo.message"].as_str().expect("a string")).unwrap();
        assert_eq!(inner["message_id"], Uuid::nil().to_string());
        assert_eq!(inner["publisher_id"], "ferrum-conductor.c1");
        assert_eq!(inner["event_type"], "baremetal.node.power_set.end");
        assert_eq!(inner["priority"], "INFO");
        assert_eq!(inner["timestamp"], "2026-12-03 16:05:07.000120");
        assert_eq!(inner["_unique_id"].as_str().unwrap().len(), 32);
        assert_eq!(
            inner["payload"],
            json!({
                "ironic_object.namespace": "ironic",
                "ironic_object.name": "NodeSetPowerStatePayload",
                "ironic_object.version": "1.17",
                "ironic_object.data": {"uuid": "u"},
            })
        );
    }

    #[test]
    fn times_are_written_as_python_and_oslo_versionedobjects_write_them() {
        let at = NaiveDate::from_ymd_opt(2026, 1, 2)
            .unwrap()
            .and_hms_opt(3, 4, 5)
            .unwrap();
        assert_eq!(oslo_timestamp(&at), "2026-01-02 03:04:05");
        assert_eq!(object_time(&at), "2026-01-02T03:04:05Z");
    }

    #[test]
    fn levels_filter_as_ironic_and_the_payload_is_built_only_when_sent() {
        let queue = Queue::new("notification", 8);
        let notifier = Notifier::new(
            Service::Api,
            "h",
            Level::Error,
            Arc::new(Sink::Queue(queue.clone())),
        );
        let mut built = 0;
        notifier.emit("node", "update", Status::End, || {
            built += 1;
            sample().payload
        });
        assert_eq!(built, 0, "an INFO notification below ERROR is not built");
        assert!(queue.is_empty());
        notifier.emit("node", "update", Status::Error, || sample().payload);
        let sent = queue.pop().unwrap();
        assert_eq!(sent.event_type, "baremetal.node.update.error");
        assert_eq!(sent.level, Level::Error);
        assert_eq!(&*sent.publisher_id, "ferrum-api.h");

        let mut called = false;
        Notifier::off().emit("node", "update", Status::Error, || {
            called = true;
            sample().payload
        });
        assert!(!called);
        assert!(!Notifier::off().enabled(Level::Critical));
        assert!("WARNING".parse::<Level>().unwrap() == Level::Warning);
        assert!("loud".parse::<Level>().is_err());
    }

    #[test]
    fn a_full_queue_drops_the_oldest_and_counts_without_waiting() {
        let queue = Queue::new("notification", 2);
        let sink = Arc::new(Sink::Queue(queue.clone()));
        let notifier = Notifier::new(Service::Conductor, "h", Level::Info, sink.clone());
        for action in ["a", "b", "c", "d"] {
            notifier.emit("node", action, Status::Start, || sample().payload);
        }
        assert_eq!(sink.dropped(), 2);
        let kept: Vec<String> = std::iter::from_fn(|| queue.pop())
            .map(|n| n.event_type)
            .collect();
        assert_eq!(
            kept,
            ["baremetal.node.c.start", "baremetal.node.d.start"],
            "the newest are kept"
        );
        queue.close();
        notifier.emit("node", "e", Status::Start, || sample().payload);
        assert_eq!(sink.dropped(), 3, "a closed queue takes nothing");
        assert!(queue.is_empty());
    }

    #[test]
    fn node_events_reach_the_watch_whatever_the_level() {
        let hub = watch::Hub::new(
            8,
            std::time::Duration::from_secs(1),
            tokio_util::sync::CancellationToken::new(),
        );
        let notifier = Notifier::build(
            Service::Conductor,
            "h",
            None,
            Some(watch::Feed::Local(hub.clone())),
        );
        let mut built = 0;
        notifier.emit("node", "power_set", Status::End, || {
            built += 1;
            sample().payload
        });
        assert_eq!(built, 0, "nobody watches: nothing is built");
        let mut rx = hub.subscribe();
        notifier.emit("node", "power_set", Status::End, || sample().payload);
        notifier.emit("port", "create", Status::End, || sample().payload);
        match rx.try_recv() {
            Ok(watch::Item::Event(e)) => {
                assert_eq!(e.event_type, "baremetal.node.power_set.end");
                assert_eq!(e.node_uuid, "u");
            }
            other => panic!("{other:?}"),
        }
        assert!(rx.try_recv().is_err(), "only node events are watched");
    }
}
