//! The `direct` deploy driving the real, unmodified Ironic Python Agent (13.0.0, in the shared
//! sandbox: unprivileged, a plain file as its disk) on both stacks: lookup by its port's MAC,
//! heartbeats over the API, commands over HTTPS with the certificate it sent, the image served
//! over loopback HTTP and checked by its SHA-256, and what the agent wrote compared byte for
//! byte; cleaning in the agent (automated and manual), its disk erased. The fake power interface
//! cannot boot a ramdisk, so each test starts the agent when the node waits for it (or just
//! before), as the machine's ramdisk would come up.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{
    Api, Cluster, ClusterOptions, Stack,
    ipa::{Agent, ImageServer, random_mac, raw_disk_image, sha256_hex},
    ipa_sandbox, on_both_stacks,
};

const IMAGE_SIZE: usize = 4 << 20;

/// A cluster whose conductors check callback timeouts every second, with `timeout` seconds.
async fn cluster(stack: Stack, timeout: u64) -> Option<Cluster> {
    // Checked first, so a machine without the sandbox skips (or fails) before starting anything.
    ipa_sandbox()?;
    Cluster::start(ClusterOptions {
        stack,
        workers: 20,
        env: vec![
            ("FERRUM_DEPLOY_CALLBACK_TIMEOUT", timeout.to_string()),
            ("FERRUM_CLEAN_CALLBACK_TIMEOUT", timeout.to_string()),
            ("FERRUM_CHECK_PROVISION_STATE_INTERVAL", "1".to_owned()),
            ("FERRUM_AGENT_POWER_OFF_RETRIES", "1".to_owned()),
            ("FERRUM_AGENT_POWER_OFF_RETRY_INTERVAL", "0.2".to_owned()),
        ],
        ..ClusterOptions::default()
    })
    .await
}

/// An available `direct` node deploying `url` (checked by `sha256`), with a port of `mac`.
async fn node_for(api: &Api, mac: &str, url: &str, sha256: &str, format: &str) -> String {
    let node = api
        .available_node(json!({
            "deploy_interface": "direct",
            // Automated cleaning would boot the ramdisk and wait for an agent.
            "automated_clean": false,
            "driver_info": {"deploy_forces_oob_reboot": true},
            "instance_info": {
                "image_source": url,
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": sha256,
                "image_disk_format": format,
            },
        }))
        .await;
    let uuid = node["uuid"].as_str().expect("uuid").to_owned();
    api.add_port(&uuid, mac).await;
    uuid
}

/// A manageable `direct` node with no image to deploy, and the MAC its agent looks it up by.
async fn manageable_node(api: &Api) -> (String, String) {
    let mac = random_mac();
    let uuid = node_for(
        api,
        &mac,
        "http://127.0.0.1:9/unused.raw",
        &"0".repeat(64),
        "raw",
    )
    .await;
    api.accepted(&uuid, "manage").await;
    wait_state(api, &uuid, "manageable", Duration::from_secs(20), None).await;
    (uuid, mac)
}

/// Boots the node's ramdisk once the cleaning has powered it on, as a real machine does. An
/// agent started earlier would be refused lookup while the node is `manageable`, and the
/// agent's lookup backs off exponentially (up to 60 s a try), which made a test slow or late.
async fn agent_once_cleaning(api: &Api, uuid: &str, mac: &str) -> Agent {
    let waiting = wait_state(api, uuid, "clean wait", Duration::from_secs(20), None).await;
    assert_eq!(waiting["target_provision_state"], "manageable", "{waiting}");
    Agent::start(&api.base, mac, "16M").expect("the sandbox was checked")
}

/// Asks for a manual cleaning of `steps`, accepted.
async fn clean_manually(api: &Api, uuid: &str, steps: Value) {
    let r = api
        .request_at(
            "1.68",
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "clean", "clean_steps": steps})),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
}

/// Waits until the node is unlocked in `state` (within `limit`), failing at once if it lands
/// in another stable state, with the agent's log when there is one.
async fn wait_state(
    api: &Api,
    uuid: &str,
    state: &str,
    limit: Duration,
    agent: Option<&Agent>,
) -> Value {
    let log = || agent.map(Agent::log_text).unwrap_or_default();
    api.wait_settled(uuid, state, limit, Duration::from_millis(50), || {
        format!("--- agent log ---\n{}", log())
    })
    .await
}

