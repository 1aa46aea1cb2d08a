//! Node history (API 1.78): every failure a node records is an entry, listed oldest first with
//! Ironic's summary and detail fields, paged, and shown one by one; a node keeps at most
//! `node_history_max_entries` of them; bad input gets Ironic's codes.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use ferrum::{
    db,
    node::{Interfaces, Node, NodeChanges},
    states::ProvisionState,
};

use crate::util::{Api, TestApp, mysql_template::migrated, on_both_stacks};

const V: &str = "1.78";
const BAD_IMAGE: &str = "file:///home/user/aaa";

/// A deploy of `name` that fails in the driver (the image cannot be used): deploy failed.
async fn failed_deploy(api: &Api, name: &str) -> Value {
    api.accepted(name, "active").await;
    api.wait_for(name, "deploy failed").await
}

async fn history(api: &Api, path: &str) -> Value {
    let r = api.request_at(V, Method::GET, path, None).await;
    assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.body);
    r.body
}

/// A failed deploy is an entry with the node's last_error as its event; a second failure is a
/// second entry; the listing pages with `next`; an entry is shown in full; deleting the node
/// deletes its history with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn a_failed_deploy_is_recorded_in_the_history() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.available_node(json!({
        "name": "h1",
        "deploy_interface": "direct",
        // Automated cleaning would boot the ramdisk and wait for an agent.
        "automated_clean": false,
        "instance_info": {"image_source": BAD_IMAGE},
    })).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let base = format!("/v1/nodes/{uuid}/history");
    // Nothing failed yet: the successful manage and provide recorded nothing.
    assert_eq!(history(api, &base).await, json!({"history": []}));

    let failed = failed_deploy(api, "h1").await;
    let last_error = failed["last_error"].as_str().unwrap().to_owned();
    assert!(last_error.starts_with("Failed to prepare to deploy: "), "{last_error}");
    let listed = history(api, "/v1/nodes/h1/history").await;
    let entries = listed["history"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{listed}");
    let entry = &entries[0];
    let mut keys: Vec<&str> = entry.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["created_at", "event", "links", "severity", "uuid"], "{entry}");
    assert_eq!((&entry["event"], &entry["severity"]), (&json!(last_error), &json!("ERROR")));
    let event_uuid = entry["uuid"].as_str().unwrap().to_owned();
    assert!(
        entry["links"][0]["href"].as_str().unwrap().ends_with(&format!("/v1/nodes/{uuid}/history/{event_uuid}")),
        "{entry}"
    );
    assert!(listed.get("next").is_none(), "{listed}");

    let detail = history(api, &format!("{base}?detail=True")).await;
    let full = &detail["history"][0];
    assert_eq!(full["event_type"], "deploying", "{full}");
    assert_eq!(full["event"], json!(last_error));
    assert!(full["conductor"].is_string(), "{full}");
    assert!(full.as_object().unwrap().contains_key("user"), "{full}");
    let one = history(api, &format!("{base}/{event_uuid}")).await;
    assert_eq!(&one, full);

    // Redeployed from deploy failed, it fails again: a second entry, after the first.
    let again = failed_deploy(api, "h1").await;
    let listed = history(api, &base).await;
    let entries = listed["history"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{listed}");
    assert_eq!(entries[0]["uuid"], json!(event_uuid));
    assert_eq!(entries[1]["event"], again["last_error"]);
    let newest = history(api, &format!("{base}?sort_dir=desc")).await;
    assert_eq!(newest["history"][0]["uuid"], entries[1]["uuid"]);

    // Pages of one: the first has a next link naming its entry as the marker, which leads to
    // the second; a page that is not full has none.
    let page = history(api, &format!("{base}?limit=1&detail=true")).await;
    assert_eq!(page["history"].as_array().unwrap().len(), 1, "{page}");
    assert_eq!(page["history"][0]["uuid"], json!(event_uuid));
    let next = page["next"].as_str().unwrap();
    assert!(next.contains(&format!("/v1/nodes/{uuid}/history?detail=true&limit=1&marker={event_uuid}")), "{next}");
    let path = &next[next.find("/v1/").unwrap()..];
    let second = history(api, path).await;
    assert_eq!(second["history"][0]["uuid"], entries[1]["uuid"], "{second}");
    assert_eq!(second["history"][0]["event_type"], "deploying", "detail is carried: {second}");
    let last = history(api, &format!("{base}?limit=1&marker={}", entries[1]["uuid"].as_str().unwrap())).await;
    assert_eq!(last, json!({"history": []}));

    // The node goes with its history.
    api.accepted("h1", "deleted").await;
    api.wait_for("h1", "available").await;
    let r = api.request_at(V, Method::DELETE, "/v1/nodes/h1", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = api.request_at(V, Method::GET, &base, None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    app.assert_no_locks().await;
}

/// Bad input to the history endpoints: Ironic's codes, the node untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn bad_history_requests_get_ironics_codes() {
    let app = TestApp::start().await;
    let api = app.api();
    api.available_node(json!({
        "name": "hb",
        "deploy_interface": "direct",
        // Automated cleaning would boot the ramdisk and wait for an agent.
        "automated_clean": false,
        "instance_info": {"image_source": BAD_IMAGE},
    })).await;
    failed_deploy(api, "hb").await;
    api.available_node(json!({"name": "other"})).await;
    let entry = history(api, "/v1/nodes/hb/history").await["history"][0]["uuid"]
        .as_str().unwrap().to_owned();
    let unknown = uuid::Uuid::new_v4().to_string();
    let not_found_record = format!("Node history record {unknown} could not be found.");
    let rows: Vec<(&str, String, StatusCode, String)> = vec![
        ("1.77", "/v1/nodes/hb/history".into(), StatusCode::NOT_FOUND, "The resource could not be found.".into()),
        ("1.77", format!("/v1/nodes/hb/history/{entry}"), StatusCode::NOT_FOUND, "The resource could not be found.".into()),
        (V, "/v1/nodes/nope/history".into(), StatusCode::NOT_FOUND, "Node nope could not be found.".into()),
        (V, "/v1/nodes/hb/history?detail=maybe".into(), StatusCode::BAD_REQUEST, "detail".into()),
        (V, "/v1/nodes/hb/history?marker=not-a-uuid".into(), StatusCode::BAD_REQUEST, "Expected UUID for marker: not-a-uuid".into()),
        (V, format!("/v1/nodes/hb/history?marker={unknown}"), StatusCode::NOT_FOUND, not_found_record.clone()),
        (V, "/v1/nodes/hb/history?limit=0".into(), StatusCode::BAD_REQUEST, "limit".into()),
        (V, "/v1/nodes/hb/history?limit=many".into(), StatusCode::BAD_REQUEST, "limit".into()),
        (V, "/v1/nodes/hb/history?sort_key=event".into(), StatusCode::BAD_REQUEST, "sort_key".into()),
        (V, "/v1/nodes/hb/history?sort_dir=up".into(), StatusCode::BAD_REQUEST, "sort direction".into()),
        (V, format!("/v1/nodes/hb/history/{unknown}"), StatusCode::NOT_FOUND, not_found_record),
        (V, "/v1/nodes/hb/history/no-such-event".into(), StatusCode::NOT_FOUND, "Node history record no-such-event could not be found.".into()),
        (V, "/v1/nodes/hb/history/bad%20name".into(), StatusCode::BAD_REQUEST, "Expected UUID or name for event: bad name".into()),
        // Another node's entry is not this node's.
        (V, format!("/v1/nodes/other/history/{entry}"), StatusCode::NOT_FOUND, format!("Node history record {entry} could not be found.")),
        (V, format!("/v1/nodes/other/history?marker={entry}"), StatusCode::NOT_FOUND, format!("Node history record {entry} could not be found.")),
    ];
    for (version, path, status, fault) in rows {
        let r = api.request_at(version, Method::GET, &path, None).await;
        assert_eq!(r.status, status, "{version} {path}: {}", r.body);
        assert!(r.fault().contains(&fault), "{version} {path}: {}", r.fault());
    }
    app.assert_no_locks().await;
}

on_both_stacks! {
/// A node keeps its newest `node_history_max_entries` entries: each failure written with the
/// node's change, the oldest removed in the same transaction; a cleared last_error records
/// nothing, and 0 records none.
async fn a_node_keeps_its_newest_entries(stack) {
    let Some(test_db) = migrated(stack).await else {
        return;
    };
    let db = &test_db.db.clone().with_history_max_entries(2);
    let row = Node {
        uuid: uuid::Uuid::new_v4().to_string(),
        driver: "fake-hardware".into(),
        interfaces: Interfaces {
            deploy: "fake".into(),
            power: "fake".into(),
            management: "fake".into(),
            ..Interfaces::default()
        },
        provision_state: ProvisionState::Available,
        created_at: ferrum::node::now(),
        ..Node::default()
    };
    let mut node = db::nodes::insert(db, &row).await.unwrap();
    for i in 0..4 {
        let failed = NodeChanges::default().last_error(Some(format!("failure {i}")));
        assert!(db::nodes::update_unlocked(db, node.id, node.version, ("c1", node.provision_state), failed, None).await.unwrap());
        node = db::nodes::get_by_uuid(db, &node.uuid).await.unwrap();
    }
    let cleared = NodeChanges::default().last_error(None);
    assert!(db::nodes::update_unlocked(db, node.id, node.version, ("c1", node.provision_state), cleared, None).await.unwrap());
    node = db::nodes::get_by_uuid(db, &node.uuid).await.unwrap();
    let kept = db::history::list(db, node.id, None, 100, false).await.unwrap();
    let events: Vec<&str> = kept.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(events, ["failure 2", "failure 3"]);
    assert!(kept.iter().all(|e| e.event_type == "UNKNOWN" && e.conductor.as_deref() == Some("c1")));

    // A write that loses its condition records nothing either.
    let stale = NodeChanges::default().last_error(Some("stale".into()));
    assert!(!db::nodes::update_unlocked(db, node.id, node.version - 1, ("c1", node.provision_state), stale, None).await.unwrap());
    let off = test_db.db.clone().with_history_max_entries(0);
    let unrecorded = NodeChanges::default().last_error(Some("not recorded".into()));
    assert!(db::nodes::update_unlocked(&off, node.id, node.version, ("c1", node.provision_state), unrecorded, None).await.unwrap());
    let kept = db::history::list(db, node.id, None, 100, false).await.unwrap();
    assert_eq!(kept.len(), 2);
    assert_eq!(kept[1].event, "failure 3");
}
}
