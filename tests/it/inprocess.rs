//! The service in process ([`TestApp`]): the node handlers through the router, and the
//! conductor's lock logic (`change_node`, `Task::fail`) on a real database, with no sockets,
//! processes or clocks.

use axum::http::Method;
use ferrum::{
    conductor::task::{Decision, Hold, Move, Task, change_node},
    db,
    error::Error,
    node::NodeChanges,
    states::Event,
};
use serde_json::json;

use crate::util::TestApp;

/// create, show (by name and UUID), list, patch, delete: the handlers through the router.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_handlers_create_show_patch_and_delete() {
    let app = TestApp::start().await;
    let r = app
        .request(
            Method::POST,
            "/v1/nodes",
            Some(json!({"name": "n1", "driver": "fake-hardware", "extra": {"a": 1}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let uuid = r.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(r.body["provision_state"], "enroll");
    assert_eq!(r.body["reservation"], json!(null));
    assert_eq!(r.body["deploy_interface"], "fake");
    assert_eq!(r.body["conductor"], app.host());

    let by_name = app.node("n1").await;
    let by_uuid = app.node(&uuid).await;
    assert_eq!(by_name, by_uuid);
    assert_eq!(by_name["extra"], json!({"a": 1}));
    let list = app.get("/v1/nodes").await;
    assert_eq!(list.status, 200, "{}", list.body);
    assert_eq!(list.body["nodes"][0]["uuid"], uuid.as_str());

    let r = app
        .patch(
            "n1",
            json!([{"op": "add", "path": "/extra/b", "value": "two"}]),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["extra"], json!({"a": 1, "b": "two"}));
    let r = app
        .patch(
            "n1",
            json!([{"op": "replace", "path": "/uuid", "value": "x"}]),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(app.node("n1").await["extra"], json!({"a": 1, "b": "two"}));

    let r = app
        .request(Method::DELETE, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    let r = app.get("/v1/nodes/n1").await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.fault(), "Node n1 could not be found.");
}

/// The microversion header picks the fields shown: `deploy_step` (1.44) only from its version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_fields_follow_the_requested_microversion() {
    let app = TestApp::start().await;
    app.create_node(json!({"name": "v", "driver": "fake-hardware"}))
        .await;
    let old = app
        .request_at("1.43", Method::GET, "/v1/nodes/v", None)
        .await;
    assert_eq!(old.status, 200, "{}", old.body);
    assert!(old.body.get("deploy_step").is_none(), "{}", old.body);
    let new = app
        .request_at("1.44", Method::GET, "/v1/nodes/v", None)
        .await;
    assert_eq!(new.body["deploy_step"], json!({}), "{}", new.body);
    let r = app
        .request_at("1.116", Method::GET, "/v1/nodes/v", None)
        .await;
    assert_eq!(r.status, 406, "{}", r.body);
}

/// Provisioning through the router: manage and provide are carried out by the conductor in
/// this process; a verb the state does not allow is 400, decided by the conductor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_handlers_provision() {
    let app = TestApp::start().await;
    let node = app
        .create_node(json!({"name": "p", "driver": "fake-hardware"}))
        .await;
    app.accepted("p", "manage").await;
    app.wait_for("p", "manageable").await;
    let r = app.provision("p", "active").await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.fault().contains("\"manageable\""), "{}", r.fault());
    app.accepted("p", "provide").await;
    app.wait_for("p", "available").await;
    app.accepted("p", "active").await;
    let active = app.wait_for("p", "active").await;
    assert_eq!(active["power_state"], "power on");
    assert_eq!(active["uuid"], node["uuid"]);
    app.accepted("p", "deleted").await;
    app.wait_for("p", "available").await;
}

/// The harness itself: a test that leaves a node reserved fails when its app is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(expected = "the test left nodes reserved")]
async fn an_app_dropped_with_a_node_reserved_fails_the_test() {
    let app = TestApp::start().await;
    let node = app
        .create_node(json!({"name": "left", "driver": "fake-hardware"}))
        .await;
    let uuid = node["uuid"].as_str().unwrap();
    assert!(
        db::nodes::reserve(app.db(), uuid, "someone", None)
            .await
            .unwrap()
    );
}

// --- The node lock while a deploy runs: held at the gate, so no timing is involved. ---

/// As `locking::requests_on_a_locked_node_get_409_node_locked`, deterministically: while the
/// deploy holds the lock, PATCH, tear-down and power requests are 409 NodeLocked naming the
/// holder, and change nothing; once it ended they go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_on_a_deploying_node_get_409_node_locked() {
    let app = TestApp::builder().gate_deploys().start().await;
    let node = app.available_node(json!({"name": "busy"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    app.accepted("busy", "active").await;
    assert_eq!(app.gate().reached().await, uuid);

    let r = app
        .patch(
            "busy",
            json!([{"op": "add", "path": "/extra/x", "value": 1}]),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(
        r.fault(),
        format!(
            "Node {uuid} is locked by host {}, please retry after the current operation is completed.",
            app.host()
        )
    );
    let r = app.provision("busy", "deleted").await;
    assert_eq!(r.status, 409, "{}", r.body);
    let r = app.power("busy", "power off").await;
    assert_eq!(r.status, 409, "{}", r.body);

    app.gate().release(1);
    let node = app.wait_for("busy", "active").await;
    assert_eq!(
        node["extra"],
        json!({}),
        "the refused PATCH changed nothing"
    );
    let r = app
        .patch(
            "busy",
            json!([{"op": "add", "path": "/extra/x", "value": 1}]),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// As `node_features::deploy_step_is_shown_while_the_deploy_runs`, deterministically: the node
/// is `deploying`, locked by its conductor and naming its step while the deploy runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_deploy_shows_its_state_lock_and_step() {
    let app = TestApp::builder().gate_deploys().start().await;
    let node = app.available_node(json!({"name": "s1"})).await;
    app.accepted("s1", "active").await;
    assert_eq!(app.gate().reached().await, node["uuid"].as_str().unwrap());
    let node = app.node("s1").await;
    assert_eq!(node["provision_state"], "deploying", "{node}");
    assert_eq!(node["target_provision_state"], "active", "{node}");
    assert_eq!(node["reservation"], app.host(), "{node}");
    assert_eq!(
        node["deploy_step"],
        json!({"interface": "deploy", "step": "deploy", "priority": 100, "args": {}})
    );
    app.gate().release(1);
    assert_eq!(app.wait_for("s1", "active").await["deploy_step"], json!({}));
    app.accepted("s1", "deleted").await;
    assert_eq!(
        app.wait_for("s1", "available").await["deploy_step"],
        json!({})
    );
}

/// As `locking::a_full_worker_pool_is_503_and_leaves_the_node_as_it_was`, deterministically:
/// with the only worker held by a deploy, another provision request is 503 and the node is
/// untouched; once the worker is free, the same request is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_worker_pool_is_503_and_leaves_the_node_as_it_was() {
    let app = TestApp::builder()
        .configure(|config| config.conductor.workers = 1)
        .gate_deploys()
        .start()
        .await;
    app.available_node(json!({"name": "first"})).await;
    app.available_node(json!({"name": "second"})).await;
    app.accepted("first", "active").await;
    app.gate().reached().await;
    let r = app.provision("second", "active").await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(
        r.fault(),
        "Requested action cannot be performed due to lack of free conductor workers."
    );
    let node = app.node("second").await;
    assert_eq!(node["provision_state"], "available");
    assert_eq!(node["target_provision_state"], json!(null));
    assert_eq!(node["reservation"], json!(null));
    app.gate().open();
    app.wait_for("first", "active").await;
    app.accepted("second", "active").await;
    app.wait_for("second", "active").await;
}

/// As the embedded half of `failures::shutdown_fails_work_still_running_and_releases_its_locks`,
/// deterministically: a deploy still running when the graceful period ends is failed with a
/// last_error saying why, its lock released, and the conductor deregistered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_fails_work_still_running_and_releases_its_lock() {
    let mut app = TestApp::builder()
        .configure(|config| {
            config.conductor.graceful_shutdown_timeout = std::time::Duration::from_millis(500);
        })
        .gate_deploys()
        .start()
        .await;
    app.available_node(json!({"name": "slow"})).await;
    app.accepted("slow", "active").await;
    app.gate().reached().await;
    let host = app.host().to_owned();
    app.shutdown().await;
    // The API reads nodes from the database: it still answers without its conductor.
    let node = app.node("slow").await;
    assert_eq!(node["provision_state"], "deploy failed", "{node}");
    assert_eq!(node["reservation"], json!(null), "{node}");
    let last_error = node["last_error"].as_str().unwrap();
    assert!(last_error.contains("shut down"), "{last_error}");
    let alive = db::conductors::list_alive(app.db(), std::time::Duration::from_secs(10))
        .await
        .unwrap();
    assert!(alive.iter().all(|c| c.hostname != host), "deregistered");
}

// --- change_node: decide on the node as read, write once, re-read only if the row moved. ---

/// A write that records `message` as last_error, releasing (or keeping) the lock.
fn note(message: &str, hold: Hold) -> ferrum::error::Result<Decision> {
    Ok(Decision::Write(
        NodeChanges::default().last_error(Some(message.to_owned())),
        hold,
    ))
}

async fn enrolled(app: &TestApp, name: &str) -> String {
    let node = app
        .create_node(json!({"name": name, "driver": "fake-hardware"}))
        .await;
    node["uuid"].as_str().expect("uuid").to_owned()
}

/// Given the node as the caller read it, `change_node` decides once, on that copy, and writes
/// once (the version moves by one), without reading the row itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_node_decides_on_the_node_as_read_and_writes_once() {
    let app = TestApp::start().await;
    let uuid = enrolled(&app, "once").await;
    let read = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    let mut decided_on = Vec::new();
    let (written, task) = change_node(app.conductor(), &uuid, Some(read.clone()), None, |n| {
        decided_on.push(n.version);
        note("decided", Hold::Release)
    })
    .await
    .unwrap();
    assert_eq!(
        decided_on,
        [read.version],
        "one decision, on the copy given"
    );
    assert!(task.is_none(), "nothing held");
    assert_eq!(written.version, read.version + 1, "one write");
    let stored = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    assert_eq!(stored.version, read.version + 1, "one write");
    assert_eq!(stored.last_error.as_deref(), Some("decided"));
    assert_eq!(stored.reservation, None);
}

/// A copy the row has moved past (another write came between the read and the change): the
/// write finds the version changed and writes nothing; `change_node` reads again and decides
/// on the fresh row, so the other write is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_node_reads_again_only_when_the_row_moved() {
    let app = TestApp::start().await;
    let uuid = enrolled(&app, "moved").await;
    let stale = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    let r = app
        .patch(
            "moved",
            json!([{"op": "add", "path": "/extra/between", "value": true}]),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut decided_on = Vec::new();
    let (written, _) = change_node(app.conductor(), &uuid, Some(stale.clone()), None, |n| {
        decided_on.push(n.version);
        note("after the patch", Hold::Release)
    })
    .await
    .unwrap();
    assert_eq!(
        decided_on,
        [stale.version, stale.version + 1],
        "decided on the stale copy, then once more on the row as it is"
    );
    assert_eq!(written.version, stale.version + 2);
    let node = app.node("moved").await;
    assert_eq!(node["extra"], json!({"between": true}), "the PATCH is kept");
    assert_eq!(node["last_error"], "after the patch");
}

/// A copy that shows a lock is not trusted: the lock may be gone by now, so the row is read
/// before deciding. A node someone else holds is NodeLocked naming the holder, undecided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_node_looks_again_at_a_lock_and_refuses_a_held_node() {
    let app = TestApp::start().await;
    let uuid = enrolled(&app, "held").await;
    let mut seen_locked = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    seen_locked.reservation = Some("gone-by-now".to_owned());
    let mut decisions = 0;
    change_node(app.conductor(), &uuid, Some(seen_locked), None, |n| {
        decisions += 1;
        assert_eq!(n.reservation, None, "decided on the row as read again");
        note("unlocked after all", Hold::Release)
    })
    .await
    .unwrap();
    assert_eq!(decisions, 1);

    assert!(
        db::nodes::reserve(app.db(), &uuid, "other-host", None)
            .await
            .unwrap()
    );
    let mut decisions = 0;
    let err = change_node(app.conductor(), &uuid, None, None, |_| {
        decisions += 1;
        note("never", Hold::Release)
    })
    .await
    .err()
    .expect("NodeLocked");
    assert_eq!(
        err,
        Error::NodeLocked {
            node: uuid.clone(),
            host: "other-host".to_owned()
        }
    );
    assert_eq!(
        decisions, 0,
        "nothing is decided on a node someone else holds"
    );
    let held = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    assert_eq!(held.last_error.as_deref(), Some("unlocked after all"));
    assert!(
        db::nodes::release(app.db(), held.id, "other-host", held.version)
            .await
            .unwrap()
    );
}

/// A decision's error (a validation failure) is returned with nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_node_writes_nothing_when_the_decision_fails() {
    let app = TestApp::start().await;
    let uuid = enrolled(&app, "refused").await;
    let before = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    let err = change_node(app.conductor(), &uuid, Some(before.clone()), None, |_| {
        Err(Error::InvalidParameterValue("no".to_owned()))
    })
    .await
    .err()
    .expect("the decision's error");
    assert_eq!(err, Error::InvalidParameterValue("no".to_owned()));
    let after = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    assert_eq!(after.version, before.version, "nothing written");
}

