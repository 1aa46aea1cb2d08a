//! Allocations (API 1.52, 1.57, 1.58, 1.60): a conductor picks a node by resource class, traits,
//! candidates and owner and reserves it; no match is an error with why; two allocations racing
//! for one node never both get it (on both stacks, as is the take-over of allocations left
//! allocating; the rest in process, [`TestApp`]); deleting an allocation frees its node and
//! deleting the node deletes its allocation; backfill, PATCH, version gates and error codes.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{Api, Cluster, ClusterOptions, Reply, TestApp, on_both_stacks};

const V: &str = "1.60";

/// Creates an allocation as a client does: a 201 `allocating` (Ironic's `create_allocation`
/// replies before its worker allocates), then polled until it is not; the reply carries the
/// allocation as it ended. A backfill (with a `node`) is answered as processed.
async fn allocate(api: &Api, body: Value) -> Reply {
    let backfill = body.get("node").is_some();
    let mut r = api
        .request_at(V, Method::POST, "/v1/allocations", Some(body))
        .await;
    if r.status != StatusCode::CREATED || backfill {
        return r;
    }
    assert_eq!(r.body["state"], "allocating", "{}", r.body);
    assert_eq!(r.body["node_uuid"], Value::Null, "{}", r.body);
    r.body = api
        .wait_allocation(V, r.body["uuid"].as_str().expect("uuid"))
        .await;
    r
}

async fn at(api: &Api, method: Method, path: &str, body: Option<Value>) -> Reply {
    api.request_at(V, method, path, body).await
}

