//! The power-state sync against real Redfish BMCs (sushy-tools' emulator, `util::redfish`) on
//! both stacks: a power change made behind Ferrum's back on the emulator is corrected (force) or
//! recorded, with a history entry (and, on the embedded stack, which logs its notifications,
//! the notification); a stopped BMC is a `power failure` with maintenance until it answers
//! again; a `deploy failed` node keeps its `last_error` through all of it; a locked node is
//! left alone and synced once unlocked; and a round over 1,000 emulated systems behind four
//! BMCs ends within its interval without more requests in flight per BMC than the bound.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use ferrum::{
    db,
    node::{Interfaces, Json, Node, PowerState},
    states::ProvisionState,
};

use crate::util::{
    Api, Cluster, ClusterOptions, Stack, on_both_stacks,
    redfish::{Emulator, EmulatorOptions},
};

/// A cluster syncing every second (`force` as given), one failed round tolerated, recovering
/// every second, its Redfish client trying an unreachable BMC once.
async fn cluster(stack: Stack, force: bool) -> Option<Cluster> {
    let mut env = vec![
        ("FERRUM_SYNC_POWER_STATE_INTERVAL", "1".to_owned()),
        ("FERRUM_POWER_FAILURE_RECOVERY_INTERVAL", "1".to_owned()),
        ("FERRUM_POWER_STATE_SYNC_MAX_RETRIES", "1".to_owned()),
        ("FERRUM_FORCE_POWER_STATE_DURING_SYNC", force.to_string()),
        ("FERRUM_REDFISH_CONNECTION_ATTEMPTS", "1".to_owned()),
        ("FERRUM_POWER_STATE_CHANGE_TIMEOUT", "10".to_owned()),
    ];
    // Without a broker the all-in-one logs its notifications, where the test reads them; the
    // multi-host stack would send them to the shared broker's default exchange.
    if stack == Stack::Embedded {
        env.push(("FERRUM_NOTIFICATION_LEVEL", "info".to_owned()));
    }
    Cluster::start(ClusterOptions {
        stack,
        rpc_timeout: 15.0,
        env,
        ..ClusterOptions::default()
    })
    .await
}

/// A redfish node on system 0 of `emu`, managed: its power state read from the BMC.
async fn managed_node(api: &Api, emu: &Emulator, name: &str) -> String {
    let node = api
        .create_node(json!({"name": name, "driver": "redfish", "driver_info": emu.driver_info(0)}))
        .await;
    api.accepted(name, "manage").await;
    let managed = api.wait_for(name, "manageable").await;
    assert_eq!(managed["power_state"], "power off", "{managed}");
    node["uuid"].as_str().expect("uuid").to_owned()
}

