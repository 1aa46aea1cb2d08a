//! /v1/drivers as Ironic's driver.py shows it, through the router of the service in process:
//! the interfaces of each version, properties, RAID logical-disk properties, the version gates;
//! and the /v1 document's links and the 406 of a bad microversion, which answer the same way.

use axum::http::Method;
use serde_json::{Value, json};

use crate::util::TestApp;

/// The `default_<kind>_interface` / `enabled_<kind>_interfaces` keys of a driver, sorted.
fn interface_keys(driver: &Value) -> Vec<String> {
    let mut keys: Vec<String> = driver
        .as_object()
        .expect("a driver is an object")
        .keys()
        .filter(|k| k.starts_with("default_") || k.starts_with("enabled_"))
        .cloned()
        .collect();
    keys.sort();
    keys
}

fn kinds_keys(kinds: &[&str]) -> Vec<String> {
    let mut keys: Vec<String> = kinds
        .iter()
        .flat_map(|k| {
            [
                format!("default_{k}_interface"),
                format!("enabled_{k}_interfaces"),
            ]
        })
        .collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drivers_show_their_interfaces_by_version() {
    let app = TestApp::start().await;
    const STANDARD: [&str; 9] = [
        "boot",
        "console",
        "deploy",
        "inspect",
        "management",
        "network",
        "power",
        "raid",
        "vendor",
    ];
    let with = |more: &[&str]| {
        let mut kinds = STANDARD.to_vec();
        kinds.extend_from_slice(more);
        kinds_keys(&kinds)
    };
    for (version, keys) in [
        ("1.30", with(&[])),
        ("1.32", with(&[])),
        ("1.33", with(&["storage"])),
        ("1.37", with(&["storage"])),
        ("1.38", with(&["storage", "rescue"])),
        ("1.39", with(&["storage", "rescue"])),
        ("1.40", with(&["storage", "rescue", "bios"])),
        ("1.51", with(&["storage", "rescue", "bios"])),
    ] {
        let show = app
            .request_at(version, Method::GET, "/v1/drivers/fake-hardware", None)
            .await;
        assert_eq!(show.status, 200, "{}", show.body);
        assert_eq!(interface_keys(&show.body), keys, "show at {version}");
        assert_eq!(show.body["type"], "dynamic");
        let list = app
            .request_at(version, Method::GET, "/v1/drivers?detail=True", None)
            .await;
        assert_eq!(list.status, 200, "{}", list.body);
        assert_eq!(
            list.body["drivers"][0], show.body,
            "list detail at {version}"
        );
        let brief = app
            .request_at(version, Method::GET, "/v1/drivers", None)
            .await;
        assert_eq!(
            interface_keys(&brief.body["drivers"][0]),
            Vec::<String>::new()
        );
    }

    let d = app.get("/v1/drivers/fake-hardware").await.body;
    assert_eq!(d["name"], "fake-hardware");
    assert_eq!(d["hosts"], json!([app.host()]));
    assert_eq!(d["default_deploy_interface"], "fake");
    assert_eq!(d["enabled_deploy_interfaces"], json!(["fake", "direct"]));
    assert_eq!(d["default_inspect_interface"], "fake");
    assert_eq!(
        d["enabled_inspect_interfaces"],
        json!(["fake", "agent", "no-inspect"])
    );
    assert_eq!(d["default_raid_interface"], "fake");
    assert_eq!(d["enabled_raid_interfaces"], json!(["fake", "no-raid"]));
    assert_eq!(d["default_power_interface"], "fake");
    assert_eq!(d["enabled_network_interfaces"], json!(["flat", "noop"]));
    assert_eq!(
        d["enabled_console_interfaces"],
        json!(["fake", "no-console", "fake-graphical"])
    );

    // Before 1.30: no type, no interfaces, and `detail` / `type` are too new.
    let old = app
        .request_at("1.29", Method::GET, "/v1/drivers/fake-hardware", None)
        .await;
    assert_eq!(old.status, 200, "{}", old.body);
    assert!(old.body.get("type").is_none(), "{}", old.body);
    assert_eq!(interface_keys(&old.body), Vec::<String>::new());
    assert!(
        old.body.get("properties").is_some(),
        "properties links from 1.14"
    );
    let older = app
        .request_at("1.13", Method::GET, "/v1/drivers/fake-hardware", None)
        .await;
    assert!(older.body.get("properties").is_none(), "{}", older.body);
    for query in ["detail=True", "type=dynamic"] {
        let r = app
            .request_at("1.29", Method::GET, &format!("/v1/drivers?{query}"), None)
            .await;
        assert_eq!(r.status, 406, "{query}: {}", r.body);
        assert!(r.fault().contains("1.30"), "{}", r.fault());
    }

    // The type filter and the combinations Ironic refuses.
    let r = app.get("/v1/drivers?type=classic").await;
    assert_eq!(r.body, json!({"drivers": []}));
    let r = app.get("/v1/drivers?type=dynamic").await;
    assert_eq!(r.body["drivers"][0]["name"], "fake-hardware");
    let r = app.get("/v1/drivers?type=hybrid").await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.fault().contains("\"type\" filter"), "{}", r.fault());
    let r = app.get("/v1/drivers?detail=True&fields=name").await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = app.get("/v1/drivers?fields=name").await;
    assert_eq!(r.status, 406, "fields came with 1.77: {}", r.body);
    let r = app.get("/v1/drivers?detail=maybe").await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = app.get("/v1/drivers/idrac").await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(
        r.fault(),
        "Could not find the following driver(s) or hardware type(s): idrac."
    );
}

