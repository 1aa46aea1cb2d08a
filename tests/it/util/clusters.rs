//! Clustered engines for the cluster fault scenarios: `tests/peers/clusters.sh` run in a temp
//! dir of the test's own, so each test has its own nodes, ports and Erlang cookie.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use super::{
    private::{find_binary, missing},
    services::random_suffix,
};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/clusters.sh")
}

fn run(args: &[&str]) -> Result<Output, String> {
    let output = Command::new("bash")
        .arg(script())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run clusters.sh: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "clusters.sh {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(output)
}

/// The nodes `clusters.sh <kind>` runs from a temp dir of their own: brought down when dropped,
/// and the dir deleted unless the test failed (it keeps the nodes' logs).
struct Nodes {
    kind: &'static str,
    dir: PathBuf,
}

impl Nodes {
    fn new(kind: &'static str) -> Nodes {
        let dir = std::env::temp_dir().join(format!("ferrum-{kind}-cluster-{}", random_suffix()));
        Nodes { kind, dir }
    }

    /// `clusters.sh <kind> <verb> <dir> <args>`, panicking when it fails.
    fn run(&self, verb: &str, args: &[&str]) -> Output {
        let dir = self.dir.display().to_string();
        let mut all = vec![self.kind, verb, dir.as_str()];
        all.extend(args);
        run(&all).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`run`](Self::run), off the async runtime (the verb waits for nodes).
    async fn run_blocking(&self, verb: &'static str, arg: String) -> Output {
        let (kind, dir) = (self.kind, self.dir.display().to_string());
        tokio::task::spawn_blocking(move || run(&[kind, verb, &dir, &arg]))
            .await
            .expect("clusters.sh task")
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `up` with `count` nodes: what it printed, `KEY='value'` a line.
    async fn up(&self, count: usize) -> HashMap<String, String> {
        let output = self.run_blocking("up", count.to_string()).await;
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(key, value)| (key.to_owned(), value.trim_matches('\'').to_owned()))
            .collect()
    }

    /// SIGKILL to node `i` (0-based); returns once it is gone.
    fn kill(&self, i: usize) {
        self.run("kill", &[&(i + 1).to_string()]);
    }

