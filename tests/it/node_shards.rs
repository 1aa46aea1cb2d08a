//! The node's shard (API 1.82): the field, the `shard` and `sharded` node filters, GET
//! /v1/shards, the ports of nodes in shards, and their version gates and bad input.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::TestApp;

const V: &str = "1.82";

/// A shard is written at create and by PATCH from 1.82 (406 below), removed to null, shown from
/// 1.82; the node list filters on it, /v1/shards counts the nodes of each, and the ports of
/// nodes in shards are listed by `?shard=`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn nodes_are_grouped_in_shards() {
    let app = TestApp::start().await;
    let api = app.api();
    let at = |v: &'static str, method: Method, path: String, body: Option<Value>| async move {
        api.request_at(v, method, &path, body).await
    };
    let create = |name: &'static str, shard: Value| async move {
        let body = json!({"driver": "fake-hardware", "name": name, "shard": shard});
        let r = at(V, Method::POST, "/v1/nodes".into(), Some(body)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.body
    };
    let a = create("a", json!("s1")).await;
    assert_eq!(a["shard"], "s1", "{a}");
    create("b", json!("s1")).await;
    create("c", json!("s2")).await;
    let d = create("d", Value::Null).await;
    assert_eq!(d["shard"], Value::Null, "{d}");
    let d_uuid = d["uuid"].as_str().unwrap().to_owned();

    // Hidden below 1.82, shown from it (also in the detail list and by ?fields=).
    let r = at("1.81", Method::GET, "/v1/nodes/a".into(), None).await;
    assert!(r.body.get("shard").is_none(), "{}", r.body);
    let r = at(V, Method::GET, "/v1/nodes/a?fields=shard".into(), None).await;
    assert_eq!(r.body["shard"], "s1", "{}", r.body);
    let r = at(V, Method::GET, "/v1/nodes/detail".into(), None).await;
    assert_eq!(r.body["nodes"][0]["shard"], "s1", "{}", r.body);

    // PATCH adds, replaces and removes it.
    let patch = |ops: Value| at(V, Method::PATCH, format!("/v1/nodes/{d_uuid}"), Some(ops));
    let r = patch(json!([{"op": "add", "path": "/shard", "value": "s2"}])).await;
    assert_eq!((r.status, &r.body["shard"]), (StatusCode::OK, &json!("s2")), "{}", r.body);

    let names = |query: &'static str| async move {
        let r = at(V, Method::GET, format!("/v1/nodes?{query}"), None).await;
        assert_eq!(r.status, StatusCode::OK, "{query}: {}", r.body);
        let mut names: Vec<String> = r.body["nodes"].as_array().unwrap().iter()
            .map(|n| n["name"].as_str().unwrap().to_owned()).collect();
        names.sort();
        names
    };
    assert_eq!(names("shard=s1").await, ["a", "b"]);
    assert_eq!(names("shard=s1,s2").await, ["a", "b", "c", "d"]);
    assert!(names("shard=nope").await.is_empty());
    assert_eq!(names("sharded=true").await, ["a", "b", "c", "d"]);
    assert!(names("sharded=false").await.is_empty());

    let r = at(V, Method::GET, "/v1/shards".into(), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body, json!({"shards": [{"name": "s1", "count": 2}, {"name": "s2", "count": 2}]}));

    let r = patch(json!([{"op": "remove", "path": "/shard"}])).await;
    assert_eq!((r.status, &r.body["shard"]), (StatusCode::OK, &Value::Null), "{}", r.body);
    assert_eq!(names("sharded=false").await, ["d"]);
    let r = at(V, Method::GET, "/v1/shards".into(), None).await;
    assert_eq!(r.body, json!({"shards": [{"name": "s1", "count": 2}, {"name": "s2", "count": 1}]}));
    let r = at("1.81", Method::GET, "/v1".into(), None).await;
    assert!(r.body.get("shards").is_none(), "{}", r.body);
    let r = at(V, Method::GET, "/v1".into(), None).await;
    assert!(r.body["shards"][0]["href"].as_str().unwrap().ends_with("/v1/shards/"), "{}", r.body);

    // The ports of the nodes in the shards named.
    let a_uuid = a["uuid"].as_str().unwrap();
    for (node, mac) in [(a_uuid, "52:54:00:00:00:01"), (d_uuid.as_str(), "52:54:00:00:00:02")] {
        let body = json!({"node_uuid": node, "address": mac});
        let r = at(V, Method::POST, "/v1/ports".into(), Some(body)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    }
    let r = at(V, Method::GET, "/v1/ports?shard=s1,s2".into(), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let ports = r.body["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 1, "{}", r.body);
    assert_eq!(ports[0]["address"], "52:54:00:00:00:01", "{}", r.body);
    let r = at(V, Method::GET, "/v1/ports?shard=s2&limit=1".into(), None).await;
    assert!(r.body["ports"].as_array().unwrap().is_empty(), "{}", r.body);
    app.assert_no_locks().await;
}

/// Bad input and version gates of the shard field, its filters and /v1/shards, with Ironic's
/// codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn shard_bad_input_gets_ironics_answers() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"driver": "fake-hardware", "name": "n"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let long = "x".repeat(256);
    let rows: Vec<(&str, Method, String, Option<Value>, StatusCode)> = vec![
        ("1.81", Method::POST, "/v1/nodes".into(),
         Some(json!({"driver": "fake-hardware", "shard": "s"})), StatusCode::NOT_ACCEPTABLE),
        ("1.81", Method::PATCH, format!("/v1/nodes/{uuid}"),
         Some(json!([{"op": "add", "path": "/shard", "value": "s"}])), StatusCode::NOT_ACCEPTABLE),
        ("1.81", Method::GET, "/v1/nodes?fields=shard".into(), None, StatusCode::NOT_ACCEPTABLE),
        ("1.81", Method::GET, "/v1/nodes?shard=s".into(), None, StatusCode::NOT_ACCEPTABLE),
        ("1.81", Method::GET, "/v1/nodes?sharded=true".into(), None, StatusCode::NOT_ACCEPTABLE),
        ("1.81", Method::GET, "/v1/ports?shard=s".into(), None, StatusCode::NOT_ACCEPTABLE),
        ("1.81", Method::GET, "/v1/shards".into(), None, StatusCode::NOT_FOUND),
        (V, Method::GET, "/v1/shards/s1".into(), None, StatusCode::NOT_FOUND),
        (V, Method::POST, "/v1/nodes".into(),
         Some(json!({"driver": "fake-hardware", "shard": 7})), StatusCode::BAD_REQUEST),
        (V, Method::POST, "/v1/nodes".into(),
         Some(json!({"driver": "fake-hardware", "shard": long})), StatusCode::BAD_REQUEST),
        (V, Method::PATCH, format!("/v1/nodes/{uuid}"),
         Some(json!([{"op": "add", "path": "/shard", "value": ["s"]}])), StatusCode::BAD_REQUEST),
        (V, Method::GET, "/v1/nodes?sharded=maybe".into(), None, StatusCode::BAD_REQUEST),
        (V, Method::GET, format!("/v1/ports?shard=s&node={uuid}"), None, StatusCode::FORBIDDEN),
        (V, Method::GET, format!("/v1/nodes/{uuid}/ports?shard=s"), None, StatusCode::FORBIDDEN),
    ];
    for (version, method, path, body, want) in rows {
        let r = api.request_at(version, method.clone(), &path, body.clone()).await;
        assert_eq!(r.status, want, "{version} {method} {path} {body:?}: {}", r.body);
        assert!(!r.fault().is_empty(), "{version} {method} {path}: no error envelope: {}", r.body);
    }
    assert_eq!(api.node(&uuid).await["shard"], Value::Null);
}
