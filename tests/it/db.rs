//! Database connections: a query abandoned halfway (its caller gave up) must not leave its reply
//! for the next user of the connection.

use std::time::Duration;

use serde_json::json;

use crate::util::{Cluster, ClusterOptions, on_both_stacks};
use ferrum::db::{self, Db};

on_both_stacks! {
/// With one pooled connection, every read abandoned after sending its query is followed by a
/// read that gets its own row, never the abandoned one's reply or a protocol error.
async fn an_abandoned_query_does_not_poison_the_connection(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions { stack, ..ClusterOptions::default() }).await
    else {
        return;
    };
    let a = cluster.api.create_node(json!({"driver": "fake-hardware", "name": "a"})).await;
    let b = cluster.api.create_node(json!({"driver": "fake-hardware", "name": "b"})).await;
    let (a, b) = (a["uuid"].as_str().unwrap(), b["uuid"].as_str().unwrap());
    let pool = Db::connect(&cluster.db.url, 1).unwrap();
    let mut abandoned = 0;
    for _ in 0..200 {
        // Polled once: the query goes out, then the caller drops it before the reply.
        if tokio::time::timeout(Duration::from_micros(1), db::nodes::get_by_uuid(&pool, a))
            .await
            .is_err()
        {
            abandoned += 1;
        }
        let node = db::nodes::get_by_uuid(&pool, b).await.expect("the next read works");
        assert_eq!(node.uuid, b, "read another query's reply");
    }
    // SQLite runs a statement inline, so there is no halfway to abandon it at.
    if stack == crate::util::Stack::MultiHost {
        assert!(abandoned > 0, "no read was abandoned: the test proved nothing");
    }
}
}

/// A database URL naming several hosts (a Galera cluster's) whose first refuses connections:
/// the pool connects to the next, and every statement works there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_url_whose_first_host_is_down_connects_to_the_next() {
    let Some(server) = crate::util::services::mysql_url() else {
        return;
    };
    let test_db = crate::util::TestDb::on_server(&server).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    // `mysql://root@127.0.0.1:3306/ferrum_t_…` → `mysql://root@127.0.0.1:<closed>,127.0.0.1:3306/…`
    let (userinfo_and_host, database) = test_db.url.rsplit_once('/').expect("database");
    let (userinfo, host) = userinfo_and_host.rsplit_once('@').expect("userinfo");
    let url = format!("{userinfo}@127.0.0.1:{closed},{host}/{database}");
    let pool = Db::connect(&url, 2).expect("pool");
    let node = db::nodes::insert(&pool, &crate::util::fake_hardware_row())
        .await
        .expect("a write through the second host");
    let read = db::nodes::get_by_uuid(&test_db.db, &node.uuid)
        .await
        .expect("read back directly");
    assert_eq!(read.uuid, node.uuid);
}

#[derive(diesel::QueryableByName)]
struct ProcessId {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    id: i64,
}

/// Every idle connection of a pool killed at once (the database server restarted, a Galera node
/// killed): the next read is answered on a new connection, not failed after spending its few
/// retries on the dead ones, which the first lost connection drops from the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_after_every_pooled_connection_was_killed_is_answered() {
    use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
    let Some(server) = crate::util::services::mysql_url() else {
        return;
    };
    let test_db = crate::util::TestDb::on_server(&server).await;
    let pool = Db::connect(&test_db.url, 16).expect("pool");
    let node = db::nodes::insert(&pool, &crate::util::fake_hardware_row())
        .await
        .expect("insert");
    // Reads at once until the pool holds more idle connections than a read has attempts.
    for _ in 0..50 {
        let reads = (0..64).map(|_| db::nodes::get_by_uuid(&pool, &node.uuid));
        for read in futures::future::join_all(reads).await {
            read.expect("read");
        }
        if pool.pool_status().idle >= 8 {
            break;
        }
    }
    let idle = pool.pool_status().idle;
    assert!(
        idle >= 8,
        "only {idle} idle connections: the test would prove nothing"
    );

    let database = test_db.url.rsplit('/').next().expect("database name");
    let mut admin = AsyncMysqlConnection::establish(&format!("{server}/mysql"))
        .await
        .expect("admin connection");
    let ids: Vec<ProcessId> = diesel::sql_query(format!(
        "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = '{database}'"
    ))
    .load(&mut admin)
    .await
    .expect("the pool's connections");
    assert!(
        ids.len() >= idle,
        "{} of {idle} connections seen",
        ids.len()
    );
    for ProcessId { id } in ids {
        diesel::sql_query(format!("KILL CONNECTION {id}"))
            .execute(&mut admin)
            .await
            .expect("kill");
    }

    let read = db::nodes::get_by_uuid(&pool, &node.uuid)
        .await
        .expect("a read after the connections died");
    assert_eq!(read.uuid, node.uuid);
}
