//! The REST API's edges: bad input gets the right code in Ironic's envelope and changes nothing;
//! maintenance, validate, drivers and listings behave as Ironic's do. In process ([`TestApp`]).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::TestApp;

/// Sends a raw request (any body, content type and version header).
async fn raw(
    base: &str,
    method: Method,
    path: &str,
    content_type: Option<&str>,
    version: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, Value, reqwest::header::HeaderMap) {
    let client = reqwest::Client::new();
    let mut req = client.request(method, format!("{base}{path}")).body(body);
    if let Some(ct) = content_type {
        req = req.header("Content-Type", ct);
    }
    if let Some(v) = version {
        req = req.header("X-OpenStack-Ironic-API-Version", v);
    }
    let resp = req.send().await.expect("HTTP request");
    let status = resp.status();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body, headers)
}

/// (method, path, content type, version, body, expected status, text the message contains)
type Case<'a> = (
    Method,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    Vec<u8>,
    u16,
    &'a str,
);

/// The message of either of Ironic's error envelopes: a handler's (`faultstring`) or, for a bad
/// microversion, the web framework's (`description`).
fn faultstring(body: &Value) -> String {
    let text = body["error_message"]
        .as_str()
        .unwrap_or_else(|| panic!("not Ironic's envelope: {body}"));
    let inner: Value = serde_json::from_str(text).expect("error_message is JSON text");
    if let Some(description) = inner.get("description") {
        assert_eq!(inner["code"], 406, "{inner}");
        assert_eq!(inner["title"], "Not Acceptable", "{inner}");
        return description.as_str().expect("description").to_owned();
    }
    assert!(inner["faultcode"] == "Client" || inner["faultcode"] == "Server");
    assert_eq!(inner["debuginfo"], Value::Null);
    inner["faultstring"]
        .as_str()
        .expect("faultstring")
        .to_owned()
}