/// A node is picked by resource class, traits and candidates; the allocation shows it, the node
/// shows the allocation, and deleting the allocation frees the node. No match is an error state
/// with why; listings filter by node, resource class and state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn allocate_by_class_traits_and_candidates() {
    let app = TestApp::start().await;
    let api = app.api();
    let gold_a = api.available_node(json!({"name": "gold-a", "resource_class": "gold"})).await;
    let gold = api.available_node(json!({"name": "gold", "resource_class": "gold"})).await;
    let silver = api.available_node(json!({"name": "silver", "resource_class": "silver"})).await;
    let r = api.request(Method::PUT, "/v1/nodes/gold-a/traits/CUSTOM_A", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);

    let r = allocate(api, json!({"name": "a1", "resource_class": "gold", "traits": ["CUSTOM_A"], "extra": {"k": 1}})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["state"], "active", "{}", r.body);
    assert_eq!(r.body["node_uuid"], gold_a["uuid"]);
    assert_eq!(r.body["extra"], json!({"k": 1}));
    let a1 = r.body["uuid"].as_str().unwrap().to_owned();
    let node = at(api, Method::GET, "/v1/nodes/gold-a", None).await.body;
    assert_eq!(node["allocation_uuid"], a1.as_str());
    assert_eq!(node["instance_uuid"], a1.as_str());
    assert_eq!(node["instance_info"]["traits"], json!(["CUSTOM_A"]));
    assert!(api.node("gold-a").await.get("allocation_uuid").is_none(), "not before 1.52");
    let r = at(api, Method::GET, "/v1/nodes/gold-a/allocation", None).await;
    assert_eq!(r.body["uuid"], a1.as_str(), "{}", r.body);
    let r = at(api, Method::GET, "/v1/allocations/a1", None).await;
    assert_eq!(r.body["uuid"], a1.as_str(), "{}", r.body);

    // Candidates by name: only silver, which is not gold: an error with why.
    let r = allocate(api, json!({"resource_class": "gold", "candidate_nodes": ["silver"]})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["state"], "error");
    assert_eq!(r.body["candidate_nodes"], json!([silver["uuid"]]));
    assert!(r.body["last_error"].as_str().unwrap().contains("none of the requested nodes"), "{}", r.body);
    let r = allocate(api, json!({"resource_class": "gold", "traits": ["CUSTOM_B"]})).await;
    assert_eq!(r.body["state"], "error");
    assert!(r.body["last_error"].as_str().unwrap().contains("CUSTOM_B"), "{}", r.body);
    // The one gold node left, by candidates given as a UUID.
    let r = allocate(api, json!({"resource_class": "gold", "candidate_nodes": [gold["uuid"]]})).await;
    assert_eq!(r.body["state"], "active", "{}", r.body);
    assert_eq!(r.body["node_uuid"], gold["uuid"]);
    let r = allocate(api, json!({"resource_class": "gold"})).await;
    assert_eq!(r.body["state"], "error", "no gold node is free: {}", r.body);
    assert!(r.body["last_error"].as_str().unwrap().contains("no available nodes match the resource class gold"), "{}", r.body);

    let r = at(api, Method::GET, "/v1/allocations?state=error", None).await;
    assert_eq!(r.body["allocations"].as_array().unwrap().len(), 3, "{}", r.body);
    let r = at(api, Method::GET, "/v1/allocations?node=gold-a&fields=uuid,state", None).await;
    assert_eq!(r.body["allocations"], json!([{"uuid": a1, "state": "active", "links": r.body["allocations"][0]["links"]}]), "{}", r.body);
    let r = at(api, Method::GET, "/v1/allocations?resource_class=gold&limit=2", None).await;
    assert_eq!(r.body["allocations"].as_array().unwrap().len(), 2, "{}", r.body);
    assert!(r.body["next"].as_str().unwrap().contains("resource_class=gold"), "{}", r.body);
    // Sorted by state, descending, a page at a time: error before active, the marker carried.
    let r = at(api, Method::GET, "/v1/allocations?sort_key=state&sort_dir=desc&limit=3", None).await;
    let page: Vec<_> = r.body["allocations"].as_array().unwrap().iter().map(|a| a["state"].clone()).collect();
    assert_eq!(page, vec![json!("error"); 3], "{}", r.body);
    let next = r.body["next"].as_str().unwrap();
    let r = at(api, Method::GET, &next[next.find("/v1/").unwrap()..], None).await;
    let page: Vec<_> = r.body["allocations"].as_array().unwrap().iter().map(|a| a["state"].clone()).collect();
    assert_eq!(page, vec![json!("active"); 2], "{}", r.body);
    let r = at(api, Method::GET, "/v1/allocations?sort_key=traits", None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = at(api, Method::GET, "/v1/allocations?state=bogus", None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);

    // Deleting frees the node, which can be allocated again.
    let r = at(api, Method::DELETE, "/v1/allocations/a1", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let node = at(api, Method::GET, "/v1/nodes/gold-a", None).await.body;
    assert_eq!(node["allocation_uuid"], Value::Null);
    assert_eq!(node["instance_uuid"], Value::Null);
    let r = at(api, Method::GET, "/v1/allocations/a1", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = at(api, Method::GET, "/v1/nodes/gold-a/allocation", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = allocate(api, json!({"name": "a2", "resource_class": "gold"})).await;
    assert_eq!(r.body["node_uuid"], gold_a["uuid"], "{}", r.body);
    // Removing the node's instance removes its allocation (Ironic's update_node).
    let r = api.request_at(V, Method::PATCH, "/v1/nodes/gold-a", Some(json!([{"op": "remove", "path": "/instance_uuid"}]))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["allocation_uuid"], Value::Null);
    let r = at(api, Method::GET, "/v1/allocations/a2", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    // Through the node's route.
    let r = allocate(api, json!({"resource_class": "gold"})).await;
    assert_eq!(r.body["node_uuid"], gold_a["uuid"], "{}", r.body);
    let r = at(api, Method::DELETE, "/v1/nodes/gold-a/allocation", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(at(api, Method::GET, "/v1/nodes/gold-a", None).await.body["instance_uuid"], Value::Null);
    // Deployed on an allocation, then torn down: the allocation ends with the instance.
    let r = allocate(api, json!({"name": "a3", "resource_class": "gold"})).await;
    assert_eq!(r.body["state"], "active", "{}", r.body);
    let deployed = r.body["node_uuid"].as_str().unwrap().to_owned();
    api.accepted(&deployed, "active").await;
    api.wait_for(&deployed, "active").await;
    api.accepted(&deployed, "deleted").await;
    let node = api.wait_for(&deployed, "available").await;
    assert_eq!(node["instance_uuid"], Value::Null);
    let r = at(api, Method::GET, "/v1/allocations/a3", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    app.assert_no_locks().await;
}

on_both_stacks! {
/// Two allocations race for one candidate node: one gets it, the other ends in error.
async fn racing_allocations_never_share_a_node(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions { stack, ..ClusterOptions::default() }).await
    else {
        return;
    };
    let api = &cluster.api;
    let node = api.available_node(json!({"name": "only", "resource_class": "rc"})).await;
    let spare = api.available_node(json!({"name": "spare", "resource_class": "rc"})).await;
    for round in 0..3 {
        let body = json!({"resource_class": "rc", "candidate_nodes": ["only"]});
        let (a, b) = tokio::join!(allocate(api, body.clone()), allocate(api, body));
        let states = [a.body["state"].clone(), b.body["state"].clone()];
        assert!(states.contains(&json!("active")) && states.contains(&json!("error")), "round {round}: {} / {}", a.body, b.body);
        let winner = if a.body["state"] == "active" { &a } else { &b };
        assert_eq!(winner.body["node_uuid"], node["uuid"]);
        let r = at(api, Method::DELETE, &format!("/v1/allocations/{}", winner.body["uuid"].as_str().unwrap()), None).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    }
    // Without candidates, the loser takes the other node.
    let body = json!({"resource_class": "rc"});
    let (a, b) = tokio::join!(allocate(api, body.clone()), allocate(api, body));
    assert_eq!((a.body["state"].as_str(), b.body["state"].as_str()), (Some("active"), Some("active")), "{} / {}", a.body, b.body);
    let mut got = [a.body["node_uuid"].clone(), b.body["node_uuid"].clone()];
    got.sort_by_key(|v| v.to_string());
    let mut want = [node["uuid"].clone(), spare["uuid"].clone()];
    want.sort_by_key(|v| v.to_string());
    assert_eq!(got, want);
    cluster.assert_no_locks().await;
}
}

/// Backfill (1.58) for a deployed node, its checks, deletion refused while the node is active
/// and allowed in maintenance, the node's deletion taking its allocation, and owner (1.60).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn backfill_owner_and_node_delete() {
    let app = TestApp::start().await;
    let api = app.api();
    api.available_node(json!({"name": "deployed", "resource_class": "rc"})).await;
    api.accepted("deployed", "active").await;
    api.wait_for("deployed", "active").await;
    let r = api.request_at("1.57", Method::POST, "/v1/allocations", Some(json!({"node": "deployed"}))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = allocate(api, json!({"node": "nope"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = allocate(api, json!({"node": "deployed", "resource_class": "other"})).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains("Resource class"), "{}", r.fault());
    let r = allocate(api, json!({"name": "bf", "node": "deployed"})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["state"], "active");
    assert_eq!(r.body["resource_class"], "rc", "taken from the node");
    let bf = r.body["uuid"].as_str().unwrap().to_owned();
    let node = at(api, Method::GET, "/v1/nodes/deployed", None).await.body;
    assert_eq!(node["allocation_uuid"], bf.as_str());
    assert_eq!(node["instance_uuid"], bf.as_str());
    // Not while active; in maintenance, yes; a node's deletion takes its allocation.
    let r = at(api, Method::DELETE, "/v1/allocations/bf", None).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains("active"), "{}", r.fault());
    let r = api.request(Method::PUT, "/v1/nodes/deployed/maintenance", Some(json!({"reason": "x"}))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let r = api.request(Method::DELETE, "/v1/nodes/deployed", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = at(api, Method::GET, "/v1/allocations/bf", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "gone with its node: {}", r.body);

    // A backfill of a node that is not deployed fails and leaves the allocation in error.
    api.available_node(json!({"name": "free", "resource_class": "rc"})).await;
    let r = allocate(api, json!({"name": "bf2", "node": "free"})).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = at(api, Method::GET, "/v1/allocations/bf2", None).await;
    assert_eq!(r.body["state"], "error", "{}", r.body);

    // Owner: only the owner's nodes are candidates; before 1.60 the field is refused.
    let r = at(api, Method::PATCH, "/v1/nodes/free", Some(json!([{"op": "add", "path": "/owner", "value": "p1"}]))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = api.request_at("1.59", Method::POST, "/v1/allocations", Some(json!({"resource_class": "rc", "owner": "p1"}))).await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    let r = allocate(api, json!({"resource_class": "rc", "owner": "p2"})).await;
    assert_eq!(r.body["state"], "error", "{}", r.body);
    let r = allocate(api, json!({"resource_class": "rc", "owner": "p1"})).await;
    assert_eq!(r.body["state"], "active", "{}", r.body);
    assert_eq!(r.body["owner"], "p1");
    let r = at(api, Method::GET, "/v1/allocations?owner=p1", None).await;
    assert_eq!(r.body["allocations"].as_array().unwrap().len(), 1, "{}", r.body);
    app.assert_no_locks().await;
}

/// PATCH (1.57) of name and extra only; version gates and error codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[rustfmt::skip]
async fn patch_versions_and_errors() {
    let app = TestApp::start().await;
    let api = app.api();
    let r = allocate(api, json!({"name": "p", "resource_class": "none"})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = allocate(api, json!({"name": "p", "resource_class": "none"})).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "duplicate name: {}", r.body);
    for bad in [
        json!({"traits": ["lower"], "resource_class": "x"}),
        json!({"name": "not a name", "resource_class": "x"}),
        json!({"candidate_nodes": ["missing"], "resource_class": "x"}),
        json!({"traits": []}),
        json!({"resource_class": "x", "state": "active"}),
    ] {
        let r = allocate(api, bad.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}: {}", r.body);
    }
    // Before 1.52 a GET is 404 and a change 405, as Ironic's `validation.api_version` answers.
    for (method, path, status) in [
        (Method::GET, "/v1/allocations", StatusCode::NOT_FOUND),
        (Method::GET, "/v1/allocations/p", StatusCode::NOT_FOUND),
        (Method::DELETE, "/v1/allocations/p", StatusCode::METHOD_NOT_ALLOWED),
    ] {
        let r = api.request_at("1.51", method, path, None).await;
        assert_eq!(r.status, status, "{path} before 1.52: {}", r.body);
    }
    let r = api.request_at("1.51", Method::GET, "/v1", None).await;
    assert!(r.body.get("allocations").is_none(), "{}", r.body);
    let r = api.request_at("1.52", Method::GET, "/v1", None).await;
    assert!(r.body["allocations"].is_array(), "{}", r.body);
    let r = api.request_at("1.52", Method::GET, "/v1/allocations/p", None).await;
    assert!(r.body.get("owner").is_none(), "owner is 1.60: {}", r.body);
    let r = at(api, Method::GET, "/v1/allocations/unknown", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    let ops = json!([{"op": "replace", "path": "/name", "value": "q"}, {"op": "add", "path": "/extra/k", "value": "v"}]);
    let r = api.request_at("1.56", Method::PATCH, "/v1/allocations/p", Some(ops.clone())).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{}", r.body);
    let r = api.request_at("1.57", Method::PATCH, "/v1/allocations/p", Some(ops)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["name"], "q");
    assert_eq!(r.body["extra"], json!({"k": "v"}));
    let r = at(api, Method::PATCH, "/v1/allocations/q", Some(json!([{"op": "replace", "path": "/resource_class", "value": "y"}]))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = allocate(api, json!({"name": "other", "resource_class": "none"})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = at(api, Method::PATCH, "/v1/allocations/other", Some(json!([{"op": "replace", "path": "/name", "value": "q"}]))).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = at(api, Method::DELETE, "/v1/allocations/q", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "an allocation without a node: {}", r.body);
    // GET looks the node up as a parameter (400, Ironic's `_get_allocations_collection`),
    // DELETE as the resource (404).
    let r = api.request_at("1.52", Method::GET, "/v1/nodes/None/allocation", None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.fault(), "Node None could not be found.");
    let r = at(api, Method::DELETE, "/v1/nodes/unknown/allocation", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    api.available_node(json!({"name": "bare", "resource_class": "none-here"})).await;
    let r = at(api, Method::GET, "/v1/nodes/bare/allocation", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert_eq!(r.fault(), "Allocation for node bare was not found");
}

/// A create sent again (its first conductor went away before it answered) is the same request:
/// the conductor answers with the allocation it made, not a 409; another request reusing the
/// UUID is a 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_create_is_the_same_allocation() {
    use ferrum::{allocation, conductor::allocations, db, error::Error};

    let app = crate::util::TestApp::start().await;
    let node = app.available_node(json!({"resource_class": "rc"})).await;
    let body = json!({"resource_class": "rc"})
        .as_object()
        .cloned()
        .unwrap();
    let asked = allocation::from_create(body.clone()).unwrap();
    let first = allocations::create(app.conductor(), asked.clone(), None, None)
        .await
        .unwrap();
    assert_eq!(first.state, "allocating");
    let again = allocations::create(app.conductor(), asked.clone(), None, None)
        .await
        .unwrap();
    assert_eq!(again.uuid, first.uuid);
    app.settle().await;
    let done = db::allocations::get(app.db(), &first.uuid).await.unwrap();
    assert_eq!(done.state, "active");
    assert_eq!(done.node_uuid.as_deref(), node["uuid"].as_str());
    let again = allocations::create(app.conductor(), asked.clone(), None, None)
        .await
        .unwrap();
    assert_eq!(again, done);
    let mut other = allocation::from_create(body).unwrap();
    other.uuid = asked.uuid.clone();
    let err = allocations::create(app.conductor(), other, None, None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err:?}");
}

/// An allocation row written straight into the database as a conductor leaves it when it stops
/// mid-way: `allocating` on `host`, for `resource_class`.
async fn left_allocating(
    db: &ferrum::db::Db,
    host: &str,
    body: Value,
) -> ferrum::allocation::Allocation {
    let mut a = ferrum::allocation::from_create(body.as_object().cloned().expect("object"))
        .expect("allocation");
    a.conductor_affinity = Some(host.to_owned());
    ferrum::db::allocations::insert(db, &a)
        .await
        .expect("insert")
}

on_both_stacks! {
/// No allocation stays `allocating` when its conductor stops: one left by a host whose lease ran
/// out is taken over by a live conductor (Ironic's `_check_orphan_allocations`), adopting the
/// node the dead one had already reserved for it; one left by a conductor that restarts is
/// resumed at its start (Ironic's `_resume_allocations`).
async fn allocations_left_allocating_are_taken_over_or_resumed(stack) {
    use ferrum::{db, node::NodeChanges};

    let Some(mut cluster) = Cluster::start(ClusterOptions { stack, ..ClusterOptions::default() }).await
    else {
        return;
    };
    let api = &cluster.api;
    let free = api.available_node(json!({"name": "free", "resource_class": "rc"})).await;
    let half = api.available_node(json!({"name": "half", "resource_class": "rc"})).await;
    let db = &cluster.db.db;

    // The dead host had reserved `half` for its allocation, and stopped before marking it active.
    let adopted = left_allocating(db, "gone-host", json!({"resource_class": "rc"})).await;
    let node = db::nodes::get_by_uuid(db, half["uuid"].as_str().unwrap()).await.unwrap();
    let reserve = NodeChanges {
        instance_uuid: Some(Some(adopted.uuid.clone())),
        allocation_uuid: Some(Some(adopted.uuid.clone())),
        ..NodeChanges::default()
    };
    assert!(db::nodes::update_unlocked(db, node.id, node.version, ("test", node.provision_state), reserve, None).await.unwrap());
    // The dead host had not started on this one.
    let fresh = left_allocating(db, "gone-host", json!({"resource_class": "rc", "candidate_nodes": [free["uuid"]]})).await;

    let a = cluster.api.wait_allocation(V, &adopted.uuid).await;
    assert_eq!((a["state"].as_str(), &a["node_uuid"]), (Some("active"), &half["uuid"]), "{a}");
    let a = cluster.api.wait_allocation(V, &fresh.uuid).await;
    assert_eq!((a["state"].as_str(), &a["node_uuid"]), (Some("active"), &free["uuid"]), "{a}");
    let node = cluster.api.node("free").await;
    assert_eq!(node["instance_uuid"], fresh.uuid.as_str(), "{node}");

    // A conductor killed with an allocation of its own left `allocating`: its restart resumes it.
    let third = cluster.api.available_node(json!({"name": "third", "resource_class": "rc"})).await;
    let process = cluster.conductor_process(0);
    cluster.kill(&process);
    let host = cluster.conductor_hosts[0].clone();
    let own = left_allocating(&cluster.db.db, &host, json!({"resource_class": "rc"})).await;
    cluster.restart_conductor(0).await;
    let a = cluster.api.wait_allocation(V, &own.uuid).await;
    assert_eq!((a["state"].as_str(), &a["node_uuid"]), (Some("active"), &third["uuid"]), "{a}");
    cluster.assert_no_locks().await;
}
}

/// A create takes a worker before it stores anything: with the only worker held by a deploy it
/// is 503 and no allocation is left behind (Ironic stores the row first and leaves it
/// `allocating`); once the worker is free, the same request is answered `allocating` and the
/// worker makes it active.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_without_a_free_worker_is_503_and_stores_nothing() {
    let app = crate::util::TestApp::builder()
        .configure(|config| config.conductor.workers = 1)
        .gate_deploys()
        .start()
        .await;
    app.available_node(json!({"name": "busy"})).await;
    let free = app
        .available_node(json!({"name": "free", "resource_class": "rc"}))
        .await;
    app.accepted("busy", "active").await;
    app.gate().reached().await;
    let body = json!({"name": "a", "resource_class": "rc"});
    let r = app
        .request_at(V, Method::POST, "/v1/allocations", Some(body.clone()))
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    let r = app
        .request_at(V, Method::GET, "/v1/allocations", None)
        .await;
    assert_eq!(r.body["allocations"], json!([]), "{}", r.body);
    app.gate().open();
    app.wait_for("busy", "active").await;
    let r = app
        .request_at(V, Method::POST, "/v1/allocations", Some(body))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["state"], "allocating", "{}", r.body);
    app.settle().await;
    let r = app
        .request_at(V, Method::GET, "/v1/allocations/a", None)
        .await;
    assert_eq!(
        (r.body["state"].as_str(), &r.body["node_uuid"]),
        (Some("active"), &free["uuid"]),
        "{}",
        r.body
    );
}
