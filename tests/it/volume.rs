//! Volume connectors and targets (API 1.32), in process ([`TestApp`]): created by the API, listed with
//! their filters and paging, shown (target properties masked), patched and deleted by the
//! node's conductor under Ironic's power and provision state rules, and gone with their node.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Api, TestApp};

/// Asks for `target` power and waits until the node has it, its lock released.
async fn power(api: &Api, node: &str, target: &str) {
    let r = api.power(node, target).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{target}: {}", r.body);
    api.wait_power(node, target).await;
}

/// Connectors and targets: the roots' links, create, the short and long listings, the node
/// filter and a node's sub-collections, paging, show, PATCH and DELETE with Ironic's rules,
/// the unique keys as 409s, and cascade with the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn volume_connectors_and_targets() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"name": "vol-node", "driver": "fake-hardware"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    assert!(node["volume"][0]["href"].as_str().unwrap().ends_with(&format!("/v1/nodes/{n}/volume")), "{node}");
    let r = api.request_at("1.31", Method::GET, &format!("/v1/nodes/{n}"), None).await;
    assert!(r.body.get("volume").is_none(), "volume is of 1.32: {}", r.body);

    // The roots.
    let r = api.get("/v1/volume").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body["links"][0]["href"].as_str().unwrap().ends_with("/v1/volume/"), "{}", r.body);
    assert!(r.body["connectors"][0]["href"].as_str().unwrap().ends_with("/v1/volume/connectors"), "{}", r.body);
    assert!(r.body["targets"][1]["href"].as_str().unwrap().ends_with("/volume/targets"), "{}", r.body);
    let r = api.get("/v1/nodes/vol-node/volume").await;
    assert!(r.body["targets"][0]["href"].as_str().unwrap().ends_with("/v1/nodes/vol-node/volume/targets"), "{}", r.body);
    let r = api.get("/v1").await;
    assert!(r.body["volume"][0]["href"].as_str().unwrap().contains("/v1/volume"), "{}", r.body);

    // Create: 201 with a Location; the (type, connector_id) pair is unique across nodes.
    let r = api.request(Method::POST, "/v1/volume/connectors", Some(json!({"node_uuid": n, "type": "iqn", "connector_id": "iqn.2017-05.org:a", "extra": {"k": 1}}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let c1 = r.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(r.body["type"], "iqn");
    assert_eq!(r.body["node_uuid"], n.as_str());
    assert!(r.body["links"][0]["href"].as_str().unwrap().ends_with(&format!("/v1/volume/connectors/{c1}")));
    let r = api.request(Method::POST, "/v1/volume/connectors", Some(json!({"node_uuid": n, "type": "iqn", "connector_id": "iqn.2017-05.org:a"}))).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains("type iqn and connector ID iqn.2017-05.org:a already exists"), "{}", r.fault());
    let r = api.request(Method::POST, "/v1/volume/connectors", Some(json!({"node_uuid": n, "type": "wwpn", "connector_id": "50:00:00:00:00:00:00:01"}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let c2 = r.body["uuid"].as_str().unwrap().to_owned();
    let r = api.request(Method::POST, "/v1/volume/targets", Some(json!({"node_uuid": "vol-node-uuid-is-not-a-name", "volume_type": "iscsi", "boot_index": 0, "volume_id": "v0"}))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "node_uuid is a UUID: {}", r.body);
    let r = api.request(Method::POST, "/v1/volume/targets", Some(json!({"node_uuid": n, "volume_type": "iscsi", "boot_index": 0, "volume_id": "v0", "properties": {"target_iqn": "iqn.x", "auth_password": "s3cret"}}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let t0 = r.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(r.body["properties"], json!({"target_iqn": "iqn.x", "auth_password": "******"}), "secrets masked");
    let r = api.request(Method::POST, "/v1/volume/targets", Some(json!({"node_uuid": n, "volume_type": "iscsi", "boot_index": 0, "volume_id": "v1"}))).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains("boot index '0' for the same node already exists"), "{}", r.fault());
    let r = api.request(Method::POST, "/v1/volume/targets", Some(json!({"node_uuid": n, "volume_type": "iscsi", "boot_index": 1, "volume_id": "v1"}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let t1 = r.body["uuid"].as_str().unwrap().to_owned();

    // Listings: the short form, detail, the node filter (by name), a node's, paging.
    let r = api.get("/v1/volume/connectors").await;
    let first = &r.body["connectors"][0];
    assert_eq!(first["uuid"], c1.as_str(), "{}", r.body);
    let mut keys: Vec<&str> = first.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["connector_id", "links", "node_uuid", "type", "uuid"], "{}", r.body);
    let r = api.get("/v1/volume/connectors/detail?node=vol-node").await;
    assert_eq!(r.body["connectors"][1]["extra"], json!({}), "{}", r.body);
    assert_eq!(r.body["connectors"].as_array().unwrap().len(), 2, "{}", r.body);
    let r = api.get("/v1/volume/targets?detail=true").await;
    assert_eq!(r.body["targets"][0]["properties"]["auth_password"], "******", "{}", r.body);
    let r = api.get("/v1/volume/targets?fields=boot_index").await;
    assert_eq!(r.body["targets"][1]["boot_index"], 1, "{}", r.body);
    assert!(r.body["targets"][1].get("volume_id").is_none(), "{}", r.body);
    let r = api.get("/v1/nodes/vol-node/volume/targets").await;
    assert_eq!(r.body["targets"].as_array().unwrap().len(), 2, "{}", r.body);
    let r = api.get("/v1/volume/connectors?limit=1").await;
    let next = r.body["next"].as_str().unwrap();
    assert!(next.contains("/v1/volume/connectors?limit=1&marker="), "{next}");
    let r = api.get(&format!("/v1/volume/connectors?limit=1&marker={c1}")).await;
    assert_eq!(r.body["connectors"][0]["uuid"], c2.as_str(), "{}", r.body);
    let r = api.get("/v1/volume/connectors?sort_dir=desc&sort_key=uuid").await;
    assert_eq!(r.body["connectors"].as_array().unwrap().len(), 2, "{}", r.body);
    let r = api.get(&format!("/v1/volume/targets/{t1}?fields=volume_id")).await;
    assert_eq!(r.body["volume_id"], "v1", "{}", r.body);
    assert!(r.body.get("boot_index").is_none(), "{}", r.body);

    // An update needs the node powered off (its power is unknown in enroll).
    let patch = json!([{"op": "replace", "path": "/connector_id", "value": "iqn.2017-05.org:b"}]);
    let r = api.request(Method::PATCH, &format!("/v1/volume/connectors/{c1}"), Some(patch.clone())).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("volume connector update"), "{}", r.fault());
    power(api, &n, "power off").await;
    let r = api.request(Method::PATCH, &format!("/v1/volume/connectors/{c1}"), Some(patch)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["connector_id"], "iqn.2017-05.org:b");
    assert!(r.body["updated_at"].is_string(), "{}", r.body);
    let r = api.request(Method::PATCH, &format!("/v1/volume/connectors/{c2}"), Some(json!([
        {"op": "replace", "path": "/type", "value": "iqn"},
        {"op": "replace", "path": "/connector_id", "value": "iqn.2017-05.org:b"},
    ]))).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = api.request(Method::PATCH, &format!("/v1/volume/targets/{t1}"), Some(json!([{"op": "replace", "path": "/boot_index", "value": 0}]))).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = api.request(Method::PATCH, &format!("/v1/volume/targets/{t1}"), Some(json!([
        {"op": "replace", "path": "/boot_index", "value": 5},
        {"op": "add", "path": "/properties/lun", "value": 2},
    ]))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["boot_index"], 5);
    assert_eq!(r.body["properties"], json!({"lun": 2}));

    // Powered on, in enroll: an update is refused, a delete allowed (enroll allows deleting).
    power(api, &n, "power on").await;
    let r = api.request(Method::PATCH, &format!("/v1/volume/targets/{t1}"), Some(json!([{"op": "add", "path": "/extra/a", "value": 1}]))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("while it is in state \"power on\""), "{}", r.fault());
    let r = api.request(Method::DELETE, &format!("/v1/volume/connectors/{c2}"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.get(&format!("/v1/volume/connectors/{c2}")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert!(r.fault().contains("Volume connector"), "{}", r.fault());

    // Gone with the node.
    let r = api.request(Method::DELETE, "/v1/nodes/vol-node", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    for path in [format!("/v1/volume/connectors/{c1}"), format!("/v1/volume/targets/{t0}"), format!("/v1/volume/targets/{t1}")] {
        let r = api.get(&path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {}", r.body);
    }
    app.assert_no_locks().await;
}

/// A delete needs the node powered off or in a state that allows deleting it: an active,
/// powered-on node keeps its target until it is powered off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn volume_delete_follows_the_node_state() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(json!({"name": "vol-active"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    let r = api.request(Method::POST, "/v1/volume/targets", Some(json!({"node_uuid": n, "volume_type": "iscsi", "boot_index": 0, "volume_id": "v0"}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let t = r.body["uuid"].as_str().unwrap().to_owned();
    api.accepted(&n, "active").await;
    let node = api.wait_for(&n, "active").await;
    assert_eq!(node["power_state"], "power on", "{node}");
    let r = api.request(Method::DELETE, &format!("/v1/volume/targets/{t}"), None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("volume target deletion"), "{}", r.fault());
    power(api, &n, "power off").await;
    let r = api.request(Method::DELETE, &format!("/v1/volume/targets/{t}"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    app.assert_no_locks().await;
}

/// Bad input to the volume resources: each a 4xx in Ironic's envelope that says what is wrong,
/// and nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn bad_volume_input_is_refused() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"name": "vol-bad", "driver": "fake-hardware"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    let missing = "0e0b4a7e-5a44-4c10-a7a3-55d0c1b26f5e";
    let c = "/v1/volume/connectors";
    let t = "/v1/volume/targets";
    let rows: Vec<(&str, Method, String, Value, StatusCode, &str)> = vec![
        ("1.31", Method::GET, "/v1/volume".into(), Value::Null, StatusCode::NOT_FOUND, "The API is not supported for this version"),
        ("1.31", Method::GET, c.into(), Value::Null, StatusCode::NOT_FOUND, "The resource could not be found."),
        ("1.31", Method::POST, t.into(), json!({"node_uuid": n, "volume_type": "iscsi", "boot_index": 0, "volume_id": "v"}), StatusCode::NOT_FOUND, "The resource could not be found."),
        ("1.32", Method::POST, c.into(), json!({"node_uuid": n, "type": "iqn"}), StatusCode::BAD_REQUEST, "connector_id"),
        ("1.32", Method::POST, c.into(), json!({"type": "iqn", "connector_id": "x"}), StatusCode::BAD_REQUEST, "node_uuid"),
        ("1.32", Method::POST, c.into(), json!({"node_uuid": missing, "type": "iqn", "connector_id": "x"}), StatusCode::BAD_REQUEST, "could not be found"),
        ("1.32", Method::POST, c.into(), json!({"node_uuid": n, "type": "iqn", "connector_id": "x", "colour": "red"}), StatusCode::BAD_REQUEST, "Unexpected arguments: colour"),
        ("1.32", Method::POST, c.into(), json!({"node_uuid": n, "type": 1, "connector_id": "x"}), StatusCode::BAD_REQUEST, "type"),
        ("1.32", Method::POST, c.into(), json!({"node_uuid": n, "type": "t".repeat(33), "connector_id": "x"}), StatusCode::BAD_REQUEST, "type"),
        ("1.32", Method::POST, c.into(), json!({"node_uuid": n, "type": "iqn", "connector_id": "x", "extra": []}), StatusCode::BAD_REQUEST, "extra"),
        ("1.32", Method::POST, c.into(), json!({"node_uuid": n, "type": "iqn", "connector_id": "x", "uuid": "nope"}), StatusCode::BAD_REQUEST, "uuid"),
        ("1.32", Method::POST, t.into(), json!({"node_uuid": n, "volume_type": "iscsi", "volume_id": "v"}), StatusCode::BAD_REQUEST, "boot_index"),
        ("1.32", Method::POST, t.into(), json!({"node_uuid": n, "volume_type": "iscsi", "boot_index": -1, "volume_id": "v"}), StatusCode::BAD_REQUEST, "boot_index"),
        ("1.32", Method::POST, t.into(), json!({"node_uuid": n, "volume_type": "iscsi", "boot_index": "0", "volume_id": "v"}), StatusCode::BAD_REQUEST, "boot_index"),
        ("1.32", Method::POST, t.into(), json!({"node_uuid": n, "volume_type": "iscsi", "boot_index": 0, "volume_id": "v", "properties": "p"}), StatusCode::BAD_REQUEST, "properties"),
        ("1.32", Method::POST, t.into(), json!({"node_uuid": n, "volume_type": "iscsi", "boot_index": 0, "volume_id": "v".repeat(37)}), StatusCode::BAD_REQUEST, "volume_id"),
        ("1.32", Method::GET, format!("{c}?sort_key=extra"), Value::Null, StatusCode::BAD_REQUEST, "sort_key"),
        ("1.32", Method::GET, format!("{t}?limit=0"), Value::Null, StatusCode::BAD_REQUEST, "limit"),
        ("1.32", Method::GET, format!("{t}?fields=colour"), Value::Null, StatusCode::BAD_REQUEST, "colour"),
        ("1.32", Method::GET, format!("{c}?node={missing}"), Value::Null, StatusCode::NOT_FOUND, "could not be found"),
        ("1.32", Method::GET, format!("{c}/{missing}"), Value::Null, StatusCode::NOT_FOUND, "Volume connector"),
        ("1.32", Method::GET, format!("{t}/{missing}"), Value::Null, StatusCode::NOT_FOUND, "Volume target"),
        ("1.32", Method::GET, format!("{t}/not-a-uuid"), Value::Null, StatusCode::BAD_REQUEST, "uuid"),
        ("1.32", Method::PATCH, format!("{t}/{missing}"), json!([{"op": "add", "path": "/extra/a", "value": 1}]), StatusCode::NOT_FOUND, "Volume target"),
        ("1.32", Method::PATCH, format!("{c}/{missing}"), json!([{"op": "replace", "path": "/uuid", "value": missing}]), StatusCode::BAD_REQUEST, "uuid"),
        ("1.32", Method::DELETE, format!("{c}/{missing}"), Value::Null, StatusCode::NOT_FOUND, "Volume connector"),
        ("1.32", Method::GET, format!("/v1/nodes/{missing}/volume/connectors"), Value::Null, StatusCode::NOT_FOUND, "could not be found"),
    ];
    for (version, method, path, body, status, says) in rows {
        let body = (!body.is_null()).then_some(body);
        let r = api.request_at(version, method.clone(), &path, body.clone()).await;
        assert_eq!(r.status, status, "{method} {path} {body:?} at {version}: {}", r.body);
        assert!(r.fault().contains(says), "{method} {path} {body:?}: {} lacks {says:?}", r.fault());
    }
    let r = api.get(c).await;
    assert_eq!(r.body["connectors"], json!([]), "nothing was stored: {}", r.body);
    let r = api.get(t).await;
    assert_eq!(r.body["targets"], json!([]), "nothing was stored: {}", r.body);
    app.assert_no_locks().await;
}

/// Ironic's `destroy_volume_connector` and `destroy_volume_target` refuse a node that is
/// powered on outside its `DELETE_ALLOWED_STATES` (manageable, enroll, adopt failed): in
/// `available` too, although the node itself may be deleted there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_deletes_of_an_available_node_need_it_powered_off() {
    let app = crate::util::TestApp::start().await;
    let node = app.available_node(json!({"name": "vol-available"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    let r = app
        .request(
            Method::POST,
            "/v1/volume/connectors",
            Some(json!({"node_uuid": n, "type": "iqn", "connector_id": "iqn.2017-05.org:a"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let c = r.body["uuid"].as_str().unwrap().to_owned();
    let r = app
        .request(
            Method::POST,
            "/v1/volume/targets",
            Some(
                json!({"node_uuid": n, "volume_type": "iscsi", "boot_index": 0, "volume_id": "v0"}),
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let t = r.body["uuid"].as_str().unwrap().to_owned();
    let r = app.power(&n, "power on").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    app.settle().await;
    assert_eq!(app.node(&n).await["power_state"], "power on");
    for (path, what) in [
        (
            format!("/v1/volume/connectors/{c}"),
            "volume connector deletion",
        ),
        (format!("/v1/volume/targets/{t}"), "volume target deletion"),
    ] {
        let r = app.request(Method::DELETE, &path, None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        assert_eq!(
            r.fault(),
            format!(
                "The requested action \"{what}\" can not be performed on node \"{n}\" while it is in state \"power on\"."
            )
        );
    }
    let r = app.power(&n, "power off").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    app.settle().await;
    for path in [
        format!("/v1/volume/connectors/{c}"),
        format!("/v1/volume/targets/{t}"),
    ] {
        let r = app.request(Method::DELETE, &path, None).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    }
}

/// `?detail=True` lists every field of connectors and targets from 1.32, the first version of
/// the volume resources (Ironic's volume controllers read it without the 1.43 gate of the
/// others), and not with `fields`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_lists_take_detail_from_1_32() {
    let app = crate::util::TestApp::start().await;
    let node = app
        .create_node(json!({"name": "vol-detail", "driver": "fake-hardware"}))
        .await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    let r = app.request_at("1.32", Method::POST, "/v1/volume/connectors", Some(json!({"node_uuid": n, "type": "iqn", "connector_id": "iqn.2017-05.org:a", "extra": {"k": 1}}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = app
        .request_at(
            "1.32",
            Method::POST,
            "/v1/volume/targets",
            Some(
                json!({"node_uuid": n, "volume_type": "iscsi", "boot_index": 0, "volume_id": "v0"}),
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    for (path, key) in [
        ("/v1/volume/connectors", "connectors"),
        ("/v1/volume/targets", "targets"),
        ("/v1/nodes/vol-detail/volume/connectors", "connectors"),
    ] {
        let r = app
            .request_at("1.32", Method::GET, &format!("{path}?detail=True"), None)
            .await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.body);
        assert!(r.body[key][0]["extra"].is_object(), "{path}: {}", r.body);
        let r = app
            .request_at("1.32", Method::GET, &format!("{path}?detail=False"), None)
            .await;
        assert!(r.body[key][0].get("extra").is_none(), "{path}: {}", r.body);
        let r = app
            .request_at(
                "1.32",
                Method::GET,
                &format!("{path}?detail=True&fields=uuid"),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.body);
        assert_eq!(
            r.fault(),
            "Can't fetch a subset of fields with 'detail' set"
        );
    }
}
