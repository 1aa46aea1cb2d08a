//! Chassis, ports, portgroups and VIFs (API 1.1-1.28), in process ([`TestApp`]): stored,
//! validated, listed with their filters, and changed by the node's conductor under the node's
//! exclusion; ports joining a portgroup at once, on both stacks (MySQL's concurrency too).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Cluster, ClusterOptions, TestApp, on_both_stacks};

/// A chassis holds nodes: created, listed, patched, its nodes listed, and not deletable while a
/// node is in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn chassis_hold_nodes() {
    let app = TestApp::start().await;
    let api = app.api();
    let r = api.request(Method::POST, "/v1/chassis", Some(json!({"description": "rack 1", "extra": {"row": 3}}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let chassis = r.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(r.body["description"], "rack 1");
    assert!(r.body["nodes"][0]["href"].as_str().unwrap().ends_with(&format!("/v1/chassis/{chassis}/nodes")));
    let r = api.get("/v1/chassis").await;
    assert_eq!(r.body["chassis"][0]["uuid"], chassis.as_str(), "{}", r.body);
    assert!(r.body["chassis"][0].get("extra").is_none(), "the short form has no extra");
    let r = api.get("/v1/chassis/detail").await;
    assert_eq!(r.body["chassis"][0]["extra"], json!({"row": 3}));
    let r = api.request(Method::PATCH, &format!("/v1/chassis/{chassis}"), Some(json!([{"op": "replace", "path": "/description", "value": "rack 2"}]))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["description"], "rack 2");

    let node = api.create_node(json!({"name": "in-chassis", "driver": "fake-hardware", "chassis_uuid": chassis})).await;
    assert_eq!(node["chassis_uuid"], chassis.as_str());
    let r = api.get(&format!("/v1/chassis/{chassis}/nodes")).await;
    assert_eq!(r.body["nodes"][0]["uuid"], node["uuid"], "{}", r.body);
    let r = api.get(&format!("/v1/nodes?chassis_uuid={chassis}")).await;
    assert_eq!(r.body["nodes"].as_array().unwrap().len(), 1, "{}", r.body);
    let r = api.request(Method::DELETE, &format!("/v1/chassis/{chassis}"), None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("contains nodes"), "{}", r.fault());

    // A chassis that does not exist is the node request's 400; removing it needs 1.25.
    let missing = "0e0b4a7e-5a44-4c10-a7a3-55d0c1b26f5e";
    let r = api.create_node_reply(json!({"driver": "fake-hardware", "chassis_uuid": missing})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let remove = Some(json!([{"op": "remove", "path": "/chassis_uuid"}]));
    let r = api.request_at("1.24", Method::PATCH, "/v1/nodes/in-chassis", remove.clone()).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = api.request(Method::PATCH, "/v1/nodes/in-chassis", remove).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["chassis_uuid"], Value::Null);
    let r = api.request(Method::DELETE, &format!("/v1/chassis/{chassis}"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.get(&format!("/v1/chassis/{chassis}")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
}

/// Ports and portgroups: created on a node, found by address, node and portgroup, patched,
/// VIFs attached to the free one and detached, deleted, and gone with their node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn ports_portgroups_and_vifs() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"name": "nic-node", "driver": "fake-hardware"})).await;
    let node_uuid = node["uuid"].as_str().unwrap().to_owned();

    let r = api.request(Method::POST, "/v1/ports", Some(json!({"node_uuid": node_uuid, "address": "52:54:00:AA:BB:01", "pxe_enabled": true}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let port = r.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(r.body["address"], "52:54:00:aa:bb:01", "stored lower-cased");
    assert_eq!(r.body["node_uuid"], node_uuid.as_str());
    assert_eq!(r.body["local_link_connection"], json!({}));
    assert_eq!(r.body["internal_info"], json!({}));

    // Lookup by address (as Bifrost and the agent's lookup do), by node, and its short form.
    let r = api.get("/v1/ports?address=52:54:00:aa:bb:01").await;
    assert_eq!(r.body["ports"], json!([{"uuid": port, "address": "52:54:00:aa:bb:01", "links": r.body["ports"][0]["links"]}]), "{}", r.body);
    let r = api.get("/v1/ports?address=52:54:00:aa:bb:99").await;
    assert_eq!(r.body["ports"], json!([]));
    let r = api.get("/v1/nodes/nic-node/ports").await;
    assert_eq!(r.body["ports"][0]["uuid"], port.as_str(), "{}", r.body);
    let r = api.get(&format!("/v1/ports/detail?node={node_uuid}")).await;
    assert_eq!(r.body["ports"][0]["pxe_enabled"], true, "{}", r.body);
    let r = api.get(&format!("/v1/ports/{port}?fields=address")).await;
    assert_eq!(r.body["address"], "52:54:00:aa:bb:01");
    assert!(r.body.get("node_uuid").is_none());
    let r = api.request_at("1.18", Method::GET, &format!("/v1/ports/{port}"), None).await;
    assert!(r.body.get("pxe_enabled").is_none(), "pxe_enabled is of 1.19");

    // A duplicate MAC is a conflict naming it; bad input is a 400.
    let r = api.request(Method::POST, "/v1/ports", Some(json!({"node_uuid": node_uuid, "address": "52:54:00:aa:bb:01"}))).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains("52:54:00:aa:bb:01"), "{}", r.fault());

    // A portgroup, a port in it, and the portgroup's ports.
    let r = api.request(Method::POST, "/v1/portgroups", Some(json!({"node_uuid": node_uuid, "name": "bond0", "address": "52:54:00:aa:bb:10"}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let pg = r.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(r.body["mode"], "active-backup");
    assert_eq!(r.body["standalone_ports_supported"], true);
    let r = api.request(Method::POST, "/v1/ports", Some(json!({"node_uuid": node_uuid, "address": "52:54:00:aa:bb:02", "portgroup_uuid": pg}))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let member = r.body["uuid"].as_str().unwrap().to_owned();
    let r = api.get("/v1/portgroups/bond0/ports").await;
    assert_eq!(r.body["ports"].as_array().unwrap().len(), 1, "{}", r.body);
    assert_eq!(r.body["ports"][0]["uuid"], member.as_str());
    let r = api.get("/v1/nodes/nic-node/portgroups").await;
    assert_eq!(r.body["portgroups"][0]["name"], "bond0", "{}", r.body);
    let r = api.request(Method::DELETE, "/v1/portgroups/bond0", None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("contains ports"), "{}", r.fault());

    // PATCH: extra anywhere; connectivity only in enroll/manageable/inspecting or maintenance.
    let r = api.request(Method::PATCH, &format!("/v1/ports/{port}"), Some(json!([
        {"op": "add", "path": "/extra/label", "value": "eth0"},
        {"op": "replace", "path": "/local_link_connection", "value": {"switch_id": "AA:BB:CC:DD:EE:FF", "port_id": "Eth1/1"}},
        {"op": "replace", "path": "/physical_network", "value": "physnet1"},
    ]))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["extra"], json!({"label": "eth0"}));
    assert_eq!(r.body["local_link_connection"]["switch_id"], "aa:bb:cc:dd:ee:ff");
    assert_eq!(r.body["physical_network"], "physnet1");
    let r = api.request(Method::PATCH, &format!("/v1/ports/{port}"), Some(json!([{"op": "replace", "path": "/uuid", "value": port}]))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);

    // VIFs: the portgroup (with a free port) is chosen first, then the standalone port.
    let r = api.request(Method::POST, "/v1/nodes/nic-node/vifs", Some(json!({"id": "vif-1"}))).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request(Method::POST, "/v1/nodes/nic-node/vifs", Some(json!({"id": "vif-2"}))).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.get("/v1/nodes/nic-node/vifs").await;
    let mut vifs: Vec<String> = r.body["vifs"].as_array().unwrap().iter().map(|v| v["id"].as_str().unwrap().to_owned()).collect();
    vifs.sort();
    assert_eq!(vifs, ["vif-1", "vif-2"], "{}", r.body);
    let r = api.get(&format!("/v1/portgroups/{pg}")).await;
    assert_eq!(r.body["internal_info"]["tenant_vif_port_id"], "vif-1", "{}", r.body);
    let r = api.get(&format!("/v1/ports/{port}")).await;
    assert_eq!(r.body["internal_info"]["tenant_vif_port_id"], "vif-2", "{}", r.body);
    let r = api.request(Method::POST, "/v1/nodes/nic-node/vifs", Some(json!({"id": "vif-1"}))).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "attached already: {}", r.body);
    let r = api.request(Method::POST, "/v1/nodes/nic-node/vifs", Some(json!({"id": "vif-3"}))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "no free port: {}", r.body);
    // Below 1.28 Ironic's node controller knows no VIFs: 404.
    let r = api.request_at("1.27", Method::GET, "/v1/nodes/nic-node/vifs", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    // A port bound to a VIF is not deleted (outside maintenance).
    let r = api.request(Method::DELETE, &format!("/v1/ports/{port}"), None).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = api.request(Method::DELETE, "/v1/nodes/nic-node/vifs/vif-2", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request(Method::DELETE, "/v1/nodes/nic-node/vifs/vif-2", None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "not attached: {}", r.body);
    let r = api.request(Method::DELETE, &format!("/v1/ports/{port}"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.get(&format!("/v1/ports/{port}")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    // Ports and portgroups go with their node.
    let r = api.request(Method::DELETE, "/v1/nodes/nic-node", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.get(&format!("/v1/ports/{member}")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = api.get(&format!("/v1/portgroups/{pg}")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    app.assert_no_locks().await;
}

/// Bad input to ports, portgroups, chassis and VIFs: each a 4xx in Ironic's envelope that says
/// what is wrong, and nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn bad_port_input_is_refused() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"name": "bad-input", "driver": "fake-hardware"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    let missing = "0e0b4a7e-5a44-4c10-a7a3-55d0c1b26f5e";
    let rows: Vec<(&str, Method, String, Value, StatusCode, &str)> = vec![
        ("1.49", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "not-a-mac"}), StatusCode::BAD_REQUEST, "MAC address"),
        ("1.49", Method::POST, "/v1/ports".into(), json!({"node_uuid": n}), StatusCode::BAD_REQUEST, "address"),
        ("1.49", Method::POST, "/v1/ports".into(), json!({"address": "52:54:00:00:00:01"}), StatusCode::BAD_REQUEST, "node_uuid"),
        ("1.49", Method::POST, "/v1/ports".into(), json!({"node_uuid": missing, "address": "52:54:00:00:00:01"}), StatusCode::BAD_REQUEST, "could not be found"),
        ("1.49", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:00:00:01", "colour": "red"}), StatusCode::BAD_REQUEST, "Unexpected arguments: colour"),
        ("1.18", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:00:00:01", "pxe_enabled": false}), StatusCode::NOT_ACCEPTABLE, "pxe_enabled"),
        ("1.49", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:00:00:01", "is_smartnic": true}), StatusCode::NOT_ACCEPTABLE, "is_smartnic"),
        ("1.49", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:00:00:01", "local_link_connection": {"port_id": "p"}}), StatusCode::BAD_REQUEST, "local_link_connection"),
        ("1.49", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:00:00:01", "physical_network": ""}), StatusCode::BAD_REQUEST, "non-empty"),
        ("1.49", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:00:00:01", "portgroup_uuid": missing}), StatusCode::BAD_REQUEST, "could not be found"),
        ("1.49", Method::POST, "/v1/ports".into(), json!({"node_uuid": n, "address": "52:54:00:00:00:01", "extra": []}), StatusCode::BAD_REQUEST, "extra"),
        ("1.49", Method::GET, "/v1/ports?sort_key=extra".into(), Value::Null, StatusCode::BAD_REQUEST, "sort_key"),
        ("1.49", Method::GET, "/v1/ports?limit=0".into(), Value::Null, StatusCode::BAD_REQUEST, "limit"),
        ("1.49", Method::GET, "/v1/ports?address=zz".into(), Value::Null, StatusCode::BAD_REQUEST, "MAC address"),
        ("1.49", Method::GET, "/v1/ports?fields=colour".into(), Value::Null, StatusCode::BAD_REQUEST, "colour"),
        ("1.49", Method::GET, format!("/v1/ports/{missing}"), Value::Null, StatusCode::NOT_FOUND, "could not be found"),
        ("1.22", Method::GET, "/v1/portgroups".into(), Value::Null, StatusCode::NOT_FOUND, "not supported for this version"),
        ("1.49", Method::POST, "/v1/portgroups".into(), json!({"node_uuid": n, "address": "nope"}), StatusCode::BAD_REQUEST, "MAC address"),
        ("1.25", Method::POST, "/v1/portgroups".into(), json!({"node_uuid": n, "mode": "802.3ad"}), StatusCode::NOT_ACCEPTABLE, "mode"),
        ("1.49", Method::POST, "/v1/chassis".into(), json!({"description": "x".repeat(256)}), StatusCode::BAD_REQUEST, "description"),
        ("1.49", Method::POST, "/v1/chassis".into(), json!({"name": "c"}), StatusCode::BAD_REQUEST, "Unexpected arguments: name"),
        ("1.49", Method::PATCH, format!("/v1/chassis/{missing}"), json!([{"op": "replace", "path": "/description", "value": "d"}]), StatusCode::NOT_FOUND, "could not be found"),
        ("1.49", Method::POST, "/v1/nodes/bad-input/vifs".into(), json!({"name": "no id"}), StatusCode::BAD_REQUEST, "id"),
        ("1.49", Method::POST, "/v1/nodes/bad-input/vifs".into(), json!({"id": "v", "port_uuid": missing}), StatusCode::NOT_ACCEPTABLE, "port_uuid"),
    ];
    for (version, method, path, body, status, says) in rows {
        let body = (!body.is_null()).then_some(body);
        let r = api.request_at(version, method.clone(), &path, body.clone()).await;
        assert_eq!(r.status, status, "{method} {path} {body:?} at {version}: {}", r.body);
        assert!(r.fault().contains(says), "{method} {path} {body:?}: {} lacks {says:?}", r.fault());
    }
    let r = api.get("/v1/ports").await;
    assert_eq!(r.body["ports"], json!([]), "nothing was stored: {}", r.body);
    app.assert_no_locks().await;
}

/// A port's physical network agrees with its portgroup's other members (Ironic's
/// `validate_port_physnet`): a create, a PATCH joining the portgroup and a PATCH of a member's
/// `physical_network` that differ are 409s naming both networks (`None` for none); with no
/// other member, a portgroup's own `physical_network` (1.102) is the one to match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_physical_networks_agree_in_a_portgroup() {
    let app = crate::util::TestApp::start().await;
    let node = app
        .create_node(json!({"name": "physnets", "driver": "fake-hardware"}))
        .await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    let post = |path: &'static str, body: Value| {
        let app = &app;
        async move {
            app.request_at("1.102", Method::POST, path, Some(body))
                .await
        }
    };
    let patch = |version: &'static str, port: String, ops: Value| {
        let app = &app;
        async move {
            app.request_at(
                version,
                Method::PATCH,
                &format!("/v1/ports/{port}"),
                Some(ops),
            )
            .await
        }
    };
    let r = post("/v1/portgroups", json!({"node_uuid": n, "name": "bond0"})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let pg = r.body["uuid"].as_str().unwrap().to_owned();
    let port = |mac: &str, physnet: Value, pg: Option<&str>| {
        let mut body = json!({"node_uuid": n, "address": mac, "physical_network": physnet});
        if let Some(pg) = pg {
            body["portgroup_uuid"] = pg.into();
        }
        body
    };
    let r = post(
        "/v1/ports",
        port("52:54:00:00:01:01", json!("a"), Some(&pg)),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let first = r.body["uuid"].as_str().unwrap().to_owned();

    let conflict = |physnet: &str| {
        format!(
            "Port with physical network {physnet} cannot become a member of port group {pg} which has ports in physical network a."
        )
    };
    let r = post(
        "/v1/ports",
        port("52:54:00:00:01:02", json!("b"), Some(&pg)),
    )
    .await;
    assert_eq!(
        (r.status, r.fault()),
        (StatusCode::CONFLICT, conflict("b")),
        "{}",
        r.body
    );
    let r = post(
        "/v1/ports",
        port("52:54:00:00:01:02", Value::Null, Some(&pg)),
    )
    .await;
    assert_eq!(
        (r.status, r.fault()),
        (StatusCode::CONFLICT, conflict("None")),
        "{}",
        r.body
    );
    let r = post(
        "/v1/ports",
        port("52:54:00:00:01:02", json!("a"), Some(&pg)),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let second = r.body["uuid"].as_str().unwrap().to_owned();

    // Joining by PATCH, and a member changing its network (below 1.102, where a member's own
    // physical_network may still be patched).
    let r = post("/v1/ports", port("52:54:00:00:01:03", json!("b"), None)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let outside = r.body["uuid"].as_str().unwrap().to_owned();
    let join = json!([{"op": "replace", "path": "/portgroup_uuid", "value": pg}]);
    let r = patch("1.101", outside.clone(), join.clone()).await;
    assert_eq!(
        (r.status, r.fault()),
        (StatusCode::CONFLICT, conflict("b")),
        "{}",
        r.body
    );
    let r = patch(
        "1.101",
        second.clone(),
        json!([{"op": "replace", "path": "/physical_network", "value": "b"}]),
    )
    .await;
    assert_eq!(
        (r.status, r.fault()),
        (StatusCode::CONFLICT, conflict("b")),
        "{}",
        r.body
    );
    let r = patch(
        "1.101",
        outside.clone(),
        json!([
            {"op": "replace", "path": "/portgroup_uuid", "value": pg},
            {"op": "replace", "path": "/physical_network", "value": "a"},
        ]),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let members = app.get(&format!("/v1/portgroups/{pg}/ports/detail")).await;
    let mut physnets: Vec<&str> = members.body["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["physical_network"].as_str().unwrap())
        .collect();
    physnets.sort();
    assert_eq!(physnets, ["a", "a", "a"], "{}", members.body);
    // The only member may change its network.
    for p in [&second, &outside] {
        let r = patch(
            "1.101",
            p.clone(),
            json!([{"op": "remove", "path": "/portgroup_uuid"}]),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    }
    let r = patch(
        "1.101",
        first,
        json!([{"op": "replace", "path": "/physical_network", "value": "c"}]),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);

    // An empty portgroup with a physical network of its own.
    let r = post(
        "/v1/portgroups",
        json!({"node_uuid": n, "name": "bond1", "physical_network": "p"}),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let pg1 = r.body["uuid"].as_str().unwrap().to_owned();
    let r = post(
        "/v1/ports",
        port("52:54:00:00:01:04", json!("q"), Some(&pg1)),
    )
    .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(
        r.fault(),
        format!(
            "Port with physical network q cannot become a member of port group {pg1} which has ports in physical network p."
        )
    );
    let r = post(
        "/v1/ports",
        port("52:54:00:00:01:04", json!("p"), Some(&pg1)),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
}

on_both_stacks! {
/// Ports on different physical networks joining one empty portgroup at once: the check and the
/// write are one transaction that takes the node's row first, so however the creates
/// interleave, the members that were created share one physical network, and the others were
/// refused.
async fn ports_joining_a_portgroup_at_once_share_one_physical_network(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions { stack, ..ClusterOptions::default() }).await
    else {
        return;
    };
    let api = &cluster.api;
    let node = api.create_node(json!({"name": "racing-physnets", "driver": "fake-hardware"})).await;
    let n = node["uuid"].as_str().unwrap().to_owned();
    for round in 0..4 {
        let r = api.request(Method::POST, "/v1/portgroups", Some(json!({"node_uuid": n, "name": format!("bond{round}")}))).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let pg = r.body["uuid"].as_str().unwrap().to_owned();
        let creates = (0..8).map(|i| {
            let body = json!({
                "node_uuid": n,
                "address": format!("52:54:00:00:{round:02x}:{i:02x}"),
                "portgroup_uuid": pg,
                "physical_network": if i % 2 == 0 { "a" } else { "b" },
            });
            api.request_at("1.34", Method::POST, "/v1/ports", Some(body))
        });
        for r in futures::future::join_all(creates).await {
            assert!(matches!(r.status, StatusCode::CREATED | StatusCode::CONFLICT), "{}", r.body);
        }
        let members = api.get(&format!("/v1/portgroups/{pg}/ports/detail")).await;
        let physnets: std::collections::BTreeSet<&str> = members.body["ports"].as_array().unwrap().iter()
            .map(|p| p["physical_network"].as_str().unwrap()).collect();
        assert_eq!(physnets.len(), 1, "round {round}: {}", members.body);
    }
    cluster.assert_no_locks().await;
}
}

/// On the `noop` network interface a VIF attaches and detaches without ports and is never
/// listed (Ironic's `NoopNetwork` records nothing); `flat`, fake-hardware's default as Ironic's
/// generic hardware lists it, needs a free port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noop_network_records_no_vifs() {
    let app = crate::util::TestApp::start().await;
    let flat = app
        .create_node(json!({"name": "flat-net", "driver": "fake-hardware"}))
        .await;
    assert_eq!(flat["network_interface"], "flat");
    let r = app
        .request(
            Method::POST,
            "/v1/nodes/flat-net/vifs",
            Some(json!({"id": "vif-1"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(
        r.fault(),
        "Unable to attach VIF vif-1, not enough free physical ports."
    );

    let noop = app
        .create_node(
            json!({"name": "noop-net", "driver": "fake-hardware", "network_interface": "noop"}),
        )
        .await;
    let n = noop["uuid"].as_str().unwrap().to_owned();
    let r = app
        .request(
            Method::POST,
            "/v1/nodes/noop-net/vifs",
            Some(json!({"id": "vif-1"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = app
        .request(
            Method::POST,
            "/v1/nodes/noop-net/vifs",
            Some(json!({"id": "vif-1"})),
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::NO_CONTENT,
        "attaching again is no conflict: {}",
        r.body
    );
    // With a port too, nothing is recorded on it.
    let r = app
        .request(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": n, "address": "52:54:00:00:02:01"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let port = r.body["uuid"].as_str().unwrap().to_owned();
    let r = app
        .request(
            Method::POST,
            "/v1/nodes/noop-net/vifs",
            Some(json!({"id": "vif-2"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(
        app.get(&format!("/v1/ports/{port}")).await.body["internal_info"],
        json!({})
    );
    let r = app.get("/v1/nodes/noop-net/vifs").await;
    assert_eq!((r.status, &r.body), (StatusCode::OK, &json!({"vifs": []})));
    let r = app
        .request(Method::DELETE, "/v1/nodes/noop-net/vifs/vif-1", None)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = app
        .request(
            Method::DELETE,
            "/v1/nodes/noop-net/vifs/never-attached",
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = app
        .request(
            Method::POST,
            "/v1/nodes/noop-net/vifs",
            Some(json!({"name": "no id"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
}
