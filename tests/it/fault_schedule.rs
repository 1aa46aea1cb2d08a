//! The randomized fault schedule (issue 25): not in the default `cargo test`; `.ci/run` runs it
//! for three minutes. Two defects it found are fixed and have tests of their own in `wedged.rs`
//! and `limits.rs`: a fenced conductor's write decided again once its database link came back,
//! and an API woken from a pause that closed keep-alive connections whose request had arrived.
//!
//! ```sh
//! FERRUM_FAULT_MINUTES=3 FERRUM_FAULT_SEED=42 cargo test --test it fault_schedule -- --ignored --nocapture
//! ```
//!
//! An API and three conductors on a private MariaDB and a private RabbitMQ, each process's links
//! to them through a TCP proxy of its own on loopback ([`LinkProxy`]). For
//! `FERRUM_FAULT_MINUTES` (default 3), one fault after another, chosen at random from a seed
//! (`FERRUM_FAULT_SEED`, else random; printed first, so that a failing run can be replayed):
//! kill -9, SIGTERM or SIGSTOP (then SIGCONT) of any Ferrum process, MariaDB or RabbitMQ killed
//! and started again or paused (SIGSTOP/SIGCONT), one process's database or broker link
//! blackholed (connections held open, nothing forwarded) for a while. The test is also the
//! processes' supervisor: a process that exits by itself (a conductor that lost its lease) is
//! started again a second later, as systemd's `Restart=always` would.
//!
//! Meanwhile a steady load (`WORKERS` clients, each on nodes of its own): GETs, deploys,
//! rebuilds and tear-downs (and the way back from a failed one), PATCHes of a few `extra` keys
//! per node whose values are recorded once acknowledged. After every fault, once it is healed,
//! the schedule waits (at most `SETTLE_LIMIT`) until the API answers, every conductor is alive,
//! no node is in a transient state or locked without a live conductor working on it (nor
//! unchanged for `STUCK_LIMIT`), and a GET, a PATCH and a deploy of a probe node of each
//! conductor succeed: the time to that is the step's recovery. Then, and at the end: no
//! acknowledged PATCH value is gone unless a write sent after it replaced it, no deploy started more
//! often than it was accepted, every request got an HTTP answer within `CLIENT_TIMEOUT` (a
//! connection error counts as none, unless the API process itself was down). A summary table
//! goes to stderr and to `fault-report.txt` in the target directory; the test fails if any of
//! these was broken.
//!
//! A live conductor: its lease renewed within the heartbeat timeout, not under the token of a
//! process that is gone, and its process running. Every wait has a bound; the processes,
//! servers and their directories are removed at the end, on a panic too (`Rig`'s and the
//! helpers' `Drop`; a failed run keeps the processes' logs, as `Cluster` does).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    io::Write as _,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use ferrum::{db, node::Node};
use rand::{Rng as _, SeedableRng as _, rngs::StdRng, seq::IndexedRandom as _};
use reqwest::{Method, StatusCode};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::util::{
    Cluster, ClusterOptions, PrivateMariaDb, PrivateRabbit,
    cluster::Links,
    link_proxy::LinkProxy,
    load::{self, DeployStarts, Shared},
    services::random_suffix,
};

/// Load clients, each with `NODES_PER_WORKER` nodes of its own: at most this many load
/// requests in flight.
const WORKERS: usize = 6;
const NODES_PER_WORKER: usize = 4;
/// `driver_info/fake_deploy_delay` of the load's nodes, in seconds.
const DEPLOY_DELAY: f64 = 1.0;
/// A request without an answer after this long counts as unanswered: longer than the longest
/// pause or blackhole, so that a request held up by one is answered once it ends.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// An operation (a request and its retries after 503, 409, no answer) gives up after this.
const OP_LIMIT: Duration = Duration::from_secs(120);
/// The processes' RPC timeout, in seconds: longer than `CLIENT_TIMEOUT`, as in the fault suite,
/// so that a call waiting for a peer that never answers shows as a request without an answer.
const RPC_TIMEOUT: f64 = 40.0;
/// The processes' heartbeat timeout, in seconds.
const HEARTBEAT_TIMEOUT: f64 = 10.0;
/// The longest SIGSTOP, database or broker pause, or link blackhole.
const HOLD_MAX: Duration = Duration::from_secs(20);
/// How long after a fault is healed the cluster may take to be fully back.
const SETTLE_LIMIT: Duration = Duration::from_secs(120);
/// A node in a transient state or locked that has not changed for this long (counted from the
/// last fault's healing) is stuck, whoever holds it.
const STUCK_LIMIT: Duration = Duration::from_secs(30);
/// How long a process stays down after a kill before it is started again, at most.
const DOWN_MAX: Duration = Duration::from_secs(3);
/// A supervisor's delay before it starts a process that exited by itself again.
const RESTART_DELAY: Duration = Duration::from_secs(1);
/// After the end of the load, how long everything may take to settle, then the quiet time
/// waited for a late surprise before the last look.
const FINAL_SETTLE: Duration = Duration::from_secs(120);
const QUIET: Duration = Duration::from_secs(3);

