//! Node management (the boot device, NMIs) and vendor passthru: Ironic's answers, the node lock
//! each takes, and an asynchronous vendor method's lock seen from outside while it runs.

use std::time::Duration;

use axum::http::Method;
use ferrum::db;
use serde_json::{Value, json};

use crate::util::{Cluster, ClusterOptions, TestApp, on_both_stacks};

/// A node `v` with the fake vendor interface (fake-hardware's default, named all the same).
fn fake_vendor_node() -> Value {
    json!({"name": "v", "driver": "fake-hardware", "vendor_interface": "fake"})
}

/// The boot device: set, read back, the devices supported, and Ironic's 400s for a bad request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boot_device_is_set_read_back_and_checked() {
    let app = TestApp::start().await;
    app.create_node(json!({"name": "b", "driver": "fake-hardware"}))
        .await;
    let path = "/v1/nodes/b/management/boot_device";

    let r = app.get(path).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, json!({"boot_device": "pxe", "persistent": false}));
    let r = app.get(&format!("{path}/supported")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body,
        json!({"supported_boot_devices": ["pxe", "disk", "cdrom", "bios", "safe"]})
    );

    let before = app.node("b").await;
    let r = app
        .request(
            Method::PUT,
            path,
            Some(json!({"boot_device": "disk", "persistent": true})),
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(r.body, Value::Null);
    assert_eq!(
        app.get(path).await.body,
        json!({"boot_device": "disk", "persistent": true})
    );
    let after = app.node("b").await;
    assert_eq!(after["driver_internal_info"]["fake_boot_device"], "disk");
    assert_eq!(after["reservation"], Value::Null);
    assert_ne!(after["updated_at"], before["updated_at"]);
    // `persistent` defaults to false and may be a string, as Ironic's `args.boolean` reads it.
    let r = app
        .request(Method::PUT, path, Some(json!({"boot_device": "cdrom"})))
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(
        app.get(path).await.body,
        json!({"boot_device": "cdrom", "persistent": false})
    );
    let r = app
        .request(
            Method::PUT,
            path,
            Some(json!({"boot_device": "pxe", "persistent": "True"})),
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(app.get(path).await.body["persistent"], true);

    for (body, status, fault) in [
        (
            json!({"boot_device": "wanboot"}),
            400,
            "Invalid boot device wanboot specified.",
        ),
        (
            json!({"boot_device": "usb"}),
            400,
            "Invalid boot device usb specified.",
        ),
        (
            json!({"persistent": true}),
            400,
            "Missing mandatory parameter: boot_device",
        ),
        (
            json!({"boot_device": "pxe", "when": "now"}),
            400,
            "Unexpected arguments: when",
        ),
        (
            json!({"boot_device": "pxe", "persistent": "maybe"}),
            400,
            "Invalid value for persistent: 'maybe' is not a boolean.",
        ),
    ] {
        let r = app.request(Method::PUT, path, Some(body.clone())).await;
        assert_eq!(r.status, status, "{body}: {}", r.body);
        assert_eq!(r.fault(), fault, "{body}");
    }
    assert_eq!(app.get(path).await.body["boot_device"], "pxe");
    let r = app.get("/v1/nodes/nope/management/boot_device").await;
    assert_eq!(r.status, 404, "{}", r.body);
}

/// Setting and reading the boot device and NMIs take the node's lock (as Ironic's conductor
/// does, reading included: a BMC serves one session at a time), so a locked node answers 409
/// NodeLocked naming the holder; the supported devices are read on a shared lock and answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn management_on_a_locked_node_is_node_locked() {
    let app = TestApp::start().await;
    let node = app
        .create_node(json!({"name": "held", "driver": "fake-hardware"}))
        .await;
    let uuid = node["uuid"].as_str().unwrap();
    assert!(
        db::nodes::reserve(app.db(), uuid, "someone", None)
            .await
            .unwrap()
    );
    let locked = format!(
        "Node {uuid} is locked by host someone, please retry after the current operation is completed."
    );
    let base = "/v1/nodes/held/management";
    for r in [
        app.get(&format!("{base}/boot_device")).await,
        app.request(
            Method::PUT,
            &format!("{base}/boot_device"),
            Some(json!({"boot_device": "disk"})),
        )
        .await,
        app.request(Method::PUT, &format!("{base}/inject_nmi"), Some(json!({})))
            .await,
    ] {
        assert_eq!(r.status, 409, "{}", r.body);
        assert_eq!(r.fault(), locked);
    }
    let r = app.get(&format!("{base}/boot_device/supported")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        db::nodes::unreserve(app.db(), uuid, "someone")
            .await
            .unwrap()
    );
    let node = app.node("held").await;
    assert_eq!(node["driver_internal_info"], json!({}), "nothing was set");
}

