//! Deploy templates (API 1.55), in process ([`TestApp`]): created, listed with paging and `fields`,
//! shown by UUID or name, patched (whole steps and a step's member) and deleted by the API, with
//! Ironic's validation errors and 409 on a duplicate name; absent below 1.55.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Api, TestApp};

const V: &str = "1.55";

fn step(interface: &str, name: &str, priority: Value) -> Value {
    json!({"interface": interface, "step": name, "args": {}, "priority": priority})
}

async fn post(api: &Api, body: Value) -> (StatusCode, Value) {
    let r = api
        .request_at(V, Method::POST, "/v1/deploy_templates", Some(body))
        .await;
    (r.status, r.body)
}

/// CRUD with validation errors, the duplicate name, PATCH of steps, paging and fields, and the
/// resource's absence below 1.55.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn deploy_templates_crud() {
    let app = TestApp::start().await;
    let api = app.api();

    // Below 1.55: GET is 404, a write 405; /v1 links the resource from 1.55.
    let r = api.request_at("1.54", Method::GET, "/v1/deploy_templates", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = api.request_at("1.54", Method::POST, "/v1/deploy_templates", Some(json!({}))).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{}", r.body);
    let r = api.request_at("1.54", Method::GET, "/v1", None).await;
    assert!(r.body.get("deploy_templates").is_none(), "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1", None).await;
    assert!(r.body["deploy_templates"][0]["href"].as_str().unwrap().ends_with("/v1/deploy_templates/"), "{}", r.body);

    // Create.
    let (status, t1) = post(api, json!({"name": "CUSTOM_RAID", "steps": [step("raid", "apply_configuration", json!(10))], "extra": {"k": 1}})).await;
    assert_eq!(status, StatusCode::CREATED, "{t1}");
    let u1 = t1["uuid"].as_str().unwrap().to_owned();
    assert_eq!(t1["steps"], json!([step("raid", "apply_configuration", json!(10))]), "{t1}");
    assert_eq!(t1["extra"], json!({"k": 1}));
    assert!(t1["created_at"].is_string() && t1["updated_at"].is_null(), "{t1}");
    assert!(t1["links"][0]["href"].as_str().unwrap().ends_with(&format!("/v1/deploy_templates/{u1}")), "{t1}");
    let (status, body) = post(api, json!({"name": "CUSTOM_RAID", "steps": [step("bios", "x", json!(1))]})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");

    // Validation errors: 400 each, nothing created.
    for bad in [
        json!({"name": "raid", "steps": [step("raid", "s", json!(1))]}),
        json!({"name": "CUSTOM_", "steps": [step("raid", "s", json!(1))]}),
        json!({"steps": [step("raid", "s", json!(1))]}),
        json!({"name": "CUSTOM_A"}),
        json!({"name": "CUSTOM_A", "steps": []}),
        json!({"name": "CUSTOM_A", "steps": [step("boot", "s", json!(1))]}),
        json!({"name": "CUSTOM_A", "steps": [step("raid", "s", json!(-1))]}),
        json!({"name": "CUSTOM_A", "steps": [{"interface": "raid", "step": "s", "args": [], "priority": 1}]}),
        json!({"name": "CUSTOM_A", "steps": [{"interface": "raid", "step": "s", "priority": 1}]}),
        json!({"name": "CUSTOM_A", "steps": [step("raid", "s", json!(1)), step("raid", "s", json!(2))]}),
        json!({"name": "CUSTOM_A", "steps": [step("raid", "s", json!(1))], "bogus": 1}),
    ] {
        let (status, body) = post(api, bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert!(body["error_message"].is_string(), "{body}");
    }

    // A second one, then the listings: short form, fields, paging.
    let (status, t2) = post(api, json!({"name": "CUSTOM_BIOS", "steps": [step("bios", "apply_configuration", json!("5"))]})).await;
    assert_eq!(status, StatusCode::CREATED, "{t2}");
    assert_eq!(t2["steps"][0]["priority"], 5, "a priority may be a string of digits: {t2}");
    let u2 = t2["uuid"].as_str().unwrap().to_owned();
    let r = api.request_at(V, Method::GET, "/v1/deploy_templates", None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let items = r.body["deploy_templates"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{}", r.body);
    assert_eq!(items[0]["name"], "CUSTOM_RAID");
    assert!(items[0].get("steps").is_none(), "short form: {}", r.body);
    let r = api.request_at(V, Method::GET, "/v1/deploy_templates/detail", None).await;
    assert!(r.body["deploy_templates"][1]["steps"].is_array(), "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1/deploy_templates?limit=1&sort_key=name", None).await;
    assert_eq!(r.body["deploy_templates"][0]["name"], "CUSTOM_BIOS", "{}", r.body);
    let next = r.body["next"].as_str().unwrap();
    assert!(next.contains(&format!("marker={u2}")), "{next}");
    let r = api.request_at(V, Method::GET, &format!("/v1/deploy_templates?limit=1&sort_key=name&marker={u2}"), None).await;
    assert_eq!(r.body["deploy_templates"][0]["uuid"], u1.as_str(), "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1/deploy_templates?fields=name,steps", None).await;
    assert!(r.body["deploy_templates"][0].get("uuid").is_none() && r.body["deploy_templates"][0]["steps"].is_array(), "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1/deploy_templates?sort_key=steps", None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1/deploy_templates?fields=bogus", None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);

    // Show by name or UUID.
    let r = api.request_at(V, Method::GET, "/v1/deploy_templates/CUSTOM_BIOS", None).await;
    assert_eq!(r.body["uuid"], u2.as_str(), "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1/deploy_templates/CUSTOM_NONE", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    // PATCH: a step's member, an appended step, a removed step, the name; bad patches are 400,
    // a duplicate name 409.
    let path = format!("/v1/deploy_templates/{u1}");
    let patch = |ops: Value| api.request_at(V, Method::PATCH, &path, Some(ops));
    let r = patch(json!([{"op": "replace", "path": "/steps/0/priority", "value": 20}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["steps"][0]["priority"], 20, "{}", r.body);
    assert!(r.body["updated_at"].is_string(), "{}", r.body);
    let r = patch(json!([{"op": "add", "path": "/steps/-", "value": step("bios", "factory_reset", json!(0))}])).await;
    assert_eq!(r.body["steps"].as_array().unwrap().len(), 2, "{}", r.body);
    let r = patch(json!([{"op": "remove", "path": "/steps/0"}, {"op": "replace", "path": "/name", "value": "CUSTOM_RESET"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["steps"], json!([step("bios", "factory_reset", json!(0))]), "{}", r.body);
    assert_eq!(r.body["name"], "CUSTOM_RESET");
    for bad in [
        json!([{"op": "remove", "path": "/steps/0"}]),
        json!([{"op": "remove", "path": "/steps"}]),
        json!([{"op": "add", "path": "/steps/-", "value": step("bios", "factory_reset", json!(1))}]),
        json!([{"op": "replace", "path": "/steps/0/interface", "value": "boot"}]),
        json!([{"op": "replace", "path": "/steps/5/priority", "value": 1}]),
        json!([{"op": "replace", "path": "/name", "value": "lower"}]),
        json!([{"op": "replace", "path": "/uuid", "value": u2}]),
    ] {
        let r = patch(bad.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}: {}", r.body);
    }
    let r = patch(json!([{"op": "replace", "path": "/name", "value": "CUSTOM_BIOS"}])).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);

    // DELETE by name, then it is gone.
    let r = api.request_at(V, Method::DELETE, "/v1/deploy_templates/CUSTOM_RESET", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at(V, Method::GET, &path, None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = api.request_at(V, Method::DELETE, &path, None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
}

/// A deploy applies the templates its instance's traits name: a step the driver does not offer,
/// an argument it does not take, or the core step moved fail the request (400) with the node
/// left as it was; a template's own traits that the instance lacks do nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn a_deploy_checks_the_templates_of_its_instance_traits() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(json!({"name": "dt-node"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    for (name, steps) in [
        ("CUSTOM_RAID", json!([step("raid", "create_configuration", json!(10))])),
        ("CUSTOM_ARGS", json!([{"interface": "deploy", "step": "deploy", "args": {"force": true}, "priority": 0}])),
        ("CUSTOM_MOVED", json!([step("deploy", "deploy", json!(150))])),
        ("CUSTOM_UNUSED", json!([step("bios", "apply_configuration", json!(10))])),
    ] {
        let (status, body) = post(api, json!({"name": name, "steps": steps})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let set_traits = |traits: Value| {
        api.patch(&uuid, json!([{"op": "add", "path": "/instance_info/traits", "value": traits}]))
    };
    for (traits, expected) in [
        (json!(["CUSTOM_RAID"]), "node does not support this deploy step: raid.create_configuration"),
        (json!(["CUSTOM_ARGS"]), "deploy step deploy.deploy has these unexpected arguments: force"),
        (json!(["CUSTOM_MOVED", "CUSTOM_OTHER"]), "is a core step and cannot be overridden"),
    ] {
        let r = set_traits(traits.clone()).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let r = api.provision(&uuid, "active").await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{traits}: {}", r.body);
        assert!(r.fault().contains(expected), "{expected:?} not in {}", r.fault());
        let n = api.node(&uuid).await;
        assert_eq!((&n["provision_state"], &n["reservation"]), (&json!("available"), &Value::Null), "{n}");
    }
    // Traits that name no failing template: the deploy runs the driver's steps.
    let r = set_traits(json!(["CUSTOM_NOTHING"])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.accepted(&uuid, "active").await;
    let n = api.wait_for(&uuid, "active").await;
    assert!(n["driver_internal_info"].get("deploy_steps").is_none(), "cleared at the end: {n}");
    assert_eq!(n["deploy_step"], json!({}));
    app.assert_no_locks().await;
}
