//! Indicators (API 1.63): listed, read and set through the node's conductor on the fake
//! hardware, Ironic's 400s for bad names and states, and served before 1.63 too, as Ironic's.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::TestApp;

const V: &str = "1.63";

/// The fake hardware's indicators: Ironic's two, a settable one set and read back (the state
/// kept on the node, the lock released), and every refusal in Ironic's envelope.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn indicators_are_listed_read_and_set() {
    let app = TestApp::start().await;
    let api = app.api();
    api.create_node(json!({"name": "lit", "driver": "fake-hardware"})).await;
    let base = "/v1/nodes/lit/management/indicators";

    let r = api.request_at(V, Method::GET, base, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let list = r.body["indicators"].as_array().unwrap();
    let brief: Vec<Value> = list
        .iter()
        .map(|i| json!([i["name"], i["component"], i["readonly"], i["states"]]))
        .collect();
    assert_eq!(
        brief,
        vec![
            json!(["led-0@chassis", "chassis", true, ["off", "on"]]),
            json!(["led@system", "system", false, ["blinking", "off", "on"]]),
        ]
    );
    let href = list[1]["links"][0]["href"].as_str().unwrap();
    assert!(href.ends_with("/v1/nodes/lit/management/indicators/led@system"), "{href}");

    let one = format!("{base}/led@system");
    let r = api.request_at(V, Method::GET, &one, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body, json!({"state": "on"}));
    let r = api.request_at(V, Method::PUT, &one, Some(json!({"state": "blinking"}))).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(api.request_at(V, Method::GET, &one, None).await.body, json!({"state": "blinking"}));
    let node = api.node("lit").await;
    assert_eq!(node["driver_internal_info"]["fake_indicators"], json!({"led@system": "blinking"}));
    assert_eq!(node["reservation"], Value::Null);
    // The read-only one still reads its default.
    let r = api.request_at(V, Method::GET, &format!("{base}/led-0@chassis"), None).await;
    assert_eq!(r.body, json!({"state": "on"}), "{}", r.body);

    for (method, path, body, status, fault) in [
        (Method::PUT, format!("{base}/led-0@chassis"), Some(json!({"state": "off"})), 400,
         "Indicator led-0 on component chassis is read-only."),
        (Method::PUT, one.clone(), Some(json!({"state": "purple"})), 400,
         "Invalid indicator state purple specified."),
        (Method::PUT, one.clone(), Some(json!({"state": "unknown"})), 400,
         "Invalid state unknown for indicator led on component system."),
        (Method::GET, format!("{base}/led@disk"), None, 400, "Invalid component disk specified."),
        (Method::GET, format!("{base}/fan@system"), None, 400, "Invalid indicator fan specified."),
        (Method::PUT, format!("{base}/fan@system"), Some(json!({"state": "on"})), 400,
         "Invalid indicator fan specified."),
        (Method::GET, format!("{base}/led"), None, 400, "Malformed indicator name \"led\""),
        (Method::GET, "/v1/nodes/nosuch/management/indicators".to_owned(), None, 404,
         "Node nosuch could not be found."),
    ] {
        let r = api.request_at(V, method.clone(), &path, body.clone()).await;
        assert_eq!(r.status.as_u16(), status, "{method} {path}: {}", r.body);
        assert_eq!(r.fault(), fault, "{method} {path}");
    }
    // A refused set changed nothing and left no lock.
    let node = api.node("lit").await;
    assert_eq!(node["driver_internal_info"]["fake_indicators"], json!({"led@system": "blinking"}));
    assert_eq!(node["reservation"], Value::Null);

    // Ironic checks no version for indicators: before 1.63 they answer all the same (here by
    // name, so from 1.5).
    let r = api.request_at("1.5", Method::GET, base, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = api.request_at("1.62", Method::PUT, &one, Some(json!({"state": "off"}))).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(api.request_at("1.5", Method::GET, &one, None).await.body, json!({"state": "off"}));
}