/// PUT .../inject_nmi exists from API 1.29 on: 404 before, 204 from it; it takes no arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_nmi_from_1_29() {
    let app = TestApp::start().await;
    app.create_node(json!({"name": "nmi", "driver": "fake-hardware"}))
        .await;
    let path = "/v1/nodes/nmi/management/inject_nmi";
    let r = app
        .request_at("1.28", Method::PUT, path, Some(json!({})))
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    let r = app
        .request_at("1.29", Method::PUT, path, Some(json!({})))
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    let r = app.request_at("1.29", Method::PUT, path, None).await;
    assert_eq!(r.status, 204, "{}", r.body);
    let r = app
        .request_at("1.29", Method::PUT, path, Some(json!({"now": true})))
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.fault(), "Unexpected arguments: now");
    assert_eq!(app.node("nmi").await["reservation"], Value::Null);
}

/// The fake vendor interface's methods (Ironic's `FakeVendorB`) as `/methods` lists them, and
/// `no-vendor`'s none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vendor_methods_are_listed() {
    let app = TestApp::start().await;
    app.create_node(fake_vendor_node()).await;
    app.create_node(
        json!({"name": "nv", "driver": "fake-hardware", "vendor_interface": "no-vendor"}),
    )
    .await;
    let r = app.get("/v1/nodes/v/vendor_passthru/methods").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let method = |asynchronous: bool, exclusive: bool, description: &str| {
        json!({"http_methods": ["POST"], "async": asynchronous, "description": description,
               "attach": false, "require_exclusive_lock": exclusive})
    };
    assert_eq!(
        r.body,
        json!({
            "second_method": method(true, true, "Test if the value of bar is kazoo"),
            "third_method_sync": method(false, true, "Test if the value of bar is meow"),
            "fourth_method_shared_lock": method(true, false, "Test if the value of bar is woof"),
            "log_passthrough": method(true, true, "Test pass-through to wait."),
        })
    );
    let r = app.get("/v1/nodes/nv/vendor_passthru/methods").await;
    assert_eq!((r.status.as_u16(), r.body), (200, json!({})));
    // fake-hardware's default vendor interface, the fake one, has no driver-level methods.
    let r = app
        .get("/v1/drivers/fake-hardware/vendor_passthru/methods")
        .await;
    assert_eq!((r.status.as_u16(), r.body), (200, json!({})));
    let r = app.get("/v1/drivers/nothing/vendor_passthru/methods").await;
    assert_eq!(r.status, 404, "{}", r.body);
}

