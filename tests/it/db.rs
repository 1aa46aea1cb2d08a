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

/// A free port on loopback that nothing listens on (yet).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A test database's URL split around its host: (`mysql://user[:pass]`, `host:port`,
/// `database`).
fn url_parts(url: &str) -> (&str, &str, &str) {
    let (userinfo_and_host, database) = url.rsplit_once('/').expect("database");
    let (userinfo, host) = userinfo_and_host.rsplit_once('@').expect("userinfo");
    (userinfo, host, database)
}

/// A database that refuses connections for a moment (a server restarting, a Galera cluster
/// re-forming after losing a node): a statement waits for it and is carried out, a write too
/// (nothing had been sent), instead of failing at once (503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waits_for_a_database_that_refuses_connections_for_a_moment() {
    let Some(server) = crate::util::services::mysql_url() else {
        return;
    };
    let test_db = crate::util::TestDb::on_server(&server).await;
    let closed = closed_port();
    // `mysql://root@127.0.0.1:3306/ferrum_t_…` → `mysql://root@127.0.0.1:<closed>/…`, where a
    // proxy to the server listens only after a while.
    let (userinfo, host, database) = url_parts(&test_db.url);
    let (server_host, server_port) = host.rsplit_once(':').unwrap_or((host, "3306"));
    let (server_host, server_port) = (server_host.to_owned(), server_port.parse().expect("port"));
    let url = format!("{userinfo}@127.0.0.1:{closed}/{database}?prefer_socket=false");
    let pool = Db::connect(&url, 2).expect("pool");
    let refused_for = Duration::from_millis(1500);
    let proxy = tokio::spawn(async move {
        tokio::time::sleep(refused_for).await;
        crate::util::link_proxy::LinkProxy::start_at(closed, &server_host, server_port).await
    });
    let started = std::time::Instant::now();
    let node = db::nodes::insert(&pool, &crate::util::fake_hardware_row())
        .await
        .expect("the write, once the server takes connections");
    assert!(
        started.elapsed() >= refused_for,
        "the server was there from the start"
    );
    let read = db::nodes::get_by_uuid(&test_db.db, &node.uuid)
        .await
        .expect("read back directly");
    assert_eq!(read.uuid, node.uuid);
    drop(proxy.await.expect("proxy"));
}

/// A database URL naming several hosts (a Galera cluster's) whose first refuses connections:
/// the pool connects to the next, and every statement works there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_url_whose_first_host_is_down_connects_to_the_next() {
    let Some(server) = crate::util::services::mysql_url() else {
        return;
    };
    let test_db = crate::util::TestDb::on_server(&server).await;
    let closed = closed_port();
    // `mysql://root@127.0.0.1:3306/ferrum_t_…` → `mysql://root@127.0.0.1:<closed>,127.0.0.1:3306/…`
    let (userinfo, host, database) = url_parts(&test_db.url);
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
