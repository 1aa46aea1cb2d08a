//! A configdrive given as an object (1.56, vendor_data 1.59): checked by the API, built into an
//! ISO 9660 image by the conductor and stored gzipped and base64-encoded in
//! `instance_info.configdrive`, as Ironic stores the image it builds.

use std::io::Read;

use base64::Engine;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_configdrive_is_checked_and_built_into_an_iso() {
    let app = TestApp::start().await;
    let node = app.available_node(json!({"name": "cd1"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let deploy = |version: &'static str, configdrive: Value| {
        app.request_at(
            version,
            Method::PUT,
            "/v1/nodes/cd1/states/provision",
            Some(json!({"target": "active", "configdrive": configdrive})),
        )
    };
    let drive = json!({"meta_data": {"hostname": "cd1.example"}, "user_data": {"runcmd": ["true"]},
                       "network_data": {"links": [], "networks": [], "services": []}});
    for (version, configdrive, expected) in [
        (
            "1.55",
            drive.clone(),
            "only supported starting with API version 1.56",
        ),
        (
            "1.58",
            json!({"vendor_data": {"a": 1}}),
            "vendor_data in configdrive is only supported starting with API version 1.59",
        ),
        (
            "1.59",
            json!({"meta": {}}),
            "Invalid configdrive format: unexpected key 'meta'",
        ),
        (
            "1.59",
            json!({"meta_data": "x"}),
            "Invalid configdrive format: meta_data cannot be",
        ),
        ("1.59", json!(5), "Invalid configdrive format"),
        (
            "1.59",
            json!("not base64!"),
            "neither a JSON, nor a URL, nor a base64 string",
        ),
    ] {
        let r = deploy(version, configdrive.clone()).await;
        assert_eq!(
            r.status,
            StatusCode::BAD_REQUEST,
            "{configdrive}: {}",
            r.body
        );
        assert!(
            r.fault().contains(expected),
            "{expected:?} not in {}",
            r.fault()
        );
    }
    assert_eq!(app.node("cd1").await["provision_state"], "available");

    let mut with_vendor = drive.clone();
    with_vendor["vendor_data"] = json!({"cloud": "ferrum"});
    let r = deploy("1.59", with_vendor).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let shown = app.wait_for("cd1", "active").await;
    assert_eq!(
        shown["instance_info"]["configdrive"], "******",
        "masked: {shown}"
    );

    let stored = ferrum::db::nodes::get_by_uuid(app.db(), &uuid)
        .await
        .unwrap();
    let text = stored.instance_info["configdrive"]
        .as_str()
        .expect("the built image")
        .to_owned();
    let gzipped = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .unwrap();
    let mut iso = Vec::new();
    flate2::read::GzDecoder::new(&gzipped[..])
        .read_to_end(&mut iso)
        .unwrap();
    assert_eq!(
        &iso[16 * 2048 + 1..16 * 2048 + 6],
        b"CD001",
        "a primary volume descriptor"
    );
    assert!(
        iso[16 * 2048 + 40..16 * 2048 + 48].eq_ignore_ascii_case(b"config-2"),
        "labelled config-2"
    );
    let haystack = String::from_utf8_lossy(&iso);
    for needle in [uuid.as_str(), "cd1.example", "\"runcmd\"", "ferrum"] {
        assert!(haystack.contains(needle), "{needle} is in the image");
    }
}
