//! The fault suite's load and verdict: clients that deploy nodes and PATCH them through the API
//! while a fault happens, a probe that measures when full service is back, and the checks made
//! once a recovery window has passed (see `tests/it/faults.rs`). The randomized fault schedule
//! (`tests/it/fault_schedule.rs`) drives its own steady load through the same [`Shared`]
//! client, probe and deploy count.
//!
//! Every HTTP attempt is recorded as answered (its status), no answer (the client timeout
//! passed) or a connection error. A client retries what an Ironic client retries (503, 409
//! NodeLocked, no answer, connection errors) with backoff, under the same
//! `X-OpenStack-Request-Id`, until the window ends.

use std::{
    collections::{BTreeMap, HashMap},
    io::Write as _,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use ferrum::{db, node::Node, states::ProvisionState};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::{Cluster, Supervisor, services::random_suffix};

/// The line the fake deploy logs each time its deploy step starts, followed by the node's UUID.
pub const DEPLOY_STARTED: &str = "fake deploy started on node ";

/// How long the suite waits, after everything looked settled, for a late surprise (a deploy
/// started again by a redelivered message, a lock taken back) before its final snapshot.
const QUIET: Duration = Duration::from_secs(3);

/// A client starts no new node this close to the end of the window.
const LAST_START: Duration = Duration::from_secs(10);

/// How long the load runs before a fault.
const WARM_UP: Duration = Duration::from_secs(3);

/// The shape of the load.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Nodes deployed by the load, each once (and PATCHed once, after its deploy).
    pub nodes: usize,
    /// Concurrent clients.
    pub clients: usize,
    /// `driver_info/fake_deploy_delay` of the load's nodes, in seconds.
    pub deploy_delay: f64,
    /// A request without an answer after this long counts as "no answer".
    pub client_timeout: Duration,
}

impl Default for LoadPlan {
    fn default() -> Self {
        // 16 clients keep 16 deploys and PATCHes in flight, which is what meets the fault; six
        // nodes each keep them at it for about 12 s (with a fault's outage on top), past every
        // scenario's fault (3-4 s into the load). Twelve each (200) only made the load longer.
        LoadPlan {
            nodes: 96,
            clients: 16,
            deploy_delay: 1.5,
            client_timeout: Duration::from_secs(15),
        }
    }
}

/// What one HTTP attempt got.
enum Outcome {
    Answered(StatusCode, Value),
    NoAnswer,
    ConnError(String),
}

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    fn new(base: &str, timeout: Duration) -> Client {
        Client {
            http: reqwest::Client::builder()
                .timeout(timeout)
                .connect_timeout(Duration::from_secs(2))
                // The API closes a keep-alive connection idle for `header_read_timeout` (10 s):
                // a request sent on it just then fails on the connection. A client keeps idle
                // connections for less, as HTTP clients facing such servers do.
                .pool_idle_timeout(Duration::from_secs(5))
                .build()
                .expect("http client"),
            base: base.to_owned(),
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        request_id: &str,
    ) -> Outcome {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("X-OpenStack-Ironic-API-Version", super::cluster::VERSION);
        if !request_id.is_empty() {
            req = req.header("X-OpenStack-Request-Id", request_id);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let classify = |e: reqwest::Error| {
            if e.is_timeout() {
                Outcome::NoAnswer
            } else {
                // With its causes: "error sending request" alone does not say what broke.
                let mut said = e.to_string();
                let mut cause = std::error::Error::source(&e);
                while let Some(c) = cause {
                    said.push_str(&format!(": {c}"));
                    cause = c.source();
                }
                Outcome::ConnError(said)
            }
        };
        let resp = match req.send().await {
            Ok(resp) => resp,
            Err(e) => return classify(e),
        };
        let status = resp.status();
        match resp.text().await {
            Ok(text) => Outcome::Answered(
                status,
                serde_json::from_str(&text).unwrap_or(Value::String(text)),
            ),
            Err(e) => classify(e),
        }
    }
}

/// What the load's requests got.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// HTTP attempts made by the load (retries included; the probe's are not).
    pub requests: usize,
    /// Attempts without an answer within the client timeout.
    pub unanswered: usize,
    /// Attempts that failed on the connection while the API process was up.
    pub conn_errors: usize,
    /// Connection errors while the API process itself was dead (expected, counted apart).
    pub conn_errors_api_down: usize,
    /// The first few connection errors while the API process was up.
    pub conn_error_samples: Vec<String>,
    /// Answers by status.
    pub statuses: BTreeMap<u16, usize>,
    /// 5xx answers by status and faultstring (UUIDs masked).
    pub five_xx_kinds: BTreeMap<String, usize>,
    /// The slowest answer.
    pub slowest: Duration,
    /// Deploy requests answered 202, by node UUID (the probe's included).
    pub accepted: HashMap<String, usize>,
    /// PATCHes answered 200: (node UUID, extra key, value).
    pub acked: Vec<(String, String, String)>,
    /// Operations (a request and its retries) that did not end with an answer below 500.
    pub failed_ops: Vec<String>,
    /// Operations the load sent (deploys, PATCHes).
    pub ops: usize,
    /// Nodes the load never got to before the window closed.
    pub skipped: usize,
}

