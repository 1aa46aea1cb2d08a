//! Servicing (API 1.87): the `service` verb runs `service_steps` (or a runbook's, 1.92) on a
//! deployed node and returns it to `active`, showing the step it is at in `service_step`; the
//! reserved `hold` step, `unhold`, `abort` from `service wait`, `service hold` and `service
//! failed`; the version gate and the bad input Ironic refuses.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Api, Reply, TestApp};

/// The version these tests speak unless a row says otherwise: runbooks (1.92) included.
const V: &str = "1.92";

async fn provision_at(api: &Api, version: &str, ident: &str, body: Value) -> Reply {
    api.request_at(
        version,
        Method::PUT,
        &format!("/v1/nodes/{ident}/states/provision"),
        Some(body),
    )
    .await
}

async fn node_at(api: &Api, version: &str, ident: &str) -> Value {
    let r = api
        .request_at(version, Method::GET, &format!("/v1/nodes/{ident}"), None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body
}

/// A deployed node whose vendor interface is the fake one (whose service steps Ferrum's fake
/// hardware offers, as Ironic's), rescuable on the fake rescue interface.
async fn active_node(api: &Api, name: &str) -> String {
    let node = api
        .available_node(
            json!({"name": name, "vendor_interface": "fake", "rescue_interface": "fake"}),
        )
        .await;
    let uuid = node["uuid"].as_str().expect("uuid").to_owned();
    api.accepted(&uuid, "active").await;
    api.wait_for(&uuid, "active").await;
    uuid
}

fn step(interface: &str, name: &str) -> Value {
    json!({"interface": interface, "step": name, "args": {}})
}

/// A deployed node is serviced back to active: the steps are kept while they run and
/// forgotten after, `service_step` (1.87, `{}` when idle) is cleared, and the node can be torn
/// down afterwards. Below 1.87 the verb is 406; without steps, with steps Ironic's schema
/// refuses, with steps the driver lacks, with a verb other than `service`, in maintenance or
/// outside `active` it is a 400 that says why, and the node is left as it was. A runbook
/// (1.92) may give the steps instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn service_returns_a_deployed_node_to_active() {
    let app = TestApp::start().await;
    let api = app.api();
    let uuid = active_node(api, "svc").await;
    assert!(node_at(api, "1.86", &uuid).await.get("service_step").is_none(), "service_step appears in 1.87");
    assert_eq!(node_at(api, "1.87", &uuid).await["service_step"], json!({}));

    let log = step("vendor", "log_passthrough");
    let service = |steps: Value| json!({"target": "service", "service_steps": steps});
    let rows: Vec<(&str, Value, StatusCode, String)> = vec![
        ("1.86", service(json!([log])), StatusCode::NOT_ACCEPTABLE, "The \"service\" target requires API version 1.87".to_owned()),
        ("1.87", json!({"target": "service"}), StatusCode::BAD_REQUEST, "\"service_steps\" is required when setting target provision state to service".to_owned()),
        ("1.87", service(json!([])), StatusCode::BAD_REQUEST, "\"service_steps\" is required when setting target provision state to service".to_owned()),
        ("1.87", service(json!("log_passthrough")), StatusCode::BAD_REQUEST, "Invalid service_steps: \"log_passthrough\" is not of type 'array'".to_owned()),
        ("1.87", service(json!([{"step": "log_passthrough"}])), StatusCode::BAD_REQUEST, "Invalid service_steps: 'interface' is a required property of a step".to_owned()),
        ("1.87", service(json!([{"interface": "vendor"}])), StatusCode::BAD_REQUEST, "Invalid service_steps: 'step' is a required property of a step".to_owned()),
        ("1.87", service(json!([{"interface": "network", "step": "x"}])), StatusCode::BAD_REQUEST, "Invalid service_steps: a step's interface must be one of".to_owned()),
        ("1.87", service(json!([{"interface": "vendor", "step": ""}])), StatusCode::BAD_REQUEST, "Invalid service_steps: a step's name must be a non-empty string".to_owned()),
        ("1.87", service(json!([{"interface": "vendor", "step": "log_passthrough", "args": []}])), StatusCode::BAD_REQUEST, "Invalid service_steps: a step's args must be an object".to_owned()),
        ("1.87", service(json!([{"interface": "vendor", "step": "log_passthrough", "order": -1}])), StatusCode::BAD_REQUEST, "Invalid service_steps: a step's order must be an integer of at least 0".to_owned()),
        ("1.87", service(json!([{"interface": "vendor", "step": "log_passthrough", "priority": 10}])), StatusCode::BAD_REQUEST, "Invalid service_steps: Additional properties are not allowed in a step ('priority' was unexpected)".to_owned()),
        ("1.87", service(json!([{"interface": "vendor", "step": "log_passthrough", "execute_on_child_nodes": true}])), StatusCode::BAD_REQUEST, "Ferrum does not run steps on child nodes".to_owned()),
        ("1.87", service(json!([step("deploy", "erase_devices")])), StatusCode::BAD_REQUEST, format!("Node {uuid}: the service step deploy.erase_devices is not supported by its driver; supported: vendor.log_passthrough, vendor.trigger_servicewait.")),
        ("1.87", json!({"target": "active", "service_steps": [log]}), StatusCode::BAD_REQUEST, "\"service_steps\" is only valid when setting target provision state to service".to_owned()),
        ("1.87", json!({"target": "service", "clean_steps": [log]}), StatusCode::BAD_REQUEST, "\"clean_steps\" is only valid when setting target provision state to clean".to_owned()),
        // A clean's own steps are read by the same schema, before the node's state is judged.
        ("1.87", json!({"target": "clean", "clean_steps": [{"interface": "deploy"}]}), StatusCode::BAD_REQUEST, "Invalid clean_steps: 'step' is a required property of a step".to_owned()),
        ("1.87", json!({"target": "service", "service_steps": [log], "disable_ramdisk": true}), StatusCode::NOT_ACCEPTABLE, "disable_ramdisk is not acceptable in this API version".to_owned()),
        ("1.91", json!({"target": "service", "runbook": "CUSTOM_FW"}), StatusCode::NOT_ACCEPTABLE, "runbook requires API version 1.92".to_owned()),
    ];
    for (version, body, status, says) in &rows {
        let r = provision_at(api, version, &uuid, body.clone()).await;
        assert_eq!(r.status, *status, "{body} at {version}: {}", r.body);
        assert!(r.fault().contains(says.as_str()), "{body} at {version}: {} lacks {says:?}", r.fault());
    }
    // In maintenance (Ironic's NodeInMaintenance), then out of it again.
    let r = api.request(Method::PUT, &format!("/v1/nodes/{uuid}/maintenance"), Some(json!({"reason": "hands off"}))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let r = provision_at(api, "1.87", &uuid, service(json!([log]))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.fault(), format!("The service operation can't be performed on node {uuid} because it's in maintenance mode."));
    let r = api.request(Method::DELETE, &format!("/v1/nodes/{uuid}/maintenance"), None).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = node_at(api, "1.87", &uuid).await;
    assert_eq!(node["provision_state"], "active", "refused requests leave the node as it was");
    assert_eq!(node["last_error"], Value::Null, "{node}");
    assert!(node["driver_internal_info"].get("service_steps").is_none(), "{node}");

    let steps = json!([log, {"interface": "vendor", "step": "log_passthrough", "order": "1"}]);
    let r = provision_at(api, "1.87", &uuid, service(steps)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = api.wait_for(&uuid, "active").await;
    let node = node_at(api, "1.87", node["uuid"].as_str().unwrap()).await;
    assert_eq!(node["service_step"], json!({}), "{node}");
    assert_eq!(node["target_provision_state"], Value::Null, "{node}");
    assert_eq!(node["last_error"], Value::Null, "{node}");
    let info = &node["driver_internal_info"];
    assert!(info.get("service_steps").is_none() && info.get("service_step_index").is_none(), "{node}");

    // A runbook whose name is among the node's traits gives the steps; not with steps as well.
    let fw = json!({"name": "CUSTOM_FW", "steps": [{"interface": "vendor", "step": "log_passthrough", "args": {}, "order": 0}]});
    let r = api.request_at(V, Method::POST, "/v1/runbooks", Some(fw)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = provision_at(api, V, &uuid, json!({"target": "service", "runbook": "CUSTOM_FW"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("This runbook has not been approved for use on this node"), "{}", r.fault());
    let r = api.request_at(V, Method::PUT, &format!("/v1/nodes/{uuid}/traits/CUSTOM_FW"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = provision_at(api, V, &uuid, json!({"target": "service", "runbook": "CUSTOM_FW", "service_steps": [log]})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.fault(), "Please provide either \"service_steps\" or a runbook, but not both.");
    let r = provision_at(api, V, &uuid, json!({"target": "service", "runbook": "CUSTOM_FW"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = api.wait_for(&uuid, "active").await;
    assert_eq!(node["last_error"], Value::Null, "{node}");

    // The node stays operable: torn down as any deployed node, then refused servicing.
    api.accepted(&uuid, "deleted").await;
    api.wait_for(&uuid, "available").await;
    let r = provision_at(api, "1.87", &uuid, service(json!([log]))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.fault(), format!("The requested action \"service\" can not be performed on node \"{uuid}\" while it is in state \"available\"."));
    app.assert_no_locks().await;
}

/// The reserved `hold` step stops servicing in `service hold`, showing the step, with the lock
/// released; `unhold` (1.85) continues it from the next step, here into a second hold; abort
/// from `service hold` ends in `service failed` naming the step, and a second abort returns
/// the node to `active`. The fake `trigger_servicewait` step leaves the node in `service wait`,
/// which has no unhold; abort from there ends in `service failed`, from which servicing runs
/// again, or the node is rescued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn service_holds_unholds_and_aborts() {
    let app = TestApp::start().await;
    let api = app.api();
    let uuid = active_node(api, "svc-hold").await;
    let log = step("vendor", "log_passthrough");
    let steps = json!([log, step("deploy", "hold"), log, step("vendor", "hold")]);
    let r = provision_at(api, "1.87", &uuid, json!({"target": "service", "service_steps": steps})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "service hold").await;
    let held = node_at(api, "1.87", &uuid).await;
    assert_eq!(held["service_step"], step("deploy", "hold"), "{held}");
    assert_eq!(held["target_provision_state"], "active", "{held}");
    assert_eq!(held["driver_internal_info"]["service_step_index"], 1, "{held}");
    assert_eq!(held["driver_internal_info"]["service_steps"], steps, "{held}");
    // Held is not active: a deploy is refused; unhold needs 1.85.
    let r = provision_at(api, "1.87", &uuid, json!({"target": "active"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("while it is in state \"service hold\""), "{}", r.fault());
    let r = provision_at(api, "1.84", &uuid, json!({"target": "unhold"})).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);

    let r = provision_at(api, "1.87", &uuid, json!({"target": "unhold"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "service hold").await;
    let held = node_at(api, "1.87", &uuid).await;
    assert_eq!(held["service_step"], step("vendor", "hold"), "the second hold: {held}");
    assert_eq!(held["driver_internal_info"]["service_step_index"], 3, "{held}");

    let r = provision_at(api, "1.87", &uuid, json!({"target": "abort"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "service failed").await;
    let failed = node_at(api, "1.87", &uuid).await;
    assert_eq!(failed["last_error"], "By request, the service operation was aborted during or after the completion of step \"vendor.hold\"", "{failed}");
    assert_eq!(failed["service_step"], json!({}), "{failed}");
    let info = &failed["driver_internal_info"];
    assert!(info.get("service_steps").is_none() && info.get("service_step_index").is_none(), "{failed}");
    let r = provision_at(api, "1.87", &uuid, json!({"target": "abort"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = api.wait_for(&uuid, "active").await;
    assert_eq!(node["last_error"], "By request, the service operation was aborted", "{node}");
    assert_eq!(node["target_provision_state"], Value::Null, "{node}");

    // service wait: no unhold there; abort, then service again from service failed.
    let wait = json!({"target": "service", "service_steps": [log, step("vendor", "trigger_servicewait")]});
    let r = provision_at(api, "1.87", &uuid, wait.clone()).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "service wait").await;
    let waiting = node_at(api, "1.87", &uuid).await;
    assert_eq!(waiting["service_step"], step("vendor", "trigger_servicewait"), "{waiting}");
    assert_eq!(waiting["last_error"], Value::Null, "a new servicing clears last_error: {waiting}");
    let r = provision_at(api, "1.87", &uuid, json!({"target": "unhold"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("while it is in state \"service wait\""), "{}", r.fault());
    let r = provision_at(api, "1.87", &uuid, json!({"target": "abort"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let failed = api.wait_for(&uuid, "service failed").await;
    assert!(failed["last_error"].as_str().unwrap_or_default().ends_with("step \"vendor.trigger_servicewait\""), "{failed}");
    let r = provision_at(api, "1.87", &uuid, json!({"target": "service", "service_steps": [log]})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = api.wait_for(&uuid, "active").await;
    assert_eq!(node["last_error"], Value::Null, "{node}");

    // From service failed the node may also be rescued, then unrescued to active.
    let r = provision_at(api, "1.87", &uuid, wait).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "service wait").await;
    let r = provision_at(api, "1.87", &uuid, json!({"target": "abort"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "service failed").await;
    // Not aborted in maintenance (Ironic's InvalidState, 409).
    let r = api.request(Method::PUT, &format!("/v1/nodes/{uuid}/maintenance"), Some(json!({"reason": "x"}))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let r = provision_at(api, "1.87", &uuid, json!({"target": "abort"})).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().starts_with(&format!("Can not abort service on node \"{uuid}\" while it is in maintenance mode.")), "{}", r.fault());
    let r = api.request(Method::DELETE, &format!("/v1/nodes/{uuid}/maintenance"), None).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let r = provision_at(api, "1.87", &uuid, json!({"target": "rescue", "rescue_password": "pw"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "rescue").await;
    api.accepted(&uuid, "unrescue").await;
    api.wait_for(&uuid, "active").await;
    app.assert_no_locks().await;
}
