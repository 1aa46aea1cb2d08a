//! Deadlines hold (issue 25): a change is never applied after the deadline its caller gave up at,
//! also when its write waited on a row another client held (`SELECT ... FOR UPDATE` on
//! MariaDB, the write lock on SQLite). So a 503 for a timed-out call means "not applied".

use std::time::Duration;

use diesel::{Connection as _, SqliteConnection, connection::SimpleConnection as _};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use reqwest::StatusCode;
use serde_json::json;
use tokio::time::Instant;

use crate::util::{
    Cluster, ClusterOptions, Stack, TestDb, fake_hardware_row, mysql_template::migrated,
    on_both_stacks,
};
use ferrum::{
    db::{self, Db},
    node::{Json, NodeChanges},
};

/// Another client of the database holding a node's row: a transaction that read it `FOR
/// UPDATE` (MariaDB), or that holds SQLite's write lock (`BEGIN IMMEDIATE`).
enum RowHolder {
    Mysql(AsyncMysqlConnection),
    Sqlite(SqliteConnection),
}

impl RowHolder {
    async fn hold(url: &str, node_id: i32) -> RowHolder {
        match url.strip_prefix("sqlite://") {
            Some(path) => {
                let mut conn = SqliteConnection::establish(path).expect("open the SQLite file");
                conn.batch_execute("BEGIN IMMEDIATE")
                    .expect("take the write lock");
                RowHolder::Sqlite(conn)
            }
            None => {
                let mut conn = AsyncMysqlConnection::establish(url).await.expect("connect");
                conn.batch_execute("BEGIN").await.expect("begin");
                diesel::sql_query(format!(
                    "SELECT id FROM nodes WHERE id = {node_id} FOR UPDATE"
                ))
                .execute(&mut conn)
                .await
                .expect("lock the row");
                RowHolder::Mysql(conn)
            }
        }
    }

