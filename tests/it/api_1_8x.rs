//! API 1.85-1.95: `unhold` (1.85), which sends a deploy or a cleaning paused by the reserved
//! `hold` step back to its wait state, with its version gate and bad input.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Api, Cluster, ClusterOptions, Reply, on_both_stacks};

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

on_both_stacks! {
/// unhold (1.85): a deploy whose steps include the reserved `hold` step stops in `deploy hold`
/// (the step shown, the lock released); unhold is 406 below 1.85 and 400 where the state has no
/// unhold edge; accepted, the node waits in `wait call-back` for its next heartbeat (no worker),
/// and a second unhold is refused.
async fn unhold_sends_a_held_deploy_back_to_wait_call_back(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions { stack, ..ClusterOptions::default() }).await
    else {
        return;
    };
    let api = &cluster.api;
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
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// unhold (1.85) of a manual cleaning held by the reserved `hold` step (accepted on any
/// interface, as Ironic leaves reserved steps to the conductor): `clean hold` with the step's
/// index kept, unhold to `clean wait`, then abort to `clean failed`, which forgets the steps.
async fn unhold_sends_a_held_cleaning_back_to_clean_wait(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions { stack, ..ClusterOptions::default() }).await
    else {
        return;
    };
    let api = &cluster.api;
    let node = api.available_node(json!({"name": "uh-clean"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted(&uuid, "manage").await;
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
    let r = provision_at(api, "1.84", &uuid, json!({"target": "unhold"})).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = provision_at(api, "1.85", &uuid, json!({"target": "unhold"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "clean wait").await;
    let r = provision_at(api, "1.85", &uuid, json!({"target": "abort"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let failed = api.wait_for(&uuid, "clean failed").await;
    assert!(failed["last_error"].as_str().unwrap_or_default().contains("By request, the clean operation was aborted"), "{failed}");
    let info = &failed["driver_internal_info"];
    assert!(info.get("clean_steps").is_none() && info.get("clean_step_index").is_none(), "{failed}");
    cluster.assert_no_locks().await;
}
}
