//! The deploy ramdisk's endpoints: lookup and heartbeat (API 1.22), driven as the
//! agent drives them against a node waiting for it in `wait call-back`; and the agent token,
//! which only API 1.62 hands out (above Ferrum's range), through the conductor's functions in
//! process.

use axum::http::Method as AxumMethod;
use ferrum::{conductor::agent, db, node::AGENT_TOKEN_KEY};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{TestApp, cluster::Reply};

const MAC: &str = "52:54:00:12:34:56";
const URL: &str = "http://127.0.0.1:9999";

/// GET /v1/lookup?node_uuid= at 1.22, in process.
async fn lookup_by_uuid(app: &TestApp, uuid: &str) -> Reply {
    let path = format!("/v1/lookup?node_uuid={uuid}");
    app.request_at("1.22", AxumMethod::GET, &path, None).await
}

/// A node deployed with `direct` and an HTTP image: it waits for its agent in `wait call-back`.
fn waiting_node(name: &str) -> Value {
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
        "properties": {"cpus": 2},
    })
}

/// The agent of a node in `wait call-back` finds it by MAC (ignoring invalid addresses) or by
/// UUID, and its heartbeats are recorded; lookup refuses nodes in states without an agent, and
/// bad input gets Ironic's answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn the_agent_looks_its_node_up_and_heartbeats() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(waiting_node("agent-node")).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.add_port(&uuid, MAC).await;
    let enrolled = api.create_node(json!({"name": "enrolled", "driver": "fake-hardware"})).await;
    let enrolled = enrolled["uuid"].as_str().unwrap().to_owned();

    // The /v1 document lists the endpoints from 1.22.
    let r = api.request_at("1.21", Method::GET, "/v1", None).await;
    assert!(r.body.get("lookup").is_none(), "{}", r.body);
    let r = api.request_at("1.22", Method::GET, "/v1", None).await;
    assert!(r.body["lookup"][0]["href"].as_str().unwrap().ends_with("/v1/lookup/"), "{}", r.body);
    assert!(r.body["heartbeat"][0]["href"].as_str().unwrap().ends_with("/v1/heartbeat/"), "{}", r.body);

    // Nodes in states without an agent are not found (`restrict_lookup`), as unknown ones are.
    let missing = "0e0b4a7e-5a44-4c10-a7a3-55d0c1b26f5e";
    let lookups = [
        ("1.22", format!("/v1/lookup?addresses={MAC}"), StatusCode::NOT_FOUND, "Resource could not be found."),
        ("1.22", format!("/v1/lookup?node_uuid={enrolled}"), StatusCode::NOT_FOUND, "Resource could not be found."),
        ("1.22", format!("/v1/lookup?node_uuid={missing}"), StatusCode::NOT_FOUND, "Resource could not be found."),
        ("1.22", "/v1/lookup?addresses=52:54:00:00:00:99".to_owned(), StatusCode::NOT_FOUND, "Resource could not be found."),
        ("1.22", "/v1/lookup".to_owned(), StatusCode::BAD_REQUEST, "At least one of 'addresses' and 'node_uuid' parameters is required"),
        ("1.22", "/v1/lookup?addresses=bogus,,zz".to_owned(), StatusCode::BAD_REQUEST, "At least one of 'addresses' and 'node_uuid'"),
        ("1.22", "/v1/lookup?node_uuid=not-a-uuid".to_owned(), StatusCode::BAD_REQUEST, "Expected UUID for node_uuid: not-a-uuid"),
        ("1.21", format!("/v1/lookup?addresses={MAC}"), StatusCode::NOT_FOUND, "could not be found"),
    ];
    for (version, path, status, fault) in &lookups {
        let r = api.request_at(version, Method::GET, path, None).await;
        assert_eq!(r.status, *status, "{version} {path}: {}", r.body);
        assert!(r.fault().contains(fault), "{version} {path}: {}", r.fault());
    }

    api.accepted(&uuid, "active").await;
    api.wait_for(&uuid, "wait call-back").await;

    // By MAC (any case, invalid ones ignored) and by UUID: the node's four fields and links,
    // and the agent's configuration; no token below 1.62.
    for path in [
        format!("/v1/lookup?addresses=nonsense,{}", MAC.to_uppercase()),
        format!("/v1/lookup?node_uuid={uuid}"),
        format!("/v1/lookup?addresses=52:54:00:00:00:99&node_uuid={uuid}"),
    ] {
        let r = api.request_at("1.22", Method::GET, &path, None).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.body);
        let found = &r.body["node"];
        let mut keys: Vec<&str> = found.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["driver_internal_info", "instance_info", "links", "properties", "uuid"], "{path}");
        assert_eq!(found["uuid"], uuid.as_str());
        assert_eq!(found["properties"], json!({"cpus": 2}));
        assert!(found["links"][0]["href"].as_str().unwrap().ends_with(&format!("/v1/nodes/{uuid}")));
        let config = &r.body["config"];
        assert_eq!(config["heartbeat_timeout"], 300, "{config}");
        assert_eq!(config["metrics"]["backend"], "noop");
        assert_eq!(config["metrics_statsd"]["statsd_port"], 8125);
        assert!(config.get("agent_token").is_none(), "{config}");
    }

    // A heartbeat is recorded in driver_internal_info, answered 202 with no body.
    let hb = format!("/v1/heartbeat/{uuid}");
    let r = api.request_at("1.36", Method::POST, &hb, Some(json!({"callback_url": URL, "agent_version": "10.0.0"}))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(r.body, Value::Null);
    let info = api.node(&uuid).await["driver_internal_info"].clone();
    assert_eq!(info["agent_url"], URL, "{info}");
    assert_eq!(info["agent_version"], "10.0.0");
    assert!(info["agent_last_heartbeat"].is_string(), "{info}");
    // The deploy goes on from the heartbeat: the conductor asks the agent for its steps, and
    // nothing listens at its URL, so the deploy fails saying so (unlocked, agent still known).
    let failed = api.wait_for(&uuid, "deploy failed").await;
    let error = failed["last_error"].as_str().unwrap();
    assert!(error.starts_with("Deploy step deploy.write_image failed: Could not reach the agent of node"), "{error}");
    assert!(error.contains(URL), "{error}");
    // By name too: accepted, and dropped in a state that takes no heartbeats (as Ironic does).
    let info = api.node(&uuid).await["driver_internal_info"].clone();
    let r = api.request_at("1.36", Method::POST, "/v1/heartbeat/agent-node", Some(json!({"callback_url": URL, "agent_version": "10.0.0"}))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(api.node(&uuid).await["driver_internal_info"], info);

    let ok = |extra: Value| {
        let mut body = json!({"callback_url": URL, "agent_version": "10.0.0"});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        Some(body)
    };
    let rows = [
        ("1.36", hb.clone(), Some(json!({})), StatusCode::BAD_REQUEST, "Missing mandatory parameter: callback_url"),
        ("1.36", hb.clone(), None, StatusCode::BAD_REQUEST, "Missing mandatory parameter: callback_url"),
        ("1.36", hb.clone(), ok(json!({"callback_url": "ftp://127.0.0.1:9999"})), StatusCode::BAD_REQUEST, "An issue with the supplied \"callback_url\" has been detected."),
        ("1.36", hb.clone(), ok(json!({"callback_url": "127.0.0.1:9999"})), StatusCode::BAD_REQUEST, "An issue with the supplied \"callback_url\""),
        ("1.36", hb.clone(), ok(json!({"callback_url": 9999})), StatusCode::BAD_REQUEST, "Expected string for callback_url: 9999"),
        ("1.36", hb.clone(), ok(json!({"callback_url": "http://127.0.0.1:9998"})), StatusCode::BAD_REQUEST, "Detected change in ramdisk provided \"callback_url\""),
        ("1.22", hb.clone(), ok(json!({})), StatusCode::BAD_REQUEST, "Field \"agent_version\" not recognised"),
        ("1.51", hb.clone(), ok(json!({"agent_verify_ca": "CERT"})), StatusCode::BAD_REQUEST, "Field \"agent_verify_ca\" not recognised in this version"),
        ("1.51", hb.clone(), ok(json!({"agent_status": "start"})), StatusCode::BAD_REQUEST, "Fields \"agent_status\" and \"agent_status_message\" not recognised."),
        ("1.36", hb.clone(), ok(json!({"agent_token": "guessed"})), StatusCode::UNAUTHORIZED, "Invalid or missing agent token received."),
        ("1.36", hb.clone(), ok(json!({"bogus": 1})), StatusCode::BAD_REQUEST, "Unexpected arguments: bogus"),
        ("1.22", hb.clone(), Some(json!({"callback_url": URL})), StatusCode::BAD_REQUEST, "Agent did not transmit a version"),
        ("1.21", hb.clone(), ok(json!({})), StatusCode::NOT_FOUND, "could not be found"),
        ("1.36", format!("/v1/heartbeat/{missing}"), ok(json!({})), StatusCode::NOT_FOUND, "could not be found"),
    ];
    for (version, path, body, status, fault) in rows {
        let r = api.request_at(version, Method::POST, &path, body.clone()).await;
        assert_eq!(r.status, status, "{version} {body:?}: {}", r.body);
        assert!(r.fault().contains(fault), "{version} {body:?}: {}", r.fault());
    }
    let r = api.request_at("1.36", Method::GET, &hb, None).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{}", r.body);
    // None of them changed what was recorded.
    let after = api.node(&uuid).await["driver_internal_info"].clone();
    assert_eq!(after, info);

    // A heartbeat in a state without an agent is accepted and dropped.
    let r = api.request_at("1.36", Method::POST, &format!("/v1/heartbeat/{enrolled}"), Some(json!({"callback_url": URL, "agent_version": "10.0.0"}))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(api.node(&enrolled).await["driver_internal_info"], json!({}));

    // Torn down, the node forgets its agent (the next deploy's agent may listen elsewhere).
    api.accepted(&uuid, "deleted").await;
    let node = api.wait_for(&uuid, "available").await;
    assert!(node["driver_internal_info"].get("agent_url").is_none(), "{node}");
    app.assert_no_locks().await;
}

/// The agent token (API 1.62, Ironic's `get_node_with_token`), through the conductor: made once
/// with a conditional write, returned to the first caller only, masked everywhere a node is
/// shown, and required of every heartbeat once the node has it (checked in constant time).
/// A locked node: its token is not made (409), and a heartbeat is refused with 409 until the
/// agent's URL is known, then accepted and skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_token_is_made_once_and_required_after() {
    let app = TestApp::start().await;
    let node = app.available_node(waiting_node("tokened")).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    app.accepted(&uuid, "active").await;
    app.wait_for(&uuid, "wait call-back").await;
    let ctx = app.conductor();

    // A locked node gets no token.
    assert!(
        db::nodes::reserve(app.db(), &uuid, "elsewhere", None)
            .await
            .unwrap()
    );
    let read = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    let e = agent::get_node_with_token(ctx, read, None)
        .await
        .unwrap_err();
    assert!(
        matches!(e, ferrum::error::Error::NodeLocked { .. }),
        "{e:?}"
    );
    // Nor is a heartbeat recorded while the agent's URL is unknown: 409, so that it retries.
    let beat = json!({"callback_url": URL, "agent_version": "10.0.0"});
    let hb = format!("/v1/heartbeat/{uuid}");
    let r = app
        .request_at("1.36", AxumMethod::POST, &hb, Some(beat.clone()))
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        db::nodes::unreserve(app.db(), &uuid, "elsewhere")
            .await
            .unwrap()
    );

    let read = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    let first = agent::get_node_with_token(ctx, read, None).await.unwrap();
    let token = first.driver_internal_info[AGENT_TOKEN_KEY]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(token.len(), 64);
    let stored = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    assert_eq!(stored.driver_internal_info[AGENT_TOKEN_KEY], token.as_str());
    let again = agent::get_node_with_token(ctx, stored, None).await.unwrap();
    assert_eq!(
        again.driver_internal_info[AGENT_TOKEN_KEY],
        agent::TOKEN_MASK
    );
    let stored = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    assert_eq!(
        stored.driver_internal_info[AGENT_TOKEN_KEY],
        token.as_str(),
        "made once"
    );

    // Shown masked: the node, and lookup's node (whose config has no token below 1.62).
    let shown = app.node(&uuid).await;
    assert_eq!(
        shown["driver_internal_info"][AGENT_TOKEN_KEY], "******",
        "{shown}"
    );
    let r = lookup_by_uuid(&app, &uuid).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body["node"]["driver_internal_info"][AGENT_TOKEN_KEY],
        "******"
    );
    assert!(!r.body.to_string().contains(&token), "{}", r.body);

    // Heartbeats must carry it now: a wrong or missing one is refused as a bad credential (401,
    // where Ironic answers 400).
    for (given, status) in [
        (None, 401),
        (Some("wrong".to_owned()), 401),
        (Some(format!("{token}x")), 401),
        (Some(token.clone()), 202),
    ] {
        let mut body = beat.clone();
        if let Some(given) = &given {
            body["agent_token"] = json!(given);
        }
        let r = app
            .request_at("1.36", AxumMethod::POST, &hb, Some(body))
            .await;
        assert_eq!(r.status, status, "{given:?}: {}", r.body);
        if status == 401 {
            assert_eq!(r.fault(), "Invalid or missing agent token received.");
        }
    }
    // The recorded heartbeat continues the deploy; nothing listens at the agent's URL, so it
    // fails, unlocked, the agent still known.
    app.wait_for(&uuid, "deploy failed").await;
    let recorded = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    assert_eq!(recorded.driver_internal_info["agent_url"], URL);
    let error = recorded.last_error.clone().unwrap_or_default();
    assert!(error.contains("Could not reach the agent"), "{error}");

    // Locked, with the URL known: accepted, and this heartbeat is skipped (nothing written).
    assert!(
        db::nodes::reserve(app.db(), &uuid, "elsewhere", None)
            .await
            .unwrap()
    );
    let mut body = beat.clone();
    body["agent_token"] = json!(token);
    let r = app
        .request_at("1.36", AxumMethod::POST, &hb, Some(body))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    // A wrong token is refused even so.
    let r = app
        .request_at("1.36", AxumMethod::POST, &hb, Some(beat.clone()))
        .await;
    assert_eq!(r.status, 401, "{}", r.body);
    let unchanged = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    assert_eq!(unchanged.version, recorded.version);
    assert!(
        db::nodes::unreserve(app.db(), &uuid, "elsewhere")
            .await
            .unwrap()
    );
}

/// With `restrict_lookup` off, lookup finds a node in any state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_unrestricted_finds_a_node_in_any_state() {
    let app = TestApp::builder()
        .configure(|c| c.api.restrict_lookup = false)
        .start()
        .await;
    let node = app.create_node(json!({"driver": "fake-hardware"})).await;
    let uuid = node["uuid"].as_str().unwrap();
    let r = lookup_by_uuid(&app, uuid).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["node"]["uuid"], uuid);
}
