//! The `ipmi` hardware type against a real IPMI BMC: OpenIPMI's `ipmi_sim` (`util::ipmi_bmc`),
//! one of its own per test, driven by the real `ipmitool` from a real conductor, through the API
//! on both stacks. What the BMC did is read from the simulator's chassis files, not from Ferrum.

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Cluster, ClusterOptions, Stack, ipmi_bmc::Bmc, on_both_stacks};

/// How long a failing IPMI command is tried again in these tests.
const RETRY_TIMEOUT_SECS: u64 = 3;

/// A cluster whose IPMI commands follow each other quickly and give up after a few seconds.
async fn cluster(stack: Stack) -> Option<Cluster> {
    Cluster::start(ClusterOptions {
        stack,
        rpc_timeout: 30.0,
        env: vec![
            ("FERRUM_IPMI_MIN_COMMAND_INTERVAL", "0.05".to_owned()),
            (
                "FERRUM_IPMI_COMMAND_RETRY_TIMEOUT",
                RETRY_TIMEOUT_SECS.to_string(),
            ),
            ("FERRUM_POWER_STATE_CHANGE_TIMEOUT", "10".to_owned()),
        ],
        ..ClusterOptions::default()
    })
    .await
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

/// Asks for a power `target` and waits for it; the node and the simulated chassis must agree.
async fn power(cluster: &Cluster, bmc: &Bmc, node: &str, target: &str, on: bool) -> Duration {
    let started = Instant::now();
    let r = cluster.api.power(node, target).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{target}: {}", r.body);
    let shown = wait_power_settled(cluster, node).await;
    let want = if on { "power on" } else { "power off" };
    assert_eq!(shown["power_state"], want, "{target}: {shown}");
    assert_eq!(shown["last_error"], Value::Null, "{target}: {shown}");
    assert_eq!(bmc.powered_on(), on, "{target}: the chassis disagrees");
    started.elapsed()
}

/// The chassis requests made since `before` of them were seen.
fn requests_since(bmc: &Bmc, before: usize) -> Vec<String> {
    bmc.requests().into_iter().skip(before).collect()
}

/// Sets the boot device through the API; the reply's status.
async fn set_boot_device(
    cluster: &Cluster,
    node: &str,
    device: &str,
    persistent: bool,
) -> StatusCode {
    let path = format!("/v1/nodes/{node}/management/boot_device");
    let r = cluster
        .api
        .request(
            Method::PUT,
            &path,
            Some(json!({"boot_device": device, "persistent": persistent})),
        )
        .await;
    r.status
}

on_both_stacks! {
/// Enrolled through the API, an ipmi node is validated, managed (its power read over IPMI),
/// powered on, off, rebooted, soft powered off and soft rebooted, its boot device set in UEFI
/// and BIOS mode, one-time and persistent, and read back, each seen on the simulated chassis;
/// what ipmi_sim refuses (a `safe` boot, an NMI) is a failure in its words although ipmitool
/// may exit 0; the password is never shown.
async fn ipmi_node_is_powered_and_managed_through_the_bmc(stack) {
    let Some(bmc) = Bmc::start() else {
        return;
    };
    let Some(cluster) = cluster(stack).await else {
        return;
    };
    let api = &cluster.api;
    let r = api.get("/v1/drivers").await;
    let names: Vec<&str> = r.body["drivers"].as_array().unwrap().iter()
        .filter_map(|d| d["name"].as_str()).collect();
    assert!(names.contains(&"ipmi"), "{}", r.body);

    let created = api
        .create_node(json!({"name": "bm", "driver": "ipmi", "driver_info": bmc.driver_info()}))
        .await;
    assert_eq!(created["power_interface"], "ipmitool", "{created}");
    assert_eq!(created["management_interface"], "ipmitool", "{created}");
    assert_eq!(created["boot_interface"], "ipxe", "{created}");
    assert_eq!(created["deploy_interface"], "direct", "{created}");
    assert_eq!(created["console_interface"], "no-console", "{created}");
    assert_eq!(created["driver_info"]["ipmi_password"], "******", "{created}");
    let r = api.get("/v1/nodes/bm").await;
    assert!(!r.body.to_string().contains(crate::util::ipmi_bmc::PASSWORD), "{}", r.body);

    let r = api.get("/v1/nodes/bm/validate").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["power"]["result"], true, "{}", r.body);
    assert_eq!(r.body["management"]["result"], true, "{}", r.body);

    // manage reads the power state from the BMC.
    api.accepted("bm", "manage").await;
    let node = api.wait_for("bm", "manageable").await;
    assert_eq!(node["power_state"], "power off", "{node}");
    assert!(bmc.requests().contains(&"get power".to_owned()), "{:?}", bmc.requests());

    let on = power(&cluster, &bmc, "bm", "power on", true).await;
    assert!(requests_since(&bmc, 0).contains(&"set power 1".to_owned()));
    power(&cluster, &bmc, "bm", "power off", false).await;
    power(&cluster, &bmc, "bm", "power on", true).await;
    // A reboot is Ironic's: off, then on.
    let before = bmc.requests().len();
    let reboot = power(&cluster, &bmc, "bm", "rebooting", true).await;
    let sets: Vec<String> = requests_since(&bmc, before).into_iter().filter(|r| r.starts_with("set")).collect();
    assert_eq!(sets, ["set power 0", "set power 1"], "reboot");
    let before = bmc.requests().len();
    power(&cluster, &bmc, "bm", "soft power off", false).await;
    assert!(requests_since(&bmc, before).contains(&"set shutdown 1".to_owned()));
    power(&cluster, &bmc, "bm", "soft rebooting", true).await;
    eprintln!("ipmi power through the API on {stack:?}: on {on:?}, reboot {reboot:?}");

    // Boot devices: Ironic's five.
    let path = "/v1/nodes/bm/management/boot_device";
    let r = api.get(&format!("{path}/supported")).await;
    assert_eq!(r.body, json!({"supported_boot_devices": ["pxe", "disk", "cdrom", "bios", "safe"]}));
    // UEFI (the default boot mode): the raw Set System Boot Options form. ipmi_sim keeps only
    // the device, so the BMC reports every setting as one-time, and Ferrum shows what it says.
    assert_eq!(set_boot_device(&cluster, "bm", "pxe", true).await, StatusCode::NO_CONTENT);
    assert_eq!(bmc.boot_device(), "pxe");
    assert_eq!(api.get(path).await.body, json!({"boot_device": "pxe", "persistent": false}));
    assert_eq!(set_boot_device(&cluster, "bm", "disk", false).await, StatusCode::NO_CONTENT);
    assert_eq!(bmc.boot_device(), "default");
    assert_eq!(api.get(path).await.body, json!({"boot_device": "disk", "persistent": false}));
    // BIOS mode: `chassis bootdev`.
    let r = api.patch("bm", json!([{"op": "add", "path": "/properties/capabilities", "value": "boot_mode:bios"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(set_boot_device(&cluster, "bm", "cdrom", true).await, StatusCode::NO_CONTENT);
    assert_eq!(bmc.boot_device(), "cdrom");
    assert_eq!(api.get(path).await.body, json!({"boot_device": "cdrom", "persistent": false}));
    assert_eq!(set_boot_device(&cluster, "bm", "bios", false).await, StatusCode::NO_CONTENT);
    assert_eq!(bmc.boot_device(), "bios");
    assert_eq!(api.get(path).await.body["boot_device"], "bios");
    // ipmi_sim refuses `safe` while ipmitool exits 0: a failure in the BMC's words.
    let r = api.request(Method::PUT, path, Some(json!({"boot_device": "safe"}))).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", r.body);
    assert!(r.fault().contains("Set Chassis Boot Parameter 5 failed"), "{}", r.fault());
    assert_eq!(bmc.boot_device(), "bios");
    let r = api.request(Method::PUT, path, Some(json!({"boot_device": "floppy"}))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.fault().contains("Invalid boot device floppy specified."), "{}", r.fault());

    // NMI: ipmi_sim has no diagnostic interrupt; its refusal is shown.
    let r = api.request_at("1.29", Method::PUT, "/v1/nodes/bm/management/inject_nmi", Some(json!({}))).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", r.body);
    assert!(r.fault().contains("IPMI call failed: power diag"), "{}", r.fault());

    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// What an operator gets wrong: driver_info Ironic refuses (validate and a power request say
/// so in its words), a wrong password (manage fails, saying the session could not be made),
/// and a BMC that stops answering: the power request fails within the retry timeout with a
/// clear `last_error`, the lock is released and the node can still be changed.
async fn ipmi_mistakes_give_clear_errors(stack) {
    let Some(bmc) = Bmc::start() else {
        return;
    };
    let Some(cluster) = cluster(stack).await else {
        return;
    };
    let api = &cluster.api;
    for (name, info, says) in [
        ("no-address", json!({"ipmi_username": "admin"}), "Missing the following IPMI credentials in node's driver_info: ['ipmi_address']."),
        ("priv", json!({"ipmi_address": "127.0.0.1", "ipmi_priv_level": "ROOT"}), "Invalid privilege level value:ROOT, the valid value can be one of ADMINISTRATOR, CALLBACK, OPERATOR, USER"),
        ("proto", json!({"ipmi_address": "127.0.0.1", "ipmi_protocol_version": "3"}), "Invalid IPMI protocol version value 3, the valid value can be one of 2.0, 1.5"),
        ("port", json!({"ipmi_address": "127.0.0.1", "ipmi_port": "http"}), "ipmi_port \"http\" is not a valid port."),
        ("host", json!({"ipmi_address": "bmc one"}), "Invalid IPMI address \"bmc one\" for node"),
    ] {
        api.create_node(json!({"name": name, "driver": "ipmi", "driver_info": info})).await;
        let r = api.get(&format!("/v1/nodes/{name}/validate")).await;
        assert_eq!(r.body["power"]["result"], false, "{name}: {}", r.body);
        let reason = r.body["power"]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(says), "{name}: {reason:?} lacks {says:?}");
        let r = api.power(name, "power on").await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{name}: {}", r.body);
        assert!(r.fault().contains(says), "{name}: {}", r.fault());
    }

    // A wrong password: manage reads the power state, which fails after the retries.
    let mut info = bmc.driver_info();
    info["ipmi_password"] = "not-the-pw-17".into();
    api.create_node(json!({"name": "wrong-pw", "driver": "ipmi", "driver_info": info})).await;
    api.accepted("wrong-pw", "manage").await;
    let node = api.wait_for("wrong-pw", "enroll").await;
    let error = node["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("IPMI call failed: power status"), "{node}");
    assert!(error.contains("RMCP+ session"), "{node}");
    assert!(!node.to_string().contains("not-the-pw-17"), "password shown: {node}");

    // A BMC that stops answering.
    api.create_node(json!({"name": "gone", "driver": "ipmi", "driver_info": bmc.driver_info()})).await;
    api.accepted("gone", "manage").await;
    api.wait_for("gone", "manageable").await;
    bmc.stop();
    assert!(!bmc.running(), "ipmi_sim {} is still running", bmc.pid);
    let started = Instant::now();
    let r = api.power("gone", "power on").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let node = wait_power_settled(&cluster, "gone").await;
    let took = started.elapsed();
    let error = node["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("IPMI call failed: power status"), "{node}");
    assert!(error.contains("Unable to establish IPMI v2 / RMCP+ session"), "{node}");
    assert_eq!(node["power_state"], "power off", "{node}");
    // The retries stop at the retry timeout; the last ipmitool may still be waiting for its
    // answer then (2 s at most here).
    assert!(took < Duration::from_secs(RETRY_TIMEOUT_SECS + 5), "failing took {took:?}");
    eprintln!("ipmi power on against a silent BMC on {stack:?} failed after {took:?}");
    let r = api.patch("gone", json!([{"op": "add", "path": "/extra/seen", "value": "yes"}])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);

    cluster.assert_no_locks().await;
}
}

/// A machine's serial port for the BMC's serial-over-LAN: a TCP server on 127.0.0.1 that the
/// simulator connects to, writing a numbered line every 200 ms and keeping what it reads.
struct SerialPort {
    port: u16,
    received: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    task: tokio::task::JoinHandle<()>,
}

impl SerialPort {
    async fn start() -> SerialPort {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let received = received.clone();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (mut from_bmc, mut to_bmc) = stream.into_split();
                    let received = received.clone();
                    tokio::spawn(async move {
                        let mut buf = [0u8; 1024];
                        while let Ok(n @ 1..) = from_bmc.read(&mut buf).await {
                            received
                                .lock()
                                .expect("received")
                                .extend_from_slice(&buf[..n]);
                        }
                    });
                    for line in 0.. {
                        let text = format!("FERRUM-SERIAL-LINE-{line}\r\n");
                        if to_bmc.write_all(text.as_bytes()).await.is_err() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        });
        SerialPort {
            port,
            received,
            task,
        }
    }

    fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().expect("received")).into_owned()
    }
}

impl Drop for SerialPort {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A TCP port of 127.0.0.1 free now.
fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Connects to the console at `url` (`tcp://host:port`), types `typed`, and reads until the
/// machine's serial output shows; what it read.
async fn attach_console(url: &str, typed: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let address = url.strip_prefix("tcp://").expect("a tcp:// URL");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the console at {url}: {e}"));
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 1024];
    let mut typed_yet = false;
    while !String::from_utf8_lossy(&seen).contains("FERRUM-SERIAL-LINE-") {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "no serial output through the console: {:?}",
            String::from_utf8_lossy(&seen)
        );
        if let Ok(Ok(n)) =
            tokio::time::timeout(left.min(Duration::from_secs(1)), stream.read(&mut buf)).await
        {
            assert!(
                n > 0,
                "the console closed: {:?}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buf[..n]);
        }
        if !typed_yet && String::from_utf8_lossy(&seen).contains("SOL Session operational") {
            stream.write_all(typed.as_bytes()).await.expect("type");
            typed_yet = true;
        }
    }
    if !typed_yet {
        stream.write_all(typed.as_bytes()).await.expect("type");
    }
    // Give the keystrokes time to cross before the connection closes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    String::from_utf8_lossy(&seen).into_owned()
}

/// GET states/console.
async fn console_state(cluster: &Cluster, node: &str) -> Value {
    let r = cluster
        .api
        .get(&format!("/v1/nodes/{node}/states/console"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body
}

/// PUT states/console; the reply's status and body.
async fn set_console(cluster: &Cluster, node: &str, enabled: bool) -> (StatusCode, Value) {
    let r = cluster
        .api
        .request(
            Method::PUT,
            &format!("/v1/nodes/{node}/states/console"),
            Some(json!({"enabled": enabled})),
        )
        .await;
    (r.status, r.body)
}

on_both_stacks! {
/// `ipmitool-socat`: the console of an `ipmi` node is the BMC's serial-over-LAN on the node's
/// `ipmi_terminal_port` (Ironic's `IPMISocatConsole`): a client attached there sees the machine's
/// serial output and types into it; turned off, the port closes. Without `ipmi_terminal_port`
/// the request is refused (400); a port that is taken is the node's `last_error` with the console
/// still off; a conductor restarted with the console on serves it again.
async fn ipmi_socat_console_serves_serial_over_lan(stack) {
    let serial = SerialPort::start().await;
    let Some(bmc) = Bmc::start_with_serial(Some(serial.port)) else {
        return;
    };
    let Some(mut cluster) = cluster(stack).await else {
        return;
    };
    let api = &cluster.api;
    let mut driver_info = bmc.driver_info();
    // ipmi_sim offers cipher suite 3; ipmitool's default (17) fails its SOL silently.
    driver_info["ipmi_cipher_suite"] = json!("3");
    let created = api
        .create_node(json!({"name": "sol", "driver": "ipmi",
            "console_interface": "ipmitool-socat", "driver_info": driver_info}))
        .await;
    assert_eq!(created["console_interface"], "ipmitool-socat", "{created}");

    let (status, body) = set_console(&cluster, "sol", true).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("ipmi_terminal_port"), "{body}");
    assert_eq!(console_state(&cluster, "sol").await["console_enabled"], false);

    let port = free_tcp_port();
    let r = api
        .patch("sol", json!([{"op": "add", "path": "/driver_info/ipmi_terminal_port", "value": port}]))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let (status, body) = set_console(&cluster, "sol", true).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let state = console_state(&cluster, "sol").await;
    assert_eq!(state["console_enabled"], true, "{state}");
    let url = format!("tcp://127.0.0.1:{port}");
    assert_eq!(state["console_info"], json!({"type": "socat", "url": url}), "{state}");
    let node = api.node("sol").await;
    assert!(node["last_error"].is_null(), "{node}");
    assert!(node["reservation"].is_null(), "{node}");

    let seen = attach_console(&url, "typed-into-the-console\r").await;
    assert!(seen.contains("FERRUM-SERIAL-LINE-"), "{seen}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !serial.received().contains("typed-into-the-console") {
        assert!(Instant::now() < deadline, "the machine never got the keystrokes: {:?}", serial.received());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A second client after the first left: the BMC's session was handed over, not refused.
    let seen = attach_console(&url, "\r").await;
    assert!(seen.contains("FERRUM-SERIAL-LINE-"), "{seen}");

    // A conductor started again with the console on serves it again.
    cluster.kill(&cluster.conductor_process(0));
    cluster.restart_conductor(0).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "the restarted conductor does not serve the console");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = attach_console(&url, "\r").await;
    assert!(seen.contains("FERRUM-SERIAL-LINE-"), "{seen}");
    let api = &cluster.api;

    let (status, body) = set_console(&cluster, "sol", false).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let state = console_state(&cluster, "sol").await;
    assert_eq!(state["console_enabled"], false, "{state}");
    assert!(state["console_info"].is_null(), "{state}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
        assert!(Instant::now() < deadline, "the console port is still served after it was turned off");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(api.node("sol").await["driver_internal_info"].get("console_info").is_none());

    // A port another process holds: the console stays off, last_error says why.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken_port = taken.local_addr().expect("addr").port();
    let r = api
        .patch("sol", json!([{"op": "replace", "path": "/driver_info/ipmi_terminal_port", "value": taken_port}]))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let (status, body) = set_console(&cluster, "sol", true).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let node = api.node("sol").await;
    assert_eq!(node["console_enabled"], false, "{node}");
    let error = node["last_error"].as_str().unwrap_or_default();
    assert!(error.starts_with("Error enabling the console on node"), "{node}");
    assert!(error.contains("socat"), "{node}");
    assert!(node["reservation"].is_null(), "{node}");
    drop(taken);
}
}