// --- Task::fail: the fail edge, last_error and the lock's release, in one write. ---

/// Takes `uuid` (available) into `deploying` under this conductor's lock, as a deploy's
/// acceptance does, and returns the task that holds it.
async fn deploying_task(app: &TestApp, uuid: &str) -> Task {
    let (node, task) = change_node(app.conductor(), uuid, None, None, |n| {
        Ok(Decision::Write(
            Move::of(n, Event::Deploy, "active")?.changes(true, NodeChanges::default()),
            Hold::Keep,
        ))
    })
    .await
    .expect("the deploy is accepted");
    assert_eq!(node.reservation.as_deref(), Some(app.host()));
    task.expect("the lock is kept for the work")
}

/// A failed deploy moves along the table's fail edge (deploying → deploy failed), records why,
/// and releases the lock, in one statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_fail_moves_along_the_fail_edge_sets_last_error_and_releases_the_lock() {
    let app = TestApp::start().await;
    let node = app.available_node(json!({"name": "f"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let task = deploying_task(&app, &uuid).await;
    let held = app.node("f").await;
    assert_eq!(held["provision_state"], "deploying");
    assert_eq!(held["reservation"], app.host());
    let version = db::nodes::get_by_uuid(app.db(), &uuid)
        .await
        .unwrap()
        .version;

    task.fail("it broke".to_owned(), NodeChanges::default(), true)
        .await;
    let node = app.node("f").await;
    assert_eq!(node["provision_state"], "deploy failed", "{node}");
    assert_eq!(node["target_provision_state"], "active", "{node}");
    assert_eq!(node["last_error"], "it broke", "{node}");
    assert_eq!(node["reservation"], json!(null), "{node}");
    let stored = db::nodes::get_by_uuid(app.db(), &uuid).await.unwrap();
    assert_eq!(stored.version, version + 1, "one statement");

    // Unlocked and in a failure state: the node takes requests again.
    app.accepted("f", "active").await;
    app.wait_for("f", "active").await;
}

/// Without the fail edge (a power change failed), or in a state that has none, the node stays
/// where it is; last_error is still set and the lock still released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_fail_without_a_fail_edge_keeps_the_state() {
    let app = TestApp::start().await;
    let node = app.available_node(json!({"name": "p"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let task = deploying_task(&app, &uuid).await;
    task.fail("power failed".to_owned(), NodeChanges::default(), false)
        .await;
    let node = app.node("p").await;
    assert_eq!(node["provision_state"], "deploying", "{node}");
    assert_eq!(node["last_error"], "power failed", "{node}");
    assert_eq!(node["reservation"], json!(null), "{node}");

    // `available` has no fail edge: fail_edge asks for one, the table has none.
    let uuid = app.available_node(json!({"name": "q"})).await["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, task) = change_node(app.conductor(), &uuid, None, None, |_| {
        note("held", Hold::Keep)
    })
    .await
    .unwrap();
    task.unwrap()
        .fail("no edge".to_owned(), NodeChanges::default(), true)
        .await;
    let node = app.node("q").await;
    assert_eq!(node["provision_state"], "available", "{node}");
    assert_eq!(node["last_error"], "no edge", "{node}");
    assert_eq!(node["reservation"], json!(null), "{node}");
}

// --- Fixes of what clients met within the announced range. ---

/// `node show --fields`: GET /v1/nodes/{id}?fields= shows only those fields (and links), with
/// the listing's checks (400 unknown, 406 too new or before 1.8).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_shows_only_the_fields_asked_for() {
    let app = TestApp::start().await;
    let node = app
        .create_node(json!({"name": "f1", "driver": "fake-hardware"}))
        .await;
    let r = app.get("/v1/nodes/f1?fields=uuid,name,conductor").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body,
        json!({"uuid": node["uuid"], "name": "f1", "conductor": app.host(), "links": node["links"]})
    );
    let r = app.get("/v1/nodes/f1?fields=uuid,colour").await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.fault().contains("Field colour is not a valid field."),
        "{}",
        r.fault()
    );
    let r = app
        .request_at("1.48", Method::GET, "/v1/nodes/f1?fields=conductor", None)
        .await;
    assert_eq!(r.status, 406, "{}", r.body);
    let r = app
        .request_at("1.7", Method::GET, "/v1/nodes/f1?fields=uuid", None)
        .await;
    assert_eq!(r.status, 406, "{}", r.body);
}

