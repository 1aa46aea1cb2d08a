//! The node lock: conflicts are 409 NodeLocked, decided under the lock; the lock is enforced on
//! every write; a full worker pool is 503 with the node untouched.

use reqwest::StatusCode;
use serde_json::json;

use crate::util::{
    Cluster, ClusterOptions, fake_hardware_row, mysql_template::migrated, on_both_stacks,
};
use ferrum::{
    db,
    error::Error,
    node::{Json, NodeChanges},
    states::ProvisionState,
};

on_both_stacks! {
async fn requests_on_a_locked_node_get_409_node_locked(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        ..ClusterOptions::default()
    }).await else {
        return;
    };
    let api = &cluster.api;
    let node = api
        .available_node(json!({"name": "busy", "driver_info": {"fake_deploy_delay": 3}}))
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted("busy", "active").await;
    let owner = cluster.owner_of(&uuid);

    let r = api
        .patch(
            "busy",
            json!([{"op": "add", "path": "/extra/x", "value": 1}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(
        r.fault(),
        format!(
            "Node {uuid} is locked by host {owner}, please retry after the current operation is completed."
        )
    );
    let r = api.provision("busy", "deleted").await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = api.power("busy", "power off").await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);

    let node = api.wait_for("busy", "active").await;
    assert_eq!(
        node["extra"],
        json!({}),
        "the refused PATCH changed nothing"
    );
    let r = api
        .patch(
            "busy",
            json!([{"op": "add", "path": "/extra/x", "value": 1}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// Ironic answers 409 or 400 for the same bad verb depending on whether the row its API read had a
/// reservation (`provision` in `ironic/api/controllers/v1/node.py`). Ferrum decides under the
/// lock: the conductor waits for the running deploy to release the node, then judges the verb
/// against the state it finds (active).
async fn an_invalid_verb_on_a_busy_node_is_judged_under_the_lock(stack) {
    let options = ClusterOptions {
        stack,
        lock_retry_attempts: 40,
        lock_retry_interval: 0.1,
        rpc_timeout: 10.0,
        ..ClusterOptions::default()
    };
    let Some(cluster) = Cluster::start(options).await else {
        return;
    };
    let api = &cluster.api;
    api.available_node(json!({"name": "judge", "driver_info": {"fake_deploy_delay": 1}}))
        .await;
    api.accepted("judge", "active").await;
    assert!(api.node("judge").await["reservation"].is_string());
    let r = api.provision("judge", "provide").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(
        r.fault().contains("\"active\""),
        "judged in the state after the lock: {}",
        r.fault()
    );
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// A call is not carried out after its caller stopped waiting: the conductor stops retrying the
/// lock at the caller's deadline and answers NodeLocked in time, instead of applying the change
/// seconds later when the deploy lets go of the node.
async fn a_call_that_timed_out_is_not_carried_out_later(stack) {
    let options = ClusterOptions {
        stack,
        lock_retry_attempts: 100,
        lock_retry_interval: 0.1,
        rpc_timeout: 1.0,
        ..ClusterOptions::default()
    };
    let Some(cluster) = Cluster::start(options).await else {
        return;
    };
    let api = &cluster.api;
    api.available_node(json!({"name": "late", "driver_info": {"fake_deploy_delay": 3}}))
        .await;
    api.accepted("late", "active").await;
    let started = std::time::Instant::now();
    let r = api
        .patch(
            "late",
            json!([{"op": "add", "path": "/extra/late", "value": true}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.fault().contains("is locked by host"), "{}", r.fault());
    assert!(started.elapsed() < std::time::Duration::from_millis(1500));
    let node = api.wait_for("late", "active").await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let node_after = api.node("late").await;
    assert_eq!(node["extra"], json!({}));
    assert_eq!(
        node_after["extra"],
        json!({}),
        "the abandoned PATCH never ran"
    );
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// Ironic's lock is advisory (`Node.save()` in `ironic/objects/node.py` ignores `reservation`). In
/// Ferrum a write by anyone but the holder changes nothing.
async fn writes_are_conditional_on_holding_the_lock_and_on_the_state(stack) {
    let Some(test_db) = migrated(stack).await else {
        return;
    };
    let db = &test_db.db;
    let row = fake_hardware_row();
    let node = db::nodes::insert(db, &row).await.unwrap();
    let deploying =
        NodeChanges::default().provision(ProvisionState::Deploying, Some(ProvisionState::Active));

    // Nobody holds the lock: no write goes through.
    let err = db::nodes::update_held(
        db,
        node.id,
        "c-a",
        ProvisionState::Available,
        node.version,
        deploying.clone(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::NodeLocked { .. }), "{err:?}");

    assert!(db::nodes::reserve(db, &node.uuid, "c-a", None).await.unwrap());
    assert!(
        !db::nodes::reserve(db, &node.uuid, "c-b", None).await.unwrap(),
        "one holder at a time"
    );

    // Another host cannot write, nor release.
    let err = db::nodes::update_held(
        db,
        node.id,
        "c-b",
        ProvisionState::Available,
        node.version,
        deploying.clone(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        Error::NodeLocked {
            node: node.uuid.clone(),
            host: "c-a".into()
        }
    );
    assert!(!db::nodes::release(db, node.id, "c-b", node.version).await.unwrap());

    // The holder with a stale view of the state cannot write either.
    let err = db::nodes::update_held(
        db,
        node.id,
        "c-a",
        ProvisionState::Manageable,
        node.version,
        deploying.clone(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err:?}");

    let unchanged = db::nodes::get_by_uuid(db, &node.uuid).await.unwrap();
    assert_eq!(unchanged.provision_state, ProvisionState::Available);

    // A write for nodes nobody holds is refused while the node is locked...
    let tag = NodeChanges {
        extra: Some(Json(json!({"tag": 1}).as_object().cloned().unwrap())),
        ..NodeChanges::default()
    };
    assert!(
        !db::nodes::update_unlocked(db, node.id, node.version, ("t", node.provision_state), tag.clone(), None)
            .await
            .unwrap()
    );

    // Nor can the holder's stale task: a write names the version it last saw.
    let err = db::nodes::update_held(
        db,
        node.id,
        "c-a",
        ProvisionState::Available,
        node.version - 1,
        deploying.clone(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err:?}");
    assert!(!db::nodes::release(db, node.id, "c-a", node.version - 1).await.unwrap());

    // The holder with the right state can, and may release in the same statement.
    db::nodes::update_held(
        db,
        node.id,
        "c-a",
        ProvisionState::Available,
        node.version,
        deploying.release(),
    )
    .await
    .unwrap();
    let moved = db::nodes::get_by_uuid(db, &node.uuid).await.unwrap();
    assert_eq!(moved.provision_state, ProvisionState::Deploying);
    assert_eq!(moved.target_provision_state, Some(ProvisionState::Active));
    assert_eq!(moved.reservation, None);

    // ...and refused when the row changed since it was read (a stale version), even unlocked.
    assert!(
        !db::nodes::update_unlocked(db, node.id, node.version, ("t", node.provision_state), tag.clone(), None)
            .await
            .unwrap()
    );
    assert!(
        db::nodes::update_unlocked(db, node.id, moved.version, ("t", moved.provision_state), tag, None)
            .await
            .unwrap()
    );
    let tagged = db::nodes::get_by_uuid(db, &node.uuid).await.unwrap();
    assert_eq!(tagged.extra["tag"], 1);
    assert_eq!(
        tagged.provision_state,
        ProvisionState::Deploying,
        "only extra changed"
    );
}
}

on_both_stacks! {
/// Concurrent PATCHes of one node: each one that succeeds is kept (none overwrites another with a
/// stale copy), and the ones that lose a race are told so.
async fn concurrent_patches_lose_no_update(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        ..ClusterOptions::default()
    }).await else {
        return;
    };
    let api = std::sync::Arc::new(crate::util::Api::new(cluster.api.base.clone()));
    api.available_node(json!({"name": "hot"})).await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            let r = api
                .patch(
                    "hot",
                    json!([{"op": "add", "path": format!("/extra/k{i}"), "value": i}]),
                )
                .await;
            (i, r.status)
        }));
    }
    let mut succeeded = Vec::new();
    for t in tasks {
        let (i, status) = t.await.unwrap();
        match status {
            StatusCode::OK => succeeded.push(i),
            StatusCode::CONFLICT => {}
            other => panic!("PATCH {i}: {other}"),
        }
    }
    assert!(!succeeded.is_empty());
    let extra = api.node("hot").await["extra"].clone();
    for i in &succeeded {
        assert_eq!(extra[format!("k{i}")], *i, "update {i} was lost: {extra}");
    }
    assert_eq!(extra.as_object().unwrap().len(), succeeded.len(), "{extra}");
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
async fn a_full_worker_pool_is_503_and_leaves_the_node_as_it_was(stack) {
    let options = ClusterOptions {
        stack,
        conductors: 1,
        workers: 1,
        ..ClusterOptions::default()
    };
    let Some(cluster) = Cluster::start(options).await else {
        return;
    };
    let api = &cluster.api;
    api.available_node(json!({"name": "first", "driver_info": {"fake_deploy_delay": 3}}))
        .await;
    api.available_node(json!({"name": "second"})).await;
    // Provisioning "second" ran cleaning on the only worker: wait until that slot is free.
    api.accepted_when_a_worker_is_free("first", "active").await;
    let r = api.provision("second", "active").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    assert_eq!(
        r.fault(),
        "Requested action cannot be performed due to lack of free conductor workers."
    );
    let node = api.node("second").await;
    assert_eq!(node["provision_state"], "available");
    assert_eq!(node["target_provision_state"], json!(null));
    assert_eq!(node["reservation"], json!(null));
    api.wait_for("first", "active").await;
    api.accepted_when_a_worker_is_free("second", "active").await;
    api.wait_for("second", "active").await;
    cluster.assert_no_locks().await;
}
}
