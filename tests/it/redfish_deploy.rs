//! End to end on emulated hardware: a `redfish` node with `redfish-virtual-media` boot and the
//! `direct` deploy is cleaned and deployed on sushy-tools' emulator with the real, sandboxed
//! agent, on both stacks. The emulator boots nothing itself: the test's firmware
//! (`util::redfish::Firmware`) watches the emulated system, and when Ferrum has inserted the
//! deploy ISO into its virtual CD, set it to boot from the CD and powered it on, starts the
//! agent as the ISO's ramdisk would come up; when Ferrum powers the system off, the agent goes.
//! So every step of the deploy that touches the machine goes through the BMC, and the agent
//! only runs when Ferrum has booted it.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{
    Api, Cluster, ClusterOptions,
    ipa::{ImageServer, raw_disk_image, sha256_hex},
    ipa_sandbox, on_both_stacks,
    redfish::{Emulator, EmulatorOptions, Firmware},
};

const IMAGE_SIZE: usize = 4 << 20;

/// Waits until the node is unlocked in `state`, failing at once if it settles in another
/// stable state, with the firmware's story and the agents' logs.
async fn wait_state(api: &Api, uuid: &str, state: &str, limit: Duration, fw: &Firmware) -> Value {
    api.wait_settled(uuid, state, limit, Duration::from_millis(100), || {
        format!(
            "--- firmware ---\n{}\n--- agents ---\n{}",
            fw.events().join("\n"),
            fw.agent_logs()
        )
    })
    .await
}