/// The links a driver advertises answer: its properties (those of its default interfaces) and,
/// from 1.12, the RAID logical-disk properties.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_properties_and_raid_logical_disk_properties() {
    let app = TestApp::start().await;
    let d = app.get("/v1/drivers/fake-hardware").await.body;
    let link = d["properties"][0]["href"].as_str().unwrap();
    let path = link.split_once("://").unwrap().1;
    let path = &path[path.find('/').unwrap()..];
    assert_eq!(path, "/v1/drivers/fake-hardware/properties");
    let r = app.get(path).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let props = r.body.as_object().unwrap();
    let mut names: Vec<_> = props.keys().cloned().collect();
    names.sort();
    // The fake deploy (the default) reads its test hooks; fake power and management none.
    assert_eq!(
        names,
        [
            "fake_deploy_block",
            "fake_deploy_delay",
            "fake_deploy_panic"
        ]
    );
    assert!(
        props
            .values()
            .all(|v| v.as_str().is_some_and(|s| !s.is_empty()))
    );
    // ipmi: its ipmitool interfaces' properties, the address required.
    let r = app.get("/v1/drivers/ipmi/properties").await;
    assert_eq!(r.status, 200, "{}", r.body);
    for key in [
        "ipmi_address",
        "ipmi_password",
        "ipmi_port",
        "ipmi_priv_level",
        "ipmi_protocol_version",
        "ipmi_terminal_port",
    ] {
        assert!(r.body[key].is_string(), "{key}: {}", r.body);
    }
    assert!(
        r.body["ipmi_address"]
            .as_str()
            .unwrap()
            .contains("Required."),
        "{}",
        r.body
    );
    let r = app.get("/v1/drivers/idrac/properties").await;
    assert_eq!(r.status, 404, "{}", r.body);

    let r = app
        .get("/v1/drivers/fake-hardware/raid/logical_disk_properties")
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut names: Vec<_> = r.body.as_object().unwrap().keys().cloned().collect();
    names.sort();
    assert_eq!(
        names,
        [
            "controller",
            "disk_type",
            "interface_type",
            "is_root_volume",
            "number_of_physical_disks",
            "physical_disks",
            "raid_level",
            "share_physical_disks",
            "size_gb",
            "volume_name",
        ]
    );
    assert!(
        r.body["raid_level"].as_str().unwrap().contains("Required."),
        "{}",
        r.body
    );
    let r = app
        .request_at(
            "1.11",
            Method::GET,
            "/v1/drivers/fake-hardware/raid/logical_disk_properties",
            None,
        )
        .await;
    assert_eq!(r.status, 406, "{}", r.body);
    let r = app
        .get("/v1/drivers/idrac/raid/logical_disk_properties")
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
}

