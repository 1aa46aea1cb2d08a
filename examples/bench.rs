//! Ferrum's benchmark: starts a deployment of real processes, drives it over HTTP, prints figures.
//!
//! ```sh
//! cargo build --release && cargo run --release --example bench -- --stack embedded --nodes 1000
//! ```
//!
//! `--stack embedded` (default): one `ferrum all-in-one` process on a fresh SQLite file with the
//! in-process transport. `--stack multi-host`: `ferrum api` + 2 `ferrum conductor` on
//! MariaDB/MySQL and RabbitMQ (a fresh database `ferrum_bench_<pid>`, dropped at the end).
//! It measures, in this order:
//! resident memory of each process idle; fake deploys end to end (PUT active → observed active)
//! with `--in-flight` deploys in flight, and the service CPU they cost; PATCH latency; GET
//! /v1/nodes/{id} throughput at 16 connections; resident memory after all that.
//! Completion is observed by one query per millisecond on the database (not through the API), so
//! the service CPU measured is the deploys' own.
//! `--profile-fifo PATH` writes `enable` to PATH before the timed deploys and `disable` after
//! them, so that `perf record --control fifo:PATH -D -1 -- bench ...` profiles the deploys alone.

#![expect(clippy::print_stdout, reason = "a benchmark's figures are its output")]

use std::{
    collections::HashSet,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use diesel::sql_query;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use ferrum::{db::Db, states::ProvisionState};
use serde_json::json;
use tokio::sync::{Mutex, Semaphore};

struct Options {
    multi_host: bool,
    nodes: usize,
    in_flight: usize,
    mysql: String,
    amqp: String,
    profile_fifo: Option<PathBuf>,
}

fn options() -> anyhow::Result<Options> {
    let mut o = Options {
        multi_host: false,
        nodes: 100,
        in_flight: 16,
        mysql: std::env::var("FERRUM_TEST_MYSQL_URL")
            .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_owned()),
        amqp: std::env::var("FERRUM_TEST_AMQP_URL")
            .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned()),
        profile_fifo: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().context("missing value");
        match a.as_str() {
            "--stack" => {
                o.multi_host = match value()?.as_str() {
                    "embedded" => false,
                    "multi-host" => true,
                    other => bail!("--stack is embedded or multi-host, not {other}"),
                }
            }
            "--nodes" => o.nodes = value()?.parse()?,
            "--in-flight" => o.in_flight = value()?.parse()?,
            "--mysql" => o.mysql = value()?,
            "--amqp" => o.amqp = value()?,
            "--profile-fifo" => o.profile_fifo = Some(value()?.into()),
            other => {
                bail!(
                    "unknown argument {other} (--stack embedded|multi-host --nodes N --in-flight N --mysql URL --amqp URL --profile-fifo PATH)"
                )
            }
        }
    }
    Ok(o)
}

struct Proc {
    name: String,
    child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Resident memory in MiB.
    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }

    /// User + system CPU seconds so far.
    fn cpu_seconds(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command name (which is in parentheses): utime is 14th, stime 15th.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (ticks(11) + ticks(12)) / 100.0
    }
}

fn ferrum_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(|p| p.parent())
        .context("examples dir")?;
    let bin = dir.join("ferrum");
    if !bin.exists() {
        bail!(
            "{} not found: run `cargo build --release` first",
            bin.display()
        );
    }
    Ok(bin)
}

