//! Virtual media (API 1.89; GET 1.93): attached, listed and detached through the node's
//! conductor on the fake hardware, which keeps it on the node; Ironic's 400s for a bad body or
//! device type, 404 before the versions, and 409 on a locked node.

use axum::http::{Method, StatusCode};
use ferrum::db;
use serde_json::{Value, json};

use crate::util::TestApp;

const V: &str = "1.93";

/// The fake hardware's devices as GET lists them: which image each holds.
fn media(cdrom: &str, floppy: &str) -> Value {
    let one = |device: &str, image: &str| json!({"media_types": [device], "inserted": !image.is_empty(), "image": image});
    json!([one("disk", ""), one("cdrom", cdrom), one("floppy", floppy)])
}

/// Attach two devices, list them, detach one by type and then all, each a 2xx with the lock
/// released; and every refusal in Ironic's envelope.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn virtual_media_is_attached_listed_and_detached() {
    let app = TestApp::start().await;
    let api = app.api();
    api.create_node(json!({"name": "vm", "driver": "fake-hardware"})).await;
    let path = "/v1/nodes/vm/vmedia";
    let r = api.request_at(V, Method::GET, path, None).await;
    assert_eq!((r.status, &r.body), (StatusCode::OK, &media("", "")), "{}", r.body);
    let attach = |body: Value| api.request_at("1.89", Method::POST, path, Some(body));
    let r = attach(json!({"device_type": "cdrom", "image_url": "https://images/boot.iso"})).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = attach(json!({"device_type": "floppy", "image_url": "http://images/f.img", "image_download_source": "http"})).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at(V, Method::GET, path, None).await;
    assert_eq!(r.body, media("https://images/boot.iso", "http://images/f.img"));
    let node = api.node("vm").await;
    assert_eq!(node["reservation"], Value::Null, "{node}");

    let r = api.request_at("1.89", Method::DELETE, &format!("{path}?device_types=floppy"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at(V, Method::GET, path, None).await;
    assert_eq!(r.body, media("https://images/boot.iso", ""));
    let r = api.request_at("1.89", Method::DELETE, path, None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at(V, Method::GET, path, None).await;
    assert_eq!(r.body, media("", ""));

    let cdrom = json!({"device_type": "cdrom", "image_url": "https://i/x.iso"});
    let rows: Vec<(&str, Method, String, Value, StatusCode, &str)> = vec![
        ("1.88", Method::POST, path.into(), cdrom.clone(), StatusCode::NOT_FOUND, "could not be found"),
        ("1.88", Method::DELETE, path.into(), Value::Null, StatusCode::NOT_FOUND, "could not be found"),
        ("1.92", Method::GET, path.into(), Value::Null, StatusCode::NOT_FOUND, "could not be found"),
        ("1.89", Method::POST, "/v1/nodes/nobody/vmedia".into(), cdrom.clone(), StatusCode::NOT_FOUND, "nobody could not be found"),
        ("1.89", Method::POST, path.into(), json!({"image_url": "http://x"}), StatusCode::BAD_REQUEST, "'device_type' is a required property"),
        ("1.89", Method::POST, path.into(), json!({"device_type": "cdrom"}), StatusCode::BAD_REQUEST, "'image_url' is a required property"),
        ("1.89", Method::POST, path.into(), json!({"device_type": "pxe", "image_url": "http://x"}), StatusCode::BAD_REQUEST, "device_type"),
        ("1.89", Method::POST, path.into(), json!({"device_type": "cdrom", "image_url": "ftp://x/i.iso"}), StatusCode::BAD_REQUEST, "Unsupported or missing URL scheme: ftp"),
        ("1.89", Method::POST, path.into(), json!({"device_type": "cdrom", "image_url": "http://x", "image_download_source": "glance"}), StatusCode::BAD_REQUEST, "image_download_source"),
        ("1.89", Method::POST, path.into(), json!({"device_type": "cdrom", "image_url": "http://x", "insecure": true}), StatusCode::BAD_REQUEST, "'insecure' was unexpected"),
        ("1.89", Method::DELETE, format!("{path}?device_types=cdrom,usb"), Value::Null, StatusCode::BAD_REQUEST, "Invalid device type(s) usb (valid are disk, cdrom, floppy)"),
    ];
    for (version, method, path, body, status, says) in rows {
        let body = (!body.is_null()).then_some(body);
        let r = api.request_at(version, method.clone(), &path, body.clone()).await;
        assert_eq!(r.status, status, "{method} {path} {body:?} at {version}: {}", r.body);
        assert!(r.fault().contains(says), "{method} {path} {body:?}: {} lacks {says:?}", r.fault());
    }
    let r = api.request_at(V, Method::GET, path, None).await;
    assert_eq!(r.body, media("", ""), "nothing was attached");
    app.assert_no_locks().await;
}

/// Attaching and detaching take the node's exclusive lock: 409 NodeLocked on a locked node,
/// nothing attached; listing takes the shared one and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_media_on_a_locked_node_is_node_locked() {
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
    let path = "/v1/nodes/held/vmedia";
    let attach = json!({"device_type": "cdrom", "image_url": "https://i/x.iso"});
    for r in [
        app.request_at(V, Method::POST, path, Some(attach)).await,
        app.request_at(V, Method::DELETE, path, None).await,
    ] {
        assert_eq!(r.status, 409, "{}", r.body);
        assert_eq!(r.fault(), locked);
    }
    let r = app.request_at(V, Method::GET, path, None).await;
    assert_eq!(
        (r.status, &r.body),
        (StatusCode::OK, &media("", "")),
        "{}",
        r.body
    );
    assert!(
        db::nodes::unreserve(app.db(), uuid, "someone")
            .await
            .unwrap()
    );
    assert_eq!(app.node("held").await["driver_internal_info"], json!({}));
}
