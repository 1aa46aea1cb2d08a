//! The `redfish` hardware type against a real Redfish BMC: sushy-tools' emulator
//! (`util::redfish`), one of its own per test, through the API on both stacks. Power changes land
//! 0-1 s after the request (`REDFISH_EMU_POWER_DELAY=1`), so every power test also proves the
//! driver waits for the state it asked for.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{
    Cluster, ClusterOptions, Stack,
    ipa::ImageServer,
    on_both_stacks,
    redfish::{Emulator, EmulatorOptions},
};

/// A cluster whose Redfish client gives up on an unreachable BMC quickly.
async fn cluster(stack: Stack, more: Vec<(&'static str, String)>) -> Option<Cluster> {
    let mut env = vec![
        ("FERRUM_REDFISH_CONNECTION_ATTEMPTS", "2".to_owned()),
        ("FERRUM_REDFISH_CONNECTION_RETRY_INTERVAL", "0.2".to_owned()),
    ];
    env.extend(more);
    Cluster::start(ClusterOptions {
        stack,
        rpc_timeout: 15.0,
        env,
        ..ClusterOptions::default()
    })
    .await
}

/// The emulator's view of system `i`.
async fn bmc_system(emu: &Emulator, i: usize) -> Value {
    emu.get(&emu.systems[i]).await
}

/// Asks for a power `target`, waits until the node shows it with no change pending, and
/// returns how long that took; the emulator must agree. The emulator applies a change `power_delay`
/// whole seconds of its clock, this host's, after the second the request reached it in, so a
/// driver that waits for the state it asked for cannot settle before that many whole seconds
/// after the second it was asked in.
async fn power(
    cluster: &Cluster,
    emu: &Emulator,
    node: &str,
    target: &str,
    want: &str,
) -> Duration {
    let started = Instant::now();
    let asked_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    let r = cluster.api.power(node, target).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{target}: {}", r.body);
    wait_power_settled(cluster, node).await;
    let took = started.elapsed();
    let settled_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    let lands_at = Duration::from_secs(asked_at.as_secs() + emu.power_delay());
    assert!(
        settled_at >= lands_at,
        "{target} settled at {settled_at:?}, before the BMC could apply it at {lands_at:?}"
    );
    let shown = cluster.api.node(node).await;
    assert_eq!(shown["power_state"], want, "{target}: {shown}");
    assert_eq!(shown["last_error"], Value::Null, "{target}: {shown}");
    let bmc_state = if want == "power on" { "On" } else { "Off" };
    assert_eq!(
        bmc_system(emu, 0).await["PowerState"],
        bmc_state,
        "{target}"
    );
    took
}

/// Waits until no power change is pending and the lock is released (success or failure).
async fn wait_power_settled(cluster: &Cluster, node: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let shown = cluster.api.node(node).await;
        if shown["target_power_state"].is_null() && shown["reservation"].is_null() {
            return shown;
        }
        assert!(
            Instant::now() < deadline,
            "power change did not settle: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

on_both_stacks! {
/// Enrolled through the API, a redfish node is verified against the BMC, powered on, off,
/// rebooted, soft powered off and soft rebooted (each waited for: the emulator applies it
/// within a second), its boot device set and read back, its boot mode changed, and a deploy
/// ISO inserted into and ejected from its virtual CD, each seen on the emulator; its password
/// never shown.
async fn redfish_node_is_powered_and_managed_through_the_bmc(stack) {
    let Some(emu) = Emulator::start(EmulatorOptions {
        credentials: Some(("admin".into(), "s3cr3t-pw".into())),
        ..EmulatorOptions::default()
    }) else {
        return;
    };
    let Some(cluster) = cluster(stack, Vec::new()).await else {
        return;
    };
    let api = &cluster.api;
    let created = api
        .create_node(json!({"name": "rf", "driver": "redfish", "driver_info": emu.driver_info(0)}))
        .await;
    assert_eq!(created["power_interface"], "redfish", "{created}");
    assert_eq!(created["management_interface"], "redfish", "{created}");
    assert_eq!(created["boot_interface"], "ipxe", "{created}");
    assert_eq!(created["deploy_interface"], "direct", "{created}");

    // The password is masked in every view of the node.
    for path in ["/v1/nodes/rf", "/v1/nodes/detail", "/v1/nodes/rf?fields=driver_info"] {
        let r = api.get(path).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let text = r.body.to_string();
        assert!(!text.contains("s3cr3t-pw"), "{path} shows the password: {text}");
        assert!(text.contains("\"redfish_password\":\"******\""), "{path}: {text}");
    }
    assert_eq!(created["driver_info"]["redfish_password"], "******");
    assert_eq!(created["driver_info"]["redfish_username"], "admin");

    let r = api.get("/v1/nodes/rf/validate").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["power"]["result"], true, "{}", r.body);
    assert_eq!(r.body["management"]["result"], true, "{}", r.body);

    // manage reads the power state from the BMC.
    api.accepted("rf", "manage").await;
    let node = api.wait_for("rf", "manageable").await;
    assert_eq!(node["power_state"], "power off", "{node}");

    let on = power(&cluster, &emu, "rf", "power on", "power on").await;
    let off = power(&cluster, &emu, "rf", "power off", "power off").await;
    power(&cluster, &emu, "rf", "power on", "power on").await;
    let reboot = power(&cluster, &emu, "rf", "rebooting", "power on").await;
    let soft_off = power(&cluster, &emu, "rf", "soft power off", "power off").await;
    power(&cluster, &emu, "rf", "soft rebooting", "power on").await;
    eprintln!("redfish power through the API on {stack:?}: on {on:?}, off {off:?}, reboot {reboot:?}, soft off {soft_off:?}");

    // Boot device: the emulator's allowable values, set and read back, on the BMC.
    let path = "/v1/nodes/rf/management/boot_device";
    let r = api.get(&format!("{path}/supported")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body, json!({"supported_boot_devices": ["pxe", "cdrom", "disk", "uefihttp"]}));
    let r = api.request(Method::PUT, path, Some(json!({"boot_device": "pxe", "persistent": true}))).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(api.get(path).await.body, json!({"boot_device": "pxe", "persistent": true}));
    assert_eq!(bmc_system(&emu, 0).await["Boot"]["BootSourceOverrideTarget"], "Pxe");
    let r = api.request(Method::PUT, path, Some(json!({"boot_device": "cdrom", "persistent": false}))).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    // sushy-tools keeps the target but ignores `Once`: the BMC's own answer is shown, as Ironic.
    assert_eq!(api.get(path).await.body, json!({"boot_device": "cdrom", "persistent": true}));
    assert_eq!(bmc_system(&emu, 0).await["Boot"]["BootSourceOverrideTarget"], "Cd");
    let r = api.request(Method::PUT, path, Some(json!({"boot_device": "safe"}))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("Invalid boot device safe"), "{}", r.fault());

    // NMI: the emulator answers 501, a driver failure; the node is left unlocked.
    let r = api.request_at("1.29", Method::PUT, "/v1/nodes/rf/management/inject_nmi", Some(json!({}))).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", r.body);

    // Boot mode (1.76): Legacy on the BMC, bios on the node.
    let r = api.request_at("1.76", Method::PUT, "/v1/nodes/rf/states/boot_mode", Some(json!({"target": "bios"}))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let node = api.request_at("1.76", Method::GET, "/v1/nodes/rf", None).await.body;
        if node["boot_mode"] == "bios" && node["reservation"].is_null() {
            break;
        }
        assert!(Instant::now() < deadline, "boot mode not recorded: {node}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(bmc_system(&emu, 0).await["Boot"]["BootSourceOverrideMode"], "Legacy");

    // Virtual media: the emulator downloads the image when it is inserted.
    let images = ImageServer::start().await;
    let iso = vec![0x5a_u8; 64 << 10];
    let url = images.add("deploy.iso", iso);
    let cd = format!("{}/VirtualMedia/Cd", emu.systems[0]);
    let r = api.request_at("1.89", Method::POST, "/v1/nodes/rf/vmedia", Some(json!({"device_type": "cdrom", "image_url": url}))).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let media = emu.get(&cd).await;
    assert_eq!((&media["Inserted"], &media["Image"]), (&json!(true), &json!(url)), "{media}");
    assert_eq!(images.served("deploy.iso"), 1);
    let r = api.request_at("1.93", Method::GET, "/v1/nodes/rf/vmedia", None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let listed = r.body.as_array().cloned().unwrap_or_default();
    assert!(listed.contains(&json!({"media_types": ["CD", "DVD"], "inserted": true, "image": url})), "{}", r.body);
    let r = api.request_at("1.89", Method::DELETE, "/v1/nodes/rf/vmedia?device_types=cdrom", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let media = emu.get(&cd).await;
    assert_eq!(media["Inserted"], false, "{media}");
    // An image the BMC cannot download is the BMC's refusal, not a success.
    let missing = format!("{}/images/none.iso", images.base);
    let r = api.request_at("1.89", Method::POST, "/v1/nodes/rf/vmedia", Some(json!({"device_type": "cdrom", "image_url": missing}))).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", r.body);
    assert_eq!(emu.get(&cd).await["Inserted"], false);

    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// What an operator gets wrong: a bad or missing address (validate says so in Ironic's words),
/// wrong credentials (the BMC's 401, in `last_error` after manage), a BMC that does not answer
/// (a connection failure), a power change that does not land within its timeout, and a system
/// that does not exist.
async fn redfish_mistakes_give_clear_errors(stack) {
    let Some(emu) = Emulator::start(EmulatorOptions {
        systems: 1,
        power_delay: Some(4),
        credentials: Some(("admin".into(), "right".into())),
        netns: None,
    }) else {
        return;
    };
    let Some(cluster) = cluster(stack, Vec::new()).await else {
        return;
    };
    let api = &cluster.api;

    for (name, info, says) in [
        ("no-address", json!({}), "Missing the following Redfish properties in node"),
        ("ftp", json!({"redfish_address": "ftp://bmc"}), "Invalid Redfish address ftp://bmc set in driver_info/redfish_address"),
        ("auth", json!({"redfish_address": "bmc", "redfish_auth_type": "kerberos"}), "The value should be one of \"basic\", \"session\" or \"auto\""),
        ("ca", json!({"redfish_address": "bmc", "redfish_verify_ca": "/no/such/ca.pem"}), "The value should be a Boolean or the path to a file/directory"),
    ] {
        api.create_node(json!({"name": name, "driver": "redfish", "driver_info": info})).await;
        let r = api.get(&format!("/v1/nodes/{name}/validate")).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["power"]["result"], false, "{name}: {}", r.body);
        let reason = r.body["power"]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(says), "{name}: {reason:?} lacks {says:?}");
        // A power change is refused at once, in Ironic's 400.
        let r = api.power(name, "power on").await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{name}: {}", r.body);
        assert!(r.fault().contains(says), "{name}: {}", r.fault());
    }

    // Wrong credentials: manage fails on the BMC's 401 and says so.
    let mut info = emu.driver_info(0);
    info["redfish_password"] = "wrong".into();
    api.create_node(json!({"name": "wrong-pw", "driver": "redfish", "driver_info": info})).await;
    api.accepted("wrong-pw", "manage").await;
    let node = api.wait_for("wrong-pw", "enroll").await;
    let error = node["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("returned code 401"), "{node}");
    assert!(error.contains("refused the credentials"), "{node}");
    assert!(!node.to_string().contains("\"wrong\""), "password shown: {node}");

    // A BMC that does not answer: a connection failure, after the configured attempts.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    api.create_node(json!({"name": "gone", "driver": "redfish",
        "driver_info": {"redfish_address": format!("http://127.0.0.1:{port}"), "redfish_system_id": "/redfish/v1/Systems/1"}})).await;
    let r = api.power("gone", "power on").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = wait_power_settled(&cluster, "gone").await;
    let error = node["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("Redfish connection failed for node"), "{node}");
    assert_eq!(node["power_state"], Value::Null, "{node}");

    // A system the BMC does not have.
    let mut info = emu.driver_info(0);
    info["redfish_system_id"] = "/redfish/v1/Systems/nope".into();
    api.create_node(json!({"name": "nosys", "driver": "redfish", "driver_info": info})).await;
    api.accepted("nosys", "manage").await;
    let node = api.wait_for("nosys", "enroll").await;
    assert!(node["last_error"].as_str().unwrap_or_default().contains("was not found"), "{node}");

    // A power change slower than the request's timeout fails with a clear error; the BMC
    // takes 3-4 s here.
    api.create_node(json!({"name": "slow", "driver": "redfish", "driver_info": emu.driver_info(0)})).await;
    let r = api.request_at("1.27", Method::PUT, "/v1/nodes/slow/states/power",
        Some(json!({"target": "power on", "timeout": 1}))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = wait_power_settled(&cluster, "slow").await;
    let error = node["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("Timed out after 1 secs waiting for power on"), "{node}");
    // With time enough it lands.
    let took = power(&cluster, &emu, "slow", "power on", "power on").await;
    eprintln!("redfish power on with REDFISH_EMU_POWER_DELAY=4 on {stack:?}: {took:?}");

    cluster.assert_no_locks().await;
}
}

/// A conductor that does not enable `redfish` does not offer it: a redfish node is refused
/// with Ironic's words, and /v1/drivers and /v1/conductors show only what is enabled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardware_types_are_what_the_conductors_enable() {
    let Some(cluster) = cluster(
        Stack::Embedded,
        vec![("FERRUM_ENABLED_HARDWARE_TYPES", "fake-hardware".to_owned())],
    )
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let r = api
        .create_node_reply(
            json!({"driver": "redfish", "driver_info": {"redfish_address": "http://bmc"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(
        r.fault()
            .contains("No conductor service registered which supports driver redfish"),
        "{}",
        r.fault()
    );
    let r = api.get("/v1/drivers").await;
    let names: Vec<&str> = r.body["drivers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert_eq!(names, ["fake-hardware"], "{}", r.body);
    let r = api.get("/v1/conductors?detail=True").await;
    assert_eq!(
        r.body["conductors"][0]["drivers"],
        json!(["fake-hardware"]),
        "{}",
        r.body
    );
}

on_both_stacks! {
/// `redfish-virtual-media` boot: the ramdisk boot of automated cleaning (a `direct` node's
/// provide) inserts the deploy ISO into the emulator's virtual CD, makes the CD the next boot
/// device and powers the system on, then waits for the agent in `clean wait`.
async fn virtual_media_boot_inserts_the_deploy_iso(stack) {
    let Some(emu) = Emulator::start(EmulatorOptions::default()) else {
        return;
    };
    let Some(cluster) = cluster(stack, Vec::new()).await else {
        return;
    };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let iso = images.add("ipa.iso", vec![0x33_u8; 32 << 10]);
    let mut info = emu.driver_info(0);
    info["deploy_iso"] = iso.clone().into();
    api.create_node(json!({"name": "vm-boot", "driver": "redfish", "driver_info": info,
        "boot_interface": "redfish-virtual-media"})).await;
    let r = api.get("/v1/nodes/vm-boot/validate").await;
    assert_eq!(r.body["boot"]["result"], true, "{}", r.body);
    api.accepted("vm-boot", "manage").await;
    api.wait_for("vm-boot", "manageable").await;
    api.accepted("vm-boot", "provide").await;
    let node = api.wait_for("vm-boot", "clean wait").await;
    assert_eq!(node["power_state"], "power on", "{node}");
    let system = bmc_system(&emu, 0).await;
    assert_eq!(system["PowerState"], "On", "{system}");
    assert_eq!(system["Boot"]["BootSourceOverrideTarget"], "Cd", "{system}");
    let media = emu.get(&format!("{}/VirtualMedia/Cd", emu.systems[0])).await;
    assert_eq!((&media["Inserted"], &media["Image"]), (&json!(true), &json!(iso)), "{media}");
    assert_eq!(images.served("ipa.iso"), 1);

    // Without a deploy ISO the boot interface does not validate, in Ironic's words.
    api.create_node(json!({"name": "no-iso", "driver": "redfish", "driver_info": emu.driver_info(0),
        "boot_interface": "redfish-virtual-media"})).await;
    let r = api.get("/v1/nodes/no-iso/validate").await;
    assert_eq!(r.body["boot"]["result"], false, "{}", r.body);
    assert!(r.body["boot"]["reason"].as_str().unwrap_or_default()
        .contains("Missing are: ['deploy_kernel', 'deploy_ramdisk']"), "{}", r.body);
    cluster.assert_no_locks().await;
}
}
