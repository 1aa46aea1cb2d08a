//! Operations: `GET /metrics` read by a Prometheus text-format parser after real requests and
//! real fake deploys, `GET /healthcheck` with each dependency up and then down (private MariaDB
//! and RabbitMQ servers the test kills by PID, never the shared ones), the access log and the
//! request id from the API's access line into the conductor's lines, and the logging modes of
//! the built binary writing to a pipe.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use prom_text_format_parser::{Metric, ValueType};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::util::{
    Cluster, ClusterOptions, PrivateMariaDb, PrivateRabbit, Stack, TestDb, cluster::free_port,
    on_both_stacks, scrape_metrics,
};

/// The value of the sample of `name` with exactly `labels` (for a histogram, `kind` says
/// which of its series: `Count`, `Sum`); None when there is no such sample.
fn sample(metrics: &[Metric], name: &str, kind: ValueType, labels: &[(&str, &str)]) -> Option<f64> {
    let metric = metrics.iter().find(|m| m.name == name)?;
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

fn value(metrics: &[Metric], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    sample(metrics, name, ValueType::Sample, labels)
}

fn count(metrics: &[Metric], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    sample(metrics, name, ValueType::Count, labels)
}

/// Every value the label `key` takes in the samples of `name`.
fn label_values(metrics: &[Metric], name: &str, key: &str) -> Vec<String> {
    metrics
        .iter()
        .filter(|m| m.name == name)
        .flat_map(|m| &m.samples)
        .flat_map(|s| s.labels.iter())
        .filter(|l| l.key == key)
        .map(|l| l.value.clone())
        .collect()
}

on_both_stacks! {
/// After real requests, a deploy that succeeds and one that fails, and a request that waits for
/// a node's lock and gives up: the counts are exact, routes are templates (never a node's
/// UUID), and the conductor's figures (deploys, state changes, workers, locks) are on the
/// API's `/metrics` in all-in-one and on the conductor's own `conductor.metrics_bind` in
/// multi-host.
async fn metrics_count_requests_deploys_and_lock_waits(stack) {
    let conductor_metrics = free_port();
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        conductors: 1,
        // One wait for a held lock, then NodeLocked.
        lock_retry_attempts: 2,
        lock_retry_interval: 0.2,
        fake_vendor_delay: Some(2.0),
        env: vec![("FERRUM_CONDUCTOR_METRICS_BIND", format!("127.0.0.1:{conductor_metrics}"))],
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let good = api.available_node(json!({"name": "good"})).await;
    let good = good["uuid"].as_str().unwrap().to_owned();
    api.available_node(json!({"name": "bad", "driver_info": {"fake_deploy_panic": "kaboom"}})).await;
    api.accepted("good", "active").await;
    api.accepted("bad", "active").await;
    api.wait_for("good", "active").await;
    api.wait_for("bad", "deploy failed").await;
    for _ in 0..3 {
        assert_eq!(api.get(&format!("/v1/nodes/{good}/states")).await.status, 200);
    }
    assert_eq!(api.get("/v1/nodes/no-such-node").await.status, 404);
    assert_eq!(api.get("/v1/no-such-thing").await.status, 404);
    // A PATCH while an asynchronous vendor method holds the node: one wait, then 409.
    api.create_node(json!({"name": "v", "driver": "fake-hardware", "vendor_interface": "fake"})).await;
    let r = api
        .request(Method::POST, "/v1/nodes/v/vendor_passthru?method=second_method", Some(json!({"bar": "x"})))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    let r = api.patch("v", json!([{"op": "add", "path": "/extra/a", "value": 1}])).await;
    assert_eq!(r.status, 409, "{}", r.body);
    api.wait_for("v", "enroll").await;

    let m = scrape_metrics(&api.base).await;
    let requests = "ferrum_http_requests_total";
    assert_eq!(
        value(&m, requests, &[("method", "GET"), ("route", "/v1/nodes/{ident}/states"), ("status", "200")]),
        Some(3.0)
    );
    assert_eq!(
        value(&m, requests, &[("method", "GET"), ("route", "/v1/nodes/{ident}"), ("status", "404")]),
        Some(1.0)
    );
    assert_eq!(
        value(&m, requests, &[("method", "GET"), ("route", "unmatched"), ("status", "404")]),
        Some(1.0)
    );
    assert_eq!(
        value(&m, requests, &[("method", "PATCH"), ("route", "/v1/nodes/{ident}"), ("status", "409")]),
        Some(1.0)
    );
    assert_eq!(
        value(&m, requests, &[("method", "PUT"), ("route", "/v1/nodes/{ident}/states/provision"), ("status", "202")]),
        // manage, provide and deploy of two nodes
        Some(6.0)
    );
    // Bounded label values: route templates, never a path a client made up.
    let routes = label_values(&m, requests, "route");
    assert!(routes.iter().all(|r| r == "unmatched" || r.starts_with('/')), "{routes:?}");
    assert!(
        routes.iter().all(|r| !r.contains(&good) && !r.contains("no-such") && !r.contains("/v/")),
        "{routes:?}"
    );
    let duration = "ferrum_http_request_duration_seconds";
    assert_eq!(count(&m, duration, &[("method", "GET"), ("route", "/v1/nodes/{ident}/states")]), Some(3.0));
    let sum = sample(&m, duration, ValueType::Sum, &[("method", "GET"), ("route", "/v1/nodes/{ident}/states")]);
    assert!(sum.is_some_and(|s| s > 0.0 && s < 10.0), "{sum:?}");
    // The API's RPC calls: two deploys, one PATCH.
    let rpc = "ferrum_rpc_call_duration_seconds";
    assert_eq!(count(&m, rpc, &[("method", "do_node_deploy")]), Some(2.0));
    assert_eq!(count(&m, rpc, &[("method", "update_node")]), Some(1.0));
    // The database pool of the API's process (FERRUM_DATABASE_POOL_SIZE=8 in the cluster).
    assert_eq!(value(&m, "ferrum_db_pool_max_connections", &[]), Some(8.0));
    let open = value(&m, "ferrum_db_pool_connections", &[("state", "in_use")]).unwrap()
        + value(&m, "ferrum_db_pool_connections", &[("state", "idle")]).unwrap();
    assert!((1.0..=8.0).contains(&open), "{open}");
    assert_eq!(value(&m, "ferrum_db_pool_waiting", &[]), Some(0.0));

    // The conductor's figures: on the same endpoint in all-in-one, on its own in multi-host.
    let c = match stack {
        Stack::Embedded => m,
        Stack::MultiHost => {
            let c = scrape_metrics(&format!("http://127.0.0.1:{conductor_metrics}")).await;
            // The conductor's process answers no HTTP request of the API.
            assert_eq!(label_values(&c, requests, "route"), Vec::<String>::new());
            c
        }
    };
    assert_eq!(value(&c, "ferrum_deploys_total", &[("outcome", "success")]), Some(1.0));
    assert_eq!(value(&c, "ferrum_deploys_total", &[("outcome", "failure")]), Some(1.0));
    let moves = "ferrum_provision_state_changes_total";
    assert_eq!(value(&c, moves, &[("from", "available"), ("to", "deploying")]), Some(2.0));
    assert_eq!(value(&c, moves, &[("from", "deploying"), ("to", "active")]), Some(1.0));
    assert_eq!(value(&c, moves, &[("from", "deploying"), ("to", "deploy failed")]), Some(1.0));
    assert_eq!(value(&c, moves, &[("from", "enroll"), ("to", "verifying")]), Some(2.0));
    assert_eq!(value(&c, "ferrum_conductor_workers", &[]), Some(50.0));
    // The background tasks' own CPU time, by task (no dnsmasq here: no `unknown_hosts`); the
    // take-over's first round runs as the conductor starts.
    let background = "ferrum_background_cpu_microseconds_total";
    let mut tasks = label_values(&c, background, "task");
    tasks.sort();
    let expected = ["callback_timeouts", "console_expiry", "lease", "power_recovery", "power_sync", "takeover"];
    assert_eq!(tasks, expected);
    assert!(value(&c, background, &[("task", "takeover")]).is_some_and(|us| us > 0.0));
    // A worker gives its slot back just after its last write: wait for that.
    let conductor_base = match stack {
        Stack::Embedded => api.base.clone(),
        Stack::MultiHost => format!("http://127.0.0.1:{conductor_metrics}"),
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while value(&scrape_metrics(&conductor_base).await, "ferrum_conductor_workers_busy", &[]) != Some(0.0) {
        assert!(Instant::now() < deadline, "a worker stayed busy");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(value(&c, "ferrum_node_lock_waits_total", &[]), Some(1.0));
    assert_eq!(value(&c, "ferrum_node_lock_conflicts_total", &[]), Some(1.0));
    let handled = "ferrum_rpc_handle_duration_seconds";
    assert_eq!(count(&c, handled, &[("method", "do_node_deploy"), ("result", "ok")]), Some(2.0));
    assert_eq!(count(&c, handled, &[("method", "update_node"), ("result", "error")]), Some(1.0));
    cluster.assert_no_locks().await;
}
}

/// `GET /healthcheck` and its status and body.
async fn health(base: &str) -> (StatusCode, Value) {
    let resp = reqwest::get(format!("{base}/healthcheck"))
        .await
        .expect("GET /healthcheck");
    let status = resp.status();
    (status, resp.json().await.expect("a JSON body"))
}

/// Polls `/healthcheck` until `done` holds for its answer (at most `limit`), and returns it.
async fn health_until(
    base: &str,
    limit: Duration,
    done: impl Fn(StatusCode, &Value) -> bool,
) -> (StatusCode, Value) {
    let deadline = Instant::now() + limit;
    loop {
        let (status, body) = health(base).await;
        if done(status, &body) {
            return (status, body);
        }
        assert!(
            Instant::now() < deadline,
            "health never got there: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn down(body: &Value) -> Vec<&str> {
    body["down"]
        .as_array()
        .map(|d| d.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

on_both_stacks! {
/// A healthy deployment answers 200 and names each check: the database, the broker (only in
/// multi-host: all-in-one has none) and the conductors alive.
async fn healthcheck_is_ok_when_everything_is_up(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let (status, body) = health(&cluster.api.base).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ok");
    assert_eq!(body["checks"]["database"], json!({"ok": true}));
    let mut alive = cluster.conductor_hosts.clone();
    alive.sort();
    assert_eq!(body["checks"]["conductors"], json!({"ok": true, "alive": alive}));
    match stack {
        Stack::Embedded => assert!(body["checks"].get("broker").is_none(), "{body}"),
        Stack::MultiHost => assert_eq!(body["checks"]["broker"], json!({"ok": true})),
    }
}
}

/// A child process killed when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Multi-host, on a private MariaDB and a private RabbitMQ: the broker's outage turns the API's
/// `/healthcheck` into a 503 naming it, and its return makes it 200 again; with every conductor
/// stopped it names the conductors; with the database killed, the database. An all-in-one
/// process on the same MariaDB (its own database, the in-process transport: no broker check)
/// names the database too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthcheck_names_what_is_down() {
    let (Some(mut mariadb), Some(mut rabbit)) =
        tokio::join!(PrivateMariaDb::start(), PrivateRabbit::start())
    else {
        return;
    };
    let Some(mut cluster) = Cluster::start(ClusterOptions {
        conductors: 1,
        mysql_url: Some(mariadb.url()),
        amqp_url: Some(rabbit.url()),
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let base = cluster.api.base.clone();
    let limit = Duration::from_secs(30);
    health_until(&base, limit, |s, _| s == StatusCode::OK).await;
    let aio_db = TestDb::on_server(&mariadb.url()).await;
    let aio_port = free_port();
    let aio_base = format!("http://127.0.0.1:{aio_port}");
    let _aio = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_ferrum"))
            .arg("all-in-one")
            .env_clear()
            .env("FERRUM_DATABASE_URL", &aio_db.url)
            .env("FERRUM_API_BIND", format!("127.0.0.1:{aio_port}"))
            .env("FERRUM_CONDUCTOR_HOST", format!("aio-{}", free_port()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ferrum all-in-one"),
    );
    crate::util::Api::new(aio_base.clone()).wait_up(limit).await;
    let (_, body) = health_until(&aio_base, limit, |s, _| s == StatusCode::OK).await;
    assert!(body["checks"].get("broker").is_none(), "{body}");

    rabbit.kill();
    let (_, body) = health_until(&base, limit, |s, b| {
        s == StatusCode::SERVICE_UNAVAILABLE && down(b).contains(&"broker")
    })
    .await;
    assert_eq!(body["status"], "down");
    assert_eq!(body["checks"]["broker"]["ok"], false);
    assert_eq!(body["checks"]["database"], json!({"ok": true}));
    rabbit.start_again().await;
    health_until(&base, Duration::from_secs(60), |s, _| s == StatusCode::OK).await;

    let conductor = cluster.conductor_process(0);
    cluster.terminate(&conductor).await;
    let (_, body) = health_until(&base, limit, |s, _| s == StatusCode::SERVICE_UNAVAILABLE).await;
    assert_eq!(down(&body), ["conductors"], "{body}");
    assert_eq!(
        body["checks"]["conductors"],
        json!({"ok": false, "error": "no conductor is alive"})
    );

    mariadb.kill();
    let (_, body) = health_until(&base, limit, |s, b| {
        s == StatusCode::SERVICE_UNAVAILABLE && down(b).contains(&"database")
    })
    .await;
    assert_eq!(body["checks"]["database"]["ok"], false);
    assert_eq!(
        body["checks"]["database"]["error"],
        "The database is unavailable; please retry."
    );
    assert_eq!(body["checks"]["broker"], json!({"ok": true}));
    let (_, body) = health_until(&aio_base, limit, |s, _| {
        s == StatusCode::SERVICE_UNAVAILABLE
    })
    .await;
    assert_eq!(down(&body), ["database", "conductors"], "{body}");
    assert_eq!(
        body["checks"]["conductors"],
        json!({"ok": false, "error": "unknown: the database is unavailable"})
    );
}

/// The JSON lines of a log file; panics on a line that is not a JSON object.
fn json_lines(log: &str) -> Vec<Value> {
    log.lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}"));
            assert!(v.is_object(), "{line}");
            v
        })
        .collect()
}

/// The access line of request `id`.
fn access_line<'a>(lines: &'a [Value], id: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["target"] == "ferrum::access" && l["fields"]["request_id"] == id)
        .unwrap_or_else(|| panic!("no access line for {id}"))
}

/// The messages of the lines logged inside a span that carries request `id`.
fn lines_of_request<'a>(lines: &'a [Value], id: &str) -> Vec<&'a str> {
    lines
        .iter()
        .filter(|l| {
            l["spans"]
                .as_array()
                .is_some_and(|spans| spans.iter().any(|s| s["request_id"] == id))
        })
        .filter_map(|l| l["fields"]["message"].as_str())
        .collect()
}

/// A request with its own `X-OpenStack-Request-Id` (`req-<uuid>`, which Ferrum keeps).
async fn request_with_id(
    api: &crate::util::Api,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, String) {
    let id = format!("req-{}", uuid::Uuid::new_v4());
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", api.base))
        .header("X-OpenStack-Ironic-API-Version", "1.49")
        .header("X-OpenStack-Request-Id", &id);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.expect("HTTP request");
    assert_eq!(resp.headers()["x-openstack-request-id"], id.as_str());
    (resp.status(), id)
}

on_both_stacks! {
/// With `FERRUM_LOG_JSON=1` every line of every process is JSON. Each request has one access
/// line with its method, path, status, duration and request id (a 4xx with its message), and
/// the conductor's lines about a create, a power change, maintenance and a delete carry the
/// same request id in their spans, across RPC.
async fn the_request_id_goes_from_the_access_line_into_the_conductors_lines(stack) {
    let Some(cluster) = Cluster::start(ClusterOptions {
        stack,
        conductors: 1,
        env: vec![("FERRUM_LOG_JSON", "1".to_owned())],
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = &cluster.api;
    let (status, create) = request_with_id(api, Method::POST, "/v1/nodes",
        Some(json!({"name": "n", "driver": "fake-hardware"}))).await;
    assert_eq!(status, 201);
    let uuid = api.node("n").await["uuid"].as_str().unwrap().to_owned();
    let (status, power) = request_with_id(api, Method::PUT, "/v1/nodes/n/states/power",
        Some(json!({"target": "power on"}))).await;
    assert_eq!(status, 202);
    api.wait_power("n", "power on").await;
    let (status, maintenance) = request_with_id(api, Method::PUT, "/v1/nodes/n/maintenance",
        Some(json!({"reason": "disk"}))).await;
    assert_eq!(status, 202);
    let (status, missing) = request_with_id(api, Method::GET, "/v1/nodes/no-such-node", None).await;
    assert_eq!(status, 404);
    let (status, delete) = request_with_id(api, Method::DELETE, "/v1/nodes/n", None).await;
    assert_eq!(status, 204);

    let (api_log, conductor_log) = match stack {
        Stack::Embedded => (cluster.log_of("all-in-one"), cluster.log_of("all-in-one")),
        Stack::MultiHost => (cluster.log_of("api"), cluster.log_of(&cluster.conductor_process(0))),
    };
    let api_lines = json_lines(&api_log);
    let conductor_lines = json_lines(&conductor_log);

    let line = access_line(&api_lines, &power);
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["fields"]["method"], "PUT");
    assert_eq!(line["fields"]["path"], "/v1/nodes/n/states/power");
    assert_eq!(line["fields"]["status"], 202);
    assert!(line["fields"]["duration_ms"].as_f64().is_some_and(|d| d > 0.0), "{line}");
    let line = access_line(&api_lines, &missing);
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["fields"]["status"], 404);
    assert_eq!(line["fields"]["error"], "Node no-such-node could not be found.");
    assert_eq!(access_line(&api_lines, &create)["fields"]["status"], 201);
    assert_eq!(access_line(&api_lines, &delete)["fields"]["status"], 204);

    let said = |id: &str| lines_of_request(&conductor_lines, id).join("\n");
    assert!(said(&create).contains(&format!("Node {uuid} created")), "{}", said(&create));
    let powered = said(&power);
    assert!(powered.contains(&format!("Node {uuid} power change to 'power on' accepted")), "{powered}");
    // Logged by the worker after the reply: still the request's.
    assert!(powered.contains(&format!("Node {uuid} power state set to 'power on' by 'power on'")), "{powered}");
    assert!(said(&maintenance).contains(&format!("Node {uuid} put in maintenance")), "{}", said(&maintenance));
    assert!(said(&delete).contains(&format!("Node {uuid} deleted")), "{}", said(&delete));
    // Each line of the conductor about the node is at info level.
    for line in conductor_lines.iter().filter(|l| {
        l["fields"]["message"].as_str().is_some_and(|m| m.contains(&format!("Node {uuid} created")))
    }) {
        assert_eq!(line["level"], "INFO");
    }
}
}

/// Runs `ferrum <args>` with `env`, its stderr a pipe. With a `port`, waits until it answers
/// there, sends a few requests (one a 404) and stops it with SIGTERM; without, waits for it to
/// exit. Returns its stderr and exit code.
async fn run_binary(args: &[&str], env: &[(&str, String)], port: Option<u16>) -> (Vec<u8>, i32) {
    let child = Command::new(env!("CARGO_BIN_EXE_ferrum"))
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ferrum");
    if let Some(port) = port {
        let base = format!("http://127.0.0.1:{port}");
        let api = crate::util::Api::new(base.clone());
        api.wait_up(Duration::from_secs(30)).await;
        assert_eq!(api.get("/v1/nodes").await.status, 200);
        assert_eq!(api.get("/v1/nodes/nope").await.status, 404);
        let r = reqwest::get(format!("{base}/metrics"))
            .await
            .expect("metrics");
        assert_eq!(r.status(), 200);
        let pid = child.id().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill -TERM");
    }
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("ferrum's output");
    (out.stderr, out.status.code().unwrap_or(-1))
}

/// The built binary, its stderr a pipe: in JSON mode every line is JSON (the start-up banner
/// and the error a process stops with included); in text mode there is no escape code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_modes_through_a_pipe() {
    let db = TestDb::sqlite_file();
    let port = free_port();
    let env = |json: bool| {
        let mut env = vec![
            ("FERRUM_DATABASE_URL", db.url.clone()),
            ("FERRUM_API_BIND", format!("127.0.0.1:{port}")),
            ("RUST_LOG", "info".to_owned()),
        ];
        if json {
            env.push(("FERRUM_LOG_JSON", "1".to_owned()));
        }
        env
    };

    let (stderr, _) = run_binary(&["all-in-one"], &env(true), Some(port)).await;
    let text = String::from_utf8(stderr).expect("UTF-8 logs");
    let lines = json_lines(&text);
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(
                    "Ferrum all-in-one is serving the Ironic API v1 at http://127.0.0.1:"
                ))),
        "no banner event in {text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["target"] == "ferrum::access" && l["fields"]["status"] == 404),
        "no access line in {text}"
    );

    // A process that cannot start says why in JSON too, and exits with 1.
    let (stderr, code) = run_binary(&["api"], &env(true), None).await;
    assert_eq!(code, 1);
    let text = String::from_utf8(stderr).expect("UTF-8 logs");
    let lines = json_lines(&text);
    let last = lines.last().expect("a line");
    assert_eq!(last["level"], "ERROR", "{text}");
    assert!(
        last["fields"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("needs an amqp:// transport")),
        "{text}"
    );

    let (stderr, _) = run_binary(&["all-in-one"], &env(false), Some(port)).await;
    assert!(
        !stderr.contains(&0x1b),
        "escape codes in {}",
        String::from_utf8_lossy(&stderr)
    );
    let text = String::from_utf8(stderr).expect("UTF-8 logs");
    assert!(
        text.contains("Ferrum all-in-one is serving the Ironic API v1"),
        "{text}"
    );
    assert!(
        text.contains(
            "INFO ferrum::access: client error method=GET path=/v1/nodes/nope status=404"
        ),
        "{text}"
    );
}
