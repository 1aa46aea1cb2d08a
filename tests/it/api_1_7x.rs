//! API 1.69-1.84: the deploy request's own steps (1.69), manual cleaning without the ramdisk
//! (1.70), the agent's status in its heartbeat (1.72), the `deploy` and `undeploy` verbs (1.73),
//! the boot mode and secure boot fields and setters (1.75, 1.76), `fields` on drivers (1.77) and
//! allocations that prefer the node of their name (1.79), with their version gates and bad
//! input.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Api, Reply, TestApp};

fn step(name: &str, priority: Value) -> Value {
    json!({"interface": "deploy", "step": name, "args": {}, "priority": priority})
}

/// PUT .../states/provision at `version` with `body`.
async fn provision_at(api: &Api, version: &str, uuid: &str, body: Value) -> Reply {
    api.request_at(
        version,
        Method::PUT,
        &format!("/v1/nodes/{uuid}/states/provision"),
        Some(body),
    )
    .await
}

/// A node deploying with `direct`: it waits for its agent in `wait call-back` after the core step.
fn direct_node(name: &str) -> Value {
    json!({
        "name": name,
        "deploy_interface": "direct",
        // Automated cleaning would boot the ramdisk and wait for an agent.
        "automated_clean": false,
        "instance_info": {
            "image_source": "http://images.example/ubuntu.qcow2",
            "image_os_hash_algo": "sha256",
            "image_os_hash_value": "9f2b1c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9",
        },
    })
}

/// deploy_steps (1.69): 406 below it, 400 with another verb or a step Ironic's schema refuses,
/// 400 from the conductor for a step the driver does not offer or the core step moved (the node
/// untouched); the request's steps override the driver's (`direct`: reordered and disabled steps
/// are what the deploy runs), and disabling the fake deploy's only step fails the deploy as
/// Ironic fails a deploy without steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn deploy_steps_of_the_request_decide_the_deploy() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(json!({"name": "ds-fake"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let with = |target: &str, steps: Value| json!({"target": target, "deploy_steps": steps});
    let rows = [
        ("1.68", with("active", json!([step("deploy", json!(0))])), StatusCode::NOT_ACCEPTABLE, "The minimal required API version should be 1.69"),
        ("1.69", with("deleted", json!([step("deploy", json!(0))])), StatusCode::BAD_REQUEST, "\"deploy_steps\" is only valid when setting target provision state to active or rebuild"),
        ("1.69", with("active", json!("deploy.deploy")), StatusCode::BAD_REQUEST, "Invalid deploy_steps: "),
        ("1.69", with("active", json!([{"interface": "boot", "step": "s", "args": {}, "priority": 1}])), StatusCode::BAD_REQUEST, "Invalid deploy_steps: a step's interface must be one of"),
        ("1.69", with("active", json!([{"interface": "deploy", "step": "", "args": {}, "priority": 1}])), StatusCode::BAD_REQUEST, "Invalid deploy_steps: "),
        ("1.69", with("active", json!([{"interface": "deploy", "step": "deploy", "args": [], "priority": 0}])), StatusCode::BAD_REQUEST, "Invalid deploy_steps: a step's args must be an object"),
        ("1.69", with("active", json!([{"interface": "deploy", "step": "deploy", "args": {}, "priority": -1}])), StatusCode::BAD_REQUEST, "Invalid deploy_steps: a step's priority must be an integer"),
        ("1.69", with("active", json!([{"interface": "deploy", "step": "deploy", "args": {}}])), StatusCode::BAD_REQUEST, "'priority' is a required property"),
        ("1.69", with("active", json!([{"interface": "deploy", "step": "deploy", "args": {}, "priority": 0, "x": 1}])), StatusCode::BAD_REQUEST, "Additional properties are not allowed"),
        ("1.69", with("active", json!([{"interface": "raid", "step": "create_configuration", "args": {}, "priority": 10}])), StatusCode::BAD_REQUEST, "node does not support this deploy step: raid.create_configuration"),
        ("1.69", with("active", json!([step("deploy", json!(50))])), StatusCode::BAD_REQUEST, "is a core step and cannot be overridden"),
        ("1.69", with("active", json!([{"interface": "deploy", "step": "deploy", "args": {"force": true}, "priority": 0}])), StatusCode::BAD_REQUEST, "has these unexpected arguments: force"),
        ("1.69", with("active", json!([step("deploy", json!(0)), step("deploy", json!(0))])), StatusCode::BAD_REQUEST, "duplicate deploy steps for deploy.deploy"),
    ];
    for (version, body, status, fault) in rows {
        let r = provision_at(api, version, &uuid, body.clone()).await;
        assert_eq!(r.status, status, "{version} {body}: {}", r.body);
        assert!(r.fault().contains(fault), "{version} {body}: {}", r.fault());
    }
    let n = api.node(&uuid).await;
    assert_eq!((&n["provision_state"], &n["reservation"]), (&json!("available"), &Value::Null), "{n}");
    assert_eq!(n["driver_internal_info"].get("user_deploy_steps"), None, "{n}");

    // The fake deploy's only step disabled: accepted, then failed as Ironic fails it.
    let r = provision_at(api, "1.69", &uuid, with("active", json!([step("deploy", json!("0"))]))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let failed = api.wait_for(&uuid, "deploy failed").await;
    assert_eq!(failed["last_error"], "No deploy steps returned by the driver", "{failed}");
    let info = &failed["driver_internal_info"];
    assert!(info.get("deploy_steps").is_none() && info.get("user_deploy_steps").is_none(), "{failed}");
    // An empty list asks for nothing, at any version: the driver's steps run.
    let r = provision_at(api, "1.68", &uuid, with("rebuild", json!([]))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "active").await;

    // direct: the request's steps reorder and disable the driver's, shown while the deploy runs.
    let node = api.available_node(direct_node("ds-direct")).await;
    let direct = node["uuid"].as_str().unwrap().to_owned();
    let asked = json!([step("write_image", json!(90)), step("switch_to_tenant_network", json!(0))]);
    let r = provision_at(api, "1.69", &direct, with("active", json!([
        {"interface": "deploy", "step": "write_image", "args": {"image": "x"}, "priority": 90}]))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("deploy step deploy.write_image has these unexpected arguments: image"), "{}", r.fault());
    let r = provision_at(api, "1.69", &direct, with("active", asked.clone())).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let waiting = api.wait_for(&direct, "wait call-back").await;
    let steps: Vec<(String, u64)> = waiting["driver_internal_info"]["deploy_steps"].as_array().unwrap().iter()
        .map(|s| (s["step"].as_str().unwrap().to_owned(), s["priority"].as_u64().unwrap()))
        .collect();
    let expected = [("deploy", 100), ("write_image", 90), ("prepare_instance_boot", 60), ("tear_down_agent", 40), ("boot_instance", 20)];
    assert_eq!(steps, expected.map(|(s, p)| (s.to_owned(), p)), "{waiting}");
    assert_eq!(waiting["driver_internal_info"]["user_deploy_steps"], asked, "{waiting}");
    assert_eq!(waiting["deploy_step"]["step"], "deploy", "{waiting}");
    app.assert_no_locks().await;
}

