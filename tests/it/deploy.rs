//! The happy path across processes: API → RabbitMQ → conductor → MySQL lock → driver → state;
//! power changes, PATCH, inspect, clean and adopt in process ([`TestApp`]).

use reqwest::StatusCode;
use serde_json::json;

use crate::util::{Cluster, ClusterOptions, TestApp, on_both_stacks};

on_both_stacks! {
async fn enroll_to_active_and_back_to_available_on_both_conductors(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        ..ClusterOptions::default()
    }).await else {
        return;
    };
    let api = &cluster.api;
    // The same number of nodes for each conductor, by choosing UUIDs the way the API's hash
    // ring places them.
    let per_conductor = 6 / cluster.conductor_hosts.len();
    let mut uuids = Vec::new();
    let mut per_owner = std::collections::HashMap::new();
    while uuids.len() < 6 {
        let uuid = uuid::Uuid::new_v4().to_string();
        let count = per_owner.entry(cluster.owner_of(&uuid)).or_insert(0);
        if *count == per_conductor {
            continue;
        }
        *count += 1;
        let node = api
            .create_node(json!({
                "uuid": uuid,
                "name": format!("node-{}", uuids.len()),
                "driver": "fake-hardware",
            }))
            .await;
        assert_eq!(node["uuid"], uuid.as_str());
        assert_eq!(node["provision_state"], "enroll");
        assert_eq!(node["target_provision_state"], json!(null));
        assert_eq!(node["power_state"], json!(null));
        uuids.push(uuid);
    }
    assert_eq!(per_owner.len(), cluster.conductor_hosts.len(), "every conductor owns nodes");

    for (i, uuid) in uuids.iter().enumerate() {
        let name = format!("node-{i}");
        api.accepted(&name, "manage").await;
        let node = api.wait_for(uuid, "manageable").await;
        assert_eq!(
            node["power_state"], "power off",
            "verification read the power state"
        );
        assert_eq!(node["target_provision_state"], json!(null));

        api.accepted(&name, "provide").await;
        let node = api.wait_for(uuid, "available").await;
        assert_eq!(node["target_provision_state"], json!(null));

        api.accepted(&name, "active").await;
        let node = api.wait_for(uuid, "active").await;
        assert_eq!(node["target_provision_state"], json!(null));
        assert_eq!(node["power_state"], "power on");
        assert_eq!(node["last_error"], json!(null));
        assert!(node["provision_updated_at"].is_string());

        api.accepted(&name, "deleted").await;
        let node = api.wait_for(uuid, "available").await;
        assert_eq!(node["power_state"], "power off");
        assert_eq!(node["instance_info"], json!({}));
        assert_eq!(node["target_provision_state"], json!(null));
    }
    // The states resource agrees with the node.
    let states = api.get(&format!("/v1/nodes/{}/states", uuids[0])).await;
    assert_eq!(states.status, StatusCode::OK);
    assert_eq!(states.body["provision_state"], "available");
    assert_eq!(states.body["target_provision_state"], json!(null));

    // Nodes in a deletable state can be deleted; then they are gone.
    let r = api
        .request(reqwest::Method::DELETE, "/v1/nodes/node-0", None)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.get("/v1/nodes/node-0").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.fault(), "Node node-0 could not be found.");
    cluster.assert_no_locks().await;
}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn power_changes_and_patch_round_trip() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api
        .available_node(json!({"name": "pw", "driver_info": {"ipmi_password": "s3cret", "ipmi_address": "10.1.1.1"}}))
        .await;
    assert_eq!(
        node["driver_info"]["ipmi_password"], "******",
        "secrets are masked"
    );
    assert_eq!(node["driver_info"]["ipmi_address"], "10.1.1.1");

    let r = api.power("pw", "power on").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_power("pw", "power on").await;
    let r = api.power("pw", "rebooting").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_power("pw", "power on").await;
    let r = api.power("pw", "power off").await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    api.wait_power("pw", "power off").await;
    let r = api.power("pw", "sideways").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);

    let r = api
        .patch(
            "pw",
            json!([
                {"op": "add", "path": "/extra/rack", "value": "r1"},
                {"op": "add", "path": "/properties/cpus", "value": 8},
                {"op": "replace", "path": "/name", "value": "pw2"},
            ]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["extra"], json!({"rack": "r1"}));
    assert_eq!(r.body["properties"], json!({"cpus": 8}));
    assert_eq!(r.body["name"], "pw2");
    // One spelling of an instance UUID, whatever the client sent.
    let r = api
        .patch(
            "pw2",
            json!([{"op": "add", "path": "/instance_uuid", "value": "5AFA7D38-6D3E-4B5C-9B8E-9D2E1A6C1F00"}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["instance_uuid"], "5afa7d38-6d3e-4b5c-9b8e-9d2e1a6c1f00");
    assert_eq!(r.body["reservation"], json!(null));
    // The stored secret survived the patch even though responses mask it.
    let stored = ferrum::db::nodes::get_by_uuid(app.db(), node["uuid"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(stored.driver_info["ipmi_password"], "s3cret");
    app.assert_no_locks().await;
}

/// inspect (1.6; refused with `no-inspect`), clean with steps (1.15) and adopt (1.17) on fake
/// hardware.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn inspect_clean_and_adopt() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api
        .create_node(json!({"name": "ica", "driver": "fake-hardware", "inspect_interface": "fake"}))
        .await;
    assert_eq!(node["provision_state"], "enroll");
    api.accepted("ica", "manage").await;
    api.wait_for("ica", "manageable").await;

    // The `no-inspect` interface: Ironic's UnsupportedDriverExtension, the node untouched.
    api.create_node(json!({"name": "noi", "driver": "fake-hardware", "inspect_interface": "no-inspect"})).await;
    api.accepted("noi", "manage").await;
    let before = api.wait_for("noi", "manageable").await;
    assert_eq!(before["inspect_interface"], "no-inspect");
    let r = api.provision("noi", "inspect").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(
        r.fault(),
        "Driver fake-hardware does not support inspect (disabled or not implemented)."
    );
    let after = api.node("noi").await;
    for field in ["provision_state", "target_provision_state", "inspection_started_at", "reservation", "updated_at"] {
        assert_eq!(before[field], after[field], "{field}");
    }

    assert_eq!(node["inspection_started_at"], json!(null));
    api.accepted("ica", "inspect").await;
    let node = api.wait_for("ica", "manageable").await;
    assert_eq!(node["target_provision_state"], json!(null));
    let (started, finished) = (
        node["inspection_started_at"].as_str().expect("inspection started"),
        node["inspection_finished_at"].as_str().expect("inspection finished"),
    );
    assert!(started <= finished, "{started} > {finished}");

    let clean = |steps: serde_json::Value| {
        api.request(
            reqwest::Method::PUT,
            "/v1/nodes/ica/states/provision",
            Some(json!({"target": "clean", "clean_steps": steps})),
        )
    };
    let r = clean(json!([{"interface": "deploy", "step": "erase_devices_metadata"}])).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = api.wait_for("ica", "manageable").await;
    assert_eq!(node["target_provision_state"], json!(null), "manual cleaning ends manageable");
    let r = clean(json!([{"interface": "raid", "step": "create_configuration"}])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("raid.create_configuration"), "{}", r.fault());
    let r = clean(json!([])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = api.provision("ica", "clean").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "clean needs steps: {}", r.body);

    api.accepted("ica", "adopt").await;
    let node = api.wait_for("ica", "active").await;
    assert_eq!(node["target_provision_state"], json!(null));
    assert_eq!(node["power_state"], "power off", "adoption read the power state");
    let r = api.provision("ica", "inspect").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "not from active: {}", r.body);
    app.assert_no_locks().await;
}
