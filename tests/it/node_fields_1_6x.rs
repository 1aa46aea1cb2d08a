//! The node fields of API 1.61-1.66 (retired, lessee, network_data) with their rules, filters and
//! version gates, and the external events of 1.54.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::TestApp;

/// retired (1.61): not set in available (409), a reason needs it (400), a retired node is not
/// provided (400) and its cleaning ends in manageable; un-retiring forgets the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn a_retired_node_is_not_provided_and_cleans_to_manageable() {
    let app = TestApp::start().await;
    let api = app.api();
    let at = |v: &'static str, method: Method, path: String, body: Option<Value>| async move {
        api.request_at(v, method, &path, body).await
    };
    let body = json!({"driver": "fake-hardware", "name": "r0", "retired": true});
    let r = at("1.60", Method::POST, "/v1/nodes".into(), Some(body.clone())).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = at("1.61", Method::POST, "/v1/nodes".into(), Some(body)).await;
    assert_eq!((r.status, &r.body["retired"]), (StatusCode::CREATED, &json!(true)), "{}", r.body);

    let node = api.available_node(json!({"name": "r1"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let patch = |ops: Value| at("1.61", Method::PATCH, format!("/v1/nodes/{uuid}"), Some(ops));
    let retire = json!([{"op": "replace", "path": "/retired", "value": true},
                        {"op": "add", "path": "/retired_reason", "value": "end of life"}]);
    let r = patch(retire.clone()).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains("provision state 'available'"), "{}", r.fault());
    api.accepted(&uuid, "manage").await;
    api.wait_for(&uuid, "manageable").await;
    let r = patch(json!([{"op": "add", "path": "/retired_reason", "value": "why"}])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("only be set when retired is True"), "{}", r.fault());
    let r = patch(retire.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!((&r.body["retired"], &r.body["retired_reason"]), (&json!(true), &json!("end of life")));
    let old = at("1.60", Method::GET, format!("/v1/nodes/{uuid}"), None).await;
    assert!(old.body.get("retired").is_none(), "retired shown at 1.60: {}", old.body);

    let r = api.provision(&uuid, "provide").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("because it is retired"), "{}", r.fault());
    assert_eq!(api.node(&uuid).await["provision_state"], "manageable");

    let names = |query: &'static str| async move {
        let r = at("1.61", Method::GET, format!("/v1/nodes?{query}"), None).await;
        assert_eq!(r.status, StatusCode::OK, "{query}: {}", r.body);
        let mut names: Vec<String> = r.body["nodes"].as_array().unwrap().iter()
            .map(|n| n["name"].as_str().unwrap().to_owned()).collect();
        names.sort();
        names
    };
    assert_eq!(names("retired=true").await, ["r0", "r1"]);
    assert!(names("retired=false").await.is_empty());
    let r = at("1.60", Method::GET, "/v1/nodes?retired=true".into(), None).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = at("1.61", Method::GET, "/v1/nodes?retired=maybe".into(), None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);

    // Un-retired, it is provided again; retired while deployed, its tear down ends manageable.
    let r = patch(json!([{"op": "replace", "path": "/retired", "value": false}])).await;
    assert_eq!((&r.body["retired"], &r.body["retired_reason"]), (&json!(false), &Value::Null), "{}", r.body);
    api.accepted(&uuid, "provide").await;
    api.wait_for(&uuid, "available").await;
    api.accepted(&uuid, "active").await;
    api.wait_for(&uuid, "active").await;
    let r = patch(retire).await;
    assert_eq!(r.status, StatusCode::OK, "an active node can be retired: {}", r.body);
    api.accepted(&uuid, "deleted").await;
    api.wait_for(&uuid, "manageable").await;
    let node = at("1.61", Method::GET, format!("/v1/nodes/{uuid}"), None).await.body;
    assert_eq!(node["retired"], json!(true), "{node}");
    app.assert_no_locks().await;
}