on_both_stacks! {
/// A raw whole-disk image deploys to `active`, and the agent's disk then holds exactly its bytes.
/// The node shows its steps while it runs, and ends unlocked, powered on, booting from its disk,
/// with no deploy steps left. (A qcow2 image the agent converts itself is not tried: IPA 13 runs
/// `qemu-img` with an environment of one variable, which bypasses the sandbox's `qemu-img` shim,
/// so the conversion onto a file disk fails there; the conductor converts it instead, below.)
async fn the_real_agent_writes_a_raw_image(stack) {
    let Some(cluster) = cluster(stack, 120).await else { return };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let raw = raw_disk_image(IMAGE_SIZE, 1);
    let raw_url = images.add("disk.raw", raw.clone());

    for (url, sha, format, expected) in [(&raw_url, sha256_hex(&raw), "raw", &raw)] {
        let mac = random_mac();
        let uuid = node_for(api, &mac, url, &sha, format).await;
        let asked = Instant::now();
        api.accepted(&uuid, "active").await;
        let waiting = wait_state(api, &uuid, "wait call-back", Duration::from_secs(20), None).await;
        assert_eq!(waiting["deploy_step"]["step"], "deploy", "{waiting}");
        let steps = waiting["driver_internal_info"]["deploy_steps"].as_array().unwrap();
        let names: Vec<_> = steps.iter().map(|s| s["step"].as_str().unwrap().to_owned()).collect();
        assert_eq!(
            names,
            ["deploy", "write_image", "prepare_instance_boot", "tear_down_agent", "switch_to_tenant_network", "boot_instance"],
            "{waiting}"
        );
        let Some(agent) = Agent::start(&api.base, &mac, "16M") else { return };
        let active = wait_state(api, &uuid, "active", Duration::from_secs(90), Some(&agent)).await;
        eprintln!("{stack:?}: {format} image of {IMAGE_SIZE} bytes active {:?} after it was asked for", asked.elapsed());
        assert_eq!(agent.disk_prefix(expected.len()), *expected, "the agent's disk holds the {format} image");
        assert_eq!(active["power_state"], "power on", "{active}");
        assert_eq!(active["deploy_step"], json!({}), "{active}");
        assert!(active["last_error"].is_null(), "{active}");
        let info = &active["driver_internal_info"];
        assert!(info.get("deploy_steps").is_none() && info.get("deploy_step_index").is_none(), "{active}");
        assert_eq!(info["agent_secret_token"], "******", "{active}");
        assert!(info["agent_url"].as_str().unwrap().starts_with("https://127.0.0.1:"), "TLS: {active}");
        assert_eq!(info["hardware_manager_version"]["generic_hardware_manager"], "1.2", "{active}");
        let r = api.request_at("1.68", Method::GET, &format!("/v1/nodes/{uuid}/management/boot_device"), None).await;
        assert_eq!(r.body["boot_device"], "disk", "{}", r.body);
        assert_eq!(r.body["persistent"], true, "{}", r.body);
        assert!(images.served(url.rsplit('/').next().unwrap()) >= 1);
    }
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// A qcow2 image with `image_download_source = local` (Ironic's, with `force_raw_images`): the
/// conductor downloads it once, checks its sha256, converts it to raw with `qemu-img` and serves
/// the raw copy from its own web server; the agent writes it, and its disk holds the raw image.
/// The copy is gone once written. A wrong checksum fails the deploy in the conductor, saying so,
/// with nothing left published.
async fn a_qcow2_image_is_converted_to_raw_by_the_conductor(stack) {
    let Some(_) = ipa_sandbox() else { return };
    let root = std::env::temp_dir().join(format!("ferrum-httproot-{}", crate::util::services::random_suffix()));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        conductors: 1,
        workers: 20,
        env: vec![
            ("FERRUM_DEPLOY_CALLBACK_TIMEOUT", "120".to_owned()),
            ("FERRUM_HTTP_ROOT", root.display().to_string()),
            ("FERRUM_HTTP_BIND", format!("127.0.0.1:{port}")),
            ("FERRUM_HTTP_URL", format!("http://127.0.0.1:{port}")),
        ],
        ..ClusterOptions::default()
    })
    .await else { return };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let raw = raw_disk_image(IMAGE_SIZE, 7);
    let qcow2 = qcow2_of(&raw);
    assert_ne!(qcow2.len(), raw.len());
    let url = images.add("disk.qcow2", qcow2.clone());
    let published = |uuid: &str| root.join("agent_images").join(uuid);

    let mac = random_mac();
    let uuid = node_for(api, &mac, &url, &sha256_hex(&qcow2), "qcow2").await;
    let r = api
        .patch(&uuid, json!([{"op": "add", "path": "/instance_info/image_download_source", "value": "local"}]))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let asked = Instant::now();
    api.accepted(&uuid, "active").await;
    wait_state(api, &uuid, "wait call-back", Duration::from_secs(20), None).await;
    let Some(agent) = Agent::start(&api.base, &mac, "16M") else { return };
    wait_state(api, &uuid, "active", Duration::from_secs(90), Some(&agent)).await;
    eprintln!("{stack:?}: qcow2 image of {} bytes ({IMAGE_SIZE} raw) active {:?} after it was asked for", qcow2.len(), asked.elapsed());
    assert_eq!(agent.disk_prefix(raw.len()), raw, "the agent's disk holds the raw image");
    assert_eq!(images.served("disk.qcow2"), 1, "the conductor downloaded it, not the agent");
    assert!(!published(&uuid).exists(), "the raw copy is removed once written");
    drop(agent);

    let mac = random_mac();
    let wrong = "1".repeat(64);
    let uuid = node_for(api, &mac, &url, &wrong, "qcow2").await;
    let r = api
        .patch(&uuid, json!([{"op": "add", "path": "/instance_info/image_download_source", "value": "local"}]))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.accepted(&uuid, "active").await;
    wait_state(api, &uuid, "wait call-back", Duration::from_secs(20), None).await;
    let agent = Agent::start(&api.base, &mac, "16M").unwrap();
    let failed = wait_state(api, &uuid, "deploy failed", Duration::from_secs(90), Some(&agent)).await;
    let error = failed["last_error"].as_str().unwrap();
    assert!(error.contains("its sha256 is") && error.contains(&wrong), "{error}");
    assert!(!published(&uuid).exists(), "nothing is left published");
    assert!(failed["reservation"].is_null(), "{failed}");
    cluster.assert_no_locks().await;
    let _ = std::fs::remove_dir_all(&root);
}
}

