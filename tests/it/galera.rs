//! Ferrum's database on a three-node MariaDB Galera cluster (issue 28), started by
//! `tests/peers/clusters.sh galera` for each test. Galera certifies a transaction only at
//! commit, optimistically, across nodes: of two conflicting writes on two nodes, the second to
//! commit fails as a deadlock (1213), which Ferrum runs again.

use std::time::{Duration, Instant};

use ferrum::db::{self, Db};

use crate::util::{TestDb, clusters::GaleraCluster, fake_hardware_row};

/// Two conductors, each on its own Galera node, race for the lock of one node, round after
/// round: never do both get it, and the one that does holds it on every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_conductors_on_two_galera_nodes_never_both_get_a_node_lock() {
    const ROUNDS: usize = 200;
    let Some(galera) = GaleraCluster::start(3).await else {
        return;
    };
    // The database, made and migrated through node 1, and a pool on node 2 beside it.
    let on_first = TestDb::on_server(galera.url(0)).await;
    let name = on_first.url.rsplit('/').next().expect("database name");
    let on_second = Db::connect(&format!("{}/{name}", galera.url(1)), 4).expect("pool on node 2");
    let node = db::nodes::insert(&on_first.db, &fake_hardware_row())
        .await
        .expect("insert a node");
    // The pool on node 2 is on one host, so its reads are not causal (`wsrep_sync_wait` is set
    // only for a URL of several hosts): wait until node 2 has applied the schema and the node.
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(e) = db::nodes::get_by_uuid(&on_second, &node.uuid).await {
        assert!(
            Instant::now() < deadline,
            "node 2 never showed the node: {e:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (mut first_won, mut second_won, mut neither) = (0, 0, 0);
    for round in 0..ROUNDS {
        // Each round the other one asks first.
        let first = db::nodes::reserve(&on_first.db, &node.uuid, "c-a", None);
        let second = db::nodes::reserve(&on_second, &node.uuid, "c-b", None);
        let (a, b) = if round % 2 == 0 {
            tokio::join!(first, second)
        } else {
            let (b, a) = tokio::join!(second, first);
            (a, b)
        };
        let (a, b) = (
            a.unwrap_or_else(|e| panic!("round {round}, node 1: {e:?}")),
            b.unwrap_or_else(|e| panic!("round {round}, node 2: {e:?}")),
        );
        assert!(!(a && b), "round {round}: both conductors got the lock");
        let (winner, host) = match (a, b) {
            (true, false) => (&on_first.db, "c-a"),
            (false, true) => (&on_second, "c-b"),
            _ => {
                neither += 1;
                continue;
            }
        };
        if a {
            first_won += 1;
        } else {
            second_won += 1;
        }
        // Every node comes to show the winner's lock: at once on its own node, soon on the
        // loser's (Galera applies a certified write on the other nodes asynchronously: a read
        // there may still show the lock of the round before).
        let loser = if a { &on_second } else { &on_first.db };
        for (db, limit) in [(winner, Duration::ZERO), (loser, Duration::from_secs(2))] {
            let deadline = Instant::now() + limit;
            loop {
                let seen = db::nodes::get_by_uuid(db, &node.uuid)
                    .await
                    .expect("read the node");
                if seen.reservation.as_deref() == Some(host) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "round {round}: a node shows the lock of {:?}, not of {host}",
                    seen.reservation
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        assert!(
            db::nodes::unreserve(winner, &node.uuid, host)
                .await
                .expect("unreserve"),
            "round {round}: the winner could not release its lock"
        );
    }
    // The optimistic path was taken: writes that lost at certification, or were aborted by a
    // certified write applied over them.
    let conflicts: u64 = (0..2)
        .flat_map(|i| {
            ["wsrep_local_cert_failures", "wsrep_local_bf_aborts"]
                .map(|v| galera.status(i, v).parse::<u64>().unwrap_or(0))
        })
        .sum();
    eprintln!(
        "GALERA lock race: {ROUNDS} rounds, node 1 won {first_won}, node 2 won {second_won}, \
         neither {neither}; {conflicts} certification conflicts (cluster up in {:.1}s)",
        galera.first_start.as_secs_f64()
    );
    assert_eq!(neither, 0, "rounds in which nobody got the lock");
    assert!(
        conflicts > 0,
        "the race never met a certification conflict: it proved nothing"
    );
}
