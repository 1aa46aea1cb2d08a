//! Routing as Ironic 39's: the answers to a version too old for a resource (`api::gates`), paths
//! without `/v1`, the states controller reached with the node after it, the heartbeat naming its
//! node in the body, empty patches and indicators at any version. The expected answers were
//! read off Ironic 39's own API (its pecan application) for the same requests.

use axum::http::{Method, StatusCode};
use ferrum::api::{
    extract::ApiVersion,
    gates::{self, GATES, Refusal},
};
use serde_json::{Value, json};

use crate::util::{Reply, TestApp};

const METHODS: [Method; 5] = [
    Method::GET,
    Method::PUT,
    Method::POST,
    Method::PATCH,
    Method::DELETE,
];

/// The status and faultstring a refusal is answered with.
fn expected(refusal: Refusal) -> (u16, String) {
    let e = refusal.error();
    (e.status().as_u16(), e.to_string())
}

fn answer(r: &Reply) -> (u16, String) {
    let fault = r.body["error_message"]
        .as_str()
        .map(|_| r.fault())
        .unwrap_or_default();
    (r.status.as_u16(), fault)
}

/// A path of `pattern` (see `gates::Gate`) naming things that exist where it matters: the node
/// `n1`, the volume connectors.
fn concrete(pattern: &str) -> String {
    let mut out = vec!["/v1".to_owned()];
    let mut previous = "";
    for seg in pattern.split('/') {
        let seg = match (seg, previous) {
            ("**", _) => break,
            ("*", "nodes") => "n1",
            ("*", "volume") => "connectors",
            ("*", _) => "x",
            (seg, _) => seg,
        };
        out.push(seg.to_owned());
        previous = seg;
    }
    out.join("/")
}

/// Every row of the gate table, for each of its methods: one version below the row's, the
/// request gets the table's refusal (the router, extractors and handlers never see it); at the
/// row's version, where no other row refuses, it is routed and answered otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_gate_refuses_below_its_version_and_routes_from_it() {
    let app = TestApp::start().await;
    app.create_node(json!({"name": "n1", "driver": "fake-hardware"}))
        .await;
    for gate in GATES {
        let path = concrete(gate.path);
        for method in METHODS
            .iter()
            .filter(|m| gate.methods.iter().any(|g| *g == "*" || *g == m.as_str()))
        {
            let below = ApiVersion(gate.since - 1);
            let refusal = gates::refusal(method, &path, below).expect("a row refuses");
            let r = app
                .request_at(&below.to_string(), method.clone(), &path, None)
                .await;
            assert_eq!(answer(&r), expected(refusal), "{method} {path} at {below}");

            let at = ApiVersion(gate.since);
            if gates::refusal(method, &path, at).is_none() {
                let r = app
                    .request_at(&at.to_string(), method.clone(), &path, None)
                    .await;
                assert_ne!(
                    answer(&r),
                    expected(gate.refusal),
                    "{method} {path} at {at}"
                );
            }
        }
    }
}

