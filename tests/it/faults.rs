//! The fault suite (issue 7): on the multi-host form (an API and two conductors), under a load of
//! a few hundred fake deploys with a delay and PATCHes, one fault per scenario: MariaDB or
//! RabbitMQ killed and restarted (down 2 s and 20 s, each on a private instance of its own), a
//! conductor kill -9'd (restarted, and not), a conductor SIGTERMed with work in flight, the API
//! killed, two conductors started with one host name at the same instant.
//!
//! After the fault, within a recovery window counted from the service's return (or the
//! process's death), every request got an answer (or, while the API itself was dead, a
//! connection error, counted apart), no node is left in a transient state, no lock is held, no
//! deploy ran more often than it was accepted, no acknowledged PATCH is lost, and full service
//! (GET, PATCH and a deploy of a fresh node on each conductor) came back; the time to it is
//! measured. Each scenario prints one `FAULT <name>: ...` line (stderr and `fault-report.txt`
//! in the target directory) before it asserts.
//!
//! Each scenario has its own processes, queue prefix and private MariaDB (a private RabbitMQ too
//! where the broker is the fault; the shared one on 5672 otherwise), so they run in parallel and
//! no other test process can touch their database. Where a service or a server binary is
//! missing they say so and return (they fail under `FERRUM_REQUIRE_SERVICES=1`).
//!
//! The load (`util/load.rs`): 96 nodes, `fake_deploy_delay` 1.5 s, 16 clients, each deploying
//! its nodes one after the other, waiting for each to settle, then PATCHing a unique
//! `extra/<key>`; a client timeout of 15 s (no answer), and the retries of an Ironic client
//! (503, 409, no answer, connection errors) with backoff until the window closes. Around a
//! conductor's death or stop, 16 PATCHes more are kept in flight to that conductor.
//!
//! Until the product fixes of issue 7 land, most scenarios fail, each for the reason the issue
//! describes (the FAULT line says which figures).

use std::time::{Duration, Instant};

use ferrum::states::ProvisionState;

use crate::util::{
    Cluster, ClusterOptions, PrivateMariaDb, PrivateRabbit, Supervisor,
    clusters::{GaleraCluster, RabbitCluster},
    load::{FaultRun, LoadPlan, Verdict},
};

/// The recovery window: from the service's return (or the process's death) until the load must
/// have ended, full service be back and every node have settled.
const WINDOW: Duration = Duration::from_secs(30);

/// The processes' settings for the suite: a heartbeat timeout short enough that a dead
/// conductor's nodes are taken over within the window, and an RPC timeout longer than the
/// clients' 15 s, so that a call that waits for a dead peer shows as "no answer".
/// Around a conductor's death or stop, 16 PATCHes to its nodes are kept in flight for this long,
/// the fault coming at least `BURST_LEAD` into it, once the conductor runs a few deploys: calls
/// on their way to the conductor and work in its hands when it goes.
const BURST: Duration = Duration::from_secs(4);
const BURST_LEAD: Duration = Duration::from_millis(300);

