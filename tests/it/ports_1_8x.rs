//! The port features of API 1.88-1.94, in process ([`TestApp`]): a port's name (1.88), the OVN VTEP switch
//! keys of `local_link_connection` (1.90), a port created on a node named by `node_ident`
//! (1.94), and the `.json` suffix that paths lose below 1.91 only.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::TestApp;

/// A port's name (1.88): written at create and by PATCH, shown, unique, and a way to name the
/// port in its URL; an older request neither sees nor writes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn ports_have_names_from_1_88() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"name": "named-nics", "driver": "fake-hardware"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    let r = api.request_at("1.88", Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": "52:54:00:88:00:01", "name": "eth0"}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["name"], "eth0");
    let uuid = r.body["uuid"].as_str().unwrap().to_owned();

    let r = api.request_at("1.88", Method::GET, "/v1/ports/eth0", None).await;
    assert_eq!((r.status, &r.body["uuid"]), (StatusCode::OK, &json!(uuid)), "{}", r.body);
    let r = api.request_at("1.88", Method::GET, "/v1/ports/eth0?fields=name,address", None).await;
    assert_eq!((&r.body["name"], &r.body["address"]), (&json!("eth0"), &json!("52:54:00:88:00:01")), "{}", r.body);
    let r = api.request_at("1.88", Method::GET, &format!("/v1/ports/detail?node={n}"), None).await;
    assert_eq!(r.body["ports"][0]["name"], "eth0", "{}", r.body);
    let r = api.request_at("1.87", Method::GET, &format!("/v1/ports/{uuid}"), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body.get("name").is_none(), "name shown at 1.87: {}", r.body);

    let rename = json!([{"op": "replace", "path": "/name", "value": "eth1"}]);
    let r = api.request_at("1.88", Method::PATCH, "/v1/ports/eth0", Some(rename)).await;
    assert_eq!((r.status, &r.body["name"]), (StatusCode::OK, &json!("eth1")), "{}", r.body);
    let r = api.request_at("1.88", Method::GET, "/v1/ports/eth0", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert!(r.fault().contains("Port eth0 could not be found."), "{}", r.fault());

    // Unique: a second port by the same name is a 409 and is not stored.
    let r = api.request_at("1.88", Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": "52:54:00:88:00:02", "name": "eth1"}))).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains("A port with name eth1 already exists."), "{}", r.fault());
    let r = api.request_at("1.88", Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": "52:54:00:88:00:02", "name": "eth2"}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let clash = json!([{"op": "replace", "path": "/name", "value": "eth1"}]);
    let r = api.request_at("1.88", Method::PATCH, "/v1/ports/eth2", Some(clash)).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains("A port with name eth1 already exists."), "{}", r.fault());

    // `remove` forgets the name; DELETE takes a name too.
    let remove = json!([{"op": "remove", "path": "/name"}]);
    let r = api.request_at("1.88", Method::PATCH, "/v1/ports/eth2", Some(remove)).await;
    assert_eq!((r.status, &r.body["name"]), (StatusCode::OK, &Value::Null), "{}", r.body);
    let r = api.request_at("1.88", Method::DELETE, "/v1/ports/eth1", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at("1.88", Method::GET, &format!("/v1/ports/{uuid}"), None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    app.assert_no_locks().await;
}

/// An OVN VTEP switch in `local_link_connection` (1.90), and `node_ident` naming a port's node
/// by name (1.94).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn vtep_links_and_node_ident() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"name": "vtep-node", "driver": "fake-hardware"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    let vtep = json!({"port_id": "p1", "vtep-logical-switch": "ls1", "vtep-physical-switch": "ps1"});
    let r = api.request_at("1.90", Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": "52:54:00:90:00:01", "local_link_connection": vtep}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["local_link_connection"], vtep);
    let uuid = r.body["uuid"].as_str().unwrap().to_owned();
    // An older client sees the link as empty, as Ironic shows it.
    let r = api.request_at("1.89", Method::GET, &format!("/v1/ports/{uuid}"), None).await;
    assert_eq!(r.body["local_link_connection"], json!({}), "{}", r.body);
    let r = api.request_at("1.90", Method::GET, &format!("/v1/ports/{uuid}"), None).await;
    assert_eq!(r.body["local_link_connection"], vtep, "{}", r.body);
    let patch = json!([{"op": "replace", "path": "/local_link_connection/vtep-logical-switch", "value": "ls2"}]);
    let r = api.request_at("1.90", Method::PATCH, &format!("/v1/ports/{uuid}"), Some(patch)).await;
    assert_eq!((r.status, &r.body["local_link_connection"]["vtep-logical-switch"]), (StatusCode::OK, &json!("ls2")), "{}", r.body);

    // 1.94: the node by name (or UUID) as `node_ident`; the port names it by UUID.
    let r = api.request_at("1.94", Method::POST, "/v1/ports", Some(json!({"node_ident": "vtep-node", "address": "52:54:00:94:00:01"}))).await;
    assert_eq!((r.status, &r.body["node_uuid"]), (StatusCode::CREATED, &json!(n)), "{}", r.body);
    assert!(r.body.get("node_ident").is_none(), "{}", r.body);
    let r = api.request_at("1.94", Method::POST, "/v1/ports", Some(json!({"node_ident": n, "address": "52:54:00:94:00:02"}))).await;
    assert_eq!((r.status, &r.body["node_uuid"]), (StatusCode::CREATED, &json!(n)), "{}", r.body);
    let r = api.request_at("1.94", Method::GET, &format!("/v1/ports?node={n}"), None).await;
    assert_eq!(r.body["ports"].as_array().unwrap().len(), 3, "{}", r.body);
    app.assert_no_locks().await;
}

/// Below 1.91 a path's `.json` is dropped (and a name is tried with it again when the shorter
/// one is not found); from 1.91, and without a version asked for, it is part of the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn a_json_suffix_is_dropped_below_1_91() {
    let app = TestApp::start().await;
    let api = app.api();
    let plain = api.create_node(json!({"name": "plain", "driver": "fake-hardware"})).await;
    let dotted = api.create_node(json!({"name": "dotted.json", "driver": "fake-hardware"})).await;
    let rows: &[(&str, &str, StatusCode, &Value)] = &[
        ("1.90", "/v1/nodes/plain.json", StatusCode::OK, &plain["uuid"]),
        ("1.90", "/v1/nodes/dotted.json", StatusCode::OK, &dotted["uuid"]),
        ("1.91", "/v1/nodes/dotted.json", StatusCode::OK, &dotted["uuid"]),
        ("1.91", "/v1/nodes/plain.json", StatusCode::NOT_FOUND, &Value::Null),
        ("1.95", "/v1/nodes/plain.json", StatusCode::NOT_FOUND, &Value::Null),
    ];
    for (version, path, status, uuid) in rows {
        let r = api.request_at(version, Method::GET, path, None).await;
        assert_eq!(r.status, *status, "{path} at {version}: {}", r.body);
        if status == &StatusCode::OK {
            assert_eq!(&r.body["uuid"], *uuid, "{path} at {version}");
        }
    }
    // A collection's path loses it too below 1.91.
    let r = api.request_at("1.90", Method::GET, "/v1/nodes.json", None).await;
    assert_eq!(r.body["nodes"].as_array().map(Vec::len), Some(2), "{}", r.body);
    let r = api.request_at("1.91", Method::GET, "/v1/nodes.json", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let patch = json!([{"op": "add", "path": "/extra/k", "value": "v"}]);
    let r = api.request_at("1.90", Method::PATCH, "/v1/nodes/dotted.json", Some(patch)).await;
    assert_eq!((r.status, &r.body["extra"]["k"]), (StatusCode::OK, &json!("v")), "{}", r.body);
    let r = api.request_at("1.90", Method::DELETE, "/v1/nodes/plain.json", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    app.assert_no_locks().await;
}

/// Bad input to the port features of 1.88-1.94: each a 4xx in Ironic's envelope, nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn bad_port_input_of_1_88_to_1_94_is_refused() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"name": "bad-8x", "driver": "fake-hardware"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    let missing = "0e0b4a7e-5a44-4c10-a7a3-55d0c1b26f5e";
    let mac = "52:54:00:00:88:01";
    let vtep = json!({"port_id": "p", "vtep-logical-switch": "ls", "vtep-physical-switch": "ps"});
    let rows: Vec<(&str, Method, String, Value, StatusCode, &str)> = vec![
        ("1.87", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": mac, "name": "p"}), StatusCode::NOT_ACCEPTABLE, "name"),
        ("1.87", Method::GET, "/v1/ports?fields=name".into(), Value::Null, StatusCode::NOT_ACCEPTABLE, "name"),
        ("1.88", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": mac, "name": 7}), StatusCode::BAD_REQUEST, "name"),
        ("1.88", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": mac, "name": "x".repeat(256)}), StatusCode::BAD_REQUEST, "name"),
        ("1.88", Method::GET, "/v1/ports/has%20space".into(), Value::Null, StatusCode::BAD_REQUEST, "Expected UUID or name for port_ident"),
        ("1.88", Method::GET, "/v1/ports/nobody".into(), Value::Null, StatusCode::NOT_FOUND, "Port nobody could not be found."),
        ("1.88", Method::PATCH, "/v1/ports/nobody".into(), json!([{"op": "add", "path": "/name", "value": "x"}]), StatusCode::NOT_FOUND, "could not be found"),
        ("1.88", Method::DELETE, "/v1/ports/nobody".into(), Value::Null, StatusCode::NOT_FOUND, "could not be found"),
        ("1.89", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": mac, "local_link_connection": vtep}), StatusCode::NOT_ACCEPTABLE, "vtep-logical-switch"),
        ("1.90", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": mac, "local_link_connection": {"port_id": "p", "vtep-logical-switch": "ls"}}), StatusCode::BAD_REQUEST, "go together"),
        ("1.90", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": mac, "local_link_connection": {"vtep-logical-switch": "ls", "vtep-physical-switch": "ps"}}), StatusCode::BAD_REQUEST, "local_link_connection"),
        ("1.90", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": mac, "local_link_connection": {"port_id": "p", "vtep-logical-switch": 1, "vtep-physical-switch": "ps"}}), StatusCode::BAD_REQUEST, "must be a string"),
        ("1.93", Method::POST, "/v1/ports".into(), json!({"node_ident": "bad-8x", "address": mac}), StatusCode::NOT_ACCEPTABLE, "node_ident"),
        ("1.94", Method::POST, "/v1/ports".into(), json!({"node_ident": "bad-8x", "node_uuid": n, "address": mac}), StatusCode::BAD_REQUEST, "node_ident"),
        ("1.94", Method::POST, "/v1/ports".into(), json!({"node_ident": "nobody", "address": mac}), StatusCode::BAD_REQUEST, "Node nobody could not be found."),
        ("1.94", Method::POST, "/v1/ports".into(), json!({"node_ident": missing, "address": mac}), StatusCode::BAD_REQUEST, "could not be found"),
        ("1.94", Method::POST, "/v1/ports".into(), json!({"node_ident": 3, "address": mac}), StatusCode::BAD_REQUEST, "node_ident"),
        ("1.94", Method::POST, "/v1/ports".into(), json!({"address": mac}), StatusCode::BAD_REQUEST, "node_uuid"),
    ];
    for (version, method, path, body, status, says) in rows {
        let body = (!body.is_null()).then_some(body);
        let r = api.request_at(version, method.clone(), &path, body.clone()).await;
        assert_eq!(r.status, status, "{method} {path} {body:?} at {version}: {}", r.body);
        assert!(r.fault().contains(says), "{method} {path} {body:?}: {} lacks {says:?}", r.fault());
    }
    let r = api.get("/v1/ports").await;
    assert_eq!(r.body["ports"], json!([]), "nothing was stored: {}", r.body);
    app.assert_no_locks().await;
}
