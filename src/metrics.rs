//! Prometheus metrics of this process: one registry, recorded where things happen, rendered in
//! the Prometheus text format by `GET /metrics` (the API's, and a conductor's own listener when
//! `conductor.metrics_bind` is set).
//!
//! Recording is atomics only: a counter or histogram with labels is found by an FNV hash of its
//! label values under a read lock, and a histogram observes without a lock (the `prometheus`
//! crate's hot/cold shards). No label value is allocated per request: routes are the router's
//! templates (`/v1/nodes/{ident}`, shared `Arc<str>`s), never raw paths, so every label has a
//! bounded set of values. Gauges of pools (DB connections) are read when scraped, not kept up
//! to date on every checkout.

use std::sync::LazyLock;

use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use crate::states::ProvisionState;

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Latency buckets, in seconds: a GET answers in well under a millisecond, an RPC in a few,
/// a request waiting on a lock in seconds.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Every metric of the process. Names and labels are listed in README ("Metrics").
pub struct Metrics {
    registry: Registry,
    http_requests: IntCounterVec,
    http_duration: HistogramVec,
    rpc_calls: HistogramVec,
    rpc_handled: HistogramVec,
    provision_moves: IntCounterVec,
    deploys: IntCounterVec,
    workers_busy: IntGauge,
    workers_capacity: IntGauge,
    lock_waits: IntCounter,
    lock_conflicts: IntCounter,
    db_connections: IntGaugeVec,
    db_max_connections: IntGauge,
    db_waiting: IntGauge,
    db_wait_timeouts: IntCounter,
    durable_writes: IntCounter,
    wal_syncs: IntCounter,
    background_cpu: IntCounterVec,
    agent_requests: IntCounter,
    ipmitool_runs: IntCounter,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn get() -> &'static Metrics {
    &METRICS
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("a valid metric name");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

fn counters(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric name");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("a valid metric name");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

fn histograms(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> HistogramVec {
    let h = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec()),
        labels,
    )
    .expect("a valid metric name");
    registry
        .register(Box::new(h.clone()))
        .expect("registered once");
    h
}

// The names and labels are constants: a bad one fails every test at once (the `expect`s).
impl Metrics {
    fn new() -> Metrics {
        let r = Registry::new();
        let db_connections = IntGaugeVec::new(
            Opts::new(
                "ferrum_db_pool_connections",
                "Open database connections of this process's pool, in use or idle.",
            ),
            &["state"],
        )
        .expect("a valid metric name");
        r.register(Box::new(db_connections.clone()))
            .expect("registered once");
        Metrics {
            http_requests: counters(
                &r,
                "ferrum_http_requests_total",
                "HTTP requests answered, by method, route template and status.",
                &["method", "route", "status"],
            ),
            http_duration: histograms(
                &r,
                "ferrum_http_request_duration_seconds",
                "Time from a request's arrival to its response, by method and route template.",
                &["method", "route"],
            ),
            rpc_calls: histograms(
                &r,
                "ferrum_rpc_call_duration_seconds",
                "RPC calls the API made to conductors, until the reply (or the error), by method.",
                &["method"],
            ),
            rpc_handled: histograms(
                &r,
                "ferrum_rpc_handle_duration_seconds",
                "RPC requests a conductor handled, until its reply, by method and result.",
                &["method", "result"],
            ),
            provision_moves: counters(
                &r,
                "ferrum_provision_state_changes_total",
                "Provision state changes written by conductors, by previous and new state.",
                &["from", "to"],
            ),
            deploys: counters(
                &r,
                "ferrum_deploys_total",
                "Deploys ended, by outcome: success (deploying to active) or failure (deploy failed).",
                &["outcome"],
            ),
            workers_busy: gauge(
                &r,
                "ferrum_conductor_workers_busy",
                "Conductor workers running provisioning work now.",
            ),
            workers_capacity: gauge(
                &r,
                "ferrum_conductor_workers",
                "Conductor workers (conductor.workers): beyond them, NoFreeConductorWorker.",
            ),
            lock_waits: counter(
                &r,
                "ferrum_node_lock_waits_total",
                "Times a conductor found a node locked by another and waited to look again.",
            ),
            lock_conflicts: counter(
                &r,
                "ferrum_node_lock_conflicts_total",
                "Requests that gave up on a node locked by another (NodeLocked, 409).",
            ),
            db_connections,
            db_max_connections: gauge(
                &r,
                "ferrum_db_pool_max_connections",
                "The size of this process's database pool (database.pool_size).",
            ),
            db_waiting: gauge(
                &r,
                "ferrum_db_pool_waiting",
                "Tasks waiting for a database connection now.",
            ),
            db_wait_timeouts: counter(
                &r,
                "ferrum_db_pool_wait_timeouts_total",
                "Checkouts that gave up waiting for a database connection.",
            ),
            durable_writes: counter(
                &r,
                "ferrum_db_durable_writes_total",
                "Writes to the embedded database that waited to be on disk.",
            ),
            wal_syncs: counter(
                &r,
                "ferrum_db_wal_syncs_total",
                "Syncs of the embedded database's WAL (each covers every write committed before it).",
            ),
            background_cpu: counters(
                &r,
                "ferrum_background_cpu_microseconds_total",
                "CPU time a conductor's background task spent in its own work (its periodic rounds, the lease), by task.",
                &["task"],
            ),
            agent_requests: counter(
                &r,
                "ferrum_agent_requests_total",
                "Requests a conductor sent to deploy ramdisks' agents (commands and polls).",
            ),
            ipmitool_runs: counter(
                &r,
                "ferrum_ipmitool_runs_total",
                "ipmitool processes a conductor ran (each a command to a BMC, retries included).",
            ),
            registry: r,
        }
    }
}

impl Metrics {
    /// One HTTP request answered. `route` is the matched route template.
    pub fn http_request(&self, method: &str, route: &str, status: &str, seconds: f64) {
        self.http_requests
            .with_label_values(&[method, route, status])
            .inc();
        self.http_duration
            .with_label_values(&[method, route])
            .observe(seconds);
    }