/// disable_ramdisk (1.70) on manual cleaning: 406 below 1.70, 400 with another verb or when not
/// a boolean; accepted, the cleaning ends in manageable and forgets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn manual_cleaning_may_disable_the_ramdisk() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(json!({"name": "dr-node"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted(&uuid, "manage").await;
    api.wait_for(&uuid, "manageable").await;
    let steps = json!([{"interface": "deploy", "step": "erase_devices_metadata", "args": {}}]);
    let clean = |disable: Value| json!({"target": "clean", "clean_steps": steps, "disable_ramdisk": disable});
    let rows = [
        ("1.69", clean(json!(true)), StatusCode::NOT_ACCEPTABLE, "disable_ramdisk is not acceptable in this API version"),
        ("1.70", json!({"target": "provide", "disable_ramdisk": true}), StatusCode::BAD_REQUEST, "disable_ramdisk is supported only with manual cleaning or servicing"),
        ("1.70", clean(json!("maybe")), StatusCode::BAD_REQUEST, "Invalid value for disable_ramdisk"),
        ("1.70", clean(json!(1)), StatusCode::BAD_REQUEST, "Invalid value for disable_ramdisk"),
    ];
    for (version, body, status, fault) in rows {
        let r = provision_at(api, version, &uuid, body.clone()).await;
        assert_eq!(r.status, status, "{version} {body}: {}", r.body);
        assert!(r.fault().contains(fault), "{version} {body}: {}", r.fault());
    }
    assert_eq!(api.node(&uuid).await["provision_state"], "manageable");
    for disable in [json!(true), json!("False"), Value::Null] {
        let r = provision_at(api, "1.70", &uuid, clean(disable.clone())).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{disable}: {}", r.body);
        let n = api.wait_for(&uuid, "manageable").await;
        assert!(n["driver_internal_info"].get("cleaning_disable_ramdisk").is_none(), "{n}");
    }
    app.assert_no_locks().await;
}

