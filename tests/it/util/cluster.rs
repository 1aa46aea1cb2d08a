//! A Ferrum deployment of real processes: `ferrum api` and N `ferrum conductor`s against the test
//! database and RabbitMQ (own queue prefix), driven over HTTP like a client would.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use ferrum::{db, node::Node};
use futures::StreamExt as _;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::{
    mysql_template::migrated_mysql,
    services::{Stack, TestDb, amqp_url, random_suffix},
};

pub const VERSION: &str = "1.49";

#[derive(Debug, Clone)]
pub struct ClusterOptions {
    pub stack: Stack,
    /// Conductors of the multi-host stack (the embedded one has exactly one).
    pub conductors: usize,
    pub lock_retry_attempts: u32,
    pub lock_retry_interval: f64,
    pub rpc_timeout: f64,
    pub workers: usize,
    pub graceful_shutdown_timeout: f64,
    /// Seconds without a heartbeat after which a conductor counts as dead.
    pub heartbeat_timeout: f64,
    /// The conductor group of conductor i (`""` where the list is short).
    pub conductor_groups: Vec<String>,
    /// Seconds the API gives a client to send a request head (None: Ferrum's default).
    pub api_header_timeout: Option<f64>,
    /// A MySQL server (`mysql://user@host:port`, no database) to use instead of the shared one,
    /// e.g. a [`PrivateMariaDb`](super::PrivateMariaDb) the test kills; the cluster makes its
    /// database there. Multi-host only.
    pub mysql_url: Option<String>,
    /// An AMQP URL to use instead of the shared broker, e.g. a
    /// [`PrivateRabbit`](super::PrivateRabbit)'s. Multi-host only.
    pub amqp_url: Option<String>,
    /// Seconds each fake vendor method takes (`FERRUM_FAKE_VENDOR_DELAY`; None: 0).
    pub fake_vendor_delay: Option<f64>,
    /// More `FERRUM_*` settings for every process.
    pub env: Vec<(&'static str, String)>,
    /// Nodes written straight into the database before any process starts: many nodes, which
    /// through the API would take most of a test, all there for the conductors' first rounds.
    pub nodes: Vec<Node>,
    /// Where a process (by name: `api`, `conductor0`, ...) reaches MySQL and RabbitMQ, if not
    /// where the others do: e.g. through a proxy of its own that the test can blackhole.
    /// Multi-host only.
    pub links: Vec<(String, Links)>,
}

/// The provision states a node rests in: one that rests unlocked in another than the one waited
/// for will not get there by itself.
pub const STABLE_STATES: [&str; 6] = [
    "active",
    "deploy failed",
    "available",
    "manageable",
    "clean failed",
    "enroll",
];

/// One process's own way to the database server and the broker.
#[derive(Debug, Clone)]
pub struct Links {
    /// `mysql://user@host:port`, no database: the cluster's database on it is used.
    pub mysql_server: String,
    pub amqp_url: String,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            stack: Stack::MultiHost,
            conductors: 2,
            lock_retry_attempts: 1,
            lock_retry_interval: 0.2,
            rpc_timeout: 5.0,
            workers: 50,
            graceful_shutdown_timeout: 5.0,
            heartbeat_timeout: 10.0,
            conductor_groups: Vec::new(),
            api_header_timeout: None,
            mysql_url: None,
            amqp_url: None,
            fake_vendor_delay: None,
            env: Vec::new(),
            nodes: Vec::new(),
            links: Vec::new(),
        }
    }
}

struct Proc {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

pub struct Cluster {
    pub stack: Stack,
    pub db: TestDb,
    pub api: Api,
    pub conductor_hosts: Vec<String>,
    conductor_groups: Vec<String>,
    procs: Vec<Proc>,
    env: Vec<(String, String)>,
    links: Vec<(String, Links)>,
    dir: PathBuf,
}

/// The test's part as a supervisor of the conductors (systemd's `Restart=on-failure`): a
/// conductor that exits by itself (one that could not renew its lease stops its work and exits,
/// as designed, for its next start to recover what it held) is started again a second later,
/// and each such exit is written down. For scenarios where an outage longer than the lease is a
/// recovery to measure, not a failure.
pub struct Supervisor {
    /// Per conductor: when to start it again, once it has exited.
    restart_at: Vec<Option<Instant>>,
    started: Instant,
    /// "<seconds into the run>: <process> exited by itself (<status>)".
    pub exits: Vec<String>,
}

impl Supervisor {
    /// A supervisor's delay before it starts a process that exited by itself again.
    const RESTART_DELAY: Duration = Duration::from_secs(1);
    const ROUND: Duration = Duration::from_millis(200);