/// The Ferrum processes: the API, then the conductors.
const PROCESSES: [&str; 4] = ["api", "conductor0", "conductor1", "conductor2"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a randomized fault schedule of FERRUM_FAULT_MINUTES (3) minutes; run with --ignored"]
async fn fault_schedule() {
    let minutes: f64 = std::env::var("FERRUM_FAULT_MINUTES")
        .ok()
        .map(|m| {
            m.parse()
                .expect("FERRUM_FAULT_MINUTES: minutes, e.g. 3 or 0.5")
        })
        .unwrap_or(3.0);
    let seed: u64 = std::env::var("FERRUM_FAULT_SEED")
        .ok()
        .map(|s| s.parse().expect("FERRUM_FAULT_SEED: a number"))
        .unwrap_or_else(rand::random);
    eprintln!(
        "FAULT SCHEDULE: seed {seed}, {minutes} minutes (replay: FERRUM_FAULT_SEED={seed} FERRUM_FAULT_MINUTES={minutes})"
    );
    let Some(mut rig) = Rig::start().await else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let load = Load::start(&rig.cluster, seed).await;
    let mut checker = Checker::new(load::probe_nodes(&rig.cluster, 3).await);
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(minutes * 60.0);
    // Let the load reach its stride before the first fault.
    rig.hold(Duration::from_secs(5)).await;
    let mut steps: Vec<StepRecord> = Vec::new();
    while Instant::now() < end {
        let step = Step::random(&mut rng);
        let n = steps.len() + 1;
        checker.step = format!("step {n} ({})", step.describe());
        rig.step.clone_from(&checker.step);
        eprintln!(
            "FAULT SCHEDULE {:>6.1}s: {}",
            started.elapsed().as_secs_f64(),
            checker.step
        );
        let before = load.shared.tally();
        let healed = rig.apply(&step, &load, &mut checker).await;
        let recovery = checker
            .settle(&mut rig, &load, healed, SETTLE_LIMIT, false)
            .await;
        let after = load.shared.tally();
        eprintln!(
            "FAULT SCHEDULE {:>6.1}s: step {n} {}; meanwhile requests={} unanswered={} conn_errors={} 5xx={} slowest_so_far_s={:.1}",
            started.elapsed().as_secs_f64(),
            recovery.map_or_else(
                || "NOT recovered".to_owned(),
                |r| format!("recovered in {:.1}s", r.as_secs_f64())
            ),
            after.requests - before.requests,
            after.unanswered - before.unanswered,
            after.conn_errors - before.conn_errors,
            after.five_xx() - before.five_xx(),
            after.slowest.as_secs_f64(),
        );
        steps.push(StepRecord {
            kind: step.kind,
            recovery,
        });
        let gap = Duration::from_millis(rng.random_range(2000..5000));
        rig.hold(gap.min(end.saturating_duration_since(Instant::now())))
            .await;
    }
    checker.step = "the end".to_owned();
    rig.step.clone_from(&checker.step);
    let load_ended = load.stop(&mut checker).await;
    let healed = Instant::now();
    checker
        .settle(&mut rig, &load, healed, FINAL_SETTLE, true)
        .await;
    rig.hold(QUIET).await;
    checker.permanent_checks(&mut rig, &load).await;
    let summary = Summary {
        seed,
        minutes,
        wall: started.elapsed(),
        load_ended,
        steps,
        tally: load.shared.tally(),
        checker: &checker,
        self_exits: &rig.self_exits,
    };
    let text = summary.render();
    let _ = std::io::stderr().write_all(text.as_bytes());
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(load::report_path())
    {
        let _ = file.write_all(text.as_bytes());
    }
    let failures = summary.failures();
    assert!(
        failures.is_empty(),
        "FAULT SCHEDULE seed {seed}:\n  - {}",
        failures.join("\n  - ")
    );
}

/// What one step of the schedule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Kill,
    Term,
    Stop,
    MariaDbRestart,
    MariaDbPause,
    RabbitRestart,
    RabbitPause,
    DbBlackhole,
    BrokerBlackhole,
}

const KINDS: [Kind; 9] = [
    Kind::Kill,
    Kind::Term,
    Kind::Stop,
    Kind::MariaDbRestart,
    Kind::MariaDbPause,
    Kind::RabbitRestart,
    Kind::RabbitPause,
    Kind::DbBlackhole,
    Kind::BrokerBlackhole,
];

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Kill => "kill -9 + restart",
            Kind::Term => "SIGTERM + restart",
            Kind::Stop => "SIGSTOP + SIGCONT",
            Kind::MariaDbRestart => "MariaDB kill + start",
            Kind::MariaDbPause => "MariaDB pause",
            Kind::RabbitRestart => "RabbitMQ kill + start",
            Kind::RabbitPause => "RabbitMQ pause",
            Kind::DbBlackhole => "DB link blackhole",
            Kind::BrokerBlackhole => "broker link blackhole",
        }
    }

    /// Whether the step aims at one Ferrum process.
    fn has_process(self) -> bool {
        matches!(
            self,
            Kind::Kill | Kind::Term | Kind::Stop | Kind::DbBlackhole | Kind::BrokerBlackhole
        )
    }
}