/// The answers Ironic 39 gives, status and all, to requests below a resource's version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_old_versions_are_answered_as_ironic_does() {
    let app = TestApp::start().await;
    app.create_node(json!({"name": "n1", "driver": "fake-hardware"}))
        .await;
    let not_found = (404, "The resource could not be found.");
    let method_not_allowed = (405, "The method is not allowed for this resource.");
    let no_allocations = (405, "The API version does not allow allocations");
    let rows: Vec<(Method, &str, &str, (u16, &str))> = vec![
        // Traits: the node's own handlers answer.
        (
            Method::GET,
            "/v1/nodes/n1/traits",
            "1.36",
            (406, "Request not acceptable."),
        ),
        (
            Method::GET,
            "/v1/nodes/n1/traits",
            "1.7",
            (406, "Request not acceptable."),
        ),
        (
            Method::PUT,
            "/v1/nodes/n1/traits",
            "1.36",
            method_not_allowed,
        ),
        (
            Method::PUT,
            "/v1/nodes/n1/traits/CUSTOM_X",
            "1.36",
            method_not_allowed,
        ),
        (Method::DELETE, "/v1/nodes/n1/traits", "1.36", not_found),
        (
            Method::DELETE,
            "/v1/nodes/n1/traits/CUSTOM_X",
            "1.36",
            not_found,
        ),
        // Sub-resources `_lookup` refuses, whatever the method.
        (Method::GET, "/v1/nodes/n1/vifs", "1.18", not_found),
        (Method::GET, "/v1/nodes/n1/vifs", "1.27", not_found),
        (Method::POST, "/v1/nodes/n1/vifs", "1.27", not_found),
        (Method::DELETE, "/v1/nodes/n1/vifs/v", "1.27", not_found),
        (Method::GET, "/v1/nodes/n1/portgroups", "1.23", not_found),
        (
            Method::GET,
            "/v1/nodes/n1/portgroups/detail",
            "1.23",
            not_found,
        ),
        (Method::GET, "/v1/nodes/n1/bios", "1.39", not_found),
        (Method::GET, "/v1/nodes/n1/history", "1.77", not_found),
        (Method::GET, "/v1/nodes/n1/allocation", "1.51", not_found),
        (Method::PUT, "/v1/nodes/n1/vmedia", "1.88", not_found),
        (
            Method::PUT,
            "/v1/nodes/n1/vmedia",
            "1.89",
            method_not_allowed,
        ),
        (Method::GET, "/v1/nodes/n1/vmedia", "1.92", not_found),
        (
            Method::PUT,
            "/v1/nodes/n1/volume/connectors",
            "1.31",
            not_found,
        ),
        (
            Method::GET,
            "/v1/nodes/n1/volume",
            "1.31",
            (404, "The API is not supported for this version"),
        ),
        (
            Method::PUT,
            "/v1/nodes/n1/volume",
            "1.31",
            method_not_allowed,
        ),
        // Top-level resources.
        (Method::POST, "/v1/allocations", "1.42", no_allocations),
        (Method::DELETE, "/v1/allocations/a", "1.42", no_allocations),
        (
            Method::GET,
            "/v1/allocations",
            "1.42",
            (404, "The API version does not allow allocations"),
        ),
        (
            Method::PATCH,
            "/v1/allocations/a",
            "1.56",
            (405, "The API version does not allow updating allocations"),
        ),
        (
            Method::DELETE,
            "/v1/portgroups/p",
            "1.22",
            (404, "The API is not supported for this version"),
        ),
        (Method::PUT, "/v1/volume/targets", "1.31", not_found),
        (
            Method::PUT,
            "/v1/deploy_templates/d",
            "1.54",
            (405, "The API version does not allow deploy templates"),
        ),
        (
            Method::PUT,
            "/v1/inspection_rules/r",
            "1.95",
            method_not_allowed,
        ),
        (Method::GET, "/v1/lookup", "1.21", not_found),
    ];
    for (method, path, version, (status, fault)) in rows {
        let r = app.request_at(version, method.clone(), path, None).await;
        assert_eq!(
            answer(&r),
            (status, fault.to_owned()),
            "{method} {path} at {version}"
        );
    }
}