impl Tally {
    pub fn five_xx(&self) -> usize {
        self.statuses
            .iter()
            .filter(|(s, _)| **s >= 500)
            .map(|(_, n)| n)
            .sum()
    }
}

/// The load's HTTP client and what its requests got, shared by its tasks.
pub struct Shared {
    client: Client,
    tally: Mutex<Tally>,
    api_down: AtomicBool,
    /// Operations stop retrying, and clients stop starting new ones, after this.
    deadline: Mutex<Instant>,
    /// An operation also stops retrying this long after it started, if set.
    op_limit: Option<Duration>,
}

impl Shared {
    /// A client of the API at `base`; an attempt without an answer after `client_timeout`
    /// counts as no answer, and an operation retries for at most `op_limit` if given.
    pub fn new(base: &str, client_timeout: Duration, op_limit: Option<Duration>) -> Arc<Shared> {
        Arc::new(Shared {
            client: Client::new(base, client_timeout),
            tally: Mutex::new(Tally::default()),
            api_down: AtomicBool::new(false),
            deadline: Mutex::new(Instant::now() + Duration::from_secs(24 * 3600)),
            op_limit,
        })
    }

    fn deadline(&self) -> Instant {
        *self.deadline.lock().expect("deadline")
    }

    /// What the load's requests got so far.
    pub fn tally(&self) -> Tally {
        self.tally.lock().expect("tally").clone()
    }

    /// Counts `n` more operations sent by the load.
    pub fn count_ops(&self, n: usize) {
        self.tally.lock().expect("tally").ops += n;
    }

    /// Marks the API process as dead (connection errors are then expected) or back.
    pub fn api_down(&self, down: bool) {
        self.api_down.store(down, Ordering::SeqCst);
    }

    fn record(&self, outcome: &Outcome, took: Duration) {
        let mut t = self.tally.lock().expect("tally");
        t.requests += 1;
        match outcome {
            Outcome::Answered(status, body) => {
                *t.statuses.entry(status.as_u16()).or_default() += 1;
                t.slowest = t.slowest.max(took);
                if status.is_server_error() {
                    *t.five_xx_kinds
                        .entry(format!("{} {}", status.as_u16(), kind_of(body)))
                        .or_default() += 1;
                }
            }
            Outcome::NoAnswer => t.unanswered += 1,
            Outcome::ConnError(_) if self.api_down.load(Ordering::SeqCst) => {
                t.conn_errors_api_down += 1;
            }
            Outcome::ConnError(e) => {
                t.conn_errors += 1;
                if t.conn_error_samples.len() < 10 {
                    t.conn_error_samples
                        .push(format!("{e} (after {:.1}s)", took.as_secs_f64()));
                }
            }
        }
    }

    /// One request and its retries (503, 409, no answer, connection error) with backoff under
    /// one request id, until an other answer or the deadline (or the operation limit). Returns
    /// the last answer.
    pub async fn op(
        &self,
        what: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
        record: bool,
    ) -> Option<(StatusCode, Value)> {
        let request_id = format!("req-{}", uuid::Uuid::new_v4());
        let give_up = self.op_limit.map(|limit| Instant::now() + limit);
        let mut backoff = Duration::from_millis(200);
        let mut last: Option<(StatusCode, Value)> = None;
        let mut last_problem: String;
        loop {
            let started = Instant::now();
            let outcome = self
                .client
                .send(method.clone(), path, body.as_ref(), &request_id)
                .await;
            if record {
                self.record(&outcome, started.elapsed());
            }
            match outcome {
                Outcome::Answered(status, body)
                    if status != StatusCode::SERVICE_UNAVAILABLE
                        && status != StatusCode::CONFLICT =>
                {
                    if record && status.is_server_error() {
                        self.tally
                            .lock()
                            .expect("tally")
                            .failed_ops
                            .push(format!("{what}: {status} {}", short(&body)));
                    }
                    return Some((status, body));
                }
                Outcome::Answered(status, body) => {
                    last_problem = format!("{status} {}", short(&body));
                    last = Some((status, body));
                }
                Outcome::NoAnswer => last_problem = "no answer".to_owned(),
                Outcome::ConnError(e) => last_problem = format!("connection error: {e}"),
            }
            let until = give_up.map_or(self.deadline(), |g| g.min(self.deadline()));
            if Instant::now() + backoff > until {
                if record {
                    self.tally.lock().expect("tally").failed_ops.push(format!(
                        "{what}: still {last_problem} when the window closed"
                    ));
                }
                return last;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 3 / 2).min(Duration::from_secs(2));
        }
    }

