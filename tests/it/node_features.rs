//! The node features of API 1.33-1.51: the new fields and their version gates, traits,
//! protection, rescue, BIOS, reset_interfaces, faults, conductor groups and the `conductor` field.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Cluster, ClusterOptions, Stack, TestApp};

/// Every field of 1.33-1.49 appears from its version on, with Ironic's defaults.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn fields_of_newer_versions_appear_from_their_version_on() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(json!({"name": "n1"})).await;
    for (field, value) in [
        ("storage_interface", json!("noop")),
        ("rescue_interface", json!("fake")),
        ("bios_interface", json!("fake")),
        ("traits", json!([])),
        ("fault", Value::Null),
        ("deploy_step", json!({})),
        ("conductor_group", json!("")),
        ("automated_clean", Value::Null),
        ("protected", json!(false)),
        ("protected_reason", Value::Null),
    ] {
        assert_eq!(node[field], value, "{field} in {node}");
    }
    let conductor = node["conductor"].as_str().expect("conductor is set").to_owned();
    assert_eq!(conductor, app.host(), "{conductor}");

    let old = api.request_at("1.31", Method::GET, "/v1/nodes/n1", None).await;
    for field in ["storage_interface", "traits", "fault", "conductor", "protected"] {
        assert!(old.body.get(field).is_none(), "{field} shown at 1.31");
    }
    // Each field is shown from its own version, not before.
    for (version, field) in [("1.32", "storage_interface"), ("1.36", "traits"), ("1.41", "fault"), ("1.48", "conductor")] {
        let r = api.request_at(version, Method::GET, "/v1/nodes/n1", None).await;
        assert!(r.body.get(field).is_none(), "{field} shown at {version}");
    }
    let r = api.request_at("1.48", Method::GET, "/v1/nodes?fields=conductor", None).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);

    // Listing: the conductor and fault filters, fields=conductor.
    let r = api.get(&format!("/v1/nodes?conductor={conductor}&fields=uuid,conductor")).await;
    assert_eq!(r.body["nodes"], json!([{"uuid": node["uuid"], "conductor": conductor, "links": node["links"]}]));
    let r = api.get("/v1/nodes?conductor=nobody").await;
    assert_eq!(r.body["nodes"], json!([]));
    let r = api.get("/v1/nodes?fault=power%20failure").await;
    assert_eq!(r.body["nodes"], json!([]));
    let r = api.get("/v1/nodes?fault=bogus").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.fault().contains("Unrecognized fault \"bogus\""), "{}", r.fault());
    let r = api.request_at("1.41", Method::GET, "/v1/nodes?fault=power%20failure", None).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE);

    // Interfaces, conductor group and automated_clean at create and PATCH, with their gates.
    let n2 = api
        .create_node(json!({"driver": "fake-hardware", "name": "n2", "storage_interface": "fake",
                            "bios_interface": "fake", "rescue_interface": "fake",
                            "automated_clean": false}))
        .await;
    assert_eq!((&n2["storage_interface"], &n2["bios_interface"], &n2["rescue_interface"]), (&json!("fake"), &json!("fake"), &json!("fake")));
    assert_eq!(n2["automated_clean"], false);
    let r = api
        .request_at("1.37", Method::POST, "/v1/nodes", Some(json!({"driver": "fake-hardware", "rescue_interface": "fake"})))
        .await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = api
        .request_at("1.45", Method::PATCH, "/v1/nodes/n2", Some(json!([{"op": "replace", "path": "/conductor_group", "value": "x"}])))
        .await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = api.patch("n2", json!([{"op": "replace", "path": "/automated_clean", "value": true},
                                     {"op": "replace", "path": "/storage_interface", "value": "noop"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!((&r.body["automated_clean"], &r.body["storage_interface"]), (&json!(true), &json!("noop")));
    let r = api.patch("n2", json!([{"op": "replace", "path": "/bios_interface", "value": "redfish"}])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.fault().contains("redfish"), "{}", r.fault());
    let r = api.create_node_reply(json!({"driver": "fake-hardware", "conductor_group": "has space"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.fault(), "Expected a conductor group but received has space.");
    // A group no conductor serves would strand the node: refused as Ironic does.
    let r = api.patch("n2", json!([{"op": "replace", "path": "/conductor_group", "value": "Rack-9"}])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("No valid host was found") && r.fault().contains("\"rack-9\""), "{}", r.fault());
    assert_eq!(api.node("n2").await["conductor_group"], "");

    // reset_interfaces (1.45): only with a driver in the patch; resets what the patch leaves out.
    let r = api.patch("n2", json!([{"op": "replace", "path": "/deploy_interface", "value": "direct"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = api
        .request(Method::PATCH, "/v1/nodes/n2?reset_interfaces=true", Some(json!([{"op": "add", "path": "/extra/a", "value": 1}])))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.fault().contains("reset_interfaces"), "{}", r.fault());
    let r = api
        .request(Method::PATCH, "/v1/nodes/n2?reset_interfaces=true",
                 Some(json!([{"op": "replace", "path": "/driver", "value": "fake-hardware"},
                             {"op": "replace", "path": "/rescue_interface", "value": "no-rescue"}])))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["deploy_interface"], "fake", "reset to the default");
    assert_eq!(r.body["bios_interface"], "fake", "reset to the default");
    assert_eq!(r.body["rescue_interface"], "no-rescue", "kept: the patch set it");
    let r = api
        .request_at("1.44", Method::PATCH, "/v1/nodes/n2?reset_interfaces=true",
                    Some(json!([{"op": "replace", "path": "/driver", "value": "fake-hardware"}])))
        .await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE);

    // BIOS (1.40): the fake BIOS caches no settings.
    let r = api.get("/v1/nodes/n2/bios").await;
    assert_eq!((r.status, &r.body), (StatusCode::OK, &json!({"bios": []})));
    let r = api.get("/v1/nodes/n2/bios/ProcVirtualization").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.fault().ends_with("doesn't have a BIOS setting 'ProcVirtualization'"), "{}", r.fault());
    let r = api.request_at("1.39", Method::GET, "/v1/nodes/n2/bios", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    // The /v1 document announces conductors from 1.49.
    assert!(api.get("/v1").await.body.get("conductors").is_some());
    let r = api.request_at("1.48", Method::GET, "/v1", None).await;
    assert!(r.body.get("conductors").is_none());
    app.assert_no_locks().await;
}

/// /v1/nodes/{id}/traits: add, replace, remove one or all, with Ironic's checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn traits_are_added_replaced_and_removed() {
    let app = TestApp::start().await;
    let api = app.api();
    api.create_node(json!({"driver": "fake-hardware", "name": "t1"})).await;
    let traits = |body: &Value| body["traits"].clone();

    let r = api.request(Method::PUT, "/v1/nodes/t1/traits/CUSTOM_GPU", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request(Method::PUT, "/v1/nodes/t1/traits/HW_CPU_X86_VMX", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(traits(&api.get("/v1/nodes/t1/traits").await.body), json!(["CUSTOM_GPU", "HW_CPU_X86_VMX"]));
    assert_eq!(api.node("t1").await["traits"], json!(["CUSTOM_GPU", "HW_CPU_X86_VMX"]));

    let r = api.request(Method::PUT, "/v1/nodes/t1/traits", Some(json!({"traits": ["CUSTOM_B", "CUSTOM_A"]}))).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(traits(&api.get("/v1/nodes/t1/traits").await.body), json!(["CUSTOM_A", "CUSTOM_B"]));

    for (method, path, body, status, needle) in [
        (Method::PUT, "/v1/nodes/t1/traits/lower_case", None, 400, "Schema error for trait"),
        (Method::PUT, "/v1/nodes/t1/traits", None, 400, "A single node trait may be added"),
        (Method::PUT, "/v1/nodes/t1/traits", Some(json!({"traits": ["CUSTOM_OK", "bad"]})), 400, "Schema error for body"),
        (Method::PUT, "/v1/nodes/t1/traits/CUSTOM_C", Some(json!({"traits": []})), 400, "No body should be provided"),
        (Method::DELETE, "/v1/nodes/t1/traits/CUSTOM_NOPE", None, 404, "doesn't have a trait 'CUSTOM_NOPE'"),
        (Method::PATCH, "/v1/nodes/t1", Some(json!([{"op": "add", "path": "/traits", "value": ["CUSTOM_X"]}])), 400, "Cannot patch /traits"),
        (Method::GET, "/v1/nodes/nosuch/traits", None, 404, "could not be found"),
    ] {
        let r = api.request(method.clone(), path, body).await;
        assert_eq!(r.status.as_u16(), status, "{method} {path}: {}", r.body);
        assert!(r.fault().contains(needle), "{method} {path}: {}", r.fault());
    }
    let too_many: Vec<String> = (0..51).map(|i| format!("CUSTOM_T{i}")).collect();
    let r = api.request(Method::PUT, "/v1/nodes/t1/traits", Some(json!({"traits": too_many}))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.fault().contains("maximum number of traits per node (51 vs. 50)"), "{}", r.fault());
    // Below 1.37 Ironic's node controller takes the GET as its own with `fields=traits`: 406.
    let r = api.request_at("1.36", Method::GET, "/v1/nodes/t1/traits", None).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(traits(&api.get("/v1/nodes/t1/traits").await.body), json!(["CUSTOM_A", "CUSTOM_B"]), "refusals changed nothing");

    let r = api.request(Method::DELETE, "/v1/nodes/t1/traits/CUSTOM_A", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(traits(&api.get("/v1/nodes/t1/traits").await.body), json!(["CUSTOM_B"]));
    let r = api.request(Method::DELETE, "/v1/nodes/t1/traits", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(traits(&api.get("/v1/nodes/t1/traits").await.body), json!([]));
    app.assert_no_locks().await;
}

/// protected (1.48): only in active or rescue; then no undeploy, rebuild or delete (403).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn a_protected_node_cannot_be_undeployed_rebuilt_or_deleted() {
    let app = TestApp::start().await;
    let api = app.api();
    api.available_node(json!({"name": "p1"})).await;
    let protect = json!([{"op": "replace", "path": "/protected", "value": true},
                         {"op": "replace", "path": "/protected_reason", "value": "production db"}]);
    let r = api.patch("p1", protect.clone()).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains("can only be made protected in provision states 'active' or 'rescue'"), "{}", r.fault());
    let r = api.patch("p1", json!([{"op": "replace", "path": "/protected_reason", "value": "why"}])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.fault(), "The protected_reason field can only be set when protected is True");

    api.accepted("p1", "active").await;
    api.wait_for("p1", "active").await;
    let r = api.patch("p1", protect).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!((&r.body["protected"], &r.body["protected_reason"]), (&json!(true), &json!("production db")));

    let forbidden = |r: crate::util::cluster::Reply| {
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
        assert!(r.fault().ends_with("is protected and cannot be undeployed, rebuilt or deleted"), "{}", r.fault());
    };
    forbidden(api.provision("p1", "deleted").await);
    forbidden(api.provision("p1", "rebuild").await);
    api.request(Method::PUT, "/v1/nodes/p1/maintenance", Some(json!({"reason": "x"}))).await;
    forbidden(api.request(Method::DELETE, "/v1/nodes/p1", None).await);
    api.request(Method::DELETE, "/v1/nodes/p1/maintenance", None).await;
    let node = api.node("p1").await;
    assert_eq!((node["provision_state"].as_str(), &node["reservation"]), (Some("active"), &Value::Null));

    // Unprotecting forgets the reason; then the node leaves active as usual.
    let r = api.patch("p1", json!([{"op": "replace", "path": "/protected", "value": false}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!((&r.body["protected"], &r.body["protected_reason"]), (&json!(false), &Value::Null));
    api.accepted("p1", "deleted").await;
    api.wait_for("p1", "available").await;
    app.assert_no_locks().await;
}

/// rescue / unrescue (1.38) on the fake rescue interface; a `no-rescue` node is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn rescue_and_unrescue() {
    let app = TestApp::start().await;
    let api = app.api();
    api.available_node(json!({"name": "r1", "rescue_interface": "fake"})).await;
    api.available_node(json!({"name": "r2", "rescue_interface": "no-rescue"})).await;
    for n in ["r1", "r2"] {
        api.accepted(n, "active").await;
        api.wait_for(n, "active").await;
    }
    let rescue = |node: &'static str, body: Value| async move {
        api.request(Method::PUT, &format!("/v1/nodes/{node}/states/provision"), Some(body)).await
    };
    let r = rescue("r1", json!({"target": "rescue"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.fault().starts_with("A non-empty \"rescue_password\" is required"), "{}", r.fault());
    let r = rescue("r1", json!({"target": "rebuild", "rescue_password": "pw"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.fault().contains("only valid when setting target provision state to rescue"), "{}", r.fault());
    let r = rescue("r2", json!({"target": "rescue", "rescue_password": "pw"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.fault(), "Driver fake-hardware does not support rescue (disabled or not implemented).");
    let r = api.request_at("1.37", Method::PUT, "/v1/nodes/r1/states/provision", Some(json!({"target": "rescue", "rescue_password": "pw"}))).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE);

    let r = rescue("r1", json!({"target": "rescue", "rescue_password": "s3cret"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = api.wait_for("r1", "rescue").await;
    assert_eq!(node["instance_info"]["rescue_password"], "******");
    assert_eq!(node["target_provision_state"], Value::Null);
    // Protection may be set in rescue too.
    let r = api.patch("r1", json!([{"op": "replace", "path": "/protected", "value": true}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.patch("r1", json!([{"op": "replace", "path": "/protected", "value": false}])).await;

    api.accepted("r1", "unrescue").await;
    let node = api.wait_for("r1", "active").await;
    assert!(node["instance_info"].get("rescue_password").is_none(), "{node}");
    app.assert_no_locks().await;
}

/// Conductor groups: a node goes only to a conductor of its own group, and moves when its group
/// changes; `conductor` and /v1/conductors show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_are_served_by_the_conductors_of_their_group() {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack: Stack::MultiHost,
        conductors: 2,
        conductor_groups: vec![String::new(), "rack-1".to_owned()],
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let (plain, rack) = (&cluster.conductor_hosts[0], &cluster.conductor_hosts[1]);
    let r = api.get("/v1/conductors").await;
    let mut groups: Vec<(String, String)> = r.body["conductors"]
        .as_array()
        .expect("conductors")
        .iter()
        .map(|c| {
            (
                c["hostname"].as_str().unwrap_or_default().to_owned(),
                c["conductor_group"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    groups.sort();
    assert_eq!(
        groups,
        vec![
            (plain.clone(), String::new()),
            (rack.clone(), "rack-1".to_owned())
        ]
    );

    // Every node of the default group lands on the one default conductor, every rack-1 node on
    // the other, whatever its UUID.
    for i in 0..6 {
        let n = api
            .available_node(json!({"name": format!("g{i}"), "conductor_group": "RACK-1"}))
            .await;
        assert_eq!(
            (n["conductor_group"].as_str(), n["conductor"].as_str()),
            (Some("rack-1"), Some(rack.as_str()))
        );
        let n = api.available_node(json!({"name": format!("d{i}")})).await;
        assert_eq!(n["conductor"].as_str(), Some(plain.as_str()));
    }
    let r = api
        .get(&format!(
            "/v1/nodes?conductor_group=rack-1&conductor={rack}"
        ))
        .await;
    assert_eq!(r.body["nodes"].as_array().map(Vec::len), Some(6));

    // Work on a rack-1 node is done by the rack-1 conductor (its log says so).
    api.accepted("g0", "active").await;
    api.wait_for("g0", "active").await;
    let uuid = api.node("g0").await["uuid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        cluster.log_of("conductor1").contains(&uuid),
        "rack-1 conductor did not serve g0"
    );
    assert!(
        !cluster.log_of("conductor0").contains(&uuid),
        "default conductor served g0"
    );

    let r = api
        .patch(
            "g1",
            json!([{"op": "replace", "path": "/conductor_group", "value": ""}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["conductor"].as_str(), Some(plain.as_str()));
    cluster.assert_no_locks().await;
}

/// deploy_step (1.44) names the step while the deploy runs, and is empty once it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn deploy_step_is_shown_while_the_deploy_runs() {
    let app = TestApp::start().await;
    let api = app.api();
    api.available_node(json!({"name": "s1", "driver_info": {"fake_deploy_delay": 2}})).await;
    api.accepted("s1", "active").await;
    let node = api.node("s1").await;
    assert_eq!(node["provision_state"], "deploying", "{node}");
    assert_eq!(
        node["deploy_step"],
        json!({"interface": "deploy", "step": "deploy", "priority": 100, "args": {}})
    );
    assert_eq!(api.wait_for("s1", "active").await["deploy_step"], json!({}));
    api.accepted("s1", "deleted").await;
    assert_eq!(api.wait_for("s1", "available").await["deploy_step"], json!({}));
    app.assert_no_locks().await;
}

/// owner (1.50): written at create and by PATCH, reset by `remove`, filtered on, gated by version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn owner_is_a_field_of_1_50() {
    let app = TestApp::start().await;
    let api = app.api();
    let body = json!({"driver": "fake-hardware", "name": "o1", "owner": "team-a"});
    let r = api.request_at("1.49", Method::POST, "/v1/nodes", Some(body.clone())).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = api.request_at("1.50", Method::POST, "/v1/nodes", Some(body)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["owner"], "team-a");
    let shown = api.request_at("1.50", Method::GET, "/v1/nodes/o1", None).await;
    assert_eq!(shown.body["owner"], "team-a");
    let old = api.request_at("1.49", Method::GET, "/v1/nodes/o1", None).await;
    assert!(old.body.get("owner").is_none(), "owner shown at 1.49: {}", old.body);

    let patch = |ops: Value| api.request_at("1.50", Method::PATCH, "/v1/nodes/o1", Some(ops));
    let r = patch(json!([{"op": "replace", "path": "/owner", "value": "team-b"}])).await;
    assert_eq!((r.status, &r.body["owner"]), (StatusCode::OK, &json!("team-b")), "{}", r.body);
    let r = patch(json!([{"op": "replace", "path": "/owner", "value": "x".repeat(256)}])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("owner must be at most 255 characters"), "{}", r.fault());
    let r = patch(json!([{"op": "replace", "path": "/owner", "value": 5}])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = api
        .request_at("1.49", Method::PATCH, "/v1/nodes/o1", Some(json!([{"op": "remove", "path": "/owner"}])))
        .await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);

    let r = api.request_at("1.50", Method::GET, "/v1/nodes?owner=team-b&fields=name,owner", None).await;
    assert_eq!(r.body["nodes"], json!([{"name": "o1", "owner": "team-b", "links": shown.body["links"]}]));
    let r = api.request_at("1.50", Method::GET, "/v1/nodes?owner=team-a", None).await;
    assert_eq!(r.body["nodes"], json!([]));
    let r = api.request_at("1.49", Method::GET, "/v1/nodes?owner=team-b", None).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);

    let r = patch(json!([{"op": "remove", "path": "/owner"}])).await;
    assert_eq!((r.status, &r.body["owner"]), (StatusCode::OK, &Value::Null), "{}", r.body);
    app.assert_no_locks().await;
}

/// description (1.51): free text of at most 4096 characters, and the description_contains filter,
/// which matches its text literally (`%` and `_` are not wildcards).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn description_is_a_field_of_1_51() {
    let app = TestApp::start().await;
    let api = app.api();
    let body = json!({"driver": "fake-hardware", "name": "d1", "description": "rack 4, 100% GPU"});
    let r = api.request_at("1.50", Method::POST, "/v1/nodes", Some(body.clone())).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = api.request_at("1.51", Method::POST, "/v1/nodes", Some(body)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["description"], "rack 4, 100% GPU");
    api.create_node(json!({"driver": "fake-hardware", "name": "d2"})).await;
    let old = api.request_at("1.50", Method::GET, "/v1/nodes/d1", None).await;
    assert!(old.body.get("description").is_none(), "description shown at 1.50");

    let names = |path: String| async move {
        let r = api.request_at("1.51", Method::GET, &path, None).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.body);
        r.body["nodes"].as_array().unwrap().iter().map(|n| n["name"].clone()).collect::<Vec<_>>()
    };
    assert_eq!(names("/v1/nodes?description_contains=GPU".into()).await, [json!("d1")]);
    assert_eq!(names("/v1/nodes?description_contains=0%25%20G".into()).await, [json!("d1")]);
    assert!(names("/v1/nodes?description_contains=4_%20".into()).await.is_empty(), "_ is literal");
    assert!(names("/v1/nodes?description_contains=%25%25".into()).await.is_empty(), "% is literal");
    let r = api.request_at("1.50", Method::GET, "/v1/nodes?description_contains=GPU", None).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);

    let patch = |ops: Value| api.request_at("1.51", Method::PATCH, "/v1/nodes/d2", Some(ops));
    let r = patch(json!([{"op": "add", "path": "/description", "value": "spare"}])).await;
    assert_eq!((r.status, &r.body["description"]), (StatusCode::OK, &json!("spare")), "{}", r.body);
    let r = patch(json!([{"op": "replace", "path": "/description", "value": "é".repeat(4096)}])).await;
    assert_eq!(r.status, StatusCode::OK, "4096 characters fit: {}", r.body);
    let r = patch(json!([{"op": "replace", "path": "/description", "value": "x".repeat(4097)}])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("description must be at most 4096 characters"), "{}", r.fault());
    let r = patch(json!([{"op": "remove", "path": "/description"}])).await;
    assert_eq!((r.status, &r.body["description"]), (StatusCode::OK, &Value::Null), "{}", r.body);
    app.assert_no_locks().await;
}
