//! PUT /v1/nodes/{id}/states/raid (API 1.12): the target RAID configuration, checked by the
//! node's RAID interface through its conductor, stored, and shown on the node and its states.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::TestApp;

/// A valid configuration is stored (204) and shown from 1.12; an invalid one is 400 naming
/// what is wrong; `no-raid` refuses any but `{}` with Ironic's 404; `{}` clears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn target_raid_config_is_checked_stored_and_shown() {
    let app = TestApp::start().await;
    let api = app.api();
    let put = |ident: &str, body: Value| {
        let path = format!("/v1/nodes/{ident}/states/raid");
        async move { api.request(Method::PUT, &path, Some(body)).await }
    };
    let node = api
        .create_node(json!({"name": "r1", "driver": "fake-hardware", "raid_interface": "fake"}))
        .await;
    assert_eq!((&node["raid_config"], &node["target_raid_config"]), (&json!({}), &json!({})));

    let config = json!({"logical_disks": [
        {"size_gb": 100, "raid_level": "1", "is_root_volume": true},
        {"size_gb": "MAX", "raid_level": "5", "disk_type": "ssd"},
    ]});
    let r = put("r1", config.clone()).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(r.body, Value::Null);
    let node = api.node("r1").await;
    assert_eq!(node["target_raid_config"], config);
    assert_eq!(node["raid_config"], json!({}));
    assert_eq!(node["reservation"], Value::Null);
    let states = api.get("/v1/nodes/r1/states").await;
    assert_eq!(states.body["target_raid_config"], config);
    let old = api.request_at("1.11", Method::GET, "/v1/nodes/r1", None).await;
    assert!(old.body.get("target_raid_config").is_none(), "{}", old.body);
    let r = api
        .request_at("1.11", Method::PUT, "/v1/nodes/r1/states/raid", Some(json!({})))
        .await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);

    for (body, why) in [
        (json!({"logical_disks": [{"size_gb": 100}]}), "'raid_level' is a required property"),
        (json!({"logical_disks": [{"size_gb": 1.5, "raid_level": "1"}]}), "1.5 is not a valid size_gb"),
        (json!({"logical_disks": [{"size_gb": 10, "raid_level": "7"}]}), "\"7\" is not a valid raid_level"),
        (json!({"logical_disks": []}), "at least one logical disk"),
        (json!({"disks": []}), "'disks' is not allowed"),
        (json!({"logical_disks": [
            {"size_gb": 1, "raid_level": "1", "is_root_volume": true},
            {"size_gb": 1, "raid_level": "1", "is_root_volume": true}]}), "at most one root volume"),
        (json!([1, 2]), "expected a JSON object"),
    ] {
        let r = put("r1", body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.body);
        assert!(r.fault().contains(why), "{body}: {}", r.fault());
    }
    assert_eq!(api.node("r1").await["target_raid_config"], config, "refused changes nothing");

    let r = put("r1", json!({})).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(api.node("r1").await["target_raid_config"], json!({}));

    // The no-raid interface refuses a configuration, as Ironic (404).
    let n2 = api.create_node(json!({"name": "r2", "driver": "fake-hardware", "raid_interface": "no-raid"})).await;
    assert_eq!(n2["raid_interface"], "no-raid");
    let r = put("r2", config.clone()).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert_eq!(
        r.fault(),
        "Driver fake-hardware does not support raid (disabled or not implemented)."
    );
    assert_eq!(api.node("r2").await["target_raid_config"], json!({}));
    let r = put("r2", json!({})).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);

    let r = put("nosuchnode", json!({})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    app.assert_no_locks().await;
}