/// One fault: its kind, the process it aims at (an index into [`PROCESSES`]) and how long it
/// lasts (a pause or blackhole) or how long the thing stays down (a kill).
struct Step {
    kind: Kind,
    process: usize,
    hold: Duration,
}

impl Step {
    fn random(rng: &mut StdRng) -> Step {
        let kind = *KINDS.choose(rng).expect("kinds");
        let hold = match kind {
            Kind::Kill | Kind::Term | Kind::MariaDbRestart | Kind::RabbitRestart => {
                Duration::from_millis(rng.random_range(0..=DOWN_MAX.as_millis() as u64))
            }
            Kind::Stop
            | Kind::MariaDbPause
            | Kind::RabbitPause
            | Kind::DbBlackhole
            | Kind::BrokerBlackhole => {
                Duration::from_millis(rng.random_range(1000..=HOLD_MAX.as_millis() as u64))
            }
        };
        Step {
            kind,
            process: rng.random_range(0..PROCESSES.len()),
            hold,
        }
    }

    fn describe(&self) -> String {
        let target = if self.kind.has_process() {
            format!(" of {}", PROCESSES[self.process])
        } else {
            String::new()
        };
        format!(
            "{}{target}, {:.1}s",
            self.kind.label(),
            self.hold.as_secs_f64()
        )
    }
}

struct StepRecord {
    kind: Kind,
    recovery: Option<Duration>,
}

/// The servers, the proxies and the cluster, and the test's part as the processes'
/// supervisor.
struct Rig {
    // Dropped first: the processes are killed and the database dropped while the servers run.
    cluster: Cluster,
    /// Per process: its database link, its broker link.
    proxies: Vec<(LinkProxy, LinkProxy)>,
    mariadb: PrivateMariaDb,
    rabbit: PrivateRabbit,
    /// Processes the schedule has taken down itself: not restarted by the supervisor.
    taken_down: [bool; PROCESSES.len()],
    /// Processes that exited by themselves, to be started again at that instant.
    restart_at: [Option<Instant>; PROCESSES.len()],
    /// "<step>: <process> exited by itself (<status>)".
    self_exits: Vec<String>,
    /// The lease tokens (`conductors.instance`) of conductor processes that are gone: a row
    /// still carrying one is not a live conductor, however fresh it looks.
    dead_instances: HashSet<String>,
    /// The step in progress, for `self_exits`.
    step: String,
}

impl Rig {
    /// The servers, the proxies and the cluster, up. None (announced) where the servers'
    /// binaries are missing.
    async fn start() -> Option<Rig> {
        let (Some(mariadb), Some(rabbit)) =
            tokio::join!(PrivateMariaDb::start(), PrivateRabbit::start())
        else {
            return None;
        };
        let mut proxies = Vec::new();
        let mut links = Vec::new();
        for name in PROCESSES {
            let db = LinkProxy::start("127.0.0.1", mariadb.port()).await;
            let broker = LinkProxy::start("127.0.0.1", rabbit.port()).await;
            links.push((
                name.to_owned(),
                Links {
                    mysql_server: format!("mysql://root@127.0.0.1:{}", db.port),
                    amqp_url: format!("amqp://guest:guest@127.0.0.1:{}/%2f", broker.port),
                },
            ));
            proxies.push((db, broker));
        }
        let cluster = Cluster::start(ClusterOptions {
            conductors: PROCESSES.len() - 1,
            rpc_timeout: RPC_TIMEOUT,
            heartbeat_timeout: HEARTBEAT_TIMEOUT,
            workers: 20,
            graceful_shutdown_timeout: 5.0,
            mysql_url: Some(mariadb.url()),
            amqp_url: Some(rabbit.url()),
            links,
            ..ClusterOptions::default()
        })
        .await?;
        Some(Rig {
            cluster,
            proxies,
            mariadb,
            rabbit,
            taken_down: [false; PROCESSES.len()],
            restart_at: [None; PROCESSES.len()],
            self_exits: Vec::new(),
            dead_instances: HashSet::new(),
            step: "start".to_owned(),
        })
    }

    fn spawn(&mut self, process: usize) {
        match process {
            0 => self.cluster.spawn_api(),
            i => self.cluster.spawn_conductor(i - 1),
        }
    }

    fn running(&mut self, process: usize) -> bool {
        self.cluster.exit_status(PROCESSES[process]).is_none()
    }

    /// Starts again (after `RESTART_DELAY`) what exited without the schedule's doing.
    async fn supervise(&mut self) {
        for (p, name) in PROCESSES.iter().enumerate() {
            if self.taken_down[p] {
                continue;
            }
            match (self.restart_at[p], self.cluster.exit_status(name)) {
                (None, Some(status)) => {
                    self.self_exits
                        .push(format!("{}: {name} exited by itself ({status})", self.step));
                    self.bury(p).await;
                    self.restart_at[p] = Some(Instant::now() + RESTART_DELAY);
                }
                (Some(at), Some(_)) if Instant::now() >= at => {
                    self.spawn(p);
                    self.restart_at[p] = None;
                }
                _ => {}
            }
        }
    }