on_both_stacks! {
/// enroll → manage → provide (automated cleaning in the agent) → deploy → `active`, all through
/// the emulated BMC: each ramdisk boot inserts the deploy ISO (the emulator downloads it), boots
/// once from the CD and powers on; the end of cleaning and the deploy's instance boot eject it;
/// the deploy leaves the system on, booting from its disk, with the image written to the agent's
/// disk byte for byte.
async fn a_redfish_virtual_media_node_deploys_with_the_real_agent(stack) {
    if ipa_sandbox().is_none() {
        return;
    }
    // Power changes land 1-2 s after they are asked for, so the firmware sees every off.
    let Some(emu) = Emulator::start(EmulatorOptions {
        power_delay: Some(2),
        credentials: Some(("admin".into(), "vm-pw".into())),
        ..EmulatorOptions::default()
    }) else {
        return;
    };
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        rpc_timeout: 15.0,
        env: vec![
            ("FERRUM_DEPLOY_CALLBACK_TIMEOUT", "120".to_owned()),
            ("FERRUM_CLEAN_CALLBACK_TIMEOUT", "120".to_owned()),
            ("FERRUM_CHECK_PROVISION_STATE_INTERVAL", "1".to_owned()),
            ("FERRUM_REDFISH_CONNECTION_ATTEMPTS", "2".to_owned()),
            ("FERRUM_REDFISH_CONNECTION_RETRY_INTERVAL", "0.2".to_owned()),
        ],
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let iso_url = images.add("ipa.iso", vec![0x49_u8; 256 << 10]);
    let image = raw_disk_image(IMAGE_SIZE, 7);
    let image_url = images.add("disk.raw", image.clone());
    let mac = emu.mac(0).await;
    let firmware = emu.firmware(0, &api.base, &mac, &iso_url);

    let mut info = emu.driver_info(0);
    info["deploy_iso"] = iso_url.clone().into();
    info["deploy_forces_oob_reboot"] = true.into();
    let node = api.create_node(json!({
        "name": "vm-deploy",
        "driver": "redfish",
        "boot_interface": "redfish-virtual-media",
        "deploy_interface": "direct",
        "driver_info": info,
        "instance_info": {
            "image_source": image_url,
            "image_os_hash_algo": "sha256",
            "image_os_hash_value": sha256_hex(&image),
            "image_disk_format": "raw",
        },
    })).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.add_port(&uuid, &mac).await;
    let r = api.get(&format!("/v1/nodes/{uuid}/validate")).await;
    for interface in ["boot", "deploy", "power", "management"] {
        assert_eq!(r.body[interface]["result"], true, "{interface}: {}", r.body);
    }

    api.accepted(&uuid, "manage").await;
    wait_state(api, &uuid, "manageable", Duration::from_secs(30), &firmware).await;

    // Automated cleaning boots the ramdisk from the CD, the agent erases its disk, and the
    // cleaning ends with the system off and the CD ejected.
    let started = Instant::now();
    api.accepted(&uuid, "provide").await;
    let available = wait_state(api, &uuid, "available", Duration::from_secs(120), &firmware).await;
    let cleaned_in = started.elapsed();
    assert_eq!(available["power_state"], "power off", "{available}");
    assert!(available["last_error"].is_null(), "{available}");
    let system = emu.get(&emu.systems[0]).await;
    assert_eq!(system["PowerState"], "Off", "{system}");
    let cd = emu.get(&format!("{}/VirtualMedia/Cd", emu.systems[0])).await;
    assert_eq!(cd["Inserted"], false, "the cleaning left its ISO in the CD: {cd}");
    assert_eq!(images.served("ipa.iso"), 1, "the emulator downloaded the ISO when it was inserted");
    let ramdisk_boots = |fw: &Firmware| fw.events().iter().filter(|e| e.contains("booting the deploy ISO")).count();
    assert_eq!(ramdisk_boots(&firmware), 1, "{:?}", firmware.events());

    // The deploy boots the ramdisk again, the agent writes the image, the CD is ejected, the
    // system set to boot from its disk, powered off and on into the instance.
    let started = Instant::now();
    api.accepted(&uuid, "active").await;
    let active = wait_state(api, &uuid, "active", Duration::from_secs(120), &firmware).await;
    eprintln!("{stack:?}: redfish virtual media node cleaned in {cleaned_in:?}, deployed in {:?}", started.elapsed());
    assert_eq!(active["power_state"], "power on", "{active}");
    assert!(active["last_error"].is_null(), "{active}");
    assert_eq!(images.served("ipa.iso"), 2, "the deploy inserted the ISO again");
    assert!(images.served("disk.raw") >= 1);
    let system = emu.get(&emu.systems[0]).await;
    assert_eq!(system["PowerState"], "On", "{system}");
    assert_eq!(system["Boot"]["BootSourceOverrideTarget"], "Hdd", "{system}");
    let cd = emu.get(&format!("{}/VirtualMedia/Cd", emu.systems[0])).await;
    assert_eq!((&cd["Inserted"], &cd["Image"]), (&json!(false), &json!("")), "{cd}");
    let r = api.request_at("1.93", Method::GET, &format!("/v1/nodes/{uuid}/vmedia"), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body.as_array().unwrap().iter().all(|m| m["inserted"] == false), "{}", r.body);

    // The machine's story: two ramdisk boots from the CD, each ended by a power off, then the
    // instance's boot from the disk, with no agent.
    let events = firmware
        .events_ending_with(|e| e.contains("booting from Hdd") && e.contains("no ramdisk"), Duration::from_secs(10))
        .await;
    let last = events.last().cloned().unwrap_or_default();
    assert!(last.contains("booting from Hdd") && last.contains("no ramdisk"), "{events:?}");
    assert_eq!(ramdisk_boots(&firmware), 2, "{events:?}");
    let written = firmware.with_log(|log| {
        assert_eq!(log.agents.len(), 2, "{events:?}");
        assert!(!log.running, "{events:?}");
        log.agents[1].disk_prefix(image.len())
    });
    assert!(written == image, "the deploy's agent's disk does not hold the image\n{}", firmware.agent_logs());
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// A `redfish` virtual-media deploy whose agent never calls back: the callback timeout fails
/// it, and the node is powered off through the BMC and its deploy ISO ejected, so that it does
/// not stay up in its ramdisk; the node is unlocked and says why.
async fn a_redfish_deploy_that_times_out_is_powered_off_and_its_iso_ejected(stack) {
    let Some(emu) = Emulator::start(EmulatorOptions::default()) else {
        return;
    };
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        env: vec![
            ("FERRUM_DEPLOY_CALLBACK_TIMEOUT", "3".to_owned()),
            ("FERRUM_CHECK_PROVISION_STATE_INTERVAL", "1".to_owned()),
        ],
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let iso_url = images.add("ipa.iso", vec![0x49_u8; 64 << 10]);
    let mut info = emu.driver_info(0);
    info["deploy_iso"] = iso_url.clone().into();
    let node = api
        .available_node(json!({
            "name": "vm-silent",
            "driver": "redfish",
            "boot_interface": "redfish-virtual-media",
            "deploy_interface": "direct",
            "automated_clean": false,
            "driver_info": info,
            "instance_info": {
                "image_source": images.add("disk.raw", vec![0_u8; 4096]),
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": sha256_hex(&[0_u8; 4096]),
                "image_disk_format": "raw",
            },
        }))
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let cd_path = format!("{}/VirtualMedia/Cd", emu.systems[0]);
    api.accepted(&uuid, "active").await;
    let waiting = api.wait_for(&uuid, "wait call-back").await;
    assert_eq!(waiting["power_state"], "power on", "{waiting}");
    let cd = emu.get(&cd_path).await;
    assert_eq!((&cd["Inserted"], &cd["Image"]), (&json!(true), &json!(iso_url)), "{cd}");

    let failed = api.wait_for(&uuid, "deploy failed").await;
    let error = failed["last_error"].as_str().unwrap_or_default();
    assert!(error.starts_with(&format!("Timeout reached while waiting for callback for node {uuid}")), "{failed}");
    assert_eq!(failed["power_state"], "power off", "{failed}");
    let system = emu.get(&emu.systems[0]).await;
    assert_eq!(system["PowerState"], "Off", "{system}");
    let cd = emu.get(&cd_path).await;
    assert_eq!(cd["Inserted"], false, "the failed deploy left its ISO in the CD: {cd}");
    cluster.assert_no_locks().await;
}
}

/// A temporary directory of the test's own (the conductor's HTTP root and dnsmasq files).
fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ferrum-{name}-{}-{}",
        std::process::id(),
        crate::util::cluster::free_port()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A cluster whose one conductor boots nodes over the network: `http_root` under `dir`, served
/// by the conductor itself, and the dnsmasq DHCP provider writing under `dir/dhcp`.
async fn network_boot_cluster(stack: crate::util::Stack, dir: &std::path::Path) -> Option<Cluster> {
    network_boot_cluster_with(stack, dir, &[]).await
}

/// [`network_boot_cluster`] with `more` settings.
async fn network_boot_cluster_with(
    stack: crate::util::Stack,
    dir: &std::path::Path,
    more: &[(&'static str, &str)],
) -> Option<Cluster> {
    let http_port = crate::util::cluster::free_port();
    let more = more.iter().map(|(k, v)| (*k, (*v).to_owned()));
    Cluster::start(ClusterOptions {
        stack,
        conductors: 1,
        rpc_timeout: 15.0,
        env: vec![
            ("FERRUM_DEPLOY_CALLBACK_TIMEOUT", "120".to_owned()),
            ("FERRUM_CLEAN_CALLBACK_TIMEOUT", "120".to_owned()),
            ("FERRUM_CHECK_PROVISION_STATE_INTERVAL", "1".to_owned()),
            ("FERRUM_HTTP_ROOT", dir.join("http").display().to_string()),
            ("FERRUM_HTTP_BIND", format!("127.0.0.1:{http_port}")),
            ("FERRUM_HTTP_URL", format!("http://127.0.0.1:{http_port}")),
            ("FERRUM_DHCP_PROVIDER", "dnsmasq".to_owned()),
            (
                "FERRUM_DNSMASQ_DHCP_HOSTSDIR",
                dir.join("dhcp/hosts").display().to_string(),
            ),
            (
                "FERRUM_DNSMASQ_DHCP_OPTSDIR",
                dir.join("dhcp/opts").display().to_string(),
            ),
        ]
        .into_iter()
        .chain(more)
        .collect(),
        ..ClusterOptions::default()
    })
    .await
}

/// The `driver_info` of a node on the emulator's first system with a (dummy) deploy kernel and
/// ramdisk served by `images`.
fn network_boot_info(emu: &Emulator, images: &ImageServer) -> Value {
    let mut info = emu.driver_info(0);
    info["deploy_kernel"] = images.add("ipa.kernel", vec![0x4b_u8; 4096]).into();
    info["deploy_ramdisk"] = images.add("ipa.initramfs", vec![0x52_u8; 4096]).into();
    info
}

/// A `redfish` node with `ipxe` boot and `agent` inspection on `info`, made `manageable`.
async fn manageable_ipxe_node(api: &Api, info: Value) -> String {
    let node = api
        .create_node(json!({
            "driver": "redfish",
            "boot_interface": "ipxe",
            "inspect_interface": "agent",
            "driver_info": info,
        }))
        .await;
    let uuid = node["uuid"].as_str().expect("uuid").to_owned();
    api.accepted(&uuid, "manage").await;
    api.wait_settled(
        &uuid,
        "manageable",
        Duration::from_secs(30),
        Duration::from_millis(100),
        String::new,
    )
    .await;
    uuid
}

/// [`crate::util::assert_network_boot_withdrawn`] for a test whose DHCP and HTTP roots are
/// under `dir`.
fn assert_network_boot_withdrawn(dir: &std::path::Path, uuid: &str, mac: &str) {
    crate::util::assert_network_boot_withdrawn(
        &dir.join("dhcp/hosts"),
        &dir.join("dhcp/opts"),
        &dir.join("http"),
        uuid,
        mac,
    );
}

on_both_stacks! {
/// A `redfish` node with the `ipxe` boot interface is cleaned and deployed with the real agent,
/// its ramdisk booted over the network: each ramdisk boot publishes the deploy kernel and ramdisk
/// (fetched once into the image cache), an iPXE configuration for the node's MAC and the DHCP
/// files that hand iPXE the boot script, and sets the next boot to the network; the test's
/// firmware follows exactly that chain, over the conductor's own HTTP server. Once the ramdisk's
/// work is done, all of it is withdrawn and the node boots from its disk, persistently.
async fn an_ipxe_node_boots_its_ramdisk_over_the_network_and_deploys(stack) {
    if ipa_sandbox().is_none() {
        return;
    }
    let Some(emu) = Emulator::start(EmulatorOptions {
        power_delay: Some(2),
        ..EmulatorOptions::default()
    }) else {
        return;
    };
    let dir = temp_dir("ipxe");
    let Some(cluster) = network_boot_cluster(stack, &dir).await else {
        return;
    };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let kernel = vec![0x4b_u8; 96 << 10];
    let ramdisk = vec![0x52_u8; 160 << 10];
    let mut info = emu.driver_info(0);
    info["deploy_kernel"] = images.add("ipa.kernel", kernel.clone()).into();
    info["deploy_ramdisk"] = images.add("ipa.initramfs", ramdisk.clone()).into();
    info["deploy_forces_oob_reboot"] = true.into();
    let image = raw_disk_image(IMAGE_SIZE, 11);
    let node = api.create_node(json!({
        "name": "vm-ipxe",
        "driver": "redfish",
        "boot_interface": "ipxe",
        "deploy_interface": "direct",
        "driver_info": info,
        "instance_info": {
            "image_source": images.add("disk.raw", image.clone()),
            "image_os_hash_algo": "sha256",
            "image_os_hash_value": sha256_hex(&image),
            "image_disk_format": "raw",
        },
    })).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let mac = emu.mac(0).await;
    let firmware = emu.network_firmware(0, &mac, &dir.join("dhcp"));
    api.add_port(&uuid, &mac).await;
    let r = api.get(&format!("/v1/nodes/{uuid}/validate")).await;
    for interface in ["boot", "deploy", "power", "management"] {
        assert_eq!(r.body[interface]["result"], true, "{interface}: {}", r.body);
    }

    api.accepted(&uuid, "manage").await;
    wait_state(api, &uuid, "manageable", Duration::from_secs(30), &firmware).await;
    api.accepted(&uuid, "provide").await;
    let available = wait_state(api, &uuid, "available", Duration::from_secs(120), &firmware).await;
    assert!(available["last_error"].is_null(), "{available}");
    assert_network_boot_withdrawn(&dir, &uuid, &mac);

    api.accepted(&uuid, "active").await;
    let active = wait_state(api, &uuid, "active", Duration::from_secs(120), &firmware).await;
    assert_eq!(active["power_state"], "power on", "{active}");
    assert!(active["last_error"].is_null(), "{active}");
    assert_network_boot_withdrawn(&dir, &uuid, &mac);
    let system = emu.get(&emu.systems[0]).await;
    assert_eq!(system["Boot"]["BootSourceOverrideTarget"], "Hdd", "{system}");
    assert_eq!(system["Boot"]["BootSourceOverrideEnabled"], "Continuous", "{system}");

    let events = firmware
        .events_ending_with(|e| e.contains("booting from Hdd") && e.contains("no ramdisk"), Duration::from_secs(10))
        .await;
    let net_boots: Vec<&String> = events.iter().filter(|e| e.contains("network boot: kernel")).collect();
    assert_eq!(net_boots.len(), 2, "a cleaning and a deploy each boot the ramdisk: {events:?}");
    let expected = format!("kernel {} bytes, ramdisk {} bytes, agent for {}", kernel.len(), ramdisk.len(), api.base);
    assert!(net_boots.iter().all(|e| e.contains(&expected)), "{events:?}");
    assert_eq!((images.served("ipa.kernel"), images.served("ipa.initramfs")), (1, 1), "the image cache fetches each once");
    let written = firmware.with_log(|log| log.agents[1].disk_prefix(image.len()));
    assert!(written == image, "the deploy's agent's disk does not hold the image\n{}", firmware.agent_logs());
    cluster.assert_no_locks().await;
    let _ = std::fs::remove_dir_all(&dir);
}
}

/// The founding bug on a network-booted node: a deploy whose image fails its checksum ends in
/// `deploy failed`, naming the checksum, with the node powered off, its network boot withdrawn
/// (no DHCP, no boot files) and its lock released; the node can be PATCHed and deployed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ipxe_deploy_with_a_bad_checksum_fails_withdraws_its_network_boot_and_can_be_redeployed()
{
    if ipa_sandbox().is_none() {
        return;
    }
    let Some(emu) = Emulator::start(EmulatorOptions {
        power_delay: Some(2),
        ..EmulatorOptions::default()
    }) else {
        return;
    };
    let dir = temp_dir("ipxe-fail");
    let Some(cluster) = network_boot_cluster(crate::util::Stack::Embedded, &dir).await else {
        return;
    };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let mut info = emu.driver_info(0);
    info["deploy_kernel"] = images.add("ipa.kernel", vec![1_u8; 4096]).into();
    info["deploy_ramdisk"] = images.add("ipa.initramfs", vec![2_u8; 4096]).into();
    info["deploy_forces_oob_reboot"] = true.into();
    let image = raw_disk_image(IMAGE_SIZE, 12);
    let node = api
        .available_node(json!({
            "name": "vm-ipxe-fail",
            "driver": "redfish",
            "boot_interface": "ipxe",
            "deploy_interface": "direct",
            "automated_clean": false,
            "driver_info": info,
            "instance_info": {
                "image_source": images.add("disk.raw", image.clone()),
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": sha256_hex(b"not the image"),
                "image_disk_format": "raw",
            },
        }))
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let mac = emu.mac(0).await;
    let firmware = emu.network_firmware(0, &mac, &dir.join("dhcp"));
    api.add_port(&uuid, &mac).await;

    api.accepted(&uuid, "active").await;
    let failed = wait_state(
        api,
        &uuid,
        "deploy failed",
        Duration::from_secs(120),
        &firmware,
    )
    .await;
    let error = failed["last_error"].as_str().unwrap_or_default();
    assert!(
        error.to_lowercase().contains("checksum") || error.contains("hash"),
        "{failed}"
    );
    assert_eq!(failed["power_state"], "power off", "{failed}");
    assert_network_boot_withdrawn(&dir, &uuid, &mac);
    cluster.assert_no_locks().await;

    let r = api.patch(&uuid, json!([{"op": "replace", "path": "/instance_info/image_os_hash_value", "value": sha256_hex(&image)}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.accepted(&uuid, "active").await;
    let active = wait_state(api, &uuid, "active", Duration::from_secs(120), &firmware).await;
    assert!(active["last_error"].is_null(), "{active}");
    assert_network_boot_withdrawn(&dir, &uuid, &mac);
    cluster.assert_no_locks().await;
    let _ = std::fs::remove_dir_all(&dir);
}

on_both_stacks! {
/// In-band inspection of a node that boots over the network (`ipxe` boot, `agent` inspect):
/// the ramdisk's boot is prepared as a deploy's (the node's MAC allowed in DHCP, its iPXE
/// configuration published), the kernel is told where to post what it finds
/// (`ipa-inspection-callback-url`), and the node is powered on; an inspection aborted while it
/// waits for the agent withdraws all of it and powers the node off.
async fn an_ipxe_inspection_boots_the_ramdisk_with_its_callback_and_an_abort_withdraws_it(stack) {
    let Some(emu) = Emulator::start(EmulatorOptions::default()) else {
        return;
    };
    let dir = temp_dir("inspect");
    let Some(cluster) = network_boot_cluster(stack, &dir).await else {
        return;
    };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let uuid = manageable_ipxe_node(api, network_boot_info(&emu, &images)).await;
    let mac = emu.mac(0).await;
    api.add_port(&uuid, &mac).await;

    api.accepted(&uuid, "inspect").await;
    let waiting = api.wait_settled(&uuid, "inspect wait", Duration::from_secs(30), Duration::from_millis(100), String::new).await;
    assert_eq!(waiting["power_state"], "power on", "{waiting}");
    let config = std::fs::read_to_string(dir.join("http").join(&uuid).join("config")).expect("the node's iPXE configuration");
    let callback = config
        .split_whitespace()
        .find_map(|p| p.strip_prefix("ipa-inspection-callback-url="))
        .unwrap_or_else(|| panic!("no inspection callback on the kernel's line:\n{config}"));
    assert!(callback.starts_with("http") && callback.ends_with("/v1/continue_inspection"), "{callback}");
    assert!(config.contains("ipa-api-url="), "{config}");
    let host = std::fs::read_to_string(dir.join("dhcp/hosts").join(format!("ironic-{mac}.conf"))).unwrap_or_default();
    assert!(host.starts_with(&mac) && !host.contains("ignore"), "DHCP does not serve {mac}: {host}");

    api.accepted(&uuid, "abort").await;
    let failed = api.wait_settled(&uuid, "inspect failed", Duration::from_secs(30), Duration::from_millis(100), String::new).await;
    assert_eq!(failed["power_state"], "power off", "{failed}");
    assert_network_boot_withdrawn(&dir, &uuid, &mac);
}
}

on_both_stacks! {
/// Unmanaged in-band inspection (`inspector_require_managed_boot = false`) of a node without a
/// port, which `ipxe` cannot boot itself: the node is only set to boot from the network once and
/// powered on; the operator's boot answers it (`boot.ipxe`, written at the conductor's start,
/// chains the fallback script), dnsmasq is told to serve unknown MACs while it is inspected and
/// to ignore them again after; its BMC addresses are kept, loopback left out, and the agent's
/// data finds the node by the BMC address it reports (never by a loopback one); the inspection
/// creates the port of the MAC it booted from, and the next inspection, with that port, is
/// managed again.
async fn an_unmanaged_inspection_finds_its_node_by_bmc_address_and_creates_its_port(stack) {
    let Some(emu) = Emulator::start(EmulatorOptions::default()) else {
        return;
    };
    let dir = temp_dir("unmanaged");
    let settings = [
        ("FERRUM_INSPECTOR_REQUIRE_MANAGED_BOOT", "false"),
        ("FERRUM_IPXE_FALLBACK_SCRIPT", "inspector.ipxe"),
    ];
    let Some(cluster) = network_boot_cluster_with(stack, &dir, &settings).await else {
        return;
    };
    let api = &cluster.api;
    let boot = std::fs::read_to_string(dir.join("http/boot.ipxe")).expect("boot.ipxe written at the conductor's start");
    assert!(boot.contains("chain --autofree inspector.ipxe"), "{boot}");
    let unknown = dir.join("dhcp/hosts/unknown_hosts_filter");
    let wait_unknown = async |entry: &str| {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let now = std::fs::read_to_string(&unknown).unwrap_or_default();
            if now == entry {
                return;
            }
            assert!(Instant::now() < deadline, "unknown MACs' DHCP entry is {now:?}, not {entry:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    wait_unknown("*:*:*:*:*:*,ignore\n").await;

    let images = ImageServer::start().await;
    let mut info = network_boot_info(&emu, &images);
    // A node moved from `ipmi` keeps its ipmi_address: a lookup address (the emulator's own,
    // loopback, never is one).
    info["ipmi_address"] = "198.51.100.20".into();
    let uuid = manageable_ipxe_node(api, info).await;
    let r = api.request(Method::PUT, &format!("/v1/nodes/{uuid}/management/boot_device"), Some(json!({"boot_device": "disk"}))).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);

    api.accepted(&uuid, "inspect").await;
    let waiting = api.wait_settled(&uuid, "inspect wait", Duration::from_secs(30), Duration::from_millis(100), String::new).await;
    assert_eq!(waiting["power_state"], "power on", "{waiting}");
    assert_eq!(waiting["driver_internal_info"]["lookup_bmc_addresses"], json!(["198.51.100.20"]), "{waiting}");
    assert!(!dir.join("http").join(&uuid).exists(), "an unmanaged inspection publishes no boot of its own");
    let system = emu.get(emu.driver_info(0)["redfish_system_id"].as_str().unwrap()).await;
    assert_eq!(system["Boot"]["BootSourceOverrideTarget"], "Pxe", "{system}");
    wait_unknown("*:*:*:*:*:*\n").await;

    let mac = emu.mac(0).await;
    let mut data = json!({"inventory": crate::inspection::inventory(&mac, "198.51.100.50")});
    data["inventory"]["bmc_address"] = "127.0.0.1".into();
    let r = crate::inspection::post(api, "1.84", "", data.clone()).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "a loopback BMC address finds nothing: {}", r.body);
    data["inventory"]["bmc_address"] = "198.51.100.20".into();
    let r = crate::inspection::post(api, "1.84", "", data).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(r.body["node"]["uuid"], json!(uuid), "{}", r.body);
    let inspected = api.wait_settled(&uuid, "manageable", Duration::from_secs(30), Duration::from_millis(100), String::new).await;
    assert!(inspected["last_error"].is_null(), "{inspected}");
    assert_eq!(inspected["power_state"], "power off", "{inspected}");
    let ports = api.get(&format!("/v1/ports?node={uuid}&fields=address,pxe_enabled")).await;
    let ports: Vec<(Value, Value)> = ports.body["ports"].as_array().unwrap().iter().map(|p| (p["address"].clone(), p["pxe_enabled"].clone())).collect();
    assert_eq!(ports, [(json!(mac), json!(true))], "{ports:?}");
    wait_unknown("*:*:*:*:*:*,ignore\n").await;

    // With its port, the node's next inspection boots the ramdisk Ferrum publishes for it.
    api.accepted(&uuid, "inspect").await;
    api.wait_settled(&uuid, "inspect wait", Duration::from_secs(30), Duration::from_millis(100), String::new).await;
    assert!(dir.join("http").join(&uuid).join("config").exists(), "a managed inspection publishes the node's boot");
    api.accepted(&uuid, "abort").await;
    api.wait_settled(&uuid, "inspect failed", Duration::from_secs(30), Duration::from_millis(100), String::new).await;
    assert_network_boot_withdrawn(&dir, &uuid, &mac);
    wait_unknown("*:*:*:*:*:*,ignore\n").await;
}
}

/// With `inspector_require_managed_boot` (the default), an in-band inspection that the node's
/// boot interface cannot boot (`ipxe` without a port) is refused at once, 400 in Ironic's words,
/// and the node stays `manageable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inspection_that_cannot_boot_the_node_is_refused() {
    let Some(emu) = Emulator::start(EmulatorOptions::default()) else {
        return;
    };
    let dir = temp_dir("refused");
    let Some(cluster) = network_boot_cluster(crate::util::Stack::Embedded, &dir).await else {
        return;
    };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let uuid = manageable_ipxe_node(api, network_boot_info(&emu, &images)).await;
    let r = api
        .request(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "inspect"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let message = format!(
        "Insufficient information provided for managed inspection: Node {uuid} does not have any port associated with it"
    );
    assert!(r.body.to_string().contains(&message), "{}", r.body);
    let node = api.node(&uuid).await;
    assert_eq!(node["provision_state"], "manageable", "{node}");
    assert!(node["reservation"].is_null(), "{node}");
}

/// An inspection whose ramdisk boot was prepared but whose node then cannot be reached (its
/// BMC gone) fails at once in `inspect failed`, its boot files and DHCP allowance withdrawn, the
/// lock released, and so does a cleaning; with the BMC back, the node inspects again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ramdisk_boot_whose_bmc_is_gone_fails_and_withdraws_its_network_boot() {
    let Some(mut emu) = Emulator::start(EmulatorOptions::default()) else {
        return;
    };
    let dir = temp_dir("inspect-bmc-gone");
    let Some(cluster) = network_boot_cluster(crate::util::Stack::Embedded, &dir).await else {
        return;
    };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let uuid = manageable_ipxe_node(api, network_boot_info(&emu, &images)).await;
    let mac = emu.mac(0).await;
    api.add_port(&uuid, &mac).await;
    let settle = |state: &'static str| {
        api.wait_settled(
            &uuid,
            state,
            Duration::from_secs(60),
            Duration::from_millis(100),
            String::new,
        )
    };

    emu.stop();
    api.accepted(&uuid, "inspect").await;
    let failed = settle("inspect failed").await;
    let error = failed["last_error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("Failed to inspect hardware. Reason: unable to boot the ramdisk:"),
        "{failed}"
    );
    assert_network_boot_withdrawn(&dir, &uuid, &mac);
    // So does a cleaning's ramdisk boot (the deploy's and the rescue's are the same step).
    api.accepted(&uuid, "manage").await;
    settle("manageable").await;
    api.accepted(&uuid, "provide").await;
    let failed = settle("clean failed").await;
    assert!(!failed["last_error"].is_null(), "{failed}");
    assert_network_boot_withdrawn(&dir, &uuid, &mac);

    emu.restart();
    api.accepted(&uuid, "manage").await;
    settle("manageable").await;
    api.accepted(&uuid, "inspect").await;
    settle("inspect wait").await;
    api.accepted(&uuid, "abort").await;
    settle("inspect failed").await;
    assert_network_boot_withdrawn(&dir, &uuid, &mac);
}