/// lessee (1.65) and network_data (1.66): written at create and by PATCH, reset by `remove`,
/// lessee filtered on, network_data checked against the format.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn lessee_and_network_data_are_fields_of_1_65_and_1_66() {
    let app = TestApp::start().await;
    let api = app.api();
    let network_data = json!({
        "links": [{"id": "eth0", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:56"}],
        "networks": [{"id": "net0", "type": "ipv4", "link": "eth0", "network_id": "n0",
                      "ip_address": "192.0.2.10", "netmask": "255.255.255.0",
                      "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "192.0.2.1"}]}],
        "services": [{"type": "dns", "address": "192.0.2.53"}]
    });
    let body = json!({"driver": "fake-hardware", "name": "l1", "lessee": "tenant-a"});
    let r = api.request_at("1.64", Method::POST, "/v1/nodes", Some(body.clone())).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = api.request_at("1.65", Method::POST, "/v1/nodes", Some(body)).await;
    assert_eq!((r.status, &r.body["lessee"]), (StatusCode::CREATED, &json!("tenant-a")), "{}", r.body);
    assert!(r.body.get("network_data").is_none(), "network_data shown at 1.65: {}", r.body);
    let body = json!({"driver": "fake-hardware", "name": "l2", "network_data": network_data});
    let r = api.request_at("1.65", Method::POST, "/v1/nodes", Some(body.clone())).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = api.request_at("1.66", Method::POST, "/v1/nodes", Some(body)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["network_data"], network_data);
    assert_eq!(r.body["lessee"], Value::Null);

    let patch = |ident: &'static str, ops: Value| async move {
        api.request_at("1.66", Method::PATCH, &format!("/v1/nodes/{ident}"), Some(ops)).await
    };
    let r = patch("l1", json!([{"op": "replace", "path": "/lessee", "value": "x".repeat(256)}])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = patch("l1", json!([{"op": "add", "path": "/network_data/links", "value": []}])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "links alone are not the format: {}", r.body);
    assert!(r.fault().contains("Invalid network_data: 'networks' is a required property"), "{}", r.fault());
    let bad_ip = json!([{"op": "replace", "path": "/network_data/networks/0/ip_address", "value": "192.0.2.300"}]);
    let r = patch("l2", bad_ip).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("networks[0]: ip_address"), "{}", r.fault());
    let r = patch("l2", json!([{"op": "replace", "path": "/network_data/networks/0/ip_address", "value": "192.0.2.11"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["network_data"]["networks"][0]["ip_address"], "192.0.2.11");
    let r = patch("l2", json!([{"op": "add", "path": "/lessee", "value": "tenant-b"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);

    let r = api.request_at("1.65", Method::GET, "/v1/nodes?lessee=tenant-b&fields=name,lessee", None).await;
    assert_eq!(r.body["nodes"].as_array().unwrap().len(), 1, "{}", r.body);
    assert_eq!(r.body["nodes"][0]["name"], "l2");
    let r = api.request_at("1.64", Method::GET, "/v1/nodes?lessee=tenant-b", None).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = api.request_at("1.65", Method::GET, "/v1/nodes/l2?fields=network_data", None).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "network_data is not a field at 1.65: {}", r.body);

    let r = patch("l2", json!([{"op": "remove", "path": "/network_data"}, {"op": "remove", "path": "/lessee"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!((&r.body["network_data"], &r.body["lessee"]), (&json!({}), &Value::Null));
    app.assert_no_locks().await;
}

/// POST /v1/events (1.54): well-formed Neutron port events are accepted (204) and logged; any
/// other shape is a 400 naming the problem; below 1.54 the resource does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_events_are_checked_and_accepted() {
    let app = TestApp::start().await;
    let event = json!({"event": "network.bind_port", "port_id": "11111111-2222-3333-4444-555555555555",
                       "mac_address": "52:54:00:12:34:56", "status": "ACTIVE",
                       "device_id": null, "binding:host_id": "66666666-2222-3333-4444-555555555555",
                       "binding:vnic_type": "baremetal"});
    let post = |version: &'static str, body: Value| {
        app.request_at(version, Method::POST, "/v1/events", Some(body))
    };
    let r = post("1.54", json!({"events": [event]})).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = post("1.53", json!({"events": [event]})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let with = |key: &str, value: Value| {
        let mut e = event.clone();
        e[key] = value;
        json!({"events": [e]})
    };
    let mut missing = event.clone();
    missing.as_object_mut().unwrap().remove("status");
    for (body, expected) in [
        (json!({"events": []}), "at least one event"),
        (json!({}), "missing field `events`"),
        (
            json!({"events": [event], "more": 1}),
            "unknown field `more`",
        ),
        (
            with("event", json!("network.create_port")),
            "Unknown event type 'network.create_port'",
        ),
        (
            with("port_id", json!("port-1")),
            "Expected a UUID for port_id",
        ),
        (with("mac_address", json!("52:54:00")), "52:54:00"),
        (with("binding:host_id", json!("host-1")), "binding:host_id"),
        (with("colour", json!("red")), "unknown field `colour`"),
        (json!({"events": [missing]}), "missing field `status`"),
    ] {
        let r = post("1.54", body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.body);
        assert!(
            r.fault().contains(expected),
            "{expected:?} not in {:?}",
            r.fault()
        );
    }
    let r = app.request_at("1.54", Method::GET, "/v1", None).await;
    assert!(
        r.body["events"][0]["href"]
            .as_str()
            .unwrap()
            .ends_with("/v1/events/"),
        "{}",
        r.body
    );
    let r = app.request_at("1.53", Method::GET, "/v1", None).await;
    assert!(r.body.get("events").is_none(), "{}", r.body);
}