    /// Notes the lease token of conductor process `p`, dead or about to be killed (if the
    /// database answers within 2 s).
    async fn bury(&mut self, p: usize) {
        let Some(host) = p
            .checked_sub(1)
            .and_then(|i| self.cluster.conductor_hosts.get(i))
        else {
            return;
        };
        let row = tokio::time::timeout(
            Duration::from_secs(2),
            db::conductors::get(&self.cluster.db.db, host),
        )
        .await;
        if let Ok(Ok(row)) = row
            && let Some(instance) = row.instance
        {
            self.dead_instances.insert(instance);
        }
    }

    /// Waits `span`, supervising.
    async fn hold(&mut self, span: Duration) {
        let until = Instant::now() + span;
        loop {
            self.supervise().await;
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left.min(Duration::from_millis(200))).await;
        }
    }

    /// Runs the fault and heals it; returns when it was healed.
    async fn apply(&mut self, step: &Step, load: &Load, checker: &mut Checker) -> Instant {
        let p = step.process;
        let name = PROCESSES[p];
        match step.kind {
            Kind::Kill => {
                self.taken_down[p] = true;
                if p == 0 {
                    load.shared.api_down(true);
                }
                self.bury(p).await;
                self.cluster.kill(name);
                self.hold(step.hold).await;
                self.bring_back(p, load, checker).await
            }
            Kind::Term => {
                self.taken_down[p] = true;
                if p == 0 {
                    load.shared.api_down(true);
                }
                if self.running(p) {
                    self.cluster.signal_term(name);
                }
                let limit = Instant::now() + Duration::from_secs(40);
                while self.running(p) && Instant::now() < limit {
                    self.hold(Duration::from_millis(50)).await;
                }
                if self.running(p) {
                    checker.violation(
                        "slow exit",
                        name.to_owned(),
                        format!("{name} still ran 40s after SIGTERM (killed)"),
                    );
                    self.cluster.kill(name);
                }
                // A clean stop released its lease; one that did not left its token behind.
                self.bury(p).await;
                self.hold(step.hold).await;
                self.bring_back(p, load, checker).await
            }
            Kind::Stop => {
                if self.running(p) {
                    self.cluster.signal(name, "STOP");
                    self.hold(step.hold).await;
                    self.cluster.signal(name, "CONT");
                }
                Instant::now()
            }
            Kind::MariaDbRestart => {
                self.mariadb.kill();
                self.hold(step.hold).await;
                self.mariadb.start_again().await;
                Instant::now()
            }
            Kind::MariaDbPause => {
                self.mariadb.pause();
                self.hold(step.hold).await;
                self.mariadb.resume();
                Instant::now()
            }
            Kind::RabbitRestart => {
                self.rabbit.kill();
                self.hold(step.hold).await;
                self.rabbit.start_again().await;
                Instant::now()
            }
            Kind::RabbitPause => {
                self.rabbit.pause();
                self.hold(step.hold).await;
                self.rabbit.resume();
                Instant::now()
            }
            Kind::DbBlackhole | Kind::BrokerBlackhole => {
                let (db, broker) = &self.proxies[p];
                let link = if step.kind == Kind::DbBlackhole {
                    db
                } else {
                    broker
                };
                link.blackhole(true);
                self.hold(step.hold).await;
                let (db, broker) = &self.proxies[p];
                db.blackhole(false);
                broker.blackhole(false);
                Instant::now()
            }
        }
    }

    /// Starts a process the schedule took down; for the API, waits (at most 30 s) until it
    /// answers, as connection errors until then are expected.
    async fn bring_back(&mut self, p: usize, load: &Load, checker: &mut Checker) -> Instant {
        self.spawn(p);
        self.taken_down[p] = false;
        self.restart_at[p] = None;
        let back = Instant::now();
        if p == 0 {
            let limit = back + Duration::from_secs(30);
            while !api_answers(&self.cluster).await && Instant::now() < limit {
                self.hold(Duration::from_millis(100)).await;
            }
            if !api_answers(&self.cluster).await {
                checker.violation(
                    "not recovered",
                    format!("{}: api", checker.step),
                    "the API did not answer within 30s of its restart".to_owned(),
                );
            }
            load.shared.api_down(false);
        }
        back
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // Nothing stays stopped or cut off: the cluster's database is dropped over a direct
        // connection after this, and a stopped process is killed all the same.
        self.mariadb.resume();
        self.rabbit.resume();
        for (db, broker) in &self.proxies {
            db.blackhole(false);
            broker.blackhole(false);
        }
        for name in PROCESSES {
            if self.cluster.exit_status(name).is_none() {
                self.cluster.signal(name, "CONT");
            }
        }
    }
}

/// Whether the API answers `GET /` within 5 s.
async fn api_answers(cluster: &Cluster) -> bool {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("http client");
    client
        .get(format!("{}/", cluster.api.base))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
}

