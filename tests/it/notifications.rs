//! Versioned notifications as a stock OpenStack consumer reads them: a real oslo.messaging
//! notification listener (tests/clients/notification_listener.py, in the client venv) on the real
//! RabbitMQ, during a deploy, a failed deploy and a power change of the multi-host stack; and
//! node operations that do not wait for a notification broker that is away.
//!
//! Each test has an exchange and a topic of its own (`FERRUM_NOTIFICATION_EXCHANGE`,
//! `FERRUM_NOTIFICATION_TOPIC`), so that tests running at once never see each other's
//! notifications, and deletes them at its end, passed or failed.

use std::{process::Stdio, time::Duration};

use lapin::{
    Connection, ConnectionProperties,
    options::{ExchangeDeleteOptions, QueueDeleteOptions},
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader, Lines},
    process::{Child, ChildStdout},
};

use crate::util::{Cluster, ClusterOptions, amqp_url, clients_venv, services::random_suffix};

/// The client venv when it has oslo.messaging (`.ci/run` installs it), else None, announced
/// loudly; a failure with `FERRUM_REQUIRE_SERVICES=1`.
fn oslo_venv() -> Option<std::path::PathBuf> {
    let venv = clients_venv()?;
    let found = std::process::Command::new(venv.join("bin/python"))
        .args(["-c", "import oslo_messaging"])
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Some(venv);
    }
    let message = format!(
        "no oslo.messaging in the client venv {} (.ci/run installs it); the notification listener test was NOT run.",
        venv.display()
    );
    if std::env::var("FERRUM_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
        panic!("FERRUM_REQUIRE_SERVICES=1: {message}");
    }
    eprintln!("\n!!!!!!!! {message} !!!!!!!!\n");
    None
}

/// The oslo.messaging listener, run by the client venv's Python.
struct Listener {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<Value>,
}

/// oslo.messaging's spelling of the broker URL: `rabbit://`, `/` for the default vhost.
fn oslo_url(amqp: &str) -> String {
    let rest = amqp
        .strip_prefix("amqp://")
        .expect("an amqp:// URL")
        .trim_end_matches("%2f")
        .trim_end_matches("%2F")
        .trim_end_matches('/');
    format!("rabbit://{rest}/")
}

impl Listener {
    /// Starts the listener and waits until its queues are bound.
    async fn start(venv: &std::path::Path, amqp: &str, exchange: &str, topic: &str) -> Listener {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/clients/notification_listener.py"
        );
        let mut child = tokio::process::Command::new(venv.join("bin/python"))
            .arg(script)
            .arg(oslo_url(amqp))
            .arg(exchange)
            .arg(topic)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("run the listener");
        let stdout = child.stdout.take().expect("stdout");
        let mut listener = Listener {
            child,
            lines: BufReader::new(stdout).lines(),
            seen: Vec::new(),
        };
        let ready = listener.next(Duration::from_secs(60)).await;
        assert_eq!(
            ready,
            Some(json!({"ready": true})),
            "the listener did not start"
        );
        listener
    }

    async fn next(&mut self, limit: Duration) -> Option<Value> {
        match tokio::time::timeout(limit, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => Some(serde_json::from_str(&line).expect("a JSON line")),
            Ok(Ok(None)) => panic!("the listener exited"),
            Ok(Err(e)) => panic!("reading the listener: {e}"),
            Err(_) => None,
        }
    }

    /// Reads notifications until `done` holds for what was received, failing after `limit`.
    async fn until(&mut self, limit: Duration, done: impl Fn(&[Value]) -> bool) -> &[Value] {
        let end = tokio::time::Instant::now() + limit;
        while !done(&self.seen) {
            let left = end.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Some(n) => self.seen.push(n),
                None => panic!(
                    "the notifications expected did not arrive within {limit:?}; received:\n{}",
                    summary(&self.seen)
                ),
            }
        }
        &self.seen
    }

    async fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }
}

