//! A machine that really boots (issue 33): Ferrum provisions a QEMU VM of the virtual bare-metal
//! lab (`tests/lab/`) end to end through its real code paths: the `ipmi` hardware type
//! (ipmitool against the VM's `ipmi_sim` BMC), the `ipxe` boot interface with the `dnsmasq` DHCP
//! provider (the lab's dnsmasq reads the files Ferrum writes), Ferrum's own HTTP server for iPXE,
//! the deploy ramdisk and the image, and the `direct` deploy interface with the unmodified Ironic
//! Python Agent running inside the VM. The image then boots from the VM's disk and prints the
//! host name its config drive gave it on the serial console.
//!
//! Minutes under TCG, so ignored by default; CI runs it explicitly:
//! `cargo test --test it lab_ -- --ignored --nocapture` (as root, after `tests/lab/lab.sh setup`).

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Api, lab::Lab};

/// Polls node `uuid` until it is in `state` with its lock released; panics (with the lab's
/// logs) when it settles elsewhere or `limit` passes.
async fn wait_state(api: &Api, lab: &Lab, uuid: &str, state: &str, limit: Duration) -> Value {
    api.wait_settled(uuid, state, limit, Duration::from_millis(500), || {
        lab.diagnostics()
    })
    .await
}

/// Waits until the serial console holds `text` (the image's boot after `active`).
async fn wait_serial(lab: &Lab, text: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !lab.serial_log().contains(text) {
        assert!(
            Instant::now() < deadline,
            "no '{text}' on the serial console within {limit:?}\n{}",
            lab.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// [`crate::util::assert_network_boot_withdrawn`] in the lab's directories.
fn assert_network_boot_withdrawn(lab: &Lab, uuid: &str) {
    crate::util::assert_network_boot_withdrawn(
        &lab.dir.join("dhcp-hosts"),
        &lab.dir.join("dhcp-opts"),
        &lab.http_root(),
        uuid,
        &lab.mac,
    );
}

/// One phase's time and Ferrum's CPU time in it, printed as it ends.
struct Phases {
    start: Instant,
    last: Instant,
    last_cpu: Duration,
}

impl Phases {
    fn new() -> Phases {
        let now = Instant::now();
        Phases {
            start: now,
            last: now,
            last_cpu: Duration::ZERO,
        }
    }

    fn done(&mut self, lab: &Lab, what: &str) {
        let cpu = lab.ferrum_cpu();
        let line = format!(
            "  {what:<62} {:>7.1} s  (Ferrum's CPU {:>5.2} s)",
            self.last.elapsed().as_secs_f64(),
            cpu.saturating_sub(self.last_cpu).as_secs_f64()
        );
        eprintln!("{line}");
        self.last = Instant::now();
        self.last_cpu = cpu;
    }

    fn total(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "boots a QEMU VM (TCG) through cleaning, deploy and undeploy with the real agent: minutes; as root after tests/lab/lab.sh setup, run with --ignored"]
async fn lab_ipmi_ipxe_direct_provisions_a_vm_that_boots_its_image() {
    let firmware = std::env::var("FERRUM_LAB_FIRMWARE").unwrap_or_else(|_| "uefi".to_owned());
    let mut phases = Phases::new();
    let Some(mut lab) = Lab::up(&firmware) else {
        return;
    };
    phases.done(
        &lab,
        &format!("lab up (1 VM, {firmware}), namespace {}", lab.name),
    );
    let (kernel, ramdisk) = lab.build_ramdisk();
    let image = lab.http_root().join("images/instance.qcow2");
    let sha256 = lab.build_image(&image);
    phases.done(&lab, "build the deploy ramdisk and the instance image");
    lab.start_ferrum(&[
        // ipmi_sim answers at once: Ironic's 5 s between commands would make a third of the run.
        ("FERRUM_IPMI_MIN_COMMAND_INTERVAL", "0.5".to_owned()),
        // The ramdisk runs the host's /usr, which has no hdparm: no secure erase, only metadata.
        ("FERRUM_ERASE_DEVICES_PRIORITY", "0".to_owned()),
        // TCG: the agent's lookup comes ~35 s after power on, its steps take a while.
        ("FERRUM_DEPLOY_CALLBACK_TIMEOUT", "900".to_owned()),
        ("FERRUM_CLEAN_CALLBACK_TIMEOUT", "900".to_owned()),
        ("FERRUM_CHECK_PROVISION_STATE_INTERVAL", "5".to_owned()),
        ("FERRUM_POWER_STATE_CHANGE_TIMEOUT", "120".to_owned()),
        ("FERRUM_SYNC_POWER_STATE_INTERVAL", "0".to_owned()),
    ])
    .await;
    phases.done(&lab, "Ferrum all-in-one up inside the namespace");
    let api = lab.api.clone();

    let hostname = format!("{}-instance", lab.name);
    let mut driver_info = lab.driver_info();
    driver_info["deploy_kernel"] = format!("file://{}", kernel.display()).into();
    driver_info["deploy_ramdisk"] = format!("file://{}", ramdisk.display()).into();
    let node = api
        .create_node(json!({
            "name": lab.name,
            "driver": "ipmi",
            "boot_interface": "ipxe",
            "deploy_interface": "direct",
            "driver_info": driver_info,
            "properties": {"capabilities": format!("boot_mode:{}", lab.firmware)},
            "instance_info": {
                "image_source": format!("{}/images/instance.qcow2", lab.http_url()),
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": sha256,
                "image_disk_format": "qcow2",
            },
        }))
        .await;
    let uuid = node["uuid"].as_str().expect("uuid").to_owned();
    let r = api
        .request(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": lab.mac})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = api.get(&format!("/v1/nodes/{uuid}/validate")).await;
    for interface in ["boot", "deploy", "power", "management"] {
        assert_eq!(r.body[interface]["result"], true, "{interface}: {}", r.body);
    }
    phases.done(&lab, "enroll (node, port, validate)");

    api.accepted(&uuid, "manage").await;
    wait_state(&api, &lab, &uuid, "manageable", Duration::from_secs(120)).await;
    phases.done(&lab, "manage (IPMI power status)");

    api.accepted(&uuid, "provide").await;
    let available = wait_state(&api, &lab, &uuid, "available", Duration::from_secs(900)).await;
    assert!(available["last_error"].is_null(), "{available}");
    assert_eq!(available["power_state"], "power off", "{available}");
    phases.done(&lab, "provide (automated cleaning by the agent in the VM)");
    assert!(
        lab.serial_log().contains("ferrum-lab-ramdisk:"),
        "the ramdisk never booted"
    );

    // The founding bug on a machine that boots: a deploy that fails (the image's checksum is
    // wrong) leaves the node `deploy failed`, its lock released, the VM off and its network
    // boot withdrawn; the node takes a PATCH and deploys again.
    let deploy = async |api: &Api| {
        let r = api
            .request_at(
                "1.56",
                Method::PUT,
                &format!("/v1/nodes/{uuid}/states/provision"),
                Some(json!({"target": "active", "configdrive": {"meta_data": {"hostname": hostname}}})),
            )
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    };
    let wrong = json!([{"op": "replace", "path": "/instance_info/image_os_hash_value", "value": "0".repeat(64)}]);
    let r = api.patch(&uuid, wrong).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    deploy(&api).await;
    let failed = wait_state(&api, &lab, &uuid, "deploy failed", Duration::from_secs(900)).await;
    let error = failed["last_error"].as_str().unwrap_or_default();
    assert!(
        error.to_lowercase().contains("checksum") || error.contains("hash"),
        "{failed}"
    );
    assert_eq!(failed["power_state"], "power off", "{failed}");
    assert_network_boot_withdrawn(&lab, &uuid);
    phases.done(
        &lab,
        "a deploy with a wrong checksum fails (deploy failed, VM off)",
    );
    let right =
        json!([{"op": "replace", "path": "/instance_info/image_os_hash_value", "value": sha256}]);
    let r = api.patch(&uuid, right).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);

    deploy(&api).await;
    let active = wait_state(&api, &lab, &uuid, "active", Duration::from_secs(900)).await;
    assert!(active["last_error"].is_null(), "{active}");
    assert_eq!(active["power_state"], "power on", "{active}");
    phases.done(&lab, "deploy (the agent writes the image and config drive)");
    // The ramdisk's network boot is withdrawn; the BMC boots the VM from its disk.
    assert_network_boot_withdrawn(&lab, &uuid);
    let boot = std::fs::read_to_string(lab.vm_dir().join("state/boot")).unwrap_or_default();
    assert_eq!(
        boot.trim(),
        "default",
        "the BMC's boot device is not the disk"
    );

    wait_serial(&lab, "FERRUM-LAB-INSTANCE-BOOTED", Duration::from_secs(300)).await;
    wait_serial(
        &lab,
        &format!("FERRUM-LAB-INSTANCE-HOSTNAME={hostname}"),
        Duration::from_secs(120),
    )
    .await;
    phases.done(&lab, "the image booted from the disk with its host name");

    api.accepted(&uuid, "deleted").await;
    let available = wait_state(&api, &lab, &uuid, "available", Duration::from_secs(900)).await;
    assert!(available["last_error"].is_null(), "{available}");
    assert_eq!(available["power_state"], "power off", "{available}");
    assert_network_boot_withdrawn(&lab, &uuid);
    phases.done(&lab, "undeploy (tear down, cleaning, available)");
    eprintln!(
        "lab end to end ({firmware}): PASS in {:.1} s, Ferrum's CPU {:.2} s in all",
        phases.total(),
        lab.ferrum_cpu().as_secs_f64()
    );
}