/// GET /v1 lists chassis, nodes, ports and drivers always, portgroups from 1.23, volume from
/// 1.32, conductors from 1.49, lookup and heartbeat from 1.22.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v1_document_links_resources_by_version() {
    let app = TestApp::start().await;
    let resources = |doc: &Value| {
        let mut names: Vec<String> = doc
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, v)| *k != "links" && v.is_array())
            .map(|(k, _)| k.clone())
            .collect();
        names.sort();
        names
    };
    let ramdisk = ["heartbeat", "lookup"];
    for (version, want) in [
        ("1.1", vec!["chassis", "drivers", "nodes", "ports"]),
        ("1.21", vec!["chassis", "drivers", "nodes", "ports"]),
        ("1.22", vec!["chassis", "drivers", "nodes", "ports"]),
        (
            "1.23",
            vec!["chassis", "drivers", "nodes", "portgroups", "ports"],
        ),
        (
            "1.31",
            vec!["chassis", "drivers", "nodes", "portgroups", "ports"],
        ),
        (
            "1.32",
            vec![
                "chassis",
                "drivers",
                "nodes",
                "portgroups",
                "ports",
                "volume",
            ],
        ),
        (
            "1.49",
            vec![
                "chassis",
                "conductors",
                "drivers",
                "nodes",
                "portgroups",
                "ports",
                "volume",
            ],
        ),
    ] {
        let mut want: Vec<&str> = want;
        if version != "1.1" && version != "1.21" {
            want.extend(ramdisk);
            want.sort_unstable();
        }
        let r = app.request_at(version, Method::GET, "/v1", None).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(resources(&r.body), want, "at {version}");
    }
    let doc = app.get("/v1").await.body;
    assert_eq!(
        doc["ports"],
        json!([
            {"href": "http://localhost:6385/v1/ports/", "rel": "self"},
            {"href": "http://localhost:6385/ports/", "rel": "bookmark"},
        ])
    );
    assert_eq!(doc["chassis"][1]["href"], "http://localhost:6385/chassis/");
}

/// A bad microversion is 406 with the body Ironic's web framework gives: `code`, `title` and
/// `description` (python-ironicclient reads `description`) inside `error_message`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_microversion_is_406_in_the_framework_envelope() {
    let app = TestApp::start().await;
    for (version, description) in [
        (
            "1.116",
            "Version 1.116 was requested but the minor version is not supported by this service. The supported version range is: [1.1, 1.115].",
        ),
        (
            "1.0",
            "Version 1.0 was requested but the minor version is not supported by this service. The supported version range is: [1.1, 1.115].",
        ),
        (
            "2.1",
            "Mutually exclusive versions requested. Version 2.1 requested but not supported by this service. The supported version range is: [1.1, 1.115].",
        ),
        (
            "one.two",
            "Invalid value for X-OpenStack-Ironic-API-Version header",
        ),
    ] {
        for path in ["/v1/nodes", "/v1"] {
            let r = app.request_at(version, Method::GET, path, None).await;
            assert_eq!(r.status, 406, "{version} {path}: {}", r.body);
            let inner = format!(
                r#"{{"code": 406, "title": "Not Acceptable", "description": "{description}"}}"#
            );
            assert_eq!(r.body, json!({"error_message": inner}), "{version} {path}");
        }
    }
    // A 406 a handler raises (a field too new for the version) stays in the handlers' envelope.
    let r = app
        .request_at("1.7", Method::GET, "/v1/nodes?fields=uuid", None)
        .await;
    assert_eq!(r.status, 406, "{}", r.body);
    assert!(r.fault().contains("1.8"), "{}", r.fault());
}

/// With every fake interface enabled (Ferrum's default), a fake-hardware node gets `fake` for
/// each kind Ironic's `FakeHardware` lists it first in (console, inspect, raid, bios, firmware,
/// rescue, vendor, besides boot, deploy, power and management), `flat` networking (Ironic's
/// generic order) and `noop` storage (Ironic's `default_storage_interface`); a PATCH `remove`
/// of an interface gives the default back. So the console, inspection and RAID work on a
/// default node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_hardware_nodes_default_to_the_fake_interfaces() {
    let app = TestApp::start().await;
    let node = app
        .request_at(
            "1.86",
            Method::POST,
            "/v1/nodes",
            Some(json!({"name": "defaults", "driver": "fake-hardware"})),
        )
        .await;
    assert_eq!(node.status, 201, "{}", node.body);
    for (field, value) in [
        ("boot_interface", "fake"),
        ("console_interface", "fake"),
        ("deploy_interface", "fake"),
        ("inspect_interface", "fake"),
        ("management_interface", "fake"),
        ("network_interface", "flat"),
        ("power_interface", "fake"),
        ("raid_interface", "fake"),
        ("rescue_interface", "fake"),
        ("storage_interface", "noop"),
        ("vendor_interface", "fake"),
        ("bios_interface", "fake"),
        ("firmware_interface", "fake"),
    ] {
        assert_eq!(node.body[field], value, "{field}: {}", node.body);
    }
    let r = app
        .patch(
            "defaults",
            json!([{"op": "replace", "path": "/console_interface", "value": "no-console"}]),
        )
        .await;
    assert_eq!(r.body["console_interface"], "no-console", "{}", r.body);
    let r = app
        .patch(
            "defaults",
            json!([{"op": "remove", "path": "/console_interface"}]),
        )
        .await;
    assert_eq!(r.body["console_interface"], "fake", "{}", r.body);

    let r = app
        .request(
            Method::PUT,
            "/v1/nodes/defaults/states/console",
            Some(json!({"enabled": true})),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    let r = app.get("/v1/nodes/defaults/states/console").await;
    // Ironic's `FakeConsole.get_console` gives `{}`.
    assert_eq!(
        r.body,
        json!({"console_enabled": true, "console_info": {}}),
        "{}",
        r.body
    );
    let raid =
        json!({"logical_disks": [{"size_gb": 10, "raid_level": "1", "is_root_volume": true}]});
    let r = app
        .request(Method::PUT, "/v1/nodes/defaults/states/raid", Some(raid))
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    app.accepted("defaults", "manage").await;
    app.wait_for("defaults", "manageable").await;
    app.accepted("defaults", "inspect").await;
    app.wait_for("defaults", "manageable").await;
}

