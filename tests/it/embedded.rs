//! What only the embedded stack has: the zero-setup start and its one-process-per-file rule.

use std::time::Duration;

use serde_json::json;

use crate::util::{Api, Cluster, ClusterOptions, Stack};

/// `ferrum` with no subcommand is the all-in-one service on `ferrum.sqlite` in the working
/// directory, with nothing else running: what `cargo run --release` gives a new user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferrum_alone_serves_the_api_on_an_sqlite_file_in_the_working_directory() {
    let dir = std::env::temp_dir().join(format!("ferrum-alone-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ferrum"))
        .current_dir(&dir)
        .env_clear()
        .env("FERRUM_API_BIND", format!("127.0.0.1:{port}"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let api = Api::new(format!("http://127.0.0.1:{port}"));
    api.wait_up(Duration::from_secs(30)).await;
    let node = api
        .create_node(json!({"name": "first", "driver": "fake-hardware"}))
        .await;
    assert_eq!(node["provision_state"], "enroll");
    api.accepted("first", "manage").await;
    api.wait_for("first", "manageable").await;
    assert!(
        dir.join("ferrum.sqlite").exists(),
        "the database file is in the working directory"
    );
    let _ = child.kill();
    let output = child.wait_with_output().unwrap();
    let banner = String::from_utf8_lossy(&output.stderr);
    assert!(
        banner.contains("--os-endpoint http://127.0.0.1:"),
        "{banner}"
    );
    assert!(banner.contains("local (in-process)"), "{banner}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two all-in-one processes on one SQLite file would each believe they own every node; the
/// second is refused at start with a message that says why, and the first keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_all_in_one_on_the_same_file_is_refused() {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack: Stack::Embedded,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let output = cluster
        .command(&["all-in-one"])
        .env("FERRUM_API_BIND", format!("127.0.0.1:{port}"))
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("another ferrum process is already using the database file"),
        "{stderr}"
    );
    cluster
        .api
        .available_node(json!({"name": "still-served"}))
        .await;
    cluster.assert_no_locks().await;
}
