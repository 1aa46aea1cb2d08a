//! Wedged conductors (multi-host): one whose link to RabbitMQ goes silent (a TCP proxy that stops
//! forwarding without closing anything), and one paused with SIGSTOP. Each leaves the hash ring
//! within seconds, and requests for its nodes, those already waiting and new ones, are answered
//! within seconds by the next conductor on the ring rather than at the RPC timeout. A paused
//! conductor that wakes after its lease ran out applies nothing it was sent, and exits; so does
//! one whose link to the database was blackholed, once the link is back.

use std::time::{Duration, Instant};

use lapin::uri::AMQPUri;
use reqwest::StatusCode;
use serde_json::json;

use crate::util::{
    Api, amqp_url,
    cluster::{Cluster, ClusterOptions},
    link_proxy::LinkProxy,
};

/// What the requirement allows: a wedged conductor is out of the ring, and requests for its
/// nodes are answered, within this long.
const WITHIN: Duration = Duration::from_secs(10);
/// How long a test waits for something that must happen within [`WITHIN`] before failing, so
/// that a failure reports how long it took.
const PATIENCE: Duration = Duration::from_secs(40);

/// A cluster with `options`, plus one more conductor, the process "silenced", whose link to
/// RabbitMQ goes through a [`LinkProxy`]: the cluster, the proxy and that conductor's host,
/// alive. None where RabbitMQ is unreachable.
async fn with_a_proxied_broker_link(
    options: ClusterOptions,
) -> Option<(Cluster, LinkProxy, String)> {
    let broker: AMQPUri = amqp_url()?
        .parse()
        .expect("FERRUM_TEST_AMQP_URL is not an AMQP URL");
    let proxy = LinkProxy::start(&broker.authority.host, broker.authority.port).await;
    let mut cluster = Cluster::start(options).await?;
    let silenced = format!("silenced-{}", &cluster.conductor_hosts[0]);
    cluster.spawn_conductor_with(
        "silenced",
        &silenced,
        &[("FERRUM_TRANSPORT_URL", through(&proxy, &broker))],
    );
    // Before any node request, so that the API's first rings have all conductors.
    wait_alive(&cluster.api, &silenced, true, Instant::now()).await;
    Some((cluster, proxy, silenced))
}

/// `url` with its host and port those of `proxy`.
fn through(proxy: &LinkProxy, url: &AMQPUri) -> String {
    let mut url = url.clone();
    url.authority.host = "127.0.0.1".to_owned();
    url.authority.port = proxy.port;
    url.to_string()
}

/// Whether GET /v1/conductors/{host} shows conductor `host` as alive (false while it has not
/// registered yet).
async fn is_alive(api: &Api, host: &str) -> bool {
    let r = api.get(&format!("/v1/conductors/{host}")).await;
    match r.status {
        StatusCode::OK => r.body["alive"] == true,
        StatusCode::NOT_FOUND => false,
        status => panic!("{status} {}", r.body),
    }
}