/// `raw` as a qcow2 image, by `qemu-img`.
fn qcow2_of(raw: &[u8]) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!(
        "ferrum-qcow2-{}",
        crate::util::services::random_suffix()
    ));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let (from, to) = (dir.join("disk.raw"), dir.join("disk.qcow2"));
    std::fs::write(&from, raw).expect("write the raw image");
    let status = std::process::Command::new("qemu-img")
        .args(["convert", "-q", "-f", "raw", "-O", "qcow2"])
        .arg(&from)
        .arg(&to)
        .status()
        .expect("qemu-img (package qemu-utils) runs");
    assert!(status.success());
    let qcow2 = std::fs::read(&to).expect("read the qcow2 image");
    let _ = std::fs::remove_dir_all(&dir);
    qcow2
}

on_both_stacks! {
/// A wrong checksum: the agent refuses the image, the deploy fails with the agent's own words in
/// `last_error`, unlocked and operable (PATCH works); a redeploy with the right checksum, on the
/// ramdisk the node boots again, succeeds. A heartbeat with a wrong token is 401 and changes
/// nothing.
async fn a_wrong_checksum_fails_with_the_agents_error_and_a_redeploy_succeeds(stack) {
    let Some(cluster) = cluster(stack, 120).await else { return };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let raw = raw_disk_image(IMAGE_SIZE, 3);
    let url = images.add("disk.raw", raw.clone());
    let mac = random_mac();
    let wrong = "0".repeat(64);
    let uuid = node_for(api, &mac, &url, &wrong, "raw").await;
    api.accepted(&uuid, "active").await;
    wait_state(api, &uuid, "wait call-back", Duration::from_secs(20), None).await;

    // Someone else's heartbeat (no such token): refused, and not recorded.
    let r = api
        .request_at("1.68", Method::POST, &format!("/v1/heartbeat/{uuid}"), Some(json!({
            "callback_url": "https://127.0.0.1:1", "agent_token": "not-the-token", "agent_version": "13.0.0",
        })))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.body);
    assert!(r.fault().contains("Invalid or missing agent token"), "{}", r.body);
    let node = api.node(&uuid).await;
    assert!(node["driver_internal_info"].get("agent_url").is_none(), "{node}");

    let agent = Agent::start(&api.base, &mac, "16M").unwrap();
    let failed = wait_state(api, &uuid, "deploy failed", Duration::from_secs(90), Some(&agent)).await;
    let error = failed["last_error"].as_str().unwrap();
    assert!(error.contains("deploy.write_image"), "{error}");
    assert!(error.to_lowercase().contains("checksum") || error.contains("verif"), "the agent's words: {error}");
    assert!(failed["reservation"].is_null() && failed["deploy_step"] == json!({}), "{failed}");
    assert!(failed["driver_internal_info"].get("deploy_steps").is_none(), "{failed}");
    assert_eq!(failed["power_state"], "power off", "off after the failure: {failed}");

    // Operable: the fix is a PATCH, then a redeploy; the node boots the ramdisk again.
    let r = api
        .patch(&uuid, json!([{"op": "replace", "path": "/instance_info/image_os_hash_value", "value": sha256_hex(&raw)}]))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.accepted(&uuid, "active").await;
    wait_state(api, &uuid, "wait call-back", Duration::from_secs(20), None).await;
    drop(agent);
    let agent = Agent::start(&api.base, &mac, "16M").unwrap();
    wait_state(api, &uuid, "active", Duration::from_secs(90), Some(&agent)).await;
    assert_eq!(agent.disk_prefix(raw.len()), raw);
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// An agent that never calls back, and one killed while it writes: the callback timeout fails
/// the deploy, saying which step waited for what, and the node is unlocked and can be torn
/// down. The two nodes wait out their timeouts side by side.
async fn a_silent_or_dead_agent_times_out(stack) {
    let Some(cluster) = cluster(stack, 15).await else { return };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let raw = raw_disk_image(IMAGE_SIZE, 4);
    let url = images.add("slow.raw", raw.clone());
    // 64 chunks, 0.5 s apart: the write takes half a minute, far past the timeout.
    images.drip("slow.raw", Duration::from_millis(500));

    // Nobody heartbeats.
    let silent_node = async {
        let silent = node_for(api, &random_mac(), &url, &sha256_hex(&raw), "raw").await;
        api.accepted(&silent, "active").await;
        let failed = wait_state(api, &silent, "deploy failed", Duration::from_secs(30), None).await;
        let error = failed["last_error"].as_str().unwrap();
        assert!(error.starts_with(&format!("Timeout reached while waiting for callback for node {silent}")), "{error}");
        assert!(error.contains("deploy.deploy waited for the agent's first heartbeat"), "{error}");
        assert_eq!(failed["power_state"], "power off", "off after the timeout: {failed}");
        api.accepted(&silent, "deleted").await;
        wait_state(api, &silent, "available", Duration::from_secs(20), None).await;
    };

    // The agent dies while it writes.
    let dying_node = async {
        let mac = random_mac();
        let dying = node_for(api, &mac, &url, &sha256_hex(&raw), "raw").await;
        // The agent starts first and looks the node up until it waits for it: its start
        // (seconds on a loaded machine) does not count against the callback timeout.
        let agent = Agent::start(&api.base, &mac, "16M").unwrap();
        api.accepted(&dying, "active").await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let node = api.node(&dying).await;
            if node["deploy_step"]["step"] == "write_image" && node["provision_state"] == "wait call-back" {
                break;
            }
            assert!(Instant::now() < deadline, "never wrote: {node}\n{}", agent.log_text());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // SIGTERM to its process group: IPA has no graceful shutdown, the write is simply cut.
        agent.stop();
        let failed = wait_state(api, &dying, "deploy failed", Duration::from_secs(30), None).await;
        let error = failed["last_error"].as_str().unwrap();
        assert!(error.contains("deploy step deploy.write_image waited for the agent to finish it"), "{error}");
        assert!(failed["reservation"].is_null(), "{failed}");
    };
    tokio::join!(silent_node, dying_node);
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// Three agents write three images at once; every node ends active with its own image.
async fn several_agents_deploy_at_once(stack) {
    let Some(cluster) = cluster(stack, 120).await else { return };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let mut deploys = Vec::new();
    for i in 0..3_u64 {
        let raw = raw_disk_image(IMAGE_SIZE, 10 + i);
        let url = images.add(&format!("disk{i}.raw"), raw.clone());
        let mac = random_mac();
        let uuid = node_for(api, &mac, &url, &sha256_hex(&raw), "raw").await;
        deploys.push((uuid, mac, raw));
    }
    // One of them is powered off by its agent (watched, then forced: the fake power interface
    // does not see the agent's power-off), the others out of band.
    let r = api
        .patch(&deploys[0].0, json!([{"op": "replace", "path": "/driver_info/deploy_forces_oob_reboot", "value": false}]))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    for (uuid, _, _) in &deploys {
        api.accepted(uuid, "active").await;
    }
    let asked = Instant::now();
    let mut agents = Vec::new();
    for (uuid, mac, _) in &deploys {
        wait_state(api, uuid, "wait call-back", Duration::from_secs(20), None).await;
        agents.push(Agent::start(&api.base, mac, "16M").unwrap());
    }
    for ((uuid, _, raw), agent) in deploys.iter().zip(&agents) {
        wait_state(api, uuid, "active", Duration::from_secs(120), Some(agent)).await;
        assert_eq!(agent.disk_prefix(raw.len()), *raw, "node {uuid}");
    }
    eprintln!("{stack:?}: 3 concurrent deploys of {IMAGE_SIZE} bytes active after {:?}", asked.elapsed());
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// A node that may not be powered off (API 1.95): the real agent writes its image, and
/// `tear_down_agent` reboots the node into its instance instead of powering it off (its
/// conductor says so); the node ends active, powered on.
async fn a_node_that_may_not_be_powered_off_is_rebooted_into_its_instance(stack) {
    let Some(cluster) = cluster(stack, 120).await else { return };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let raw = raw_disk_image(IMAGE_SIZE, 5);
    let url = images.add("disk.raw", raw.clone());
    let mac = random_mac();
    let uuid = node_for(api, &mac, &url, &sha256_hex(&raw), "raw").await;
    let r = api
        .request_at("1.95", Method::PATCH, &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "replace", "path": "/disable_power_off", "value": true}])))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.accepted(&uuid, "active").await;
    wait_state(api, &uuid, "wait call-back", Duration::from_secs(20), None).await;
    let Some(agent) = Agent::start(&api.base, &mac, "16M") else { return };
    let active = wait_state(api, &uuid, "active", Duration::from_secs(90), Some(&agent)).await;
    assert_eq!(agent.disk_prefix(raw.len()), raw, "the agent's disk holds the image");
    assert_eq!(active["power_state"], "power on", "{active}");
    let logs: String = cluster.process_names().iter().map(|p| cluster.log_of(p)).collect();
    let rebooted = format!("Node {uuid} does not support power off, rebooting it into the instance");
    assert!(logs.contains(&rebooted), "tear_down_agent rebooted the node");
    cluster.assert_no_locks().await;
}
}