fn options() -> ClusterOptions {
    ClusterOptions {
        conductors: 2,
        rpc_timeout: 30.0,
        heartbeat_timeout: 5.0,
        workers: 100,
        graceful_shutdown_timeout: 5.0,
        ..ClusterOptions::default()
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// Log text without the terminal colour codes.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... final byte in @..~
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn finish(verdict: &Verdict) {
    verdict.report();
    verdict.assert_clean();
}

async fn mariadb_down_for(name: &str, down: Duration) {
    let Some(mut mariadb) = PrivateMariaDb::start().await else {
        return;
    };
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        mysql_url: Some(mariadb.url()),
        // Longer than the outage: a conductor that cannot renew its lease for
        // `heartbeat_timeout - heartbeat_interval` stops its work and exits (its restart would
        // recover), which this scenario is not about.
        heartbeat_timeout: 40.0,
        ..options()
    })
    .await
    else {
        return;
    };
    let mut run = FaultRun::start(name, &cluster, LoadPlan::default()).await;
    run.note(format!(
        "private MariaDB on port {} started in {}",
        mariadb.port(),
        secs(mariadb.first_start)
    ));
    run.wait_in_flight(&cluster, None, 8).await;
    let killed = Instant::now();
    mariadb.kill();
    tokio::time::sleep(down).await;
    let boot = mariadb.start_again().await;
    let back = Instant::now();
    run.note(format!(
        "MariaDB SIGKILLed, started again after {}, answered {} later (down {})",
        secs(down),
        secs(boot),
        secs(back - killed)
    ));
    let verdict = run.finish(&mut cluster, back, WINDOW).await;
    finish(&verdict);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_killed_and_back_after_2s() {
    mariadb_down_for("mariadb_killed_2s", Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_killed_and_back_after_20s() {
    mariadb_down_for("mariadb_killed_20s", Duration::from_secs(20)).await;
}

async fn rabbitmq_down_for(name: &str, down: Duration) {
    let (Some(mariadb), Some(mut rabbit)) =
        tokio::join!(PrivateMariaDb::start(), PrivateRabbit::start())
    else {
        return;
    };
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        mysql_url: Some(mariadb.url()),
        amqp_url: Some(rabbit.url()),
        ..options()
    })
    .await
    else {
        return;
    };
    let mut run = FaultRun::start(name, &cluster, LoadPlan::default()).await;
    run.note(format!(
        "private RabbitMQ {} on port {} started in {}",
        rabbit.node_name(),
        rabbit.port(),
        secs(rabbit.first_start)
    ));
    run.wait_in_flight(&cluster, None, 8).await;
    let killed = Instant::now();
    rabbit.kill();
    tokio::time::sleep(down).await;
    let boot = rabbit.start_again().await;
    let back = Instant::now();
    run.note(format!(
        "RabbitMQ SIGKILLed, started again after {}, accepted AMQP {} later (down {})",
        secs(down),
        secs(boot),
        secs(back - killed)
    ));
    let verdict = run.finish(&mut cluster, back, WINDOW).await;
    finish(&verdict);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_killed_and_back_after_2s() {
    rabbitmq_down_for("rabbitmq_killed_2s", Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_killed_and_back_after_20s() {
    rabbitmq_down_for("rabbitmq_killed_20s", Duration::from_secs(20)).await;
}

/// The full service the cluster scenarios demand after a node's loss (issue 28).
const CLUSTER_RECOVERY: Duration = Duration::from_secs(5);

const SLOW: &str = "full service took longer than CLUSTER_RECOVERY (5 s) after a node's loss";

/// The API and two conductors on `options`' engines under a load of deploys, PATCHes and GETs
/// on twenty nodes a client (so that it runs through several losses and restarts), with
/// deploys in flight; `engines` says what was started, and in how long, in the report.
async fn cluster_under_load(
    name: &str,
    options: ClusterOptions,
    engines: String,
) -> Option<(Cluster, FaultRun)> {
    let cluster = Cluster::start(options).await?;
    let plan = LoadPlan {
        nodes: 320,
        ..LoadPlan::default()
    };
    let mut run = FaultRun::start(name, &cluster, plan).await;
    run.note(engines);
    run.wait_in_flight(&cluster, None, 8).await;
    Some((cluster, run))
}

/// The failures a cluster scenario found besides the suite's own, `what` before each list.
fn add_failures(verdict: &mut Verdict, found: &[(&str, &[String])]) {
    for (what, items) in found {
        if !items.is_empty() {
            verdict
                .extra_failures
                .push(format!("{what}: {}", items.join(", ")));
        }
    }
}

/// A three-node RabbitMQ cluster, every node in the transport URL, quorum queues: each node
/// kill -9'd in turn under the load (including those the processes are connected to: each is
/// connected to one), full service within [`CLUSTER_RECOVERY`] of each loss, the node started
/// again before the next; then the suite's verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_cluster_nodes_killed_in_turn() {
    let name = "rabbitmq_cluster_nodes_killed";
    let (Some(mariadb), Some(rabbits)) =
        tokio::join!(PrivateMariaDb::start(), RabbitCluster::start(3))
    else {
        return;
    };
    let options = ClusterOptions {
        mysql_url: Some(mariadb.url()),
        amqp_url: Some(rabbits.url().to_owned()),
        env: vec![("FERRUM_TRANSPORT_QUORUM_QUEUES", "true".to_owned())],
        ..options()
    };
    let engines = format!(
        "RabbitMQ cluster of 3 nodes up in {}",
        secs(rabbits.first_start)
    );
    let Some((mut cluster, mut run)) = cluster_under_load(name, options, engines).await else {
        return;
    };
    let mut slow = Vec::new();
    for i in 0..3 {
        let killed = Instant::now();
        rabbits.kill(i);
        let served = run
            .time_to_full_service(killed, Duration::from_secs(20))
            .await;
        let boot = rabbits.start_again(i).await;
        run.note(format!(
            "RabbitMQ node {} SIGKILLed: full service {} later; started again, in the cluster {} later",
            rabbits.node_name(i),
            served.map_or("never (20 s)".to_owned(), secs),
            secs(boot)
        ));
        if served.is_none_or(|t| t > CLUSTER_RECOVERY) {
            slow.push(format!("node {i}: {served:?}"));
        }
    }
    // The conductors' queues are quorum queues, replicated on every node.
    let prefix = cluster
        .env_var("FERRUM_TRANSPORT_PREFIX")
        .expect("prefix")
        .to_owned();
    let queues = rabbits.ctl(
        0,
        &[
            "list_queues",
            "--quiet",
            "--no-table-headers",
            "name",
            "type",
        ],
    );
    let conductor_queues: Vec<&str> = queues
        .lines()
        .filter(|line| line.starts_with(&format!("{prefix}.conductor.")))
        .collect();
    let mut verdict = run.finish(&mut cluster, Instant::now(), WINDOW).await;
    let mut not_quorum = Vec::new();
    if conductor_queues.len() != 2 || !conductor_queues.iter().all(|q| q.ends_with("quorum")) {
        not_quorum.push(format!("{conductor_queues:?}"));
    }
    add_failures(
        &mut verdict,
        &[
            (
                "the conductor queues are not two quorum queues",
                &not_quorum,
            ),
            (SLOW, &slow),
        ],
    );
    finish(&verdict);
}

/// A three-node Galera cluster with every node in the database URL, and the API and two
/// conductors on it under the suite's load ([`cluster_under_load`]), with their supervisor: when
/// every Galera node refuses commits for longer than the lease (the primary component re-forming
/// on a loaded machine has taken 12 s), the conductors stop and exit as designed, and a
/// supervisor starts them again; the scenario measures that recovery.
async fn galera_under_load(name: &str) -> Option<(GaleraCluster, Cluster, FaultRun, Supervisor)> {
    let galera = GaleraCluster::start(3).await?;
    let options = ClusterOptions {
        mysql_url: Some(galera.url_of_all()),
        // Galera stops every commit for ~2-3 s after a node dies (longer on this machine when
        // the other fault tests load it too): a conductor's lease must outlast that, as it must
        // in production (README), or its conductor stops its work. 10 s, not the suite's 5 s.
        heartbeat_timeout: 10.0,
        ..options()
    };
    let engines = format!(
        "Galera cluster of 3 nodes up in {}",
        secs(galera.first_start)
    );
    let (cluster, run) = cluster_under_load(name, options, engines).await?;
    let supervisor = Supervisor::new(&cluster);
    Some((galera, cluster, run, supervisor))
}

/// The nodes of `galera` (0-based) that commit transactions of their own clients over a second
/// of the load: the ones written to.
async fn written_to_now(galera: &GaleraCluster) -> Vec<usize> {
    let commits = |i: usize| {
        galera
            .status(i, "wsrep_local_commits")
            .parse::<u64>()
            .unwrap_or(0)
    };
    let before: Vec<u64> = (0..3).map(commits).collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    (0..3).filter(|&i| commits(i) > before[i]).collect()
}

/// A three-node Galera cluster, every node in the database URL: kill -9 of the node every
/// process writes to (they all connect to the first that serves, `db/hosts.rs`), three times in
/// turn, each started again before the next, then of a node nobody writes to; full service
/// within [`CLUSTER_RECOVERY`] of each loss; then the suite's verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn galera_cluster_nodes_killed_in_turn() {
    let Some((galera, mut cluster, mut run, mut supervisor)) =
        galera_under_load("galera_cluster_nodes_killed").await
    else {
        return;
    };
    let (mut slow, mut misplaced) = (Vec::new(), Vec::new());
    // 0, 1, 2: each the node written to when it is killed (the processes move on to the next
    // host); then 1, which nobody writes to any more.
    for (i, written_to) in [(0, true), (1, true), (2, true), (1, false)] {
        let written = supervisor
            .during(&mut cluster, written_to_now(&galera))
            .await;
        if written.contains(&i) != written_to {
            misplaced.push(format!(
                "node {} is {}written to",
                i + 1,
                if written_to { "not " } else { "" }
            ));
        }
        let killed = Instant::now();
        galera.kill(i);
        let served = supervisor
            .during(
                &mut cluster,
                run.time_to_full_service(killed, Duration::from_secs(20)),
            )
            .await;
        let boot = supervisor.during(&mut cluster, galera.start_again(i)).await;
        run.note(format!(
            "Galera node {} ({}) SIGKILLed: full service {} later; started again, Synced {} later",
            i + 1,
            if written_to { "written to" } else { "idle" },
            served.map_or("never (20 s)".to_owned(), secs),
            secs(boot)
        ));
        if served.is_none_or(|t| t > CLUSTER_RECOVERY) {
            slow.push(format!("node {}: {served:?}", i + 1));
        }
    }
    let mut verdict = run
        .finish_supervised(&mut cluster, Some(&mut supervisor), Instant::now(), WINDOW)
        .await;
    add_failures(
        &mut verdict,
        &[
            (
                "the processes do not write to one node at a time",
                &misplaced,
            ),
            (SLOW, &slow),
        ],
    );
    finish(&verdict);
}

/// A three-node Galera cluster, every node in the database URL: the node every process writes
/// to is cut off from the other two while it keeps running (`gmcast.isolate`, as a network
/// partition does: it answers its clients, out of the primary component, refusing their
/// statements), then let back in. Full service within [`CLUSTER_RECOVERY`] of the cut, the
/// processes on another node meanwhile; then the rejoin (Galera re-forms its primary component,
/// which stalls every commit for a few seconds on this machine), and the suite's verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn galera_node_written_to_partitioned_from_the_others() {
    let Some((galera, mut cluster, mut run, mut supervisor)) =
        galera_under_load("galera_node_partitioned").await
    else {
        return;
    };
    let written = supervisor
        .during(&mut cluster, written_to_now(&galera))
        .await;
    let mut misplaced = Vec::new();
    if written != [0] {
        misplaced.push(format!(
            "nodes written to: {written:?}, not the first alone"
        ));
    }
    let cut = Instant::now();
    galera.isolate(0, true);
    let served = supervisor
        .during(
            &mut cluster,
            run.time_to_full_service(cut, Duration::from_secs(20)),
        )
        .await;
    // The partition lasts a while under the load, the processes on the next node.
    let written = supervisor
        .during(&mut cluster, async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            written_to_now(&galera).await
        })
        .await;
    if written.len() != 1 || written[0] == 0 {
        misplaced.push(format!(
            "nodes written to while node 1 is cut off: {written:?}"
        ));
    }
    let healed = Instant::now();
    galera.isolate(0, false);
    let (whole, served_after) = supervisor
        .during(&mut cluster, async {
            let whole = galera.wait_whole(Duration::from_secs(60)).await;
            let served = run
                .time_to_full_service(healed, Duration::from_secs(30))
                .await;
            (whole, served)
        })
        .await;
    run.note(format!(
        "Galera node 1 (written to) cut off from the others: full service {} later; let back \
         in: the cluster whole {} later, full service {} after",
        served.map_or("never (20 s)".to_owned(), secs),
        whole.map_or("never (60 s)".to_owned(), secs),
        served_after.map_or("never (30 s)".to_owned(), secs),
    ));
    let mut slow = Vec::new();
    if served.is_none_or(|t| t > CLUSTER_RECOVERY) {
        slow.push(format!("node 1 cut off: {served:?}"));
    }
    let mut not_back = Vec::new();
    if whole.is_none() || served_after.is_none() {
        not_back.push(format!("whole {whole:?}, served {served_after:?}"));
    }
    let mut verdict = run
        .finish_supervised(&mut cluster, Some(&mut supervisor), Instant::now(), WINDOW)
        .await;
    add_failures(
        &mut verdict,
        &[
            (
                "the processes do not write to one node at a time",
                &misplaced,
            ),
            (SLOW, &slow),
            (
                "the cluster or full service did not come back after the partition",
                &not_back,
            ),
        ],
    );
    finish(&verdict);
}