/// `fake-graphical` (Ironic's `FakeGraphicalConsole` with its fake container provider): turning
/// it on keeps the fake container's VNC address and a noVNC token on the node and shows a `vnc`
/// link carrying them (built on `[vnc]public_url`); turning it off forgets them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_graphical_console_shows_a_vnc_link() {
    let app = TestApp::builder()
        .configure(|c| c.api.vnc_public_url = Some("http://vnc.example:6090/vnc_auto.html".into()))
        .start()
        .await;
    let node = app
        .create_node(json!({"name": "gui", "driver": "fake-hardware", "console_interface": "fake-graphical"}))
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let console = |enabled: bool| {
        let app = &app;
        async move {
            let r = app
                .request(
                    Method::PUT,
                    "/v1/nodes/gui/states/console",
                    Some(json!({ "enabled": enabled })),
                )
                .await;
            assert_eq!(r.status, 202, "{}", r.body);
            app.get("/v1/nodes/gui/states/console").await.body
        }
    };
    let on = console(true).await;
    let info = &app.node("gui").await["driver_internal_info"];
    assert_eq!(info["vnc_host"], "192.0.2.1", "{info}");
    assert_eq!(info["vnc_port"], 5900, "{info}");
    assert_eq!(info["novnc_secret_token"], "******", "shown masked: {info}");
    assert!(info["novnc_secret_token_created"].is_string(), "{info}");
    let stored = ferrum::db::nodes::get_by_uuid(app.db(), &uuid)
        .await
        .unwrap();
    let token = stored.driver_internal_info["novnc_secret_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(token.len(), 43, "{token}");
    assert_eq!(
        on,
        json!({"console_enabled": true, "console_info": {
            "type": "vnc",
            "url": format!("http://vnc.example:6090/vnc_auto.html?path=websockify%3Fnode%3D{uuid}%26token%3D{token}"),
        }})
    );
    let off = console(false).await;
    assert_eq!(off, json!({"console_enabled": false, "console_info": null}));
    let gone = |info: &Value| {
        for key in [
            "vnc_host",
            "vnc_port",
            "novnc_secret_token",
            "novnc_secret_token_created",
        ] {
            assert!(info.get(key).is_none(), "{key}: {info}");
        }
    };
    gone(&app.node("gui").await["driver_internal_info"]);

    // A session is closed once its token is older than Ironic's `[vnc]token_timeout` (600 s),
    // by the conductor's periodic check; a fresh one is kept.
    console(true).await;
    let expire = || ferrum::conductor::periodic::expire_console_sessions(app.conductor());
    expire().await.unwrap();
    assert_eq!(app.node("gui").await["console_enabled"], true);
    let node = ferrum::db::nodes::get_by_uuid(app.db(), &uuid)
        .await
        .unwrap();
    let mut info = node.driver_internal_info.0.clone();
    info.insert(
        "novnc_secret_token_created".into(),
        "2026-01-01T00:00:00.000000".into(),
    );
    let aged = ferrum::node::NodeChanges {
        driver_internal_info: Some(ferrum::node::Json(info)),
        ..Default::default()
    };
    let written = ferrum::db::nodes::update_unlocked(
        app.db(),
        node.id,
        node.version,
        ("t", node.provision_state),
        aged,
        None,
    )
    .await
    .unwrap();
    assert!(written);
    expire().await.unwrap();
    let node = app.node("gui").await;
    assert_eq!(node["console_enabled"], false, "{node}");
    gone(&node["driver_internal_info"]);
}
