//! In-band inspection (the `agent` inspect interface, API 1.84), on both stacks: the real,
//! unmodified Ironic Python Agent (in the shared sandbox) posts its inventory to
//! `/v1/continue_inspection`, which finishes the inspection in `manageable` with the inventory
//! stored (1.81) and `cpu_arch` set; Ironic's default hooks refuse the sandbox's only NIC (it is
//! loopback), so that agent's inspection fails with their reason; and posted data (in process,
//! [`TestApp`]): its version gate, bad input, lookup by MAC or node UUID, the ports made for the
//! PXE NIC, the agent's own error, and the inspect wait timeout.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{
    Api, Cluster, ClusterOptions, Stack, TestApp,
    ipa::{Agent, random_mac},
    ipa_sandbox, on_both_stacks,
};

/// A cluster whose conductors check waits every second, fail an inspection after `timeout`
/// seconds and run `hooks` (Ironic's defaults when None).
pub(crate) async fn cluster(stack: Stack, timeout: u64, hooks: Option<&str>) -> Option<Cluster> {
    let mut env = vec![
        ("FERRUM_INSPECT_WAIT_TIMEOUT", timeout.to_string()),
        ("FERRUM_CHECK_PROVISION_STATE_INTERVAL", "1".to_owned()),
    ];
    if let Some(hooks) = hooks {
        env.push(("FERRUM_INSPECTION_HOOKS", hooks.to_owned()));
    }
    Cluster::start(ClusterOptions {
        stack,
        env,
        ..ClusterOptions::default()
    })
    .await
}

/// The service in process with [`cluster`]'s settings and Ironic's default hooks.
pub(crate) async fn app(timeout: u64) -> TestApp {
    TestApp::builder()
        .configure(|c| {
            c.conductor.inspect_wait_timeout = Duration::from_secs(timeout);
            c.conductor.check_provision_state_interval = Duration::from_secs(1);
        })
        .start()
        .await
}

/// A manageable node with the agent inspect interface, optionally with a port of `mac`.
pub(crate) async fn agent_node(api: &Api, name: &str, mac: Option<&str>) -> String {
    let node = api
        .create_node(json!({"driver": "fake-hardware", "name": name, "inspect_interface": "agent"}))
        .await;
    let uuid = node["uuid"].as_str().expect("uuid").to_owned();
    api.accepted(&uuid, "manage").await;
    api.wait_for(&uuid, "manageable").await;
    if let Some(mac) = mac {
        api.add_port(&uuid, mac).await;
    }
    uuid
}

/// Inspects `uuid` and waits until it waits for the agent's data, powered on.
pub(crate) async fn inspect_and_wait(api: &Api, uuid: &str) {
    api.accepted(uuid, "inspect").await;
    let waiting = api.wait_for(uuid, "inspect wait").await;
    assert_eq!(
        (&waiting["power_state"], &waiting["target_provision_state"]),
        (&json!("power on"), &json!("manageable")),
        "{waiting}"
    );
}

/// A node with a port of `mac`, inspecting, and the real agent started with the inspection
/// callback (None where the sandbox cannot run).
async fn inspected_by_agent(api: &Api, name: &str, mac: &str) -> Option<(String, Agent)> {
    let uuid = agent_node(api, name, Some(mac)).await;
    inspect_and_wait(api, &uuid).await;
    let callback = format!("{}/v1/continue_inspection", api.base);
    let agent = Agent::start_with(
        &api.base,
        mac,
        "16M",
        &["--inspection_callback_url", &callback],
    )?;
    Some((uuid, agent))
}

