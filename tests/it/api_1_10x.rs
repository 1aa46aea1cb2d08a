//! The node's side of API 1.104-1.115, in process ([`TestApp`]): `instance_name` (1.104), servicing with
//! `disable_ramdisk` (1.108), `health` (1.109), abort from `wait call-back` (1.110), and the
//! node history's `project` (1.113) and state fields (1.115). Each is absent or refused just
//! below its version, as Ironic answers.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Api, Reply, TestApp};

async fn at(api: &Api, version: &str, method: Method, path: &str, body: Option<Value>) -> Reply {
    api.request_at(version, method, path, body).await
}

async fn provision_at(api: &Api, version: &str, ident: &str, body: Value) -> Reply {
    at(
        api,
        version,
        Method::PUT,
        &format!("/v1/nodes/{ident}/states/provision"),
        Some(body),
    )
    .await
}

/// instance_name (1.104): refused at create, PATCH and in `fields` and as a filter below 1.104;
/// 1 to 255 characters or null; listed by; filled from `instance_info.display_name` (what Nova
/// writes) only when empty; cleared with the instance at tear-down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn instance_name_names_the_instance() {
    let app = TestApp::start().await;
    let api = app.api();
    let plain = api.create_node(json!({"driver": "fake-hardware", "name": "in-plain"})).await;
    let plain = plain["uuid"].as_str().unwrap().to_owned();
    let rows: Vec<(&str, Method, String, Option<Value>, StatusCode)> = vec![
        ("1.103", Method::POST, "/v1/nodes".into(), Some(json!({"driver": "fake-hardware", "instance_name": "vm"})), StatusCode::NOT_ACCEPTABLE),
        ("1.103", Method::PATCH, format!("/v1/nodes/{plain}"), Some(json!([{"op": "add", "path": "/instance_name", "value": "vm"}])), StatusCode::NOT_ACCEPTABLE),
        ("1.103", Method::GET, "/v1/nodes?fields=instance_name".into(), None, StatusCode::NOT_ACCEPTABLE),
        ("1.103", Method::GET, "/v1/nodes?instance_name=vm".into(), None, StatusCode::NOT_ACCEPTABLE),
        ("1.104", Method::POST, "/v1/nodes".into(), Some(json!({"driver": "fake-hardware", "instance_name": ""})), StatusCode::BAD_REQUEST),
        ("1.104", Method::POST, "/v1/nodes".into(), Some(json!({"driver": "fake-hardware", "instance_name": "x".repeat(256)})), StatusCode::BAD_REQUEST),
        ("1.104", Method::PATCH, format!("/v1/nodes/{plain}"), Some(json!([{"op": "add", "path": "/instance_name", "value": 7}])), StatusCode::BAD_REQUEST),
    ];
    for (version, method, path, body, status) in rows {
        let r = at(api, version, method.clone(), &path, body.clone()).await;
        assert_eq!(r.status, status, "{version} {method} {path} {body:?}: {}", r.body);
        assert!(!r.fault().is_empty(), "{}", r.body);
    }
    let r = at(api, "1.103", Method::GET, &format!("/v1/nodes/{plain}"), None).await;
    assert!(r.body.get("instance_name").is_none(), "{}", r.body);
    let r = at(api, "1.104", Method::GET, &format!("/v1/nodes/{plain}"), None).await;
    assert_eq!(r.body["instance_name"], Value::Null, "{}", r.body);

    // Written at create and by PATCH; listed by.
    let r = at(api, "1.104", Method::POST, "/v1/nodes", Some(json!({"driver": "fake-hardware", "name": "in-1", "instance_name": "web-1"}))).await;
    assert_eq!((r.status, &r.body["instance_name"]), (StatusCode::CREATED, &json!("web-1")), "{}", r.body);
    let r = at(api, "1.104", Method::PATCH, &format!("/v1/nodes/{plain}"), Some(json!([{"op": "add", "path": "/instance_name", "value": "x".repeat(255)}]))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = at(api, "1.104", Method::GET, "/v1/nodes?instance_name=web-1&fields=name,instance_name", None).await;
    assert_eq!(r.body["nodes"], json!([{"name": "in-1", "instance_name": "web-1", "links": r.body["nodes"][0]["links"]}]), "{}", r.body);
    let r = at(api, "1.104", Method::PATCH, &format!("/v1/nodes/{plain}"), Some(json!([{"op": "remove", "path": "/instance_name"}]))).await;
    assert_eq!((r.status, &r.body["instance_name"]), (StatusCode::OK, &Value::Null), "{}", r.body);

    // Nova's display_name names an unnamed instance, at any version; it renames no named one.
    let r = at(api, "1.1", Method::PATCH, &format!("/v1/nodes/{plain}"), Some(json!([{"op": "add", "path": "/instance_info/display_name", "value": "from-nova"}]))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = at(api, "1.104", Method::PATCH, "/v1/nodes/in-1", Some(json!([{"op": "add", "path": "/instance_info/display_name", "value": "other"}]))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = at(api, "1.104", Method::GET, "/v1/nodes?fields=name,instance_name&sort_key=name", None).await;
    let names: Vec<(&Value, &Value)> = r.body["nodes"].as_array().unwrap().iter().map(|n| (&n["name"], &n["instance_name"])).collect();
    assert_eq!(names, [(&json!("in-1"), &json!("web-1")), (&json!("in-plain"), &json!("from-nova"))], "{}", r.body);

    // A deployed instance's name goes with it at tear-down.
    let node = api.available_node(json!({"name": "in-deploy"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let r = at(api, "1.104", Method::PATCH, &format!("/v1/nodes/{uuid}"), Some(json!([{"op": "add", "path": "/instance_name", "value": "db-1"}]))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.accepted(&uuid, "active").await;
    api.wait_for(&uuid, "active").await;
    let r = at(api, "1.104", Method::GET, &format!("/v1/nodes/{uuid}"), None).await;
    assert_eq!(r.body["instance_name"], "db-1", "{}", r.body);
    api.accepted(&uuid, "deleted").await;
    api.wait_for(&uuid, "available").await;
    let r = at(api, "1.104", Method::GET, &format!("/v1/nodes/{uuid}"), None).await;
    assert_eq!(r.body["instance_name"], Value::Null, "{}", r.body);
    app.assert_no_locks().await;
}

/// health (1.109): read-only, absent below 1.109 and refused in `fields` there; null for the
/// fake hardware, whose management interface reports none (as Ironic's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn health_is_shown_from_1_109() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"driver": "fake-hardware", "name": "hl"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let r = at(api, "1.108", Method::GET, &format!("/v1/nodes/{uuid}"), None).await;
    assert!(r.body.get("health").is_none(), "{}", r.body);
    let r = at(api, "1.108", Method::GET, &format!("/v1/nodes/{uuid}?fields=health"), None).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = at(api, "1.109", Method::GET, &format!("/v1/nodes/{uuid}?fields=uuid,health"), None).await;
    assert_eq!((r.status, &r.body["health"]), (StatusCode::OK, &Value::Null), "{}", r.body);
    let r = at(api, "1.109", Method::GET, "/v1/nodes/detail", None).await;
    assert_eq!(r.body["nodes"][0]["health"], Value::Null, "{}", r.body);
    let r = at(api, "1.109", Method::PATCH, &format!("/v1/nodes/{uuid}"), Some(json!([{"op": "add", "path": "/health", "value": "OK"}]))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().starts_with("Cannot patch /health."), "{}", r.fault());
    let r = at(api, "1.109", Method::POST, "/v1/nodes", Some(json!({"driver": "fake-hardware", "health": "OK"}))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
}

/// Servicing without the ramdisk (1.108): 406 below it; from it the request is kept with the
/// node while it services (Ironic's `service_disable_ramdisk`) and forgotten when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn service_takes_disable_ramdisk_from_1_108() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(json!({"name": "svc-dr", "vendor_interface": "fake"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted(&uuid, "active").await;
    api.wait_for(&uuid, "active").await;
    let steps = json!([{"interface": "vendor", "step": "hold"}, {"interface": "vendor", "step": "log_passthrough"}]);
    let body = json!({"target": "service", "service_steps": steps, "disable_ramdisk": true});
    let r = provision_at(api, "1.107", &uuid, body.clone()).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    assert_eq!(r.fault(), "disable_ramdisk is not acceptable in this API version");
    let r = provision_at(api, "1.108", &uuid, json!({"target": "service", "service_steps": steps, "disable_ramdisk": "maybe"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = provision_at(api, "1.108", &uuid, body).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let held = api.wait_for(&uuid, "service hold").await;
    assert_eq!(held["driver_internal_info"]["service_disable_ramdisk"], true, "{held}");
    let r = provision_at(api, "1.108", &uuid, json!({"target": "unhold"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let done = api.wait_for(&uuid, "active").await;
    assert!(done["driver_internal_info"].get("service_disable_ramdisk").is_none(), "{done}");
    assert_eq!(done["last_error"], Value::Null, "{done}");
    app.assert_no_locks().await;
}

/// Abort from `wait call-back` (1.110): 406 below it; from it a `direct` deploy waiting for its
/// agent stops in `deploy failed`, saying so and naming the step it waited in, with no steps or
/// agent URL left and the lock released; the node is then torn down as any failed deploy. The
/// node's history (1.113, 1.115) records the abort with the state it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn abort_stops_a_deploy_waiting_for_its_agent() {
    let app = TestApp::builder()
        .configure(|c| c.conductor.deploy_callback_timeout = Duration::from_secs(600))
        .start()
        .await;
    let api = app.api();
    let node = api
        .available_node(json!({
            "name": "abort-wait",
            "deploy_interface": "direct",
            // Automated cleaning would boot the ramdisk and wait for an agent.
            "automated_clean": false,
            "instance_info": {
                "image_source": "http://127.0.0.1:9/image.raw",
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": "0".repeat(64),
                "image_disk_format": "raw",
            },
        }))
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted(&uuid, "active").await;
    let waiting = api.wait_for(&uuid, "wait call-back").await;
    assert_eq!(waiting["deploy_step"]["step"], "deploy", "{waiting}");
    let r = provision_at(api, "1.109", &uuid, json!({"target": "abort"})).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    assert!(r.fault().contains("1.110"), "{}", r.fault());
    assert_eq!(api.node(&uuid).await["provision_state"], "wait call-back");

    // Past the gate, the wait state's abort runs: time spent waiting shows in the history.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = provision_at(api, "1.110", &uuid, json!({"target": "abort"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let failed = api.wait_for(&uuid, "deploy failed").await;
    assert_eq!(failed["last_error"], "By request, the deploy operation was aborted during or after the completion of step \"deploy.deploy\"", "{failed}");
    assert_eq!(failed["deploy_step"], json!({}), "{failed}");
    let info = &failed["driver_internal_info"];
    assert!(info.get("deploy_steps").is_none() && info.get("agent_url").is_none(), "{failed}");
    assert!(failed["reservation"].is_null(), "{failed}");

    let path = format!("/v1/nodes/{uuid}/history?detail=True");
    let r = at(api, "1.112", Method::GET, &path, None).await;
    let entry = &r.body["history"][0];
    assert!(entry.get("project").is_none() && entry.get("state").is_none(), "{entry}");
    let r = at(api, "1.114", Method::GET, &path, None).await;
    let entry = &r.body["history"][0];
    assert_eq!(entry["project"], Value::Null, "{entry}");
    assert!(entry.get("state").is_none() && entry.get("duration_seconds").is_none(), "{entry}");
    let r = at(api, "1.115", Method::GET, &path, None).await;
    let entry = &r.body["history"][0];
    assert_eq!((&entry["event"], &entry["event_type"]), (&failed["last_error"], &json!("deploying")), "{entry}");
    assert_eq!((&entry["state"], &entry["target_provision_state"]), (&json!("wait call-back"), &json!("active")), "{entry}");
    assert!(entry["duration_seconds"].as_i64().is_some_and(|d| d >= 1), "{entry}");
    let r = at(api, "1.115", Method::GET, &format!("/v1/nodes/{uuid}/history"), None).await;
    assert!(r.body["history"][0].get("state").is_none(), "a summary has no state: {}", r.body);
    let one = r.body["history"][0]["uuid"].as_str().unwrap().to_owned();
    let r = at(api, "1.115", Method::GET, &format!("/v1/nodes/{uuid}/history/{one}"), None).await;
    assert_eq!(r.body["state"], "wait call-back", "{}", r.body);

    // The failed node stays operable.
    api.accepted(&uuid, "deleted").await;
    api.wait_for(&uuid, "available").await;
    app.assert_no_locks().await;
}