fn summary(seen: &[Value]) -> String {
    seen.iter()
        .map(|n| {
            format!(
                "{} {} {} {}",
                n["priority"],
                n["publisher_id"],
                n["event_type"],
                n["payload"]["ironic_object.data"]["uuid"]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The event types received about `uuid` from publishers whose id starts with `publisher`, in
/// the order they arrived (one publisher's notifications arrive in the order it sent them).
fn events_of(seen: &[Value], uuid: &str, publisher: &str) -> Vec<String> {
    seen.iter()
        .filter(|n| n["payload"]["ironic_object.data"]["uuid"] == uuid)
        .filter(|n| {
            n["publisher_id"]
                .as_str()
                .is_some_and(|p| p.starts_with(publisher))
        })
        .map(|n| n["event_type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn find<'a>(seen: &'a [Value], uuid: &str, event_type: &str) -> &'a Value {
    seen.iter()
        .find(|n| {
            n["payload"]["ironic_object.data"]["uuid"] == uuid && n["event_type"] == event_type
        })
        .unwrap_or_else(|| panic!("no {event_type} for {uuid}:\n{}", summary(seen)))
}

fn has(seen: &[Value], uuid: &str, event_type: &str) -> bool {
    seen.iter().any(|n| {
        n["payload"]["ironic_object.data"]["uuid"] == uuid && n["event_type"] == event_type
    })
}

/// Removes the test's exchange and the queues the listener and Ferrum declared on it.
async fn delete_topology(amqp: &str, exchange: &str, topic: &str) {
    let Ok(conn) = Connection::connect(amqp, ConnectionProperties::default()).await else {
        return;
    };
    if let Ok(channel) = conn.create_channel().await {
        for priority in ["info", "error"] {
            let _ = channel
                .queue_delete(
                    format!("{topic}.{priority}").as_str().into(),
                    QueueDeleteOptions::default(),
                )
                .await;
        }
        let _ = channel
            .exchange_delete(exchange.into(), ExchangeDeleteOptions::default())
            .await;
    }
    let _ = conn.close(200, "OK".into()).await;
}

/// Deletes the test's exchange and queues when dropped, also when the test fails: they are
/// neither durable nor auto-delete, and would stay on the shared broker.
struct Topology {
    amqp: String,
    exchange: String,
    topic: String,
}

impl Topology {
    /// An exchange and a topic of the test's own (`what` in the topic's name), and their guard.
    fn new(amqp: &str, what: &str) -> (String, String, Topology) {
        let id = random_suffix();
        let exchange = format!("ferrum-it-{id}");
        let topic = format!("ferrum_it_{id}_{what}");
        let guard = Topology {
            amqp: amqp.to_owned(),
            exchange: exchange.clone(),
            topic: topic.clone(),
        };
        (exchange, topic, guard)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let (amqp, exchange, topic) =
            (self.amqp.clone(), self.exchange.clone(), self.topic.clone());
        // A runtime of its own: a test's runtime may be unwinding.
        let cleaned = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                rt.block_on(delete_topology(&amqp, &exchange, &topic));
            }
        });
        let _ = cleaned.join();
    }
}

const SECRET: &str = "hunter2-notify";
/// A config drive as an image (base64 of "configdrive-secret-text"): its text never travels.
const CONFIGDRIVE: &str = "Y29uZmlnZHJpdmUtc2VjcmV0LXRleHQ=";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oslo_listener_reads_a_deploy_a_failed_deploy_and_a_power_change() {
    let Some(venv) = oslo_venv() else {
        return;
    };
    let Some(amqp) = amqp_url() else {
        return;
    };
    let (exchange, topic, _topology) = Topology::new(&amqp, "notifications");
    let Some(cluster) = Cluster::start(ClusterOptions {
        env: vec![
            ("FERRUM_NOTIFICATION_LEVEL", "info".to_owned()),
            ("FERRUM_NOTIFICATION_EXCHANGE", exchange.clone()),
            ("FERRUM_NOTIFICATION_TOPIC", topic.clone()),
        ],
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;

    // Created before any listener runs: Ferrum declares the queue a listener reads, as
    // oslo.messaging's notifier does, so the listener started next still gets these.
    let node = api
        .available_node(json!({
            "name": "notified",
            "driver_info": {"fake_password": SECRET, "fake_address": "10.0.0.9"},
        }))
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let failing = api
        .available_node(json!({
            "name": "notified-fail",
            "driver_info": {"fake_deploy_panic": "no disk"},
        }))
        .await;
    let failing_uuid = failing["uuid"].as_str().unwrap().to_owned();

    let mut listener = Listener::start(&venv, &amqp, &exchange, &topic).await;

    // A deploy with a config drive (masked in every payload), then a power change.
    let deploy = api
        .request(
            reqwest::Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "active", "configdrive": CONFIGDRIVE})),
        )
        .await;
    assert_eq!(
        deploy.status,
        reqwest::StatusCode::ACCEPTED,
        "{}",
        deploy.body
    );
    api.wait_for(&uuid, "active").await;
    let power = api.power(&uuid, "power off").await;
    assert_eq!(
        power.status,
        reqwest::StatusCode::ACCEPTED,
        "{}",
        power.body
    );
    api.wait_power(&uuid, "power off").await;
    // A power change the hardware refuses.
    let broken = api
        .patch(
            &uuid,
            json!([{"op": "add", "path": "/driver_info/fake_power_fail", "value": "BMC unreachable"}]),
        )
        .await;
    assert_eq!(broken.status, reqwest::StatusCode::OK, "{}", broken.body);
    let power = api.power(&uuid, "power on").await;
    assert_eq!(
        power.status,
        reqwest::StatusCode::ACCEPTED,
        "{}",
        power.body
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let node = api.node(&uuid).await;
        if node["target_power_state"].is_null() && node["last_error"].is_string() {
            assert_eq!(node["power_state"], "power off", "{node}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{node}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A deploy that fails in the driver, then its tear-down (which powers the node off).
    api.accepted(&failing_uuid, "active").await;
    api.wait_for(&failing_uuid, "deploy failed").await;
    api.accepted(&failing_uuid, "deleted").await;
    api.wait_for(&failing_uuid, "available").await;
    // Maintenance on and off, a PATCH with a secret, and a delete, through the API.
    let on = api
        .request(
            reqwest::Method::PUT,
            &format!("/v1/nodes/{uuid}/maintenance"),
            Some(json!({"reason": "disk check"})),
        )
        .await;
    assert_eq!(on.status, reqwest::StatusCode::ACCEPTED, "{}", on.body);
    let off = api
        .request(
            reqwest::Method::DELETE,
            &format!("/v1/nodes/{uuid}/maintenance"),
            None,
        )
        .await;
    assert_eq!(off.status, reqwest::StatusCode::ACCEPTED, "{}", off.body);
    let patched = api
        .patch(
            &failing_uuid,
            json!([{"op": "add", "path": "/driver_info/fake_token", "value": SECRET}]),
        )
        .await;
    assert_eq!(patched.status, reqwest::StatusCode::OK, "{}", patched.body);
    let doomed = api
        .create_node(json!({"name": "notified-gone", "driver": "fake-hardware"}))
        .await;
    let doomed_uuid = doomed["uuid"].as_str().unwrap().to_owned();
    let gone = api
        .request(
            reqwest::Method::DELETE,
            &format!("/v1/nodes/{doomed_uuid}"),
            None,
        )
        .await;
    assert_eq!(
        gone.status,
        reqwest::StatusCode::NO_CONTENT,
        "{}",
        gone.body
    );

    let seen = listener
        .until(Duration::from_secs(30), |seen| {
            has(seen, &uuid, "baremetal.node.power_set.error")
                && events_of(seen, &failing_uuid, "ferrum-conductor.").len() == 11
                && has(seen, &uuid, "baremetal.node.create.end")
                && events_of(seen, &uuid, "ferrum-api.").len() == 8
                && has(seen, &failing_uuid, "baremetal.node.update.end")
                && has(seen, &doomed_uuid, "baremetal.node.delete.end")
        })
        .await
        .to_vec();
    listener.stop().await;
    // What the listener received, for `--nocapture` readers.
    eprintln!("notifications received:\n{}", summary(&seen));
    if let Some(first) = seen.first() {
        eprintln!("the first, as oslo.messaging handed it over:\n{first:#}");
    }
    if let Some(refused) = seen
        .iter()
        .find(|n| n["event_type"] == "baremetal.node.power_set.error")
    {
        eprintln!("a refused power change, as oslo.messaging handed it over:\n{refused:#}");
    }

    // The conductor's notifications about each node, in the order it sent them: manage and
    // provide (before the listener started: the queue kept them), the deploy, the power
    // changes.
    assert_eq!(
        events_of(&seen, &uuid, "ferrum-conductor."),
        [
            "baremetal.node.provision_set.start", // enroll -> verifying
            "baremetal.node.provision_set.end",   // verifying -> manageable
            "baremetal.node.provision_set.start", // manageable -> cleaning
            "baremetal.node.provision_set.end",   // cleaning -> available
            "baremetal.node.provision_set.start", // available -> deploying
            "baremetal.node.power_set.start",     // the deploy powers on
            "baremetal.node.power_set.end",
            "baremetal.node.provision_set.end", // deploying -> active
            "baremetal.node.power_set.start",   // power off
            "baremetal.node.power_set.end",
            "baremetal.node.power_set.start", // power on, refused
            "baremetal.node.power_set.error",
        ],
        "{}",
        summary(&seen)
    );
    assert_eq!(
        events_of(&seen, &failing_uuid, "ferrum-conductor."),
        [
            "baremetal.node.provision_set.start",
            "baremetal.node.provision_set.end",
            "baremetal.node.provision_set.start",
            "baremetal.node.provision_set.end",
            "baremetal.node.provision_set.start", // available -> deploying
            "baremetal.node.provision_set.error", // deploying -> deploy failed
            "baremetal.node.provision_set.start", // deploy failed -> deleting
            "baremetal.node.power_set.start",     // the tear-down powers off
            "baremetal.node.power_set.end",
            "baremetal.node.provision_set.success", // deleting -> cleaning
            "baremetal.node.provision_set.end",     // cleaning -> available
        ],
        "{}",
        summary(&seen)
    );
    assert_eq!(
        events_of(&seen, &uuid, "ferrum-api."),
        [
            "baremetal.node.create.start",
            "baremetal.node.create.end",
            "baremetal.node.update.start",
            "baremetal.node.update.end",
            "baremetal.node.maintenance_set.start",
            "baremetal.node.maintenance_set.end",
            "baremetal.node.maintenance_set.start",
            "baremetal.node.maintenance_set.end",
        ],
        "{}",
        summary(&seen)
    );
    assert_eq!(
        events_of(&seen, &failing_uuid, "ferrum-api."),
        [
            "baremetal.node.create.start",
            "baremetal.node.create.end",
            "baremetal.node.update.start",
            "baremetal.node.update.end",
        ],
        "{}",
        summary(&seen)
    );
    assert_eq!(
        events_of(&seen, &doomed_uuid, "ferrum-api."),
        [
            "baremetal.node.create.start",
            "baremetal.node.create.end",
            "baremetal.node.delete.start",
            "baremetal.node.delete.end",
        ],
        "{}",
        summary(&seen)
    );
    // Before the conductor made it, the node as the request gives it.
    let creating = find(&seen, &uuid, "baremetal.node.create.start");
    assert_eq!(creating["priority"], "info");
    assert_eq!(creating["payload"]["ironic_object.name"], "NodeCRUDPayload");
    assert_eq!(creating["payload"]["ironic_object.version"], "1.15");
    let data = &creating["payload"]["ironic_object.data"];
    assert_eq!(data["name"], "notified");
    assert_eq!(data["provision_state"], "enroll");
    assert_eq!(data["created_at"], Value::Null);
    assert_eq!(data["driver_info"]["fake_password"], "******");
    assert_eq!(data["driver_info"]["fake_address"], "10.0.0.9");
    // The update's start carries the node as patched, masked.
    let updating = find(&seen, &failing_uuid, "baremetal.node.update.start");
    assert_eq!(
        updating["payload"]["ironic_object.data"]["driver_info"]["fake_token"],
        "******"
    );
    // The refused power change: an ERROR with the failure as last_error.
    let refused = find(&seen, &uuid, "baremetal.node.power_set.error");
    assert_eq!(refused["priority"], "error");
    assert_eq!(
        refused["payload"]["ironic_object.name"],
        "NodeSetPowerStatePayload"
    );
    let data = &refused["payload"]["ironic_object.data"];
    assert_eq!(data["to_power"], "power on");
    assert_eq!(data["power_state"], "power off");
    assert_eq!(data["target_power_state"], Value::Null);
    assert!(
        data["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("BMC unreachable")),
        "{data}"
    );
    // The tear-down's power change, announced by the conductor in the middle of the move.
    let tear_down = power_sets_of(&seen, &failing_uuid);
    assert_eq!(tear_down.len(), 2, "{}", summary(&seen));
    for n in &tear_down {
        let data = &n["payload"]["ironic_object.data"];
        assert_eq!(data["to_power"], "power off", "{n}");
        assert_eq!(data["provision_state"], "deleting", "{n}");
    }
    assert_eq!(
        tear_down[1]["payload"]["ironic_object.data"]["power_state"],
        "power off"
    );
    let maintenance: Vec<&Value> = seen
        .iter()
        .filter(|n| {
            n["payload"]["ironic_object.data"]["uuid"] == uuid.as_str()
                && n["event_type"] == "baremetal.node.maintenance_set.end"
        })
        .collect();
    assert_eq!(
        maintenance[0]["payload"]["ironic_object.name"],
        "NodePayload"
    );
    assert_eq!(maintenance[0]["payload"]["ironic_object.version"], "1.17");
    let data = &maintenance[0]["payload"]["ironic_object.data"];
    assert_eq!(data["maintenance"], true);
    assert_eq!(data["maintenance_reason"], "disk check");
    let data = &maintenance[1]["payload"]["ironic_object.data"];
    assert_eq!(data["maintenance"], false);
    assert_eq!(data["maintenance_reason"], Value::Null);
    let updated = find(&seen, &failing_uuid, "baremetal.node.update.end");
    assert_eq!(updated["payload"]["ironic_object.name"], "NodeCRUDPayload");
    assert_eq!(
        updated["payload"]["ironic_object.data"]["driver_info"]["fake_token"],
        "******"
    );

    // The envelope as oslo.messaging decoded it.
    for n in &seen {
        let priority = if n["event_type"].as_str().unwrap().ends_with(".error") {
            "error"
        } else {
            "info"
        };
        assert_eq!(n["priority"], priority, "{n}");
        assert_eq!(n["payload"]["ironic_object.namespace"], "ironic", "{n}");
        assert!(n["metadata"]["message_id"].is_string(), "{n}");
        assert!(n["metadata"]["timestamp"].is_string(), "{n}");
    }

    let created = find(&seen, &uuid, "baremetal.node.create.end");
    assert_eq!(created["payload"]["ironic_object.name"], "NodeCRUDPayload");
    assert_eq!(created["payload"]["ironic_object.version"], "1.15");
    let data = &created["payload"]["ironic_object.data"];
    assert_eq!(data["driver_info"]["fake_password"], "******");
    assert_eq!(data["driver_info"]["fake_address"], "10.0.0.9");
    assert_eq!(data["name"], "notified");
    assert_eq!(data["provision_state"], "enroll");

    let start = seen
        .iter()
        .find(|n| {
            n["payload"]["ironic_object.data"]["uuid"] == uuid.as_str()
                && n["payload"]["ironic_object.data"]["event"] == "deploy"
        })
        .expect("the deploy's start");
    assert_eq!(start["event_type"], "baremetal.node.provision_set.start");
    assert_eq!(
        start["payload"]["ironic_object.name"],
        "NodeSetProvisionStatePayload"
    );
    assert_eq!(start["payload"]["ironic_object.version"], "1.18");
    let data = &start["payload"]["ironic_object.data"];
    assert_eq!(data["previous_provision_state"], "available");
    assert_eq!(data["previous_target_provision_state"], Value::Null);
    assert_eq!(data["provision_state"], "deploying");
    assert_eq!(data["target_provision_state"], "active");
    assert_eq!(data["instance_info"]["configdrive"], "******");
    let cluster_hosts = &cluster.conductor_hosts;
    let publisher = start["publisher_id"].as_str().unwrap();
    assert!(
        cluster_hosts
            .iter()
            .any(|h| publisher == format!("ferrum-conductor.{h}")),
        "{publisher}"
    );

    let end = seen
        .iter()
        .find(|n| {
            n["payload"]["ironic_object.data"]["uuid"] == uuid.as_str()
                && n["payload"]["ironic_object.data"]["provision_state"] == "active"
        })
        .expect("the deploy's end");
    assert_eq!(end["event_type"], "baremetal.node.provision_set.end");
    let data = &end["payload"]["ironic_object.data"];
    assert_eq!(data["event"], "done");
    assert_eq!(data["previous_provision_state"], "deploying");
    assert_eq!(data["previous_target_provision_state"], "active");
    assert_eq!(data["target_provision_state"], Value::Null);

    // The power changes of the node, in order: the deploy's power on (announced by the power
    // interface inside the deploy, as Ironic's node_power_action), then the power off.
    let powers = power_sets_of(&seen, &uuid);
    assert_eq!(powers.len(), 6, "{}", summary(&seen));
    for n in &powers {
        assert_eq!(
            n["payload"]["ironic_object.name"], "NodeSetPowerStatePayload",
            "{n}"
        );
        assert_eq!(n["payload"]["ironic_object.version"], "1.17", "{n}");
    }
    let data = |i: usize| &powers[i]["payload"]["ironic_object.data"];
    // The deploy's: in the middle of the move, the node powered on at its end.
    assert_eq!(data(0)["to_power"], "power on");
    assert_eq!(data(0)["provision_state"], "deploying");
    assert_eq!(data(1)["to_power"], "power on");
    assert_eq!(data(1)["power_state"], "power on");
    assert_eq!(data(1)["target_power_state"], Value::Null);
    // The API's power off: the target shown while it runs, the new state at its end.
    assert_eq!(data(2)["to_power"], "power off");
    assert_eq!(data(2)["provision_state"], "active");
    assert_eq!(data(3)["to_power"], "power off");
    assert_eq!(data(3)["power_state"], "power off");
    assert_eq!(data(3)["target_power_state"], Value::Null);

    let failed = find(&seen, &failing_uuid, "baremetal.node.provision_set.error");
    assert_eq!(failed["priority"], "error");
    let data = &failed["payload"]["ironic_object.data"];
    assert_eq!(data["event"], "fail");
    assert_eq!(data["previous_provision_state"], "deploying");
    assert_eq!(data["provision_state"], "deploy failed");
    assert!(
        data["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("no disk")),
        "{data}"
    );

    // No secret anywhere on the wire.
    let all = serde_json::to_string(&seen).unwrap();
    assert!(!all.contains(SECRET), "a password reached the bus");
    assert!(!all.contains(CONFIGDRIVE), "a config drive reached the bus");
    cluster.assert_no_locks().await;
}

/// All-in-one on the in-process transport, without a notification broker: notifications go to
/// the log at their level.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_broker_the_all_in_one_logs_its_notifications() {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack: crate::util::Stack::Embedded,
        env: vec![("FERRUM_NOTIFICATION_LEVEL", "info".to_owned())],
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let node = cluster
        .api
        .create_node(json!({"name": "logged", "driver": "fake-hardware",
                            "driver_info": {"fake_password": SECRET}}))
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    cluster.api.accepted(&uuid, "manage").await;
    cluster.api.wait_for(&uuid, "manageable").await;
    // A notification goes out after its write returns, which on the embedded file is once the
    // write is on disk: a reader may see the new state a sync earlier.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let log = loop {
        let log = cluster.log_of(&cluster.conductor_process(0));
        if log.contains("Notification baremetal.node.provision_set.end")
            || std::time::Instant::now() > deadline
        {
            break log;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(
        log.contains("Notification baremetal.node.create.end"),
        "{log}"
    );
    assert!(
        log.contains("Notification baremetal.node.provision_set.end"),
        "{log}"
    );
    assert!(log.contains("ferrum-api."), "{log}");
    assert!(log.contains("ferrum-conductor."), "{log}");
    assert!(!log.contains(SECRET), "a password reached the log");
    cluster.assert_no_locks().await;
}

/// A notification broker that refuses connections: creates, deploys and power changes go on
/// as fast as ever, and what does not fit the queue is dropped, counted and logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_operations_do_not_wait_for_an_unreachable_notification_broker() {
    let Some(cluster) = Cluster::start(ClusterOptions {
        env: vec![
            ("FERRUM_NOTIFICATION_LEVEL", "info".to_owned()),
            // Nothing listens on port 1.
            (
                "FERRUM_NOTIFICATION_TRANSPORT_URL",
                "amqp://guest:guest@127.0.0.1:1/%2f".to_owned(),
            ),
            ("FERRUM_NOTIFICATION_QUEUE_SIZE", "2".to_owned()),
        ],
        conductors: 1,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let started = std::time::Instant::now();
    let mut uuids = Vec::new();
    for i in 0..3 {
        let node = api
            .available_node(json!({"name": format!("away-{i}")}))
            .await;
        let uuid = node["uuid"].as_str().unwrap().to_owned();
        api.accepted(&uuid, "active").await;
        uuids.push(uuid);
    }
    for uuid in &uuids {
        api.wait_for(uuid, "active").await;
        let power = api.power(uuid, "power off").await;
        assert_eq!(
            power.status,
            reqwest::StatusCode::ACCEPTED,
            "{}",
            power.body
        );
        api.wait_power(uuid, "power off").await;
    }
    let maintenance = api
        .request(
            reqwest::Method::PUT,
            &format!("/v1/nodes/{}/maintenance", uuids[0]),
            Some(json!({"reason": "broker away"})),
        )
        .await;
    assert_eq!(maintenance.status, reqwest::StatusCode::ACCEPTED);
    // Three nodes through enroll..active and a power change: the fake hardware takes no time,
    // so anything near the broker's reconnect delays would be the notifier waiting.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let log = cluster.log_of(&cluster.conductor_process(0));
    assert!(
        log.contains("Dropped a notification"),
        "the conductor did not report its dropped notifications:\n{log}"
    );
    assert!(
        log.contains("Cannot connect to the notification broker"),
        "{log}"
    );
    cluster.assert_no_locks().await;
}

/// The notification broker (a private RabbitMQ; the RPC broker stays up) stops while nodes are
/// created, moved and powered: every operation answers as fast as ever, and once the broker is
/// back what was queued meanwhile, and what follows, reaches a stock oslo.messaging listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_queued_while_the_broker_is_away_arrive_once_it_is_back() {
    let Some(venv) = oslo_venv() else {
        return;
    };
    let Some(mut rabbit) = crate::util::PrivateRabbit::start().await else {
        return;
    };
    let id = random_suffix();
    let exchange = format!("ferrum-it-{id}");
    let topic = format!("ferrum_it_{id}_notifications");
    let Some(cluster) = Cluster::start(ClusterOptions {
        env: vec![
            ("FERRUM_NOTIFICATION_LEVEL", "info".to_owned()),
            ("FERRUM_NOTIFICATION_TRANSPORT_URL", rabbit.url()),
            ("FERRUM_NOTIFICATION_EXCHANGE", exchange.clone()),
            ("FERRUM_NOTIFICATION_TOPIC", topic.clone()),
        ],
        conductors: 1,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let mut listener = Listener::start(&venv, &rabbit.url(), &exchange, &topic).await;
    let before = api
        .create_node(json!({"name": "before-outage", "driver": "fake-hardware"}))
        .await;
    let before_uuid = before["uuid"].as_str().unwrap().to_owned();
    listener
        .until(Duration::from_secs(30), |seen| {
            has(seen, &before_uuid, "baremetal.node.create.end")
        })
        .await;

    rabbit.stop().await;
    // With the broker away: the operations neither fail nor wait for it.
    let started = std::time::Instant::now();
    let during = api.available_node(json!({"name": "during-outage"})).await;
    let during_uuid = during["uuid"].as_str().unwrap().to_owned();
    api.accepted(&during_uuid, "active").await;
    api.wait_for(&during_uuid, "active").await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "operations took {took:?} with the broker away"
    );
    let log = cluster.log_of(&cluster.conductor_process(0));
    assert!(
        log.contains("Lost the notification broker")
            || log.contains("Cannot connect to the notification broker"),
        "the conductor did not notice the broker went away:\n{log}"
    );

    rabbit.start_again().await;
    let power = api.power(&during_uuid, "power off").await;
    assert_eq!(
        power.status,
        reqwest::StatusCode::ACCEPTED,
        "{}",
        power.body
    );
    api.wait_power(&during_uuid, "power off").await;
    // The listener reconnects by itself (oslo.messaging's retries); the queue Ferrum declares
    // again on its new connection keeps what arrives before it does.
    // The power off's end (the deploy's power on has one too).
    let powered_off = |seen: &[Value]| {
        seen.iter().any(|n| {
            let data = &n["payload"]["ironic_object.data"];
            data["uuid"] == during_uuid.as_str()
                && n["event_type"] == "baremetal.node.power_set.end"
                && data["to_power"] == "power off"
        })
    };
    let seen = listener
        .until(Duration::from_secs(90), |seen| {
            has(seen, &during_uuid, "baremetal.node.create.end") && powered_off(seen)
        })
        .await
        .to_vec();
    listener.stop().await;
    eprintln!("received across the outage:\n{}", summary(&seen));
    // Delivery is at least once (a batch whose confirms were lost with the connection is sent
    // again): a repeat has the message id of the first.
    let mut ids = std::collections::HashSet::new();
    let once: Vec<Value> = seen
        .iter()
        .filter(|n| ids.insert(n["metadata"]["message_id"].to_string()))
        .cloned()
        .collect();
    // The conductor's, in the order it sent them: manage, provide and the deploy (which powers
    // the node on) while the broker was away, then the power off once it was back.
    assert_eq!(
        events_of(&once, &during_uuid, "ferrum-conductor."),
        [
            "baremetal.node.provision_set.start", // enroll -> verifying
            "baremetal.node.provision_set.end",   // verifying -> manageable
            "baremetal.node.provision_set.start", // manageable -> cleaning
            "baremetal.node.provision_set.end",   // cleaning -> available
            "baremetal.node.provision_set.start", // available -> deploying
            "baremetal.node.power_set.start",     // the deploy powers on
            "baremetal.node.power_set.end",
            "baremetal.node.provision_set.end", // deploying -> active
            "baremetal.node.power_set.start",   // power off, after the outage
            "baremetal.node.power_set.end",
        ],
        "{}",
        summary(&seen)
    );
    assert_eq!(
        events_of(&once, &during_uuid, "ferrum-api."),
        ["baremetal.node.create.start", "baremetal.node.create.end"],
        "{}",
        summary(&seen)
    );
    cluster.assert_no_locks().await;
}

/// A graceful stop publishes what is still queued: flushed at once, every notification is in
/// the broker's queue; with the broker unreachable the flush gives up within its time limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_flushes_the_queued_notifications_within_its_time_limit() {
    use ferrum::notifications::{
        Level, Notifier, Service, Status,
        amqp::{self, Target},
    };
    let Some(url) = amqp_url() else {
        return;
    };
    let (exchange, topic, _topology) = Topology::new(&url, "flush");
    let target = |url: &str| Target {
        brokers: std::sync::Arc::new(ferrum::broker::Brokers::parse(url).expect("broker URL")),
        exchange: exchange.clone(),
        oslo: true,
        connection_name: "ferrum flush test",
    };
    let payload = || ferrum::notifications::Payload {
        name: "NodePayload",
        version: "1.17",
        data: serde_json::Map::new(),
    };
    let (sink, publisher) = amqp::start(target(&url), topic.clone(), 1000);
    let notifier = Notifier::new(Service::Conductor, "flush", Level::Info, sink);
    for _ in 0..300 {
        notifier.emit("node", "update", Status::End, payload);
    }
    let started = std::time::Instant::now();
    publisher.flush(Duration::from_secs(20)).await;
    eprintln!("flushed 300 notifications in {:?}", started.elapsed());
    let conn = Connection::connect(&url, ConnectionProperties::default())
        .await
        .expect("connect");
    let channel = conn.create_channel().await.expect("channel");
    let queue = channel
        .queue_declare(
            format!("{topic}.info").as_str().into(),
            lapin::options::QueueDeclareOptions {
                passive: true,
                ..lapin::options::QueueDeclareOptions::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await
        .expect("the queue Ferrum declared");
    assert_eq!(queue.message_count(), 300);
    let _ = conn.close(200, "OK".into()).await;

    // Nothing listens on port 1: the flush ends at its limit, the emitter never waited.
    let (sink, publisher) = amqp::start(target("amqp://guest:guest@127.0.0.1:1/%2f"), topic, 10);
    let notifier = Notifier::new(Service::Conductor, "flush", Level::Info, sink.clone());
    let emitting = std::time::Instant::now();
    for _ in 0..20 {
        notifier.emit("node", "update", Status::End, payload);
    }
    assert!(emitting.elapsed() < Duration::from_millis(500));
    assert_eq!(
        sink.dropped(),
        10,
        "the oldest beyond the queue's 10 dropped"
    );
    let started = std::time::Instant::now();
    publisher.flush(Duration::from_millis(500)).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(3),
        "{took:?}"
    );
    notifier.emit("node", "update", Status::End, payload);
    assert_eq!(sink.dropped(), 11, "after the stop nothing is taken");
}

/// A notification queue that exists with other arguments (durable here, as an oslo.messaging
/// listener with `amqp_durable_queues` declares it) is published to as it is: the broker's
/// refusal of Ferrum's own declare is no reason to stop (it once made the publisher reconnect
/// in a loop, every notification held back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_queue_declared_durable_by_a_listener_still_gets_the_notifications() {
    use ferrum::notifications::{
        Level, Notifier, Service, Status,
        amqp::{self, Target},
    };
    let Some(url) = amqp_url() else {
        return;
    };
    let (exchange, topic, _topology) = Topology::new(&url, "durable");
    let conn = Connection::connect(&url, ConnectionProperties::default())
        .await
        .expect("connect");
    let channel = conn.create_channel().await.expect("channel");
    let queue = format!("{topic}.info");
    let durable = lapin::options::QueueDeclareOptions {
        durable: true,
        ..lapin::options::QueueDeclareOptions::default()
    };
    channel
        .queue_declare(
            queue.as_str().into(),
            durable,
            lapin::types::FieldTable::default(),
        )
        .await
        .expect("the listener's durable queue");

    let target = Target {
        brokers: std::sync::Arc::new(ferrum::broker::Brokers::parse(&url).expect("broker URL")),
        exchange: exchange.clone(),
        oslo: true,
        connection_name: "ferrum durable queue test",
    };
    let (sink, publisher) = amqp::start(target, topic.clone(), 100);
    let notifier = Notifier::new(Service::Conductor, "durable", Level::Info, sink);
    let payload = || ferrum::notifications::Payload {
        name: "NodePayload",
        version: "1.17",
        data: serde_json::Map::new(),
    };
    for _ in 0..5 {
        notifier.emit("node", "update", Status::End, payload);
    }
    publisher.flush(Duration::from_secs(10)).await;
    let declared = channel
        .queue_declare(
            queue.as_str().into(),
            lapin::options::QueueDeclareOptions {
                passive: true,
                ..durable
            },
            lapin::types::FieldTable::default(),
        )
        .await
        .expect("the durable queue");
    assert_eq!(
        declared.message_count(),
        5,
        "every notification in the queue"
    );
    let _ = conn.close(200, "OK".into()).await;
}

/// The `power_set` notifications of the node `uuid` among `seen`, in order.
fn power_sets_of<'a>(seen: &'a [Value], uuid: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|n| {
            n["payload"]["ironic_object.data"]["uuid"] == uuid
                && n["event_type"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("baremetal.node.power_set."))
        })
        .collect()
}