async fn bmc_power(emu: &Emulator) -> String {
    emu.get(&emu.systems[0]).await["PowerState"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Polls until `check` holds for the node (its API view), within `limit`.
async fn wait_node(
    api: &Api,
    node: &str,
    limit: Duration,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let shown = api.node(node).await;
        if check(&shown) {
            return shown;
        }
        assert!(
            Instant::now() < deadline,
            "node {node} never got there: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the emulator until system 0 is in `state`.
async fn wait_bmc(emu: &Emulator, state: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while bmc_power(emu).await != state {
        assert!(Instant::now() < deadline, "the BMC never reported {state}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The node's history entries, in detail (API 1.78).
async fn history(api: &Api, node: &str) -> Vec<Value> {
    let path = format!("/v1/nodes/{node}/history?detail=true");
    let r = api.request_at("1.78", Method::GET, &path, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body["history"].as_array().cloned().unwrap_or_default()
}

/// Polls until the node's history has an entry of `severity` whose event contains `text`.
async fn wait_history(api: &Api, node: &str, severity: &str, text: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let entries = history(api, node).await;
        if let Some(e) = entries.iter().find(|e| {
            e["severity"] == severity && e["event"].as_str().is_some_and(|t| t.contains(text))
        }) {
            assert_eq!(e["event_type"], "monitoring", "{e}");
            return e.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no {severity} entry with {text:?}: {entries:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

on_both_stacks! {
/// With `force_power_state_during_sync` (the default), a system powered off on the BMC behind
/// Ferrum's back is powered on again by the sync, which says so in the node's history; the
/// node's record never changed.
async fn a_power_change_behind_ferrums_back_is_undone(stack) {
    let Some(emu) = Emulator::start(EmulatorOptions::default()) else { return };
    let Some(cluster) = cluster(stack, true).await else { return };
    let api = &cluster.api;
    let uuid = managed_node(api, &emu, "forced").await;
    let r = api.power("forced", "power on").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    api.wait_power("forced", "power on").await;
    assert_eq!(bmc_power(&emu).await, "On");

    // (starts, ends) of power_set in the conductor's log.
    let power_sets = |cluster: &Cluster| {
        let log = cluster.log_of(&cluster.conductor_process(0));
        (
            log.matches("Notification baremetal.node.power_set.start").count(),
            log.matches("Notification baremetal.node.power_set.end").count(),
        )
    };
    // The power on's end is logged just after the node shows it: counted before the fault.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while power_sets(&cluster).0 != power_sets(&cluster).1 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (starts_before, ends_before) = power_sets(&cluster);
    emu.reset(0, "ForceOff").await;
    wait_bmc(&emu, "Off", Duration::from_secs(5)).await;
    let entry = wait_history(api, &uuid, "INFO", "Changed hardware state to 'power on'").await;
    assert!(entry["event"].as_str().unwrap().contains(&format!("node {uuid} state 'power off'")), "{entry}");
    wait_bmc(&emu, "On", Duration::from_secs(10)).await;
    let node = api.wait_for("forced", "manageable").await;
    assert_eq!(node["power_state"], "power on", "{node}");
    assert_eq!(node["last_error"], Value::Null, "{node}");
    assert_eq!(node["maintenance"], false, "{node}");
    // The correction is announced as a power change is (on the stack that logs them).
    // Exactly one start and one end: the sync drives the bare power interface, which announces
    // nothing itself.
    if stack == Stack::Embedded {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while power_sets(&cluster).1 == ends_before && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            power_sets(&cluster),
            (starts_before + 1, ends_before + 1),
            "one power_set start/end pair for the correction"
        );
    }
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// Without `force_power_state_during_sync`, the sync records the state the BMC reports, says
/// so in the node's history and announces `power_state_corrected` from the old state.
async fn a_power_change_behind_ferrums_back_is_recorded(stack) {
    let Some(emu) = Emulator::start(EmulatorOptions::default()) else { return };
    let Some(cluster) = cluster(stack, false).await else { return };
    let api = &cluster.api;
    let uuid = managed_node(api, &emu, "recorded").await;

    emu.reset(0, "On").await;
    wait_bmc(&emu, "On", Duration::from_secs(5)).await;
    let node = wait_node(api, "recorded", Duration::from_secs(15), |n| n["power_state"] == "power on").await;
    assert_eq!(node["last_error"], Value::Null, "{node}");
    assert_eq!(node["maintenance"], false, "{node}");
    let entry = wait_history(api, &uuid, "INFO", "Updating recorded state to 'power on'").await;
    assert!(entry["event"].as_str().unwrap().contains("does not match expected state 'power off'"), "{entry}");
    // The hardware was left as it is.
    assert_eq!(bmc_power(&emu).await, "On");
    if stack == Stack::Embedded {
        // Logged just after the history entry is written: wait for it (as for the correction's
        // power_set pair above) instead of reading the log at once.
        let notified = |l: &&str| l.contains("Notification baremetal.node.power_state_corrected.success");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let mut log = cluster.log_of(&cluster.conductor_process(0));
        while !log.lines().any(|l| notified(&l)) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            log = cluster.log_of(&cluster.conductor_process(0));
        }
        let line = log
            .lines()
            .find(notified)
            .unwrap_or_else(|| panic!("no power_state_corrected notification: {log}"));
        assert!(line.contains("NodeCorrectedPowerStatePayload"), "{line}");
        assert!(line.contains(r#"\"from_power\":\"power off\""#) || line.contains(r#""from_power":"power off""#), "{line}");
    }
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// A BMC that stops answering: after `power_state_sync_max_retries` failed rounds the node is
/// in maintenance with the fault `power failure`, Ironic's reason and an error in its history;
/// once the BMC answers again (restarted on the same port), the recovery takes it out of
/// maintenance with the power state the BMC reports.
async fn an_unreachable_bmc_is_a_power_failure_until_it_answers(stack) {
    let Some(mut emu) = Emulator::start(EmulatorOptions::default()) else { return };
    let Some(cluster) = cluster(stack, true).await else { return };
    let api = &cluster.api;
    let uuid = managed_node(api, &emu, "lost").await;

    emu.stop();
    let node = wait_node(api, "lost", Duration::from_secs(20), |n| n["fault"] == "power failure").await;
    assert_eq!(node["maintenance"], true, "{node}");
    assert_eq!(node["power_state"], Value::Null, "{node}");
    let reason = node["maintenance_reason"].as_str().unwrap();
    assert!(reason.starts_with(&format!(
        "During sync_power_state, max retries exceeded for node {uuid}, node state None does not match expected state 'power off'. Updating DB state to 'None' Switching node to maintenance mode. Error: "
    )), "{reason}");
    assert!(reason.contains("Redfish connection failed"), "{reason}");
    // Outside a failure state the reason is also the node's last_error, as in Ironic.
    assert_eq!(node["last_error"], node["maintenance_reason"], "{node}");
    wait_history(api, &uuid, "ERROR", "max retries exceeded").await;
    cluster.assert_no_locks().await;

    emu.restart();
    let node = wait_node(api, "lost", Duration::from_secs(20), |n| n["maintenance"] == false).await;
    assert_eq!(node["fault"], Value::Null, "{node}");
    assert_eq!(node["maintenance_reason"], Value::Null, "{node}");
    assert_eq!(node["power_state"], "power off", "{node}");
    wait_history(api, &uuid, "INFO", "is recovered from power failure with actual power state 'power off'").await;
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// A `deploy failed` node keeps its `last_error` through rounds that find its power in sync
/// (where Ironic's sync clears it), through a correction of its hardware, and through a power
/// failure of its BMC and the recovery from it (where Ironic writes its own message over it).
async fn the_last_error_of_a_failed_deploy_survives_the_sync(stack) {
    let Some(mut emu) = Emulator::start(EmulatorOptions::default()) else { return };
    let Some(cluster) = cluster(stack, true).await else { return };
    let api = &cluster.api;
    let node = api.available_node(json!({
        "name": "failed", "driver": "redfish", "driver_info": emu.driver_info(0),
        // Automated cleaning would boot the ramdisk and wait for an agent.
        "automated_clean": false,
        "instance_info": {"image_source": "file:///home/user/aaa"},
    })).await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    api.accepted("failed", "active").await;
    let failed = api.wait_for("failed", "deploy failed").await;
    let error = failed["last_error"].as_str().unwrap().to_owned();
    assert!(error.starts_with("Failed to prepare to deploy: "), "{error}");
    let recorded = failed["power_state"].clone();

    // Rounds that find the power in sync.
    let seen = sync_rounds(&cluster).len();
    wait_sync_rounds(&cluster, seen + 2).await;
    let node = api.node("failed").await;
    assert_eq!(node["last_error"], json!(error), "{node}");
    assert_eq!(node["power_state"], recorded, "{node}");

    // A correction of the hardware.
    let (flip, back) = if recorded == "power on" { ("ForceOff", "On") } else { ("On", "Off") };
    emu.reset(0, flip).await;
    wait_history(api, &uuid, "INFO", "Changed hardware state to").await;
    wait_bmc(&emu, back, Duration::from_secs(10)).await;
    let node = api.wait_for("failed", "deploy failed").await;
    assert_eq!(node["last_error"], json!(error), "{node}");

    // A power failure, and the recovery.
    emu.stop();
    let node = wait_node(api, "failed", Duration::from_secs(20), |n| n["fault"] == "power failure").await;
    assert_eq!(node["maintenance"], true, "{node}");
    assert!(node["maintenance_reason"].as_str().unwrap().contains("max retries exceeded"), "{node}");
    assert_eq!(node["last_error"], json!(error), "{node}");
    wait_history(api, &uuid, "ERROR", "max retries exceeded").await;
    emu.restart();
    let node = wait_node(api, "failed", Duration::from_secs(20), |n| n["maintenance"] == false).await;
    assert_eq!(node["fault"], Value::Null, "{node}");
    assert_eq!(node["provision_state"], "deploy failed", "{node}");
    assert_eq!(node["last_error"], json!(error), "{node}");
    cluster.assert_no_locks().await;
}
}

on_both_stacks! {
/// A node locked by someone else is left alone by the sync (its BMC changed behind Ferrum's
/// back stays so, the round counting it as locked), and corrected by the first round after it
/// is unlocked.
async fn a_locked_node_is_synced_once_unlocked(stack) {
    let Some(emu) = Emulator::start(EmulatorOptions::default()) else { return };
    let Some(cluster) = cluster(stack, true).await else { return };
    let api = &cluster.api;
    let uuid = managed_node(api, &emu, "busy").await;

    // Locked by a live conductor (a dead holder's lock would be taken over).
    let holder = cluster.conductor_hosts[0].clone();
    assert!(db::nodes::reserve(&cluster.db.db, &uuid, &holder, None).await.unwrap());
    emu.reset(0, "On").await;
    wait_bmc(&emu, "On", Duration::from_secs(5)).await;
    // Several rounds pass: nothing is done to the node or its BMC.
    let seen = sync_rounds(&cluster).len();
    let rounds = wait_sync_rounds(&cluster, seen + 3).await;
    assert_eq!(bmc_power(&emu).await, "On");
    let node = api.node("busy").await;
    assert_eq!(node["power_state"], "power off", "{node}");
    assert!(history(api, &uuid).await.is_empty());
    let skipped = rounds[seen..].iter().any(|l| field(l, "locked") == Some(1));
    assert!(skipped, "no round counted the locked node");

    assert!(db::nodes::unreserve(&cluster.db.db, &uuid, &holder).await.unwrap());
    wait_history(api, &uuid, "INFO", "Changed hardware state to 'power off'").await;
    wait_bmc(&emu, "Off", Duration::from_secs(10)).await;
    let node = api.wait_for("busy", "manageable").await;
    assert_eq!(node["power_state"], "power off", "{node}");
    cluster.assert_no_locks().await;
}
}

/// The sync rounds the conductors have logged so far, each conductor's in order: a round is
/// logged when it read or skipped a node, so only the conductor owning the test's nodes logs.
fn sync_rounds(cluster: &Cluster) -> Vec<String> {
    (0..cluster.conductor_hosts.len())
        .flat_map(|i| {
            cluster
                .log_of(&cluster.conductor_process(i))
                .lines()
                .filter(|l| l.contains("Power state sync round:"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Waits until the conductors have logged `count` sync rounds in all (one a second here), and
/// returns them: the signal that rounds ran, instead of a sleep that hopes they did.
async fn wait_sync_rounds(cluster: &Cluster, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let rounds = sync_rounds(cluster);
        if rounds.len() >= count {
            return rounds;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {count} sync rounds logged",
            rounds.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The value of `name=<n>` in a log line of the conductor (tracing's field format).
fn field(line: &str, name: &str) -> Option<u64> {
    let start = line.find(&format!(" {name}="))? + name.len() + 2;
    let digits: String = line[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The systems behind each BMC, the BMCs, and the nodes of the scale test.
const BMCS: usize = 4;
const PER_BMC: usize = 250;
const INTERVAL_S: u64 = 20;
const WORKERS: u64 = 8;
const WORKERS_PER_BMC: u64 = 2;

/// A node of system `i` of `emu`, managed and powered off as the BMC starts it, written
/// straight into the database (1,000 of them through the API would take most of the test).
fn scale_node(emu: &Emulator, i: usize, n: usize) -> Node {
    let info = emu.driver_info(i);
    Node {
        uuid: uuid::Uuid::new_v4().to_string(),
        name: Some(format!("scale-{n}")),
        driver: "redfish".into(),
        interfaces: Interfaces {
            deploy: "direct".into(),
            power: "redfish".into(),
            management: "redfish".into(),
            bios: "no-bios".into(),
            boot: "ipxe".into(),
            console: "no-console".into(),
            inspect: "no-inspect".into(),
            network: "noop".into(),
            raid: "no-raid".into(),
            rescue: "no-rescue".into(),
            storage: "noop".into(),
            vendor: "no-vendor".into(),
            firmware: "no-firmware".into(),
        },
        driver_info: Json(info.as_object().expect("driver_info").clone()),
        provision_state: ProvisionState::Manageable,
        power_state: Some(PowerState::Off),
        created_at: ferrum::node::now(),
        ..Node::default()
    }
}

on_both_stacks! {
/// 1,000 emulated systems behind four BMCs (250 each): a sync round over them ends within its
/// interval, asks each system once, never has more than `sync_power_state_workers_per_bmc`
/// nodes in flight on one BMC nor `sync_power_state_workers` in all, and the conductors share
/// the nodes (each synced by exactly one).
async fn a_thousand_systems_are_synced_within_one_interval(stack) {
    let mut emus = Vec::new();
    for _ in 0..BMCS {
        let Some(emu) = Emulator::start(EmulatorOptions { systems: PER_BMC, ..EmulatorOptions::default() }) else { return };
        emus.push(emu);
    }
    let before: usize = emus.iter().map(|e| e.gets_served("/redfish/v1/Systems/")).sum();
    // Interleaved, as the nodes of a rack: the first 250 ids are not all on one BMC.
    let rows: Vec<Node> = (0..PER_BMC)
        .flat_map(|i| emus.iter().map(move |emu| (emu, i)))
        .enumerate()
        .map(|(n, (emu, i))| scale_node(emu, i, n))
        .collect();
    let started = Instant::now();
    // The nodes are there before the conductors start: their first round, one interval after
    // their start, covers all of them.
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        env: vec![
            ("FERRUM_SYNC_POWER_STATE_INTERVAL", INTERVAL_S.to_string()),
            ("FERRUM_SYNC_POWER_STATE_WORKERS", WORKERS.to_string()),
            ("FERRUM_SYNC_POWER_STATE_WORKERS_PER_BMC", WORKERS_PER_BMC.to_string()),
        ],
        nodes: rows,
        ..ClusterOptions::default()
    })
    .await else { return };
    eprintln!("{stack:?}: 1000 nodes inserted and the cluster started in {:?}", started.elapsed());

    // Each conductor's rounds over the nodes it owns, until they cover all 1,000 in one
    // round each.
    let conductors = cluster.conductor_hosts.len();
    let deadline = Instant::now() + Duration::from_secs(2 * INTERVAL_S + 10);
    let rounds = loop {
        let last: Vec<Option<String>> = (0..conductors)
            .map(|i| {
                cluster.log_of(&cluster.conductor_process(i)).lines()
                    .rfind(|l| l.contains("Power state sync round"))
                    .map(str::to_owned)
            })
            .collect();
        let total: u64 = last.iter().flatten().filter_map(|l| field(l, "nodes")).sum();
        if last.iter().all(Option::is_some) && total == (BMCS * PER_BMC) as u64 {
            break last.into_iter().flatten().collect::<Vec<_>>();
        }
        assert!(Instant::now() < deadline, "no complete round: {last:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Every GET of a system the BMCs served (in all rounds so far), per node synced.
    let served: usize = emus.iter().map(|e| e.gets_served("/redfish/v1/Systems/")).sum::<usize>() - before;
    let synced: u64 = (0..conductors)
        .flat_map(|i| {
            cluster.log_of(&cluster.conductor_process(i)).lines()
                .filter(|l| l.contains("Power state sync round"))
                .filter_map(|l| field(l, "nodes"))
                .collect::<Vec<_>>()
        })
        .sum();
    for line in &rounds {
        eprintln!("{stack:?}: {line}");
        let took = field(line, "took_ms").unwrap();
        assert!(took < INTERVAL_S * 1000, "a round took {took} ms, longer than its interval: {line}");
        let per_bmc = field(line, "max_in_flight_per_bmc").unwrap();
        assert!(per_bmc <= WORKERS_PER_BMC, "{line}");
        assert!(field(line, "max_in_flight").unwrap() <= WORKERS, "{line}");
        assert_eq!(field(line, "failed"), Some(0), "{line}");
        assert_eq!(field(line, "corrected"), Some(0), "{line}");
    }
    // Each BMC's bound is reached, and several BMCs are asked at once: the figures measure
    // the bounds, not an idle round.
    let overall: u64 = rounds.iter().filter_map(|l| field(l, "max_in_flight")).max().unwrap();
    assert!(overall > WORKERS_PER_BMC, "{rounds:?}");
    let per_bmc: u64 = rounds.iter().filter_map(|l| field(l, "max_in_flight_per_bmc")).max().unwrap();
    assert_eq!(per_bmc, WORKERS_PER_BMC, "{rounds:?}");
    let per_node = served as f64 / synced as f64;
    eprintln!("{stack:?}: {served} GETs of a system for {synced} node syncs: {per_node:.2} per node");
    assert!((per_node - 1.0).abs() < 0.01, "{served} GETs for {synced} node syncs");
    cluster.assert_no_locks().await;
}
}

/// Fake hardware is synced too (its power interface reports what was last set): a managed node
/// whose power state was lost gets the fake machine's in one round, announced as a correction;
/// the next round finds it in sync; a node in `enroll` or in maintenance is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_hardware_is_synced_and_enroll_and_maintenance_are_not() {
    use ferrum::{conductor::power_sync, db::nodes::PowerScan, node::NodeChanges};
    use tokio_util::sync::CancellationToken;

    // The rounds are run by the test; the conductor's own loop is off.
    let app = crate::util::TestApp::builder()
        .configure(|c| c.conductor.sync_power_state_interval = Duration::ZERO)
        .start()
        .await;
    let forget_power = async |name: &str| {
        let node = db::nodes::get(app.db(), db::nodes::NodeIdent::Name(name))
            .await
            .expect("node");
        let changes = NodeChanges {
            power_state: Some(None),
            ..NodeChanges::default()
        };
        let writer = (app.host(), node.provision_state);
        assert!(
            db::nodes::update_unlocked(app.db(), node.id, node.version, writer, changes, None)
                .await
                .expect("write")
        );
    };
    for name in ["synced", "in-maintenance"] {
        app.create_node(json!({"name": name, "driver": "fake-hardware"}))
            .await;
        app.accepted(name, "manage").await;
        app.wait_for(name, "manageable").await;
        forget_power(name).await;
    }
    let r = app
        .request(
            Method::PUT,
            "/v1/nodes/in-maintenance/maintenance",
            Some(json!({"reason": "r"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    app.create_node(json!({"name": "enrolled", "driver": "fake-hardware"}))
        .await;

    let stop = CancellationToken::new();
    let stats = power_sync::round(app.conductor(), PowerScan::Sync, &stop)
        .await
        .expect("round");
    assert_eq!(
        (stats.nodes, stats.corrected, stats.failed),
        (1, 1, 0),
        "{stats:?}"
    );
    assert_eq!(app.node("synced").await["power_state"], "power off");
    assert_eq!(app.node("in-maintenance").await["power_state"], Value::Null);
    assert_eq!(app.node("enrolled").await["power_state"], Value::Null);
    // A fake node talks to no BMC: bounded only overall.
    assert_eq!(
        (stats.max_in_flight, stats.max_in_flight_per_bmc),
        (1, 0),
        "{stats:?}"
    );

    let stats = power_sync::round(app.conductor(), PowerScan::Sync, &stop)
        .await
        .expect("round");
    assert_eq!((stats.nodes, stats.corrected), (1, 0), "{stats:?}");
}