/// `conductor list --long` sends `detail=True`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conductor_listing_takes_detail_in_any_case() {
    let app = TestApp::start().await;
    for detail in ["True", "true", "1"] {
        let r = app.get(&format!("/v1/conductors?detail={detail}")).await;
        assert_eq!(r.status, 200, "detail={detail}: {}", r.body);
        assert!(
            r.body["conductors"][0].get("drivers").is_some(),
            "{}",
            r.body
        );
    }
    let r = app.get("/v1/conductors?detail=perhaps").await;
    assert_eq!(r.status, 400, "{}", r.body);
}

/// `"chassis_uuid": null` is accepted at create and by PATCH (Ironic's own test clients always
/// send it); a chassis that does not exist is a 400 naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_null_chassis_is_accepted_and_a_missing_chassis_is_refused() {
    let app = TestApp::start().await;
    let r = app
        .request(
            Method::POST,
            "/v1/nodes",
            Some(json!({"name": "c1", "driver": "fake-hardware", "chassis_uuid": null})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["chassis_uuid"], json!(null));
    let chassis = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123";
    let r = app
        .request(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "chassis_uuid": chassis})),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.fault()
            .contains(&format!("Chassis {chassis} could not be found")),
        "{}",
        r.fault()
    );
    let r = app
        .patch(
            "c1",
            json!([{"op": "replace", "path": "/chassis_uuid", "value": chassis}]),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = app
        .patch("c1", json!([{"op": "remove", "path": "/chassis_uuid"}]))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// A duplicate name's 409 names the name, at create and by PATCH.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_name_is_named_in_the_conflict() {
    let app = TestApp::start().await;
    app.create_node(json!({"name": "dup", "driver": "fake-hardware"}))
        .await;
    let r = app
        .request(
            Method::POST,
            "/v1/nodes",
            Some(json!({"name": "dup", "driver": "fake-hardware"})),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        r.fault().contains("A node with name dup already exists."),
        "{}",
        r.fault()
    );
    app.create_node(json!({"name": "other", "driver": "fake-hardware"}))
        .await;
    let r = app
        .patch(
            "other",
            json!([{"op": "replace", "path": "/name", "value": "dup"}]),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        r.fault().contains("A node with name dup already exists."),
        "{}",
        r.fault()
    );
}

