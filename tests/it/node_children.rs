//! Parent and child nodes (API 1.83): `parent_node` written as a UUID or a name and stored as the
//! UUID, GET /v1/nodes/{id}/children, node lists without children unless asked, the
//! `parent_node` filter, and their version gates and bad input.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Cluster, ClusterOptions, on_both_stacks};

const V: &str = "1.83";

on_both_stacks! {
/// Children are named by their parent's UUID or name, listed by the parent's children endpoint
/// and by `?parent_node=`, and left out of node lists unless `include_children=True`; deleting a
/// parent leaves its children as they are, as in Ironic.
async fn child_nodes_name_their_parent(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions { stack, ..ClusterOptions::default() }).await
    else {
        return;
    };
    let api = &cluster.api;
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
    cluster.assert_no_locks().await;
}
}
