//! BIOS settings (API 1.40, registry fields 1.74), in process ([`TestApp`]): stored by the fake BIOS
//! interface's manual clean steps (`bios.apply_configuration`, `bios.factory_reset`), listed
//! and shown with and without the registry fields, refused on `no-bios`, with the version gates
//! and bad input of Ironic's BIOS API. The firmware interface (API 1.86): the node field, the
//! drivers' fields, GET /v1/nodes/{id}/firmware and the fake `firmware.update` step.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::TestApp;

const V: &str = "1.74";

fn apply(settings: Value) -> Value {
    json!({"target": "clean", "clean_steps": [
        {"interface": "bios", "step": "apply_configuration", "args": {"settings": settings}}]})
}

/// apply_configuration stores the settings (and its next run makes them exactly the given ones:
/// created, updated, deleted), factory_reset empties them; the list, `detail`, `fields` and a
/// single setting show the registry fields from 1.74 only; their gates and bad input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn bios_settings_come_from_the_fake_bios_clean_steps() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"driver": "fake-hardware", "name": "bios-node", "bios_interface": "fake"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted(&uuid, "manage").await;
    api.wait_for(&uuid, "manageable").await;
    let get = |v: &'static str, path: String| async move { api.request_at(v, Method::GET, &path, None).await };
    let provision = format!("/v1/nodes/{uuid}/states/provision");
    let clean = |body: Value| {
        let path = provision.clone();
        async move { api.request_at(V, Method::PUT, &path, Some(body)).await }
    };
    let bios = format!("/v1/nodes/{uuid}/bios");

    let r = get("1.40", bios.clone()).await;
    assert_eq!((r.status, &r.body), (StatusCode::OK, &json!({"bios": []})));
    let r = get("1.39", bios.clone()).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    let settings = json!([
        {"name": "ProcVirtualization", "value": "Enabled", "attribute_type": "Enumeration",
         "allowable_values": ["Enabled", "Disabled"], "read_only": false, "reset_required": true},
        {"name": "BootDelay", "value": "5", "lower_bound": 0, "upper_bound": 60, "unique": false},
    ]);
    let r = clean(apply(settings)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let n = api.wait_for(&uuid, "manageable").await;
    assert!(n["last_error"].is_null(), "{n}");

    // Below 1.74 and by default: name and value (with timestamps and links), by name.
    for v in ["1.40", "1.73", V] {
        let r = get(v, bios.clone()).await;
        assert_eq!(r.status, StatusCode::OK, "{v}: {}", r.body);
        let items = r.body["bios"].as_array().unwrap();
        let names: Vec<_> = items.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["BootDelay", "ProcVirtualization"], "{v}: {}", r.body);
        assert_eq!(items[1]["value"], "Enabled");
        assert!(items[1].get("attribute_type").is_none(), "{v}: {}", r.body);
        assert!(items[1]["created_at"].is_string() && items[1]["updated_at"].is_null(), "{}", r.body);
        assert!(items[1]["links"][0]["href"].as_str().unwrap().ends_with(&format!("/v1/nodes/{uuid}/bios/ProcVirtualization")), "{}", r.body);
    }
    let r = get(V, format!("{bios}?detail=True")).await;
    let proc = &r.body["bios"][1];
    assert_eq!((&proc["attribute_type"], &proc["allowable_values"], &proc["reset_required"], &proc["read_only"]),
               (&json!("Enumeration"), &json!(["Enabled", "Disabled"]), &json!(true), &json!(false)), "{}", r.body);
    assert_eq!((&r.body["bios"][0]["upper_bound"], &r.body["bios"][0]["max_length"]), (&json!(60), &Value::Null), "{}", r.body);
    let r = get(V, format!("{bios}?fields=name,unique")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!((&r.body["bios"][0]["unique"], r.body["bios"][0].get("value")), (&json!(false), None), "{}", r.body);

    // One setting: the registry fields from 1.74.
    let r = get("1.73", format!("{bios}/ProcVirtualization")).await;
    let one = &r.body["ProcVirtualization"];
    assert_eq!((r.status, &one["value"], one.get("attribute_type")), (StatusCode::OK, &json!("Enabled"), None), "{}", r.body);
    let r = get(V, format!("{bios}/ProcVirtualization")).await;
    assert_eq!(r.body["ProcVirtualization"]["attribute_type"], "Enumeration", "{}", r.body);
    let r = get(V, format!("{bios}/Missing")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert!(r.fault().contains("Missing"), "{}", r.fault());
    let r = get("1.39", format!("{bios}/ProcVirtualization")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    // Bad queries.
    let rows = [
        ("1.73", "?detail=True", "Invalid query parameter ?detail=True received."),
        ("1.73", "?fields=name", "Invalid query parameter ?fields=name received."),
        (V, "?detail=True&fields=name", "Can not specify ?detail=True and fields in the same request."),
        (V, "?fields=name,bogus", "Field bogus is not a valid field."),
        (V, "?detail=maybe", "Invalid value for detail"),
    ];
    for (v, query, fault) in rows {
        let r = get(v, format!("{bios}{query}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{v} {query}: {}", r.body);
        assert!(r.fault().contains(fault), "{v} {query}: {}", r.fault());
    }

    // Applying again makes the settings exactly the given ones.
    let r = clean(apply(json!([{"name": "BootDelay", "value": "10"}, {"name": "Turbo", "value": null}]))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "manageable").await;
    let r = get(V, format!("{bios}?detail=True")).await;
    let items = r.body["bios"].as_array().unwrap();
    let pairs: Vec<_> = items.iter().map(|s| (s["name"].clone(), s["value"].clone())).collect();
    assert_eq!(pairs, [(json!("BootDelay"), json!("10")), (json!("Turbo"), Value::Null)], "{}", r.body);
    assert!(items[0]["updated_at"].is_string() && items[1]["updated_at"].is_null(), "{}", r.body);

    // Bad steps: 400 before anything runs.
    let step = |args: Value| json!({"target": "clean", "clean_steps": [{"interface": "bios", "step": "apply_configuration", "args": args}]});
    let rows = [
        (step(json!({})), "is missing these required arguments: settings"),
        (step(json!({"settings": [], "extra": 1})), "has these unexpected arguments: extra"),
        (step(json!({"settings": "Turbo=on"})), "must be a list of objects"),
        (step(json!({"settings": [{"value": "x"}]})), "must be a list of objects"),
        (json!({"target": "clean", "clean_steps": [{"interface": "bios", "step": "reflash"}]}), "node does not support this clean step"),
    ];
    for (body, fault) in rows {
        let r = clean(body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.body);
        assert!(r.fault().contains(fault), "{body}: {}", r.fault());
    }

    let r = clean(json!({"target": "clean", "clean_steps": [{"interface": "bios", "step": "factory_reset"}]})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "manageable").await;
    let r = get(V, bios.clone()).await;
    assert_eq!(r.body, json!({"bios": []}));

    // A node's settings go with it.
    let r = clean(apply(json!([{"name": "Turbo", "value": "on"}]))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_for(&uuid, "manageable").await;
    assert_eq!(get(V, bios.clone()).await.body["bios"][0]["value"], "on");
    let r = api.request_at(V, Method::DELETE, &format!("/v1/nodes/{uuid}"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = get(V, bios.clone()).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    app.assert_no_locks().await;
}

/// `no-bios` (the default) offers no BIOS step: a cleaning naming one is the caller's 400 and
/// the node stays manageable with no settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn no_bios_refuses_the_bios_steps() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"driver": "fake-hardware", "name": "plain", "bios_interface": "no-bios"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    assert_eq!(node["bios_interface"], "no-bios");
    api.accepted(&uuid, "manage").await;
    api.wait_for(&uuid, "manageable").await;
    for step in ["apply_configuration", "factory_reset"] {
        let body = json!({"target": "clean", "clean_steps": [{"interface": "bios", "step": step, "args": {}}]});
        let r = api.request_at(V, Method::PUT, &format!("/v1/nodes/{uuid}/states/provision"), Some(body)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{step}: {}", r.body);
        assert!(r.fault().contains("node does not support this clean step"), "{}", r.fault());
    }
    assert_eq!(api.node(&uuid).await["provision_state"], "manageable");
    let r = api.request_at(V, Method::GET, &format!("/v1/nodes/{uuid}/bios"), None).await;
    assert_eq!(r.body, json!({"bios": []}));
    app.assert_no_locks().await;
}

const FW: &str = "1.86";

/// firmware_interface is written at create and by PATCH from 1.86 (406 below, hidden below),
/// `remove` resets it to the driver's default, a bad one is 400; drivers show their firmware
/// interfaces from 1.86; /firmware is an empty list from 1.86 and 404 below; the fake
/// `firmware.update` runs in a manual cleaning, `no-firmware` refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn the_firmware_interface() {
    let app = TestApp::start().await;
    let api = app.api();
    let at = |v: &'static str, method: Method, path: String, body: Option<Value>| async move {
        api.request_at(v, method, &path, body).await
    };
    let r = at(FW, Method::POST, "/v1/nodes".into(), Some(json!({"driver": "fake-hardware", "name": "fw1", "firmware_interface": "no-firmware"}))).await;
    assert_eq!((r.status, &r.body["firmware_interface"]), (StatusCode::CREATED, &json!("no-firmware")), "{}", r.body);
    let uuid = r.body["uuid"].as_str().unwrap().to_owned();
    let r = at(FW, Method::POST, "/v1/nodes".into(), Some(json!({"driver": "fake-hardware", "name": "fw2"}))).await;
    assert_eq!(r.body["firmware_interface"], "fake", "the default: {}", r.body);
    let r = at(FW, Method::PATCH, "/v1/nodes/fw2".into(), Some(json!([{"op": "replace", "path": "/firmware_interface", "value": "no-firmware"}]))).await;
    assert_eq!(r.body["firmware_interface"], "no-firmware", "{}", r.body);
    let r = at("1.85", Method::GET, "/v1/nodes/fw1".into(), None).await;
    assert!(r.body.get("firmware_interface").is_none(), "{}", r.body);
    let r = at(FW, Method::GET, "/v1/nodes/fw1?fields=firmware_interface".into(), None).await;
    assert_eq!(r.body["firmware_interface"], "no-firmware", "{}", r.body);

    let patch = |v: &'static str, ops: Value| at(v, Method::PATCH, "/v1/nodes/fw1".into(), Some(ops));
    let r = patch(FW, json!([{"op": "remove", "path": "/firmware_interface"}])).await;
    assert_eq!((r.status, &r.body["firmware_interface"]), (StatusCode::OK, &json!("fake")), "{}", r.body);
    let r = patch(FW, json!([{"op": "replace", "path": "/firmware_interface", "value": "no-firmware"}])).await;
    assert_eq!((r.status, &r.body["firmware_interface"]), (StatusCode::OK, &json!("no-firmware")), "{}", r.body);
    let r = patch(FW, json!([{"op": "replace", "path": "/firmware_interface", "value": "fake"}])).await;
    assert_eq!((r.status, &r.body["firmware_interface"]), (StatusCode::OK, &json!("fake")), "{}", r.body);

    let rows = [
        ("1.85", Method::POST, "/v1/nodes".to_owned(), Some(json!({"driver": "fake-hardware", "firmware_interface": "fake"})), StatusCode::NOT_ACCEPTABLE, ""),
        ("1.85", Method::PATCH, "/v1/nodes/fw1".to_owned(), Some(json!([{"op": "replace", "path": "/firmware_interface", "value": "no-firmware"}])), StatusCode::NOT_ACCEPTABLE, ""),
        ("1.85", Method::GET, "/v1/nodes/fw1?fields=firmware_interface".to_owned(), None, StatusCode::NOT_ACCEPTABLE, ""),
        (FW, Method::POST, "/v1/nodes".to_owned(), Some(json!({"driver": "fake-hardware", "firmware_interface": "redfish"})), StatusCode::BAD_REQUEST, "redfish"),
        (FW, Method::PATCH, "/v1/nodes/fw1".to_owned(), Some(json!([{"op": "replace", "path": "/firmware_interface", "value": "redfish"}])), StatusCode::BAD_REQUEST, "Valid interfaces are ['fake', 'no-firmware']"),
        (FW, Method::PATCH, "/v1/nodes/fw1".to_owned(), Some(json!([{"op": "replace", "path": "/firmware_interface", "value": 7}])), StatusCode::BAD_REQUEST, "firmware_interface"),
        ("1.85", Method::GET, format!("/v1/nodes/{uuid}/firmware"), None, StatusCode::NOT_FOUND, ""),
        (FW, Method::GET, format!("/v1/nodes/{uuid}/firmware?fields=component,vendor"), None, StatusCode::BAD_REQUEST, "Fields vendor are not allowed in this API version"),
        (FW, Method::GET, format!("/v1/nodes/{uuid}/firmware?fields=bogus"), None, StatusCode::BAD_REQUEST, "Field bogus is not a valid field."),
        (FW, Method::GET, format!("/v1/nodes/{uuid}/firmware?detail=True&fields=component"), None, StatusCode::BAD_REQUEST, "Can not specify"),
        (FW, Method::GET, "/v1/nodes/nope/firmware".to_owned(), None, StatusCode::NOT_FOUND, "nope"),
    ];
    for (v, method, path, body, status, fault) in rows {
        let r = at(v, method.clone(), path.clone(), body.clone()).await;
        assert_eq!(r.status, status, "{v} {method} {path} {body:?}: {}", r.body);
        if !fault.is_empty() {
            assert!(r.fault().contains(fault), "{v} {path}: {}", r.fault());
        }
    }
    let r = at(FW, Method::GET, "/v1/nodes/fw1".into(), None).await;
    assert_eq!(r.body["firmware_interface"], "fake", "unchanged by the refused writes");

    let r = at(FW, Method::GET, format!("/v1/nodes/{uuid}/firmware"), None).await;
    assert_eq!((r.status, &r.body), (StatusCode::OK, &json!({"firmware": []})), "{}", r.body);
    let r = at(FW, Method::GET, "/v1/nodes/fw1/firmware?fields=component,current_version".into(), None).await;
    assert_eq!((r.status, &r.body), (StatusCode::OK, &json!({"firmware": []})), "{}", r.body);

    // A stored component: its versions, and `fields` picks among them (the timestamps always).
    let node_id = ferrum::db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap().id;
    let bmc = ferrum::node::firmware::FirmwareComponent {
        id: 0,
        node_id,
        component: "bmc".into(),
        initial_version: "1.0".into(),
        current_version: Some("1.2".into()),
        last_version_flashed: None,
        created_at: ferrum::node::now(),
        updated_at: None,
        vendor: Some("Contoso".into()),
        model: Some("BMC-9".into()),
        serial_number: None,
    };
    ferrum::db::firmware::insert(app.db(), &bmc).await.unwrap();
    let r = at(FW, Method::GET, format!("/v1/nodes/{uuid}/firmware"), None).await;
    let one = &r.body["firmware"][0];
    assert_eq!((&one["component"], &one["initial_version"], &one["current_version"], &one["last_version_flashed"]),
               (&json!("bmc"), &json!("1.0"), &json!("1.2"), &Value::Null), "{}", r.body);
    assert!(one["created_at"].is_string() && one["updated_at"].is_null(), "{}", r.body);
    let r = at(FW, Method::GET, format!("/v1/nodes/{uuid}/firmware?fields=current_version"), None).await;
    let one = r.body["firmware"][0].as_object().unwrap();
    let mut keys: Vec<_> = one.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["created_at", "current_version", "updated_at"], "{}", r.body);
    assert!(one.get("vendor").is_none(), "the identity fields are of 1.114: {}", r.body);
    // From 1.114 the identity of the hardware is shown by default, and `fields` may name it.
    let r = at("1.114", Method::GET, format!("/v1/nodes/{uuid}/firmware"), None).await;
    let one = &r.body["firmware"][0];
    assert_eq!((&one["vendor"], &one["model"], &one["serial_number"], &one["current_version"]),
               (&json!("Contoso"), &json!("BMC-9"), &Value::Null, &json!("1.2")), "{}", r.body);
    let r = at("1.114", Method::GET, format!("/v1/nodes/{uuid}/firmware?fields=model"), None).await;
    let mut keys: Vec<_> = r.body["firmware"][0].as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["created_at", "model", "updated_at"], "{}", r.body);
    let r = at("1.113", Method::GET, format!("/v1/nodes/{uuid}/firmware?fields=model,vendor"), None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.fault(), "Fields model, vendor are not allowed in this API version. They require at least API version 1.114.");

    // Drivers show the firmware interfaces from 1.86.
    let r = at(FW, Method::GET, "/v1/drivers/fake-hardware".into(), None).await;
    assert_eq!((&r.body["default_firmware_interface"], &r.body["enabled_firmware_interfaces"]),
               (&json!("fake"), &json!(["fake", "no-firmware"])), "{}", r.body);
    let r = at("1.85", Method::GET, "/v1/drivers/fake-hardware".into(), None).await;
    assert!(r.body.get("default_firmware_interface").is_none() && r.body.get("enabled_firmware_interfaces").is_none(), "{}", r.body);
    assert_eq!(r.body["default_bios_interface"], "fake", "{}", r.body);
    let r = at(FW, Method::GET, "/v1/drivers?detail=True".into(), None).await;
    assert_eq!(r.body["drivers"][0]["enabled_firmware_interfaces"], json!(["fake", "no-firmware"]), "{}", r.body);

    // The fake firmware's update step: accepted and run (it changes nothing); settings required;
    // no-firmware offers it not.
    for name in ["fw1", "fw2"] {
        api.accepted(name, "manage").await;
        api.wait_for(name, "manageable").await;
    }
    let update = |args: Value| json!({"target": "clean", "clean_steps": [{"interface": "firmware", "step": "update", "args": args}]});
    let clean = |name: &'static str, body: Value| at(FW, Method::PUT, format!("/v1/nodes/{name}/states/provision"), Some(body));
    let r = clean("fw1", update(json!({}))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("is missing these required arguments: settings"), "{}", r.fault());
    let r = clean("fw2", update(json!({"settings": []}))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("node does not support this clean step: firmware.update"), "{}", r.fault());
    let r = clean("fw1", update(json!({"settings": [{"component": "bmc", "url": "http://x/bmc.bin"}]}))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let n = api.wait_for("fw1", "manageable").await;
    assert!(n["last_error"].is_null(), "{n}");
    let r = at(FW, Method::GET, "/v1/nodes/fw1/firmware".into(), None).await;
    let components = r.body["firmware"].as_array().unwrap();
    assert_eq!((components.len(), &components[0]["current_version"]), (1, &json!("1.2")), "the fake update changes nothing: {}", r.body);

    // The validation of the node names its firmware interface.
    let r = at(FW, Method::GET, "/v1/nodes/fw2/validate".into(), None).await;
    assert_eq!(r.body["firmware"]["result"], Value::Null, "{}", r.body);
    app.assert_no_locks().await;
}
