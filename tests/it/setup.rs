//! Starting Ferrum as an operator does, with the built binary: bare `ferrum` with the flags of
//! `all-in-one`, a host name as the bind address, errors of environment variables named by the
//! variable, and a clear stop on a database `ferrum db-sync` has not prepared.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::json;

use crate::util::{Api, TestDb, amqp_url};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn temp_dir(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrum-{what}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("test directory");
    dir
}

/// `ferrum` with the environment cleared and stdin closed.
fn ferrum(dir: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferrum"));
    command
        .current_dir(dir)
        .env_clear()
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null());
    command
}

/// What `cargo run --release -- --config ferrum.toml` runs: bare `ferrum` takes the
/// configuration file and the flags of `all-in-one`, and a host name binds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_ferrum_takes_the_flags_of_all_in_one_and_binds_localhost() {
    let dir = temp_dir("bare");
    let port = free_port();
    let config = dir.join("site.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\nurl = \"sqlite://{}\"\n[conductor]\nhost = \"from-the-file\"\n",
            dir.join("site.sqlite").display()
        ),
    )
    .unwrap();
    let mut child = ferrum(&dir)
        .arg("--config")
        .arg(&config)
        .arg("--api-bind")
        .arg(format!("localhost:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // localhost is 127.0.0.1 here.
    let api = Api::new(format!("http://127.0.0.1:{port}"));
    api.wait_up(Duration::from_secs(30)).await;
    api.create_node(json!({"name": "n1", "driver": "fake-hardware"}))
        .await;
    let conductors = api.get("/v1/conductors").await;
    assert_eq!(
        conductors.body["conductors"][0]["hostname"],
        "from-the-file"
    );
    assert!(dir.join("site.sqlite").exists());
    let _ = child.kill();
    let output = child.wait_with_output().unwrap();
    let banner = String::from_utf8_lossy(&output.stderr);
    assert!(
        banner.contains("noauth: anyone who can reach the port can act"),
        "{banner}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bad value in a `FERRUM_*` variable is reported under the variable's name (the operator
/// set the variable, not the flag); a bad flag under the flag's.
#[test]
fn a_bad_environment_variable_is_named() {
    let dir = temp_dir("envname");
    for args in [&[][..], &["api"][..], &["all-in-one"][..]] {
        let output = ferrum(&dir)
            .args(args)
            .env("FERRUM_CONDUCTOR_WORKERS", "many")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(
                "invalid value 'many' for the environment variable FERRUM_CONDUCTOR_WORKERS"
            ),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("--conductor-workers"), "{stderr}");
    }
    let output = ferrum(&dir)
        .env("FERRUM_API_BIND", "nowhere")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("FERRUM_API_BIND") && stderr.contains("'nowhere' is not host:port"),
        "{stderr}"
    );
    let output = ferrum(&dir)
        .env("FERRUM_AUTH_STRATEGY", "kerberos")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("FERRUM_AUTH_STRATEGY")
            && stderr.contains("noauth")
            && stderr.contains("http_basic")
            && stderr.contains("keystone"),
        "{stderr}"
    );
    // Given as a flag, the same mistake is the flag's.
    let output = ferrum(&dir)
        .args(["api", "--conductor-workers", "many"])
        .env("FERRUM_CONDUCTOR_WORKERS", "8")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--conductor-workers"), "{stderr}");
    assert!(!stderr.contains("FERRUM_CONDUCTOR_WORKERS"), "{stderr}");
    // A bad variable a flag overrides is not read at all.
    let output = ferrum(&dir)
        .args(["db-sync", "--conductor-workers", "8"])
        .env("FERRUM_CONDUCTOR_WORKERS", "many")
        .env(
            "FERRUM_DATABASE_URL",
            format!("sqlite://{}", dir.join("x.sqlite").display()),
        )
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ferrum api` and `ferrum conductor` on a database without Ferrum's tables stop at start and
/// say to run `ferrum db-sync`; after it, they start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmigrated_database_asks_for_db_sync() {
    let Some(db) = TestDb::unmigrated_mysql().await else {
        return;
    };
    let Some(amqp) = amqp_url() else {
        return;
    };
    let dir = temp_dir("dbsync");
    let run = |kind: &str| {
        let mut command = ferrum(&dir);
        command
            .arg(kind)
            .env("FERRUM_DATABASE_URL", &db.url)
            .env("FERRUM_TRANSPORT_URL", &amqp)
            .env(
                "FERRUM_TRANSPORT_PREFIX",
                format!("t{}", uuid::Uuid::new_v4().simple()),
            )
            .env("FERRUM_API_BIND", "127.0.0.1:0")
            .env(
                "FERRUM_CONDUCTOR_HOST",
                format!("c-{}", uuid::Uuid::new_v4().simple()),
            );
        command
    };
    for kind in ["api", "conductor"] {
        let output = run(kind).output().unwrap();
        assert!(!output.status.success(), "{kind} started");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("is not up to date") && stderr.contains("run `ferrum db-sync`"),
            "{kind}: {stderr}"
        );
        assert!(!stderr.contains("doesn't exist"), "{kind}: {stderr}");
    }
    let output = run("db-sync").output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(db.db.pending_migrations().await.unwrap().is_empty());
    // Now the API starts: it gets as far as serving (killed once it answers).
    let port = free_port();
    let mut api = run("api")
        .env("FERRUM_API_BIND", format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Api::new(format!("http://127.0.0.1:{port}"))
        .wait_up(Duration::from_secs(30))
        .await;
    let _ = api.kill();
    let _ = api.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
