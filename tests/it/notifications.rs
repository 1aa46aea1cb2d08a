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
    let id = random_suffix();
    let exchange = format!("ferrum-it-{id}");
    let topic = format!("ferrum_it_{id}_notifications");
    let _topology = Topology {
        amqp: amqp.clone(),
        exchange: exchange.clone(),
        topic: topic.clone(),
    };
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
    // A deploy that fails in the driver.
    api.accepted(&failing_uuid, "active").await;
    api.wait_for(&failing_uuid, "deploy failed").await;
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
            has(seen, &uuid, "baremetal.node.power_set.end")
                && has(seen, &failing_uuid, "baremetal.node.provision_set.error")
                && has(seen, &uuid, "baremetal.node.create.end")
                && events_of(seen, &uuid, "ferrum-api.").len() == 5
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

    // The conductor's notifications about each node, in the order it sent them: manage and
    // provide (before the listener started: the queue kept them), the deploy, the power change.
    assert_eq!(
        events_of(&seen, &uuid, "ferrum-conductor."),
        [
            "baremetal.node.provision_set.start", // enroll -> verifying
            "baremetal.node.provision_set.end",   // verifying -> manageable
            "baremetal.node.provision_set.start", // manageable -> cleaning
            "baremetal.node.provision_set.end",   // cleaning -> available
            "baremetal.node.provision_set.start", // available -> deploying
            "baremetal.node.provision_set.end",   // deploying -> active
            "baremetal.node.power_set.start",
            "baremetal.node.power_set.end",
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
            "baremetal.node.provision_set.start",
            "baremetal.node.provision_set.error",
        ],
        "{}",
        summary(&seen)
    );
    assert_eq!(
        events_of(&seen, &uuid, "ferrum-api."),
        [
            "baremetal.node.create.end",
            "baremetal.node.maintenance_set.start",
            "baremetal.node.maintenance_set.end",
            "baremetal.node.maintenance_set.start",
            "baremetal.node.maintenance_set.end",
        ],
        "{}",
        summary(&seen)
    );
    assert_eq!(
        events_of(&seen, &doomed_uuid, "ferrum-api."),
        [
            "baremetal.node.create.end",
            "baremetal.node.delete.start",
            "baremetal.node.delete.end",
        ],
        "{}",
        summary(&seen)
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

    let power = find(&seen, &uuid, "baremetal.node.power_set.end");
    assert_eq!(
        power["payload"]["ironic_object.name"],
        "NodeSetPowerStatePayload"
    );
    assert_eq!(power["payload"]["ironic_object.version"], "1.17");
    let data = &power["payload"]["ironic_object.data"];
    assert_eq!(data["to_power"], "power off");
    assert_eq!(data["power_state"], "power off");
    assert_eq!(data["target_power_state"], Value::Null);
    let power = find(&seen, &uuid, "baremetal.node.power_set.start");
    assert_eq!(
        power["payload"]["ironic_object.data"]["to_power"],
        "power off"
    );

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
    let log = cluster.log_of(&cluster.conductor_process(0));
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
