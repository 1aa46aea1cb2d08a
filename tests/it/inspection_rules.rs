//! Inspection rules (API 1.96), in process ([`TestApp`]): created, listed (summary, `detail`, `fields`,
//! the `phase` filter, paging and sorting), shown, patched and deleted by the API, with Ironic's
//! validation errors; sensitive rules' conditions and actions hidden and the flag kept; absent
//! below 1.96 (GET 404, other methods 405); and the rules run when an inspection finishes:
//! matching ones set an attribute, a capability, a trait and plugin data, a `fail` action fails
//! the inspection with its message in `last_error`.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    inspection::{agent_node, app, inspect_and_wait, inventory, post, wait_state},
    util::{Api, TestApp, ipa::random_mac},
};

const V: &str = "1.96";
const RULES: &str = "/v1/inspection_rules";

fn log_action() -> Value {
    json!([{"op": "log", "args": {"msg": "hello {node.uuid}"}}])
}

async fn create(api: &Api, body: Value) -> Value {
    let r = api
        .request_at(V, Method::POST, RULES, Some(body.clone()))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{body}: {}", r.body);
    r.body
}

/// CRUD, the duplicate UUID, listing shapes, filter and paging, PATCH, sensitive rules, and
/// the resource's absence below 1.96.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn inspection_rules_crud() {
    let app = TestApp::start().await;
    let api = app.api();
    let some = "0e0b4a7e-5a44-4c10-a7a3-55d0c1b26f5e";
    for (method, path, status) in [
        (Method::GET, RULES.to_owned(), StatusCode::NOT_FOUND),
        (Method::GET, format!("{RULES}/{some}"), StatusCode::NOT_FOUND),
        (Method::POST, RULES.to_owned(), StatusCode::METHOD_NOT_ALLOWED),
        (Method::PATCH, format!("{RULES}/{some}"), StatusCode::METHOD_NOT_ALLOWED),
        (Method::DELETE, format!("{RULES}/{some}"), StatusCode::METHOD_NOT_ALLOWED),
    ] {
        let body = match method {
            Method::POST => Some(json!({"actions": log_action()})),
            Method::PATCH => Some(json!([{"op": "replace", "path": "/priority", "value": 1}])),
            _ => None,
        };
        let r = api.request_at("1.95", method.clone(), &path, body).await;
        assert_eq!(r.status, status, "{method} {path}: {}", r.body);
        assert!(r.fault().contains("The API version does not allow inspection rules"), "{}", r.fault());
    }
    let r = api.request_at("1.95", Method::GET, "/v1", None).await;
    assert!(r.body.get("inspection_rules").is_none(), "{}", r.body);
    let r = api.request_at(V, Method::GET, "/v1", None).await;
    assert!(r.body["inspection_rules"][0]["href"].as_str().unwrap().ends_with("/v1/inspection_rules/"), "{}", r.body);

    let first = create(api, json!({
        "uuid": some,
        "description": "x86 machines",
        "priority": 20,
        "conditions": [
            {"op": "eq", "args": {"values": ["{inventory[cpu][architecture]}", "x86_64"]}, "force_strings": true},
            {"op": "!is-empty", "args": ["{inventory[bmc_address]}"], "loop": [1], "multiple": "all"},
        ],
        "actions": [{"op": "add-trait", "args": {"name": "CUSTOM_X86"}, "loop": []}],
    })).await;
    assert_eq!(first["uuid"], some);
    assert_eq!((&first["phase"], &first["priority"], &first["sensitive"]), (&json!("main"), &json!(20), &json!(false)));
    assert_eq!(first["conditions"], json!([
        {"op": "eq", "args": {"values": ["{inventory[cpu][architecture]}", "x86_64"]}},
        {"op": "!is-empty", "args": ["{inventory[bmc_address]}"], "loop": [1], "multiple": "all"},
    ]), "shown as Ironic converts them");
    assert_eq!(first["actions"], json!([{"op": "add-trait", "args": {"name": "CUSTOM_X86"}}]));
    assert!(first["created_at"].is_string() && first["updated_at"].is_null(), "{first}");
    assert!(first["links"][0]["href"].as_str().unwrap().ends_with(&format!("/v1/inspection_rules/{some}")), "{first}");
    let r = api.request_at(V, Method::POST, RULES, Some(json!({"uuid": some, "actions": log_action()}))).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains(&format!("A rule with UUID {some} already exists.")), "{}", r.fault());
    let second = create(api, json!({"actions": log_action(), "priority": 90})).await;
    let second_uuid = second["uuid"].as_str().unwrap().to_owned();
    assert_eq!(second["conditions"], json!([]), "{second}");
    assert!(second["description"].is_null(), "{second}");

    // Summary, detail, fields, the phase filter, sort and paging.
    let r = api.request_at(V, Method::GET, RULES, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let items = r.body["inspection_rules"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{}", r.body);
    let mut keys: Vec<&str> = items[0].as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["description", "links", "phase", "priority", "uuid"], "{}", r.body);
    let r = api.request_at(V, Method::GET, &format!("{RULES}?detail=true"), None).await;
    assert_eq!(r.body["inspection_rules"][0]["actions"], first["actions"], "{}", r.body);
    let r = api.request_at(V, Method::GET, &format!("{RULES}/{some}?fields=priority,sensitive"), None).await;
    assert_eq!(r.body["priority"], 20, "{}", r.body);
    assert!(r.body.get("conditions").is_none() && r.body.get("links").is_some(), "{}", r.body);
    let r = api.request_at(V, Method::GET, &format!("{RULES}?phase=main&sort_key=priority&sort_dir=desc&limit=1"), None).await;
    assert_eq!(r.body["inspection_rules"][0]["uuid"], json!(second_uuid), "{}", r.body);
    let next = r.body["next"].as_str().unwrap();
    assert!(next.contains("phase=main") && next.contains(&format!("marker={second_uuid}")), "{next}");
    let path = &next[next.find("/v1/").unwrap()..];
    let r = api.request_at(V, Method::GET, path, None).await;
    assert_eq!(r.body["inspection_rules"][0]["uuid"], some, "{}", r.body);
    let r = api.request_at(V, Method::GET, &format!("{RULES}?phase=later"), None).await;
    assert_eq!(r.body["inspection_rules"], json!([]), "{}", r.body);

    // PATCH: a member of a condition, an action added, the priority.
    let patch = json!([
        {"op": "replace", "path": "/conditions/0/args/values/1", "value": "aarch64"},
        {"op": "add", "path": "/actions/-", "value": {"op": "set-attribute", "args": {"path": "extra/arch", "value": "arm"}}},
        {"op": "replace", "path": "/priority", "value": 30},
        {"op": "remove", "path": "/description"},
    ]);
    let r = api.request_at(V, Method::PATCH, &format!("{RULES}/{some}"), Some(patch)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["conditions"][0]["args"]["values"][1], "aarch64", "{}", r.body);
    assert_eq!(r.body["actions"][1]["op"], "set-attribute", "{}", r.body);
    assert_eq!((&r.body["priority"], &r.body["description"]), (&json!(30), &Value::Null), "{}", r.body);
    assert!(r.body["updated_at"].is_string(), "{}", r.body);
    for (patch, says) in [
        (json!([{"op": "replace", "path": "/priority", "value": 10000}]), "Priority must be between 0 and 9999 for user-defined rules."),
        (json!([{"op": "replace", "path": "/actions", "value": []}]), "[] should be non-empty"),
        (json!([{"op": "replace", "path": "/actions/0/op", "value": "explode"}]), "'explode' is not one of"),
        (json!([{"op": "remove", "path": "/actions/0/args/name"}]), "missing required argument(s): name"),
        (json!([{"op": "replace", "path": "/created_at", "value": "x"}]), "Cannot patch /created_at"),
    ] {
        let r = api.request_at(V, Method::PATCH, &format!("{RULES}/{some}"), Some(patch.clone())).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{patch}: {}", r.body);
        assert!(r.fault().contains(says), "{patch}: {}", r.fault());
    }

    // Sensitive: conditions and actions hidden everywhere, and the flag stays.
    let secret = create(api, json!({"sensitive": true, "actions": [{"op": "set-attribute", "args": {"path": "driver_info/password", "value": "s3cret"}}]})).await;
    assert_eq!((&secret["conditions"], &secret["actions"]), (&Value::Null, &Value::Null), "{secret}");
    let secret_uuid = secret["uuid"].as_str().unwrap();
    let r = api.request_at(V, Method::GET, &format!("{RULES}/{secret_uuid}"), None).await;
    assert_eq!((&r.body["sensitive"], &r.body["actions"]), (&json!(true), &Value::Null), "{}", r.body);
    let r = api.request_at(V, Method::GET, &format!("{RULES}?detail=true"), None).await;
    let listed = r.body["inspection_rules"].as_array().unwrap().iter().find(|i| i["uuid"] == json!(secret_uuid)).cloned().unwrap();
    assert!(listed["actions"].is_null() && listed["conditions"].is_null(), "{listed}");
    assert!(!r.body.to_string().contains("s3cret"), "{}", r.body);
    let r = api.request_at(V, Method::PATCH, &format!("{RULES}/{secret_uuid}"), Some(json!([{"op": "replace", "path": "/sensitive", "value": false}]))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("Inspection rules cannot have the sensitive flag unset."), "{}", r.fault());
    let r = api.request_at(V, Method::PATCH, &format!("{RULES}/{second_uuid}"), Some(json!([{"op": "replace", "path": "/sensitive", "value": true}]))).await;
    assert_eq!((r.status, &r.body["actions"]), (StatusCode::OK, &Value::Null), "{}", r.body);

    // DELETE.
    let r = api.request_at(V, Method::DELETE, &format!("{RULES}/{second_uuid}"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at(V, Method::GET, &format!("{RULES}/{second_uuid}"), None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert!(r.fault().contains(&format!("Rule {second_uuid} could not be found.")), "{}", r.fault());
}

/// Bad input to inspection rules: each a 4xx in Ironic's envelope, nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn bad_inspection_rule_input_is_refused() {
    let app = TestApp::start().await;
    let api = app.api();
    let ok = log_action();
    let missing = "0e0b4a7e-5a44-4c10-a7a3-55d0c1b26f5e";
    let post = |body: Value| (Method::POST, RULES.to_owned(), body);
    type Row<'a> = ((Method, String, Value), StatusCode, &'a str);
    let rows: Vec<Row<'_>> = vec![
        (post(json!({})), StatusCode::BAD_REQUEST, "Schema error: 'actions' is a required property"),
        (post(json!({"actions": []})), StatusCode::BAD_REQUEST, "Schema error: [] should be non-empty"),
        (post(json!({"actions": ok, "name": "x"})), StatusCode::BAD_REQUEST, "Additional properties are not allowed ('name' was unexpected)"),
        (post(json!({"actions": [{"op": "reboot", "args": {}}]})), StatusCode::BAD_REQUEST, "'reboot' is not one of ['fail', 'log', 'set-attribute'"),
        (post(json!({"actions": ok, "conditions": [{"op": "approx", "args": {}}]})), StatusCode::BAD_REQUEST, "'approx' is not one of ['eq', 'lt', 'gt'"),
        (post(json!({"actions": ok, "conditions": [{"op": "!!eq", "args": {}}]})), StatusCode::BAD_REQUEST, "'!!eq' is not one of"),
        (post(json!({"actions": [{"op": "log", "args": 5}]})), StatusCode::BAD_REQUEST, "5 is not of type 'array', 'object'"),
        (post(json!({"actions": [{"op": "log"}]})), StatusCode::BAD_REQUEST, "'args' is a required property"),
        (post(json!({"actions": ok, "conditions": [{"op": "eq", "args": {"values": [1]}, "multiple": "some"}]})), StatusCode::BAD_REQUEST, "'some' is not one of ['any', 'all', 'first', 'last']"),
        (post(json!({"actions": [{"op": "set-attribute", "args": {"path": "extra/x"}}]})), StatusCode::BAD_REQUEST, "Inspection rule validation failed. Reason: missing required argument(s): value"),
        (post(json!({"actions": ok, "conditions": [{"op": "matches", "args": {"value": "x", "pattern": "y"}}]})), StatusCode::BAD_REQUEST, "missing required argument(s): regex; unexpected argument(s): pattern"),
        (post(json!({"actions": [{"op": "set-capability", "args": ["only-the-name"]}]})), StatusCode::BAD_REQUEST, "Not enough arguments provided. Missing: value"),
        (post(json!({"actions": ok, "priority": -1})), StatusCode::BAD_REQUEST, "Schema error: -1 is less than the minimum of 0"),
        (post(json!({"actions": ok, "priority": 10000})), StatusCode::BAD_REQUEST, "Priority must be between 0 and 9999 for user-defined rules."),
        (post(json!({"actions": ok, "priority": "high"})), StatusCode::BAD_REQUEST, "'high' is not of type 'integer'"),
        (post(json!({"actions": ok, "phase": "early"})), StatusCode::BAD_REQUEST, "Invalid phase: early. Valid phases are: main"),
        (post(json!({"actions": ok, "phase": "early", "priority": 10000})), StatusCode::BAD_REQUEST, "Multiple validation errors occurred"),
        (post(json!({"actions": ok, "sensitive": "yes"})), StatusCode::BAD_REQUEST, "'yes' is not of type 'boolean', 'null'"),
        (post(json!({"actions": ok, "description": "d".repeat(256)})), StatusCode::BAD_REQUEST, "is too long"),
        (post(json!({"actions": ok, "uuid": "not-a-uuid"})), StatusCode::BAD_REQUEST, "uuid"),
        ((Method::GET, format!("{RULES}/{missing}"), Value::Null), StatusCode::NOT_FOUND, "could not be found"),
        ((Method::GET, format!("{RULES}/not-a-uuid"), Value::Null), StatusCode::BAD_REQUEST, "Schema error: 'not-a-uuid' is not a 'uuid'"),
        ((Method::PATCH, format!("{RULES}/{missing}"), json!([{"op": "replace", "path": "/priority", "value": 1}])), StatusCode::NOT_FOUND, "could not be found"),
        ((Method::DELETE, format!("{RULES}/{missing}"), Value::Null), StatusCode::NOT_FOUND, "could not be found"),
        ((Method::GET, format!("{RULES}?sort_key=actions"), Value::Null), StatusCode::BAD_REQUEST, "sort_key"),
        ((Method::GET, format!("{RULES}?fields=name"), Value::Null), StatusCode::BAD_REQUEST, "Field name is not a valid field."),
        ((Method::GET, format!("{RULES}?detail=true&fields=uuid"), Value::Null), StatusCode::BAD_REQUEST, "Can not specify ?detail=True and fields"),
        ((Method::GET, format!("{RULES}?limit=0"), Value::Null), StatusCode::BAD_REQUEST, "limit"),
        ((Method::GET, format!("{RULES}?marker={missing}"), Value::Null), StatusCode::NOT_FOUND, "could not be found"),
    ];
    for ((method, path, body), status, says) in rows {
        let body_sent = (!body.is_null()).then(|| body.clone());
        let r = api.request_at(V, method.clone(), &path, body_sent).await;
        assert_eq!(r.status, status, "{method} {path} {body}: {}", r.body);
        assert!(r.fault().contains(says), "{method} {path} {body}: {}", r.fault());
    }
    let r = api.request_at(V, Method::GET, RULES, None).await;
    assert_eq!(r.body["inspection_rules"], json!([]), "nothing was stored: {}", r.body);
}

