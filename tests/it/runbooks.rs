//! Runbooks (API 1.92), in process ([`TestApp`]): created, listed with paging and `fields`, shown by UUID
//! or name, patched and deleted by the API, with Ironic's validation errors; absent below 1.92;
//! and a manual clean that runs a runbook's steps on a node whose traits name it.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::TestApp;

const V: &str = "1.92";

fn step(interface: &str, name: &str, order: Value) -> Value {
    json!({"interface": interface, "step": name, "args": {}, "order": order})
}

/// CRUD, the duplicate name, PATCH of steps and of owner/public, paging and fields, and the
/// resource's absence below 1.92.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn runbooks_crud() {
    let app = TestApp::start().await;
    let api = app.api();
    let r = api.request_at("1.91", Method::GET, "/v1/runbooks", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = api.request_at("1.91", Method::POST, "/v1/runbooks", Some(json!({}))).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{}", r.body);
    let r = api.request_at("1.91", Method::GET, "/v1", None).await;
    assert!(r.body.get("runbooks").is_none(), "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1", None).await;
    assert!(r.body["runbooks"][0]["href"].as_str().unwrap().ends_with("/v1/runbooks/"), "{}", r.body);

    let body = json!({"name": "CUSTOM_WIPE", "steps": [{"interface": "deploy", "step": "erase_devices", "order": "2"}],
                      "extra": {"k": "v"}, "owner": "p1"});
    let r = api.request_at(V, Method::POST, "/v1/runbooks", Some(body)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let uuid = r.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(r.body["steps"], json!([step("deploy", "erase_devices", json!(2))]), "args default to {{}}, order an integer");
    assert_eq!((&r.body["public"], &r.body["disable_ramdisk"], &r.body["owner"]), (&json!(false), &json!(false), &json!("p1")));
    assert!(r.body["links"][0]["href"].as_str().unwrap().ends_with(&format!("/v1/runbooks/{uuid}")));

    let r = api.request_at(V, Method::POST, "/v1/runbooks", Some(json!({"name": "CUSTOM_WIPE", "steps": [step("deploy", "x", json!(1))]}))).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains("A runbook with name CUSTOM_WIPE already exists."), "{}", r.fault());
    let r = api.request_at(V, Method::POST, "/v1/runbooks", Some(json!({"name": "CUSTOM_OTHER", "steps": [step("bios", "apply", json!(1))], "public": true}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);

    // By name and by UUID; the short form is uuid, name and links; fields; paging.
    let r = api.request_at(V, Method::GET, "/v1/runbooks/CUSTOM_WIPE", None).await;
    assert_eq!((r.status, &r.body["uuid"]), (StatusCode::OK, &json!(uuid)), "{}", r.body);
    let r = api.request_at(V, Method::GET, &format!("/v1/runbooks/{uuid}?fields=name,owner"), None).await;
    assert_eq!(r.body["owner"], "p1", "{}", r.body);
    assert!(r.body.get("steps").is_none(), "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1/runbooks", None).await;
    let first = &r.body["runbooks"][0];
    assert_eq!((&first["name"], first.get("steps")), (&json!("CUSTOM_WIPE"), None), "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1/runbooks?limit=1&sort_key=name&sort_dir=desc", None).await;
    assert_eq!(r.body["runbooks"][0]["name"], "CUSTOM_WIPE", "{}", r.body);
    assert!(r.body["next"].as_str().unwrap().contains("marker="), "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1/runbooks/detail", None).await;
    assert_eq!(r.body["runbooks"].as_array().unwrap().len(), 2, "{}", r.body);
    assert_eq!(r.body["runbooks"][1]["public"], true, "{}", r.body);

    // PATCH: a step's member, a step added, extra; public forgets the owner.
    let patch = json!([{"op": "replace", "path": "/steps/0/order", "value": 5},
                       {"op": "add", "path": "/steps/-", "value": step("deploy", "erase_devices_metadata", json!(1))},
                       {"op": "remove", "path": "/extra/k"}]);
    let r = api.request_at(V, Method::PATCH, "/v1/runbooks/CUSTOM_WIPE", Some(patch)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["steps"], json!([step("deploy", "erase_devices", json!(5)), step("deploy", "erase_devices_metadata", json!(1))]));
    assert_eq!(r.body["extra"], json!({}));
    assert!(r.body["updated_at"].is_string(), "{}", r.body);
    let r = api.request_at(V, Method::PATCH, "/v1/runbooks/CUSTOM_WIPE", Some(json!([{"op": "replace", "path": "/public", "value": true}]))).await;
    assert_eq!((r.status, &r.body["public"], &r.body["owner"]), (StatusCode::OK, &json!(true), &Value::Null), "{}", r.body);
    let r = api.request_at(V, Method::PATCH, "/v1/runbooks/CUSTOM_WIPE", Some(json!([{"op": "add", "path": "/owner", "value": "p2"}]))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("There cannot be an owner for a public runbook"), "{}", r.fault());

    let r = api.request_at(V, Method::DELETE, "/v1/runbooks/CUSTOM_OTHER", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1/runbooks/CUSTOM_OTHER", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert!(r.fault().contains("Runbook CUSTOM_OTHER could not be found."), "{}", r.fault());
}

/// Bad input to runbooks: each a 4xx in Ironic's envelope, nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn bad_runbook_input_is_refused() {
    let app = TestApp::start().await;
    let api = app.api();
    let ok = step("deploy", "erase_devices", json!(1));
    let missing = "0e0b4a7e-5a44-4c10-a7a3-55d0c1b26f5e";
    let post = |body: Value| (V, Method::POST, "/v1/runbooks".to_owned(), body);
    type Row<'a> = ((&'a str, Method, String, Value), StatusCode, &'a str);
    let rows: Vec<Row<'_>> = vec![
        (post(json!({"steps": [ok]})), StatusCode::BAD_REQUEST, "'name' is a required property"),
        (post(json!({"name": "CUSTOM_A"})), StatusCode::BAD_REQUEST, "'steps' is a required property"),
        (post(json!({"name": "not a trait", "steps": [ok]})), StatusCode::BAD_REQUEST, "name"),
        (post(json!({"name": "CUSTOM_A", "steps": []})), StatusCode::BAD_REQUEST, "at least one step"),
        (post(json!({"name": "CUSTOM_A", "steps": [{"interface": "deploy", "step": "s"}]})), StatusCode::BAD_REQUEST, "'order' is a required property"),
        (post(json!({"name": "CUSTOM_A", "steps": [{"interface": "deploy", "step": "s", "order": 1, "priority": 1}]})), StatusCode::BAD_REQUEST, "'priority' was unexpected"),
        (post(json!({"name": "CUSTOM_A", "steps": [step("boot", "s", json!(1))]})), StatusCode::BAD_REQUEST, "interface"),
        (post(json!({"name": "CUSTOM_A", "steps": [step("deploy", "s", json!(-1))]})), StatusCode::BAD_REQUEST, "order must be an integer"),
        (post(json!({"name": "CUSTOM_A", "steps": [ok, ok]})), StatusCode::BAD_REQUEST, "Duplicate deploy steps"),
        (post(json!({"name": "CUSTOM_A", "steps": [ok], "public": "yes"})), StatusCode::BAD_REQUEST, "public"),
        (post(json!({"name": "CUSTOM_A", "steps": [ok], "disable_ramdisk": 1})), StatusCode::BAD_REQUEST, "disable_ramdisk"),
        (post(json!({"name": "CUSTOM_A", "steps": [ok], "owner": "o".repeat(256)})), StatusCode::BAD_REQUEST, "owner"),
        (post(json!({"name": "CUSTOM_A", "steps": [ok], "colour": "red"})), StatusCode::BAD_REQUEST, "colour"),
        ((V, Method::GET, format!("/v1/runbooks/{missing}"), Value::Null), StatusCode::NOT_FOUND, "could not be found"),
        ((V, Method::PATCH, "/v1/runbooks/CUSTOM_NONE".into(), json!([{"op": "replace", "path": "/extra", "value": {}}])), StatusCode::NOT_FOUND, "could not be found"),
        ((V, Method::DELETE, "/v1/runbooks/CUSTOM_NONE".into(), Value::Null), StatusCode::NOT_FOUND, "could not be found"),
        ((V, Method::GET, "/v1/runbooks?sort_key=steps".into(), Value::Null), StatusCode::BAD_REQUEST, "sort_key"),
        ((V, Method::GET, "/v1/runbooks?fields=colour".into(), Value::Null), StatusCode::BAD_REQUEST, "colour"),
        (("1.91", Method::GET, format!("/v1/runbooks/{missing}"), Value::Null), StatusCode::NOT_FOUND, "runbooks"),
    ];
    for ((version, method, path, body), status, says) in rows {
        let body = (!body.is_null()).then_some(body);
        let r = api.request_at(version, method.clone(), &path, body.clone()).await;
        assert_eq!(r.status, status, "{method} {path} {body:?} at {version}: {}", r.body);
        assert!(r.fault().contains(says), "{method} {path} {body:?}: {} lacks {says:?}", r.fault());
    }
    let r = api.request_at(V, Method::GET, "/v1/runbooks", None).await;
    assert_eq!(r.body["runbooks"], json!([]), "nothing was stored: {}", r.body);
}