/// PATCH `remove` of an interface (or setting it to null) puts the driver's default back, as
/// Ironic does, under the same state gate as any interface change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_an_interface_resets_it_to_the_drivers_default() {
    let app = TestApp::start().await;
    app.create_node(
        json!({"name": "i1", "driver": "fake-hardware", "console_interface": "no-console",
                           "rescue_interface": "no-rescue"}),
    )
    .await;
    let r = app
        .patch(
            "i1",
            json!([{"op": "remove", "path": "/console_interface"},
                            {"op": "replace", "path": "/rescue_interface", "value": null}]),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (&r.body["console_interface"], &r.body["rescue_interface"]),
        (&json!("fake"), &json!("fake"))
    );
    let r = app
        .patch("i1", json!([{"op": "remove", "path": "/deploy_interface"}]))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["deploy_interface"], "fake");
    let r = app
        .patch("i1", json!([{"op": "remove", "path": "/driver"}]))
        .await;
    assert_eq!(r.status, 400, "the driver is still mandatory: {}", r.body);

    // Not while deployed (outside maintenance), as for any interface change.
    let node = app
        .available_node(json!({"name": "i2", "driver": "fake-hardware",
                                          "console_interface": "no-console"}))
        .await;
    assert_eq!(node["console_interface"], "no-console");
    app.accepted("i2", "active").await;
    app.wait_for("i2", "active").await;
    let r = app
        .patch(
            "i2",
            json!([{"op": "remove", "path": "/console_interface"}]),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
}