    /// Starts node `i` (0-based) again and waits until it is back in the cluster; returns how
    /// long that took.
    async fn start_again(&self, i: usize) -> Duration {
        let started = Instant::now();
        self.run_blocking("start", (i + 1).to_string()).await;
        started.elapsed()
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        if let Err(err) = run(&[self.kind, "down", &self.dir.display().to_string()]) {
            eprintln!("{err}");
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A RabbitMQ cluster of its own (`clusters.sh rabbit`), stopped and deleted when dropped.
pub struct RabbitCluster {
    nodes: Nodes,
    url: String,
    names: Vec<String>,
    /// How long `up` took: every node running, in one cluster.
    pub first_start: Duration,
}

impl RabbitCluster {
    /// Starts `nodes` clustered nodes and waits until they form one cluster. None (announced)
    /// when RabbitMQ is not installed; a panic then under `FERRUM_REQUIRE_SERVICES=1`.
    pub async fn start(nodes: usize) -> Option<RabbitCluster> {
        static ANNOUNCED: OnceLock<()> = OnceLock::new();
        if find_binary(&["rabbitmq-server"]).is_none() || find_binary(&["erl"]).is_none() {
            missing(
                "RabbitMQ cluster",
                "rabbitmq-server (or erl) is not installed",
                &ANNOUNCED,
            );
            return None;
        }
        let started = Instant::now();
        // Made first: a failing `up` brings down what it started when this drops.
        let cluster = Nodes::new("rabbit");
        let printed = cluster.up(nodes).await;
        let names: Vec<String> = printed
            .get("RABBIT_NODES")
            .map(|names| names.split(' ').map(str::to_owned).collect())
            .unwrap_or_default();
        assert_eq!(names.len(), nodes, "clusters.sh printed no nodes");
        Some(RabbitCluster {
            url: printed.get("RABBIT_URL").cloned().unwrap_or_default(),
            names,
            first_start: started.elapsed(),
            nodes: cluster,
        })
    }

    /// Every node, in oslo.messaging's form: `amqp://guest:guest@127.0.0.1:P1,…/%2f`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The Erlang node name of node `i` (0-based).
    pub fn node_name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// SIGKILL to node `i`'s Erlang VM (0-based); returns once it is gone.
    pub fn kill(&self, i: usize) {
        self.nodes.kill(i);
    }

    /// Starts node `i` (0-based) again and waits until it runs in the cluster; returns how
    /// long that took.
    pub async fn start_again(&self, i: usize) -> Duration {
        self.nodes.start_again(i).await
    }

    /// `rabbitmqctl -n <node i> ARGS` (0-based), for checks and diagnostics.
    pub fn ctl(&self, i: usize, args: &[&str]) -> String {
        let node = (i + 1).to_string();
        let mut all = vec![node.as_str()];
        all.extend(args);
        String::from_utf8_lossy(&self.nodes.run("ctl", &all).stdout).into_owned()
    }
}

/// A MariaDB Galera cluster of its own (`clusters.sh galera`), stopped and deleted when dropped.
pub struct GaleraCluster {
    nodes: Nodes,
    /// `mysql://root@127.0.0.1:PORT` of each node, no database.
    urls: Vec<String>,
    /// How long `up` took: every node Synced.
    pub first_start: Duration,
    /// Held while the cluster runs: see [`ONE_GALERA`].
    _one_at_a_time: tokio::sync::MutexGuard<'static, ()>,
}

/// One Galera cluster at a time in the test binary: their tests measure how fast service comes
/// back after a loss, and on a machine of two cores a second cluster under load beside one
/// slows its view changes and commits past the limits they check. A Keystone (`keystone.rs`:
/// Python starting, bcrypt) takes it too, for the same reason.
pub static ONE_GALERA: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl GaleraCluster {
    /// Starts `nodes` nodes and waits until all are Synced. None (announced) when mariadbd or
    /// galera-4 is not installed; a panic then under `FERRUM_REQUIRE_SERVICES=1`.
    pub async fn start(nodes: usize) -> Option<GaleraCluster> {
        static ANNOUNCED: OnceLock<()> = OnceLock::new();
        let provider = [
            "/usr/lib/galera/libgalera_smm.so",
            "/usr/lib/libgalera_smm.so",
        ]
        .iter()
        .any(|p| Path::new(p).exists());
        if find_binary(&["mariadbd"]).is_none() || find_binary(&["rsync"]).is_none() || !provider {
            missing(
                "Galera cluster",
                "mariadbd, rsync or galera-4's libgalera_smm.so is not installed",
                &ANNOUNCED,
            );
            return None;
        }
        let one_at_a_time = ONE_GALERA.lock().await;
        let started = Instant::now();
        // Made first: a failing `up` brings down what it started when this drops.
        let cluster = Nodes::new("galera");
        let printed = cluster.up(nodes).await;
        let urls: Vec<String> = printed
            .get("GALERA_URLS")
            .map(|urls| urls.split(' ').map(str::to_owned).collect())
            .unwrap_or_default();
        assert_eq!(urls.len(), nodes, "clusters.sh printed no URLs");
        Some(GaleraCluster {
            urls,
            first_start: started.elapsed(),
            nodes: cluster,
            _one_at_a_time: one_at_a_time,
        })
    }

    /// Node `i`'s server (0-based): `mysql://root@127.0.0.1:PORT`, no database.
    pub fn url(&self, i: usize) -> &str {
        &self.urls[i]
    }

    /// Every node in one URL, in order, as Ferrum takes a cluster:
    /// `mysql://root@127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`, no database.
    pub fn url_of_all(&self) -> String {
        let hosts: Vec<&str> = self
            .urls
            .iter()
            .map(|url| url.trim_start_matches("mysql://root@"))
            .collect();
        format!("mysql://root@{}", hosts.join(","))
    }

    /// SIGKILL to node `i` (0-based); returns once it is gone.
    pub fn kill(&self, i: usize) {
        self.nodes.kill(i);
    }

    /// Starts node `i` (0-based) again and waits until it is Synced; returns how long that took.
    pub async fn start_again(&self, i: usize) -> Duration {
        self.nodes.start_again(i).await
    }

    /// Cuts node `i` (0-based) off from the others' group communication (true: Galera's
    /// `gmcast.isolate`), as a network partition does: it keeps running and answering its
    /// clients, out of the primary component, refusing their statements (1047); false lets it
    /// back in.
    pub fn isolate(&self, i: usize, cut_off: bool) {
        self.sql(
            i,
            &format!(
                "SET GLOBAL wsrep_provider_options='gmcast.isolate={}'",
                u8::from(cut_off)
            ),
        );
    }

    /// Waits (at most `limit`) until every node is Synced in one primary component of all of
    /// them; returns how long that took, None at the limit.
    pub async fn wait_whole(&self, limit: Duration) -> Option<Duration> {
        let started = Instant::now();
        while started.elapsed() < limit {
            let whole = (0..self.urls.len()).all(|i| {
                self.status(i, "wsrep_local_state_comment") == "Synced"
                    && self.status(i, "wsrep_cluster_size") == self.urls.len().to_string()
            });
            if whole {
                return Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        None
    }

    /// A status variable of node `i` (0-based), e.g. `wsrep_local_cert_failures`.
    pub fn status(&self, i: usize, variable: &str) -> String {
        let output = self.sql(i, &format!("SHOW STATUS LIKE '{variable}'"));
        let text = String::from_utf8_lossy(&output.stdout);
        text.split('\t')
            .nth(1)
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// Runs `statement` on node `i` (0-based) with the `mariadb` client.
    fn sql(&self, i: usize, statement: &str) -> Output {
        let port = self.urls[i].rsplit(':').next().expect("port");
        Command::new("mariadb")
            .args([
                "--no-defaults",
                "-h",
                "127.0.0.1",
                "-P",
                port,
                "-u",
                "root",
                "-N",
                "-B",
            ])
            .arg("-e")
            .arg(statement)
            .output()
            .expect("run mariadb")
    }
}
