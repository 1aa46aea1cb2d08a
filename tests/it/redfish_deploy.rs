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

/// The `instance_info` of a raw whole-disk image at `source` whose SHA-256 is `sha256`.
fn raw_image(source: &str, sha256: &str) -> Value {
    json!({
        "image_source": source,
        "image_os_hash_algo": "sha256",
        "image_os_hash_value": sha256,
        "image_disk_format": "raw",
    })
}

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
        "instance_info": raw_image(&image_url, &sha256_hex(&image)),
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
            "instance_info": raw_image(&images.add("disk.raw", vec![0_u8; 4096]), &sha256_hex(&[0_u8; 4096])),
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

/// What a boot interface test with the real agent starts from: the agent's sandbox, the
/// emulator (power changes landing within 1..2 s), a temporary directory `name` and a
/// network-boot cluster on it; None where one of them cannot run (announced).
async fn agent_boot_setup(
    stack: crate::util::Stack,
    name: &str,
) -> Option<(Emulator, std::path::PathBuf, Cluster)> {
    ipa_sandbox()?;
    let emu = Emulator::start(EmulatorOptions {
        power_delay: Some(2),
        ..EmulatorOptions::default()
    })?;
    let dir = temp_dir(name);
    let cluster = network_boot_cluster(stack, &dir).await?;
    Some((emu, dir, cluster))
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
    let Some((emu, dir, cluster)) = agent_boot_setup(stack, "ipxe").await else {
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
        "instance_info": raw_image(&images.add("disk.raw", image.clone()), &sha256_hex(&image)),
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
    let Some((emu, dir, cluster)) =
        agent_boot_setup(crate::util::Stack::Embedded, "ipxe-fail").await
    else {
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
            "instance_info": raw_image(&images.add("disk.raw", image.clone()), &sha256_hex(b"not the image")),
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
    assert!(inspected["driver_internal_info"].get("lookup_bmc_addresses").is_none(), "the lookup's addresses stay: {inspected}");
    let ports = api.get(&format!("/v1/ports?node={uuid}&fields=address,pxe_enabled")).await;
    let ports: Vec<(Value, Value)> = ports.body["ports"].as_array().unwrap().iter().map(|p| (p["address"].clone(), p["pxe_enabled"].clone())).collect();
    assert_eq!(ports, [(json!(mac), json!(true))], "{ports:?}");
    wait_unknown("*:*:*:*:*:*,ignore\n").await;

    // With its port, the node's next inspection boots the ramdisk Ferrum publishes for it.
    api.accepted(&uuid, "inspect").await;
    api.wait_settled(&uuid, "inspect wait", Duration::from_secs(30), Duration::from_millis(100), String::new).await;
    assert!(dir.join("http").join(&uuid).join("config").exists(), "a managed inspection publishes the node's boot");
    api.accepted(&uuid, "abort").await;
    let aborted = api.wait_settled(&uuid, "inspect failed", Duration::from_secs(30), Duration::from_millis(100), String::new).await;
    assert!(aborted["driver_internal_info"].get("lookup_bmc_addresses").is_none(), "the lookup's addresses stay: {aborted}");
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

/// What pycdlib reads of a boot ISO: the El Torito platform and sector count, and each named
/// file's bytes (hex-free: lengths and a SHA-256), as one JSON object.
fn read_boot_iso(iso: &[u8], files: &[&str]) -> Option<Value> {
    let venv = crate::util::services::clients_venv()?;
    let path = std::env::temp_dir().join(format!("ferrum-boot-iso-{}.iso", uuid::Uuid::new_v4()));
    std::fs::write(&path, iso).expect("write the ISO");
    let script = r#"
import hashlib, io, json, sys, pycdlib
iso = pycdlib.PyCdlib()
iso.open(sys.argv[1])
cat = iso.eltorito_boot_catalog
out = {"platform": cat.validation_entry.platform_id, "sectors": cat.initial_entry.sector_count,
       "label": iso.pvd.volume_identifier.decode().strip()}
for name in sys.argv[2:]:
    buf = io.BytesIO()
    iso.get_file_from_iso_fp(buf, joliet_path="/" + name + ";1")
    data = buf.getvalue()
    out[name] = {"len": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                 "text": data.decode("latin-1") if name.endswith(".cfg") else None}
print(json.dumps(out))
"#;
    let out = std::process::Command::new(venv.join("bin/python"))
        .args(["-c", script])
        .arg(&path)
        .args(files)
        .output()
        .expect("run python");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "pycdlib: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("pycdlib's JSON"))
}

on_both_stacks! {
/// `redfish-virtual-media` without a `deploy_iso`: Ferrum builds the ISO from the deploy kernel
/// and ramdisk and the node's EFI boot loader image (`bootloader`), publishes it on its HTTP
/// server and inserts that; the ISO boots GRUB from the El Torito EFI image, whose configuration
/// names the kernel with `ipa-api-url` and `boot_method=vmedia`. An abort of the cleaning
/// ejects the CD and withdraws the ISO; the node is then cleaned and deployed with the real
/// agent (booted by the test's firmware from that ISO), each ramdisk boot building it again
/// from the image cache (each image fetched once), and nothing is left published.
async fn a_virtual_media_node_boots_an_iso_built_from_its_kernel_and_ramdisk(stack) {
    let Some((emu, dir, cluster)) = agent_boot_setup(stack, "vmedia-iso").await else {
        return;
    };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let kernel = vec![0x4b_u8; 96 << 10];
    let ramdisk: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let esp = vec![0xE5_u8; 64 << 10];
    let mut info = emu.driver_info(0);
    info["deploy_kernel"] = images.add("ipa.kernel", kernel.clone()).into();
    info["deploy_ramdisk"] = images.add("ipa.initramfs", ramdisk.clone()).into();
    info["deploy_forces_oob_reboot"] = true.into();

    // UEFI (the default boot mode) cannot boot an ISO without a boot loader image.
    api.create_node(json!({"name": "no-loader", "driver": "redfish", "driver_info": info,
        "boot_interface": "redfish-virtual-media"})).await;
    let r = api.get("/v1/nodes/no-loader/validate").await;
    assert_eq!(r.body["boot"]["result"], false, "{}", r.body);
    assert!(r.body["boot"]["reason"].as_str().unwrap_or_default().contains("bootloader"), "{}", r.body);

    info["bootloader"] = images.add("esp.img", esp.clone()).into();
    let image = raw_disk_image(IMAGE_SIZE, 13);
    let node = api.create_node(json!({
        "name": "vm-built-iso",
        "driver": "redfish",
        "boot_interface": "redfish-virtual-media",
        "deploy_interface": "direct",
        "driver_info": info,
        "instance_info": raw_image(&images.add("disk.raw", image.clone()), &sha256_hex(&image)),
    })).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let mac = emu.mac(0).await;
    api.add_port(&uuid, &mac).await;
    let r = api.get(&format!("/v1/nodes/{uuid}/validate")).await;
    assert_eq!(r.body["boot"]["result"], true, "{}", r.body);
    api.accepted(&uuid, "manage").await;
    api.wait_settled(&uuid, "manageable", Duration::from_secs(30), Duration::from_millis(100), String::new).await;

    // No firmware yet: the cleaning waits for an agent that does not come, with the ISO in.
    api.accepted(&uuid, "provide").await;
    api.wait_settled(&uuid, "clean wait", Duration::from_secs(30), Duration::from_millis(100), String::new).await;
    let cd = emu.get(&format!("{}/VirtualMedia/Cd", emu.systems[0])).await;
    let http_url = cluster.env_var("FERRUM_HTTP_URL").expect("http_url");
    let iso_url = format!("{http_url}/redfish/boot-{uuid}.iso");
    assert_eq!((&cd["Inserted"], &cd["Image"]), (&json!(true), &json!(iso_url)), "{cd}");
    let iso = reqwest::get(&iso_url).await.expect("GET the ISO");
    assert_eq!(iso.status(), StatusCode::OK);
    let iso = iso.bytes().await.expect("the ISO's bytes");
    let files = ["vmlinuz", "initrd", "boot/grub/efiboot.img", "EFI/BOOT/grub.cfg"];
    if let Some(read) = read_boot_iso(&iso, &files) {
        assert_eq!((&read["platform"], &read["label"]), (&json!(0xEF), &json!("VMEDIA_BOOT_ISO")), "{read}");
        assert_eq!(read["sectors"], json!(esp.len() / 512), "{read}");
        for (name, bytes) in [("vmlinuz", &kernel), ("initrd", &ramdisk), ("boot/grub/efiboot.img", &esp)] {
            assert_eq!(read[name]["sha256"], json!(sha256_hex(bytes)), "{name}: {read}");
        }
        let grub = read["EFI/BOOT/grub.cfg"]["text"].as_str().unwrap_or_default();
        let api_url = cluster.env_var("FERRUM_API_URL").expect("api_url");
        assert!(grub.contains(&format!("linux /vmlinuz nofb vga=normal ipa-api-url={api_url} boot_method=vmedia --")), "{grub}");
        assert!(grub.contains("initrd /initrd"), "{grub}");
    }

    // An abort ejects the CD and withdraws the ISO.
    api.accepted(&uuid, "abort").await;
    api.wait_settled(&uuid, "clean failed", Duration::from_secs(30), Duration::from_millis(100), String::new).await;
    let cd = emu.get(&format!("{}/VirtualMedia/Cd", emu.systems[0])).await;
    assert_eq!(cd["Inserted"], false, "{cd}");
    assert_eq!(reqwest::get(&iso_url).await.expect("GET").status(), StatusCode::NOT_FOUND);

    // With the firmware booting that ISO, the node is cleaned and deployed.
    let firmware = emu.firmware(0, &api.base, &mac, &iso_url);
    api.accepted(&uuid, "manage").await;
    wait_state(api, &uuid, "manageable", Duration::from_secs(30), &firmware).await;
    api.accepted(&uuid, "provide").await;
    let available = wait_state(api, &uuid, "available", Duration::from_secs(120), &firmware).await;
    assert!(available["last_error"].is_null(), "{available}");
    api.accepted(&uuid, "active").await;
    let active = wait_state(api, &uuid, "active", Duration::from_secs(120), &firmware).await;
    assert!(active["last_error"].is_null(), "{active}");
    let written = firmware.with_log(|log| log.agents[1].disk_prefix(image.len()));
    assert!(written == image, "the deploy's agent's disk does not hold the image\n{}", firmware.agent_logs());
    let cd = emu.get(&format!("{}/VirtualMedia/Cd", emu.systems[0])).await;
    assert_eq!(cd["Inserted"], false, "{cd}");
    assert_eq!(reqwest::get(&iso_url).await.expect("GET").status(), StatusCode::NOT_FOUND);
    let published: Vec<_> = std::fs::read_dir(dir.join("http/redfish")).expect("redfish dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(published.is_empty(), "left under http_root/redfish: {published:?}");
    assert_eq!(
        (images.served("ipa.kernel"), images.served("ipa.initramfs"), images.served("esp.img")),
        (1, 1, 1),
        "three ISOs built from one fetch of each image"
    );
    cluster.assert_no_locks().await;
    let _ = std::fs::remove_dir_all(&dir);
}
}

/// A BIOS node's built ISO boots ISOLINUX (`isolinux_bin`, its boot information table patched
/// in, `ldlinux_c32`) by `isolinux/isolinux.cfg`; a deploy ramdisk that cannot be fetched fails
/// the cleaning before anything is inserted: `clean failed` naming the URL, the CD empty,
/// nothing published, the lock released, and the node cleaned once its URL is right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bios_iso_boots_isolinux_and_a_ramdisk_that_404s_fails_the_cleaning_cleanly() {
    let Some(emu) = Emulator::start(EmulatorOptions::default()) else {
        return;
    };
    let dir = temp_dir("vmedia-bios");
    std::fs::create_dir_all(&dir).expect("dir");
    let isolinux: Vec<u8> = (0..4096u32).map(|i| (i % 249) as u8).collect();
    std::fs::write(dir.join("isolinux.bin"), &isolinux).expect("isolinux.bin");
    std::fs::write(dir.join("ldlinux.c32"), b"ldlinux").expect("ldlinux.c32");
    let settings = [
        (
            "FERRUM_ISOLINUX_BIN",
            dir.join("isolinux.bin").display().to_string(),
        ),
        (
            "FERRUM_LDLINUX_C32",
            dir.join("ldlinux.c32").display().to_string(),
        ),
    ];
    let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let Some(cluster) =
        network_boot_cluster_with(crate::util::Stack::Embedded, &dir, &settings).await
    else {
        return;
    };
    let api = &cluster.api;
    let images = ImageServer::start().await;
    let mut info = network_boot_info(&emu, &images);
    let ramdisk_url = info["deploy_ramdisk"].as_str().expect("url").to_owned();
    info["deploy_ramdisk"] = format!("{ramdisk_url}.missing").into();
    let node = api
        .create_node(json!({
            "driver": "redfish",
            "boot_interface": "redfish-virtual-media",
            "driver_info": info,
            "properties": {"capabilities": "boot_mode:bios"},
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

    api.accepted(&uuid, "provide").await;
    let failed = api
        .wait_settled(
            &uuid,
            "clean failed",
            Duration::from_secs(30),
            Duration::from_millis(100),
            String::new,
        )
        .await;
    let error = failed["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("{ramdisk_url}.missing")),
        "{failed}"
    );
    let cd = emu
        .get(&format!("{}/VirtualMedia/Cd", emu.systems[0]))
        .await;
    assert_eq!(cd["Inserted"], false, "{cd}");
    let left: Vec<_> = std::fs::read_dir(dir.join("http/redfish"))
        .map(|d| d.map(|e| e.expect("entry").file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left under http_root/redfish: {left:?}");
    cluster.assert_no_locks().await;

    // The URL fixed, the cleaning boots a BIOS ISO.
    let r = api
        .patch(
            &uuid,
            json!([
        {"op": "replace", "path": "/driver_info/deploy_ramdisk", "value": ramdisk_url}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.accepted(&uuid, "manage").await;
    api.wait_settled(
        &uuid,
        "manageable",
        Duration::from_secs(30),
        Duration::from_millis(100),
        String::new,
    )
    .await;
    api.accepted(&uuid, "provide").await;
    api.wait_settled(
        &uuid,
        "clean wait",
        Duration::from_secs(30),
        Duration::from_millis(100),
        String::new,
    )
    .await;
    let iso_path = dir.join(format!("http/redfish/boot-{uuid}.iso"));
    let iso = std::fs::read(&iso_path).expect("the published ISO");
    if let Some(read) = read_boot_iso(&iso, &["isolinux/isolinux.cfg", "isolinux/ldlinux.c32"]) {
        assert_eq!(
            (&read["platform"], &read["sectors"]),
            (&json!(0), &json!(4)),
            "{read}"
        );
        assert_eq!(read["isolinux/ldlinux.c32"]["len"], json!(7), "{read}");
        let cfg = read["isolinux/isolinux.cfg"]["text"]
            .as_str()
            .unwrap_or_default();
        let api_url = cluster.env_var("FERRUM_API_URL").expect("api_url");
        assert!(cfg.contains("kernel /vmlinuz\n"), "{cfg}");
        assert!(cfg.contains(&format!("append initrd=/initrd text nofb vga=normal ipa-api-url={api_url} boot_method=vmedia --")), "{cfg}");
    }
    // The boot information table: isolinux.bin as written names the primary volume
    // descriptor's sector (16) at byte 8; the rest from byte 64 is as given.
    let at = iso
        .windows(isolinux.len() - 64)
        .position(|w| w == &isolinux[64..])
        .expect("isolinux.bin in the ISO")
        - 64;
    assert_eq!(at % 2048, 0, "isolinux.bin starts a sector");
    assert_eq!(
        u32::from_le_bytes(iso[at + 8..at + 12].try_into().unwrap()),
        16
    );
    assert_eq!(
        u32::from_le_bytes(iso[at + 12..at + 16].try_into().unwrap()) as usize,
        at / 2048
    );
    api.accepted(&uuid, "abort").await;
    api.wait_settled(
        &uuid,
        "clean failed",
        Duration::from_secs(30),
        Duration::from_millis(100),
        String::new,
    )
    .await;
    assert!(!iso_path.exists(), "the abort withdrew the ISO");
    cluster.assert_no_locks().await;
    let _ = std::fs::remove_dir_all(&dir);
}