async fn conductor_killed(name: &str, restart: bool) {
    let Some(mariadb) = PrivateMariaDb::start().await else {
        return;
    };
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        mysql_url: Some(mariadb.url()),
        ..options()
    })
    .await
    else {
        return;
    };
    let mut run = FaultRun::start(name, &cluster, LoadPlan::default()).await;
    let victim = cluster.conductor_hosts[0].clone();
    run.wait_in_flight(&cluster, Some(&victim), 1).await;
    run.rpc_burst(&cluster, &victim, 16, BURST);
    tokio::time::sleep(BURST_LEAD).await;
    let held = run.wait_in_flight(&cluster, Some(&victim), 4).await;
    cluster.kill("conductor0");
    let dead = Instant::now();
    let back = if restart {
        cluster.restart_conductor(0).await;
        run.note(format!(
            "conductor {victim} kill -9'd holding {} nodes, registered again {} later",
            held.len(),
            secs(dead.elapsed())
        ));
        Instant::now()
    } else {
        run.note(format!(
            "conductor {victim} kill -9'd holding {} nodes, not restarted",
            held.len()
        ));
        dead
    };
    let verdict = run.finish(&mut cluster, back, WINDOW).await;
    finish(&verdict);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conductor_killed_and_restarted() {
    conductor_killed("conductor_killed_restarted", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conductor_killed_and_not_restarted() {
    conductor_killed("conductor_killed_not_restarted", false).await;
}

/// SIGTERM with deploys in flight and a grace period long enough for them: they finish
/// (`active`, no last_error), the conductor exits cleanly, the other one serves the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conductor_terminated_with_work_in_flight() {
    let name = "conductor_sigterm_in_flight";
    let Some(mariadb) = PrivateMariaDb::start().await else {
        return;
    };
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        graceful_shutdown_timeout: 20.0,
        mysql_url: Some(mariadb.url()),
        ..options()
    })
    .await
    else {
        return;
    };
    let mut run = FaultRun::start(name, &cluster, LoadPlan::default()).await;
    let victim = cluster.conductor_hosts[0].clone();
    run.wait_in_flight(&cluster, Some(&victim), 1).await;
    run.rpc_burst(&cluster, &victim, 16, BURST);
    tokio::time::sleep(BURST_LEAD).await;
    let held = run.wait_in_flight(&cluster, Some(&victim), 5).await;
    let termed = Instant::now();
    cluster.signal_term("conductor0");
    let limit = termed + Duration::from_secs(40);
    let status = loop {
        if let Some(status) = cluster.exit_status("conductor0") {
            break Some(status);
        }
        if Instant::now() > limit {
            cluster.kill("conductor0");
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let gone = Instant::now();
    run.note(format!(
        "conductor {victim} SIGTERMed holding {} nodes, exited {} later: {status:?}",
        held.len(),
        secs(gone - termed)
    ));
    let mut verdict = run.finish(&mut cluster, gone, WINDOW).await;
    match status {
        Some(s) if s.success() => {}
        other => verdict.extra_failures.push(format!(
            "the draining conductor did not exit cleanly: {other:?}"
        )),
    }
    let unfinished: Vec<String> = held
        .iter()
        .filter_map(|uuid| {
            let node = verdict.node(uuid)?;
            let done = node.provision_state == ProvisionState::Active && node.last_error.is_none();
            (!done).then(|| {
                format!(
                    "{uuid} {} ({:?})",
                    node.provision_state,
                    node.last_error.as_deref().unwrap_or("")
                )
            })
        })
        .collect();
    if !unfinished.is_empty() {
        verdict.extra_failures.push(format!(
            "{} of the {} deploys in flight at SIGTERM did not finish active within the grace period: {}",
            unfinished.len(),
            held.len(),
            unfinished.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
        ));
    }
    finish(&verdict);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_killed_and_restarted() {
    let name = "api_killed_restarted";
    let Some(mariadb) = PrivateMariaDb::start().await else {
        return;
    };
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        mysql_url: Some(mariadb.url()),
        ..options()
    })
    .await
    else {
        return;
    };
    let mut run = FaultRun::start(name, &cluster, LoadPlan::default()).await;
    run.wait_in_flight(&cluster, None, 8).await;
    run.api_down(true);
    let killed = Instant::now();
    cluster.kill("api");
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.restart_api().await;
    run.api_down(false);
    let back = Instant::now();
    run.note(format!(
        "API kill -9'd, restarted after 1.0s, answering {} after the kill",
        secs(back - killed)
    ));
    let verdict = run.finish(&mut cluster, back, WINDOW).await;
    finish(&verdict);
}

