//! API 1.85-1.95: `unhold` (1.85), which sends a deploy or a cleaning paused by the reserved
//! `hold` step back to its wait state, with its version gate and bad input; `disable_power_off`
//! (1.95), which refuses power-off requests and makes a tear-down reboot the node instead.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Api, Reply, TestApp};

/// PUT .../states/provision at `version` with `body`.
async fn provision_at(api: &Api, version: &str, uuid: &str, body: Value) -> Reply {
    api.request_at(
        version,
        Method::PUT,
        &format!("/v1/nodes/{uuid}/states/provision"),
        Some(body),
    )
    .await
}

/// unhold (1.85): a deploy whose steps include the reserved `hold` step stops in `deploy hold`
/// (the step shown, the lock released); unhold is 406 below 1.85 and 400 where the state has no
/// unhold edge; accepted, the node waits in `wait call-back` for its next heartbeat (no worker),
/// and a second unhold is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn unhold_sends_a_held_deploy_back_to_wait_call_back() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(json!({"name": "uh-deploy"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let unhold = json!({"target": "unhold"});
    let invalid = |state: &str| format!("The requested action \"unhold\" can not be performed on node \"{uuid}\" while it is in state \"{state}\".");
    let rows = [
        ("1.84", StatusCode::NOT_ACCEPTABLE, "The \"unhold\" target requires API version 1.85".to_owned()),
        ("1.85", StatusCode::BAD_REQUEST, invalid("available")),
    ];
    for (version, status, fault) in &rows {
        let r = provision_at(api, version, &uuid, unhold.clone()).await;
        assert_eq!(r.status, *status, "{version}: {}", r.body);
        assert!(r.fault().contains(fault.as_str()), "{version}: {}", r.fault());
    }
    let hold = json!({"interface": "deploy", "step": "hold", "args": {}, "priority": 50});
    let r = provision_at(api, "1.85", &uuid, json!({"target": "active", "deploy_steps": [hold]})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let held = api.wait_for(&uuid, "deploy hold").await;
    assert_eq!(held["deploy_step"]["step"], "hold", "{held}");
    assert_eq!(held["target_provision_state"], "active", "{held}");
    let r = provision_at(api, "1.84", &uuid, unhold.clone()).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    assert_eq!(api.node(&uuid).await["provision_state"], "deploy hold");

    let r = provision_at(api, "1.85", &uuid, unhold.clone()).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let waiting = api.wait_for(&uuid, "wait call-back").await;
    assert_eq!(waiting["target_provision_state"], "active", "{waiting}");
    let r = provision_at(api, "1.85", &uuid, unhold.clone()).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains(&invalid("wait call-back")), "{}", r.fault());
    // Torn down from wait call-back, as any waiting deploy.
    let r = provision_at(api, "1.85", &uuid, json!({"target": "deleted"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "available").await;
    app.assert_no_locks().await;
}

/// unhold (1.85) of a manual cleaning held by the reserved `hold` step (accepted on any
/// interface, as Ironic leaves reserved steps to the conductor): `clean hold` with the step's
/// index kept, unhold to `clean wait`, then abort to `clean failed`, which forgets the steps and
/// powers the node off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn unhold_sends_a_held_cleaning_back_to_clean_wait() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(json!({"name": "uh-clean"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted(&uuid, "manage").await;
    api.wait_for(&uuid, "manageable").await;
    // Powered on, as a node whose ramdisk runs the cleaning is.
    let r = api.power(&uuid, "power on").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "manageable").await;
    let steps = json!([
        {"interface": "deploy", "step": "erase_devices_metadata", "args": {}},
        {"interface": "management", "step": "hold", "args": {}},
    ]);
    let r = provision_at(api, "1.85", &uuid, json!({"target": "clean", "clean_steps": steps})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let held = api.wait_for(&uuid, "clean hold").await;
    assert_eq!(held["driver_internal_info"]["clean_step_index"], 1, "{held}");
    assert_eq!(held["driver_internal_info"]["clean_steps"], steps, "{held}");
    assert_eq!(held["clean_step"], steps[1], "the step it holds in: {held}");
    let r = provision_at(api, "1.84", &uuid, json!({"target": "unhold"})).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = provision_at(api, "1.85", &uuid, json!({"target": "unhold"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let waiting = api.wait_for(&uuid, "clean wait").await;
    assert_eq!(waiting["power_state"], "power on", "the ramdisk runs: {waiting}");
    let r = provision_at(api, "1.85", &uuid, json!({"target": "abort"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let failed = api.wait_for(&uuid, "clean failed").await;
    assert_eq!(failed["power_state"], "power off", "the aborted cleaning's ramdisk is shut down: {failed}");
    assert_eq!(failed["maintenance"], false, "{failed}");
    assert_eq!(
        failed["last_error"],
        "By request, the clean operation was aborted during or after the completion of step \"management.hold\"",
        "{failed}"
    );
    assert_eq!(failed["clean_step"], json!({}), "{failed}");
    let info = &failed["driver_internal_info"];
    assert!(info.get("clean_steps").is_none() && info.get("clean_step_index").is_none(), "{failed}");
    app.assert_no_locks().await;
}

/// An aborted cleaning whose ramdisk cannot be shut down (the power off fails): the node stays
/// `clean failed`, unlocked, in maintenance with the `clean failure` fault and the failure as its
/// `last_error`, as Ironic's `do_node_clean_abort` leaves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn an_aborted_cleaning_that_cannot_power_off_goes_to_maintenance() {
    let app = TestApp::start().await;
    let api = app.api();
    // The fake BMC refuses power changes (reading the power state still works).
    let node = api
        .available_node(json!({"name": "abort-clean-fails", "driver_info": {"fake_power_fail": "BMC gone"}}))
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted(&uuid, "manage").await;
    api.wait_for(&uuid, "manageable").await;
    let steps = json!([{"interface": "management", "step": "hold", "args": {}}]);
    let r = provision_at(api, "1.85", &uuid, json!({"target": "clean", "clean_steps": steps})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "clean hold").await;
    let r = provision_at(api, "1.85", &uuid, json!({"target": "abort"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let failed = api.wait_for(&uuid, "clean failed").await;
    let error = failed["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("Failed to tear down cleaning after aborting the operation") && error.contains("BMC gone"),
        "{failed}"
    );
    assert_eq!(failed["maintenance"], true, "{failed}");
    assert_eq!(failed["fault"], "clean failure", "{failed}");
    assert_eq!(failed["maintenance_reason"], failed["last_error"], "{failed}");
    app.assert_no_locks().await;
}

/// disable_power_off (1.95): absent and unwritable below 1.95; a boolean (or its string); set,
/// power off and soft power off are refused with Ironic's 409 PowerStateFailure while power on
/// and reboot go through; a deploy and its tear-down leave the node powered on (rebooted, not
/// powered off); removed, it is false again and power off works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn disable_power_off_refuses_power_off() {
    let app = TestApp::start().await;
    let api = app.api();
    let plain = api.create_node(json!({"driver": "fake-hardware", "name": "dpo-plain"})).await;
    let plain = plain["uuid"].as_str().unwrap().to_owned();
    let rows: Vec<(&str, Method, String, Option<Value>, StatusCode)> = vec![
        ("1.94", Method::POST, "/v1/nodes".into(),
         Some(json!({"driver": "fake-hardware", "disable_power_off": true})), StatusCode::NOT_ACCEPTABLE),
        ("1.94", Method::PATCH, format!("/v1/nodes/{plain}"),
         Some(json!([{"op": "replace", "path": "/disable_power_off", "value": true}])), StatusCode::NOT_ACCEPTABLE),
        ("1.94", Method::GET, "/v1/nodes?fields=disable_power_off".into(), None, StatusCode::NOT_ACCEPTABLE),
        ("1.95", Method::POST, "/v1/nodes".into(),
         Some(json!({"driver": "fake-hardware", "disable_power_off": "maybe"})), StatusCode::BAD_REQUEST),
        ("1.95", Method::PATCH, format!("/v1/nodes/{plain}"),
         Some(json!([{"op": "replace", "path": "/disable_power_off", "value": [true]}])), StatusCode::BAD_REQUEST),
    ];
    for (version, method, path, body, status) in rows {
        let r = api.request_at(version, method.clone(), &path, body.clone()).await;
        assert_eq!(r.status, status, "{version} {method} {path} {body:?}: {}", r.body);
        assert!(!r.fault().is_empty(), "{}", r.body);
    }
    let r = api.request_at("1.94", Method::GET, &format!("/v1/nodes/{plain}"), None).await;
    assert!(r.body.get("disable_power_off").is_none(), "{}", r.body);
    let r = api.request_at("1.95", Method::GET, &format!("/v1/nodes/{plain}"), None).await;
    assert_eq!(r.body["disable_power_off"], false, "{}", r.body);

    let r = api.request_at("1.95", Method::POST, "/v1/nodes",
        Some(json!({"driver": "fake-hardware", "name": "dpo", "disable_power_off": "true"}))).await;
    assert_eq!((r.status, &r.body["disable_power_off"]), (StatusCode::CREATED, &json!(true)), "{}", r.body);
    let uuid = r.body["uuid"].as_str().unwrap().to_owned();
    for (verb, state) in [("manage", "manageable"), ("provide", "available")] {
        api.accepted(&uuid, verb).await;
        api.wait_for(&uuid, state).await;
    }
    let r = api.power(&uuid, "power on").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_power(&uuid, "power on").await;
    for target in ["power off", "soft power off"] {
        let r = api.power(&uuid, target).await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{target}: {}", r.body);
        assert_eq!(r.fault(), format!("Failed to set node power state to {target}."), "{}", r.body);
    }
    let r = api.power(&uuid, "rebooting").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_power(&uuid, "power on").await;

    api.accepted(&uuid, "active").await;
    api.wait_for(&uuid, "active").await;
    api.accepted(&uuid, "deleted").await;
    let torn_down = api.wait_for(&uuid, "available").await;
    assert_eq!(torn_down["power_state"], "power on", "rebooted, never powered off: {torn_down}");
    assert!(torn_down["last_error"].is_null(), "{torn_down}");

    let r = api.request_at("1.95", Method::PATCH, &format!("/v1/nodes/{uuid}"),
        Some(json!([{"op": "remove", "path": "/disable_power_off"}]))).await;
    assert_eq!((r.status, &r.body["disable_power_off"]), (StatusCode::OK, &json!(false)), "{}", r.body);
    let r = api.power(&uuid, "power off").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_power(&uuid, "power off").await;
    app.assert_no_locks().await;
}
