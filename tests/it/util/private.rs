//! Private MariaDB and RabbitMQ servers for the fault suite, which kills and restarts them: each
//! has its own data directory under the temp dir, its own free ports (and, for RabbitMQ, its own
//! node name and distribution port), and is started and stopped by PID, never by name. The shared
//! services on 3306/5672 are never touched.
//!
//! Each server runs in a process group of its own, so that a kill reaches every process of it
//! (`rabbitmq-server` is a shell script that runs the Erlang VM as a child), and is watched by a
//! small shell watchdog that kills the group and removes the directory if this test process dies
//! without running `Drop` (SIGKILL, a timeout of the runner). `Drop` kills the server and removes
//! its directory, also when the test panics.
//!
//! Where the binaries are missing the start functions say so loudly and return None; with
//! `FERRUM_REQUIRE_SERVICES=1` they panic instead.

use std::{
    io::Write as _,
    net::{SocketAddr, TcpStream},
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};

use super::services::random_suffix;

/// How long a server may take to accept connections before the test gives up.
const READY_LIMIT: Duration = Duration::from_secs(90);
/// How long a SIGTERMed server may take to exit before it is killed.
const STOP_LIMIT: Duration = Duration::from_secs(30);

fn required() -> bool {
    std::env::var("FERRUM_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// None, announced once per kind, when the binaries are missing; a panic under
/// `FERRUM_REQUIRE_SERVICES=1`.
pub(super) fn missing(what: &str, detail: &str, cell: &OnceLock<()>) {
    let message = format!(
        "cannot start a private {what}: {detail}; the fault scenarios that need it were NOT run."
    );
    if required() {
        panic!("FERRUM_REQUIRE_SERVICES=1: {message}");
    }
    cell.get_or_init(|| {
        let _ = writeln!(std::io::stderr(), "\n!!!!!!!! {message} !!!!!!!!\n");
    });
}

/// The first of `names` found on PATH or in the usual sbin directories.
pub(super) fn find_binary(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .collect();
    names
        .iter()
        .find_map(|name| dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn accepts(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// Whether any process of group `pgid` is still running. A process counts as gone once every
/// one of its threads is a zombie: a thread group's leader turns zombie before its other threads
/// have exited, and those still hold the process's sockets.
fn group_alive(pgid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    // (state, pgrp) from a stat line: pid (comm) state ppid pgrp ...; comm may hold spaces.
    let parse = |stat: &str| -> Option<(String, u32)> {
        let (_, rest) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        Some(((*fields.first()?).to_owned(), fields.get(2)?.parse().ok()?))
    };
    entries.flatten().any(|entry| {
        let in_group = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| parse(&s))
            .is_some_and(|(_, group)| group == pgid);
        in_group
            && std::fs::read_dir(entry.path().join("task"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|task| {
                    std::fs::read_to_string(task.path().join("stat"))
                        .ok()
                        .and_then(|s| parse(&s))
                        .is_some_and(|(state, _)| state != "Z" && state != "X")
                })
    })
}

fn signal_group(signal: &str, pgid: u32) {
    let _ = Command::new("kill")
        .args([signal, "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// One incarnation of a server: the child (leader of its own process group) and its watchdog.
struct Server {
    child: Child,
    watchdog: Option<Child>,
    /// The server's listening ports: free again once it is gone.
    ports: Vec<u16>,
}

impl Server {
    /// Spawns `cmd` as the leader of a new process group, logging to `log`, with a watchdog that
    /// kills the group and removes `dir` once this test process is gone.
    fn spawn(mut cmd: Command, log: &Path, dir: &Path, ports: &[u16]) -> Server {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("server log");
        let err = out.try_clone().expect("server log");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let pgid = child.id();
        let script = format!(
            "while kill -0 {me} 2>/dev/null; do sleep 1; done; kill -KILL -- -{pgid} 2>/dev/null; rm -rf '{dir}'",
            me = std::process::id(),
            dir = dir.display()
        );
        let watchdog = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .ok();
        Server {
            child,
            watchdog,
            ports: ports.to_vec(),
        }
    }

    fn pgid(&self) -> u32 {
        self.child.id()
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    fn drop_watchdog(&mut self) {
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }

    /// SIGKILL to the whole group; returns once no process of it runs and its ports are free.
    fn kill(mut self) {
        self.drop_watchdog();
        signal_group("-KILL", self.pgid());
        let _ = self.child.wait();
        let deadline = Instant::now() + Duration::from_secs(10);
        let gone = |s: &Server| !group_alive(s.pgid()) && !s.ports.iter().any(|p| accepts(*p));
        while !gone(&self) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            gone(&self),
            "process group {} survived SIGKILL (or its ports {:?} still accept)",
            self.pgid(),
            self.ports
        );
    }

    /// SIGTERM to the whole group, waits (bounded) until it has exited, SIGKILL past the bound.
    async fn stop(mut self) {
        self.drop_watchdog();
        signal_group("-TERM", self.pgid());
        let deadline = Instant::now() + STOP_LIMIT;
        while (self.exited().is_none() || group_alive(self.pgid())) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.kill();
    }
}

/// A MariaDB server of its own: `mariadb-install-db` into a temp dir, then `mariadbd` on a free
/// port of 127.0.0.1, root without a password.
pub struct PrivateMariaDb {
    dir: PathBuf,
    port: u16,
    mariadbd: PathBuf,
    server: Option<Server>,
    /// How long the first start took: install, boot, first `SELECT 1`.
    pub first_start: Duration,
}

impl PrivateMariaDb {
    /// Installs and starts a server and waits until it answers `SELECT 1`. None (announced)
    /// when the MariaDB binaries are missing; a panic then under `FERRUM_REQUIRE_SERVICES=1`.
    pub async fn start() -> Option<PrivateMariaDb> {
        let dir = std::env::temp_dir().join(format!("ferrum-mariadb-{}", random_suffix()));
        Self::start_in(dir).await
    }

    /// As [`start`](Self::start), with its files in `dir` (a small file system of the test's,
    /// say).
    pub async fn start_in(dir: PathBuf) -> Option<PrivateMariaDb> {
        static ANNOUNCED: OnceLock<()> = OnceLock::new();
        let started = Instant::now();
        let (Some(install), Some(mariadbd)) = (
            find_binary(&["mariadb-install-db", "mysql_install_db"]),
            find_binary(&["mariadbd", "mysqld"]),
        ) else {
            missing(
                "MariaDB",
                "mariadb-install-db or mariadbd is not installed",
                &ANNOUNCED,
            );
            return None;
        };
        // Its temporary tables in its own directory: the bootstrap's temporary files in the
        // shared /tmp once vanished under it while other tests ran ("Could not remove temporary
        // table").
        std::fs::create_dir_all(dir.join("tmp")).expect("private MariaDB dir");
        let mut db = PrivateMariaDb {
            port: free_port(),
            mariadbd,
            server: None,
            first_start: Duration::ZERO,
            dir,
        };
        let output = tokio::process::Command::new(install)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", db.dir.join("data").display()))
            .arg(format!("--tmpdir={}", db.dir.join("tmp").display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--user=root",
                "--skip-test-db",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=32M",
                "--innodb-log-file-size=16M",
            ])
            .stdin(Stdio::null())
            .output()
            .await
            .expect("run mariadb-install-db");
        assert!(
            output.status.success(),
            "mariadb-install-db failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        db.start_again().await;
        db.first_start = started.elapsed();
        Some(db)
    }

    /// `mysql://root@127.0.0.1:PORT`, without a database.
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// SIGKILL: the server dies with whatever it had in flight.
    pub fn kill(&mut self) {
        if let Some(server) = self.server.take() {
            server.kill();
        }
    }

    /// SIGSTOP: the server holds its connections and answers nothing.
    pub fn pause(&self) {
        if let Some(server) = &self.server {
            signal_group("-STOP", server.pgid());
        }
    }

    /// SIGCONT after [`pause`](Self::pause) (harmless when it runs).
    pub fn resume(&self) {
        if let Some(server) = &self.server {
            signal_group("-CONT", server.pgid());
        }
    }

    /// SIGTERM, then waits for the server to exit (SIGKILL after 30 s).
    pub async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop().await;
        }
    }

    /// Starts the server on the same data directory and port and waits until it answers
    /// `SELECT 1`; returns how long that took.
    pub async fn start_again(&mut self) -> Duration {
        assert!(self.server.is_none(), "the private MariaDB is running");
        let started = Instant::now();
        let mut cmd = Command::new(&self.mariadbd);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.dir.join("data").display()))
            .arg(format!("--port={}", self.port))
            .arg(format!("--tmpdir={}", self.dir.join("tmp").display()))
            .arg(format!("--socket={}", self.dir.join("sock").display()))
            .arg(format!(
                "--pid-file={}",
                self.dir.join("mariadbd.pid").display()
            ))
            .arg(format!(
                "--log-error={}",
                self.dir.join("error.log").display()
            ))
            .args([
                "--bind-address=127.0.0.1",
                "--user=root",
                "--skip-log-bin",
                "--skip-name-resolve",
                "--performance-schema=OFF",
                "--innodb-buffer-pool-size=32M",
                "--innodb-log-file-size=16M",
                // The faults are process kills, not power cuts: the OS keeps what was written,
                // so a commit need not wait for a disk flush.
                "--innodb-flush-log-at-trx-commit=2",
                "--max-connections=300",
            ]);
        self.server = Some(Server::spawn(
            cmd,
            &self.dir.join("mariadbd.out"),
            &self.dir,
            &[self.port],
        ));
        let url = format!("{}/mysql", self.url());
        let deadline = Instant::now() + READY_LIMIT;
        loop {
            if let Some(status) = self.server.as_mut().and_then(Server::exited) {
                panic!(
                    "the private mariadbd exited ({status}):\n{}",
                    tail(&self.dir.join("error.log"), 30)
                );
            }
            if accepts(self.port) && select_1(&url).await {
                return started.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "the private MariaDB on port {} did not answer within {READY_LIMIT:?}:\n{}",
                self.port,
                tail(&self.dir.join("error.log"), 30)
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

async fn select_1(url: &str) -> bool {
    let attempt = async {
        let mut conn = AsyncMysqlConnection::establish(url).await.ok()?;
        conn.batch_execute("SELECT 1").await.ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), attempt).await,
        Ok(Some(()))
    )
}

impl Drop for PrivateMariaDb {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A RabbitMQ node of its own: `rabbitmq-server` in the foreground as a child, node name
/// `ferrum-test-<random>@localhost`, its own AMQP and distribution ports on 127.0.0.1, mnesia,
/// log, config and home (Erlang cookie) in a temp dir, no plugins.
pub struct PrivateRabbit {
    dir: PathBuf,
    port: u16,
    dist_port: u16,
    node: String,
    script: PathBuf,
    server: Option<Server>,
    /// How long the first start took, until an AMQP connection was accepted.
    pub first_start: Duration,
}

/// The `rabbitmq-server` script that runs the broker in the foreground as the calling user. In
/// Debian's package /usr/sbin/rabbitmq-server is a wrapper that switches to the rabbitmq user
/// (and then ignores the environment the node is configured by): use the script it wraps.
fn rabbitmq_script() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("FERRUM_TEST_RABBITMQ_SERVER") {
        return Some(PathBuf::from(path));
    }
    let found = find_binary(&["rabbitmq-server"])?;
    let real = std::fs::canonicalize(&found).unwrap_or(found);
    if real
        .file_name()
        .is_some_and(|n| n == "rabbitmq-script-wrapper")
    {
        let script = real.with_file_name("rabbitmq-server");
        return script.is_file().then_some(script);
    }
    Some(real)
}

impl PrivateRabbit {
    /// Starts a node and waits until it accepts an AMQP connection. None (announced) when
    /// RabbitMQ is not installed; a panic then under `FERRUM_REQUIRE_SERVICES=1`.
    pub async fn start() -> Option<PrivateRabbit> {
        static ANNOUNCED: OnceLock<()> = OnceLock::new();
        let started = Instant::now();
        let Some(script) = rabbitmq_script().filter(|_| find_binary(&["erl"]).is_some()) else {
            missing(
                "RabbitMQ",
                "rabbitmq-server (or erl) is not installed (FERRUM_TEST_RABBITMQ_SERVER names the script)",
                &ANNOUNCED,
            );
            return None;
        };
        let id = random_suffix();
        let dir = std::env::temp_dir().join(format!("ferrum-rabbit-{id}"));
        for sub in ["mnesia", "log", "home"] {
            std::fs::create_dir_all(dir.join(sub)).expect("private RabbitMQ dir");
        }
        let port = free_port();
        let mut dist_port = free_port();
        while dist_port == port {
            dist_port = free_port();
        }
        std::fs::write(
            dir.join("rabbitmq.conf"),
            format!(
                "listeners.tcp.default = 127.0.0.1:{port}\n\
                 loopback_users.guest = true\n\
                 disk_free_limit.absolute = 10MB\n\
                 log.file.level = info\n\
                 log.console = false\n"
            ),
        )
        .expect("rabbitmq.conf");
        std::fs::write(dir.join("enabled_plugins"), "[].\n").expect("enabled_plugins");
        // Read instead of /etc/rabbitmq/rabbitmq-env.conf, which names the shared node.
        std::fs::write(dir.join("rabbitmq-env.conf"), "").expect("rabbitmq-env.conf");
        let mut rabbit = PrivateRabbit {
            port,
            dist_port,
            node: format!("ferrum-test-{id}@localhost"),
            script,
            server: None,
            first_start: Duration::ZERO,
            dir,
        };
        rabbit.start_again().await;
        rabbit.first_start = started.elapsed();
        Some(rabbit)
    }

    /// `amqp://guest:guest@127.0.0.1:PORT/%2f`.
    pub fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The Erlang node name, `ferrum-test-<random>@localhost`.
    pub fn node_name(&self) -> &str {
        &self.node
    }

    /// The environment that configures this node, for `rabbitmq-server` and `rabbitmqctl`.
    fn env(&self) -> Vec<(String, String)> {
        let d = |sub: &str| self.dir.join(sub).display().to_string();
        [
            (
                "PATH",
                std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".to_owned())
                    + ":/usr/sbin:/sbin",
            ),
            // The Erlang cookie is made (and found by rabbitmqctl) in $HOME.
            ("HOME", d("home")),
            ("LANG", "C.UTF-8".to_owned()),
            ("RABBITMQ_CONF_ENV_FILE", d("rabbitmq-env.conf")),
            ("RABBITMQ_NODENAME", self.node.clone()),
            ("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1".to_owned()),
            ("RABBITMQ_NODE_PORT", self.port.to_string()),
            ("RABBITMQ_DIST_PORT", self.dist_port.to_string()),
            ("RABBITMQ_MNESIA_BASE", d("mnesia")),
            ("RABBITMQ_LOG_BASE", d("log")),
            ("RABBITMQ_CONFIG_FILE", d("rabbitmq.conf")),
            ("RABBITMQ_ENABLED_PLUGINS_FILE", d("enabled_plugins")),
            // The shared epmd (it may stay when the node dies) and loopback only.
            ("ERL_EPMD_ADDRESS", "127.0.0.1".to_owned()),
            (
                "ERL_FLAGS",
                "-kernel inet_dist_use_interface {127,0,0,1}".to_owned(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// `rabbitmqctl` (the script beside `rabbitmq-server`) aimed at this node, for diagnostics:
    /// `rabbit.ctl(&["list_queues"]).output()`.
    pub fn ctl(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.script.with_file_name("rabbitmqctl"));
        cmd.env_clear()
            .envs(self.env())
            .arg("-n")
            .arg(&self.node)
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// SIGKILL to the whole Erlang VM (the script's process group); the shared epmd stays.
    pub fn kill(&mut self) {
        if let Some(server) = self.server.take() {
            server.kill();
        }
    }

    /// SIGSTOP to the whole Erlang VM: the broker holds its connections and answers nothing.
    pub fn pause(&self) {
        if let Some(server) = &self.server {
            signal_group("-STOP", server.pgid());
        }
    }

    /// SIGCONT after [`pause`](Self::pause) (harmless when it runs).
    pub fn resume(&self) {
        if let Some(server) = &self.server {
            signal_group("-CONT", server.pgid());
        }
    }

    /// SIGTERM (a clean broker stop), then waits for the VM to exit (SIGKILL after 30 s).
    pub async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop().await;
        }
    }

    /// Starts the node again on the same name, ports and mnesia dir and waits until it accepts
    /// an AMQP connection; returns how long that took.
    pub async fn start_again(&mut self) -> Duration {
        assert!(self.server.is_none(), "the private RabbitMQ is running");
        let started = Instant::now();
        let mut cmd = Command::new(&self.script);
        cmd.env_clear().envs(self.env()).current_dir(&self.dir);
        self.server = Some(Server::spawn(
            cmd,
            &self.dir.join("server.out"),
            &self.dir,
            &[self.port, self.dist_port],
        ));
        let url = self.url();
        let deadline = Instant::now() + READY_LIMIT;
        loop {
            if let Some(status) = self.server.as_mut().and_then(Server::exited) {
                panic!(
                    "the private rabbitmq-server exited ({status}):\n{}",
                    tail(&self.dir.join("server.out"), 30)
                );
            }
            if accepts(self.port) && amqp_handshake(&url).await {
                return started.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "the private RabbitMQ on port {} did not accept within {READY_LIMIT:?}:\n{}",
                self.port,
                tail(&self.dir.join("server.out"), 30)
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

async fn amqp_handshake(url: &str) -> bool {
    let attempt = async {
        let conn = lapin::Connection::connect(url, lapin::ConnectionProperties::default())
            .await
            .ok()?;
        let _ = conn.close(200, "ready check".into()).await;
        Some(())
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(3), attempt).await,
        Ok(Some(()))
    )
}

impl Drop for PrivateRabbit {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
