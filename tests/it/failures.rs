//! Deploy failures, the reason Ferrum exists (Ironic bug 1405420): a node whose deploy failed in
//! the driver is in `deploy failed`, says why, is unlocked, and stays fully operable.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use ferrum::{config::Config, states::ProvisionState};

use crate::util::{Api, Cluster, ClusterOptions, Stack, TestApp, on_both_stacks};

const BAD_IMAGE: &str = "file:///home/user/aaa";

/// A node whose deploy failed the way the original bug report's did.
async fn failed_node(api: &Api, name: &str) -> Value {
    api.available_node(json!({
        "name": name,
        "deploy_interface": "direct",
        // Automated cleaning would boot the ramdisk and wait for an agent.
        "automated_clean": false,
        "instance_info": {"image_source": BAD_IMAGE},
    }))
    .await;
    api.accepted(name, "active").await;
    let node = api.wait_for(name, "deploy failed").await;
    assert_failed_as_reported(&node);
    node
}

fn assert_failed_as_reported(node: &Value) {
    assert_eq!(node["provision_state"], "deploy failed");
    // A failure state keeps its target (as in Ironic); that must not mean "busy".
    assert_eq!(node["target_provision_state"], "active");
    assert_eq!(node["reservation"], json!(null));
    let last_error = node["last_error"].as_str().expect("last_error is set");
    assert!(
        last_error.starts_with(&format!(
            "Failed to prepare to deploy: Image {BAD_IMAGE} is unacceptable: "
        )),
        "{last_error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn failed_deploy_can_be_patched_and_redeployed() {
    let app = TestApp::start().await;
    let api = app.api();
    failed_node(api, "bad1").await;

    // PATCH is allowed in deploy failed (Ironic answered 409 here in bug 1405420).
    let r = api
        .patch(
            "bad1",
            json!([{"op": "add", "path": "/extra/ticket", "value": "OPS-1"}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["extra"]["ticket"], "OPS-1");
    assert_eq!(r.body["provision_state"], "deploy failed");
    assert!(r.body["last_error"].is_string(), "PATCH keeps last_error");

    // A verb the table does not allow from deploy failed: 400 naming the verb and the state.
    let r = api.provision("bad1", "provide").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let uuid = r.fault();
    assert!(
        uuid.contains("\"provide\"") && uuid.contains("\"deploy failed\""),
        "{uuid}"
    );

    // active again is accepted and runs the deploy again: the same image fails the same way.
    api.accepted("bad1", "active").await;
    let node = api.wait_for("bad1", "deploy failed").await;
    assert_failed_as_reported(&node);

    // rebuild is accepted too.
    api.accepted("bad1", "rebuild").await;
    let node = api.wait_for("bad1", "deploy failed").await;
    assert_failed_as_reported(&node);

    // Fix the node: the deploy interface may change in maintenance; then redeploy reaches active.
    let r = api
        .patch(
            "bad1",
            json!([{"op": "replace", "path": "/maintenance", "value": true}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = api.provision("bad1", "active").await;
    assert_eq!(
        r.status,
        StatusCode::BAD_REQUEST,
        "no deploy in maintenance"
    );
    assert!(r.fault().contains("maintenance mode"), "{}", r.fault());
    let r = api
        .patch(
            "bad1",
            json!([
                {"op": "replace", "path": "/deploy_interface", "value": "fake"},
                {"op": "replace", "path": "/maintenance", "value": false},
            ]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.accepted("bad1", "active").await;
    let node = api.wait_for("bad1", "active").await;
    assert_eq!(
        node["last_error"],
        json!(null),
        "a new deploy clears last_error"
    );
    assert_eq!(node["target_provision_state"], json!(null));
    app.assert_no_locks().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn failed_deploy_can_be_rebuilt_to_active_and_torn_down() {
    let app = TestApp::start().await;
    let api = app.api();

    // rebuild from deploy failed reaches active once the node can deploy.
    failed_node(api, "bad2").await;
    let r = api
        .patch(
            "bad2",
            json!([{"op": "replace", "path": "/maintenance", "value": true}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = api
        .patch(
            "bad2",
            json!([
                {"op": "replace", "path": "/deploy_interface", "value": "fake"},
                {"op": "remove", "path": "/maintenance"},
            ]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.accepted("bad2", "rebuild").await;
    api.wait_for("bad2", "active").await;

    // deleted from deploy failed tears down, cleans, and ends available.
    failed_node(api, "bad3").await;
    api.accepted("bad3", "deleted").await;
    let node = api.wait_for("bad3", "available").await;
    assert_eq!(node["last_error"], json!(null));
    assert_eq!(node["target_provision_state"], json!(null));
    assert_eq!(node["instance_info"], json!({}));

    // A failed node cannot be deleted outright (not a deletable state) unless in maintenance.
    failed_node(api, "bad4").await;
    let r = api.request(Method::DELETE, "/v1/nodes/bad4", None).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains("deploy failed"), "{}", r.fault());
    app.assert_no_locks().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn direct_deploy_of_an_http_image_waits_for_the_agent_and_can_be_torn_down() {
    let app = TestApp::start().await;
    let api = app.api();
    api.available_node(json!({
        "name": "good",
        "deploy_interface": "direct",
        // Automated cleaning would boot the ramdisk and wait for an agent.
        "automated_clean": false,
        "instance_info": {
            "image_source": "http://images.example/ubuntu.qcow2",
            "image_os_hash_algo": "sha256",
            "image_os_hash_value": "9f2b1c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9",
        },
    }))
    .await;
    api.accepted("good", "active").await;
    let node = api.wait_for("good", "wait call-back").await;
    assert_eq!(node["target_provision_state"], "active");
    assert_eq!(node["last_error"], json!(null));
    api.accepted("good", "deleted").await;
    api.wait_for("good", "available").await;
    app.assert_no_locks().await;
}

/// A cluster of `options` whose deploys wait for their agent 2 s, checked every second.
async fn impatient_cluster_with(mut options: ClusterOptions) -> Option<Cluster> {
    options
        .env
        .push(("FERRUM_DEPLOY_CALLBACK_TIMEOUT", "2".to_owned()));
    options
        .env
        .push(("FERRUM_CHECK_PROVISION_STATE_INTERVAL", "1".to_owned()));
    Cluster::start(options).await
}

/// The service in process with [`impatient_cluster_with`]'s settings, and `change`'s.
async fn impatient_app(change: impl FnOnce(&mut Config)) -> TestApp {
    TestApp::builder()
        .configure(|c| {
            c.conductor.deploy_callback_timeout = Duration::from_secs(2);
            c.conductor.check_provision_state_interval = Duration::from_secs(1);
            change(c);
        })
        .start()
        .await
}

/// A `direct` node (microversion 1.95 fields in `extra`) deployed until it waits for its agent.
async fn waiting_node(api: &Api, name: &str, extra: Value) -> String {
    let mut body = json!({
        "name": name,
        "driver": "fake-hardware",
        "deploy_interface": "direct",
        // Automated cleaning would boot the ramdisk and wait for an agent.
        "automated_clean": false,
        "instance_info": {
            "image_source": "http://images.example/ubuntu.raw",
            "image_os_hash_algo": "sha256",
            "image_os_hash_value": "9f2b1c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9",
        },
    });
    let fields = extra
        .as_object()
        .expect("extra fields are an object")
        .clone();
    body.as_object_mut()
        .expect("a node is an object")
        .extend(fields);
    let r = api
        .request_at("1.95", Method::POST, "/v1/nodes", Some(body))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    for (verb, state) in [
        ("manage", "manageable"),
        ("provide", "available"),
        ("active", "wait call-back"),
    ] {
        // With a one-worker pool the previous step may still hold the slot for a moment.
        api.accepted_when_a_worker_is_free(name, verb).await;
        api.wait_for(name, state).await;
    }
    let node = api.node(name).await;
    assert_eq!(node["power_state"], "power on", "{node}");
    node["uuid"].as_str().expect("a node has a uuid").to_owned()
}

/// A deploy that its agent fails, or that times out waiting for its agent, powers the node off
/// (Ironic's `set_failed_state`, `power_off_after_deploy_failure`): the node does not stay up
/// in its ramdisk. A power-off that fails is logged and the deploy's error is what the node
/// shows; a node that may not be powered off (API 1.95) stays on. Each ends unlocked and
/// deployable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn a_failed_agent_deploy_powers_the_node_off() {
    let app = impatient_app(|_| {}).await;
    let api = app.api();
    let off = waiting_node(api, "pf-off", json!({})).await;
    // Its BMC cannot power it off.
    let stuck_info = json!({"driver_info": {"fake_power_fail": {"power off": "BMC unreachable"}}});
    let stuck = waiting_node(api, "pf-stuck", stuck_info).await;
    let kept = waiting_node(api, "pf-kept", json!({"disable_power_off": true})).await;

    for (uuid, power) in [(&off, "power off"), (&stuck, "power on"), (&kept, "power on")] {
        let node = api.wait_for(uuid, "deploy failed").await;
        assert_eq!(node["power_state"], power, "{node}");
        assert_eq!(node["target_power_state"], Value::Null, "{node}");
        let error = node["last_error"].as_str().unwrap_or_default();
        assert!(error.starts_with(&format!("Timeout reached while waiting for callback for node {uuid}")), "the deploy's error, not the power-off's: {node}");
    }
    // Operable: fixed, each deploys again.
    let r = api.patch(&stuck, json!([{"op": "remove", "path": "/driver_info/fake_power_fail"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    for uuid in [&off, &stuck, &kept] {
        api.accepted(uuid, "active").await;
        api.wait_for(uuid, "wait call-back").await;
    }
    app.assert_no_locks().await;
}

/// With every worker busy, a deploy that times out waiting for its agent is failed all the same,
/// without the power-off that would need a worker: a full pool never keeps a node waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_deploy_is_recorded_when_no_worker_is_free() {
    let Some(cluster) = impatient_cluster_with(ClusterOptions {
        stack: Stack::Embedded,
        workers: 1,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    api.available_node(json!({"name": "nw-busy", "driver_info": {"fake_deploy_delay": 60}}))
        .await;
    let uuid = waiting_node(api, "nw-wait", json!({})).await;
    // The only worker deploys for a minute.
    api.accepted_when_a_worker_is_free("nw-busy", "active")
        .await;
    let node = api.wait_for(&uuid, "deploy failed").await;
    assert_eq!(
        node["power_state"], "power on",
        "no worker powered it off: {node}"
    );
    let error = node["last_error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("Timeout reached while waiting for callback"),
        "{node}"
    );
    assert_eq!(
        api.node("nw-busy").await["provision_state"],
        "deploying",
        "the pool stayed full"
    );
}

/// With `power_off_after_deploy_failure` off the node stays powered after its failed deploy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_off_after_deploy_failure_can_be_turned_off() {
    let app = impatient_app(|c| c.conductor.power_off_after_deploy_failure = false).await;
    let api = app.api();
    let uuid = waiting_node(api, "pf-on", json!({})).await;
    let node = api.wait_for(&uuid, "deploy failed").await;
    assert_eq!(node["power_state"], "power on", "{node}");
    app.assert_no_locks().await;
}

on_both_stacks! {
async fn a_panicking_driver_fails_the_node_and_the_conductor_keeps_serving(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        ..ClusterOptions::default()
    }).await else {
        return;
    };
    let api = &cluster.api;
    let node = api
        .available_node(json!({"name": "boom", "driver_info": {"fake_deploy_panic": "kaboom"}}))
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted("boom", "active").await;
    let node = api.wait_for("boom", "deploy failed").await;
    let last_error = node["last_error"].as_str().expect("last_error");
    assert!(last_error.contains("kaboom"), "{last_error}");
    assert!(
        last_error.starts_with("Deploy failed with an unexpected error"),
        "{last_error}"
    );
    assert_eq!(node["reservation"], json!(null));

    // The same conductor (the node's owner) still serves: fix the node and deploy it.
    let r = api
        .patch(
            "boom",
            json!([{"op": "remove", "path": "/driver_info/fake_deploy_panic"}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.accepted("boom", "active").await;
    api.wait_for("boom", "active").await;
    let owner = cluster.owner_of(&uuid);
    let alive =
        ferrum::db::conductors::list_alive(&cluster.db.db, std::time::Duration::from_secs(10))
            .await
            .unwrap();
    assert!(
        alive.iter().any(|c| c.hostname == owner),
        "{owner} still alive"
    );
    cluster.assert_no_locks().await;
}
}

/// Multi-host only: in the embedded stack the API and the conductor are one process, so there is
/// no API left to answer when the conductor is killed (see the restart test for that stack).
/// With no other conductor to fail over to, the API answers an error in the envelope at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_conductor_gives_an_error_in_the_envelope_and_leaves_no_lock() {
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        conductors: 1,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let node = cluster.api.available_node(json!({"name": "orphan"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let owner = cluster.owner_of(&uuid);
    let index = cluster.conductor_index(&owner);
    cluster.kill(&format!("conductor{index}"));

    let started = std::time::Instant::now();
    let r = cluster
        .api
        .patch(
            "orphan",
            json!([{"op": "add", "path": "/extra/a", "value": 1}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    assert!(r.fault().contains(&owner), "{}", r.fault());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "answered within the RPC timeout"
    );
    let r = cluster.api.provision("orphan", "active").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    let node = cluster.api.node("orphan").await;
    assert_eq!(
        node["provision_state"], "available",
        "nothing happened to the node"
    );
    assert_eq!(node["extra"], json!({}));
    cluster.assert_no_locks().await;

    // The conductor comes back under the same name and serves the node again.
    cluster.spawn_conductor(index);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let r = cluster.api.provision("orphan", "active").await;
        if r.status == StatusCode::ACCEPTED {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", r.body);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    cluster.api.wait_for("orphan", "active").await;
    cluster.assert_no_locks().await;
}

on_both_stacks! {
async fn shutdown_fails_work_still_running_and_releases_its_locks(stack) {
    let options = ClusterOptions {
        stack,
        conductors: 1,
        graceful_shutdown_timeout: 0.5,
        ..ClusterOptions::default()
    };
    let Some(mut cluster) = Cluster::start(options).await else {
        return;
    };
    let api = &cluster.api;
    api.available_node(json!({"name": "slow", "driver_info": {"fake_deploy_delay": 60}}))
        .await;
    api.accepted("slow", "active").await;
    let node = api.node("slow").await;
    assert_eq!(node["provision_state"], "deploying");
    assert!(node["reservation"].is_string(), "the worker holds the lock");

    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let process = cluster.conductor_process(0);
    let status = cluster.terminate(&process).await;
    assert!(status.success(), "graceful exit: {status}");
    // Read the database itself: in the embedded stack the API went with the process.
    let node = ferrum::db::nodes::get_by_uuid(&cluster.db.db, &uuid).await.unwrap();
    assert_eq!(node.provision_state, ProvisionState::DeployFail);
    assert_eq!(node.reservation, None);
    let last_error = node.last_error.unwrap();
    assert!(last_error.contains("shut down"), "{last_error}");
    let host = &cluster.conductor_hosts[0];
    let alive =
        ferrum::db::conductors::list_alive(&cluster.db.db, std::time::Duration::from_secs(10))
            .await
            .unwrap();
    assert!(alive.iter().all(|c| &c.hostname != host), "deregistered");
    if stack == Stack::Embedded {
        return;
    }

    // With no conductor online, a change is refused with 503 in the envelope, the node untouched.
    let r = cluster
        .api
        .patch(
            "slow",
            json!([{"op": "add", "path": "/extra/a", "value": 1}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    assert!(r.fault().contains("No conductor"), "{}", r.fault());
}
}

on_both_stacks! {
async fn a_restarted_conductor_recovers_nodes_it_held(stack) {
    let options = ClusterOptions {
        stack,
        conductors: 1,
        ..ClusterOptions::default()
    };
    let Some(mut cluster) = Cluster::start(options).await else {
        return;
    };
    let api = &cluster.api;
    api.available_node(json!({"name": "held", "driver_info": {"fake_deploy_delay": 60}}))
        .await;
    api.accepted("held", "active").await;
    let node = api.node("held").await;
    assert_eq!(node["provision_state"], "deploying");
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    // kill -9 with the deploy in flight: no chance to clean up.
    let process = cluster.conductor_process(0);
    cluster.kill(&process);
    let node = ferrum::db::nodes::get_by_uuid(&cluster.db.db, &uuid).await.unwrap();
    assert_eq!(node.provision_state, ProvisionState::Deploying);
    assert_eq!(
        node.reservation.as_deref(),
        Some(cluster.conductor_hosts[0].as_str()),
        "a stale lock"
    );

    cluster.restart_conductor(0).await;
    let node = cluster.api.wait_for("held", "deploy failed").await;
    assert!(
        node["last_error"].as_str().unwrap().contains("restarted"),
        "{node}"
    );
    cluster.assert_no_locks().await;
}
}

/// Multi-host only: a conductor killed while it held a node's lock stops heartbeating; the
/// conductor that now owns the node on the ring takes it over: the deploy is failed with a
/// last_error that says so, the lock released, and the node serves requests again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_conductors_nodes_are_taken_over() {
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        heartbeat_timeout: 3.0,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let node = cluster
        .api
        .available_node(json!({"name": "orphaned", "driver_info": {"fake_deploy_delay": 60}}))
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let owner = cluster.owner_of(&uuid);
    // A second, idle node of the same conductor.
    let idle = loop {
        let candidate = uuid::Uuid::new_v4().to_string();
        if cluster.owner_of(&candidate) == owner {
            break candidate;
        }
    };
    cluster
        .api
        .available_node(json!({"uuid": idle, "name": "idle"}))
        .await;
    cluster.api.accepted("orphaned", "active").await;
    let index = cluster.conductor_index(&owner);
    cluster.kill(&format!("conductor{index}"));

    // The idle node is served at once by the survivor, before the dead one's heartbeat expires:
    // the request never reached the dead conductor, so the API sends it on.
    let r = cluster
        .api
        .patch(
            "idle",
            json!([{"op": "add", "path": "/extra/moved", "value": true}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let node = loop {
        let node = cluster.api.node("orphaned").await;
        if node["provision_state"] == "deploy failed" {
            break node;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never taken over: {node}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(node["reservation"], Value::Null);
    let last_error = node["last_error"].as_str().unwrap();
    assert!(
        last_error.contains("take over") && last_error.contains(&owner),
        "{last_error}"
    );

    // The survivor serves the node now.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let r = cluster
            .api
            .patch(
                "orphaned",
                json!([{"op": "remove", "path": "/driver_info/fake_deploy_delay"}]),
            )
            .await;
        if r.status == StatusCode::OK {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", r.body);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    cluster.api.accepted("orphaned", "active").await;
    cluster.api.wait_for("orphaned", "active").await;
    cluster.assert_no_locks().await;
}

/// Runs `ferrum conductor` as `host` in the cluster's environment and returns (exited
/// successfully, its output); one still running after 15 s has started, and is killed.
async fn run_namesake(cluster: &Cluster, host: &str) -> (bool, String) {
    let log = std::env::temp_dir().join(format!("ferrum-namesake-{}.log", uuid::Uuid::new_v4()));
    let out = std::fs::File::create(&log).expect("log file");
    let mut second = cluster.command(&["conductor"]);
    second
        .env("FERRUM_CONDUCTOR_HOST", host)
        .stdout(out.try_clone().expect("log file"))
        .stderr(out);
    let mut child = second.spawn().expect("run a second conductor");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    match status {
        Some(status) => (status.success(), text),
        None => (true, format!("still running after 15 s: {text}")),
    }
}

/// A second conductor started under a host name that a live conductor serves refuses to start:
/// otherwise its start-up recovery would fail the first one's running deploy. The same while the
/// first is stopping but still finishing its work; once it has stopped, the name is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_conductor_with_a_live_host_name_refuses_to_start() {
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        conductors: 1,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = cluster.api.clone();
    api.available_node(json!({"name": "busy", "driver_info": {"fake_deploy_delay": 4}}))
        .await;
    api.accepted("busy", "active").await;

    let host = cluster.conductor_hosts[0].clone();
    let started = std::time::Instant::now();
    let (ok, text) = run_namesake(&cluster, &host).await;
    assert!(!ok, "it started: {text}");
    let refusal = format!("another conductor is serving as host {host}");
    assert!(text.contains(&refusal), "{text}");
    assert!(started.elapsed() < std::time::Duration::from_secs(15));

    // The first conductor's deploy was not touched.
    let node = api.wait_for("busy", "active").await;
    assert_eq!(node["last_error"], Value::Null);

    // Stopping, with a deploy still running: out of the ring, but not gone.
    api.available_node(json!({"name": "draining", "driver_info": {"fake_deploy_delay": 4}}))
        .await;
    api.accepted("draining", "active").await;
    cluster.signal_term("conductor0");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (ok, text) = run_namesake(&cluster, &host).await;
    assert!(
        !ok,
        "it started while the first was finishing its work: {text}"
    );
    assert!(text.contains(&refusal), "{text}");
    assert!(cluster.wait_exit("conductor0").await.success());
    let node = api.wait_for("draining", "active").await;
    assert_eq!(
        node["last_error"],
        Value::Null,
        "the deploy finished undisturbed"
    );

    // Stopped cleanly: the name is free again.
    cluster.restart_conductor(0).await;
    api.accepted("draining", "deleted").await;
    api.wait_for("draining", "available").await;
    cluster.assert_no_locks().await;
}