/// The rules of the `main` phase run when posted inspection data finishes an inspection, from
/// the highest priority down: matching rules set an attribute (filled in from the inventory), a
/// capability, a trait and plugin data, a rule whose condition does not hold does nothing; then
/// a matching `fail` rule fails the next inspection, its message in `last_error`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn rules_run_when_an_inspection_finishes() {
    let app = app(120).await;
    let api = app.api();
    let mac = random_mac();
    let uuid = agent_node(api, "rules-node", None).await;
    create(api, json!({
        "description": "arm machines",
        "priority": 50,
        "conditions": [
            {"op": "eq", "args": {"values": ["{inventory[cpu][architecture]}", "aarch64"]}},
            {"op": "in-net", "args": {"address": "{item[ipv4_address]}", "subnet": "10.0.0.0/24"}, "loop": [{"ipv4_address": "{inventory[interfaces][0][ipv4_address]}"}]},
            {"op": "!is-empty", "args": {"value": "{inventory[bmc_address]}"}},
            {"op": "gt", "args": {"values": ["{inventory[memory][physical_mb]}", "1024"]}},
        ],
        "actions": [
            {"op": "set-attribute", "args": {"path": "extra/bmc", "value": "{inventory[bmc_address]}"}},
            {"op": "set-attribute", "args": {"path": "extra/order", "value": "first"}},
            {"op": "set-capability", "args": {"name": "boot_mode", "value": "{inventory[boot][current_boot_mode]}"}},
            {"op": "add-trait", "args": {"name": "CUSTOM_ARM"}},
            {"op": "set-plugin-data", "args": {"path": "rules.applied", "value": "{node.name}"}},
        ],
    })).await;
    create(api, json!({
        "priority": 10,
        "conditions": [{"op": "is-true", "args": {"value": "{plugin_data[rules][applied]}"}}],
        "actions": [{"op": "set-attribute", "args": {"path": "extra/order", "value": "second"}}],
    })).await;
    create(api, json!({
        "priority": 5,
        "conditions": [{"op": "eq", "args": {"values": ["{inventory[cpu][architecture]}", "x86_64"]}}],
        "actions": [{"op": "fail", "args": {"msg": "not for x86"}}],
    })).await;

    inspect_and_wait(api, &uuid).await;
    let r = post(api, "1.84", &format!("?node_uuid={uuid}"), json!({"inventory": inventory(&mac, "10.0.0.5")})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = wait_state(api, &uuid, "manageable", None).await;
    assert!(node["last_error"].is_null(), "{node}");
    assert_eq!(node["extra"]["bmc"], "0.0.0.0", "{node}");
    assert_eq!(node["extra"]["order"], "first", "is-true reads the text 'rules-node' as false, so the second rule did not run: {node}");
    assert_eq!(node["properties"]["capabilities"], "boot_mode:uefi", "{node}");
    assert_eq!(node["properties"]["cpu_arch"], "aarch64", "the hooks' change is kept: {node}");
    let r = api.request_at("1.37", Method::GET, &format!("/v1/nodes/{uuid}/traits"), None).await;
    assert_eq!(r.body["traits"], json!(["CUSTOM_ARM"]), "{}", r.body);
    let r = api.request_at("1.81", Method::GET, &format!("/v1/nodes/{uuid}/inventory"), None).await;
    assert_eq!(r.body["plugin_data"]["rules"]["applied"], "rules-node", "{}", r.body);

    // A matching `fail` rule fails the inspection; nothing else the rules did is kept.
    create(api, json!({
        "priority": 100,
        "conditions": [{"op": "matches", "args": {"value": "{inventory[cpu][architecture]}", "regex": "aarch\\d+"}}],
        "actions": [
            {"op": "set-attribute", "args": {"path": "extra/doomed", "value": true}},
            {"op": "fail", "args": {"msg": "no ARM today"}},
        ],
    })).await;
    inspect_and_wait(api, &uuid).await;
    let r = post(api, "1.84", &format!("?node_uuid={uuid}"), json!({"inventory": inventory(&mac, "10.0.0.5")})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let failed = wait_state(api, &uuid, "inspect failed", None).await;
    assert_eq!(failed["last_error"], "Failed to finish inspection: Failed to inspect hardware. Reason: no ARM today", "{failed}");
    assert!(failed["extra"].get("doomed").is_none(), "{failed}");
    app.assert_no_locks().await;
}