/// Waits (at most [`PATIENCE`]) until the API shows conductor `host` as `alive`; how long since
/// `since` it took.
async fn wait_alive(api: &Api, host: &str, alive: bool, since: Instant) -> Duration {
    loop {
        if is_alive(api, host).await == alive {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < PATIENCE,
            "conductor {host} still does not show alive={alive} after {:?}",
            since.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A new node that conductor `host` serves (nodes are created until one lands on it).
async fn node_served_by(api: &Api, host: &str) -> String {
    loop {
        let node = api.create_node(json!({"driver": "fake-hardware"})).await;
        let uuid = node["uuid"].as_str().expect("a uuid").to_owned();
        if api.node(&uuid).await["conductor"] == host {
            return uuid;
        }
    }
}

/// PATCHes the node's `extra/step` to "later" (after a wedged conductor was sent an earlier
/// value), and returns the node as it is then.
async fn change_step_later(api: &Api, node: &str) -> serde_json::Value {
    let r = api
        .patch(
            node,
            json!([{"op": "add", "path": "/extra/step", "value": "later"}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    api.node(node).await
}

/// Waits until the wedged conductor `process` exits with an error, and checks that the node is
/// still as it was `before` (nothing of what the conductor was sent landed) and nothing is locked.
async fn exits_having_changed_nothing(
    cluster: &mut Cluster,
    process: &str,
    node: &str,
    before: &serde_json::Value,
) {
    let status = cluster.wait_exit(process).await;
    assert!(!status.success(), "it exits with an error: {status}");
    let after = cluster.api.node(node).await;
    assert_eq!(after["extra"]["step"], "later", "{after}");
    assert_eq!(after["updated_at"], before["updated_at"], "{after}");
    cluster.assert_no_locks().await;
}

/// A PATCH of the node adding `extra/<key> = value`, sent on a task of its own; how long since
/// `since` it took to be answered, with the answer.
fn patch_in_background(
    api: &Api,
    node: &str,
    key: &str,
    value: &str,
    since: Instant,
) -> tokio::task::JoinHandle<(Duration, crate::util::Reply)> {
    let (api, node) = (api.clone(), node.to_owned());
    let ops = json!([{"op": "add", "path": format!("/extra/{key}"), "value": value}]);
    tokio::spawn(async move {
        let r = api.patch(&node, ops).await;
        (since.elapsed(), r)
    })
}

/// Multi-host: a conductor whose link to RabbitMQ goes silent leaves the ring within seconds
/// (RabbitMQ and the conductor both stop hearing each other's heartbeats), and a PATCH for one
/// of its nodes, sent when the link went silent, and another sent afterwards, are answered
/// within seconds by the other conductor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conductor_whose_broker_link_goes_silent_leaves_the_ring_within_seconds() {
    let Some((mut cluster, proxy, silenced)) = with_a_proxied_broker_link(ClusterOptions {
        conductors: 1,
        rpc_timeout: 30.0,
        heartbeat_timeout: 30.0,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let steady = cluster.conductor_hosts[0].clone();
    let api = cluster.api.clone();
    let node = node_served_by(&api, &silenced).await;

    let silenced_at = Instant::now();
    proxy.blackhole(true);
    let in_flight = patch_in_background(&api, &node, "sent", "when silenced", silenced_at);
    let left_ring = wait_alive(&api, &silenced, false, silenced_at).await;
    let (answered_in_flight, r) = tokio::time::timeout(PATIENCE, in_flight)
        .await
        .expect("the PATCH sent when the link went silent is answered")
        .unwrap();
    eprintln!(
        "silenced link: off the ring after {left_ring:?}, the PATCH in flight answered after \
         {answered_in_flight:?}"
    );
    assert!(left_ring < WITHIN, "off the ring after {left_ring:?}");
    assert!(
        answered_in_flight < WITHIN,
        "the PATCH in flight was answered after {answered_in_flight:?}: {} {}",
        r.status,
        r.body
    );
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["extra"]["sent"], "when silenced");

    let started = Instant::now();
    let r = api
        .patch(
            &node,
            json!([{"op": "add", "path": "/extra/sent", "value": "afterwards"}]),
        )
        .await;
    let answered = started.elapsed();
    eprintln!("silenced link: a PATCH sent afterwards answered after {answered:?}");
    assert!(answered < WITHIN, "answered after {answered:?}");
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(api.node(&node).await["conductor"], steady.as_str());
    // Cut off from the broker, not from the database: it keeps its lease and only waits.
    assert!(cluster.exit_status("silenced").is_none(), "it still runs");
    cluster.assert_no_locks().await;
}

/// Multi-host: a conductor paused with SIGSTOP leaves the ring within seconds (RabbitMQ stops
/// hearing its heartbeats and drops its connection, and with it its queue); a PATCH for one of
/// its nodes sent while it is paused is answered within seconds by the other conductor, which the
/// API routes the node to from then on. Woken after its lease ran out, it applies nothing of what
/// was sent to it (the PATCH waiting in its socket would undo a newer one) and exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_conductor_leaves_the_ring_within_seconds_and_applies_nothing_when_woken() {
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        rpc_timeout: 30.0,
        // Longer than the assertions' 10 s: the ring must change before the lease runs out.
        heartbeat_timeout: 15.0,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = cluster.api.clone();
    let node = api.create_node(json!({"driver": "fake-hardware"})).await;
    let node = node["uuid"].as_str().unwrap().to_owned();
    let paused = cluster.owner_of(&node);
    let other = cluster
        .conductor_hosts
        .iter()
        .find(|h| **h != paused)
        .unwrap()
        .clone();
    let process = format!("conductor{}", cluster.conductor_index(&paused));
    assert_eq!(api.node(&node).await["conductor"], paused.as_str());

    let paused_at = Instant::now();
    cluster.signal(&process, "STOP");
    let in_flight = patch_in_background(&api, &node, "step", "while paused", paused_at);
    let (answered_in_flight, r) = tokio::time::timeout(PATIENCE, in_flight)
        .await
        .expect("the PATCH sent to the paused conductor is answered")
        .unwrap();
    let rerouted = paused_at.elapsed();
    let conductor_shown = api.node(&node).await["conductor"].clone();
    eprintln!(
        "paused conductor: the PATCH in flight answered after {answered_in_flight:?}, the node \
         routed to {conductor_shown} after {rerouted:?}"
    );
    assert!(
        answered_in_flight < WITHIN,
        "the PATCH in flight was answered after {answered_in_flight:?}: {} {}",
        r.status,
        r.body
    );
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["extra"]["step"], "while paused");
    assert_eq!(
        conductor_shown,
        other.as_str(),
        "the node's requests go elsewhere"
    );
    assert!(rerouted < WITHIN, "routed elsewhere after {rerouted:?}");
    let started = Instant::now();
    let r = api
        .patch(
            &node,
            json!([{"op": "add", "path": "/extra/next", "value": "x"}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(
        started.elapsed() < WITHIN,
        "answered after {:?}",
        started.elapsed()
    );

    // Its lease runs out; then the node changes again, so that the paused conductor's copy of
    // the first PATCH is no longer the node's last request.
    let lease_lost = wait_alive(&api, &paused, false, paused_at).await;
    eprintln!("paused conductor: lease ran out after {lease_lost:?}");
    let before = change_step_later(&api, &node).await;

    cluster.signal(&process, "CONT");
    exits_having_changed_nothing(&mut cluster, &process, &node, &before).await;
}

/// Multi-host: a conductor paused briefly (well within its lease and its broker heartbeats) is
/// sent a PATCH whose caller gives up meanwhile and is told to retry. Woken, the conductor reads
/// the PATCH, which waited in its socket past the caller's time limit, and does not apply it: a
/// 503 for a timed-out call means "not applied", also when the time went by in a queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_read_after_its_caller_gave_up_is_not_applied() {
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        rpc_timeout: 1.0,
        heartbeat_timeout: 15.0,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = cluster.api.clone();
    let node = api.create_node(json!({"driver": "fake-hardware"})).await;
    let node = node["uuid"].as_str().unwrap().to_owned();
    let paused = cluster.owner_of(&node);
    let process = format!("conductor{}", cluster.conductor_index(&paused));

    let paused_at = Instant::now();
    cluster.signal(&process, "STOP");
    let (answered, r) = patch_in_background(&api, &node, "step", "while paused", paused_at)
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    assert!(r.fault().contains("please retry"), "{}", r.body);
    // Woken while still alive on the ring and connected, a while after the caller gave up.
    let woken_after = Duration::from_millis(2_500);
    tokio::time::sleep(woken_after.saturating_sub(answered)).await;
    cluster.signal(&process, "CONT");

    let refused = "past its caller's time limit; not applied";
    let woken_at = Instant::now();
    while !cluster.log_of(&process).contains(refused) {
        assert!(
            woken_at.elapsed() < PATIENCE,
            "the woken conductor did not say it refused the stale PATCH:\n{}",
            cluster.log_of(&process)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = api.node(&node).await;
    assert!(after["extra"].get("step").is_none(), "{after}");
    assert!(
        is_alive(&api, &paused).await,
        "it kept its lease and serves"
    );
    let r = api
        .patch(
            &node,
            json!([{"op": "add", "path": "/extra/next", "value": "x"}]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(cluster.owner_of(&node), paused);
    cluster.assert_no_locks().await;
}

/// Multi-host: a conductor paused for longer than its lease, but not long enough for RabbitMQ to
/// drop it (heartbeats of 5 s here, as an operator may set them in the transport URL), wakes with
/// a PATCH sent to it meanwhile waiting in its socket and its connection still up. It refuses the
/// PATCH, answering that it did not apply it (whatever runs first on waking, the keeper that
/// fences its work or the consumer), and exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conductor_woken_after_its_lease_ran_out_refuses_what_it_was_sent() {
    let Some(url) = amqp_url() else {
        return;
    };
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        rpc_timeout: 30.0,
        heartbeat_timeout: 2.5,
        amqp_url: Some(format!("{url}?heartbeat=5")),
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = cluster.api.clone();
    let node = api.create_node(json!({"driver": "fake-hardware"})).await;
    let node = node["uuid"].as_str().unwrap().to_owned();
    let paused = cluster.owner_of(&node);
    let process = format!("conductor{}", cluster.conductor_index(&paused));

    let paused_at = Instant::now();
    cluster.signal(&process, "STOP");
    let in_flight = patch_in_background(&api, &node, "step", "while paused", paused_at);
    wait_alive(&api, &paused, false, paused_at).await;
    cluster.signal(&process, "CONT");
    let (answered, r) = tokio::time::timeout(PATIENCE, in_flight)
        .await
        .expect("the PATCH sent to the paused conductor is answered")
        .unwrap();
    eprintln!(
        "woken conductor: answered after {answered:?}: {} {}",
        r.status, r.body
    );
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    assert!(
        r.fault().contains(&format!(
            "Conductor {paused} lost its lease on its host name and did not apply"
        )),
        "{}",
        r.body
    );
    assert!(api.node(&node).await["extra"].get("step").is_none());
    let status = cluster.wait_exit(&process).await;
    assert!(!status.success(), "it exits with an error: {status}");
    cluster.assert_no_locks().await;
}

/// Multi-host: a conductor whose link to the database is blackholed while it handles a PATCH
/// fences itself, the PATCH is answered by the next conductor, and the node changes again after
/// that. Once the link is restored, the fenced conductor's own attempt at the PATCH (its read of
/// the node answered only now) must not land: it would undo the newer, acknowledged change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conductor_cut_off_from_the_database_applies_nothing_once_the_link_is_back() {
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        conductors: 1,
        rpc_timeout: 30.0,
        heartbeat_timeout: 3.0,
        graceful_shutdown_timeout: 30.0,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    // mysql://user@host:port/database
    let url = cluster.db.url.clone();
    let (server, database) = url.rsplit_once('/').expect("a database URL");
    let (scheme_user, address) = server.rsplit_once('@').expect("user@host:port");
    let (host, port) = address.rsplit_once(':').expect("host:port");
    let proxy = LinkProxy::start(host, port.parse().expect("a port")).await;
    let proxied = format!(
        "{scheme_user}@127.0.0.1:{}/{database}?prefer_socket=false",
        proxy.port
    );
    let cut = format!("cut-{}", &cluster.conductor_hosts[0]);
    cluster.spawn_conductor_with("cut", &cut, &[("FERRUM_DATABASE_URL", proxied)]);
    let api = cluster.api.clone();
    wait_alive(&api, &cut, true, Instant::now()).await;
    let node = node_served_by(&api, &cut).await;

    let cut_at = Instant::now();
    proxy.blackhole(true);
    let in_flight = patch_in_background(&api, &node, "step", "sent when cut off", cut_at);
    let (answered, r) = tokio::time::timeout(PATIENCE, in_flight)
        .await
        .expect("the PATCH sent to the cut-off conductor is answered")
        .unwrap();
    eprintln!(
        "cut-off conductor: the PATCH in flight answered after {answered:?}: {}",
        r.status
    );
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let before = change_step_later(&api, &node).await;

    proxy.blackhole(false);
    exits_having_changed_nothing(&mut cluster, "cut", &node, &before).await;
}

/// Multi-host: a conductor stopped (SIGTERM) while its link to RabbitMQ is silent exits all the
/// same: cancelling its consumer is never answered (and may not be once the client finds the
/// connection dead), so the wait for it is bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conductor_stopped_while_its_broker_link_is_silent_exits() {
    let Some((mut cluster, proxy, _)) = with_a_proxied_broker_link(ClusterOptions {
        conductors: 1,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };

    proxy.blackhole(true);
    let stopped = Instant::now();
    cluster.signal_term("silenced");
    let status = cluster.wait_exit("silenced").await;
    eprintln!(
        "conductor stopped with a silent broker link: exited after {:?} ({status})",
        stopped.elapsed()
    );
    cluster.assert_no_locks().await;
}

/// Multi-host: a conductor that loses its lease (another process claimed its host name) while a
/// driver call blocks one of its threads, where no cancelling reaches it, still exits within
/// seconds: nothing it does counts any more, the rings see it as gone, and only its restart
/// recovers the node. Before the bound it waited for the call, here ten minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conductor_that_lost_its_lease_exits_even_while_a_driver_call_is_stuck() {
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        conductors: 1,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = cluster.api.clone();
    let node = api
        .available_node(json!({"driver_info": {"fake_deploy_block": 600}}))
        .await;
    let node = node["uuid"].as_str().unwrap().to_owned();
    api.accepted(&node, "active").await;
    let started = format!("fake deploy started on node {node}");
    let waited = Instant::now();
    while !cluster.log_of("conductor0").contains(&started) {
        assert!(waited.elapsed() < PATIENCE, "the deploy did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A namesake takes the lease over, exactly as one does after the lease ran out.
    let host = cluster.conductor_hosts[0].clone();
    let db = &cluster.db.db;
    loop {
        let row = ferrum::db::conductors::get(db, &host).await.unwrap();
        let claim =
            ferrum::db::conductors::claim(db, &host, "a-namesake", &[], &json!({}), "", Some(&row))
                .await
                .unwrap();
        if matches!(claim, ferrum::db::conductors::Claim::Claimed) {
            break;
        }
    }
    let lost_at = Instant::now();
    let status = cluster.wait_exit("conductor0").await;
    let exited_after = lost_at.elapsed();
    eprintln!("lease lost during a stuck driver call: exited after {exited_after:?}");
    assert!(!status.success(), "it exits with an error: {status}");
    // The lease is noticed lost at the next renewal (1 s), then 10 s of grace.
    assert!(
        exited_after < Duration::from_secs(20),
        "exited after {exited_after:?}"
    );
    let log = cluster.log_of("conductor0");
    assert!(log.contains("has not stopped"), "{log}");
    assert!(
        log.contains("Stopping: waiting for the running work"),
        "{log}"
    );
}
