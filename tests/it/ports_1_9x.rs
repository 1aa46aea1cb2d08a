//! The port and portgroup features of API 1.97-1.111, in process ([`TestApp`]): a port's `description`
//! (1.97), `vendor` (1.100), `category` (1.101) and `available_for_dynamic_portgroup` (1.111); a
//! portgroup's `physical_network` (1.102, written through to its ports), `category` (1.103) and
//! read-only `dynamic_portgroup` (1.111); the end of the OVN VTEP keys (1.105); the
//! `conductor_groups` filter of both listings (1.99) and the `shard` filter of portgroups (1.106).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Api, Reply, TestApp};
use ferrum::{db, node::NodeChanges};

/// The version one below `1.<minor>`.
fn below(minor: u32) -> String {
    format!("1.{}", minor - 1)
}

fn at(minor: u32) -> String {
    format!("1.{minor}")
}

/// The UUIDs of a listing's items, in order.
fn uuids(r: &Reply, key: &str) -> Vec<String> {
    r.body[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {}", r.body))
        .iter()
        .map(|i| i["uuid"].as_str().expect("a uuid").to_owned())
        .collect()
}

/// Every item of a listing, following its `next` links, and the pages it took.
async fn all_pages(api: &Api, version: &str, path: &str, key: &str) -> (Vec<String>, usize) {
    let mut found = Vec::new();
    let mut pages = 0;
    let mut next = Some(path.to_owned());
    while let Some(path) = next.take() {
        let r = api.request_at(version, Method::GET, &path, None).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.body);
        found.extend(uuids(&r, key));
        pages += 1;
        assert!(pages < 20, "paging does not end: {path}");
        if let Some(link) = r.body["next"].as_str() {
            next = Some(
                link.strip_prefix(&api.base)
                    .expect("next on the same API")
                    .to_owned(),
            );
        }
    }
    (found, pages)
}

/// Moves a node to a conductor group by writing its row: the app has one conductor, in no
/// group, so the API would refuse a group no conductor serves. Only listings read the node
/// afterwards.
async fn put_in_group(db: &db::Db, uuid: &str, group: &str) {
    let node = db::nodes::get_by_uuid(db, uuid).await.expect("the node");
    let changes = NodeChanges {
        conductor_group: Some(group.to_owned()),
        ..NodeChanges::default()
    };
    let written = db::nodes::update_unlocked(
        db,
        node.id,
        node.version,
        ("test", node.provision_state),
        changes,
        None,
    )
    .await
    .expect("the write");
    assert!(written, "node {uuid} was not moved to {group}");
}

/// The physical network of each port of a node, in id order.
async fn physnets(api: &Api, node: &str) -> Vec<(String, Value)> {
    let r = api
        .request_at(
            "1.102",
            Method::GET,
            &format!("/v1/ports/detail?node={node}"),
            None,
        )
        .await;
    r.body["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| {
            (
                p["uuid"].as_str().expect("a uuid").to_owned(),
                p["physical_network"].clone(),
            )
        })
        .collect()
}

