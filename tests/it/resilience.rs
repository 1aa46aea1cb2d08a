//! The lease, idempotent retries and calls that end: a draining conductor's work is not taken
//! over; a call to a conductor that dies is answered within seconds, not at the RPC timeout;
//! a request retried with the same `X-OpenStack-Request-Id` is applied once.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{
    amqp_url,
    cluster::{Cluster, ClusterOptions, Links, VERSION},
    link_proxy::LinkProxy,
    on_both_stacks,
    services::mysql_url,
};

/// Sends `body` with the client's own request id; returns status, body and the echoed id.
async fn with_request_id(
    cluster: &Cluster,
    method: Method,
    path: &str,
    request_id: &str,
    body: Value,
) -> (StatusCode, Value, String) {
    let resp = reqwest::Client::new()
        .request(method, format!("{}{path}", cluster.api.base))
        .header("X-OpenStack-Ironic-API-Version", VERSION)
        .header("X-OpenStack-Request-Id", request_id)
        .json(&body)
        .send()
        .await
        .expect("HTTP request");
    let status = resp.status();
    let echoed = resp
        .headers()
        .get("x-openstack-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let text = resp.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::Null),
        echoed,
    )
}

on_both_stacks! {
/// A retry of a request that was applied (its answer lost) is answered as applied and not
/// applied again; another request under the same id applies as usual; an id not of Ironic's
/// form is replaced.
async fn a_retried_request_id_is_applied_once(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    cluster
        .api
        .create_node(json!({"name": "once", "driver": "fake-hardware"}))
        .await;
    let id = format!("req-{}", uuid::Uuid::new_v4());
    let patch = |value: &str| json!([{"op": "add", "path": "/extra/try", "value": value}]);

    let (status, body, echoed) =
        with_request_id(&cluster, Method::PATCH, "/v1/nodes/once", &id, patch("first")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(echoed, id, "the client's request id names the request");
    assert_eq!(body["extra"]["try"], "first");

    let applied_at = body["updated_at"].clone();

    // The same request again: answered as applied, the node not written again.
    let (status, body, _) =
        with_request_id(&cluster, Method::PATCH, "/v1/nodes/once", &id, patch("first")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["extra"]["try"], "first");
    assert_eq!(body["updated_at"], applied_at, "the repeat was not applied again");
    assert_eq!(cluster.api.node("once").await["updated_at"], applied_at);

    // Another request under the same id (OpenStack's global request id names a whole
    // operation, several calls): applied.
    let (status, body, _) =
        with_request_id(&cluster, Method::PATCH, "/v1/nodes/once", &id, patch("second")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["extra"]["try"], "second");

    // A provisioning verb: accepted twice, applied once (manage moves enroll -> manageable;
    // applied again from manageable it would be refused with 400).
    let manage = format!("req-{}", uuid::Uuid::new_v4());
    for _ in 0..2 {
        let (status, body, _) = with_request_id(
            &cluster,
            Method::PUT,
            "/v1/nodes/once/states/provision",
            &manage,
            json!({"target": "manage"}),
        )
        .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        cluster.api.wait_for("once", "manageable").await;
    }

    // Not `req-<uuid>`: the API names the request itself.
    let (status, _, echoed) =
        with_request_id(&cluster, Method::PATCH, "/v1/nodes/once", "mine", patch("x")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(echoed.starts_with("req-") && echoed != "mine", "{echoed}");
    cluster.assert_no_locks().await;
}
}

/// Multi-host: a conductor that is draining (SIGTERM) keeps its lease while it finishes its
/// work, so the other conductor does not take over its nodes even well past the heartbeat
/// timeout; the deploy ends `active`, recorded by the draining conductor, and nothing else
/// could deploy the node meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_conductors_work_is_not_taken_over() {
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        heartbeat_timeout: 2.0,
        graceful_shutdown_timeout: 30.0,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let node = api
        .available_node(json!({"name": "drained", "driver_info": {"fake_deploy_delay": 6}}))
        .await;
    let owner = cluster.owner_of(node["uuid"].as_str().unwrap());
    let index = cluster.conductor_index(&owner);
    cluster.api.accepted("drained", "active").await;
    cluster.signal_term(&format!("conductor{index}"));

    // Well past the heartbeat timeout (and a take-over check of the survivor).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let node = cluster.api.node("drained").await;
    assert_eq!(node["provision_state"], "deploying", "{node}");
    assert_eq!(node["reservation"], Value::String(owner.clone()), "{node}");
    // Another deploy cannot start while the first runs.
    let r = cluster.api.provision("drained", "active").await;
    assert!(
        r.status == StatusCode::CONFLICT || r.status == StatusCode::BAD_REQUEST,
        "{} {}",
        r.status,
        r.body
    );

    let node = cluster.api.wait_for("drained", "active").await;
    assert_eq!(node["last_error"], Value::Null, "{node}");
    let status = cluster.wait_exit(&format!("conductor{index}")).await;
    assert!(status.success(), "graceful exit: {status}");
    cluster.assert_no_locks().await;
}

/// Multi-host: a request the API sent to a conductor that then dies is answered within
/// seconds (sent on to the survivor, which finds the node locked by the dead one), not after
/// the RPC timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_conductor_that_dies_is_answered_at_once() {
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        rpc_timeout: 40.0,
        lock_retry_attempts: 6,
        lock_retry_interval: 0.5,
        heartbeat_timeout: 30.0,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let node = cluster
        .api
        .available_node(json!({"name": "busy", "driver_info": {"fake_deploy_delay": 60}}))
        .await;
    let owner = cluster.owner_of(node["uuid"].as_str().unwrap());
    cluster.api.accepted("busy", "active").await;
    // The owner holds the lock for a minute: a PATCH waits on it there.
    let base = cluster.api.base.clone();
    let started = Instant::now();
    let patch = tokio::spawn(async move {
        let api = crate::util::cluster::Api::new(base);
        api.patch(
            "busy",
            json!([{"op": "add", "path": "/extra/k", "value": "v"}]),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    cluster.kill(&format!("conductor{}", cluster.conductor_index(&owner)));
    let r = patch.await.unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "answered after {took:?}, near the 40 s RPC timeout"
    );
    assert!(
        r.status == StatusCode::CONFLICT || r.status == StatusCode::SERVICE_UNAVAILABLE,
        "{} {}",
        r.status,
        r.body
    );
    assert!(r.fault().contains(&owner), "{}", r.body);
}

/// Multi-host: the database's answer to the change that takes a node's lock for a deploy is
/// lost (the link breaks right after the statement went through, as when a Galera node dies
/// after its commit). The change landed: the conductor reads the node back, finds the request's
/// id on it and its own lock, and runs the deploy, which ends active and unlocked. Before, it
/// answered 503 and ran nothing, and the client's retry, found applied, left the lock held for
/// good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_taken_by_a_write_whose_answer_was_lost_is_not_left_behind() {
    let (Some(mysql), Some(amqp)) = (mysql_url(), amqp_url()) else {
        return;
    };
    // mysql://user[:password]@host:port
    let (user, server) = mysql
        .split_once("://")
        .and_then(|(_, authority)| authority.rsplit_once('@'))
        .expect("FERRUM_TEST_MYSQL_URL names user and server");
    let (host, port) = server.rsplit_once(':').unwrap_or((server, "3306"));
    let proxy = LinkProxy::start(host, port.parse().expect("MySQL port")).await;
    let Some(cluster) = Cluster::start(ClusterOptions {
        conductors: 1,
        links: vec![(
            "conductor0".to_owned(),
            Links {
                mysql_server: format!("mysql://{user}@127.0.0.1:{}", proxy.port),
                amqp_url: amqp,
            },
        )],
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let node = cluster.api.available_node(json!({})).await;
    let node = node["uuid"].as_str().unwrap().to_owned();

    let request_id = format!("req-{}", uuid::Uuid::new_v4());
    proxy.cut_after(request_id.as_bytes());
    let (status, body, _) = with_request_id(
        &cluster,
        Method::PUT,
        &format!("/v1/nodes/{node}/states/provision"),
        &request_id,
        json!({"target": "active"}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    // The cut hit the lock-taking write, not another statement.
    let log = cluster.log_of("conductor0");
    assert!(
        log.contains(&format!(
            "The database's answer to a change of node {node} was lost"
        )),
        "{log}"
    );
    let done = cluster.api.wait_for(&node, "active").await;
    assert_eq!(done["reservation"], Value::Null, "{done}");
    cluster.assert_no_locks().await;
}
