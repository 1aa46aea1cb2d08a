//! Enabled interfaces are configuration (Ironic's `enabled_<kind>_interfaces` and
//! `default_<kind>_interface`): a conductor offers, of each hardware type it enables, only the
//! interfaces it enables, registers them, and `/v1/drivers` shows what the alive conductors
//! registered; a node naming another interface is refused in Ironic's words. And the hash ring
//! sends a driver's nodes only to the conductors enabling it.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Api, Cluster, ClusterOptions, Stack, TestApp, clients_venv};

/// GET `path` and its 200 body.
async fn ok(api: &Api, path: &str) -> Value {
    let r = api.get(path).await;
    assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.body);
    r.body
}

/// With boot interfaces `fake`, `redfish-virtual-media` and `pxe` enabled, RAID only `no-raid`,
/// and `agent` as the default inspect interface: the drivers show exactly that (each hardware
/// type's default its first enabled one), new nodes get those defaults, and an interface that
/// is not enabled, or that the hardware type does not support, is refused at create and PATCH
/// with Ironic's messages; also through the real `baremetal` CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn enabled_interfaces_are_configuration() {
    let app = TestApp::builder()
        .configure(|c| {
            let names = |list: &[&str]| Some(list.iter().map(|n| (*n).to_owned()).collect());
            c.conductor.enabled_boot_interfaces = names(&["fake", "redfish-virtual-media", "pxe"]);
            c.conductor.enabled_raid_interfaces = names(&["no-raid"]);
            c.conductor.default_inspect_interface = Some("agent".to_owned());
        })
        .start()
        .await;
    let api = app.api();

    let redfish = ok(api, "/v1/drivers/redfish").await;
    assert_eq!(redfish["enabled_boot_interfaces"], json!(["pxe", "redfish-virtual-media"]), "{redfish}");
    assert_eq!(redfish["default_boot_interface"], "pxe", "{redfish}");
    assert_eq!(redfish["enabled_raid_interfaces"], json!(["no-raid"]), "{redfish}");
    assert_eq!(redfish["default_inspect_interface"], "agent", "{redfish}");
    assert_eq!(redfish["enabled_inspect_interfaces"], json!(["agent", "no-inspect"]), "{redfish}");
    assert_eq!(redfish["default_power_interface"], "redfish", "{redfish}");
    let fake = ok(api, "/v1/drivers/fake-hardware").await;
    assert_eq!(fake["enabled_boot_interfaces"], json!(["fake"]), "{fake}");
    assert_eq!(fake["enabled_raid_interfaces"], json!(["no-raid"]), "{fake}");
    assert_eq!(fake["default_inspect_interface"], "agent", "{fake}");
    assert_eq!(fake["enabled_deploy_interfaces"], json!(["fake", "direct"]), "{fake}");
    let listed = ok(api, "/v1/drivers?detail=True").await;
    assert_eq!(listed["drivers"][2]["enabled_boot_interfaces"], redfish["enabled_boot_interfaces"], "{listed}");
    assert_eq!(listed["drivers"][0]["enabled_raid_interfaces"], json!(["no-raid"]), "{listed}");
    let conductors = ok(api, "/v1/conductors?detail=True").await;
    for c in conductors["conductors"].as_array().unwrap() {
        assert_eq!(c["drivers"], json!(["fake-hardware", "ipmi", "redfish"]), "{conductors}");
    }

    // New nodes get the defaults.
    let rf = api.create_node(json!({"name": "rf1", "driver": "redfish",
        "driver_info": {"redfish_address": "http://127.0.0.1:9"}})).await;
    assert_eq!((&rf["boot_interface"], &rf["inspect_interface"], &rf["raid_interface"]),
        (&json!("pxe"), &json!("agent"), &json!("no-raid")), "{rf}");
    let f1 = api.create_node(json!({"name": "f1", "driver": "fake-hardware"})).await;
    assert_eq!((&f1["boot_interface"], &f1["inspect_interface"]), (&json!("fake"), &json!("agent")), "{f1}");

    // Not enabled: Ironic's InterfaceNotFoundInEntrypoint, listing the enabled ones.
    let r = api.create_node_reply(json!({"driver": "redfish", "boot_interface": "ipxe"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.fault(), "Could not find the following interface in the 'ironic.hardware.interfaces.boot' entrypoint: ipxe. Valid interfaces are ['fake', 'redfish-virtual-media', 'pxe'].");
    let r = api.patch("f1", json!([{"op": "replace", "path": "/raid_interface", "value": "fake"}])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.fault(), "Could not find the following interface in the 'ironic.hardware.interfaces.raid' entrypoint: fake. Valid interfaces are ['no-raid'].");
    // Enabled, but not for this hardware type: Ironic's IncompatibleInterface.
    let r = api.patch("rf1", json!([{"op": "replace", "path": "/boot_interface", "value": "fake"}])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.fault(), "boot interface implementation 'fake' is not supported by hardware type redfish.");
    let r = api.patch("rf1", json!([{"op": "replace", "path": "/boot_interface", "value": "redfish-virtual-media"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    // Removing it goes back to the configured default.
    let r = api.patch("rf1", json!([{"op": "remove", "path": "/boot_interface"}])).await;
    assert_eq!((r.status, &r.body["boot_interface"]), (StatusCode::OK, &json!("pxe")), "{}", r.body);
    assert_eq!(api.node("f1").await["raid_interface"], "no-raid");

    // The real CLI sees the same.
    if let Some(venv) = clients_venv() {
        let base = api.base.clone();
        let cli = move |args: &[&str]| {
            std::process::Command::new(venv.join("bin/baremetal"))
                .args(["--os-auth-type", "none", "--os-endpoint", &base])
                .args(args)
                .output()
                .expect("run baremetal")
        };
        let (shown, refused) = tokio::task::spawn_blocking(move || {
            (cli(&["driver", "show", "redfish", "-f", "json"]),
             cli(&["node", "create", "--driver", "redfish", "--boot-interface", "ipxe"]))
        }).await.unwrap();
        assert!(shown.status.success(), "{shown:?}");
        let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
        assert_eq!((&shown["default_boot_interface"], &shown["enabled_boot_interfaces"]),
            (&json!("pxe"), &json!("pxe, redfish-virtual-media")), "{shown}");
        assert!(!refused.status.success(), "{refused:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("Could not find the following interface in the 'ironic.hardware.interfaces.boot' entrypoint: ipxe"), "{stderr}");
    }
    app.assert_no_locks().await;
}

/// Two conductors, one enabling only `fake-hardware`, the other `redfish` too (with one boot
/// interface): every redfish node goes to the second, whose interfaces are the driver's; with
/// the first alone, a redfish node is refused in Ironic's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hash_ring_sends_a_driver_to_the_conductors_enabling_it() {
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        stack: Stack::MultiHost,
        conductors: 1,
        env: vec![("FERRUM_ENABLED_HARDWARE_TYPES", "fake-hardware".to_owned())],
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let r = cluster
        .api
        .create_node_reply(json!({"driver": "redfish"}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(
        r.fault().contains(
            "No conductor service registered which supports driver redfish for conductor group \"\""
        ),
        "{}",
        r.fault()
    );

    cluster.spawn_conductor_with(
        "rf",
        "rf-host",
        &[
            (
                "FERRUM_ENABLED_HARDWARE_TYPES",
                "fake-hardware,redfish".to_owned(),
            ),
            (
                "FERRUM_ENABLED_BOOT_INTERFACES",
                "fake,redfish-virtual-media".to_owned(),
            ),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let redfish = loop {
        let r = cluster.api.get("/v1/drivers/redfish").await;
        if r.status == StatusCode::OK {
            break r.body;
        }
        assert!(
            Instant::now() < deadline,
            "the redfish conductor did not register: {}\n{}",
            r.body,
            cluster.log_of("rf")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(redfish["hosts"], json!(["rf-host"]), "{redfish}");
    assert_eq!(
        redfish["enabled_boot_interfaces"],
        json!(["redfish-virtual-media"]),
        "{redfish}"
    );
    let fake = ok(&cluster.api, "/v1/drivers/fake-hardware").await;
    assert_eq!(fake["hosts"].as_array().map(Vec::len), Some(2), "{fake}");

    for i in 0..8 {
        let node = cluster
            .api
            .create_node(json!({"name": format!("rf{i}"), "driver": "redfish"}))
            .await;
        assert_eq!(node["boot_interface"], "redfish-virtual-media", "{node}");
        let r = cluster
            .api
            .request(
                Method::GET,
                &format!("/v1/nodes/rf{i}?fields=conductor"),
                None,
            )
            .await;
        assert_eq!(r.body["conductor"], "rf-host", "{}", r.body);
    }
    cluster.assert_no_locks().await;
}