/// Each bad request gets its status and a message in the envelope, and the node is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn bad_input_is_refused_in_the_envelope_and_changes_nothing() {
    let app = TestApp::start().await;
    let api = app.api();
    let base = api.base.clone();
    let before = api
        .available_node(json!({"name": "target", "extra": {"keep": 1}}))
        .await;
    let json_ct = Some("application/json");
    let v = Some("1.31");
    let huge = format!("{{\"driver\": \"fake-hardware\", \"extra\": {{\"x\": \"{}\"}}}}", "a".repeat(3 << 20));
    let long_class = format!(r#"{{"driver": "fake-hardware", "resource_class": "{}"}}"#, "r".repeat(81));
    let cases: Vec<Case<'_>> = vec![
        (Method::POST, "/v1/nodes", json_ct, v, long_class.into_bytes(), 400, "resource_class"),
        (Method::PATCH, "/v1/nodes/target", json_ct, v, br#"[{"op": "add", "path": "/instance_uuid", "value": "not-a-uuid"}]"#.to_vec(), 400, "Expected a UUID"),
        (Method::POST, "/v1/nodes", json_ct, v, b"{not json".to_vec(), 400, "Malformed JSON"),
        (Method::POST, "/v1/nodes", json_ct, v, b"".to_vec(), 400, "empty"),
        (Method::POST, "/v1/nodes", json_ct, v, br#"{"driver": "fake-hardware", "colour": "red"}"#.to_vec(), 400, "Unexpected arguments: colour"),
        (Method::POST, "/v1/nodes", json_ct, v, br#"{"name": "x"}"#.to_vec(), 400, "Missing mandatory parameter: driver"),
        (Method::POST, "/v1/nodes", json_ct, v, br#"{"driver": 7}"#.to_vec(), 400, "invalid type"),
        (Method::POST, "/v1/nodes", json_ct, v, br#"{"driver": "no-such-driver"}"#.to_vec(), 400, "No valid host"),
        (Method::POST, "/v1/nodes", json_ct, v, br#"{"driver": "fake-hardware", "uuid": "nope"}"#.to_vec(), 400, "Expected a UUID"),
        (Method::POST, "/v1/nodes", json_ct, v, br#"{"driver": "fake-hardware", "name": "target"}"#.to_vec(), 409, "already exists"),
        (Method::POST, "/v1/nodes", json_ct, v, br#"{"driver": "fake-hardware", "name": "has space"}"#.to_vec(), 400, "logical name"),
        (Method::POST, "/v1/nodes", json_ct, v, br#"{"driver": "fake-hardware", "deploy_interface": "warp"}"#.to_vec(), 400, "warp"),
        (Method::POST, "/v1/nodes", json_ct, Some("1.1"), br#"{"driver": "fake-hardware", "name": "old"}"#.to_vec(), 406, "1.5"),
        (Method::POST, "/v1/nodes", Some("text/plain"), v, br#"{"driver": "fake-hardware"}"#.to_vec(), 415, "content type"),
        (Method::POST, "/v1/nodes", json_ct, v, huge.into_bytes(), 413, "too large"),
        (Method::PATCH, "/v1/nodes/target", json_ct, v, br#"[{"op": "replace", "path": "/reservation", "value": "me"}]"#.to_vec(), 400, "Cannot patch /reservation"),
        (Method::PATCH, "/v1/nodes/target", json_ct, v, br#"[{"op": "replace", "path": "/extra/missing", "value": 1}]"#.to_vec(), 400, "Couldn't apply patch"),
        (Method::PATCH, "/v1/nodes/target", json_ct, v, br#"[{"op": "move", "path": "/extra/keep"}]"#.to_vec(), 400, "unknown variant `move`"),
        (Method::PATCH, "/v1/nodes/target", json_ct, v, br#"[{"op": "replace", "path": "/maintenance", "value": "perhaps"}]"#.to_vec(), 400, "maintenance"),
        (Method::PATCH, "/v1/nodes/target", json_ct, v, br#"{"op": "replace"}"#.to_vec(), 400, "Invalid request body"),
        (Method::PATCH, "/v1/nodes/nosuchnode", json_ct, v, br#"[{"op": "add", "path": "/extra/a", "value": 1}]"#.to_vec(), 404, "could not be found"),
        (Method::GET, "/v1/nodes/nosuchnode", None, v, vec![], 404, "Node nosuchnode could not be found."),
        (Method::GET, "/v1/nodes/00000000-0000-4000-8000-000000000000", None, v, vec![], 404, "could not be found"),
        (Method::PUT, "/v1/nodes/target/states/provision", json_ct, v, br#"{"target": "fly"}"#.to_vec(), 400, "fly"),
        (Method::PUT, "/v1/nodes/target/states/provision", json_ct, v, br#"{"target": "provide"}"#.to_vec(), 400, "\"available\""),
        (Method::PUT, "/v1/nodes/target/states/provision", json_ct, v, br#"{"target": "deploy"}"#.to_vec(), 406, "1.73"),
        (Method::PUT, "/v1/nodes/target/states/provision", json_ct, v, br#"{"target": "manage", "configdrive": "x"}"#.to_vec(), 400, "configdrive"),
        (Method::PUT, "/v1/nodes/target/states/power", json_ct, v, br#"{"target": "sideways"}"#.to_vec(), 400, "sideways"),
        (Method::PUT, "/v1/nodes/target/states/power", json_ct, v, br#"{"target": "power on", "timeout": 0}"#.to_vec(), 400, "timeout"),
        (Method::PUT, "/v1/nodes/target/states/power", json_ct, Some("1.20"), br#"{"target": "soft power off"}"#.to_vec(), 406, "1.27"),
        (Method::GET, "/v1/nodes?limit=0", None, v, vec![], 400, "limit"),
        (Method::GET, "/v1/nodes?limit=abc", None, v, vec![], 400, "Invalid query"),
        (Method::GET, "/v1/nodes?sort_dir=sideways", None, v, vec![], 400, "sort direction"),
        (Method::GET, "/v1/nodes?sort_key=driver_info", None, v, vec![], 400, "sort_key"),
        (Method::GET, "/v1/nodes?fields=uuid,colour", None, v, vec![], 400, "Field colour is not a valid field."),
        (Method::GET, "/v1/nodes?provision_state=flying", None, v, vec![], 400, "flying"),
        (Method::GET, "/v1/nodes?maintenance=perhaps", None, v, vec![], 400, "maintenance"),
        (Method::GET, "/v1/nodes?marker=00000000-0000-4000-8000-000000000000", None, v, vec![], 404, "could not be found"),
        (Method::GET, "/v1/nodes?fields=uuid", None, Some("1.7"), vec![], 406, "1.8"),
        (Method::GET, "/v1/nodes", None, Some("1.999"), vec![], 406, "not supported"),
        (Method::GET, "/v1/nodes", None, Some("2.1"), vec![], 406, "Mutually exclusive"),
        (Method::GET, "/v1/nodes", None, Some("one.two"), vec![], 406, "Invalid value"),
        (Method::GET, "/v1/flavors", None, v, vec![], 404, "could not be found"),
        (Method::DELETE, "/v1", None, v, vec![], 405, "not allowed"),
        (Method::POST, "/v1/nodes/target/states", json_ct, v, b"{}".to_vec(), 405, "not allowed"),
        (Method::GET, "/v1/conductors", None, v, vec![], 404, "The API is not supported for this version"),
    ];
    for (method, path, ct, version, body, status, needle) in cases {
        let label = format!("{method} {path} {:?}", String::from_utf8_lossy(&body[..body.len().min(80)]));
        let (got, reply, headers) = raw(&base, method, path, ct, version, body).await;
        assert_eq!(got.as_u16(), status, "{label}: {reply}");
        let fault = faultstring(&reply);
        assert!(fault.contains(needle), "{label}: {fault:?} lacks {needle:?}");
        assert_eq!(headers["content-type"], "application/json", "{label}");
        assert_eq!(headers["x-openstack-ironic-api-minimum-version"], "1.1", "{label}");
        assert!(headers.contains_key("x-openstack-request-id"), "{label}");
    }
    let after = api.node("target").await;
    for field in ["provision_state", "extra", "maintenance", "name", "driver", "power_state", "target_provision_state", "reservation"] {
        assert_eq!(before[field], after[field], "{field} changed");
    }
    app.assert_no_locks().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn maintenance_validate_drivers_and_listing() {
    let app = TestApp::start().await;
    let api = app.api();
    for i in 0..5 {
        api.available_node(json!({"name": format!("n{i}"), "resource_class": if i % 2 == 0 { "big" } else { "small" }}))
            .await;
    }

    // Maintenance set with a reason, then unset (which clears the reason).
    let r = api
        .request(Method::PUT, "/v1/nodes/n1/maintenance", Some(json!({"reason": "disk swap"})))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = api.node("n1").await;
    assert_eq!(node["maintenance"], true);
    assert_eq!(node["maintenance_reason"], "disk swap");
    let r = api.request(Method::PUT, "/v1/nodes/n2/maintenance", None).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(api.node("n2").await["maintenance"], true);

    let maintained = api.get("/v1/nodes?maintenance=true").await;
    let names: Vec<&str> = maintained.body["nodes"].as_array().unwrap().iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["n1", "n2"]);

    let r = api.request(Method::DELETE, "/v1/nodes/n1/maintenance", None).await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    let node = api.node("n1").await;
    assert_eq!(node["maintenance"], false);
    assert_eq!(node["maintenance_reason"], Value::Null);

    // Validate: the interfaces Ferrum has are checked, the others say they are not supported.
    let r = api.get("/v1/nodes/n0/validate").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["power"]["result"], true);
    assert_eq!(r.body["deploy"]["result"], true);
    assert_eq!(r.body["console"]["result"], true, "the fake console: {}", r.body);
    assert_eq!(r.body["rescue"]["result"], true, "the fake rescue: {}", r.body);
    assert_eq!(r.body["storage"]["result"], true, "noop storage: {}", r.body);
    let r = api
        .patch("n0", json!([{"op": "replace", "path": "/deploy_interface", "value": "direct"}]))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = api.get("/v1/nodes/n0/validate").await;
    assert_eq!(r.body["deploy"]["result"], false);
    assert!(r.body["deploy"]["reason"].as_str().unwrap().contains("image_source"));

    // The other interfaces: defaults, set at create, patched in a state that allows it.
    let node = api.node("n3").await;
    assert_eq!(node["boot_interface"], "fake");
    assert_eq!(node["console_interface"], "fake");
    assert_eq!(node["network_interface"], "flat");
    let created = api
        .create_node(json!({"name": "consoled", "driver": "fake-hardware", "console_interface": "fake", "network_interface": "noop"}))
        .await;
    assert_eq!(created["console_interface"], "fake");
    assert_eq!(created["network_interface"], "noop");
    let r = api
        .patch("n3", json!([{"op": "replace", "path": "/console_interface", "value": "no-console"}]))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = api
        .patch("n3", json!([{"op": "replace", "path": "/raid_interface", "value": "fake"}]))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["raid_interface"], "fake");
    let r = api
        .patch("n3", json!([{"op": "replace", "path": "/vendor_interface", "value": "ipmitool"}]))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("ipmitool"), "{}", r.fault());

    // The console: the fake one turns on and off; no-console refuses.
    let console = |ident: &'static str, enabled: bool| async move {
        api.request(
            Method::PUT,
            &format!("/v1/nodes/{ident}/states/console"),
            Some(json!({ "enabled": enabled })),
        )
        .await
    };
    let r = console("consoled", true).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let r = api.get("/v1/nodes/consoled/states/console").await;
    assert_eq!(r.body["console_enabled"], true, "{}", r.body);
    assert_eq!(r.body["console_info"], json!({}), "Ironic's fake console shows nothing");
    assert_eq!(api.node("consoled").await["console_enabled"], true);
    let r = console("consoled", false).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let r = api.get("/v1/nodes/consoled/states/console").await;
    assert_eq!(r.body["console_enabled"], false);
    assert_eq!(r.body["console_info"], Value::Null);
    let r = console("n3", true).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("does not support console"), "{}", r.fault());

    // Drivers: what the alive conductors offer.
    let r = api.get("/v1/drivers").await;
    assert_eq!(r.status, StatusCode::OK);
    let drivers = r.body["drivers"].as_array().unwrap();
    // Ironic's default enables ipmi and redfish; Ferrum's also fake-hardware.
    let names: Vec<&str> = drivers.iter().filter_map(|d| d["name"].as_str()).collect();
    assert_eq!(names, ["fake-hardware", "ipmi", "redfish"]);
    for d in drivers {
        assert_eq!(d["hosts"], json!([app.host()]), "{d}");
    }
    let r = api.get("/v1/drivers/fake-hardware").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["type"], "dynamic");
    assert_eq!(api.get("/v1/drivers/idrac").await.status, StatusCode::NOT_FOUND);

    // Listing: filters, fields, sorting, and pages whose next link keeps the filters.
    let r = api.get("/v1/nodes?resource_class=big&fields=name,resource_class").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let nodes = r.body["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    for n in nodes {
        assert_eq!(n["resource_class"], "big");
        let mut keys: Vec<&String> = n.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["links", "name", "resource_class"]);
    }
    let r = api.get("/v1/nodes?resource_class=big&limit=2&sort_key=uuid&sort_dir=desc").await;
    let first: Vec<String> = r.body["nodes"].as_array().unwrap().iter().map(|n| n["uuid"].as_str().unwrap().to_owned()).collect();
    assert_eq!(first.len(), 2);
    assert!(first[0] > first[1], "descending by uuid");
    let next = r.body["next"].as_str().expect("a full page has a next link");
    assert!(next.contains("resource_class=big"), "{next}");
    let path = next.strip_prefix(&api.base).unwrap();
    let r = api.get(path).await;
    let rest: Vec<String> = r.body["nodes"].as_array().unwrap().iter().map(|n| n["uuid"].as_str().unwrap().to_owned()).collect();
    assert_eq!(rest.len(), 1, "{}", r.body);
    assert!(rest[0] < first[1]);
    let r = api.get("/v1/nodes/detail?driver=fake-hardware&provision_state=available").await;
    assert_eq!(r.body["nodes"].as_array().unwrap().len(), 5);

    // Paging by a nullable column (two nodes have no name) visits every node once, in order.
    for _ in 0..2 {
        api.create_node(json!({"driver": "fake-hardware"})).await;
    }
    let all = api.get("/v1/nodes").await.body["nodes"].as_array().unwrap().len();
    for dir in ["asc", "desc"] {
        let mut seen: Vec<(Value, String)> = Vec::new();
        let mut path = format!("/v1/nodes?sort_key=name&sort_dir={dir}&limit=2");
        loop {
            let r = api.get(&path).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            for n in r.body["nodes"].as_array().unwrap() {
                seen.push((n["name"].clone(), n["uuid"].as_str().unwrap().to_owned()));
            }
            match r.body["next"].as_str() {
                Some(next) => path = next.strip_prefix(&api.base).unwrap().to_owned(),
                None => break,
            }
        }
        assert_eq!(seen.len(), all, "{dir}: {seen:?}");
        let names: Vec<Option<&str>> = seen.iter().map(|(n, _)| n.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        if dir == "desc" {
            sorted.reverse();
        }
        assert_eq!(names, sorted, "{dir}");
        assert_eq!(names.iter().filter(|n| n.is_none()).count(), 2, "{dir}");
    }
    assert!(r.body["nodes"][0]["driver_info"].is_object(), "detail");
    assert_eq!(api.get("/v1/nodes?associated=true").await.body["nodes"], json!([]));
    let r = api.get("/v1/nodes?chassis_uuid=00000000-0000-4000-8000-000000000000").await;
    assert_eq!((r.status, &r.body), (StatusCode::OK, &json!({"nodes": []})), "no node is in a chassis");
    assert_eq!(api.get("/v1/nodes?chassis_uuid=rack").await.status, StatusCode::BAD_REQUEST);
    app.assert_no_locks().await;
}