/// Two conductors started with one host name at the same instant, three times under the load:
/// exactly one may serve, the other must exit with an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_conductors_with_one_host_name_started_together() {
    let name = "same_host_name_x3";
    let Some(mariadb) = PrivateMariaDb::start().await else {
        return;
    };
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        conductors: 1,
        mysql_url: Some(mariadb.url()),
        ..options()
    })
    .await
    else {
        return;
    };
    let mut run = FaultRun::start(name, &cluster, LoadPlan::default()).await;
    run.wait_in_flight(&cluster, None, 4).await;
    let suffix = crate::util::services::random_suffix();
    let mut failures = Vec::new();
    for attempt in 1..=3 {
        let host = format!("dup{attempt}-{suffix}");
        let pair = [format!("dup{attempt}a"), format!("dup{attempt}b")];
        let started = Instant::now();
        for proc_name in &pair {
            cluster.spawn_conductor_as(proc_name, &host);
        }
        // Until one has exited, then a little longer to see the other keep serving; both still
        // up after 10 s (five heartbeat intervals) means both serve.
        let limit = started + Duration::from_secs(10);
        let mut first_exit: Option<Instant> = None;
        loop {
            let exited = pair
                .iter()
                .filter(|p| cluster.exit_status(p).is_some())
                .count();
            if exited > 0 && first_exit.is_none() {
                first_exit = Some(Instant::now());
            }
            let seen_long_enough = first_exit.is_some_and(|t| t.elapsed() > Duration::from_secs(3));
            if exited == 2 || seen_long_enough || Instant::now() > limit {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let statuses: Vec<Option<std::process::ExitStatus>> =
            pair.iter().map(|p| cluster.exit_status(p)).collect();
        let serving = statuses.iter().filter(|s| s.is_none()).count();
        let refused = statuses
            .iter()
            .filter(|s| s.is_some_and(|s| !s.success()))
            .count();
        let registered = ferrum::db::conductors::get(&cluster.db.db, &host)
            .await
            .is_ok_and(|c| c.online);
        run.note(format!(
            "try {attempt}: {host} serving={serving} refused={refused} statuses={statuses:?} registered={registered} after {}",
            secs(started.elapsed())
        ));
        if serving != 1 || refused != 1 {
            let why: Vec<String> = pair
                .iter()
                .map(|p| {
                    let log = strip_ansi(&cluster.log_of(p));
                    let last: Vec<&str> = log
                        .lines()
                        .filter(|l| !l.contains(" DEBUG "))
                        .rev()
                        .take(2)
                        .collect();
                    format!("{p}: {}", last.join(" / "))
                })
                .collect();
            failures.push(format!(
                "try {attempt}: {serving} of 2 conductors named {host} serve, {refused} exited with an error ({})",
                why.join(" | ")
            ));
        }
        // Stop whatever serves, cleanly, before the next try.
        for proc_name in &pair {
            if cluster.exit_status(proc_name).is_none() {
                cluster.signal_term(proc_name);
            }
        }
        let limit = Instant::now() + Duration::from_secs(30);
        for proc_name in &pair {
            while cluster.exit_status(proc_name).is_none() && Instant::now() < limit {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            cluster.kill(proc_name);
        }
    }
    let back = Instant::now();
    let mut verdict = run.finish(&mut cluster, back, WINDOW).await;
    verdict.extra_failures.extend(failures);
    finish(&verdict);
}

/// The harness itself: a private server killed is gone at once (the whole Erlang VM, not only
/// the `rabbitmq-server` script), one stopped exits cleanly, both come back on the same port and
/// data, and `rabbitmqctl` finds the private node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_servers_can_be_killed_stopped_and_started_again() {
    let refused = |port: u16| {
        std::net::TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            Duration::from_millis(500),
        )
        .is_err()
    };
    let mariadb = async {
        let mut db = PrivateMariaDb::start().await?;
        db.kill();
        assert!(refused(db.port()), "MariaDB still listens after kill");
        let again = db.start_again().await;
        db.stop().await;
        assert!(refused(db.port()), "MariaDB still listens after stop");
        let after_stop = db.start_again().await;
        Some(format!(
            "MariaDB first start {}, after kill {}, after stop {}",
            secs(db.first_start),
            secs(again),
            secs(after_stop)
        ))
    };
    let rabbit = async {
        let mut rabbit = PrivateRabbit::start().await?;
        let status = rabbit.ctl(&["status"]).output().expect("rabbitmqctl");
        assert!(
            status.status.success(),
            "rabbitmqctl does not reach {}: {}",
            rabbit.node_name(),
            String::from_utf8_lossy(&status.stderr)
        );
        rabbit.kill();
        assert!(refused(rabbit.port()), "RabbitMQ still listens after kill");
        let again = rabbit.start_again().await;
        rabbit.stop().await;
        assert!(refused(rabbit.port()), "RabbitMQ still listens after stop");
        Some(format!(
            "RabbitMQ first start {}, after kill {}",
            secs(rabbit.first_start),
            secs(again)
        ))
    };
    let (m, r) = tokio::join!(mariadb, rabbit);
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "private servers: {} | {}",
        m.unwrap_or_else(|| "MariaDB not run".to_owned()),
        r.unwrap_or_else(|| "RabbitMQ not run".to_owned())
    );
}

