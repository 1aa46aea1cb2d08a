//! The real OpenStack clients against Ferrum: tests/clients/compat.py drives the `baremetal` CLI
//! (python-ironicclient) and openstacksdk's baremetal proxy with no auth against a fresh
//! all-in-one, asserting states and fields at every step, the bug-1405420 scenario included.

use crate::util::{Cluster, ClusterOptions, Stack, clients_venv};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baremetal_cli_and_openstacksdk_work_unchanged() {
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
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(venv.join("bin/python"))
            .arg(script)
            .arg(&base)
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
        "client suite failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("clients: all steps passed"), "{stdout}");
    cluster.assert_no_locks().await;
}