/// Waits until the node is unlocked in `state`, recording every `clean_steps` list seen on the
/// way (the steps a cleaning decided, visible while it runs).
async fn wait_cleaned(
    api: &Api,
    uuid: &str,
    state: &str,
    agent: &Agent,
) -> (Value, Vec<Value>, Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut seen = Vec::new();
    let mut shown = Vec::new();
    loop {
        let node = api.node(uuid).await;
        if let Some(steps) = node["driver_internal_info"].get("clean_steps")
            && !seen.contains(steps)
        {
            seen.push(steps.clone());
        }
        if let Some(step) = node["clean_step"]["step"].as_str()
            && !shown.iter().any(|s| s == step)
        {
            shown.push(step.to_owned());
        }
        let now = node["provision_state"].as_str().unwrap_or_default();
        if now == state && node["reservation"].is_null() {
            return (node, seen, shown);
        }
        assert!(
            now != "clean failed" && Instant::now() < deadline,
            "node {uuid} did not reach {state}: {node}\n--- agent log ---\n{}",
            agent.log_text()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn step_names(steps: &Value) -> Vec<String> {
    steps
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["step"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

on_both_stacks! {
/// Automated cleaning in the real agent, at tear-down: the node boots the ramdisk and waits in
/// `clean wait` with a new agent token; once the agent calls back its clean steps are read, and
/// those of priority above 0 run in it, highest first (`erase_devices_metadata` at 99, then
/// `erase_devices` at 10), each waited for. The node ends available, powered off, its disk
/// erased, with nothing of the cleaning or of the agent left in `driver_internal_info`.
async fn automated_cleaning_runs_the_agents_erase_steps(stack) {
    let Some(cluster) = cluster(stack, 120).await else { return };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let raw = raw_disk_image(IMAGE_SIZE, 5);
    let url = images.add("disk.raw", raw.clone());
    let mac = random_mac();
    let uuid = node_for(api, &mac, &url, &sha256_hex(&raw), "raw").await;
    api.accepted(&uuid, "active").await;
    wait_state(api, &uuid, "wait call-back", Duration::from_secs(20), None).await;
    let agent = Agent::start(&api.base, &mac, "16M").unwrap();
    wait_state(api, &uuid, "active", Duration::from_secs(90), Some(&agent)).await;
    drop(agent);

    // The machine reboots into the ramdisk again; its disk still holds the instance.
    let r = api.patch(&uuid, json!([{"op": "replace", "path": "/automated_clean", "value": true}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let started = Instant::now();
    api.accepted(&uuid, "deleted").await;
    // The ramdisk boots once the cleaning has powered the node on (see `agent_once_cleaning`).
    let waiting = wait_state(api, &uuid, "clean wait", Duration::from_secs(20), None).await;
    assert_eq!(waiting["target_provision_state"], "available", "{waiting}");
    let agent = Agent::start(&api.base, &mac, "16M").unwrap();
    agent.fill_disk(&raw);
    let (available, seen, _) = wait_cleaned(api, &uuid, "available", &agent).await;
    eprintln!("{stack:?}: automated cleaning in the agent took {:?}", started.elapsed());
    assert!(
        seen.iter().any(|s| step_names(s) == ["erase_devices_metadata", "erase_devices"]),
        "the agent's steps of priority above 0, highest first: {seen:?}"
    );
    assert!(agent.disk_prefix(raw.len()).iter().all(|b| *b == 0), "the agent erased the disk");
    assert_eq!(available["power_state"], "power off", "{available}");
    assert!(available["last_error"].is_null(), "{available}");
    let info = &available["driver_internal_info"];
    for key in ["clean_steps", "clean_step_index", "agent_url", "agent_secret_token"] {
        assert!(info.get(key).is_none(), "{key} is left: {available}");
    }
    assert_eq!(info["hardware_manager_version"]["generic_hardware_manager"], "1.2", "{available}");
    assert!(info["agent_cached_clean_steps"].is_object(), "{available}");
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// Manual cleaning in the real agent: the ramdisk boots, the named agent step runs in it (the
/// disk is erased) and the node returns to manageable, its target manageable throughout.
async fn manual_cleaning_runs_a_step_in_the_agent(stack) {
    let Some(cluster) = cluster(stack, 120).await else { return };
    let api = &cluster.api;
    let (uuid, mac) = manageable_node(api).await;
    let steps = json!([{"interface": "deploy", "step": "erase_devices_metadata", "args": {}}]);
    clean_manually(api, &uuid, steps).await;
    let agent = agent_once_cleaning(api, &uuid, &mac).await;
    // Before the agent has looked its node up, so before any step can run.
    let marker = vec![0xa5_u8; 1 << 20];
    agent.fill_disk(&marker);
    let (manageable, seen, shown) = wait_cleaned(api, &uuid, "manageable", &agent).await;
    // The step the agent runs is the node's `clean_step` while it runs (seen if polled then).
    assert!(shown.iter().all(|s| s == "erase_devices_metadata"), "{shown:?}");
    assert_eq!(manageable["clean_step"], json!({}), "{manageable}");
    assert!(seen.iter().all(|s| step_names(s) == ["erase_devices_metadata"]), "{seen:?}");
    assert!(agent.disk_prefix(marker.len()).iter().all(|b| *b == 0), "the agent erased the disk");
    assert!(manageable["last_error"].is_null(), "{manageable}");
    assert_eq!(manageable["power_state"], "power off", "{manageable}");
    assert!(manageable["target_provision_state"].is_null(), "{manageable}");
    assert!(manageable["driver_internal_info"].get("clean_steps").is_none(), "{manageable}");
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// A cleaning whose ramdisk never calls back: `clean_callback_timeout` fails it, saying what it
/// waited for; the node is unlocked, forgets the cleaning's steps and is operable (manage).
async fn a_cleaning_without_an_agent_times_out(stack) {
    let Some(cluster) = cluster(stack, 3).await else { return };
    let api = &cluster.api;
    let uuid = node_for(api, &random_mac(), "http://127.0.0.1:9/unused.raw", &"0".repeat(64), "raw").await;
    api.accepted(&uuid, "manage").await;
    wait_state(api, &uuid, "manageable", Duration::from_secs(20), None).await;
    let r = api.patch(&uuid, json!([{"op": "replace", "path": "/automated_clean", "value": true}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.accepted(&uuid, "provide").await;
    let waiting = wait_state(api, &uuid, "clean wait", Duration::from_secs(20), None).await;
    assert_eq!(waiting["target_provision_state"], "available", "{waiting}");
    assert_eq!(waiting["power_state"], "power on", "the ramdisk boots: {waiting}");
    let failed = wait_state(api, &uuid, "clean failed", Duration::from_secs(30), None).await;
    let error = failed["last_error"].as_str().unwrap();
    assert!(error.contains("Timeout reached while cleaning the node") && error.contains("first heartbeat"), "{error}");
    assert!(failed["driver_internal_info"].get("clean_steps").is_none(), "{failed}");
    // No clean step had begun: no maintenance, as in Ironic.
    assert_eq!(failed["maintenance"], false, "{failed}");
    assert!(failed["fault"].is_null(), "{failed}");
    api.accepted(&uuid, "manage").await;
    wait_state(api, &uuid, "manageable", Duration::from_secs(20), None).await;
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// A clean step the agent fails (`erase_devices_metadata` on a disk it may not write):
/// `clean failed` with the agent's words, and, since a step had begun, maintenance with the `clean failure`
/// fault and the error as its reason (Ironic's `cleaning_error_handler`). Leaving maintenance
/// clears the fault, and the node can be managed again.
async fn a_failed_clean_step_puts_the_node_in_maintenance(stack) {
    let Some(cluster) = cluster(stack, 120).await else { return };
    let api = &cluster.api;
    let (uuid, mac) = manageable_node(api).await;
    let steps = json!([{"interface": "deploy", "step": "erase_devices_metadata", "args": {}}]);
    clean_manually(api, &uuid, steps).await;
    let agent = agent_once_cleaning(api, &uuid, &mac).await;
    agent.make_disk_read_only();
    let failed = wait_state(api, &uuid, "clean failed", Duration::from_secs(60), Some(&agent)).await;
    let error = failed["last_error"].as_str().unwrap();
    assert!(error.contains("erase_devices_metadata") && error.contains("Permission denied"), "{error}");
    assert_eq!(failed["maintenance"], true, "{failed}");
    assert_eq!(failed["fault"], "clean failure", "{failed}");
    assert_eq!(failed["target_provision_state"], "manageable", "a manual cleaning: {failed}");
    assert_eq!(failed["clean_step"], json!({}), "{failed}");
    assert_eq!(failed["maintenance_reason"], failed["last_error"], "{failed}");
    let r = api.request(Method::DELETE, &format!("/v1/nodes/{uuid}/maintenance"), None).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let cleared = api.node(&uuid).await;
    assert!(cleared["fault"].is_null() && cleared["maintenance"] == false, "{cleared}");
    api.accepted(&uuid, "manage").await;
    wait_state(api, &uuid, "manageable", Duration::from_secs(20), None).await;
    cluster.assert_no_locks().await;
}
}