/// Calls: a synchronous method answers 200 with its return value, an asynchronous one 202 with
/// no body; Ironic's 400s for a missing method, an unknown one, the wrong HTTP method, a
/// missing argument, and any call on `no-vendor`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vendor_passthru_calls_answer_as_ironic() {
    let app = TestApp::start().await;
    app.create_node(fake_vendor_node()).await;
    app.create_node(
        json!({"name": "nv", "driver": "fake-hardware", "vendor_interface": "no-vendor"}),
    )
    .await;
    let call =
        |node: &str, method: &str| format!("/v1/nodes/{node}/vendor_passthru?method={method}");

    let r = app
        .request(
            Method::POST,
            &call("v", "third_method_sync"),
            Some(json!({"bar": "meow"})),
        )
        .await;
    assert_eq!((r.status.as_u16(), &r.body), (200, &json!(true)));
    let r = app
        .request(
            Method::POST,
            &call("v", "third_method_sync"),
            Some(json!({"bar": "woof"})),
        )
        .await;
    assert_eq!((r.status.as_u16(), &r.body), (200, &json!(false)));
    for method in ["second_method", "fourth_method_shared_lock"] {
        let r = app
            .request(Method::POST, &call("v", method), Some(json!({"bar": "x"})))
            .await;
        assert_eq!(
            (r.status.as_u16(), &r.body),
            (202, &Value::Null),
            "{method}"
        );
    }
    // The asynchronous methods hold the lock until their worker ends: wait for it, or the next
    // call may find the node locked.
    app.settle().await;
    let r = app
        .request(Method::POST, &call("v", "log_passthrough"), None)
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    app.settle().await;
    assert_eq!(app.node("v").await["reservation"], Value::Null);

    for (method, node, path, body, fault) in [
        (
            Method::POST,
            "v",
            "/v1/nodes/v/vendor_passthru".to_owned(),
            None,
            "Method not specified".to_owned(),
        ),
        (
            Method::POST,
            "v",
            call("v", ""),
            None,
            "Method not specified".to_owned(),
        ),
        (
            Method::POST,
            "v",
            call("v", "nope"),
            None,
            "No handler for method nope".to_owned(),
        ),
        (
            Method::GET,
            "v",
            call("v", "third_method_sync"),
            None,
            "The method third_method_sync does not support HTTP GET".to_owned(),
        ),
        (
            Method::POST,
            "v",
            call("v", "second_method"),
            Some(json!({})),
            "Parameter 'bar' not passed to method 'second_method'.".to_owned(),
        ),
        (
            Method::POST,
            "v",
            call("v", "third_method_sync"),
            Some(json!({"bar": ""})),
            "Parameter 'bar' not passed to method 'third_method_sync'.".to_owned(),
        ),
        (
            Method::POST,
            "v",
            call("v", "third_method_sync"),
            Some(json!({"bar": "meow", "baz": 1})),
            "Unexpected arguments for method 'third_method_sync': baz".to_owned(),
        ),
        (
            Method::POST,
            "nv",
            call("nv", "second_method"),
            Some(json!({"bar": "kazoo"})),
            "No handler for method second_method".to_owned(),
        ),
    ] {
        let r = app.request(method.clone(), &path, body).await;
        assert_eq!(r.status, 400, "{method} {path}: {}", r.body);
        assert_eq!(r.fault(), fault, "{method} {path}");
        assert_eq!(app.node(node).await["reservation"], Value::Null);
    }
    let r = app
        .request(Method::POST, &call("v", "second_method"), Some(json!([1])))
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = app
        .request(
            Method::POST,
            &call("nobody", "second_method"),
            Some(json!({"bar": "x"})),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);

    // Driver-level passthru goes to the hardware type's default vendor interface (the fake
    // one, which has no driver-level method).
    let r = app
        .request(
            Method::POST,
            "/v1/drivers/fake-hardware/vendor_passthru?method=any",
            Some(json!({})),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.fault(), "No handler for method any");
    let r = app
        .request(
            Method::POST,
            "/v1/drivers/fake-hardware/vendor_passthru",
            None,
        )
        .await;
    assert_eq!(r.fault(), "Method not specified");
    let r = app
        .request(
            Method::POST,
            "/v1/drivers/nothing/vendor_passthru?method=any",
            None,
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
}

/// A method that requires the exclusive lock is NodeLocked on a locked node; the shared-lock
/// one is accepted and runs while someone else holds the lock, without touching it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vendor_methods_take_the_lock_they_declare() {
    let app = TestApp::start().await;
    let node = app.create_node(fake_vendor_node()).await;
    let uuid = node["uuid"].as_str().unwrap();
    assert!(
        db::nodes::reserve(app.db(), uuid, "someone", None)
            .await
            .unwrap()
    );
    let call = |method: &str| format!("/v1/nodes/v/vendor_passthru?method={method}");
    for method in ["second_method", "third_method_sync"] {
        let r = app
            .request(Method::POST, &call(method), Some(json!({"bar": "x"})))
            .await;
        assert_eq!(r.status, 409, "{method}: {}", r.body);
        assert!(
            r.fault().contains("is locked by host someone"),
            "{}",
            r.fault()
        );
    }
    let r = app
        .request(
            Method::POST,
            &call("fourth_method_shared_lock"),
            Some(json!({"bar": "woof"})),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    app.settle().await;
    assert_eq!(app.node("v").await["reservation"], "someone");
    assert!(
        db::nodes::unreserve(app.db(), uuid, "someone")
            .await
            .unwrap()
    );
}