    pub fn new(cluster: &Cluster) -> Supervisor {
        Supervisor {
            restart_at: vec![None; cluster.conductor_hosts.len()],
            started: Instant::now(),
            exits: Vec::new(),
        }
    }

    /// One round: notes the conductors that exited, starts again those whose delay is over.
    pub fn tend(&mut self, cluster: &mut Cluster) {
        for i in 0..self.restart_at.len() {
            let name = cluster.conductor_process(i);
            match (self.restart_at[i], cluster.exit_status(&name)) {
                (None, Some(status)) => {
                    self.exits.push(format!(
                        "{:.1}s: {name} exited by itself ({status})",
                        self.started.elapsed().as_secs_f64()
                    ));
                    self.restart_at[i] = Some(Instant::now() + Self::RESTART_DELAY);
                }
                (Some(at), Some(_)) if Instant::now() >= at => {
                    cluster.spawn_conductor(i);
                    self.restart_at[i] = None;
                }
                _ => {}
            }
        }
    }

    /// Awaits `work`, tending the conductors meanwhile.
    pub async fn during<T>(&mut self, cluster: &mut Cluster, work: impl Future<Output = T>) -> T {
        let mut work = std::pin::pin!(work);
        loop {
            self.tend(cluster);
            tokio::select! {
                out = &mut work => return out,
                () = tokio::time::sleep(Self::ROUND) => {}
            }
        }
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl Cluster {
    /// Starts the processes and waits until the API answers and every conductor is alive.
    /// None when a service is unreachable (already announced by `services`).
    pub async fn start(options: ClusterOptions) -> Option<Cluster> {
        let id = random_suffix();
        let (db, transport, conductors) = match options.stack {
            Stack::Embedded => (TestDb::sqlite_file(), "local".to_owned(), 1),
            Stack::MultiHost => {
                let amqp = match &options.amqp_url {
                    Some(url) => url.clone(),
                    None => amqp_url()?,
                };
                let db = match &options.mysql_url {
                    Some(server) => TestDb::on_server(server).await,
                    None => migrated_mysql().await?,
                };
                (db, amqp, options.conductors)
            }
        };
        if !options.nodes.is_empty() {
            insert_nodes(&db, options.stack, &options.nodes).await;
        }
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("ferrum-it-{id}"));
        std::fs::create_dir_all(&dir).expect("log dir");
        let mut env: Vec<(String, String)> = [
            ("FERRUM_DATABASE_URL", db.url.clone()),
            ("FERRUM_DATABASE_POOL_SIZE", "8".to_owned()),
            ("FERRUM_TRANSPORT_URL", transport),
            ("FERRUM_TRANSPORT_PREFIX", format!("t{id}")),
            ("FERRUM_API_BIND", format!("127.0.0.1:{port}")),
            // Where a network-booted ramdisk calls back (`pxe`, `ipxe`).
            ("FERRUM_API_URL", format!("http://127.0.0.1:{port}")),
            (
                "FERRUM_LOCK_RETRY_ATTEMPTS",
                options.lock_retry_attempts.to_string(),
            ),
            (
                "FERRUM_LOCK_RETRY_INTERVAL",
                options.lock_retry_interval.to_string(),
            ),
            ("FERRUM_RPC_TIMEOUT", options.rpc_timeout.to_string()),
            ("FERRUM_HEARTBEAT_INTERVAL", "1".to_owned()),
            (
                "FERRUM_HEARTBEAT_TIMEOUT",
                options.heartbeat_timeout.to_string(),
            ),
            ("FERRUM_CONDUCTOR_WORKERS", options.workers.to_string()),
            (
                "FERRUM_GRACEFUL_SHUTDOWN_TIMEOUT",
                options.graceful_shutdown_timeout.to_string(),
            ),
            ("RUST_LOG", "info,ferrum=debug".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if let Some(timeout) = options.api_header_timeout {
            env.push(("FERRUM_API_HEADER_TIMEOUT".to_owned(), timeout.to_string()));
        }
        if let Some(delay) = options.fake_vendor_delay {
            env.push(("FERRUM_FAKE_VENDOR_DELAY".to_owned(), delay.to_string()));
        }
        env.extend(
            options
                .env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone())),
        );
        let mut cluster = Cluster {
            stack: options.stack,
            db,
            api: Api::new(format!("http://127.0.0.1:{port}")),
            conductor_hosts: (1..=conductors).map(|i| format!("c{i}-{id}")).collect(),
            conductor_groups: options.conductor_groups.clone(),
            procs: Vec::new(),
            env,
            links: options.links.clone(),
            dir,
        };
        match options.stack {
            Stack::Embedded => cluster.spawn_conductor(0),
            Stack::MultiHost => {
                for i in 0..conductors {
                    cluster.spawn_conductor(i);
                }
                cluster.spawn_api();
            }
        }
        cluster.wait_ready().await;
        Some(cluster)
    }

    /// The process that runs conductor `i`: its own in the multi-host stack, the one
    /// all-in-one process (API included) in the embedded stack.
    pub fn conductor_process(&self, i: usize) -> String {
        match self.stack {
            Stack::Embedded => "all-in-one".to_owned(),
            Stack::MultiHost => format!("conductor{i}"),
        }
    }

    /// A `ferrum` command with this cluster's environment, for a process the test runs itself.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrum"));
        cmd.args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        cmd
    }