    /// Waits until another session waits for the row (MariaDB; SQLite shows no waiters, so
    /// there the caller knows its writer started otherwise).
    async fn wait_for_a_waiter<T>(&mut self, writer: &tokio::task::JoinHandle<T>) {
        let RowHolder::Mysql(conn) = self else {
            return;
        };
        #[derive(diesel::QueryableByName)]
        struct Waiting {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        // A statement waiting for a row lock shows as `Updating` (MariaDB lists its transaction
        // in INNODB_TRX as a lock wait only some of the time).
        let query = "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST p \
             LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID \
             WHERE p.DB = DATABASE() AND p.ID <> CONNECTION_ID() \
             AND (p.STATE = 'Updating' OR t.trx_state = 'LOCK WAIT')";
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            let waiting: Vec<Waiting> = diesel::sql_query(query).load(conn).await.expect("query");
            if waiting.iter().any(|w| w.n > 0) {
                return;
            }
            assert!(
                !writer.is_finished(),
                "the writer ended without waiting for the row"
            );
            assert!(
                Instant::now() < give_up,
                "no session came to wait for the row"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn release(self) {
        match self {
            RowHolder::Mysql(mut conn) => conn.batch_execute("COMMIT").await.expect("commit"),
            RowHolder::Sqlite(mut conn) => conn.batch_execute("COMMIT").expect("commit"),
        }
    }
}

fn tagged() -> NodeChanges {
    NodeChanges {
        extra: Some(Json(
            json!({"tag": 1}).as_object().cloned().expect("an object"),
        )),
        ..NodeChanges::default()
    }
}

/// Runs `write` (given its deadline, `time_left` from when the row is held) while another client
/// holds the node's row, and lets the row go only once `write` waits for it and, with
/// `past_deadline`, once its deadline passed. The write runs on a thread of its own: an SQLite
/// statement blocks the thread it runs on.
async fn write_while_held<T, F>(
    test_db: &TestDb,
    node_id: i32,
    time_left: Duration,
    past_deadline: bool,
    write: impl FnOnce(Db, Option<Instant>) -> F,
) -> T
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let mut holder = RowHolder::hold(&test_db.url, node_id).await;
    let deadline = Instant::now() + time_left;
    let write = write(test_db.db.clone(), Some(deadline));
    let (started, started_rx) = tokio::sync::oneshot::channel();
    let handle = tokio::runtime::Handle::current();
    let written = tokio::task::spawn_blocking(move || {
        let _ = started.send(());
        handle.block_on(write)
    });
    started_rx.await.expect("the writer started");
    holder.wait_for_a_waiter(&written).await;
    if past_deadline {
        tokio::time::sleep_until(deadline + Duration::from_millis(200)).await;
    }
    holder.release().await;
    written.await.expect("the writer")
}

on_both_stacks! {
/// The deadline is a predicate of the conditional write that the database evaluates after the
/// row lock is granted (MariaDB: `SYSDATE(6)` against `NOW(6)` plus the time left; SQLite:
/// `unixepoch('subsec')` read after the write lock is won): a write, a delete, a lock or a
/// change of the node's children that waited past its deadline changes nothing, and the same
/// write with time left lands once the row is let go.
async fn a_write_that_waits_past_its_deadline_changes_nothing(stack) {
    let Some(test_db) = migrated(stack).await else {
        return;
    };
    let db = &test_db.db;
    let node = db::nodes::insert(db, &fake_hardware_row()).await.unwrap();
    let soon = Duration::from_millis(1500);

    let n = node.clone();
    let written = write_while_held(&test_db, node.id, soon, true, |db, deadline| async move {
        db::nodes::update_unlocked(&db, n.id, n.version, ("t", n.provision_state), tagged(), deadline)
            .await
    })
    .await;
    assert!(!written.unwrap(), "a write past its deadline landed");

    let n = node.clone();
    let won = write_while_held(&test_db, node.id, soon, true, |db, deadline| async move {
        db::nodes::reserve(&db, &n.uuid, "late", deadline).await
    })
    .await;
    assert!(!won.unwrap(), "a lock past its deadline was taken");

    let n = node.clone();
    let children = write_while_held(&test_db, node.id, soon, true, |db, deadline| async move {
        db::children::change_children(&db, n.id, &n.uuid, n.version, deadline, |_| Ok(vec![]))
            .await
    })
    .await;
    assert!(children.unwrap().is_none(), "a change of children past its deadline landed");

    let n = node.clone();
    let deleted = write_while_held(&test_db, node.id, soon, true, |db, deadline| async move {
        db::nodes::delete_unlocked(&db, n.id, n.version, deadline).await
    })
    .await;
    assert!(!deleted.unwrap(), "a delete past its deadline landed");

    let unchanged = db::nodes::get_by_uuid(db, &node.uuid).await.unwrap();
    assert_eq!(unchanged.version, node.version);
    assert_eq!(unchanged.reservation, None);
    assert_eq!(unchanged.extra, node.extra);

    // With time left, the same write waits for the row and lands.
    let later = Duration::from_secs(30);
    let n = node.clone();
    let written = write_while_held(&test_db, node.id, later, false, |db, deadline| async move {
        db::nodes::update_unlocked(&db, n.id, n.version, ("t", n.provision_state), tagged(), deadline)
            .await
    })
    .await;
    assert!(written.unwrap(), "a write in time did not land");
    let tagged = db::nodes::get_by_uuid(db, &node.uuid).await.unwrap();
    assert_eq!(tagged.extra["tag"], 1);
}
}

/// How often the conductor said it abandoned a change at its deadline.
fn abandoned(cluster: &Cluster) -> usize {
    cluster
        .log_of(&cluster.conductor_process(0))
        .matches("nothing was changed")
        .count()
}

on_both_stacks! {
/// Issue 25's defect: a PATCH, then a deploy, on a node whose row another client holds for
/// longer than the RPC timeout get 503 at about the timeout, and once the row is let go the node
/// is as it was and unlocked (before the fix, the conductor's write waited for the row and
/// landed after the 503). Requests after that work.
async fn a_change_that_timed_out_on_a_held_row_is_not_applied(stack) {
    let timeout = Duration::from_secs(3);
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        conductors: 1,
        rpc_timeout: timeout.as_secs_f64(),
        // The all-in-one cannot renew its lease either while the SQLite file is held: let it
        // keep the lease through the holds.
        heartbeat_timeout: 30.0,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let node = api.available_node(json!({"name": "held"})).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let id = db::nodes::get_by_uuid(&cluster.db.db, &uuid).await.unwrap().id;

    let patch = json!([{"op": "add", "path": "/extra/late", "value": true}]);
    for what in ["patch", "deploy"] {
        let before = abandoned(&cluster);
        let holder = RowHolder::hold(&cluster.db.url, id).await;
        let asked = Instant::now();
        // Held past the caller's timeout, then let go.
        let release = tokio::spawn(async move {
            tokio::time::sleep_until(asked + timeout + Duration::from_secs(2)).await;
            holder.release().await;
        });
        let r = match what {
            "patch" => api.patch("held", patch.clone()).await,
            _ => api.provision("held", "active").await,
        };
        let answered = asked.elapsed();
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{what}: {}", r.body);
        // The all-in-one runs its SQLite statements on its runtime's threads, which all wait
        // for the file then: its answer comes when the file is let go.
        if stack == Stack::MultiHost {
            assert!(
                answered < timeout + Duration::from_secs(1),
                "{what} answered after {answered:?}"
            );
        }
        release.await.unwrap();

        // The conductor's write ends once it gets the row: either it abandons the change (and
        // says so) or, without the fix, it lands.
        let give_up = Instant::now() + Duration::from_secs(15);
        let node = loop {
            let node = api.node("held").await;
            let landed = !node["extra"]["late"].is_null() || node["provision_state"] != "available";
            if landed || abandoned(&cluster) > before {
                break node;
            }
            assert!(Instant::now() < give_up, "{what}: the conductor's write never ended");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(node["extra"]["late"].is_null(), "{what}: the timed-out PATCH landed: {node}");
        assert_eq!(node["provision_state"], "available", "{what}: the timed-out deploy started: {node}");
        assert!(node["reservation"].is_null(), "{what}: left locked: {node}");
    }

    // Requests after it work.
    let r = api.patch("held", patch).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["extra"]["late"], true);
    api.accepted("held", "active").await;
    api.wait_for("held", "active").await;
    cluster.assert_no_locks().await;
}
}
