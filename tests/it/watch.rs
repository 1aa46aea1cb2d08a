//! The node event stream `GET /ferrum/v1/watch` (server-sent events, beyond Ironic) read by a
//! plain HTTP client during fake deploys, on both stacks: the all-in-one's in-process hub, and
//! the multi-host stack where the events travel from the conductors over RabbitMQ to the API
//! process. The filter by node lets nothing of another node through; the filter by event type
//! only its events; an idle stream gets keep-alive comments.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::util::{
    Cluster, ClusterOptions, Stack,
    watch::{EventStream, Sse},
};

fn summary(seen: &[Sse]) -> Vec<String> {
    seen.iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e.event, e.data["provision_state"], e.data["power_state"]
            )
        })
        .collect()
}

async fn a_client_waits_for_active_without_polling(stack: Stack) {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        env: vec![
            ("FERRUM_WATCH_KEEPALIVE", "0.3".to_owned()),
            // Off by default for the multi-host processes (README); on by default all-in-one.
            ("FERRUM_WATCH_ENABLED", "true".to_owned()),
        ],
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let base = &api.base;
    let watched = api.available_node(json!({"name": "watched"})).await;
    let uuid = watched["uuid"].as_str().expect("a UUID").to_owned();
    let other = api.available_node(json!({"name": "unwatched"})).await;
    let other_uuid = other["uuid"].as_str().expect("a UUID").to_owned();

    // By name; resolved to the UUID.
    let (mut stream, filter) = EventStream::open(base, "node=watched").await;
    assert_eq!(filter["node"], json!([uuid]));
    let (mut power_only, _) = EventStream::open(
        base,
        &format!("node={uuid}&event_type=baremetal.node.power_set"),
    )
    .await;

    // Both nodes deploy at once: the stream carries only the watched one.
    api.accepted(&other_uuid, "active").await;
    api.accepted(&uuid, "active").await;
    let seen = stream
        .until(Duration::from_secs(30), |e| {
            e.event == "baremetal.node.provision_set.end" && e.data["provision_state"] == "active"
        })
        .await;
    let shown = summary(&seen);
    for e in &seen {
        assert_eq!(e.data["node_uuid"], uuid.as_str(), "{shown:#?}");
        assert_eq!(e.data["node_name"], "watched", "{shown:#?}");
        assert_eq!(e.data["event_type"], e.event.as_str(), "{shown:#?}");
        assert_eq!(
            e.data["payload"]["ironic_object.data"]["uuid"],
            uuid.as_str(),
            "{shown:#?}"
        );
    }
    // The provision states in the order they happened: out of available, to active.
    let moves: Vec<(&str, &str)> = seen
        .iter()
        .filter(|e| e.event.starts_with("baremetal.node.provision_set."))
        .map(|e| {
            (
                e.event.as_str(),
                e.data["provision_state"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        moves.first(),
        Some(&("baremetal.node.provision_set.start", "deploying")),
        "{shown:#?}"
    );
    assert_eq!(
        moves.last(),
        Some(&("baremetal.node.provision_set.end", "active")),
        "{shown:#?}"
    );
    let last = seen.last().expect("an event");
    assert_eq!(
        last.data["payload"]["ironic_object.name"],
        "NodeSetProvisionStatePayload"
    );
    assert_eq!(
        last.data["payload"]["ironic_object.data"]["previous_provision_state"],
        "deploying"
    );
    assert_eq!(last.data["target_provision_state"], Value::Null);
    // What the client saw agrees with the API.
    assert_eq!(api.node(&uuid).await["provision_state"], "active");
    api.wait_for(&other_uuid, "active").await;

    // Idle: keep-alive comments, and nothing of the other node's power change.
    let power = api.power(&other_uuid, "power off").await;
    assert_eq!(power.status, StatusCode::ACCEPTED, "{}", power.body);
    api.wait_power(&other_uuid, "power off").await;
    let before = stream.comments;
    assert!(
        stream.next(Duration::from_secs(1)).await.is_none(),
        "nothing of another node"
    );
    assert!(stream.comments > before, "no keep-alive in 1 s");

    // The event type filter: the power change, not the deploy.
    let power = api.power(&uuid, "power off").await;
    assert_eq!(power.status, StatusCode::ACCEPTED, "{}", power.body);
    let seen = power_only
        .until(Duration::from_secs(20), |e| {
            e.event == "baremetal.node.power_set.end" && e.data["power_state"] == "power off"
        })
        .await;
    assert!(
        seen.iter()
            .all(|e| e.event.starts_with("baremetal.node.power_set.")),
        "{:#?}",
        summary(&seen)
    );
    let start = seen
        .iter()
        .rposition(|e| e.event == "baremetal.node.power_set.start")
        .expect("a start");
    assert_eq!(
        seen[start].data["payload"]["ironic_object.data"]["to_power"],
        "power off"
    );
    assert_eq!(start, seen.len() - 2, "{:#?}", summary(&seen));

    // An unknown node is Ironic's 404, in its envelope.
    let missing = api.get("/ferrum/v1/watch?node=nobody").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(
        missing.body["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("nobody")),
        "{}",
        missing.body
    );
    cluster.assert_no_locks().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_in_one_streams_a_deploy_to_a_watching_client() {
    a_client_waits_for_active_without_polling(Stack::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_host_streams_a_deploy_from_the_conductors_to_a_watching_client() {
    a_client_waits_for_active_without_polling(Stack::MultiHost).await;
}

/// The watch is on by default all-in-one and off by default for `ferrum api`: there it would
/// send every node event of every conductor through RabbitMQ whether anyone watches or not.
async fn the_watch_is_on_by_default_only_all_in_one(stack: Stack) {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let r = cluster.api.get("/ferrum/v1/watch?node=nobody").await;
    // All-in-one: the stream exists and refuses the unknown node; multi-host: no stream.
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let message = r.body["error_message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    match stack {
        Stack::Embedded => assert!(message.contains("nobody"), "{message}"),
        Stack::MultiHost => assert!(message.contains("watch.enabled"), "{message}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_in_one_has_the_watch_on_by_default() {
    the_watch_is_on_by_default_only_all_in_one(Stack::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_host_has_the_watch_off_by_default() {
    the_watch_is_on_by_default_only_all_in_one(Stack::MultiHost).await;
}

/// Whether a message published now to the deployment's watch key reaches a queue (published
/// `mandatory`: the broker returns it when no queue is bound).
async fn watch_key_is_bound(amqp: &str, prefix: &str) -> bool {
    use lapin::{
        BasicProperties, Confirmation, Connection, ConnectionProperties,
        options::{BasicPublishOptions, ConfirmSelectOptions},
    };
    let connection = Connection::connect(amqp, ConnectionProperties::default())
        .await
        .expect("connect to RabbitMQ");
    let channel = connection.create_channel().await.expect("a channel");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    let confirm = channel
        .basic_publish(
            "amq.topic".into(),
            format!("{prefix}.watch").into(),
            BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            },
            b"probe",
            BasicProperties::default(),
        )
        .await
        .expect("publish")
        .await
        .expect("confirmed");
    let _ = connection.close(200, "OK".into()).await;
    match confirm {
        Confirmation::Ack(returned) => returned.is_none(),
        other => panic!("{other:?}"),
    }
}

/// Multi-host, the API process binds its queue to the watch events only while it has streams
/// (and for 30 s after the last ended): with nobody watching, the broker drops the events at
/// the exchange instead of routing every conductor's events to every API process. A stream
/// starts once the binding is in place: the first change after it is seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_host_binds_its_watch_queue_only_while_watched() {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack: Stack::MultiHost,
        env: vec![
            ("FERRUM_WATCH_ENABLED", "true".to_owned()),
            // The API process sees a client gone at its next write.
            ("FERRUM_WATCH_KEEPALIVE", "1".to_owned()),
        ],
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let amqp = crate::util::services::amqp_url().expect("RabbitMQ is up: the cluster started");
    let prefix = cluster
        .env_var("FERRUM_TRANSPORT_PREFIX")
        .expect("a prefix")
        .to_owned();
    let api = &cluster.api;
    let node = api.available_node(json!({"name": "bound"})).await;
    let uuid = node["uuid"].as_str().expect("a UUID").to_owned();
    assert!(
        !watch_key_is_bound(&amqp, &prefix).await,
        "bound with nobody watching"
    );

    let stream = sees_the_next_power_change(api, &uuid, "power on").await;
    assert!(watch_key_is_bound(&amqp, &prefix).await, "a stream is open");
    drop(stream);

    // Unbound between 15 and 30 s after the last stream ended.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(45);
    while watch_key_is_bound(&amqp, &prefix).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still bound 45 s after the last stream"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // A new stream binds again.
    sees_the_next_power_change(api, &uuid, "power off").await;
}

/// Opens a stream of node `uuid`, then at once changes its power to `target`: the stream sees
/// the change from its start (nothing is missed after the stream's first event).
async fn sees_the_next_power_change(
    api: &crate::util::Api,
    uuid: &str,
    target: &str,
) -> EventStream {
    let (mut stream, _) = EventStream::open(&api.base, &format!("node={uuid}")).await;
    let r = api.power(uuid, target).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let seen = stream
        .until(Duration::from_secs(10), |e| {
            e.event == "baremetal.node.power_set.end"
        })
        .await;
    assert_eq!(
        seen[0].event,
        "baremetal.node.power_set.start",
        "{:#?}",
        summary(&seen)
    );
    stream
}

/// The broker of a multi-host deployment (a private RabbitMQ) goes away and comes back: a
/// stream opened meanwhile starts at once with a `gap` notice instead of hanging; once the
/// API process is back on the broker every stream is told that events may have been missed,
/// and the events flow again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_host_streams_say_when_the_broker_was_away() {
    let Some(mut rabbit) = crate::util::PrivateRabbit::start().await else {
        return;
    };
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack: Stack::MultiHost,
        amqp_url: Some(rabbit.url()),
        conductors: 1,
        env: vec![("FERRUM_WATCH_ENABLED", "true".to_owned())],
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let node = api.available_node(json!({"name": "outage"})).await;
    let uuid = node["uuid"].as_str().expect("a UUID").to_owned();
    let (mut before, _) = EventStream::open(&api.base, "node=outage").await;

    rabbit.stop().await;
    let (mut during, _) = EventStream::open(&api.base, "node=outage").await;
    let notice = during
        .next(Duration::from_secs(10))
        .await
        .expect("a notice");
    assert_eq!(notice.event, "gap", "{notice:?}");
    assert!(
        notice.data["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("broker"),
        "{notice:?}"
    );

    rabbit.start_again().await;
    for stream in [&mut before, &mut during] {
        stream
            .until(Duration::from_secs(30), |e| e.event == "gap")
            .await;
    }
    // The conductor is back on the broker too once a power change is accepted.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = api.power(&uuid, "power on").await;
        if r.status == StatusCode::ACCEPTED {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{}", r.body);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for stream in [&mut before, &mut during] {
        stream
            .until(Duration::from_secs(30), |e| {
                e.event == "baremetal.node.power_set.end"
            })
            .await;
    }
}