/// With disable_ramdisk, manual cleaning does not prepare the ramdisk (the fake deploy's
/// `prepare_cleaning`, held at the gate, is never reached); without it, it does, and the node
/// shows `cleaning_disable_ramdisk: false` meanwhile, as Ironic records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleaning_without_ramdisk_does_not_prepare_it() {
    use axum::http::Method;
    let app = crate::util::TestApp::builder().gate_deploys().start().await;
    let node = app.available_node(json!({"name": "dr"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    app.accepted(&uuid, "manage").await;
    app.wait_for(&uuid, "manageable").await;
    let path = format!("/v1/nodes/{uuid}/states/provision");
    let steps = json!([{"interface": "deploy", "step": "erase_devices", "args": {}}]);
    let r = app
        .request_at(
            "1.70",
            Method::PUT,
            &path,
            Some(json!({"target": "clean", "clean_steps": steps, "disable_ramdisk": true})),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    let n = app.wait_for(&uuid, "manageable").await;
    assert!(
        n["driver_internal_info"]
            .get("cleaning_disable_ramdisk")
            .is_none(),
        "{n}"
    );

    let r = app
        .request_at(
            "1.70",
            Method::PUT,
            &path,
            Some(json!({"target": "clean", "clean_steps": steps})),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(app.gate().reached().await, uuid);
    let n = app.node(&uuid).await;
    assert_eq!(
        (
            &n["provision_state"],
            &n["driver_internal_info"]["cleaning_disable_ramdisk"]
        ),
        (&json!("cleaning"), &json!(false)),
        "{n}"
    );
    app.gate().release(1);
    let n = app.wait_for(&uuid, "manageable").await;
    assert!(
        n["driver_internal_info"]
            .get("cleaning_disable_ramdisk")
            .is_none(),
        "{n}"
    );
}

/// agent_status and agent_status_message (1.72) in a heartbeat: 400 below 1.72 and for a status
/// other than start, end or error; from 1.72 recorded in driver_internal_info as Ironic records
/// them, and a heartbeat with a status needs no agent version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn a_heartbeat_reports_the_agents_status() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(direct_node("hb-status")).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted(&uuid, "active").await;
    api.wait_for(&uuid, "wait call-back").await;
    let r = api.request_at("1.72", Method::GET, &format!("/v1/lookup?node_uuid={uuid}"), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let token = r.body["config"]["agent_token"].as_str().unwrap().to_owned();
    let url = "http://127.0.0.1:9";
    let hb = format!("/v1/heartbeat/{uuid}");
    let beat = |extra: Value| {
        let mut body = json!({"callback_url": url, "agent_token": token, "agent_version": "10.0.0"});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let rows = [
        ("1.71", beat(json!({"agent_status": "start"})), StatusCode::BAD_REQUEST, "Fields \"agent_status\" and \"agent_status_message\" not recognised."),
        ("1.71", beat(json!({"agent_status_message": "hello"})), StatusCode::BAD_REQUEST, "Fields \"agent_status\" and \"agent_status_message\" not recognised."),
        ("1.72", beat(json!({"agent_status": "running"})), StatusCode::BAD_REQUEST, "Agent status is invalid. Valid states are start,end,error."),
        ("1.72", beat(json!({"agent_status": 1})), StatusCode::BAD_REQUEST, "Expected string for agent_status: 1"),
        ("1.72", beat(json!({"agent_status": "end", "agent_status_message": ["x"]})), StatusCode::BAD_REQUEST, "Expected string for agent_status_message"),
    ];
    for (version, body, status, fault) in rows {
        let r = api.request_at(version, Method::POST, &hb, Some(body.clone())).await;
        assert_eq!(r.status, status, "{version} {body}: {}", r.body);
        assert!(r.fault().contains(fault), "{version} {body}: {}", r.fault());
    }
    let info = api.node(&uuid).await["driver_internal_info"].clone();
    assert!(info.get("agent_url").is_none() && info.get("agent_status").is_none(), "{info}");

    let mut body = beat(json!({"agent_status": "start", "agent_status_message": "Agent started"}));
    body.as_object_mut().unwrap().remove("agent_version");
    let r = api.request_at("1.72", Method::POST, &hb, Some(body)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let info = api.node(&uuid).await["driver_internal_info"].clone();
    assert_eq!((&info["agent_status"], &info["agent_status_message"], &info["agent_url"]),
        (&json!("start"), &json!("Agent started"), &json!(url)), "{info}");
    // The deploy goes on from the heartbeat and fails (nothing listens at the agent's URL).
    api.wait_for(&uuid, "deploy failed").await;
    app.assert_no_locks().await;
}

/// The deploy and undeploy verbs (1.73) are `active` and `deleted`, both gated by the word the
/// client sent (Ironic forgets to gate undeploy); deploy takes deploy_steps and a configdrive
/// as active does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn deploy_and_undeploy_are_aliases_from_1_73() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(json!({"name": "verbs"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    for target in ["deploy", "undeploy"] {
        let r = provision_at(api, "1.72", &uuid, json!({"target": target})).await;
        assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{target}: {}", r.body);
    }
    let r = provision_at(api, "1.73", &uuid, json!({"target": "undeploy"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "undeploy from available: {}", r.body);
    let r = provision_at(api, "1.73", &uuid, json!({"target": "deploy", "configdrive": {"meta_data": {"hostname": "h"}},
        "deploy_steps": [step("deploy", json!(0))]})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let failed = api.wait_for(&uuid, "deploy failed").await;
    assert_eq!(failed["last_error"], "No deploy steps returned by the driver", "the steps reached the deploy: {failed}");
    assert!(failed["instance_info"]["configdrive"].is_string(), "the configdrive was built: {failed}");
    let r = provision_at(api, "1.73", &uuid, json!({"target": "deploy"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "active").await;
    let r = provision_at(api, "1.73", &uuid, json!({"target": "undeploy"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "available").await;
    app.assert_no_locks().await;
}

/// boot_mode and secure_boot (1.75, read-only, null until set) and their setters (1.76): 404
/// below 1.76, 400 for a bad target, 202 with Location, the node's fields written by the
/// conductor after the fake management's call; a refused combination is recorded in last_error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn boot_mode_and_secure_boot_are_set_through_the_conductor() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(json!({"name": "bm"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let put = |version: &'static str, what: &'static str, target: Value| {
        let path = format!("/v1/nodes/{uuid}/states/{what}");
        async move { api.request_at(version, Method::PUT, &path, Some(json!({"target": target}))).await }
    };
    let n = api.request_at("1.75", Method::GET, &format!("/v1/nodes/{uuid}"), None).await.body;
    assert_eq!((&n["boot_mode"], &n["secure_boot"]), (&Value::Null, &Value::Null), "{n}");
    let old = api.request_at("1.74", Method::GET, &format!("/v1/nodes/{uuid}"), None).await.body;
    assert!(old.get("boot_mode").is_none() && old.get("secure_boot").is_none(), "{old}");
    let r = api.request_at("1.75", Method::PATCH, &format!("/v1/nodes/{uuid}"),
        Some(json!([{"op": "replace", "path": "/boot_mode", "value": "uefi"}]))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "read-only: {}", r.body);
    let rows = [
        ("1.75", "boot_mode", json!("uefi"), StatusCode::NOT_FOUND, "This endpoint is supported starting with the API version 1.76"),
        ("1.75", "secure_boot", json!(true), StatusCode::NOT_FOUND, "This endpoint is supported starting with the API version 1.76"),
        ("1.76", "boot_mode", json!("efi"), StatusCode::BAD_REQUEST, "Invalid boot mode efi requested for node. Allowed boot modes are: bios, uefi"),
        ("1.76", "boot_mode", json!(1), StatusCode::BAD_REQUEST, "Expected string for target"),
        ("1.76", "secure_boot", json!("maybe"), StatusCode::BAD_REQUEST, "Invalid value for target"),
        ("1.76", "secure_boot", Value::Null, StatusCode::BAD_REQUEST, "Missing mandatory parameter: target"),
    ];
    for (version, what, target, status, fault) in rows {
        let r = put(version, what, target.clone()).await;
        assert_eq!(r.status, status, "{version} {what} {target}: {}", r.body);
        assert!(r.fault().contains(fault), "{version} {what} {target}: {}", r.fault());
    }
    let r = put("1.76", "boot_mode", json!("uefi")).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let r = put("1.76", "secure_boot", json!("true")).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let states = api.request_at("1.75", Method::GET, &format!("/v1/nodes/{uuid}/states"), None).await.body;
    assert_eq!((&states["boot_mode"], &states["secure_boot"]), (&json!("uefi"), &json!(true)), "{states}");
    let states = api.request_at("1.74", Method::GET, &format!("/v1/nodes/{uuid}/states"), None).await.body;
    assert!(states.get("boot_mode").is_none(), "{states}");
    // Legacy BIOS with secure boot on: refused by the fake machine, recorded in last_error.
    let r = put("1.76", "boot_mode", json!("bios")).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let n = api.request_at("1.76", Method::GET, &format!("/v1/nodes/{uuid}"), None).await.body;
    assert_eq!(n["boot_mode"], "uefi", "{n}");
    assert!(n["last_error"].as_str().unwrap().starts_with("Failed to change boot mode to 'bios: "), "{n}");
    let r = put("1.76", "secure_boot", json!(false)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let r = put("1.76", "boot_mode", json!("bios")).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let n = api.request_at("1.76", Method::GET, &format!("/v1/nodes/{uuid}"), None).await.body;
    assert_eq!((&n["boot_mode"], &n["secure_boot"], &n["last_error"]), (&json!("bios"), &json!(false), &Value::Null), "{n}");
    // Secure boot is not offered in legacy BIOS mode: UnsupportedDriverExtension, recorded.
    let r = put("1.76", "secure_boot", json!(true)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let n = api.request_at("1.76", Method::GET, &format!("/v1/nodes/{uuid}"), None).await.body;
    assert!(n["last_error"].as_str().unwrap().contains("does not support set_secure_boot_state"), "{n}");
    assert_eq!(n["secure_boot"], false, "{n}");
    app.assert_no_locks().await;
}

/// fields (1.77) on GET /v1/drivers and /v1/drivers/{name}: 406 below it, unknown names 400,
/// the named fields and links kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_fields_select_what_is_shown() {
    use axum::http::Method;
    let app = crate::util::TestApp::start().await;
    for path in [
        "/v1/drivers?fields=name",
        "/v1/drivers/fake-hardware?fields=name",
    ] {
        let r = app.request_at("1.76", Method::GET, path, None).await;
        assert_eq!(r.status, 406, "{path}: {}", r.body);
    }
    let r = app
        .request_at("1.77", Method::GET, "/v1/drivers?fields=name,hosts", None)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut keys: Vec<&str> = r.body["drivers"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["hosts", "links", "name"], "{}", r.body);
    let r = app
        .request_at(
            "1.77",
            Method::GET,
            "/v1/drivers/fake-hardware?fields=default_deploy_interface",
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body.as_object().unwrap().len(), 2, "{}", r.body);
    assert_eq!(r.body["default_deploy_interface"], "fake", "{}", r.body);
    for path in [
        "/v1/drivers?fields=name,bogus",
        "/v1/drivers?fields=enabled_deploy_interfaces",
        "/v1/drivers/fake-hardware?fields=bogus",
    ] {
        let r = app.request_at("1.77", Method::GET, path, None).await;
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert!(r.fault().contains("are not valid"), "{path}: {}", r.fault());
    }
    let r = app
        .request_at(
            "1.77",
            Method::GET,
            "/v1/drivers?detail=True&fields=name",
            None,
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
}

/// Allocations (announced 1.79) try the candidate named like the allocation first, at every
/// version, as Ironic's conductor does (the version only marks the behaviour).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn an_allocation_prefers_the_node_of_its_name() {
    let app = TestApp::start().await;
    let api = app.api();
    for name in ["compute-0", "compute-1", "compute-2", "compute-3"] {
        api.available_node(json!({"name": name, "resource_class": "compute"})).await;
    }
    for name in ["compute-2", "compute-0", "compute-3", "compute-1"] {
        let r = api.request_at("1.79", Method::POST, "/v1/allocations", Some(json!({"name": name, "resource_class": "compute"}))).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let uuid = r.body["uuid"].as_str().unwrap().to_owned();
        let a = api.wait_allocation("1.79", &uuid).await;
        assert_eq!(a["state"], "active", "{a}");
        let node = api.node(a["node_uuid"].as_str().unwrap()).await;
        assert_eq!(node["name"], name, "{a}");
    }
    app.assert_no_locks().await;
}