    /// Polls the node (recorded GETs) until it is out of transient states and unlocked, for at
    /// most `limit`.
    pub async fn settle(&self, uuid: &str, limit: Duration) -> Option<Value> {
        let until = (Instant::now() + limit).min(self.deadline());
        let path = format!("/v1/nodes/{uuid}");
        loop {
            let started = Instant::now();
            let outcome = self.client.send(Method::GET, &path, None, "").await;
            self.record(&outcome, started.elapsed());
            if let Outcome::Answered(StatusCode::OK, node) = outcome
                && !transient(&node)
            {
                return Some(node);
            }
            if Instant::now() > until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// A provision verb (and its retries); an accepted deploy (`active`, `rebuild`) is counted
    /// for the node, against which the deploy starts in the logs are checked.
    pub async fn provision(&self, uuid: &str, target: &str, record: bool) -> Option<StatusCode> {
        let (status, _) = self
            .op(
                &format!("provision {uuid} ({target})"),
                Method::PUT,
                &format!("/v1/nodes/{uuid}/states/provision"),
                Some(json!({ "target": target })),
                record,
            )
            .await?;
        if status == StatusCode::ACCEPTED && matches!(target, "active" | "rebuild") {
            *self
                .tally
                .lock()
                .expect("tally")
                .accepted
                .entry(uuid.to_owned())
                .or_default() += 1;
        }
        Some(status)
    }

    /// Full service for one probe node, once: GET, PATCH (`extra/probe` = `n`) and a deploy (to
    /// `active`, or `rebuild` when it is active) that ends `active` within 10 s (before
    /// `deadline`). Not recorded in the tally, but an accepted deploy is counted.
    pub async fn probe_once(&self, uuid: &str, n: usize, deadline: Instant) -> bool {
        let path = format!("/v1/nodes/{uuid}");
        let Outcome::Answered(StatusCode::OK, node) =
            self.client.send(Method::GET, &path, None, "").await
        else {
            return false;
        };
        let verb = match node["provision_state"].as_str() {
            Some("available" | "deploy failed") => "active",
            Some("active") => "rebuild",
            _ => return false,
        };
        let ops = json!([{"op": "add", "path": "/extra/probe", "value": n}]);
        let id = format!("req-{}", uuid::Uuid::new_v4());
        let Outcome::Answered(StatusCode::OK, _) = self
            .client
            .send(Method::PATCH, &path, Some(&ops), &id)
            .await
        else {
            return false;
        };
        let id = format!("req-{}", uuid::Uuid::new_v4());
        let body = json!({ "target": verb });
        let Outcome::Answered(StatusCode::ACCEPTED, _) = self
            .client
            .send(
                Method::PUT,
                &format!("{path}/states/provision"),
                Some(&body),
                &id,
            )
            .await
        else {
            return false;
        };
        *self
            .tally
            .lock()
            .expect("tally")
            .accepted
            .entry(uuid.to_owned())
            .or_default() += 1;
        let until = (Instant::now() + Duration::from_secs(10)).min(deadline);
        while Instant::now() < until {
            if let Outcome::Answered(StatusCode::OK, node) =
                self.client.send(Method::GET, &path, None, "").await
                && !transient(&node)
            {
                return node["provision_state"] == "active";
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    async fn patch_extra(&self, uuid: &str, key: &str, value: &str, record: bool) -> bool {
        let answer = self
            .op(
                &format!("PATCH {uuid} extra/{key}"),
                Method::PATCH,
                &format!("/v1/nodes/{uuid}"),
                Some(json!([{"op": "add", "path": format!("/extra/{key}"), "value": value}])),
                record,
            )
            .await;
        let acked = matches!(answer, Some((StatusCode::OK, _)));
        if acked && record {
            self.tally.lock().expect("tally").acked.push((
                uuid.to_owned(),
                key.to_owned(),
                value.to_owned(),
            ));
        }
        acked
    }
}

/// An answer's faultstring (or its start), for a report line.
fn short(body: &Value) -> String {
    let fault = body["error_message"]
        .as_str()
        .and_then(|m| serde_json::from_str::<Value>(m).ok())
        .and_then(|m| m["faultstring"].as_str().map(str::to_owned));
    let text = fault.unwrap_or_else(|| body.to_string());
    text.chars().take(120).collect()
}

/// A 5xx answer's kind for the tally: its faultstring with UUIDs masked.
fn kind_of(body: &Value) -> String {
    static UUID: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let uuid = UUID.get_or_init(|| {
        regex::Regex::new("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
            .expect("UUID pattern")
    });
    uuid.replace_all(&short(body), "<uuid>").into_owned()
}

/// Whether a node as the API shows it is in a transient state or locked.
pub fn transient(node: &Value) -> bool {
    let state = node["provision_state"].as_str().unwrap_or_default();
    ProvisionState::from_api_name(state).is_none_or(ProvisionState::is_unstable)
        || !node["reservation"].is_null()
}

/// One client: deploys its nodes one after the other, waits for each to settle, then PATCHes
/// a unique value into its `extra`.
async fn client_loop(shared: Arc<Shared>, k: usize, nodes: Vec<String>, settle: Duration) {
    for (i, uuid) in nodes.iter().enumerate() {
        // No new node in the window's last seconds: its deploy could not settle in time.
        if Instant::now() + LAST_START > shared.deadline() {
            shared.tally.lock().expect("tally").skipped += nodes.len() - i;
            return;
        }
        shared.count_ops(2);
        if shared.provision(uuid, "active", true).await == Some(StatusCode::ACCEPTED) {
            shared.settle(uuid, settle).await;
        }
        let key = format!("k{k}_{i}");
        let value = format!("{uuid}/{}", random_suffix());
        shared.patch_extra(uuid, &key, &value, true).await;
    }
}

/// One probe node (no deploy delay) owned on the ring by each of the first `count` conductors,
/// available; their UUIDs.
pub async fn probe_nodes(cluster: &Cluster, count: usize) -> Vec<String> {
    let mut probes = Vec::new();
    for owner in cluster.conductor_hosts.iter().take(count) {
        let uuid = loop {
            let candidate = uuid::Uuid::new_v4().to_string();
            if &cluster.owner_of(&candidate) == owner {
                break candidate;
            }
        };
        cluster
            .api
            .available_node(json!({"uuid": uuid, "name": format!("probe-{owner}")}))
            .await;
        probes.push(uuid);
    }
    probes
}

/// `count` available fake nodes deploying with `delay` seconds; their UUIDs. The first is made
/// through the API (created, managed, provided); the others are copies of its row, each with
/// a UUID of its own, written into the database: the nodes are the load's setting, not what a
/// scenario tests, and 200 of them through the API cost each scenario 4-10 s of the machine's
/// CPU.
async fn available_nodes(cluster: &Cluster, count: usize, delay: f64) -> Vec<String> {
    use futures::StreamExt as _;
    let first = cluster
        .api
        .available_node(json!({"driver_info": {"fake_deploy_delay": delay}}))
        .await;
    let first = first["uuid"].as_str().expect("uuid").to_owned();
    let template = db::nodes::get_by_uuid(&cluster.db.db, &first)
        .await
        .expect("the first node");
    let copies: Vec<Node> = (1..count)
        .map(|_| Node {
            uuid: uuid::Uuid::new_v4().to_string(),
            last_request_id: None,
            created_at: ferrum::node::now(),
            ..template.clone()
        })
        .collect();
    let mut uuids = vec![first];
    uuids.extend(copies.iter().map(|n| n.uuid.clone()));
    futures::stream::iter(copies.iter().map(|node| async move {
        db::nodes::insert(&cluster.db.db, node)
            .await
            .expect("insert a node")
    }))
    .buffer_unordered(8)
    .collect::<Vec<_>>()
    .await;
    uuids
}

/// A load in flight against a cluster, and what the suite needs to judge it.
pub struct FaultRun {
    name: String,
    started: Instant,
    shared: Arc<Shared>,
    clients: Vec<JoinHandle<()>>,
    probes: Vec<String>,
    notes: Vec<String>,
    load_started: Instant,
}

impl FaultRun {
    /// Creates the plan's nodes (available, with the deploy delay; see [`available_nodes`]) and
    /// two probe nodes (no delay, one owned by each of the first two conductors), then starts
    /// the clients.
    pub async fn start(name: &str, cluster: &Cluster, plan: LoadPlan) -> FaultRun {
        let started = Instant::now();
        let api = cluster.api.clone();
        let prepared = available_nodes(cluster, plan.nodes, plan.deploy_delay).await;
        let probes = probe_nodes(cluster, 2).await;
        let shared = Shared::new(&api.base, plan.client_timeout, None);
        let notes = vec![format!(
            "prepared {} nodes in {:.1}s",
            prepared.len(),
            started.elapsed().as_secs_f64()
        )];
        let settle = Duration::from_secs_f64(plan.deploy_delay * 3.0 + 5.0);
        let clients = (0..plan.clients)
            .map(|k| {
                let mine: Vec<String> = prepared
                    .iter()
                    .skip(k)
                    .step_by(plan.clients)
                    .cloned()
                    .collect();
                tokio::spawn(client_loop(shared.clone(), k, mine, settle))
            })
            .collect();
        FaultRun {
            name: name.to_owned(),
            started,
            shared,
            clients,
            probes,
            notes,
            load_started: Instant::now(),
        }
    }

    /// A line for the report (what the fault was, how long a restart took, ...).
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// Marks the API process as dead (connection errors are then expected) or back.
    pub fn api_down(&self, down: bool) {
        self.shared.api_down(down);
    }

    /// Keeps `tasks` PATCHes in flight to `host`, back to back, for `span`: a fault in that
    /// span meets calls on their way to that conductor. They go to the load's nodes that `host`
    /// owns on the ring and that the load is done with (deployed and PATCHed), so that they do
    /// not hold up the load; they count as the load's requests, and their acknowledged values
    /// are checked at the end.
    pub fn rpc_burst(&mut self, cluster: &Cluster, host: &str, tasks: usize, span: Duration) {
        let done: std::collections::HashSet<String> = self
            .shared
            .tally
            .lock()
            .expect("tally")
            .acked
            .iter()
            .map(|(uuid, _, _)| uuid.clone())
            .collect();
        let targets: Arc<Vec<String>> = Arc::new(
            done.into_iter()
                .filter(|uuid| cluster.owner_of(uuid) == host)
                .collect(),
        );
        assert!(
            !targets.is_empty(),
            "no node the load is done with belongs to {host}"
        );
        let until = Instant::now() + span;
        for t in 0..tasks {
            let shared = self.shared.clone();
            let targets = targets.clone();
            self.clients.push(tokio::spawn(async move {
                let mut i = 0;
                while Instant::now() < until {
                    let uuid = &targets[(t + i * tasks) % targets.len()];
                    shared.tally.lock().expect("tally").ops += 1;
                    let value = format!("{uuid}/{}", random_suffix());
                    shared
                        .patch_extra(uuid, &format!("burst{t}_{i}"), &value, true)
                        .await;
                    i += 1;
                }
            }));
        }
        self.note(format!(
            "{tasks} PATCHes kept in flight to {host}'s {} nodes for {:.1}s",
            targets.len(),
            span.as_secs_f64()
        ));
    }

    /// Waits (at most 30 s) until at least `at_least` nodes are deploying under a lock, held by
    /// `host` when given: deploys in flight. Returns their UUIDs.
    pub async fn wait_in_flight(
        &mut self,
        cluster: &Cluster,
        host: Option<&str>,
        at_least: usize,
    ) -> Vec<String> {
        // Let the load reach its stride first: deploys starting, running, ending, PATCHes.
        tokio::time::sleep_until((self.load_started + WARM_UP).into()).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let held: Vec<String> = db::nodes::list(&cluster.db.db, 10_000, None)
                .await
                .expect("read the locks")
                .into_iter()
                .filter(|n| {
                    n.provision_state == ProvisionState::Deploying
                        && n.reservation.is_some()
                        && host.is_none_or(|h| n.reservation.as_deref() == Some(h))
                })
                .map(|n| n.uuid)
                .collect();
            if held.len() >= at_least {
                self.note(format!(
                    "{:.1}s into the load: {} deploys running{}",
                    self.load_started.elapsed().as_secs_f64(),
                    held.len(),
                    host.map(|h| format!(" by {h}")).unwrap_or_default()
                ));
                return held;
            }
            assert!(
                Instant::now() < deadline,
                "the load never had {at_least} deploys in flight"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// How long after `since` full service (see [`probe_until_served`]) first held, or None
    /// if it did not within `limit`: for a fault in the middle of a run.
    pub async fn time_to_full_service(&self, since: Instant, limit: Duration) -> Option<Duration> {
        probe_until_served(
            self.shared.clone(),
            self.probes.clone(),
            since,
            since + limit,
        )
        .await
    }

    /// From `service_back` (the faulty service's return, or the process's death) on: probes
    /// until full service, lets the load end, waits for the nodes to settle, all within
    /// `window`; then takes the final snapshot and judges it. Call it right after the fault.
    pub async fn finish(
        self,
        cluster: &mut Cluster,
        service_back: Instant,
        window: Duration,
    ) -> Verdict {
        self.finish_supervised(cluster, None, service_back, window)
            .await
    }

    /// [`finish`](Self::finish), with `supervisor` (if any) starting again the conductors that
    /// exit by themselves meanwhile.
    pub async fn finish_supervised(
        mut self,
        cluster: &mut Cluster,
        mut supervisor: Option<&mut Supervisor>,
        service_back: Instant,
        window: Duration,
    ) -> Verdict {
        let deadline = service_back + window;
        *self.shared.deadline.lock().expect("deadline") = deadline;
        let probe = tokio::spawn(probe_until_served(
            self.shared.clone(),
            self.probes.clone(),
            service_back,
            deadline,
        ));
        let clients_and_probe = async {
            for client in std::mem::take(&mut self.clients) {
                client.await.expect("load client");
            }
            let load_ended = service_back.elapsed();
            (load_ended, probe.await.expect("probe"))
        };
        let (load_ended, recovery) = match supervisor.as_deref_mut() {
            Some(supervisor) => supervisor.during(cluster, clients_and_probe).await,
            None => clients_and_probe.await,
        };
        // The harness's own pool may hold connections the fault broke: read through a new one.
        cluster.db.reconnect();
        let mut nodes = settled_snapshot(cluster, supervisor.as_deref_mut(), deadline).await;
        tokio::time::sleep(QUIET).await;
        if let Some(later) = snapshot(cluster).await {
            nodes = Some(later);
        }
        self.note(format!(
            "load ended {:.1}s after the service's return",
            load_ended.as_secs_f64()
        ));
        if let Some(supervisor) = supervisor {
            self.note(format!(
                "conductors that exited by themselves and were started again: {}",
                supervisor.exits.len()
            ));
            for exit in &supervisor.exits {
                self.note(exit.clone());
            }
        }
        Verdict::judge(self, cluster, nodes, recovery)
    }
}

/// The nodes as the database has them, or None when it cannot be read.
async fn snapshot(cluster: &Cluster) -> Option<Vec<Node>> {
    db::nodes::list(&cluster.db.db, 10_000, None).await.ok()
}

/// The nodes once none is transient or locked, or as they are when the deadline passes.
async fn settled_snapshot(
    cluster: &mut Cluster,
    mut supervisor: Option<&mut Supervisor>,
    deadline: Instant,
) -> Option<Vec<Node>> {
    loop {
        if let Some(supervisor) = supervisor.as_deref_mut() {
            supervisor.tend(cluster);
        }
        let nodes = snapshot(cluster).await;
        let settled = nodes.as_ref().is_some_and(|nodes| {
            nodes
                .iter()
                .all(|n| !n.provision_state.is_unstable() && n.reservation.is_none())
        });
        if settled || Instant::now() > deadline {
            return nodes;
        }
        if nodes.is_none() {
            cluster.db.reconnect();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Full service: GET, PATCH and a deploy (to `active`) of each probe node all succeed. Returns
/// how long after `since` that first held for every probe node, or None by `deadline`.
async fn probe_until_served(
    shared: Arc<Shared>,
    probes: Vec<String>,
    since: Instant,
    deadline: Instant,
) -> Option<Duration> {
    let rounds = probes.into_iter().map(|uuid| {
        let shared = shared.clone();
        async move {
            let mut n = 0;
            while Instant::now() < deadline {
                n += 1;
                if shared.probe_once(&uuid, n, deadline).await {
                    return Some(since.elapsed());
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            None
        }
    });
    let times = futures::future::join_all(rounds).await;
    times
        .into_iter()
        .try_fold(Duration::ZERO, |max, t| Some(max.max(t?)))
}

/// The deploy starts of each node, counted in the `ferrum` processes' logs (the fake deploy's
/// [`DEPLOY_STARTED`] line). Read on from where it stopped: the logs only grow (a restarted
/// process appends to its predecessor's).
#[derive(Default)]
pub struct DeployStarts {
    /// Bytes of each process's log counted so far, up to its last complete line.
    read: HashMap<String, u64>,
    by_node: HashMap<String, usize>,
}

impl DeployStarts {
    /// Counts the lines the logs gained since the last call.
    pub fn read_new(&mut self, cluster: &Cluster) {
        use std::io::{Read as _, Seek as _};
        for name in cluster.process_names() {
            let Some(mut file) = cluster
                .log_path(&name)
                .and_then(|p| std::fs::File::open(p).ok())
            else {
                continue;
            };
            let from = self.read.get(&name).copied().unwrap_or(0);
            let mut bytes = Vec::new();
            if file.seek(std::io::SeekFrom::Start(from)).is_err()
                || file.read_to_end(&mut bytes).is_err()
            {
                continue;
            }
            let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            for line in String::from_utf8_lossy(&bytes[..complete]).lines() {
                if let Some((_, rest)) = line.split_once(DEPLOY_STARTED) {
                    let uuid: String = rest.chars().take(36).collect();
                    *self.by_node.entry(uuid).or_default() += 1;
                }
            }
            self.read.insert(name, from + complete as u64);
        }
    }

    /// Deploy starts counted so far.
    pub fn total(&self) -> usize {
        self.by_node.values().sum()
    }

    /// The nodes (but those `skip` names) whose deploy started more often than a deploy of
    /// theirs was accepted (`accepted`, by UUID), sorted.
    pub fn beyond(
        &self,
        accepted: &HashMap<String, usize>,
        skip: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let mut beyond: Vec<String> = self
            .by_node
            .iter()
            .filter(|(uuid, _)| !skip(uuid))
            .filter_map(|(uuid, &n)| {
                let accepted = accepted.get(uuid).copied().unwrap_or(0);
                (n > accepted).then(|| format!("{uuid}: started {n}x, accepted {accepted}x"))
            })
            .collect();
        beyond.sort();
        beyond
    }
}

/// The figures of one scenario and what broke.
pub struct Verdict {
    pub name: String,
    pub tally: Tally,
    /// Nodes in a transient state at the end: (UUID, state, holder).
    pub stuck: Vec<String>,
    /// Nodes still locked at the end: (UUID, holder).
    pub locked: Vec<String>,
    /// Nodes whose deploy started more often than a deploy request was accepted.
    pub double_deploys: Vec<String>,
    /// Acknowledged PATCH values missing at the end.
    pub lost_writes: Vec<String>,
    /// From the service's return (or the process's death) to full service.
    pub recovery: Option<Duration>,
    /// Whether the database could be read at the end at all.
    pub db_readable: bool,
    pub nodes: Vec<Node>,
    pub wall: Duration,
    pub notes: Vec<String>,
    /// Scenario-specific failures, added by the scenario before `assert_clean`.
    pub extra_failures: Vec<String>,
}

impl Verdict {
    fn judge(
        run: FaultRun,
        cluster: &Cluster,
        nodes: Option<Vec<Node>>,
        recovery: Option<Duration>,
    ) -> Verdict {
        let tally = run.shared.tally.lock().expect("tally").clone();
        let db_readable = nodes.is_some();
        let nodes = nodes.unwrap_or_default();
        let stuck = nodes
            .iter()
            .filter(|n| n.provision_state.is_unstable())
            .map(|n| {
                format!(
                    "{} {} held by {:?}",
                    n.uuid, n.provision_state, n.reservation
                )
            })
            .collect();
        let locked = nodes
            .iter()
            .filter_map(|n| Some(format!("{} by {}", n.uuid, n.reservation.as_ref()?)))
            .collect();
        let mut starts = DeployStarts::default();
        starts.read_new(cluster);
        let mut notes = run.notes;
        notes.push(format!(
            "deploy starts in the logs: {}, deploy requests accepted: {}",
            starts.total(),
            tally.accepted.values().sum::<usize>()
        ));
        let double_deploys = starts.beyond(&tally.accepted, |_| false);
        let by_uuid: HashMap<&str, &Node> = nodes.iter().map(|n| (n.uuid.as_str(), n)).collect();
        let lost_writes = if db_readable {
            tally
                .acked
                .iter()
                .filter_map(|(uuid, key, value)| {
                    let found = by_uuid.get(uuid.as_str()).map(|n| n.extra.get(key));
                    match found {
                        None => None, // deleted later
                        Some(Some(Value::String(v))) if v == value => None,
                        Some(other) => Some(format!("{uuid} extra/{key}={value}: {other:?}")),
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        Verdict {
            name: run.name,
            tally,
            stuck,
            locked,
            double_deploys,
            lost_writes,
            recovery,
            db_readable,
            nodes,
            wall: run.started.elapsed(),
            notes,
            extra_failures: Vec::new(),
        }
    }

    /// The node as the final snapshot has it.
    pub fn node(&self, uuid: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.uuid == uuid)
    }

    /// The one summary line, then the details, to stderr and to `fault-report.txt` in the
    /// target directory. Call it before asserting, so that a failing scenario shows its figures.
    pub fn report(&self) {
        let t = &self.tally;
        let recovery = self
            .recovery
            .map_or_else(|| "none".to_owned(), |d| format!("{:.1}", d.as_secs_f64()));
        let line = format!(
            "FAULT {}: requests={} unanswered={} conn_errors={} 5xx={} stuck={} locks_leaked={} double_deploys={} recovery_s={} | lost_writes={} conn_errors_api_down={} failed_ops={}/{} skipped_nodes={} statuses={:?} slowest_s={:.1} db_readable={} wall_s={:.1}",
            self.name,
            t.requests,
            t.unanswered,
            t.conn_errors,
            t.five_xx(),
            self.stuck.len(),
            self.locked.len(),
            self.double_deploys.len(),
            recovery,
            self.lost_writes.len(),
            t.conn_errors_api_down,
            t.failed_ops.len(),
            t.ops,
            t.skipped,
            t.statuses,
            t.slowest.as_secs_f64(),
            self.db_readable,
            self.wall.as_secs_f64(),
        );
        let mut text = format!("{line}\n");
        for note in &self.notes {
            text.push_str(&format!("    {}: {note}\n", self.name));
        }
        let mut states: BTreeMap<String, usize> = BTreeMap::new();
        for n in &self.nodes {
            *states.entry(n.provision_state.to_string()).or_default() += 1;
        }
        text.push_str(&format!("    {}: final states {states:?}\n", self.name));
        for (kind, n) in t.five_xx_kinds.iter().take(5) {
            text.push_str(&format!("    {}: 5xx x{n}: {kind}\n", self.name));
        }
        let mut errors: BTreeMap<String, usize> = BTreeMap::new();
        for n in &self.nodes {
            if let Some(e) = &n.last_error {
                let short: String = e.chars().take(90).collect();
                *errors.entry(short).or_default() += 1;
            }
        }
        for (e, n) in errors.iter().take(5) {
            text.push_str(&format!("    {}: last_error x{n}: {e}\n", self.name));
        }
        let _ = std::io::stderr().write_all(text.as_bytes());
        let path = report_path();
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        {
            let _ = file.write_all(text.as_bytes());
        }
    }

    /// Fails with every broken promise at once.
    pub fn assert_clean(&self) {
        let t = &self.tally;
        let mut failures = self.extra_failures.clone();
        let sample = |v: &[String]| v.iter().take(5).cloned().collect::<Vec<_>>().join("; ");
        if t.unanswered > 0 {
            failures.push(format!(
                "{} requests got no answer within the client timeout",
                t.unanswered
            ));
        }
        if t.conn_errors > 0 {
            failures.push(format!(
                "{} requests failed on the connection while the API process was up: {}",
                t.conn_errors,
                sample(&t.conn_error_samples)
            ));
        }
        if let Some(n) = t.statuses.get(&500) {
            failures.push(format!("{n} answers were 500 (not a clear error)"));
        }
        if !t.failed_ops.is_empty() {
            failures.push(format!(
                "{} of {} operations did not end with an answer below 500 within the window: {}",
                t.failed_ops.len(),
                t.ops,
                sample(&t.failed_ops)
            ));
        }
        if !self.db_readable {
            failures.push("the database could not be read at the end".to_owned());
        }
        if !self.stuck.is_empty() {
            failures.push(format!(
                "{} nodes stuck in a transient state: {}",
                self.stuck.len(),
                sample(&self.stuck)
            ));
        }
        if !self.locked.is_empty() {
            failures.push(format!(
                "{} locks leaked: {}",
                self.locked.len(),
                sample(&self.locked)
            ));
        }
        if !self.double_deploys.is_empty() {
            failures.push(format!(
                "{} nodes deployed more often than accepted: {}",
                self.double_deploys.len(),
                sample(&self.double_deploys)
            ));
        }
        if !self.lost_writes.is_empty() {
            failures.push(format!(
                "{} acknowledged PATCHes lost: {}",
                self.lost_writes.len(),
                sample(&self.lost_writes)
            ));
        }
        if self.recovery.is_none() {
            failures.push("full service (GET, PATCH, deploy of a fresh node) never came back within the window".to_owned());
        }
        assert!(
            failures.is_empty(),
            "FAULT {}:\n  - {}",
            self.name,
            failures.join("\n  - ")
        );
    }
}

/// `fault-report.txt` in the target directory (found from the `ferrum` binary's path).
pub fn report_path() -> std::path::PathBuf {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_ferrum"));
    bin.parent()
        .and_then(std::path::Path::parent)
        .map_or_else(std::env::temp_dir, std::path::Path::to_path_buf)
        .join("fault-report.txt")
}
