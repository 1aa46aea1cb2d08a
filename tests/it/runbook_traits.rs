//! Runbook traits (API 1.112): the `/v1/runbooks/{id}/traits` sub-resource, the
//! `description` field and names that need not be traits; which nodes may run a runbook by
//! version (its traits from 1.112, its name before); a runbook made below 1.112 keeps its name
//! as its trait; concurrent additions are all kept (on both stacks, MySQL's concurrency too;
//! which nodes may run a runbook in process, [`TestApp`]).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Cluster, ClusterOptions, TestApp, on_both_stacks};

const V: &str = "1.112";

fn steps() -> Value {
    json!([{"interface": "deploy", "step": "erase_devices_metadata", "order": 0}])
}

on_both_stacks! {
/// The traits sub-resource and the 1.112 fields, with their refusals.
async fn runbook_traits_and_description(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions { stack, ..ClusterOptions::default() }).await
    else {
        return;
    };
    let api = &cluster.api;
    // Below 1.112: a name must be a trait, no description, no traits anywhere.
    let r = api.request_at("1.111", Method::POST, "/v1/runbooks", Some(json!({"name": "wipe", "steps": steps()}))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = api.request_at("1.111", Method::POST, "/v1/runbooks", Some(json!({"name": "CUSTOM_OLD", "steps": steps(), "description": "d"}))).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = api.request_at("1.111", Method::POST, "/v1/runbooks", Some(json!({"name": "CUSTOM_OLD", "steps": steps()}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert!(r.body.get("traits").is_none() && r.body.get("description").is_none(), "{}", r.body);
    let r = api.request_at("1.111", Method::GET, "/v1/runbooks/CUSTOM_OLD/traits", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert!(r.fault().contains("does not allow runbook traits"), "{}", r.fault());
    let r = api.request_at("1.91", Method::PUT, "/v1/runbooks/CUSTOM_OLD/traits/CUSTOM_X", None).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{}", r.body);
    // At 1.112 the older runbook shows its name as its trait.
    let r = api.request_at(V, Method::GET, "/v1/runbooks/CUSTOM_OLD", None).await;
    assert_eq!((&r.body["traits"], &r.body["description"]), (&json!(["CUSTOM_OLD"]), &Value::Null), "{}", r.body);

    // From 1.112: any URL-safe name, a description, no traits in the body.
    let body = json!({"name": "wipe-disks.v2", "steps": steps(), "description": "Erases metadata"});
    let r = api.request_at(V, Method::POST, "/v1/runbooks", Some(body)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!((&r.body["traits"], &r.body["description"]), (&json!([]), &json!("Erases metadata")), "{}", r.body);
    let rows: Vec<(Value, StatusCode, &str)> = vec![
        (json!({"name": "has space", "steps": steps()}), StatusCode::BAD_REQUEST, "Invalid name 'has space'"),
        (json!({"name": "ok", "steps": steps(), "traits": ["CUSTOM_A"]}), StatusCode::BAD_REQUEST, "Unexpected arguments: traits"),
        (json!({"name": "ok", "steps": steps(), "description": "d".repeat(256)}), StatusCode::BAD_REQUEST, "description"),
        (json!({"name": "ok", "steps": steps(), "description": 5}), StatusCode::BAD_REQUEST, "description"),
    ];
    for (body, status, says) in rows {
        let r = api.request_at(V, Method::POST, "/v1/runbooks", Some(body.clone())).await;
        assert_eq!(r.status, status, "{body}: {}", r.body);
        assert!(r.fault().contains(says), "{body}: {} lacks {says:?}", r.fault());
    }
    let r = api.request_at(V, Method::PATCH, "/v1/runbooks/wipe-disks.v2", Some(json!([{"op": "replace", "path": "/description", "value": "New"}]))).await;
    assert_eq!((r.status, &r.body["description"]), (StatusCode::OK, &json!("New")), "{}", r.body);
    let r = api.request_at(V, Method::PATCH, "/v1/runbooks/wipe-disks.v2", Some(json!([{"op": "add", "path": "/traits", "value": ["CUSTOM_A"]}]))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = api.request_at("1.111", Method::PATCH, "/v1/runbooks/wipe-disks.v2", Some(json!([{"op": "remove", "path": "/description"}]))).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    // A name given by an older client is still checked only for URL safety on PATCH.
    let r = api.request_at("1.111", Method::PATCH, "/v1/runbooks/wipe-disks.v2", Some(json!([{"op": "replace", "path": "/extra", "value": {"a": 1}}]))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);

    // The sub-resource: add one (Location), add again (no-op), replace, remove one, remove all.
    let path = "/v1/runbooks/wipe-disks.v2/traits";
    let r = api.request_at(V, Method::PUT, &format!("{path}/CUSTOM_A"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert!(r.location.unwrap().ends_with("/v1/runbooks/wipe-disks.v2/traits/CUSTOM_A"));
    let r = api.request_at(V, Method::PUT, &format!("{path}/CUSTOM_A"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at(V, Method::PUT, &format!("{path}/HW_CPU_X86_VMX"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at(V, Method::GET, path, None).await;
    assert_eq!((r.status, &r.body), (StatusCode::OK, &json!({"traits": ["CUSTOM_A", "HW_CPU_X86_VMX"]})));
    let r = api.request_at(V, Method::PUT, path, Some(json!({"traits": ["CUSTOM_B", "CUSTOM_C", "CUSTOM_B"]}))).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1/runbooks/wipe-disks.v2?fields=traits,name", None).await;
    assert_eq!(r.body["traits"], json!(["CUSTOM_B", "CUSTOM_C"]), "{}", r.body);
    let r = api.request_at(V, Method::DELETE, &format!("{path}/CUSTOM_B"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at(V, Method::DELETE, &format!("{path}/CUSTOM_NOT_THERE"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "removing a trait the runbook lacks is a no-op: {}", r.body);
    let r = api.request_at(V, Method::GET, path, None).await;
    assert_eq!(r.body, json!({"traits": ["CUSTOM_C"]}));
    let r = api.request_at(V, Method::DELETE, path, None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at(V, Method::GET, path, None).await;
    assert_eq!(r.body, json!({"traits": []}));

    // Refusals of the sub-resource.
    let rows: Vec<(Method, String, Option<Value>, StatusCode, &str)> = vec![
        (Method::PUT, format!("{path}/lower_case"), None, StatusCode::BAD_REQUEST, "lower_case"),
        (Method::PUT, format!("{path}/CUSTOM_A"), Some(json!({"traits": ["CUSTOM_A"]})), StatusCode::BAD_REQUEST, "No body should be provided"),
        (Method::PUT, path.to_owned(), None, StatusCode::BAD_REQUEST, "A single runbook trait may be added"),
        (Method::PUT, path.to_owned(), Some(json!({"traits": ["bad trait"]})), StatusCode::BAD_REQUEST, "bad trait"),
        (Method::PUT, path.to_owned(), Some(json!({"traits": "CUSTOM_A"})), StatusCode::BAD_REQUEST, ""),
        (Method::PUT, path.to_owned(), Some(json!({"trait": ["CUSTOM_A"]})), StatusCode::BAD_REQUEST, ""),
        (Method::GET, "/v1/runbooks/nope/traits".to_owned(), None, StatusCode::NOT_FOUND, "Runbook nope could not be found."),
        (Method::PUT, "/v1/runbooks/nope/traits/CUSTOM_A".to_owned(), None, StatusCode::NOT_FOUND, "Runbook nope could not be found."),
        (Method::DELETE, "/v1/runbooks/nope/traits".to_owned(), None, StatusCode::NOT_FOUND, "Runbook nope could not be found."),
    ];
    for (method, url, body, status, says) in rows {
        let r = api.request_at(V, method.clone(), &url, body.clone()).await;
        assert_eq!(r.status, status, "{method} {url} {body:?}: {}", r.body);
        assert!(r.fault().contains(says), "{method} {url}: {} lacks {says:?}", r.fault());
    }
    let r = api.request_at(V, Method::GET, path, None).await;
    assert_eq!(r.body, json!({"traits": []}), "a refused write changed nothing");

    // Concurrent single additions all land.
    let names: Vec<String> = (0..12).map(|i| format!("CUSTOM_T{i}")).collect();
    let urls: Vec<String> = names.iter().map(|t| format!("{path}/{t}")).collect();
    let adds = urls.iter().map(|url| api.request_at(V, Method::PUT, url, None));
    for r in futures::future::join_all(adds).await {
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    }
    let r = api.request_at(V, Method::GET, path, None).await;
    let mut got: Vec<String> = serde_json::from_value(r.body["traits"].clone()).unwrap();
    got.sort();
    let mut want = names.clone();
    want.sort();
    assert_eq!(got, want);
}
}

/// Which node may run a runbook: from 1.112 one with any of the runbook's traits (none
/// configured is refused), below it one whose traits name the runbook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn a_runbooks_traits_decide_which_nodes_may_run_it() {
    let app = TestApp::start().await;
    let api = app.api();
    let r = api.request_at(V, Method::POST, "/v1/runbooks", Some(json!({"name": "wipe", "steps": steps()}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let runbook = r.body["uuid"].as_str().unwrap().to_owned();
    let node = api.create_node(json!({"name": "rt", "driver": "fake-hardware"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted("rt", "manage").await;
    api.wait_for("rt", "manageable").await;
    let clean = |version: &'static str| {
        api.request_at(version, Method::PUT, "/v1/nodes/rt/states/provision", Some(json!({"target": "clean", "runbook": "wipe"})))
    };
    let r = clean(V).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains(&format!("Runbook {runbook} has no traits configured.")), "{}", r.fault());
    for t in ["CUSTOM_Z", "CUSTOM_GOLD"] {
        let r = api.request_at(V, Method::PUT, &format!("/v1/runbooks/wipe/traits/{t}"), None).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    }
    let r = clean(V).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains(&format!("node {uuid}. The node does not have any of the runbook's traits ['CUSTOM_GOLD', 'CUSTOM_Z']")), "{}", r.fault());
    let r = api.request_at(V, Method::PUT, "/v1/nodes/rt/traits/CUSTOM_GOLD", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    // Below 1.112 the name still decides: "wipe" is not among the node's traits.
    let r = clean("1.111").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("Please ask an administrator to add it to your node traits."), "{}", r.fault());
    let r = clean(V).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = api.wait_for("rt", "manageable").await;
    assert_eq!(node["last_error"], Value::Null, "{node}");
    app.assert_no_locks().await;
}