/// The values PATCHed into one `extra` key of a node.
#[derive(Debug, Default, Clone)]
struct Written {
    /// The last acknowledged (200) value.
    acked: Option<String>,
    /// Values sent since, without an acknowledgement: any of them may have been applied.
    since: Vec<String>,
}

/// The steady load: `WORKERS` clients, each on its own nodes.
struct Load {
    shared: Arc<Shared>,
    /// By (node UUID, key).
    writes: Mutex<HashMap<(String, String), Written>>,
    /// Nodes with a deploy request on its way: their start may be in a log before their
    /// acceptance is counted.
    deploying: Mutex<HashSet<String>>,
    stop: AtomicBool,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl Load {
    /// Makes the load's nodes (available) and starts the clients.
    async fn start(cluster: &Cluster, seed: u64) -> Arc<Load> {
        let makers: Vec<_> = (0..WORKERS)
            .map(|_| {
                let api = cluster.api.clone();
                tokio::spawn(async move {
                    let mut uuids = Vec::new();
                    for _ in 0..NODES_PER_WORKER {
                        let node = api
                            .available_node(
                                json!({"driver_info": {"fake_deploy_delay": DEPLOY_DELAY}}),
                            )
                            .await;
                        uuids.push(node["uuid"].as_str().expect("uuid").to_owned());
                    }
                    uuids
                })
            })
            .collect();
        let mut node_sets = Vec::new();
        for maker in makers {
            node_sets.push(maker.await.expect("make the load's nodes"));
        }
        let load = Arc::new(Load {
            shared: Shared::new(&cluster.api.base, CLIENT_TIMEOUT, Some(OP_LIMIT)),
            writes: Mutex::new(HashMap::new()),
            deploying: Mutex::new(HashSet::new()),
            stop: AtomicBool::new(false),
            workers: Mutex::new(Vec::new()),
        });
        let workers = node_sets
            .into_iter()
            .enumerate()
            .map(|(k, nodes)| {
                let rng = StdRng::seed_from_u64(seed.wrapping_add(k as u64 + 1));
                tokio::spawn(worker(load.clone(), nodes, rng))
            })
            .collect();
        *load.workers.lock().expect("workers") = workers;
        load
    }

    /// Lets each client finish what it is doing, and stops it; returns how long that took.
    async fn stop(&self, checker: &mut Checker) -> Duration {
        let asked = Instant::now();
        self.stop.store(true, Ordering::SeqCst);
        let workers = std::mem::take(&mut *self.workers.lock().expect("workers"));
        let limit = OP_LIMIT * 3;
        for (k, mut worker) in workers.into_iter().enumerate() {
            let left = limit.saturating_sub(asked.elapsed());
            match tokio::time::timeout(left, &mut worker).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => checker.violation("load", format!("worker {k}"), e.to_string()),
                Err(_) => {
                    worker.abort();
                    checker.violation(
                        "load",
                        format!("worker {k}"),
                        format!("still busy {}s after the end", limit.as_secs()),
                    );
                }
            }
        }
        asked.elapsed()
    }

    async fn patch(&self, uuid: &str, key: &str) {
        let value = random_suffix();
        let id = (uuid.to_owned(), key.to_owned());
        // Recorded before it is sent: from now on the node may hold it.
        self.writes
            .lock()
            .expect("writes")
            .entry(id.clone())
            .or_default()
            .since
            .push(value.clone());
        self.shared.count_ops(1);
        let answer = self
            .shared
            .op(
                &format!("PATCH {uuid} extra/{key}"),
                Method::PATCH,
                &format!("/v1/nodes/{uuid}"),
                Some(json!([{"op": "add", "path": format!("/extra/{key}"), "value": value}])),
                true,
            )
            .await;
        if matches!(answer, Some((StatusCode::OK, _))) {
            let mut writes = self.writes.lock().expect("writes");
            let written = writes.entry(id).or_default();
            written.acked = Some(value);
            written.since.clear();
        }
    }

    /// A provision verb; waits for the node to settle once it is accepted.
    async fn provision(&self, uuid: &str, target: &str) {
        let deploy = matches!(target, "active" | "rebuild");
        if deploy {
            self.deploying
                .lock()
                .expect("deploying")
                .insert(uuid.to_owned());
        }
        self.shared.count_ops(1);
        let status = self.shared.provision(uuid, target, true).await;
        if deploy {
            self.deploying.lock().expect("deploying").remove(uuid);
        }
        if status == Some(StatusCode::ACCEPTED) {
            self.shared.settle(uuid, OP_LIMIT).await;
        }
    }
}