/// A port's free-text fields, each from its version: written at create and by PATCH, removed to
/// null, shown in a show, a detailed listing and `?fields=`, hidden below the version; and an
/// older request may neither write nor ask for them (406). Too long or not a string is a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn port_text_fields_from_1_97_to_1_101() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"name": "texts", "driver": "fake-hardware"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    let rows: [(&str, u32, usize); 3] = [("description", 97, 255), ("vendor", 100, 32), ("category", 101, 80)];
    for (i, (field, since, max)) in rows.into_iter().enumerate() {
        let mac = |j: usize| format!("52:54:00:97:{i:02x}:{j:02x}");
        let (old, new) = (below(since), at(since));
        let r = api.request_at(&old, Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": mac(0), field: "x"}))).await;
        assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{field} at {old}: {}", r.body);
        assert_eq!(r.fault(), format!("{field} requires API version {new} or later; this request asked for {old}."));

        let longest = "x".repeat(max);
        let r = api.request_at(&new, Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": mac(0), field: longest}))).await;
        assert_eq!((r.status, &r.body[field]), (StatusCode::CREATED, &json!(longest)), "{field}: {}", r.body);
        let uuid = r.body["uuid"].as_str().unwrap().to_owned();
        let r = api.request_at(&old, Method::GET, &format!("/v1/ports/{uuid}"), None).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert!(r.body.get(field).is_none(), "{field} shown at {old}: {}", r.body);
        let r = api.request_at(&old, Method::GET, &format!("/v1/ports/{uuid}?fields={field}"), None).await;
        assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
        assert_eq!(r.fault(), format!("Field {field} is not available in API version {old}."));
        let r = api.request_at(&new, Method::GET, &format!("/v1/ports/{uuid}?fields={field}"), None).await;
        assert_eq!(r.body[field], json!(longest), "{}", r.body);
        assert!(r.body.get("address").is_none(), "{}", r.body);
        let r = api.request_at(&new, Method::GET, &format!("/v1/ports/detail?node={n}"), None).await;
        let listed: Vec<&Value> = r.body["ports"].as_array().unwrap().iter().filter(|p| p["uuid"] == json!(uuid)).collect();
        assert_eq!(listed[0][field], json!(longest), "{}", r.body);
        let r = api.request_at(&new, Method::GET, &format!("/v1/ports?node={n}"), None).await;
        assert!(r.body["ports"][0].get(field).is_none(), "not in the summary: {}", r.body);

        let patch = json!([{"op": "replace", "path": format!("/{field}"), "value": "changed"}]);
        let r = api.request_at(&old, Method::PATCH, &format!("/v1/ports/{uuid}"), Some(patch.clone())).await;
        assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
        let r = api.request_at(&new, Method::PATCH, &format!("/v1/ports/{uuid}"), Some(patch)).await;
        assert_eq!((r.status, &r.body[field]), (StatusCode::OK, &json!("changed")), "{}", r.body);
        let remove = json!([{"op": "remove", "path": format!("/{field}")}]);
        let r = api.request_at(&new, Method::PATCH, &format!("/v1/ports/{uuid}"), Some(remove)).await;
        assert_eq!((r.status, &r.body[field]), (StatusCode::OK, &Value::Null), "{}", r.body);
        let r = api.request_at("1.111", Method::GET, &format!("/v1/ports/{uuid}"), None).await;
        assert_eq!(r.body[field], Value::Null, "{}", r.body);

        // Bad values: each a 400 that stores nothing.
        let too_long = "x".repeat(max + 1);
        let bad: [(Value, String); 3] = [
            (json!(too_long), format!("{field} must be at most {max} characters")),
            (json!(7), format!("Invalid value for {field}: invalid type 7, expected a string or null")),
            (json!({"a": 1}), format!("Invalid value for {field}: invalid type {{\"a\":1}}, expected a string or null")),
        ];
        for (value, says) in bad {
            let r = api.request_at(&new, Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": mac(1), field: value}))).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{field}={value}: {}", r.body);
            assert_eq!(r.fault(), says);
            let patch = json!([{"op": "add", "path": format!("/{field}"), "value": value}]);
            let r = api.request_at(&new, Method::PATCH, &format!("/v1/ports/{uuid}"), Some(patch)).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "PATCH {field}={value}: {}", r.body);
            assert_eq!(r.fault(), says);
        }
        let r = api.request_at(&new, Method::GET, &format!("/v1/ports?address={}", mac(1)), None).await;
        assert_eq!(r.body["ports"], json!([]), "{}", r.body);
    }

    // `description_contains` (1.97) finds a port by part of its description, literally.
    let with = |mac: &str, text: &str| json!({"node_uuid": n, "address": mac, "description": text});
    let a = api.request_at("1.97", Method::POST, "/v1/ports", Some(with("52:54:00:97:aa:01", "Uplink to rack 5% A, kxb"))).await;
    let b = api.request_at("1.97", Method::POST, "/v1/ports", Some(with("52:54:00:97:aa:02", "uplink_b"))).await;
    assert_eq!((a.status, b.status), (StatusCode::CREATED, StatusCode::CREATED), "{} {}", a.body, b.body);
    let found = |q: &'static str| async move {
        let r = api.request_at("1.97", Method::GET, &format!("/v1/ports?{q}"), None).await;
        assert_eq!(r.status, StatusCode::OK, "{q}: {}", r.body);
        uuids(&r, "ports")
    };
    assert_eq!(found("description_contains=rack%205%25").await, [a.body["uuid"].as_str().unwrap()]);
    assert_eq!(found("description_contains=k_b").await, [b.body["uuid"].as_str().unwrap()]);
    assert!(found("description_contains=5%25%20B").await.is_empty());
    assert!(found("description_contains=nowhere").await.is_empty());
    app.assert_no_locks().await;
}