    /// One RPC call made by the API.
    pub fn rpc_call(&self, method: &str, seconds: f64) {
        self.rpc_calls.with_label_values(&[method]).observe(seconds);
    }

    /// One RPC request handled by a conductor.
    pub fn rpc_handled(&self, method: &str, ok: bool, seconds: f64) {
        let result = if ok { "ok" } else { "error" };
        self.rpc_handled
            .with_label_values(&[method, result])
            .observe(seconds);
    }

    /// A provision state change a conductor wrote; a deploy's end is counted by its outcome.
    pub fn provision_move(&self, from: ProvisionState, to: ProvisionState) {
        self.provision_moves
            .with_label_values(&[from.api_name(), to.api_name()])
            .inc();
        // A deploy (or rebuild) succeeds only by `deploying` → `active`, and every failed or
        // aborted one ends in `deploy failed`, whatever step it was at.
        let outcome = match (from, to) {
            (ProvisionState::Deploying, ProvisionState::Active) => Some("success"),
            (_, ProvisionState::DeployFail) => Some("failure"),
            _ => None,
        };
        if let Some(outcome) = outcome {
            self.deploys.with_label_values(&[outcome]).inc();
        }
    }

    /// A conductor's worker pool size.
    pub fn set_worker_capacity(&self, workers: usize) {
        self.workers_capacity
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
    }

    /// A worker was taken (`true`) or given back (`false`).
    pub fn worker_busy(&self, taken: bool) {
        if taken {
            self.workers_busy.inc();
        } else {
            self.workers_busy.dec();
        }
    }

    /// A node was found locked by another and will be looked at again.
    pub fn lock_wait(&self) {
        self.lock_waits.inc();
    }

    /// A request gave up on a locked node.
    pub fn lock_conflict(&self) {
        self.lock_conflicts.inc();
    }

    /// A checkout gave up waiting for a database connection.
    pub fn db_wait_timeout(&self) {
        self.db_wait_timeouts.inc();
    }

    /// A write to the embedded database waited to be on disk.
    pub fn durable_write(&self) {
        self.durable_writes.inc();
    }

    /// The embedded database's WAL was synced once.
    pub fn wal_sync(&self) {
        self.wal_syncs.inc();
    }

    /// A request was sent to a node's agent.
    pub fn agent_request(&self) {
        self.agent_requests.inc();
    }