/// A conductor cut off from its database for longer than its lease allows stops its work and
/// exits with an error (another conductor could take its nodes over by then); started again by
/// its supervisor while the database is still away, it waits for it (`database.max_retries`)
/// instead of exiting at once in a loop; once the database is back, it registers, recovers what
/// it held, and no lock is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conductor_that_cannot_renew_its_lease_stops_and_exits() {
    let Some(mut mariadb) = PrivateMariaDb::start().await else {
        return;
    };
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        mysql_url: Some(mariadb.url()),
        conductors: 1,
        heartbeat_timeout: 3.0,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    cluster
        .api
        .available_node(serde_json::json!({
            "name": "fenced", "driver_info": {"fake_deploy_delay": 60}
        }))
        .await;
    cluster.api.accepted("fenced", "active").await;

    mariadb.kill();
    let status = cluster.wait_exit("conductor0").await;
    assert!(!status.success(), "exit status {status}");
    let log = strip_ansi(&cluster.log_of("conductor0"));
    assert!(log.contains("lost its lease on the host name"), "{log}");

    let since = ferrum::node::now();
    cluster.spawn_conductor(0);
    let waited = Instant::now() + Duration::from_secs(3);
    while Instant::now() < waited {
        if let Some(status) = cluster.exit_status("conductor0") {
            panic!(
                "started without its database, it exited ({status}) instead of waiting:\n{}",
                strip_ansi(&cluster.log_of("conductor0"))
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = strip_ansi(&cluster.log_of("conductor0"));
    assert!(log.contains("Cannot reach the database at"), "{log}");
    mariadb.start_again().await;
    cluster.wait_registered(0, since).await;
    let node = cluster.api.wait_for("fenced", "deploy failed").await;
    let last_error = node["last_error"].as_str().unwrap_or_default();
    assert!(last_error.contains("restarted"), "{last_error}");
    cluster.assert_no_locks().await;
}