/// A port's `available_for_dynamic_portgroup` (1.111): true unless written false, a JSON boolean
/// only, `remove` restores true; hidden, unwritable and not asked for below 1.111.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn ports_are_available_for_dynamic_portgroups_from_1_111() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"name": "dyn", "driver": "fake-hardware"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    const F: &str = "available_for_dynamic_portgroup";
    let r = api.request_at("1.110", Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": "52:54:00:11:01:01"}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert!(r.body.get(F).is_none(), "{}", r.body);
    let first = r.body["uuid"].as_str().unwrap().to_owned();
    let r = api.request_at("1.111", Method::GET, &format!("/v1/ports/{first}"), None).await;
    assert_eq!(r.body[F], true, "the default: {}", r.body);

    let r = api.request_at("1.111", Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": "52:54:00:11:01:02", F: false}))).await;
    assert_eq!((r.status, &r.body[F]), (StatusCode::CREATED, &json!(false)), "{}", r.body);
    let second = r.body["uuid"].as_str().unwrap().to_owned();
    let r = api.request_at("1.111", Method::GET, &format!("/v1/ports/detail?node={n}"), None).await;
    let shown: Vec<&Value> = r.body["ports"].as_array().unwrap().iter().map(|p| &p[F]).collect();
    assert_eq!(shown, [&json!(true), &json!(false)], "{}", r.body);
    let r = api.request_at("1.111", Method::GET, &format!("/v1/ports?node={n}&fields=uuid,{F}"), None).await;
    assert_eq!(r.body["ports"][1], json!({"uuid": second, F: false, "links": r.body["ports"][1]["links"]}), "{}", r.body);

    let rows: Vec<(&str, Method, String, Value, StatusCode, String)> = vec![
        ("1.110", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:11:01:03", F: false}), StatusCode::NOT_ACCEPTABLE, format!("{F} requires API version 1.111 or later; this request asked for 1.110.")),
        ("1.110", Method::PATCH, format!("/v1/ports/{first}"), json!([{"op": "replace", "path": format!("/{F}"), "value": false}]), StatusCode::NOT_ACCEPTABLE, format!("{F} requires API version 1.111 or later; this request asked for 1.110.")),
        ("1.110", Method::GET, format!("/v1/ports/{first}?fields={F}"), Value::Null, StatusCode::NOT_ACCEPTABLE, format!("Field {F} is not available in API version 1.110.")),
        ("1.110", Method::GET, format!("/v1/ports?fields=uuid,{F}"), Value::Null, StatusCode::NOT_ACCEPTABLE, format!("Field {F} is not available in API version 1.110.")),
        ("1.111", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:11:01:03", F: "false"}), StatusCode::BAD_REQUEST, format!("Invalid value for {F}: invalid type \"false\", expected a boolean")),
        ("1.111", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:11:01:03", F: null}), StatusCode::BAD_REQUEST, format!("Invalid value for {F}: invalid type null, expected a boolean")),
        ("1.111", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:11:01:03", F: 0}), StatusCode::BAD_REQUEST, format!("Invalid value for {F}: invalid type 0, expected a boolean")),
        ("1.111", Method::PATCH, format!("/v1/ports/{first}"), json!([{"op": "replace", "path": format!("/{F}"), "value": "no"}]), StatusCode::BAD_REQUEST, format!("Invalid value for {F}: invalid type \"no\", expected a boolean")),
        ("1.111", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:11:01:03", "dynamic": true}), StatusCode::BAD_REQUEST, "Unexpected arguments: dynamic".to_owned()),
    ];
    for (version, method, path, body, status, says) in rows {
        let body = (!body.is_null()).then_some(body);
        let r = api.request_at(version, method.clone(), &path, body.clone()).await;
        assert_eq!(r.status, status, "{method} {path} {body:?} at {version}: {}", r.body);
        assert_eq!(r.fault(), says, "{method} {path} {body:?} at {version}");
    }

    let off = json!([{"op": "replace", "path": format!("/{F}"), "value": false}]);
    let r = api.request_at("1.111", Method::PATCH, &format!("/v1/ports/{first}"), Some(off)).await;
    assert_eq!((r.status, &r.body[F]), (StatusCode::OK, &json!(false)), "{}", r.body);
    let remove = json!([{"op": "remove", "path": format!("/{F}")}]);
    let r = api.request_at("1.111", Method::PATCH, &format!("/v1/ports/{second}"), Some(remove)).await;
    assert_eq!((r.status, &r.body[F]), (StatusCode::OK, &json!(true)), "{}", r.body);
    let r = api.request_at("1.111", Method::GET, &format!("/v1/ports/detail?node={n}"), None).await;
    let shown: Vec<&Value> = r.body["ports"].as_array().unwrap().iter().map(|p| &p[F]).collect();
    assert_eq!(shown, [&json!(false), &json!(true)], "nothing else stored: {}", r.body);
    app.assert_no_locks().await;
}

/// A portgroup's `physical_network` (1.102) and `category` (1.103), and its read-only
/// `dynamic_portgroup` (1.111). Writing a portgroup's physical network writes its ports' too;
/// from 1.102 a member port's own cannot be patched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn portgroup_fields_from_1_102_to_1_111() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"name": "bonds", "driver": "fake-hardware"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    for (i, (field, since, max)) in [("physical_network", 102u32, 64usize), ("category", 103, 80)].into_iter().enumerate() {
        let (old, new) = (below(since), at(since));
        let r = api.request_at(&old, Method::POST, "/v1/portgroups", Some(json!({"node_uuid": n, field: "x"}))).await;
        assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
        assert_eq!(r.fault(), format!("{field} requires API version {new} or later; this request asked for {old}."));
        let longest = "p".repeat(max);
        let r = api.request_at(&new, Method::POST, "/v1/portgroups", Some(json!({"node_uuid": n, "name": format!("pg{i}"), field: longest}))).await;
        assert_eq!((r.status, &r.body[field]), (StatusCode::CREATED, &json!(longest)), "{}", r.body);
        let r = api.request_at(&old, Method::GET, &format!("/v1/portgroups/pg{i}"), None).await;
        assert!(r.body.get(field).is_none(), "{field} shown at {old}: {}", r.body);
        let r = api.request_at(&old, Method::GET, &format!("/v1/portgroups?fields=uuid,{field}"), None).await;
        assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
        let r = api.request_at(&new, Method::GET, &format!("/v1/portgroups/pg{i}?fields={field}"), None).await;
        assert_eq!(r.body[field], json!(longest), "{}", r.body);
        let r = api.request_at(&new, Method::GET, "/v1/portgroups/detail", None).await;
        assert_eq!(r.body["portgroups"][i][field], json!(longest), "{}", r.body);
        let patch = json!([{"op": "replace", "path": format!("/{field}"), "value": "y"}]);
        let r = api.request_at(&old, Method::PATCH, &format!("/v1/portgroups/pg{i}"), Some(patch.clone())).await;
        assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
        let r = api.request_at(&new, Method::PATCH, &format!("/v1/portgroups/pg{i}"), Some(patch)).await;
        assert_eq!((r.status, &r.body[field]), (StatusCode::OK, &json!("y")), "{}", r.body);
        let too_long = json!([{"op": "replace", "path": format!("/{field}"), "value": "p".repeat(max + 1)}]);
        let r = api.request_at(&new, Method::PATCH, &format!("/v1/portgroups/pg{i}"), Some(too_long)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        assert_eq!(r.fault(), format!("{field} must be at most {max} characters"));
        let r = api.request_at(&new, Method::POST, "/v1/portgroups", Some(json!({"node_uuid": n, field: ["a"]}))).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        assert_eq!(r.fault(), format!("Invalid value for {field}: invalid type [\"a\"], expected a string or null"));
        let remove = json!([{"op": "remove", "path": format!("/{field}")}]);
        let r = api.request_at(&new, Method::PATCH, &format!("/v1/portgroups/pg{i}"), Some(remove)).await;
        assert_eq!((r.status, &r.body[field]), (StatusCode::OK, &Value::Null), "{}", r.body);
    }

    // dynamic_portgroup: false, shown from 1.111, never written by a client.
    let r = api.request_at("1.111", Method::GET, "/v1/portgroups/pg0", None).await;
    assert_eq!(r.body["dynamic_portgroup"], false, "{}", r.body);
    let r = api.request_at("1.110", Method::GET, "/v1/portgroups/pg0", None).await;
    assert!(r.body.get("dynamic_portgroup").is_none(), "{}", r.body);
    let rows: Vec<(&str, Method, &str, Value, StatusCode, &str)> = vec![
        ("1.111", Method::POST, "/v1/portgroups", json!({"node_uuid": n, "dynamic_portgroup": true}), StatusCode::BAD_REQUEST, "Unexpected arguments: dynamic_portgroup"),
        ("1.110", Method::POST, "/v1/portgroups", json!({"node_uuid": n, "dynamic_portgroup": true}), StatusCode::BAD_REQUEST, "Unexpected arguments: dynamic_portgroup"),
        ("1.111", Method::PATCH, "/v1/portgroups/pg0", json!([{"op": "replace", "path": "/dynamic_portgroup", "value": true}]), StatusCode::BAD_REQUEST, "Cannot patch /dynamic_portgroup. Only the following can be updated: address, category, extra, mode, name, node_uuid, physical_network, properties, standalone_ports_supported"),
        ("1.110", Method::GET, "/v1/portgroups/pg0?fields=dynamic_portgroup", Value::Null, StatusCode::NOT_ACCEPTABLE, "Field dynamic_portgroup is not available in API version 1.110."),
    ];
    for (version, method, path, body, status, says) in rows {
        let body = (!body.is_null()).then_some(body);
        let r = api.request_at(version, method.clone(), path, body.clone()).await;
        assert_eq!(r.status, status, "{method} {path} {body:?} at {version}: {}", r.body);
        assert_eq!(r.fault(), says, "{method} {path} {body:?} at {version}");
    }
    let r = api.request_at("1.111", Method::GET, "/v1/portgroups/pg0?fields=dynamic_portgroup", None).await;
    assert_eq!(r.body["dynamic_portgroup"], false, "{}", r.body);

    // A portgroup's physical network is its ports'.
    let pg = api.request_at("1.111", Method::GET, "/v1/portgroups/pg0", None).await.body["uuid"].as_str().unwrap().to_owned();
    let mut members = Vec::new();
    for (mac, physnet) in [("52:54:00:02:00:01", "old"), ("52:54:00:02:00:02", "old")] {
        let r = api.request_at("1.101", Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": mac, "portgroup_uuid": pg, "physical_network": physnet}))).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        members.push(r.body["uuid"].as_str().unwrap().to_owned());
    }
    let r = api.request_at("1.102", Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": "52:54:00:02:00:03", "physical_network": "other"}))).await;
    let outsider = r.body["uuid"].as_str().unwrap().to_owned();
    let patch = json!([{"op": "add", "path": "/physical_network", "value": "fabric-a"}]);
    let r = api.request_at("1.102", Method::PATCH, &format!("/v1/portgroups/{pg}"), Some(patch)).await;
    assert_eq!((r.status, &r.body["physical_network"]), (StatusCode::OK, &json!("fabric-a")), "{}", r.body);
    assert_eq!(physnets(api, &n).await, [
        (members[0].clone(), json!("fabric-a")),
        (members[1].clone(), json!("fabric-a")),
        (outsider.clone(), json!("other")),
    ]);
    // From 1.102 a member's own physical network is refused; before it, and outside a group, not.
    let own = json!([{"op": "replace", "path": "/physical_network", "value": "mine"}]);
    let r = api.request_at("1.102", Method::PATCH, &format!("/v1/ports/{}", members[0]), Some(own.clone())).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.fault(), "physical_network cannot be changed while the port belongs to a portgroup.");
    let join_and_set = json!([{"op": "add", "path": "/portgroup_uuid", "value": pg}, {"op": "replace", "path": "/physical_network", "value": "mine"}]);
    let r = api.request_at("1.111", Method::PATCH, &format!("/v1/ports/{outsider}"), Some(join_and_set)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.fault(), "physical_network cannot be changed while the port belongs to a portgroup.");
    let r = api.request_at("1.102", Method::PATCH, &format!("/v1/ports/{outsider}"), Some(own.clone())).await;
    assert_eq!((r.status, &r.body["physical_network"]), (StatusCode::OK, &json!("mine")), "{}", r.body);
    // Before 1.102 a member's own may change, but only to its group's (Ironic's
    // `validate_port_physnet`, from 1.34).
    let r = api.request_at("1.101", Method::PATCH, &format!("/v1/ports/{}", members[1]), Some(own)).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.fault(), format!("Port with physical network mine cannot become a member of port group {pg} which has ports in physical network fabric-a."));
    // Removing the group's physical network removes the members'.
    let r = api.request_at("1.102", Method::PATCH, &format!("/v1/portgroups/{pg}"), Some(json!([{"op": "remove", "path": "/physical_network"}]))).await;
    assert_eq!((r.status, &r.body["physical_network"]), (StatusCode::OK, &Value::Null), "{}", r.body);
    assert_eq!(physnets(api, &n).await, [
        (members[0].clone(), Value::Null),
        (members[1].clone(), Value::Null),
        (outsider, json!("mine")),
    ]);
    app.assert_no_locks().await;
}

/// The OVN VTEP switch keys of `local_link_connection` were taken from 1.90 to 1.104 only: from
/// 1.105 a request that writes them is a 406, and a link stored with them is shown empty, as
/// below 1.90. Other links are unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn vtep_keys_are_gone_from_1_105() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"name": "vtep-end", "driver": "fake-hardware"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    let vtep = json!({"port_id": "p1", "vtep-logical-switch": "ls1", "vtep-physical-switch": "ps1"});
    let r = api.request_at("1.104", Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": "52:54:00:05:00:01", "local_link_connection": vtep}))).await;
    assert_eq!((r.status, &r.body["local_link_connection"]), (StatusCode::CREATED, &vtep), "{}", r.body);
    let uuid = r.body["uuid"].as_str().unwrap().to_owned();
    for (version, shown) in [("1.89", json!({})), ("1.90", vtep.clone()), ("1.104", vtep.clone()), ("1.105", json!({})), ("1.111", json!({}))] {
        let r = api.request_at(version, Method::GET, &format!("/v1/ports/{uuid}"), None).await;
        assert_eq!(r.body["local_link_connection"], shown, "at {version}: {}", r.body);
        let r = api.request_at(version, Method::GET, &format!("/v1/ports?node={n}&fields=local_link_connection"), None).await;
        assert_eq!(r.body["ports"][0]["local_link_connection"], shown, "listed at {version}: {}", r.body);
    }

    let removed = |v: &str| format!("local_link_connection/vtep-logical-switch was removed in API version 1.105; this request asked for {v}.");
    let rows: Vec<(&str, Method, String, Value, String)> = vec![
        ("1.105", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:05:00:02", "local_link_connection": vtep}), removed("1.105")),
        ("1.111", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:05:00:02", "local_link_connection": vtep}), removed("1.111")),
        ("1.105", Method::PATCH, format!("/v1/ports/{uuid}"), json!([{"op": "replace", "path": "/local_link_connection/vtep-logical-switch", "value": "ls2"}]), removed("1.105")),
        ("1.105", Method::PATCH, format!("/v1/ports/{uuid}"), json!([{"op": "replace", "path": "/local_link_connection", "value": vtep}]), removed("1.105")),
        ("1.89", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:05:00:02", "local_link_connection": vtep}), "local_link_connection/vtep-logical-switch requires API version 1.90 or later; this request asked for 1.89.".to_owned()),
    ];
    for (version, method, path, body, says) in rows {
        let r = api.request_at(version, method.clone(), &path, Some(body.clone())).await;
        assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{method} {path} {body} at {version}: {}", r.body);
        assert_eq!(r.fault(), says);
    }
    let r = api.request_at("1.104", Method::GET, &format!("/v1/ports/{uuid}"), None).await;
    assert_eq!(r.body["local_link_connection"], vtep, "unchanged: {}", r.body);

    // From 1.105 the stored link can still be replaced by one without the keys.
    let plain = json!({"port_id": "p1", "switch_id": "aa:bb:cc:dd:ee:ff"});
    let r = api.request_at("1.105", Method::PATCH, &format!("/v1/ports/{uuid}"), Some(json!([{"op": "replace", "path": "/local_link_connection", "value": plain}]))).await;
    assert_eq!((r.status, &r.body["local_link_connection"]), (StatusCode::OK, &plain), "{}", r.body);
    let r = api.request_at("1.111", Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": "52:54:00:05:00:03", "local_link_connection": {"network_type": "unmanaged"}}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = api.request_at("1.104", Method::GET, &format!("/v1/ports?node={n}"), None).await;
    assert_eq!(r.body["ports"].as_array().map(Vec::len), Some(2), "{}", r.body);
    app.assert_no_locks().await;
}

/// `conductor_groups` (1.99) lists the ports and portgroups of the nodes in those groups (a
/// comma-separated, case-insensitive list), page by page; Ironic takes it at every version.
/// It does not go with a node, portgroup or address filter (400).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn ports_and_portgroups_by_conductor_groups() {
    let app = TestApp::start().await;
    let api = app.api();
    let mut by_node: Vec<(Vec<String>, String)> = Vec::new();
    for (i, name) in ["plain", "rack1", "rack2"].into_iter().enumerate() {
        let node = api.create_node(json!({"name": name, "driver": "fake-hardware"})).await;
        let n = node["uuid"].as_str().unwrap().to_owned();
        let mut ports = Vec::new();
        for j in 0..3 {
            let r = api.request_at("1.99", Method::POST, "/v1/ports", Some(json!({"node_uuid": n, "address": format!("52:54:00:99:{i:02x}:{j:02x}")}))).await;
            assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
            ports.push(r.body["uuid"].as_str().unwrap().to_owned());
        }
        let r = api.request_at("1.99", Method::POST, "/v1/portgroups", Some(json!({"node_uuid": n, "name": format!("bond-{name}")}))).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        by_node.push((ports, r.body["uuid"].as_str().unwrap().to_owned()));
    }
    let rack1 = api.node("rack1").await["uuid"].as_str().unwrap().to_owned();
    let rack2 = api.node("rack2").await["uuid"].as_str().unwrap().to_owned();
    put_in_group(app.db(), &rack1, "rack-1").await;
    put_in_group(app.db(), &rack2, "rack-2").await;
    let [(_, _), (ports1, pg1), (ports2, pg2)] = &by_node[..] else { unreachable!() };
    let both: Vec<String> = ports1.iter().chain(ports2).cloned().collect();

    let (found, _) = all_pages(api, "1.99", "/v1/ports?conductor_groups=rack-1", "ports").await;
    assert_eq!(&found, ports1);
    let (found, pages) = all_pages(api, "1.99", "/v1/ports/detail?conductor_groups=RACK-1,%20rack-2,rack-1&limit=2", "ports").await;
    // Six ports, two a page: the third page is full, so a fourth (empty) one follows.
    assert_eq!((found, pages), (both.clone(), 4), "every page keeps the filter");
    let r = api.request_at("1.99", Method::GET, "/v1/ports?conductor_groups=rack-2&limit=2&fields=uuid", None).await;
    assert!(r.body["next"].as_str().unwrap().contains("conductor_groups=rack-2"), "{}", r.body);
    let (found, _) = all_pages(api, "1.99", "/v1/ports?conductor_groups=no_such_group", "ports").await;
    assert!(found.is_empty());
    // As Ironic, at every version; an empty list filters nothing.
    let (found, _) = all_pages(api, "1.98", "/v1/ports?conductor_groups=rack-2", "ports").await;
    assert_eq!(&found, ports2);
    let (found, _) = all_pages(api, "1.99", "/v1/ports?conductor_groups=,", "ports").await;
    assert_eq!(found.len(), 9);

    let (found, _) = all_pages(api, "1.99", "/v1/portgroups?conductor_groups=rack-1", "portgroups").await;
    assert_eq!(&found, std::slice::from_ref(pg1));
    let (found, pages) = all_pages(api, "1.99", "/v1/portgroups/detail?conductor_groups=rack-2,rack-1&limit=1", "portgroups").await;
    assert_eq!((found, pages), (vec![pg1.clone(), pg2.clone()], 3));
    let (found, _) = all_pages(api, "1.99", "/v1/portgroups?conductor_groups=no_such_group", "portgroups").await;
    assert!(found.is_empty());

    let ports_refusal = "Filtering by conductor_groups cannot be combined with node_ident, portgroup_ident, or node address filters.";
    let pg_refusal = "Filtering by node, address, or shard simultaneously is not supported.";
    let rows: Vec<(String, &str)> = vec![
        (format!("/v1/ports?conductor_groups=rack-1&node={rack1}"), ports_refusal),
        (format!("/v1/nodes/{rack1}/ports?conductor_groups=rack-1"), ports_refusal),
        (format!("/v1/ports?conductor_groups=rack-1&portgroup={pg1}"), ports_refusal),
        ("/v1/ports?conductor_groups=rack-1&address=52:54:00:99:01:00".to_owned(), ports_refusal),
        (format!("/v1/portgroups?conductor_groups=rack-1&node={rack1}"), pg_refusal),
        (format!("/v1/nodes/{rack1}/portgroups?conductor_groups=rack-1"), pg_refusal),
        ("/v1/portgroups?conductor_groups=rack-1&address=52:54:00:99:01:00".to_owned(), pg_refusal),
    ];
    for (path, says) in rows {
        let r = api.request_at("1.99", Method::GET, &path, None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.body);
        assert_eq!(r.fault(), says, "{path}");
    }
    app.assert_no_locks().await;
}

/// `shard` on GET /v1/portgroups (1.106): the portgroups of the nodes in those shards, page by
/// page; a 406 below 1.106, and a 400 with another narrowing filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn portgroups_by_shard_from_1_106() {
    let app = TestApp::start().await;
    let api = app.api();
    let mut groups = Vec::new();
    for (name, shard) in [("s1a", json!("s1")), ("s1b", json!("s1")), ("s2", json!("s2")), ("none", Value::Null)] {
        let r = api.request_at("1.82", Method::POST, "/v1/nodes", Some(json!({"name": name, "driver": "fake-hardware", "shard": shard}))).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let n = r.body["uuid"].as_str().unwrap().to_owned();
        for k in 0..2 {
            let r = api.request_at("1.106", Method::POST, "/v1/portgroups", Some(json!({"node_uuid": n, "name": format!("{name}-{k}")}))).await;
            assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
            groups.push(r.body["uuid"].as_str().unwrap().to_owned());
        }
    }
    let (found, pages) = all_pages(api, "1.106", "/v1/portgroups?shard=s1&limit=3", "portgroups").await;
    assert_eq!((found, pages), (groups[0..4].to_vec(), 2));
    let (found, pages) = all_pages(api, "1.106", "/v1/portgroups/detail?shard=s2,s1&limit=2", "portgroups").await;
    assert_eq!((found, pages), (groups[0..6].to_vec(), 4), "every page keeps the filter");
    let r = api.request_at("1.106", Method::GET, "/v1/portgroups?shard=s2&fields=name,uuid", None).await;
    let names: Vec<&Value> = r.body["portgroups"].as_array().unwrap().iter().map(|p| &p["name"]).collect();
    assert_eq!(names, [&json!("s2-0"), &json!("s2-1")], "{}", r.body);
    let (found, _) = all_pages(api, "1.111", "/v1/portgroups?shard=nowhere", "portgroups").await;
    assert!(found.is_empty());

    let s1a = api.node("s1a").await["uuid"].as_str().unwrap().to_owned();
    let rows: Vec<(&str, String, StatusCode, String)> = vec![
        ("1.105", "/v1/portgroups?shard=s1".into(), StatusCode::NOT_ACCEPTABLE, "The shard filter requires API version 1.106 or later; this request asked for 1.105.".into()),
        ("1.105", "/v1/portgroups/detail?shard=s1".into(), StatusCode::NOT_ACCEPTABLE, "The shard filter requires API version 1.106 or later; this request asked for 1.105.".into()),
        ("1.106", format!("/v1/portgroups?shard=s1&node={s1a}"), StatusCode::BAD_REQUEST, "Filtering by node, address, or shard simultaneously is not supported.".into()),
        ("1.106", format!("/v1/nodes/{s1a}/portgroups?shard=s1"), StatusCode::BAD_REQUEST, "Filtering by node, address, or shard simultaneously is not supported.".into()),
        ("1.106", "/v1/portgroups?shard=s1&conductor_groups=rack".into(), StatusCode::BAD_REQUEST, "Filtering by node, address, or shard simultaneously is not supported.".into()),
    ];
    for (version, path, status, says) in rows {
        let r = api.request_at(version, Method::GET, &path, None).await;
        assert_eq!(r.status, status, "{path} at {version}: {}", r.body);
        assert_eq!(r.fault(), says, "{path} at {version}");
    }
    app.assert_no_locks().await;
}
