//! Parent and child nodes (API 1.83): `parent_node` written as a UUID or a name and stored as the
//! UUID, GET /v1/nodes/{id}/children, node lists without children unless asked, the
//! `parent_node` filter, and their version gates and bad input.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::TestApp;

const V: &str = "1.83";

/// A bad-input row: version, method, path, body, the status and, if given, the exact fault.
type Row = (
    &'static str,
    Method,
    String,
    Option<Value>,
    StatusCode,
    Option<String>,
);

/// Children are named by their parent's UUID or name, listed by the parent's children endpoint
/// and by `?parent_node=`, and left out of node lists unless `include_children=True`; deleting a
/// parent leaves its children as they are, as in Ironic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn child_nodes_name_their_parent() {
    let app = TestApp::start().await;
    let api = app.api();
    let at = |v: &'static str, method: Method, path: String, body: Option<Value>| async move {
        api.request_at(v, method, &path, body).await
    };
    let parent = api.create_node(json!({"driver": "fake-hardware", "name": "p"})).await;
    let p_uuid = parent["uuid"].as_str().unwrap().to_owned();
    api.create_node(json!({"driver": "fake-hardware", "name": "q"})).await;
    let body = json!({"driver": "fake-hardware", "name": "c1", "parent_node": "p"});
    let r = at(V, Method::POST, "/v1/nodes".into(), Some(body)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["parent_node"], json!(p_uuid), "stored as the UUID: {}", r.body);
    let c1 = r.body["uuid"].as_str().unwrap().to_owned();
    let c2 = api.create_node(json!({"driver": "fake-hardware", "name": "c2"})).await;
    let c2 = c2["uuid"].as_str().unwrap().to_owned();
    let r = at(V, Method::PATCH, format!("/v1/nodes/{c2}"),
               Some(json!([{"op": "add", "path": "/parent_node", "value": p_uuid.to_uppercase()}]))).await;
    assert_eq!((r.status, &r.body["parent_node"]), (StatusCode::OK, &json!(p_uuid)), "{}", r.body);
    let r = at("1.82", Method::GET, format!("/v1/nodes/{c2}"), None).await;
    assert!(r.body.get("parent_node").is_none(), "{}", r.body);

    let names = |v: &'static str, query: String| async move {
        let r = at(v, Method::GET, format!("/v1/nodes{query}"), None).await;
        assert_eq!(r.status, StatusCode::OK, "{query}: {}", r.body);
        let mut names: Vec<String> = r.body["nodes"].as_array().unwrap().iter()
            .map(|n| n["name"].as_str().unwrap().to_owned()).collect();
        names.sort();
        names
    };
    assert_eq!(names(V, String::new()).await, ["p", "q"]);
    assert_eq!(names("1.82", String::new()).await, ["p", "q"], "children are hidden at every version");
    assert_eq!(names(V, "/detail".into()).await, ["p", "q"]);
    assert_eq!(names(V, "?include_children=True".into()).await, ["c1", "c2", "p", "q"]);
    assert_eq!(names(V, "?include_children=false".into()).await, ["p", "q"]);
    assert_eq!(names(V, format!("?parent_node={p_uuid}")).await, ["c1", "c2"]);
    assert_eq!(names(V, format!("?parent_node={p_uuid}&include_children=true")).await,
               ["c1", "c2", "p", "q"], "include_children ignores parent_node, as in Ironic");

    let r = at(V, Method::GET, "/v1/nodes/p/children".into(), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["children"], json!([c1, c2]), "{}", r.body);
    assert_eq!(r.body["links"]["rel"], "children", "{}", r.body);
    assert!(r.body["links"]["href"].as_str().unwrap().ends_with(&format!("/v1/nodes?parent_node={p_uuid}")),
            "{}", r.body);
    let r = at(V, Method::GET, "/v1/nodes/q/children".into(), None).await;
    assert_eq!(r.body["children"], json!([]), "{}", r.body);

    // Removing the link puts the node back at the top level.
    let r = at(V, Method::PATCH, format!("/v1/nodes/{c2}"),
               Some(json!([{"op": "remove", "path": "/parent_node"}]))).await;
    assert_eq!((r.status, &r.body["parent_node"]), (StatusCode::OK, &Value::Null), "{}", r.body);
    assert_eq!(names(V, String::new()).await, ["c2", "p", "q"]);

    // A parent with children is deleted like any node; its children keep its UUID.
    let r = at(V, Method::DELETE, format!("/v1/nodes/{p_uuid}"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = at(V, Method::GET, format!("/v1/nodes/{c1}"), None).await;
    assert_eq!(r.body["parent_node"], json!(p_uuid), "{}", r.body);
    app.assert_no_locks().await;
}

/// parent_node's version gates and bad input: absent below 1.83 (the field, its filters and the
/// children endpoint), and a parent that is missing, too long, not a string or the node itself
/// refused with Ironic's one undisclosing sentence; nothing is written by a refused request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn parent_node_bad_input_gets_ironics_answers() {
    let app = TestApp::start().await;
    let api = app.api();
    let parent = api.create_node(json!({"driver": "fake-hardware", "name": "bp"})).await;
    let p_uuid = parent["uuid"].as_str().unwrap().to_owned();
    let long = "x".repeat(37);
    let invalid = |v: &str| format!("Unable to apply the requested parent_node '{v}'. Requested value was invalid.");
    let rows: Vec<Row> = vec![
        ("1.82", Method::POST, "/v1/nodes".into(),
         Some(json!({"driver": "fake-hardware", "parent_node": "bp"})), StatusCode::NOT_ACCEPTABLE, None),
        ("1.82", Method::PATCH, format!("/v1/nodes/{p_uuid}"),
         Some(json!([{"op": "add", "path": "/parent_node", "value": "bp"}])), StatusCode::NOT_ACCEPTABLE, None),
        ("1.82", Method::GET, "/v1/nodes?fields=parent_node".into(), None, StatusCode::NOT_ACCEPTABLE, None),
        ("1.82", Method::GET, format!("/v1/nodes?parent_node={p_uuid}"), None, StatusCode::NOT_ACCEPTABLE, None),
        ("1.82", Method::GET, "/v1/nodes?include_children=True".into(), None, StatusCode::NOT_ACCEPTABLE, None),
        ("1.82", Method::GET, "/v1/nodes/bp/children".into(), None, StatusCode::NOT_FOUND, None),
        (V, Method::GET, "/v1/nodes/nosuch/children".into(), None, StatusCode::NOT_FOUND, None),
        (V, Method::POST, "/v1/nodes".into(),
         Some(json!({"driver": "fake-hardware", "parent_node": "nosuch"})), StatusCode::BAD_REQUEST, Some(invalid("nosuch"))),
        (V, Method::POST, "/v1/nodes".into(),
         Some(json!({"driver": "fake-hardware", "parent_node": long})), StatusCode::BAD_REQUEST, None),
        (V, Method::POST, "/v1/nodes".into(),
         Some(json!({"driver": "fake-hardware", "parent_node": 7})), StatusCode::BAD_REQUEST, None),
        (V, Method::PATCH, format!("/v1/nodes/{p_uuid}"),
         Some(json!([{"op": "add", "path": "/parent_node", "value": "bp"}])), StatusCode::BAD_REQUEST, Some(invalid("bp"))),
        (V, Method::PATCH, format!("/v1/nodes/{p_uuid}"),
         Some(json!([{"op": "add", "path": "/parent_node", "value": "nosuch"}])), StatusCode::BAD_REQUEST, Some(invalid("nosuch"))),
        (V, Method::GET, "/v1/nodes?include_children=maybe".into(), None, StatusCode::BAD_REQUEST, None),
    ];
    for (version, method, path, body, status, fault) in rows {
        let r = api.request_at(version, method.clone(), &path, body.clone()).await;
        assert_eq!(r.status, status, "{version} {method} {path} {body:?}: {}", r.body);
        assert!(!r.fault().is_empty(), "{}", r.body);
        if let Some(fault) = fault {
            assert_eq!(r.fault(), fault, "{version} {method} {path}");
        }
    }
    let r = api.request_at("1.95", Method::GET, "/v1/nodes?include_children=True", None).await;
    assert_eq!(r.body["nodes"].as_array().unwrap().len(), 1, "nothing was created: {}", r.body);
    let r = api.request_at(V, Method::GET, &format!("/v1/nodes/{p_uuid}"), None).await;
    assert!(r.body["parent_node"].is_null(), "{}", r.body);
    app.assert_no_locks().await;
}