/// An asynchronous vendor method still running when the conductor stops is cut at the end of
/// the graceful period: its lock is released and `last_error` says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vendor_method_cut_by_shutdown_releases_its_lock() {
    let mut app = TestApp::builder()
        .configure(|c| {
            c.conductor.fake_vendor_delay = Duration::from_secs(600);
            c.conductor.graceful_shutdown_timeout = Duration::from_millis(200);
        })
        .start()
        .await;
    app.create_node(fake_vendor_node()).await;
    let r = app
        .request(
            Method::POST,
            "/v1/nodes/v/vendor_passthru?method=second_method",
            Some(json!({"bar": "kazoo"})),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(app.node("v").await["reservation"], app.host());
    app.shutdown().await;
    let node = app.node("v").await;
    assert_eq!(node["reservation"], Value::Null);
    assert_eq!(node["provision_state"], "enroll");
    let error = node["last_error"].as_str().unwrap();
    assert!(
        error.contains("shut down before the driver finished"),
        "{error}"
    );
}

on_both_stacks! {
/// While an asynchronous vendor method runs (`fake_vendor_delay`), the node is locked by its
/// conductor for everyone: `reservation` names it and a PATCH is 409 NodeLocked. Once it ends,
/// the lock is gone and the PATCH goes through. Management and vendor calls through the real
/// processes as well.
async fn a_running_vendor_method_holds_the_node_lock(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        fake_vendor_delay: Some(4.0),
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let node = api
        .create_node(fake_vendor_node())
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let owner = cluster.owner_of(&uuid);

    let r = api
        .request(Method::PUT, "/v1/nodes/v/management/boot_device", Some(json!({"boot_device": "bios"})))
        .await;
    assert_eq!(r.status.as_u16(), 204, "{}", r.body);
    let r = api.get("/v1/nodes/v/management/boot_device").await;
    assert_eq!(r.body, json!({"boot_device": "bios", "persistent": false}));

    let r = api
        .request(Method::POST, "/v1/nodes/v/vendor_passthru?method=second_method", Some(json!({"bar": "kazoo"})))
        .await;
    assert_eq!(r.status.as_u16(), 202, "{}", r.body);
    assert_eq!(api.node("v").await["reservation"], owner.as_str());
    let r = api.patch("v", json!([{"op": "add", "path": "/extra/a", "value": 1}])).await;
    assert_eq!(r.status.as_u16(), 409, "{}", r.body);
    assert_eq!(
        r.fault(),
        format!("Node {uuid} is locked by host {owner}, please retry after the current operation is completed.")
    );

    api.wait_for("v", "enroll").await;
    let r = api.patch("v", json!([{"op": "add", "path": "/extra/a", "value": 1}])).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    cluster.assert_no_locks().await;
}
}

/// python-ironicclient names the method as the path's last segment; Ironic takes both forms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vendor_method_may_be_the_last_path_segment() {
    let app = TestApp::start().await;
    app.create_node(fake_vendor_node()).await;
    let r = app
        .request(
            Method::POST,
            "/v1/nodes/v/vendor_passthru/third_method_sync",
            Some(json!({"bar": "meow"})),
        )
        .await;
    assert_eq!((r.status.as_u16(), &r.body), (200, &json!(true)));
    let r = app
        .request(
            Method::POST,
            "/v1/drivers/fake-hardware/vendor_passthru/x",
            None,
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.fault(), "No handler for method x");
    assert_eq!(
        app.get("/v1/nodes/v/vendor_passthru/methods").await.status,
        200
    );
}
