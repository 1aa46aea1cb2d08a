//! Node inventory (API 1.81): what an inspection stored for a node, 404 with Ironic's message
//! when nothing was; one record per node, replaced by a later one, gone with its node.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use ferrum::{db, node::inventory::NodeInventory};

use crate::util::TestApp;

fn object(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().cloned().expect("a JSON object")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn a_stored_inventory_is_shown_with_its_plugin_data() {
    let app = TestApp::start().await;
    let api = app.api();
    let node = api.create_node(json!({"driver": "fake-hardware", "name": "inv"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let get = |v: &'static str, path: String| async move { api.request_at(v, Method::GET, &path, None).await };
    let missing = format!("Node inventory record for node {uuid} could not be found.");
    for (version, path, status, fault) in [
        ("1.80", "/v1/nodes/inv/inventory".to_owned(), StatusCode::NOT_FOUND, "The resource could not be found.".to_owned()),
        ("1.81", "/v1/nodes/inv/inventory".to_owned(), StatusCode::NOT_FOUND, missing.clone()),
        ("1.81", format!("/v1/nodes/{uuid}/inventory"), StatusCode::NOT_FOUND, missing),
        ("1.81", "/v1/nodes/nope/inventory".to_owned(), StatusCode::NOT_FOUND, "Node nope could not be found.".to_owned()),
    ] {
        let r = get(version, path.clone()).await;
        assert_eq!(r.status, status, "{version} {path}: {}", r.body);
        assert!(r.fault().contains(&fault), "{version} {path}: {}", r.fault());
    }

    // An IPA-shaped inventory, as an inspection stores it.
    let inventory = json!({
        "interfaces": [{"name": "eth0", "mac_address": "52:54:00:12:34:56", "ipv4_address": "192.0.2.10"}],
        "cpu": {"model_name": "QEMU Virtual CPU", "count": 2, "architecture": "x86_64"},
        "memory": {"total": 2147483648u64, "physical_mb": 2048},
        "disks": [{"name": "/dev/vda", "size": 21474836480u64, "rotational": false}],
        "system_vendor": {"product_name": "KVM", "manufacturer": "QEMU"},
        "bmc_address": "192.0.2.1",
    });
    let plugin = json!({"root_disk": {"name": "/dev/vda"}});
    let db = app.db();
    let node_id = db::nodes::get_by_uuid(db, &uuid).await.unwrap().id;
    db::inventory::store(db, &NodeInventory::new(node_id, object(inventory.clone()), object(plugin.clone()))).await.unwrap();
    let r = get("1.81", "/v1/nodes/inv/inventory".into()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body, json!({"inventory": inventory, "plugin_data": plugin}));

    // A later inspection replaces it.
    db::inventory::store(db, &NodeInventory::new(node_id, object(json!({"cpu": {"count": 4}})), object(json!({})))).await.unwrap();
    let r = get("1.81", "/v1/nodes/inv/inventory".into()).await;
    assert_eq!(r.body, json!({"inventory": {"cpu": {"count": 4}}, "plugin_data": {}}));

    // It goes with its node.
    let r = api.request_at("1.81", Method::DELETE, "/v1/nodes/inv", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(db::inventory::get(db, node_id).await.unwrap(), None);
}
