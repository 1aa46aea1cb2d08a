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

/// A password with a `,`, `@`, `/` and `?` (a user made for the test on the shared server)
/// works in a URL of several hosts once percent-encoded as in any URL; left raw, its `,` would
/// cut the host list in its middle, and Ferrum refuses such a URL without showing its parts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_with_url_delimiters_works_percent_encoded() {
    let Some(server) = crate::util::services::mysql_url() else {
        return;
    };
    let test_db = crate::util::TestDb::on_server(&server).await;
    let (root_and_host, database) = test_db.url.rsplit_once('/').expect("database");
    let (_, host) = root_and_host.rsplit_once('@').expect("userinfo");
    let user = format!("ferrum_pw_{}", crate::util::services::random_suffix());
    let password = "a,b@c/d?e";
    let made = Account::make(&server, &user, password, database).await;
    let encoded = "a%2Cb%40c%2Fd%3Fe";
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("mysql://{user}:{encoded}@127.0.0.1:{closed},{host}/{database}");
    let pool = Db::connect(&url, 1).expect("pool");
    db::nodes::insert(&pool, &crate::util::fake_hardware_row())
        .await
        .expect("a write as the user, through the second host");

    let raw = format!("mysql://{user}:{password}@127.0.0.1:{closed},{host}/{database}");
    let err = Db::connect(&raw, 1).err().expect("refused").to_string();
    assert!(err.contains("percent-encoded"), "{err}");
    assert!(!err.contains("b@c") && !err.contains("d?e"), "{err}");
    made.drop_user().await;
}

/// A MySQL account made for a test, on the test database only (left behind only by a failed
/// run: its name is the run's own).
struct Account {
    server: String,
    user: String,
}

impl Account {
    async fn make(server: &str, user: &str, password: &str, database: &str) -> Account {
        let account = Account {
            server: server.to_owned(),
            user: user.to_owned(),
        };
        account
            .run(&format!(
                "CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'; \
                 GRANT ALL ON `{database}`.* TO '{user}'@'%'"
            ))
            .await;
        account
    }

    async fn drop_user(self) {
        self.run(&format!("DROP USER '{}'@'%'", self.user)).await;
    }

    async fn run(&self, statements: &str) {
        use diesel_async::{AsyncConnection as _, SimpleAsyncConnection as _};
        let mut admin =
            diesel_async::AsyncMysqlConnection::establish(&format!("{}/mysql", self.server))
                .await
                .expect("an admin connection");
        admin.batch_execute(statements).await.expect(statements);
    }
}

on_both_stacks! {
/// The take-over checks find exactly what a dead conductor left: the nodes locked by a host not
/// among the living (not those of a living one, nor unlocked ones), and the allocations still
/// being allocated by such a host or by none (not a living host's, nor a finished one).
async fn the_take_over_checks_find_what_dead_hosts_left_and_nothing_else(stack) {
    use crate::util::{TestDb, fake_hardware_row};
    let Some(test_db) = TestDb::new(stack).await else {
        return;
    };
    let db = &test_db.db;
    let mut uuids = Vec::new();
    for host in ["alive", "dead", "", "dead-too"] {
        let node = db::nodes::insert(db, &fake_hardware_row()).await.unwrap();
        if !host.is_empty() {
            assert!(db::nodes::reserve(db, &node.uuid, host, None).await.unwrap());
        }
        uuids.push(node.uuid);
    }
    let alive = vec!["alive".to_owned(), "other".to_owned()];
    let mut orphans: Vec<(String, Option<String>)> = db::nodes::locked_by_others(db, &alive)
        .await
        .unwrap()
        .into_iter()
        .map(|n| (n.uuid, n.reservation))
        .collect();
    orphans.sort();
    let mut expected = vec![
        (uuids[1].clone(), Some("dead".to_owned())),
        (uuids[3].clone(), Some("dead-too".to_owned())),
    ];
    expected.sort();
    assert_eq!(orphans, expected);
    assert_eq!(db::nodes::locked_by_others(db, &["alive".into(), "dead".into(), "dead-too".into()]).await.unwrap().len(), 0);

    let mut made = Vec::new();
    for host in [Some("alive"), Some("dead"), None] {
        let mut a = ferrum::allocation::from_create(json!({"resource_class": "rc"}).as_object().cloned().unwrap()).unwrap();
        a.conductor_affinity = host.map(str::to_owned);
        made.push(db::allocations::insert(db, &a).await.unwrap().uuid);
    }
    let mut finished = ferrum::allocation::from_create(json!({"resource_class": "rc"}).as_object().cloned().unwrap()).unwrap();
    finished.conductor_affinity = Some("dead".to_owned());
    finished.state = ferrum::allocation::ACTIVE.to_owned();
    db::allocations::insert(db, &finished).await.unwrap();
    let orphaned: Vec<String> = db::allocations::orphaned(db, &alive)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.uuid)
        .collect();
    assert_eq!(orphaned, made[1..], "oldest first");
}
}