/// A port of a node whose deploy holds its lock can be created (Ironic's shared lock), but not
/// changed, deleted or given a VIF (its exclusive lock): 409 NodeLocked, nothing written; once
/// the deploy ended they go through, and the deploy's own writes were not disturbed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_of_a_locked_node_are_created_but_not_changed() {
    let app = TestApp::builder().gate_deploys().start().await;
    let node = app.available_node(json!({"name": "busy-nic"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    app.accepted("busy-nic", "active").await;
    assert_eq!(app.gate().reached().await, uuid);

    let r = app
        .request(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": "52:54:00:0b:05:01"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let port = r.body["uuid"].as_str().unwrap().to_owned();
    let patch = json!([{"op": "add", "path": "/extra/x", "value": 1}]);
    let r = app
        .request(
            Method::PATCH,
            &format!("/v1/ports/{port}"),
            Some(patch.clone()),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.fault().contains("is locked by host"), "{}", r.fault());
    let r = app
        .request(
            Method::POST,
            "/v1/nodes/busy-nic/vifs",
            Some(json!({"id": "v1"})),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    let r = app
        .request(Method::DELETE, &format!("/v1/ports/{port}"), None)
        .await;
    assert_eq!(r.status, 409, "{}", r.body);

    app.gate().release(1);
    app.wait_for("busy-nic", "active").await;
    let r = app.get(&format!("/v1/ports/{port}")).await;
    assert_eq!(
        r.body["extra"],
        json!({}),
        "the refused PATCH changed nothing"
    );
    let r = app
        .request(Method::PATCH, &format!("/v1/ports/{port}"), Some(patch))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // Connectivity of an active node's port needs maintenance, as in Ironic.
    let r = app
        .request(
            Method::PATCH,
            &format!("/v1/ports/{port}"),
            Some(json!([{"op": "replace", "path": "/pxe_enabled", "value": false}])),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        r.fault().contains("connectivity attributes"),
        "{}",
        r.fault()
    );
    let r = app
        .request(
            Method::PATCH,
            &format!("/v1/ports/{port}"),
            Some(json!([{"op": "replace", "path": "/address", "value": "52:54:00:0b:05:02"}])),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.fault().contains("is active"), "{}", r.fault());
}

/// Listings of ports page with `next` links that keep their filter and shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_listings_page_with_next_links() {
    let app = TestApp::start().await;
    let node = app
        .create_node(json!({"name": "pager", "driver": "fake-hardware"}))
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    for i in 1..=3 {
        let r = app
            .request(
                Method::POST,
                "/v1/ports",
                Some(json!({"node_uuid": uuid, "address": format!("52:54:00:0c:00:0{i}")})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let mut path = format!("/v1/ports?node={uuid}&limit=2&fields=address&sort_key=address");
    let mut seen = Vec::new();
    loop {
        let r = app.get(&path).await;
        assert_eq!(r.status, 200, "{}", r.body);
        for p in r.body["ports"].as_array().unwrap() {
            seen.push(p["address"].as_str().unwrap().to_owned());
        }
        let Some(next) = r.body["next"].as_str() else {
            break;
        };
        assert!(next.contains(&format!("node={uuid}")), "{next}");
        assert!(next.contains("fields=address"), "{next}");
        path = next.trim_start_matches("http://localhost").to_owned();
        path = path[path.find("/v1/").unwrap()..].to_owned();
    }
    assert_eq!(
        seen,
        [
            "52:54:00:0c:00:01",
            "52:54:00:0c:00:02",
            "52:54:00:0c:00:03"
        ]
    );
    let r = app.get(&format!("/v1/nodes/{uuid}/ports?limit=1")).await;
    let next = r.body["next"].as_str().unwrap();
    assert!(next.contains(&format!("/v1/nodes/{uuid}/ports?")), "{next}");
}

/// A deploy shows the steps it decided on while it runs (`driver_internal_info.deploy_steps`),
/// and a deploy template that disables the core step (priority 0) makes a deploy that never
/// calls the driver's deploy (the gate is never reached): with no step left it fails, as
/// Ironic fails a deploy without steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_templates_decide_the_steps_a_deploy_runs() {
    let app = TestApp::builder().gate_deploys().start().await;
    app.available_node(json!({"name": "t1"})).await;
    app.accepted("t1", "active").await;
    app.gate().reached().await;
    let node = app.node("t1").await;
    assert_eq!(
        node["driver_internal_info"]["deploy_steps"],
        json!([{"interface": "deploy", "step": "deploy", "args": {}, "priority": 100}]),
        "{node}"
    );
    app.gate().release(1);
    app.wait_for("t1", "active").await;

    let r = app
        .request_at(
            "1.55",
            Method::POST,
            "/v1/deploy_templates",
            Some(json!({"name": "CUSTOM_NO_IMAGE", "steps": [
                {"interface": "deploy", "step": "deploy", "args": {}, "priority": 0}]})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let node = app
        .available_node(json!({"name": "t2", "instance_info": {"traits": ["CUSTOM_NO_IMAGE"]}}))
        .await;
    app.accepted("t2", "active").await;
    let node_after = app.wait_for("t2", "deploy failed").await;
    assert_eq!(
        node_after["last_error"], "No deploy steps returned by the driver",
        "{node_after}"
    );
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(300), app.gate().reached())
            .await
            .is_err(),
        "the disabled core step did not run for {}",
        node["uuid"]
    );
}