/// Waits until the node is unlocked in `state`, or panics with the agent's log.
pub(crate) async fn wait_state(api: &Api, uuid: &str, state: &str, agent: Option<&Agent>) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let node = api.node(uuid).await;
        if node["provision_state"] == state && node["reservation"].is_null() {
            return node;
        }
        assert!(
            Instant::now() < deadline,
            "node {uuid} did not reach {state}: {node}\n{}",
            agent.map(Agent::log_text).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An inventory as the agent sends it, with one NIC of `mac` at `ip`, booted from.
pub(crate) fn inventory(mac: &str, ip: &str) -> Value {
    json!({
        "interfaces": [{"name": "eth0", "mac_address": mac, "ipv4_address": ip}],
        "boot": {"current_boot_mode": "uefi", "pxe_interface": mac},
        "cpu": {"architecture": "aarch64", "count": 4},
        "memory": {"total": 2147483648u64, "physical_mb": 2048},
        "bmc_address": "0.0.0.0",
    })
}

pub(crate) async fn post(api: &Api, version: &str, query: &str, body: Value) -> crate::util::Reply {
    api.request_at(
        version,
        Method::POST,
        &format!("/v1/continue_inspection{query}"),
        Some(body),
    )
    .await
}

on_both_stacks! {
/// The real agent, started with its inspection callback, posts its inventory; with the hooks
/// its loopback NIC passes (`ramdisk-error,architecture`) the node ends `manageable`, powered
/// off, with the agent's inventory stored (its logs left out of the plugin data) and `cpu_arch`
/// set; with Ironic's default hooks the same agent's data fails the inspection, saying why, and
/// the node stays operable.
async fn the_real_agent_inspects_a_node(stack) {
    if ipa_sandbox().is_none() {
        return;
    }
    let Some(cluster) = cluster(stack, 120, Some("ramdisk-error,architecture")).await else {
        return;
    };
    let api = &cluster.api;
    let mac = random_mac();
    let Some((uuid, agent)) = inspected_by_agent(api, "insp-real", &mac).await else {
        return;
    };
    let node = wait_state(api, &uuid, "manageable", Some(&agent)).await;
    assert_eq!(node["properties"]["cpu_arch"], "x86_64", "{node}");
    assert_eq!(node["power_state"], "power off", "{node}");
    assert!(node["last_error"].is_null(), "{node}");
    assert!(!node["inspection_finished_at"].is_null(), "{node}");
    let r = api.request_at("1.81", Method::GET, &format!("/v1/nodes/{uuid}/inventory"), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["inventory"]["interfaces"][0]["mac_address"], json!(mac), "{}", r.body);
    assert_eq!(r.body["inventory"]["boot"]["pxe_interface"], json!(mac), "{}", r.body);
    assert!(r.body["plugin_data"].get("logs").is_none(), "{}", r.body);
    assert!(r.body["plugin_data"].get("configuration").is_some(), "{}", r.body);
    agent.stop();
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// Ironic's default hooks refuse the sandbox agent's only NIC (loopback): the inspection fails
/// with their reason, nothing is stored, and the node is managed again and inspected anew.
async fn the_default_hooks_refuse_a_loopback_only_agent(stack) {
    if ipa_sandbox().is_none() {
        return;
    }
    let Some(cluster) = cluster(stack, 120, None).await else {
        return;
    };
    let api = &cluster.api;
    let mac = random_mac();
    let Some((uuid, agent)) = inspected_by_agent(api, "insp-lo", &mac).await else {
        return;
    };
    let failed = wait_state(api, &uuid, "inspect failed", Some(&agent)).await;
    agent.stop();
    let error = failed["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("failed to run inspection hooks"), "{failed}");
    assert!(error.contains("no network interfaces match the configuration"), "{failed}");
    let r = api.request_at("1.81", Method::GET, &format!("/v1/nodes/{uuid}/inventory"), None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    api.accepted(&uuid, "manage").await;
    api.wait_for(&uuid, "manageable").await;
    inspect_and_wait(api, &uuid).await;
    cluster.assert_no_locks().await;
}
}

/// Posted data: 404 at versions other than 1.1 and 1.84+, `node_uuid` only from 1.84; bad
/// inventories 400; a node not found by its MACs, or not in `inspect wait`, the same 404; found,
/// 202 with `{uuid}` at 1.1 (ironic-inspector's answer) or the node and the agent's config at
/// 1.84; the PXE NIC gets a port; the agent's own error fails the inspection; a node nobody
/// posts for fails after the inspect wait timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn posted_inspection_data() {
    let app = app(3).await;
    let api = app.api();
    let mac = random_mac();
    let uuid = agent_node(api, "insp-post", None).await;
    let good = json!({"inventory": inventory(&mac, "10.0.0.5")});
    let not_found = "Resource could not be found.";
    let rows: Vec<(&str, String, Value, StatusCode, &str)> = vec![
        ("1.83", String::new(), good.clone(), StatusCode::NOT_FOUND, "API version 1.84 or newer is required"),
        ("1.1", format!("?node_uuid={uuid}"), good.clone(), StatusCode::NOT_FOUND, "API version 1.84 or newer is required"),
        ("1.84", "?node_uuid=nonsense".into(), good.clone(), StatusCode::BAD_REQUEST, "Expected UUID for node_uuid"),
        ("1.84", String::new(), json!({}), StatusCode::BAD_REQUEST, "'inventory' is a required property"),
        ("1.84", String::new(), json!({"inventory": []}), StatusCode::BAD_REQUEST, "'inventory' must be an object"),
        ("1.84", String::new(), json!({"inventory": {"interfaces": []}}), StatusCode::BAD_REQUEST, "must not be empty"),
        ("1.84", String::new(), json!({"inventory": {"interfaces": [{"name": "eth0"}]}}), StatusCode::BAD_REQUEST, "needs a string 'mac_address'"),
        ("1.84", String::new(), json!({"inventory": {"interfaces": [{"mac_address": "zz"}], "bmc_address": 7}}), StatusCode::BAD_REQUEST, "'bmc_address' must be a string or null"),
        ("1.84", String::new(), json!({"inventory": {"interfaces": [{"mac_address": "zz"}]}}), StatusCode::BAD_REQUEST, "No lookup information provided"),
        // Found by nothing, or found but not waiting: the same answer.
        ("1.84", String::new(), good.clone(), StatusCode::NOT_FOUND, not_found),
        ("1.84", format!("?node_uuid={uuid}"), good.clone(), StatusCode::NOT_FOUND, not_found),
    ];
    for (version, query, body, status, fault) in rows {
        let r = post(api, version, &query, body.clone()).await;
        assert_eq!(r.status, status, "{version} {query} {body}: {}", r.body);
        assert!(r.fault().contains(fault), "{version} {query} {body}: {}", r.fault());
    }
    let r = api.request_at("1.84", Method::GET, "/v1", None).await;
    assert!(r.body["continue_inspection"][0]["href"].as_str().is_some(), "{}", r.body);

    // By node UUID at 1.84: the lookup's answer, then the inspection finishes; the PXE NIC,
    // which the node had no port for, has one now.
    inspect_and_wait(api, &uuid).await;
    let r = post(api, "1.84", &format!("?node_uuid={uuid}"), good.clone()).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(r.body["node"]["uuid"], json!(uuid), "{}", r.body);
    assert!(r.body["config"]["agent_token"].as_str().is_some_and(|t| !t.is_empty()), "{}", r.body);
    let node = wait_state(api, &uuid, "manageable", None).await;
    assert_eq!(node["properties"]["cpu_arch"], "aarch64", "{node}");
    let r = api.request(Method::GET, &format!("/v1/ports?address={mac}"), None).await;
    assert_eq!(r.body["ports"].as_array().map(Vec::len), Some(1), "{}", r.body);

    // By MAC at 1.1 (the port made above), with the agent's error: inspect failed.
    inspect_and_wait(api, &uuid).await;
    let mut with_error = good.clone();
    with_error["error"] = json!("The hardware manager failed");
    let r = post(api, "1.1", "", with_error).await;
    assert_eq!((r.status, &r.body), (StatusCode::ACCEPTED, &json!({"uuid": uuid})), "{}", r.body);
    let failed = wait_state(api, &uuid, "inspect failed", None).await;
    assert!(failed["last_error"].as_str().unwrap_or_default().contains("Ramdisk reported error: The hardware manager failed"), "{failed}");

    // Nobody posts: the inspect wait timeout fails it.
    api.accepted(&uuid, "manage").await;
    api.wait_for(&uuid, "manageable").await;
    inspect_and_wait(api, &uuid).await;
    let timed_out = wait_state(api, &uuid, "inspect failed", None).await;
    assert!(timed_out["last_error"].as_str().unwrap_or_default().contains("Timeout reached while inspecting the node"), "{timed_out}");
    app.assert_no_locks().await;
}