    /// An ipmitool process was started.
    pub fn ipmitool_run(&self) {
        self.ipmitool_runs.inc();
    }
}

/// Runs `task`, adding the CPU time of each of its polls to
/// `ferrum_background_cpu_microseconds_total{task=name}`: what a periodic task costs, and what a
/// phase of provisioning costs with the background apart (the lab's figures). A poll is timed by
/// the thread's CPU clock (two `clock_gettime` calls), so work the task hands to other threads
/// is not counted; the embedded database runs on the polling thread and is.
pub async fn background<F: Future>(name: &'static str, task: F) -> F::Output {
    let counter = get().background_cpu.with_label_values(&[name]);
    let mut task = std::pin::pin!(task);
    // Most polls take a few microseconds: what a poll leaves under a whole microsecond is
    // carried to the next rather than dropped.
    let mut carried_ns: u128 = 0;
    std::future::poll_fn(|cx| {
        let start = thread_cpu();
        let poll = task.as_mut().poll(cx);
        carried_ns += thread_cpu().saturating_sub(start).as_nanos();
        counter.inc_by(u64::try_from(carried_ns / 1000).unwrap_or(u64::MAX));
        carried_ns %= 1000;
        poll
    })
    .await
}

/// The calling thread's CPU time so far.
fn thread_cpu() -> std::time::Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    std::time::Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// A database pool's state when scraped.
#[derive(Debug, Clone, Copy)]
pub struct PoolStatus {
    pub max_size: usize,
    pub in_use: usize,
    pub idle: usize,
    pub waiting: usize,
}

/// The process's metrics in the Prometheus text format, with the database pool's gauges read
/// from `pool`.
pub fn render(pool: PoolStatus) -> String {
    get().render(pool)
}

impl Metrics {
    fn render(&self, pool: PoolStatus) -> String {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.db_max_connections.set(gauge(pool.max_size));
        self.db_connections
            .with_label_values(&["in_use"])
            .set(gauge(pool.in_use));
        self.db_connections
            .with_label_values(&["idle"])
            .set(gauge(pool.idle));
        self.db_waiting.set(gauge(pool.waiting));
        let mut text = String::new();
        if let Err(e) = TextEncoder::new().encode_utf8(&self.registry.gather(), &mut text) {
            tracing::error!(error = %e, "cannot render the metrics");
        }
        text
    }
}

/// The label of an HTTP method: the standard ones by name, anything else `other` (a client
/// must not be able to add label values).
pub fn method_label(method: &http::Method) -> &'static str {
    use http::Method as M;
    match *method {
        M::GET => "GET",
        M::POST => "POST",
        M::PUT => "PUT",
        M::PATCH => "PATCH",
        M::DELETE => "DELETE",
        M::HEAD => "HEAD",
        M::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use prom_text_format_parser::{Scrape, ValueType};

    use super::*;

    fn sample(text: &str, name: &str, kind: ValueType, labels: &[(&str, &str)]) -> Option<f64> {
        let scrape = Scrape::parse(text).unwrap();
        let metric = scrape.metrics.into_iter().find(|m| m.name == name)?;
        metric
            .samples
            .iter()
            .find(|s| {
                s.value.value_type == kind
                    && s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.iter().any(|l| l.key == *k && l.value == *v))
            })
            .map(|s| s.value.value.as_f64())
    }

    /// What is recorded is what a scraper reads: a route template's braces survive, a deploy
    /// is counted by its outcome and nothing else is a deploy, histograms count and sum.
    #[test]
    fn recorded_values_are_read_back_from_the_text() {
        use ProvisionState as S;
        let m = Metrics::new();
        m.http_request("GET", "/v1/nodes/{ident}", "200", 0.002);
        m.http_request("GET", "/v1/nodes/{ident}", "200", 0.004);
        m.http_request("GET", "/v1/nodes/{ident}", "404", 0.001);
        m.provision_move(S::Available, S::Deploying);
        m.provision_move(S::Deploying, S::Active);
        m.provision_move(S::DeployWait, S::DeployFail);
        m.provision_move(S::Servicing, S::Active);
        m.provision_move(S::Cleaning, S::Available);
        m.worker_busy(true);
        m.worker_busy(true);
        m.worker_busy(false);
        let text = m.render(PoolStatus {
            max_size: 16,
            in_use: 2,
            idle: 3,
            waiting: 1,
        });
        let get = |name, labels: &[(&str, &str)]| sample(&text, name, ValueType::Sample, labels);
        let route = ("route", "/v1/nodes/{ident}");
        assert_eq!(
            get(
                "ferrum_http_requests_total",
                &[("method", "GET"), route, ("status", "200")]
            ),
            Some(2.0)
        );
        assert_eq!(
            sample(
                &text,
                "ferrum_http_request_duration_seconds",
                ValueType::Count,
                &[("method", "GET"), route]
            ),
            Some(3.0)
        );
        let sum = sample(
            &text,
            "ferrum_http_request_duration_seconds",
            ValueType::Sum,
            &[("method", "GET"), route],
        )
        .unwrap();
        assert!((sum - 0.007).abs() < 1e-9, "{sum}");
        assert_eq!(
            get("ferrum_deploys_total", &[("outcome", "success")]),
            Some(1.0)
        );
        assert_eq!(
            get("ferrum_deploys_total", &[("outcome", "failure")]),
            Some(1.0)
        );
        assert_eq!(
            get(
                "ferrum_provision_state_changes_total",
                &[("from", "clean wait"), ("to", "available")]
            ),
            None
        );
        assert_eq!(
            get(
                "ferrum_provision_state_changes_total",
                &[("from", "cleaning"), ("to", "available")]
            ),
            Some(1.0)
        );
        assert_eq!(get("ferrum_conductor_workers_busy", &[]), Some(1.0));
        assert_eq!(
            get("ferrum_db_pool_connections", &[("state", "in_use")]),
            Some(2.0)
        );
        assert_eq!(
            get("ferrum_db_pool_connections", &[("state", "idle")]),
            Some(3.0)
        );
        assert_eq!(get("ferrum_db_pool_max_connections", &[]), Some(16.0));
        assert_eq!(get("ferrum_db_pool_waiting", &[]), Some(1.0));
    }

    #[test]
    fn a_method_nobody_knows_is_other() {
        assert_eq!(method_label(&http::Method::PATCH), "PATCH");
        let made_up = http::Method::from_bytes(b"BREW").unwrap();
        assert_eq!(method_label(&made_up), "other");
    }
}