    fn spawn(&mut self, name: &str, args: &[&str], extra_env: &[(&str, String)]) {
        let log = self.dir.join(format!("{name}.log"));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file");
        let err = out.try_clone().expect("log file");
        let links: Vec<(&str, String)> = self
            .links
            .iter()
            .find(|(process, _)| process == name)
            .map(|(_, links)| {
                let database = self.db.url.rsplit_once('/').map_or("", |(_, d)| d);
                vec![
                    // Over TCP all the way: on loopback the MySQL client would otherwise move
                    // to the server's Unix socket, around the link.
                    (
                        "FERRUM_DATABASE_URL",
                        format!("{}/{database}?prefer_socket=false", links.mysql_server),
                    ),
                    ("FERRUM_TRANSPORT_URL", links.amqp_url.clone()),
                ]
            })
            .unwrap_or_default();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrum"));
        cmd.args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .envs(links.iter().map(|(k, v)| (*k, v)))
            .envs(extra_env.iter().map(|(k, v)| (*k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = cmd.spawn().expect("spawn ferrum");
        self.procs.retain(|p| p.name != name);
        self.procs.push(Proc {
            name: name.to_owned(),
            child: Some(child),
            log,
        });
    }

    /// Starts conductor `i` (again, after a kill or stop); in the embedded stack, the
    /// all-in-one process.
    pub fn spawn_conductor(&mut self, i: usize) {
        let host = self.conductor_hosts[i].clone();
        let args: &[&str] = match self.stack {
            Stack::Embedded => &["all-in-one"],
            Stack::MultiHost => &["conductor"],
        };
        let name = self.conductor_process(i);
        let group = self.conductor_groups.get(i).cloned().unwrap_or_default();
        self.spawn(
            &name,
            args,
            &[
                ("FERRUM_CONDUCTOR_HOST", host),
                ("FERRUM_CONDUCTOR_GROUP", group),
            ],
        );
    }

    /// Starts a process again after it was killed or stopped, and waits until it has registered
    /// anew (a killed conductor's old row still looks alive for a while) and the API answers.
    pub async fn restart_conductor(&mut self, i: usize) {
        let since = ferrum::node::now();
        self.spawn_conductor(i);
        self.wait_registered(i, since).await;
    }

    /// Waits until conductor `i` has registered since `since` and the API answers.
    pub async fn wait_registered(&self, i: usize, since: chrono::NaiveDateTime) {
        let host = self.conductor_hosts[i].clone();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let registered = db::conductors::get(&self.db.db, &host)
                .await
                .is_ok_and(|c| c.online && c.updated_at >= since);
            if registered && self.api.try_get("/").await.is_some() {
                return;
            }
            if Instant::now() > deadline {
                self.dump_logs();
                panic!("conductor {host} did not come back");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Starts the API process (again, after a kill or stop). Multi-host only.
    pub fn spawn_api(&mut self) {
        self.spawn("api", &["api"], &[]);
    }

    /// Starts the API process again (after a kill) and waits until it answers.
    pub async fn restart_api(&mut self) {
        self.spawn_api();
        self.api.wait_up(Duration::from_secs(30)).await;
    }

    /// Starts one more conductor process, named `name` (for `kill`, `log_of`, ...), serving as
    /// `host`, which need not be one of `conductor_hosts`; stopped with the cluster.
    pub fn spawn_conductor_as(&mut self, name: &str, host: &str) {
        self.spawn_conductor_with(name, host, &[]);
    }

    /// [`spawn_conductor_as`](Self::spawn_conductor_as) with settings of its own over the
    /// cluster's.
    pub fn spawn_conductor_with(&mut self, name: &str, host: &str, env: &[(&str, String)]) {
        let mut all = vec![
            ("FERRUM_CONDUCTOR_HOST", host.to_owned()),
            ("FERRUM_CONDUCTOR_GROUP", String::new()),
        ];
        all.extend(env.iter().cloned());
        self.spawn(name, &["conductor"], &all);
    }

    /// The exit status of process `name` if it has exited, without waiting.
    pub fn exit_status(&mut self, name: &str) -> Option<std::process::ExitStatus> {
        self.child(name).and_then(|c| c.try_wait().ok().flatten())
    }

    /// The names of every process started so far (for `log_of`).
    pub fn process_names(&self) -> Vec<String> {
        self.procs.iter().map(|p| p.name.clone()).collect()
    }

    pub async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let api_up = self.api.try_get("/").await.is_some();
            // Ask the database only once the API is up: the all-in-one process creates its file.
            let alive = if api_up {
                db::conductors::list_alive(&self.db.db, Duration::from_secs(10))
                    .await
                    .map(|c| c.len())
                    .unwrap_or(0)
            } else {
                0
            };
            if api_up && alive == self.conductor_hosts.len() {
                return;
            }
            if Instant::now() > deadline {
                self.dump_logs();
                panic!("cluster not ready: api_up={api_up}, conductors alive={alive}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn child(&mut self, name: &str) -> Option<&mut Child> {
        self.procs
            .iter_mut()
            .find(|p| p.name == name)
            .and_then(|p| p.child.as_mut())
    }

    /// SIGKILL: no chance to clean up.
    pub fn kill(&mut self, name: &str) {
        if let Some(child) = self.child(name) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, without waiting for the process to exit.
    pub fn signal_term(&mut self, name: &str) {
        self.signal(name, "TERM");
    }

    /// Sends the signal `signal` (`TERM`, `STOP`, `CONT`, ...) to process `name`.
    pub fn signal(&mut self, name: &str, signal: &str) {
        let child = self.child(name).expect("process");
        let pid = child.id().to_string();
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("kill");
        assert!(sent.success(), "kill -{signal} {name}");
    }

    /// SIGTERM, then waits for the process to exit by itself.
    pub async fn terminate(&mut self, name: &str) -> std::process::ExitStatus {
        self.signal_term(name);
        self.wait_exit(name).await
    }

    /// Waits (at most 30 s) for the process to exit by itself.
    pub async fn wait_exit(&mut self, name: &str) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child(name).and_then(|c| c.try_wait().ok().flatten()) {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not exit after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The conductor (index into `conductor_hosts`) that owns `node_uuid`, as the node's lock shows
    /// after an operation, or by asking the hash ring as the API does.
    pub fn conductor_index(&self, host: &str) -> usize {
        self.conductor_hosts
            .iter()
            .position(|h| h == host)
            .expect("known conductor")
    }

    /// The conductor that owns a `fake-hardware` node of the default group, on the rings the API
    /// and take-over build (`Rings`), over every conductor of the cluster as it registers.
    pub fn owner_of(&self, node_uuid: &str) -> String {
        use ferrum::rpc::{
            Route,
            topology::{Member, Rings},
        };
        let drivers = ferrum::drivers::Registry::builtin(&Default::default()).names();
        let rings = Rings::new(
            self.conductor_hosts
                .iter()
                .enumerate()
                .map(|(i, host)| Member {
                    host,
                    group: self.conductor_groups.get(i).map_or("", String::as_str),
                    drivers: &drivers,
                }),
        );
        let route = Route {
            uuid: node_uuid,
            driver: "fake-hardware",
            group: "",
        };
        rings.owner(&route).expect("ring").to_owned()
    }

    /// Every node unlocked: the invariant each test ends on.
    pub async fn assert_no_locks(&self) {
        assert_no_locks(&self.db.db).await;
    }

    /// The value of one of the processes' environment variables.
    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The file process `name` logs to (every start of that name appends to it).
    pub fn log_path(&self, name: &str) -> Option<PathBuf> {
        self.procs
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.log.clone())
    }

    /// Everything process `name` has logged so far.
    pub fn log_of(&self, name: &str) -> String {
        self.procs
            .iter()
            .find(|p| p.name == name)
            .map(|p| std::fs::read_to_string(&p.log).unwrap_or_default())
            .unwrap_or_default()
    }

    pub fn dump_logs(&self) {
        for p in &self.procs {
            let text = std::fs::read_to_string(&p.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!("----- {} ({}) -----", p.name, p.log.display());
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dump_logs();
        }
        for p in &mut self.procs {
            if let Some(mut child) = p.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Writes `nodes` into `db` (eight at a time) before the processes start; an all-in-one process
/// finds its SQLite file migrated already, as after a restart.
async fn insert_nodes(db: &TestDb, stack: Stack, nodes: &[Node]) {
    if stack == Stack::Embedded {
        db.db.migrate().await.expect("migrate the SQLite file");
    }
    let inserts = nodes.iter().map(|node| async move {
        db::nodes::insert(&db.db, node)
            .await
            .expect("insert a node")
    });
    futures::stream::iter(inserts)
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
}

/// Every node of `db` unlocked.
pub async fn assert_no_locks(db: &db::Db) {
    let held: Vec<_> = db::nodes::list(db, 1000, None)
        .await
        .expect("list")
        .into_iter()
        .filter(|n| n.reservation.is_some())
        .map(|n| (n.uuid, n.reservation))
        .collect();
    assert!(held.is_empty(), "locks still held: {held:?}");
}

/// An HTTP client speaking to the API at version 1.49 (or another, with `request_at`).
#[derive(Clone)]
pub struct Api {
    pub base: String,
    client: reqwest::Client,
    /// HTTP Basic credentials sent with every request (`auth_strategy = http_basic`).
    credentials: Option<(String, String)>,
}

pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    /// The `Location` header, if any.
    pub location: Option<String>,
}

/// The `Location` header of a response's `headers`.
pub fn location_of(headers: &reqwest::header::HeaderMap) -> Option<String> {
    headers
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

impl Reply {
    /// The faultstring of Ironic's error envelope.
    pub fn fault(&self) -> String {
        let text = self.body["error_message"]
            .as_str()
            .unwrap_or_else(|| panic!("no error envelope in {}", self.body));
        let inner: Value = serde_json::from_str(text).expect("error_message is JSON text");
        inner["faultstring"]
            .as_str()
            .expect("faultstring")
            .to_owned()
    }
}

impl Api {
    pub fn new(base: String) -> Api {
        Api {
            base,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("http client"),
            credentials: None,
        }
    }

    /// The same API, sending `user` and `password` with every request.
    pub fn with_basic_auth(&self, user: &str, password: &str) -> Api {
        Api {
            credentials: Some((user.to_owned(), password.to_owned())),
            ..self.clone()
        }
    }

    pub async fn request(&self, method: Method, path: &str, body: Option<Value>) -> Reply {
        self.request_at(VERSION, method, path, body).await
    }

    pub async fn request_at(
        &self,
        version: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Reply {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("X-OpenStack-Ironic-API-Version", version);
        if let Some((user, password)) = &self.credentials {
            req = req.basic_auth(user, Some(password));
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("HTTP request");
        let status = resp.status();
        let location = location_of(resp.headers());
        let text = resp.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Reply {
            status,
            body,
            location,
        }
    }

    /// Waits until the API answers, or panics after `limit`.
    pub async fn wait_up(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.try_get("/").await.is_none() {
            assert!(
                Instant::now() < deadline,
                "the API at {} never answered",
                self.base
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn try_get(&self, path: &str) -> Option<Value> {
        let resp = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .ok()?;
        resp.status().is_success().then_some(())?;
        resp.json().await.ok()
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.request(Method::GET, path, None).await
    }

    pub async fn node(&self, ident: &str) -> Value {
        let r = self.get(&format!("/v1/nodes/{ident}")).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        r.body
    }

    pub async fn create_node(&self, body: Value) -> Value {
        let r = self.create_node_reply(body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.body
    }

    /// Creates node `node_uuid`'s port of `mac`: 201.
    pub async fn add_port(&self, node_uuid: &str, mac: &str) {
        let body = serde_json::json!({"node_uuid": node_uuid, "address": mac});
        let r = self.request(Method::POST, "/v1/ports", Some(body)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    }

    pub async fn create_node_reply(&self, body: Value) -> Reply {
        self.request(Method::POST, "/v1/nodes", Some(body)).await
    }

    pub async fn patch(&self, ident: &str, ops: Value) -> Reply {
        self.request(Method::PATCH, &format!("/v1/nodes/{ident}"), Some(ops))
            .await
    }

    pub async fn provision(&self, ident: &str, target: &str) -> Reply {
        self.request(
            Method::PUT,
            &format!("/v1/nodes/{ident}/states/provision"),
            Some(serde_json::json!({ "target": target })),
        )
        .await
    }

    pub async fn power(&self, ident: &str, target: &str) -> Reply {
        self.request(
            Method::PUT,
            &format!("/v1/nodes/{ident}/states/power"),
            Some(serde_json::json!({ "target": target })),
        )
        .await
    }

    /// Asks for `target` and asserts 202.
    pub async fn accepted(&self, ident: &str, target: &str) {
        let r = self.provision(ident, target).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{target}: {}", r.body);
    }

    /// Asks for `target` until it is accepted, retrying 503 NoFreeConductorWorker as a client
    /// of Ironic does: a worker frees its slot just after its last write, so a node seen in its
    /// new state may briefly still occupy one.
    pub async fn accepted_when_a_worker_is_free(&self, ident: &str, target: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let r = self.provision(ident, target).await;
            if r.status == StatusCode::ACCEPTED {
                return;
            }
            assert_eq!(
                r.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{target}: {}",
                r.body
            );
            assert!(
                Instant::now() < deadline,
                "no worker slot was freed for {ident}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls until the node's power state is `want` with no change pending and its lock
    /// released.
    pub async fn wait_power(&self, ident: &str, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let node = self.node(ident).await;
            if node["power_state"] == want
                && node["target_power_state"].is_null()
                && node["reservation"].is_null()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "node {ident} did not reach {want}: {node}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls until the node is in `state` with its lock released, then returns it.
    pub async fn wait_for(&self, ident: &str, state: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let node = self.node(ident).await;
            if node["provision_state"] == state && node["reservation"].is_null() {
                return node;
            }
            assert!(
                Instant::now() < deadline,
                "node {ident} did not reach {state}: {node}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls every `poll` until node `uuid` is in `state` with its lock released, and returns
    /// it; panics with `context()` (the logs worth reading) as soon as it rests unlocked in
    /// another stable state, or when `limit` passes.
    pub async fn wait_settled(
        &self,
        uuid: &str,
        state: &str,
        limit: Duration,
        poll: Duration,
        context: impl Fn() -> String,
    ) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let node = self.node(uuid).await;
            let now = node["provision_state"].as_str().unwrap_or_default();
            let unlocked = node["reservation"].is_null();
            if now == state && unlocked {
                return node;
            }
            let stuck = STABLE_STATES.contains(&now) && unlocked;
            if stuck || Instant::now() >= deadline {
                panic!(
                    "node {uuid} is in {now}, not {state} (within {limit:?}): {node}\n{}",
                    context()
                );
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// Polls the allocation `uuid` (at API `version`) until it is no longer `allocating`, as
    /// clients wait for it (`baremetal allocation create --wait`), and returns it.
    pub async fn wait_allocation(&self, version: &str, uuid: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        let path = format!("/v1/allocations/{uuid}");
        loop {
            let r = self.request_at(version, Method::GET, &path, None).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            if r.body["state"] != "allocating" {
                return r.body;
            }
            assert!(
                Instant::now() < deadline,
                "allocation {uuid} is still allocating: {}",
                r.body
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// enroll → manage → provide → available, with the given extra fields on create.
    pub async fn available_node(&self, mut body: Value) -> Value {
        if body.get("driver").is_none() {
            body["driver"] = "fake-hardware".into();
        }
        let node = self.create_node(body).await;
        let uuid = node["uuid"].as_str().expect("uuid").to_owned();
        assert_eq!(node["provision_state"], "enroll");
        self.accepted_when_a_worker_is_free(&uuid, "manage").await;
        self.wait_for(&uuid, "manageable").await;
        self.accepted_when_a_worker_is_free(&uuid, "provide").await;
        self.wait_for(&uuid, "available").await
    }
}
