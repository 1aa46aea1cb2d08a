//! The real OpenStack clients against Ferrum: tests/clients/compat.py drives the `baremetal` CLI
//! (python-ironicclient) and openstacksdk's baremetal proxy with no auth against a fresh
//! all-in-one, asserting states and fields at every step, the bug-1405420 scenario included.
//! Its suites run in two groups, each a test with its own all-in-one, so that they run in
//! parallel.

use crate::util::{Cluster, ClusterOptions, Stack, clients_venv};

/// Runs compat.py's `suites`, in order, against a fresh all-in-one.
async fn run_suites(suites: &[&str]) {
    let Some(venv) = clients_venv() else {
        return;
    };
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack: Stack::Embedded,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/compat.py");
    let base = cluster.api.base.clone();
    let args: Vec<String> = suites.iter().map(|s| (*s).to_owned()).collect();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(venv.join("bin/python"))
            .arg(script)
            .arg(&base)
            .args(&args)
            .env("PYTHONUNBUFFERED", "1")
            .output()
    })
    .await
    .expect("join")
    .expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "client suites {suites:?} failed:\n{stdout}\n{stderr}"
    );
    let passed = format!("clients: all steps passed ({})", suites.join(" "));
    assert!(stdout.contains(&passed), "{stdout}");
    cluster.assert_no_locks().await;
}

/// One node through its whole life with the CLI (create, list and filter, set and unset, RAID
/// config, manage, provide, deploy, power, maintenance, validate, rebuild, undeploy, drivers
/// and conductors, traits, protection, rescue, inspect, clean, adopt, console, delete); boot
/// devices, NMIs and vendor passthru; Ironic bug 1405420; chassis, ports, portgroups and VIFs;
/// volume connectors and targets; the retired, lessee and network_data fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baremetal_cli_works_unchanged() {
    run_suites(&[
        "cli",
        "management",
        "failure",
        "network",
        "volume",
        "lifecycle",
    ])
    .await;
}

/// Allocations (CLI and openstacksdk), deploy templates, what Metal3 uses of API 1.74-1.95 and
/// what API 1.96-1.115 added, through the CLI; then openstacksdk's baremetal proxy (last: it
/// expects its node to be the only available one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baremetal_cli_new_apis_and_openstacksdk_work_unchanged() {
    run_suites(&[
        "allocation",
        "template",
        "metal3",
        "latest",
        "rules_ports_runbooks",
        "sdk",
    ])
    .await;
}