/// A manual clean with a runbook (1.92) runs its steps on a node whose traits name it; without
/// the trait, with steps of its own as well, or with steps the driver lacks, it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn a_clean_runs_a_runbook_the_node_is_approved_for() {
    let app = TestApp::start().await;
    let api = app.api();
    let wipe = json!({"name": "CUSTOM_WIPE", "steps": [{"interface": "deploy", "step": "erase_devices_metadata", "order": 0}]});
    let r = api.request_at(V, Method::POST, "/v1/runbooks", Some(wipe)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let raid = json!({"name": "CUSTOM_RAID", "steps": [step("raid", "create_configuration", json!(0))], "public": true});
    let r = api.request_at(V, Method::POST, "/v1/runbooks", Some(raid)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);

    let node = api.create_node(json!({"name": "rb", "driver": "fake-hardware"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted("rb", "manage").await;
    api.wait_for("rb", "manageable").await;
    let clean = |version: &'static str, body: Value| {
        api.request_at(version, Method::PUT, "/v1/nodes/rb/states/provision", Some(body))
    };
    // Not approved: the node lacks the trait (public or not).
    let r = clean(V, json!({"target": "clean", "runbook": "CUSTOM_WIPE"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains(&format!("This runbook has not been approved for use on this node {uuid}.")), "{}", r.fault());
    for t in ["CUSTOM_WIPE", "CUSTOM_RAID"] {
        let r = api.request_at(V, Method::PUT, &format!("/v1/nodes/rb/traits/{t}"), None).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    }
    let rows: Vec<(&str, Value, StatusCode, &str)> = vec![
        ("1.91", json!({"target": "clean", "runbook": "CUSTOM_WIPE"}), StatusCode::NOT_ACCEPTABLE, "runbook"),
        (V, json!({"target": "clean", "runbook": "CUSTOM_NONE"}), StatusCode::NOT_FOUND, "Runbook CUSTOM_NONE could not be found."),
        (V, json!({"target": "provide", "runbook": "CUSTOM_WIPE"}), StatusCode::BAD_REQUEST, "\"runbooks\" is only valid"),
        (V, json!({"target": "clean", "runbook": "CUSTOM_WIPE", "clean_steps": [{"interface": "deploy", "step": "erase_devices"}]}), StatusCode::BAD_REQUEST, "not both"),
        (V, json!({"target": "clean", "runbook": "CUSTOM_RAID"}), StatusCode::BAD_REQUEST, "raid.create_configuration"),
    ];
    for (version, body, status, says) in rows {
        let r = clean(version, body.clone()).await;
        assert_eq!(r.status, status, "{body} at {version}: {}", r.body);
        assert!(r.fault().contains(says), "{body}: {} lacks {says:?}", r.fault());
    }
    assert_eq!(api.node("rb").await["provision_state"], "manageable");
    let r = clean(V, json!({"target": "clean", "runbook": "CUSTOM_WIPE"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = api.wait_for("rb", "manageable").await;
    assert_eq!(node["target_provision_state"], Value::Null, "manual cleaning ends manageable");
    assert_eq!(node["last_error"], Value::Null, "{node}");
    app.assert_no_locks().await;
}