/// One client: picks one of its nodes, reads it, and does what its state allows.
async fn worker(load: Arc<Load>, nodes: Vec<String>, mut rng: StdRng) {
    while !load.stop.load(Ordering::SeqCst) {
        let uuid = nodes.choose(&mut rng).expect("nodes").clone();
        load.shared.count_ops(1);
        let read = load
            .shared
            .op(
                &format!("GET {uuid}"),
                Method::GET,
                &format!("/v1/nodes/{uuid}"),
                None,
                true,
            )
            .await;
        let state = match &read {
            Some((StatusCode::OK, node)) => node["provision_state"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            _ => String::new(),
        };
        let roll: f64 = rng.random();
        let key = format!("k{}", rng.random_range(0..3));
        match state.as_str() {
            "available" if roll < 0.6 => load.provision(&uuid, "active").await,
            "active" if roll < 0.3 => load.provision(&uuid, "deleted").await,
            "active" if roll < 0.4 => load.provision(&uuid, "rebuild").await,
            "deploy failed" if roll < 0.5 => load.provision(&uuid, "active").await,
            "deploy failed" | "error" => load.provision(&uuid, "deleted").await,
            "clean failed" => load.provision(&uuid, "manage").await,
            "manageable" => load.provision(&uuid, "provide").await,
            "available" | "active" if roll < 0.9 => load.patch(&uuid, &key).await,
            "available" | "active" => {
                load.shared.count_ops(1);
                load.shared
                    .op(
                        "GET nodes",
                        Method::GET,
                        "/v1/nodes?detail=True&limit=100",
                        None,
                        true,
                    )
                    .await;
            }
            // Transient (or unread): wait for it to settle.
            _ => {
                load.shared.settle(&uuid, OP_LIMIT).await;
            }
        }
        let pause = Duration::from_millis(rng.random_range(100..400));
        tokio::time::sleep(pause).await;
    }
}

/// The checks made after every step and at the end, and what they found.
struct Checker {
    /// The step being checked, for the violations' details.
    step: String,
    probes: Vec<String>,
    probe_round: usize,
    starts: DeployStarts,
    /// Per node: how it looked (state, holder, version) and since when it has looked so.
    seen: HashMap<String, (String, Instant)>,
    /// Distinct items (nodes, keys, steps) by kind of violation.
    violations: BTreeMap<&'static str, BTreeSet<String>>,
    /// One line per item, the first time it was found.
    details: Vec<String>,
}

/// What one look at the cluster found wrong that time may still mend.
#[derive(Default)]
struct Look {
    api_up: bool,
    db_readable: bool,
    /// Conductors not alive (not online, or not heard from within the heartbeat timeout).
    missing: Vec<String>,
    /// (kind, item, detail).
    problems: Vec<(&'static str, String, String)>,
}

impl Look {
    fn clean(&self) -> bool {
        self.api_up && self.db_readable && self.missing.is_empty() && self.problems.is_empty()
    }
}

impl Checker {
    fn new(probes: Vec<String>) -> Checker {
        Checker {
            step: "start".to_owned(),
            probes,
            probe_round: 0,
            starts: DeployStarts::default(),
            seen: HashMap::new(),
            violations: BTreeMap::new(),
            details: Vec::new(),
        }
    }

    fn violation(&mut self, kind: &'static str, item: String, detail: String) {
        if self.violations.entry(kind).or_default().insert(item) {
            self.details
                .push(format!("{}: {kind}: {detail}", self.step));
        }
    }

    /// Waits (at most `limit` from `healed`) until the cluster is whole again and full service
    /// is back (with `drained`, also every node stable and unlocked); returns how long after
    /// `healed` that was. What is still wrong at the limit is recorded. Then the checks that
    /// time cannot mend.
    async fn settle(
        &mut self,
        rig: &mut Rig,
        load: &Load,
        healed: Instant,
        limit: Duration,
        drained: bool,
    ) -> Option<Duration> {
        let deadline = healed + limit;
        let recovery = loop {
            rig.supervise().await;
            let look = self.look(rig, healed, drained).await;
            if look.clean() && self.probe(load, deadline).await {
                break Some(healed.elapsed());
            }
            if Instant::now() > deadline {
                let item = self.step.clone();
                if !look.api_up {
                    self.violation(
                        "not recovered",
                        format!("{item}: api"),
                        "the API does not answer".to_owned(),
                    );
                }
                if !look.missing.is_empty() {
                    self.violation(
                        "not recovered",
                        format!("{item}: conductors"),
                        format!("conductors not alive: {:?}", look.missing),
                    );
                }
                if look.clean() {
                    self.violation(
                        "not recovered",
                        format!("{item}: probes"),
                        "a GET, PATCH or deploy of a probe node kept failing".to_owned(),
                    );
                }
                if !look.db_readable {
                    self.violation(
                        "not recovered",
                        format!("{item}: database"),
                        "the database could not be read".to_owned(),
                    );
                }
                for (kind, item, detail) in look.problems {
                    self.violation(kind, item, detail);
                }
                break None;
            }
            rig.hold(Duration::from_millis(500)).await;
        };
        self.permanent_checks(rig, load).await;
        recovery
    }

    /// One look at the API, the conductors and the nodes.
    async fn look(&mut self, rig: &mut Rig, healed: Instant, drained: bool) -> Look {
        let mut look = Look {
            api_up: api_answers(&rig.cluster).await,
            ..Look::default()
        };
        let timeout = Duration::from_secs_f64(HEARTBEAT_TIMEOUT);
        let db = &rig.cluster.db.db;
        let (nodes, conductors) = match tokio::join!(
            db::nodes::list(db, 10_000, None),
            db::conductors::list(db, 100, None),
        ) {
            (Ok(n), Ok(c)) => (n, c),
            _ => {
                // The harness's pool may hold connections a restart broke.
                rig.cluster.db.reconnect();
                return look;
            }
        };
        look.db_readable = true;
        // A lease is live when renewed within the heartbeat timeout by a process that still
        // runs: not one whose token is a dead process's.
        let fresh_since =
            ferrum::node::now() - chrono::Duration::from_std(timeout).expect("heartbeat timeout");
        let live = |c: &&ferrum::db::models::Conductor| {
            c.updated_at >= fresh_since
                && c.instance
                    .as_ref()
                    .is_some_and(|i| !rig.dead_instances.contains(i))
        };
        let leased: HashSet<String> = conductors
            .iter()
            .filter(live)
            .map(|c| c.hostname.clone())
            .collect();
        let alive: HashSet<String> = conductors
            .iter()
            .filter(live)
            .filter(|c| c.online)
            .map(|c| c.hostname.clone())
            .collect();
        look.missing = rig
            .cluster
            .conductor_hosts
            .iter()
            .filter(|h| !alive.contains(*h))
            .cloned()
            .collect();
        // A lock is live work only if its holder's lease is live and its process runs.
        let mut working = HashSet::new();
        for i in 0..rig.cluster.conductor_hosts.len() {
            let host = rig.cluster.conductor_hosts[i].clone();
            if leased.contains(&host) && rig.running(i + 1) {
                working.insert(host);
            }
        }
        let now = Instant::now();
        for node in &nodes {
            let shape = format!(
                "{} {:?} v{}",
                node.provision_state, node.reservation, node.version
            );
            let since = match self.seen.get(&node.uuid) {
                Some((seen, since)) if *seen == shape => *since,
                _ => {
                    self.seen.insert(node.uuid.clone(), (shape, now));
                    now
                }
            };
            self.judge_node(node, &working, now - since.max(healed), drained, &mut look);
        }
        look
    }

    fn judge_node(
        &self,
        node: &Node,
        working: &HashSet<String>,
        unchanged: Duration,
        drained: bool,
        look: &mut Look,
    ) {
        let transient = node.provision_state.is_unstable();
        if !transient && node.reservation.is_none() {
            return;
        }
        let what = format!(
            "{} {} held by {:?}",
            node.uuid, node.provision_state, node.reservation
        );
        match &node.reservation {
            Some(holder) if !working.contains(holder) => look.problems.push((
                "leaked lock",
                node.uuid.clone(),
                format!("{what}: the holder is dead or fenced"),
            )),
            None => look.problems.push((
                "stuck",
                node.uuid.clone(),
                format!("{what}: transient without a lock"),
            )),
            Some(_) if unchanged > STUCK_LIMIT => look.problems.push((
                "stuck",
                node.uuid.clone(),
                format!("{what}: unchanged for {:.0}s", unchanged.as_secs_f64()),
            )),
            Some(_) if drained => look.problems.push((
                "stuck",
                node.uuid.clone(),
                format!("{what}: still busy with the load stopped"),
            )),
            Some(_) => {}
        }
    }

    /// A GET, PATCH and deploy of each probe node, one after the other.
    async fn probe(&mut self, load: &Load, deadline: Instant) -> bool {
        self.probe_round += 1;
        for uuid in &self.probes {
            if !load
                .shared
                .probe_once(uuid, self.probe_round, deadline)
                .await
            {
                return false;
            }
        }
        true
    }

    /// No acknowledged write lost, no deploy started more often than it was accepted.
    async fn permanent_checks(&mut self, rig: &mut Rig, load: &Load) {
        // The logs first, then what was accepted: a deploy counted in the logs read was
        // accepted by then, unless its request is still on its way.
        self.starts.read_new(&rig.cluster);
        let deploying = load.deploying.lock().expect("deploying").clone();
        let accepted = load.shared.tally().accepted;
        for line in self
            .starts
            .beyond(&accepted, |uuid| deploying.contains(uuid))
        {
            let uuid = line.chars().take(36).collect();
            self.violation("deploy run twice", uuid, line);
        }
        // The writes before and after the read: a value acknowledged or sent meanwhile may be
        // what the read saw.
        let before = load.writes.lock().expect("writes").clone();
        let Ok(nodes) = db::nodes::list(&rig.cluster.db.db, 10_000, None).await else {
            rig.cluster.db.reconnect();
            return;
        };
        let after = load.writes.lock().expect("writes").clone();
        let by_uuid: HashMap<&str, &Node> = nodes.iter().map(|n| (n.uuid.as_str(), n)).collect();
        for ((uuid, key), written) in &after {
            let earlier = before.get(&(uuid.clone(), key.clone()));
            let may_be: HashSet<&str> = [Some(written), earlier]
                .into_iter()
                .flatten()
                .flat_map(|w| w.acked.iter().chain(w.since.iter()))
                .map(String::as_str)
                .collect();
            let acked = written.acked.is_some() || earlier.is_some_and(|w| w.acked.is_some());
            let Some(node) = by_uuid.get(uuid.as_str()) else {
                continue;
            };
            let found = node.extra.get(key).and_then(|v| v.as_str());
            if acked && !found.is_some_and(|v| may_be.contains(v)) {
                self.violation(
                    "lost write",
                    format!("{uuid} extra/{key}"),
                    format!(
                        "{uuid} extra/{key} is {found:?}, acknowledged {:?} (sent since: {:?})",
                        written.acked, written.since
                    ),
                );
            }
        }
    }

    fn count(&self, kind: &str) -> usize {
        self.violations.get(kind).map_or(0, BTreeSet::len)
    }
}

/// The figures of a run.
struct Summary<'a> {
    seed: u64,
    minutes: f64,
    wall: Duration,
    load_ended: Duration,
    steps: Vec<StepRecord>,
    tally: load::Tally,
    checker: &'a Checker,
    self_exits: &'a [String],
}

impl Summary<'_> {
    fn render(&self) -> String {
        let t = &self.tally;
        let mut out = format!(
            "\nFAULT SCHEDULE seed={} minutes={} wall_s={:.0} steps={} (load stopped in {:.1}s)\n",
            self.seed,
            self.minutes,
            self.wall.as_secs_f64(),
            self.steps.len(),
            self.load_ended.as_secs_f64()
        );
        out.push_str(&format!(
            "  {:<24} {:>5} {:>20} {:>14}\n",
            "step", "count", "longest_recovery_s", "not_recovered"
        ));
        let mut by_kind: BTreeMap<Kind, (usize, Option<Duration>, usize)> = BTreeMap::new();
        for s in &self.steps {
            let e = by_kind.entry(s.kind).or_default();
            e.0 += 1;
            match s.recovery {
                Some(r) => e.1 = Some(e.1.map_or(r, |m| m.max(r))),
                None => e.2 += 1,
            }
        }
        for (kind, (count, longest, unrecovered)) in &by_kind {
            out.push_str(&format!(
                "  {:<24} {:>5} {:>20} {:>14}\n",
                kind.label(),
                count,
                longest.map_or_else(|| "-".to_owned(), |d| format!("{:.1}", d.as_secs_f64())),
                unrecovered
            ));
        }
        let longest = self.steps.iter().filter_map(|s| s.recovery).max();
        out.push_str(&format!(
            "  requests={} unanswered={} conn_errors={} conn_errors_api_down={} 5xx={} failed_ops={}/{} slowest_answer_s={:.1}\n",
            t.requests,
            t.unanswered,
            t.conn_errors,
            t.conn_errors_api_down,
            t.five_xx(),
            t.failed_ops.len(),
            t.ops,
            t.slowest.as_secs_f64()
        ));
        out.push_str(&format!("  statuses={:?}\n", t.statuses));
        for (kind, n) in &t.five_xx_kinds {
            out.push_str(&format!("  5xx x{n}: {kind}\n"));
        }
        let c = self.checker;
        out.push_str(&format!(
            "  stuck_nodes={} leaked_locks={} lost_writes={} deploys_run_twice={} unrecovered={} longest_recovery_s={} self_exits={} deploy_starts={} deploys_accepted={}\n",
            c.count("stuck"),
            c.count("leaked lock"),
            c.count("lost write"),
            c.count("deploy run twice"),
            c.count("not recovered"),
            longest.map_or_else(|| "-".to_owned(), |d| format!("{:.1}", d.as_secs_f64())),
            self.self_exits.len(),
            c.starts.total(),
            t.accepted.values().sum::<usize>(),
        ));
        for line in self.self_exits {
            out.push_str(&format!("    {line}\n"));
        }
        for e in &t.conn_error_samples {
            out.push_str(&format!("    connection error: {e}\n"));
        }
        for op in t.failed_ops.iter().take(10) {
            out.push_str(&format!("    failed op: {op}\n"));
        }
        for line in c.details.iter().take(30) {
            out.push_str(&format!("    {line}\n"));
        }
        out
    }

    fn failures(&self) -> Vec<String> {
        let t = &self.tally;
        let mut failures = Vec::new();
        if t.unanswered > 0 {
            failures.push(format!(
                "{} requests got no answer within {}s",
                t.unanswered,
                CLIENT_TIMEOUT.as_secs()
            ));
        }
        if t.conn_errors > 0 {
            failures.push(format!(
                "{} requests failed on the connection while the API process was up",
                t.conn_errors
            ));
        }
        if let Some(n) = t.statuses.get(&500) {
            failures.push(format!("{n} answers were 500 (not a clear error)"));
        }
        if !t.failed_ops.is_empty() {
            failures.push(format!(
                "{} of {} operations got no answer below 500 (but 409) within {}s: {}",
                t.failed_ops.len(),
                t.ops,
                OP_LIMIT.as_secs(),
                t.failed_ops
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        for (kind, items) in &self.checker.violations {
            failures.push(format!(
                "{kind}: {} ({})",
                items.len(),
                items.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
            ));
        }
        failures
    }
}