fn spawn(
    bin: &PathBuf,
    name: &str,
    args: &[&str],
    env: &[(String, String)],
) -> anyhow::Result<Proc> {
    let child = Command::new(bin)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("spawn {name}"))?;
    Ok(Proc {
        name: name.to_owned(),
        child,
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let o = options()?;
    let bin = ferrum_binary()?;
    if !o.multi_host {
        let dir = std::env::temp_dir().join(format!("ferrum-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let url = format!("sqlite://{}", dir.join("ferrum.sqlite").display());
        let result = run(&o, &bin, &url).await;
        let _ = std::fs::remove_dir_all(&dir);
        return result;
    }
    let db_name = format!("ferrum_bench_{}", std::process::id());
    // A Galera cluster's URL names several hosts: the database is made through the first.
    let first_host = o.mysql.split(',').next().unwrap_or(&o.mysql);
    let mut admin = AsyncMysqlConnection::establish(&format!("{first_host}/mysql")).await?;
    sql_query(format!("CREATE DATABASE {db_name}"))
        .execute(&mut admin)
        .await?;
    let url = format!("{}/{db_name}", o.mysql);
    let result = run(&o, &bin, &url).await;
    sql_query(format!("DROP DATABASE IF EXISTS {db_name}"))
        .execute(&mut admin)
        .await?;
    result
}

async fn run(o: &Options, bin: &PathBuf, db_url: &str) -> anyhow::Result<()> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let transport = if o.multi_host {
        o.amqp.clone()
    } else {
        "local".to_owned()
    };
    let env: Vec<(String, String)> = vec![
        ("FERRUM_DATABASE_URL".into(), db_url.to_owned()),
        ("FERRUM_TRANSPORT_URL".into(), transport),
        (
            "FERRUM_TRANSPORT_PREFIX".into(),
            format!("bench{}", std::process::id()),
        ),
        ("FERRUM_API_BIND".into(), format!("127.0.0.1:{port}")),
    ];
    let host_env = |h: &str| {
        let mut e = env.clone();
        e.push(("FERRUM_CONDUCTOR_HOST".into(), h.to_owned()));
        e
    };
    let base = format!("http://127.0.0.1:{port}");
    // Where the conductors' metrics are read: their own listeners (multi-host), or the API's.
    let mut conductor_metrics = vec![base.clone()];
    let (procs, conductors) = if o.multi_host {
        let db = Db::connect(db_url, 2)?;
        db.migrate().await?;
        conductor_metrics.clear();
        let mut procs = Vec::new();
        for name in ["bench-c1", "bench-c2"] {
            let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            conductor_metrics.push(format!("http://127.0.0.1:{metrics_port}"));
            let mut e = host_env(name);
            e.push((
                "FERRUM_CONDUCTOR_METRICS_BIND".into(),
                format!("127.0.0.1:{metrics_port}"),
            ));
            procs.push(spawn(bin, name, &["conductor"], &e)?);
        }
        procs.push(spawn(bin, "api", &["api"], &env)?);
        (procs, 2)
    } else {
        let all = spawn(bin, "all-in-one", &["all-in-one"], &host_env("bench-c1"))?;
        (vec![all], 1)
    };
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()?;
    let ready = Instant::now();
    let db = loop {
        // The all-in-one process creates its database file: open it once the API answers.
        if http.get(&base).send().await.is_ok() {
            let db = Db::connect(db_url, 2)?;
            let alive = ferrum::db::conductors::list_alive(&db, Duration::from_secs(60)).await?;
            if alive.len() == conductors {
                break db;
            }
        }
        if ready.elapsed() > Duration::from_secs(30) {
            bail!("deployment did not come up");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    println!(
        "Ferrum benchmark: {}, {} nodes, {} in flight",
        if o.multi_host {
            "multi-host (api + 2 conductors, MySQL + RabbitMQ)"
        } else {
            "embedded (all-in-one, SQLite + in-process transport)"
        },
        o.nodes,
        o.in_flight
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    for p in &procs {
        println!("  idle RSS {:<12} {:6.1} MiB", p.name, p.rss_mib());
    }

    // Enroll and make the nodes available (not timed).
    let version = ("X-OpenStack-Ironic-API-Version", "1.31");
    let mut uuids = Vec::with_capacity(o.nodes);
    for i in 0..o.nodes {
        let r: serde_json::Value = http
            .post(format!("{base}/v1/nodes"))
            .header(version.0, version.1)
            .json(&json!({"name": format!("bench-{i}"), "driver": "fake-hardware"}))
            .send()
            .await?
            .json()
            .await?;
        uuids.push(r["uuid"].as_str().context("uuid")?.to_owned());
    }
    for (verb, state) in [
        ("manage", ProvisionState::Manageable),
        ("provide", ProvisionState::Available),
    ] {
        let ids = uuids.clone();
        drive(&http, &base, &db, &ids, verb, state, o.in_flight).await?;
    }

    // Timed: deploys end to end with `in_flight` in flight.
    let syncs_before = durable_counters(&http, &base).await;
    profiler(o, "enable")?;
    let cpu_before: f64 = procs.iter().map(Proc::cpu_seconds).sum();
    let started = Instant::now();
    let mut latencies = drive(
        &http,
        &base,
        &db,
        &uuids,
        "active",
        ProvisionState::Active,
        o.in_flight,
    )
    .await?;
    let elapsed = started.elapsed();
    let cpu = procs.iter().map(Proc::cpu_seconds).sum::<f64>() - cpu_before;
    profiler(o, "disable")?;
    latencies.sort();
    println!(
        "  deploys: {} in {:.3} s = {:.1}/s; latency p50 {:.1} ms, p99 {:.1} ms",
        o.nodes,
        elapsed.as_secs_f64(),
        o.nodes as f64 / elapsed.as_secs_f64(),
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99)),
    );
    println!(
        "  service CPU per deploy (api + conductors): {:.2} ms",
        cpu * 1000.0 / o.nodes as f64
    );
    if let (Some((writes0, syncs0)), Some((writes1, syncs1))) =
        (syncs_before, durable_counters(&http, &base).await)
    {
        let (writes, syncs) = (writes1 - writes0, syncs1 - syncs0);
        println!(
            "  durable writes: {:.2} per deploy, {:.2} per WAL sync ({} syncs)",
            writes / o.nodes as f64,
            writes / syncs.max(1.0),
            syncs
        );
    }

    // PATCH latency, one at a time.
    let before = PatchTimes::read(&http, &base, &conductor_metrics).await;
    let mut patch = Vec::new();
    for (i, uuid) in uuids.iter().cycle().take(300).enumerate() {
        let t = Instant::now();
        let r = http
            .patch(format!("{base}/v1/nodes/{uuid}"))
            .header(version.0, version.1)
            .json(&json!([{"op": "add", "path": "/extra/n", "value": i}]))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("PATCH failed: {}", r.text().await?);
        }
        r.bytes().await?;
        patch.push(t.elapsed());
    }
    patch.sort();
    println!(
        "  PATCH: p50 {:.2} ms, p99 {:.2} ms (300 sequential)",
        ms(percentile(&patch, 0.5)),
        ms(percentile(&patch, 0.99))
    );
    if let (Some(before), Some(after)) = (
        before,
        PatchTimes::read(&http, &base, &conductor_metrics).await,
    ) {
        after.since(&before).print();
    }

    // GET /v1/nodes/{id} throughput at 16 connections for 5 s.
    let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(5);
    let mut tasks = Vec::new();
    for c in 0..16 {
        let (http, base, uuid, count) = (
            http.clone(),
            base.clone(),
            uuids[c % uuids.len()].clone(),
            count.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                let ok = http
                    .get(format!("{base}/v1/nodes/{uuid}"))
                    .header(version.0, version.1)
                    .send()
                    .await
                    .map(|r| r.status().is_success())
                    .unwrap_or(false);
                if ok {
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    println!(
        "  GET /v1/nodes/{{id}}: {:.0} req/s at 16 connections",
        std::sync::atomic::AtomicU64::load(&count, std::sync::atomic::Ordering::Relaxed) as f64
            / 5.0
    );
    for p in &procs {
        println!("  RSS after   {:<12} {:6.1} MiB", p.name, p.rss_mib());
    }
    Ok(())
}

/// Tells a `perf record --control fifo:...` to `enable` or `disable` its counters.
fn profiler(o: &Options, command: &str) -> anyhow::Result<()> {
    if let Some(fifo) = &o.profile_fifo {
        std::fs::write(fifo, format!("{command}\n"))
            .with_context(|| format!("writing to {}", fifo.display()))?;
    }
    Ok(())
}

/// Sends `verb` to every node, keeping `in_flight` outstanding, and returns each node's time from
/// request to being observed in `want` with its lock released.
async fn drive(
    http: &reqwest::Client,
    base: &str,
    db: &Db,
    uuids: &[String],
    verb: &str,
    want: ProvisionState,
    in_flight: usize,
) -> anyhow::Result<Vec<Duration>> {
    let slots = Arc::new(Semaphore::new(in_flight));
    let pending: Arc<Mutex<Vec<(String, Instant, tokio::sync::OwnedSemaphorePermit)>>> =
        Arc::new(Mutex::new(Vec::new()));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(uuids.len())));
    let total = uuids.len();
    let watcher = {
        let (pending, latencies, db) = (pending.clone(), latencies.clone(), db.clone());
        tokio::spawn(async move {
            loop {
                let ids: Vec<String> = pending.lock().await.iter().map(|p| p.0.clone()).collect();
                if !ids.is_empty() {
                    let states = ferrum::db::nodes::states_of(&db, &ids).await?;
                    let done: HashSet<String> = states
                        .into_iter()
                        .filter(|(_, s, r)| *s == want && r.is_none())
                        .map(|(u, _, _)| u)
                        .collect();
                    let mut p = pending.lock().await;
                    let mut l = latencies.lock().await;
                    p.retain(|(u, t, _)| {
                        if done.contains(u) {
                            l.push(t.elapsed());
                            false
                        } else {
                            true
                        }
                    });
                    if l.len() == total {
                        return anyhow::Ok(());
                    }
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    for uuid in uuids {
        let permit = slots.clone().acquire_owned().await?;
        let (http, base, uuid, verb, pending) = (
            http.clone(),
            base.to_owned(),
            uuid.clone(),
            verb.to_owned(),
            pending.clone(),
        );
        // Each request in its own task: `in_flight` counts requests being sent too.
        tokio::spawn(async move {
            let sent = Instant::now();
            let r = http
                .put(format!("{base}/v1/nodes/{uuid}/states/provision"))
                .header("X-OpenStack-Ironic-API-Version", "1.31")
                .json(&json!({ "target": verb }))
                .send()
                .await;
            match r {
                Ok(r) if r.status().as_u16() == 202 => {
                    pending.lock().await.push((uuid, sent, permit));
                }
                Ok(r) => {
                    let status = r.status();
                    eprintln!(
                        "{verb} on {uuid}: {status} {}",
                        r.text().await.unwrap_or_default()
                    );
                    std::process::exit(1);
                }
                Err(e) => {
                    eprintln!("{verb} on {uuid}: {e}");
                    std::process::exit(1);
                }
            }
        });
    }
    tokio::time::timeout(Duration::from_secs(600), watcher).await???;
    let l = latencies.lock().await.clone();
    Ok(l)
}

/// The embedded database's durable writes and WAL syncs so far (`GET /metrics`); None when the
/// process does not report them (multi-host, or `sqlite_durable = false`).
async fn durable_counters(http: &reqwest::Client, base: &str) -> Option<(f64, f64)> {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
    };
    let writes = value("ferrum_db_durable_writes_total")?;
    (writes > 0.0).then_some(())?;
    Some((writes, value("ferrum_db_wal_syncs_total")?))
}

/// Where a PATCH's time goes, as the processes' own histograms count it (sums in seconds): the
/// API's whole answer, its RPC call to the conductor, and the conductor's handling of that call.
#[derive(Debug, Clone, Copy)]
struct PatchTimes {
    count: f64,
    http: f64,
    rpc_call: f64,
    handled: f64,
}

impl PatchTimes {
    /// None when a process does not report one of the histograms.
    async fn read(http: &reqwest::Client, api: &str, conductors: &[String]) -> Option<Self> {
        let metrics = |base: String| async move {
            http.get(format!("{base}/metrics"))
                .send()
                .await
                .ok()?
                .text()
                .await
                .ok()
        };
        let api_text = metrics(api.to_owned()).await?;
        let mut handled = 0.0;
        for base in conductors {
            let text = metrics(base.clone()).await?;
            handled += sum_of(
                &text,
                "ferrum_rpc_handle_duration_seconds_sum",
                "method=\"update_node\"",
            );
        }
        Some(PatchTimes {
            count: sum_of(
                &api_text,
                "ferrum_rpc_call_duration_seconds_count",
                "method=\"update_node\"",
            ),
            http: sum_of(
                &api_text,
                "ferrum_http_request_duration_seconds_sum",
                "method=\"PATCH\"",
            ),
            rpc_call: sum_of(
                &api_text,
                "ferrum_rpc_call_duration_seconds_sum",
                "method=\"update_node\"",
            ),
            handled,
        })
    }

    fn since(&self, before: &Self) -> Self {
        PatchTimes {
            count: self.count - before.count,
            http: self.http - before.http,
            rpc_call: self.rpc_call - before.rpc_call,
            handled: self.handled - before.handled,
        }
    }

    fn print(&self) {
        if self.count < 1.0 {
            return;
        }
        let mean = |seconds: f64| seconds / self.count * 1000.0;
        println!(
            "  PATCH mean {:.2} ms in the API: {:.2} ms its own (read, check, answer), {:.2} ms \
             transport (RPC there and back), {:.2} ms the conductor's handling",
            mean(self.http),
            mean(self.http - self.rpc_call),
            mean(self.rpc_call - self.handled),
            mean(self.handled)
        );
    }
}

/// The sum of the values of the metric lines `name{...labels...} value` whose labels contain
/// `label`.
fn sum_of(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (labels, value) = rest.rsplit_once(' ')?;
            labels
                .contains(label)
                .then(|| value.trim().parse::<f64>().ok())?
        })
        .sum()
}