/// A path without its version segment is the same path under `/v1`, as Ironic's root
/// controller takes it; `/` is still the root, and Ferrum's own endpoints are where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_without_the_version_are_under_v1() {
    let app = TestApp::start().await;
    let node = app
        .create_node(json!({"name": "n1", "driver": "fake-hardware"}))
        .await;
    let uuid = node["uuid"].as_str().unwrap();
    for (version, path) in [
        ("1.52", format!("/nodes/{uuid}/allocation")),
        ("1.49", "/drivers/fake-hardware/properties".to_owned()),
        (
            "1.49",
            "/drivers/fake-hardware/raid/logical_disk_properties".to_owned(),
        ),
        (
            "1.49",
            "/nodes/detail?instance_uuid=aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee".to_owned(),
        ),
        ("1.49", "/ports/detail?address=aa:bb:cc:dd:ee:ff".to_owned()),
        ("1.49", "/nodes/n1".to_owned()),
        ("1.49", "/nodes/n1/".to_owned()),
        ("1.11", "/nodes/n1/traits".to_owned()),
    ] {
        let bare = app.request_at(version, Method::GET, &path, None).await;
        let under_v1 = app
            .request_at(version, Method::GET, &format!("/v1{path}"), None)
            .await;
        assert_eq!(
            (bare.status, &bare.body),
            (under_v1.status, &under_v1.body),
            "{path}"
        );
        // (The node has no allocation: that 404 names it.)
        assert!(
            bare.status != StatusCode::NOT_FOUND || path.ends_with("/allocation"),
            "{path}: {}",
            bare.body
        );
    }
    // A change too.
    let r = app
        .request(
            Method::PATCH,
            "/nodes/n1",
            Some(json!([{"op": "add", "path": "/extra/a", "value": 1}])),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(app.node("n1").await["extra"], json!({"a": 1}));
    // Not every path is one.
    for path in ["/v2/nodes", "/v1/v1/nodes", "/foo"] {
        assert_eq!(app.get(path).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    assert_eq!(app.get("/").await.body["name"], "OpenStack Ironic API");
    assert_eq!(app.get("/healthcheck").await.status, StatusCode::OK);
    assert_eq!(app.get("/metrics").await.status, StatusCode::OK);
}

/// `/v1/nodes/states/...{ident}`: the node's states controller, reached with the node after
/// it, answers as under `/v1/nodes/{ident}/states...`, at any version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_states_controller_takes_the_node_after_it() {
    let app = TestApp::start().await;
    let node = app
        .create_node(json!({"name": "n1", "driver": "fake-hardware"}))
        .await;
    let uuid = node["uuid"].as_str().unwrap();
    for version in ["1.1", "1.49"] {
        let r = app
            .request_at(
                version,
                Method::GET,
                &format!("/v1/nodes/states/console/{uuid}"),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(
            r.body,
            json!({"console_enabled": false, "console_info": null})
        );
        let r = app
            .request_at(
                version,
                Method::GET,
                &format!("/v1/nodes/states/{uuid}"),
                None,
            )
            .await;
        let direct = app
            .request_at(
                version,
                Method::GET,
                &format!("/v1/nodes/{uuid}/states"),
                None,
            )
            .await;
        assert_eq!((r.status, &r.body), (StatusCode::OK, &direct.body));
    }
    let r = app
        .request(Method::GET, "/v1/nodes/states/console/nosuch", None)
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert_eq!(r.fault(), "Node nosuch could not be found.");
    let r = app
        .request(
            Method::PUT,
            "/v1/nodes/states/power/n1",
            Some(json!({"target": "power on"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    app.settle().await;
    assert_eq!(app.node("n1").await["power_state"], "power on");
}

/// `POST /v1/heartbeat` with the node in the body is the heartbeat of that node, its arguments
/// checked as on `/v1/heartbeat/{node}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_may_name_its_node_in_the_body() {
    let app = TestApp::start().await;
    let node = app
        .create_node(json!({"name": "n1", "driver": "fake-hardware"}))
        .await;
    let uuid = node["uuid"].as_str().unwrap();
    let url = "http://1.2.3.4:9999";
    let rows: Vec<(&str, Value, u16, &str)> = vec![
        (
            "1.22",
            json!({"node_ident": uuid, "callback_url": url, "agent_version": "9.0"}),
            400,
            "Field \"agent_version\" not recognised",
        ),
        (
            "1.22",
            json!({"node_ident": "nosuch", "callback_url": url}),
            404,
            "Node nosuch could not be found.",
        ),
        (
            "1.21",
            json!({"node_ident": uuid, "callback_url": url}),
            404,
            "The resource could not be found.",
        ),
        (
            "1.22",
            json!({"callback_url": url}),
            400,
            "Missing mandatory parameter: node_ident",
        ),
        (
            "1.1",
            json!({"callback_url": url}),
            400,
            "Missing mandatory parameter: node_ident",
        ),
        (
            "1.22",
            json!({"node_ident": uuid}),
            400,
            "Missing mandatory parameter: callback_url",
        ),
        (
            "1.62",
            json!({"node_ident": uuid, "callback_url": url}),
            400,
            "Agent token is required for heartbeat processing.",
        ),
    ];
    for (version, body, status, fault) in rows {
        let r = app
            .request_at(version, Method::POST, "/v1/heartbeat", Some(body.clone()))
            .await;
        assert_eq!(
            answer(&r),
            (status, fault.to_owned()),
            "{body} at {version}"
        );
    }
    // Named in the path, it may not be named again in the body.
    let r = app
        .request_at(
            "1.22",
            Method::POST,
            &format!("/v1/heartbeat/{uuid}"),
            Some(json!({"node_ident": uuid, "callback_url": url})),
        )
        .await;
    assert_eq!(
        answer(&r),
        (400, "Unexpected arguments: node_ident".to_owned())
    );
}

/// An empty JSON patch changes nothing and answers the resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_patch_is_a_no_op() {
    let app = TestApp::start().await;
    let r = app
        .request(
            Method::POST,
            "/v1/chassis",
            Some(json!({"description": "rack 1"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let chassis = r.body["uuid"].as_str().unwrap().to_owned();
    let r = app
        .request(
            Method::PATCH,
            &format!("/v1/chassis/{chassis}"),
            Some(json!([])),
        )
        .await;
    assert_eq!(
        (r.status, &r.body["description"]),
        (StatusCode::OK, &json!("rack 1")),
        "{}",
        r.body
    );
    app.create_node(json!({"name": "n1", "driver": "fake-hardware", "extra": {"a": 1}}))
        .await;
    let r = app.patch("n1", json!([])).await;
    assert_eq!(
        (r.status, &r.body["extra"]),
        (StatusCode::OK, &json!({"a": 1})),
        "{}",
        r.body
    );
}

/// Ironic's indicator controller has no version gate: at 1.1 the fake hardware's LED reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indicators_answer_at_any_version() {
    let app = TestApp::start().await;
    // By UUID: names are of 1.5.
    let node = app
        .create_node(json!({"name": "n1", "driver": "fake-hardware"}))
        .await;
    let uuid = node["uuid"].as_str().unwrap();
    let path = format!("/v1/nodes/{uuid}/management/indicators/led@system");
    let r = app.request_at("1.1", Method::GET, &path, None).await;
    assert_eq!(
        (r.status, &r.body),
        (StatusCode::OK, &json!({"state": "on"})),
        "{}",
        r.body
    );
    let r = app
        .request_at(
            "1.1",
            Method::GET,
            &format!("/v1/nodes/{uuid}/management/indicators"),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
}
