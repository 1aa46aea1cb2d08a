//! The service in process: the API router and one conductor over the in-process transport on a
//! fresh SQLite file, wired by [`ferrum::service::AllInOne`] exactly as `ferrum all-in-one` is,
//! with requests handed to the router (`tower::ServiceExt::oneshot`) instead of a socket
//! (crates.io's `src/tests/util/test_app.rs`, axum's `examples/testing`). The same router is
//! also served on a loopback port of this process ([`TestApp::api`]), as `ferrum all-in-one`
//! serves it, for the tests written against the HTTP client [`Api`] (links, clients, agents).
//!
//! Nothing here waits on a clock: [`TestApp::settle`] waits until the conductor's workers are
//! done, and a [`DeployGate`] (with [`TestAppBuilder::gate_deploys`]) holds every fake deploy in
//! `deploying`, its lock held, until the test lets it go.
//!
//! Dropping a `TestApp` asserts that no node is left reserved. Drop cannot await, so it reads
//! the database file with a synchronous diesel `SqliteConnection` of its own: a test cannot
//! forget the check. [`TestApp::shutdown`] stops the conductor gracefully first, for tests about
//! what a stop does.

use std::{path::PathBuf, time::Duration};

use axum::{
    Router,
    body::Body,
    http::{Method, Request, header},
};
use diesel::{
    Connection as _, QueryableByName, RunQueryDsl as _, sql_types, sqlite::SqliteConnection,
};
use ferrum::{
    api,
    conductor::Ctx,
    config::Config,
    db::Db,
    drivers::{Registry, fake::DeployGate},
    service::AllInOne,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::{
    cluster::{Api, Reply, VERSION, assert_no_locks, location_of},
    services::random_suffix,
};

/// How long [`TestApp::settle`] waits for running work before it fails the test.
const SETTLE_LIMIT: Duration = Duration::from_secs(20);

/// Builds a [`TestApp`]: the settings of [`Cluster`](super::Cluster)'s defaults, changed with
/// [`configure`](Self::configure).
pub struct TestAppBuilder {
    config: Config,
    gate: Option<DeployGate>,
}

impl TestAppBuilder {
    /// Changes the configuration the app starts with (its database URL and host are set).
    pub fn configure(mut self, change: impl FnOnce(&mut Config)) -> Self {
        change(&mut self.config);
        self
    }

    /// Holds every fake deploy at a [`DeployGate`] (see [`TestApp::gate`]).
    pub fn gate_deploys(mut self) -> Self {
        self.gate = Some(DeployGate::new());
        self
    }

    pub async fn start(self) -> TestApp {
        let TestAppBuilder { mut config, gate } = self;
        let dir = std::env::temp_dir().join(format!("ferrum-app-{}", random_suffix()));
        std::fs::create_dir_all(&dir).expect("test directory");
        let file = dir.join("ferrum.sqlite");
        config.database.url = format!("sqlite://{}", file.display());
        config.validate().expect("a valid test configuration");
        let drivers = match &gate {
            Some(gate) => Registry::with_deploy_gate(&config.conductor, gate.clone()),
            None => Registry::builtin(&config.conductor),
        };
        let shutdown = CancellationToken::new();
        let all = AllInOne::start(&config, drivers, shutdown.clone())
            .await
            .expect("the service starts in process");
        let router = api::router(all.api_state());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let address = listener.local_addr().expect("the port's address");
        // A token of its own: the API still answers after `shutdown` stopped the conductor.
        let serving = CancellationToken::new();
        tokio::spawn(ferrum::http_server::serve(
            listener,
            None,
            router.clone(),
            config.api.header_read_timeout,
            serving.clone(),
        ));
        TestApp {
            router,
            api: Api::new(format!("http://{address}")),
            db: all.conductor().db.clone(),
            host: all.conductor().host.clone(),
            all: Some(all),
            shutdown,
            serving,
            gate,
            file,
            dir,
        }
    }
}

/// The API and one conductor in this process (see the module doc).
pub struct TestApp {
    router: Router,
    api: Api,
    db: Db,
    host: String,
    all: Option<AllInOne>,
    shutdown: CancellationToken,
    /// Stops the loopback listener of [`api`](Self::api).
    serving: CancellationToken,
    gate: Option<DeployGate>,
    file: PathBuf,
    dir: PathBuf,
}

impl TestApp {
    /// The settings of the process-based suite: one lock attempt, a 5 s RPC timeout, 50
    /// workers, a 5 s graceful shutdown, heartbeats every second.
    pub fn builder() -> TestAppBuilder {
        let mut config = Config::default();
        config.database.pool_size = 8;
        config.transport.rpc_timeout = Duration::from_secs(5);
        let conductor = &mut config.conductor;
        conductor.host = format!("c1-{}", random_suffix());
        conductor.lock_retry_attempts = 1;
        conductor.lock_retry_interval = Duration::from_millis(200);
        conductor.heartbeat_interval = Duration::from_secs(1);
        conductor.heartbeat_timeout = Duration::from_secs(10);
        conductor.workers = 50;
        conductor.graceful_shutdown_timeout = Duration::from_secs(5);
        TestAppBuilder { config, gate: None }
    }

    pub async fn start() -> TestApp {
        TestApp::builder().start().await
    }

    fn all(&self) -> &AllInOne {
        self.all.as_ref().expect("the app is running")
    }

    /// The conductor's context: its database, host, drivers and workers (until
    /// [`shutdown`](Self::shutdown)).
    pub fn conductor(&self) -> &Ctx {
        self.all().conductor()
    }

    /// An HTTP client of the API this app serves on its loopback port.
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// Every node unlocked (what Drop asserts too, said where the test ends).
    pub async fn assert_no_locks(&self) {
        assert_no_locks(&self.db).await;
    }

    /// The database, also after [`shutdown`](Self::shutdown) (as is the router: the API reads
    /// nodes without a conductor).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The conductor's host name (what `reservation` says while it holds a node).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The gate every fake deploy waits at; the app must be built with `gate_deploys`.
    pub fn gate(&self) -> &DeployGate {
        self.gate
            .as_ref()
            .expect("a TestApp built with gate_deploys()")
    }

    /// Sends `request` to the router and reads the status and the JSON body (`Null` when empty,
    /// a string when not JSON).
    pub async fn send(&self, request: Request<Body>) -> Reply {
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("the router is infallible");
        let status = response.status();
        let location = location_of(response.headers());
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Reply {
            status,
            body,
            location,
        }
    }

    /// A JSON request at microversion `version`.
    pub async fn request_at(
        &self,
        version: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Reply {
        let builder = Request::builder()
            .method(method)
            .uri(path)
            .header("X-OpenStack-Ironic-API-Version", version);
        let request = match body {
            Some(body) => builder
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.to_string())),
            None => builder.body(Body::empty()),
        }
        .expect("a valid request");
        self.send(request).await
    }

    /// A JSON request at the suite's microversion (1.49).
    pub async fn request(&self, method: Method, path: &str, body: Option<Value>) -> Reply {
        self.request_at(VERSION, method, path, body).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.request(Method::GET, path, None).await
    }

    pub async fn node(&self, ident: &str) -> Value {
        let r = self.get(&format!("/v1/nodes/{ident}")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }

    pub async fn create_node(&self, body: Value) -> Value {
        let r = self.request(Method::POST, "/v1/nodes", Some(body)).await;
        assert_eq!(r.status, 201, "{}", r.body);
        r.body
    }

    pub async fn patch(&self, ident: &str, ops: Value) -> Reply {
        self.request(Method::PATCH, &format!("/v1/nodes/{ident}"), Some(ops))
            .await
    }

    pub async fn provision(&self, ident: &str, target: &str) -> Reply {
        let body = serde_json::json!({ "target": target });
        let path = format!("/v1/nodes/{ident}/states/provision");
        self.request(Method::PUT, &path, Some(body)).await
    }

    pub async fn power(&self, ident: &str, target: &str) -> Reply {
        let body = serde_json::json!({ "target": target });
        let path = format!("/v1/nodes/{ident}/states/power");
        self.request(Method::PUT, &path, Some(body)).await
    }

    /// Asks for `target` and asserts 202.
    pub async fn accepted(&self, ident: &str, target: &str) {
        let r = self.provision(ident, target).await;
        assert_eq!(r.status, 202, "{target}: {}", r.body);
    }

    /// Waits until the conductor has no work running: every worker has written its outcome,
    /// released its lock and freed its slot. A deploy held at the gate never finishes: release
    /// it first.
    pub async fn settle(&self) {
        let tracker = &self.conductor().tracker;
        // A closed tracker still takes new work; `wait` needs it closed to return.
        tracker.close();
        let settled = tokio::time::timeout(SETTLE_LIMIT, tracker.wait()).await;
        tracker.reopen();
        assert!(
            settled.is_ok(),
            "the conductor's work did not finish within {SETTLE_LIMIT:?}"
        );
    }

    /// Settles, then asserts the node is in `state` with its lock released, and returns it.
    pub async fn wait_for(&self, ident: &str, state: &str) -> Value {
        self.settle().await;
        let node = self.node(ident).await;
        assert_eq!(node["provision_state"], state, "{node}");
        assert_eq!(node["reservation"], Value::Null, "{node}");
        node
    }

    /// enroll → manage → provide → available, with the given fields on create.
    pub async fn available_node(&self, mut body: Value) -> Value {
        if body.get("driver").is_none() {
            body["driver"] = "fake-hardware".into();
        }
        let node = self.create_node(body).await;
        let uuid = node["uuid"].as_str().expect("uuid").to_owned();
        assert_eq!(node["provision_state"], "enroll");
        self.accepted(&uuid, "manage").await;
        self.wait_for(&uuid, "manageable").await;
        self.accepted(&uuid, "provide").await;
        self.wait_for(&uuid, "available").await
    }

    /// Stops the conductor gracefully, as SIGTERM stops `ferrum all-in-one` (work still running
    /// after `graceful_shutdown_timeout` is failed and its locks released), and asserts the stop
    /// succeeded. Drop still checks the reservations afterwards.
    pub async fn shutdown(&mut self) {
        let all = self.all.take().expect("the app is running");
        all.stop().await.expect("the conductor stops cleanly");
    }

    /// The nodes still reserved, read with a connection of its own (usable from Drop).
    fn reserved_nodes(&self) -> Vec<(String, String)> {
        #[derive(QueryableByName)]
        struct Held {
            #[diesel(sql_type = sql_types::Text)]
            uuid: String,
            #[diesel(sql_type = sql_types::Text)]
            reservation: String,
        }
        let path = self.file.to_str().expect("a UTF-8 temp path");
        let mut conn = SqliteConnection::establish(path).expect("open the test database");
        diesel::sql_query("PRAGMA busy_timeout = 10000")
            .execute(&mut conn)
            .expect("busy timeout");
        diesel::sql_query("SELECT uuid, reservation FROM nodes WHERE reservation IS NOT NULL")
            .load::<Held>(&mut conn)
            .expect("read reservations")
            .into_iter()
            .map(|h| (h.uuid, h.reservation))
            .collect()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // A failing test has already said what went wrong: no second panic.
        let reserved = (!std::thread::panicking()).then(|| self.reserved_nodes());
        // The conductor's tasks end with the test's runtime; stop them taking work meanwhile.
        self.shutdown.cancel();
        self.serving.cancel();
        drop(self.all.take());
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(reserved) = reserved {
            assert!(
                reserved.is_empty(),
                "the test left nodes reserved: {reserved:?}"
            );
        }
    }
}
