//! Where the services are, and what happens when they are not there: with
//! `FERRUM_REQUIRE_SERVICES=1` (CI) a test fails; otherwise it says so loudly and returns early.

use std::{
    net::{TcpStream, ToSocketAddrs},
    sync::OnceLock,
    time::Duration,
};

use diesel::{QueryableByName, sql_types::Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use ferrum::{
    db::Db,
    node::{Interfaces, Node},
    states::ProvisionState,
};

const DEFAULT_MYSQL: &str = "mysql://root@127.0.0.1:3306";
const DEFAULT_AMQP: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

fn required() -> bool {
    std::env::var("FERRUM_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// host:port of a URL like `scheme://user:pass@host:port/path`.
fn host_port(url: &str, default_port: u16) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:{default_port}")
    }
}

fn reachable(url: &str, default_port: u16) -> bool {
    let Ok(mut addrs) = host_port(url, default_port).to_socket_addrs() else {
        return false;
    };
    addrs.any(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok())
}

fn check(name: &str, var: &str, url: &str, port: u16, cell: &OnceLock<bool>) -> Option<String> {
    let message = format!(
        "{name} is not reachable at {url} (set {var} to point elsewhere); the tests that need it were NOT run."
    );
    let up = *cell.get_or_init(|| {
        let up = reachable(url, port);
        if !up && !required() {
            // Straight to the terminal, once: the test harness would swallow eprintln! of a
            // passing test, and a skipped suite must not go unnoticed.
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "\n!!!!!!!! {message} !!!!!!!!\n");
        }
        up
    });
    if up {
        return Some(url.to_owned());
    }
    if required() {
        panic!("FERRUM_REQUIRE_SERVICES=1: {message}");
    }
    None
}

/// The MySQL server URL without a database, or None (announced) when it is not reachable.
pub fn mysql_url() -> Option<String> {
    static UP: OnceLock<bool> = OnceLock::new();
    let url = std::env::var("FERRUM_TEST_MYSQL_URL").unwrap_or_else(|_| DEFAULT_MYSQL.to_owned());
    // Keep scheme and authority only: each test makes its own database.
    let (scheme, rest) = url.split_once("://").unwrap_or(("mysql", &url));
    let authority = rest.split('/').next().unwrap_or(rest);
    let base = format!("{scheme}://{authority}");
    check("MySQL/MariaDB", "FERRUM_TEST_MYSQL_URL", &base, 3306, &UP)
}

/// The AMQP URL, or None (announced) when the broker is not reachable.
pub fn amqp_url() -> Option<String> {
    static UP: OnceLock<bool> = OnceLock::new();
    let url = std::env::var("FERRUM_TEST_AMQP_URL").unwrap_or_else(|_| DEFAULT_AMQP.to_owned());
    check("RabbitMQ", "FERRUM_TEST_AMQP_URL", &url, 5672, &UP)
}

/// Says that a suite that needs something missing here was not run: a failure under
/// `FERRUM_REQUIRE_SERVICES=1`, otherwise a loud line straight to the terminal, once per
/// `announced` (the test harness would swallow `eprintln!` of a passing test, and a skipped suite
/// must not go unnoticed).
pub fn not_run(message: &str, announced: &OnceLock<()>) {
    if required() {
        panic!("FERRUM_REQUIRE_SERVICES=1: {message}");
    }
    announced.get_or_init(|| {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "\n!!!!!!!! {message} !!!!!!!!\n");
    });
}

/// The Python venv holding the pinned OpenStack clients (`FERRUM_CLIENTS_VENV`, else the one
/// `tests/peers/clients-venv.sh setup` makes once and keeps), or None, announced, when there is
/// none.
pub fn clients_venv() -> Option<std::path::PathBuf> {
    static ANNOUNCED: OnceLock<()> = OnceLock::new();
    static MADE: OnceLock<Result<std::path::PathBuf, String>> = OnceLock::new();
    let venv = match std::env::var_os("FERRUM_CLIENTS_VENV") {
        Some(venv) => Ok(std::path::PathBuf::from(venv)),
        None => MADE
            .get_or_init(|| {
                let out = std::process::Command::new("bash")
                    .arg(peer_script("clients-venv.sh"))
                    .arg("setup")
                    .stderr(std::process::Stdio::inherit())
                    .output()
                    .map_err(|e| format!("cannot run clients-venv.sh: {e}"))?;
                if !out.status.success() {
                    return Err(format!("clients-venv.sh setup failed ({})", out.status));
                }
                Ok(String::from_utf8_lossy(&out.stdout).trim().into())
            })
            .clone(),
    };
    let problem = match venv {
        Ok(venv) if venv.join("bin/baremetal").exists() && venv.join("bin/python").exists() => {
            return Some(venv);
        }
        Ok(venv) => format!("no client venv at {}", venv.display()),
        Err(e) => e,
    };
    not_run(
        &format!("{problem}; the client-compatibility suite was NOT run."),
        &ANNOUNCED,
    );
    None
}

/// A set-up script of the repository's own test peers (`tests/peers/`, see its README).
pub fn peer_script(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(name)
}

/// The sandbox script that runs the real Ironic Python Agent unprivileged
/// (`tests/peers/ipa-sandbox.sh`, or `FERRUM_IPA_SANDBOX`), or None (announced) when this is not
/// root: the script builds its sandbox as root; the agent never runs so.
pub fn ipa_sandbox() -> Option<std::path::PathBuf> {
    static ANNOUNCED: OnceLock<()> = OnceLock::new();
    let script = std::env::var_os("FERRUM_IPA_SANDBOX")
        .map_or_else(|| peer_script("ipa-sandbox.sh"), std::path::PathBuf::from);
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    });
    let problem = match (script.is_file(), root) {
        (true, true) => return Some(script),
        (false, _) => format!(
            "no IPA sandbox script at {} (FERRUM_IPA_SANDBOX)",
            script.display()
        ),
        (true, false) => "the IPA sandbox script must be run as root".to_owned(),
    };
    not_run(
        &format!("{problem}; the real-agent deploy suite was NOT run."),
        &ANNOUNCED,
    );
    None
}

pub fn random_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_owned()
}

#[derive(QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    name: String,
}

/// The two ways Ferrum runs, which every integration test covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    /// `ferrum all-in-one` on an SQLite file with the in-process transport: needs nothing.
    Embedded,
    /// `ferrum api` + `ferrum conductor`s on MySQL/MariaDB and RabbitMQ.
    MultiHost,
}

/// A database of its own for one test; removed when the test ends.
pub struct TestDb {
    pub url: String,
    pub db: Db,
    cleanup: Cleanup,
}

enum Cleanup {
    MysqlDatabase { server: String, name: String },
    Directory(std::path::PathBuf),
}

impl TestDb {
    /// A fresh, migrated database for `stack`; None (announced) when its server is unreachable.
    pub async fn new(stack: Stack) -> Option<TestDb> {
        let db = match stack {
            Stack::Embedded => TestDb::sqlite_file(),
            Stack::MultiHost => TestDb::mysql().await?,
        };
        db.db.migrate().await.expect("migrate test database");
        Some(db)
    }

    /// An SQLite file in a directory of its own, not yet migrated (an all-in-one process
    /// migrates its own file at start).
    pub fn sqlite_file() -> TestDb {
        let dir = std::env::temp_dir().join(format!("ferrum-db-{}", random_suffix()));
        std::fs::create_dir_all(&dir).expect("test directory");
        let url = format!("sqlite://{}", dir.join("ferrum.sqlite").display());
        TestDb {
            db: Db::connect(&url, 2).expect("sqlite pool"),
            url,
            cleanup: Cleanup::Directory(dir),
        }
    }

    async fn mysql() -> Option<TestDb> {
        let server = mysql_url()?;
        Some(TestDb::create_on(server, true).await)
    }

    /// A fresh, migrated database on the MySQL server at `server` (`mysql://user@host:port`),
    /// e.g. a private one a test kills and restarts.
    pub async fn on_server(server: &str) -> TestDb {
        let db = TestDb::create_on(server.to_owned(), false).await;
        db.db.migrate().await.expect("migrate test database");
        db
    }

    /// A fresh MySQL database without any table: what `ferrum db-sync` has not been run on.
    /// None (announced) when the server is unreachable.
    pub async fn unmigrated_mysql() -> Option<TestDb> {
        TestDb::mysql().await
    }

    /// A new pool on the same database, for a test that restarted the server under the old one.
    pub fn reconnect(&mut self) {
        let size = if matches!(self.cleanup, Cleanup::Directory(_)) {
            2
        } else {
            4
        };
        self.db = Db::connect(&self.url, size).expect("pool");
    }

    /// A fresh database on `server` (`mysql://user@host:port`, or a Galera cluster's several
    /// hosts, `mysql://user@h1:p1,h2:p2`: made through the first, which replicates it).
    async fn create_on(server: String, sweep: bool) -> TestDb {
        let first = server.split(',').next().unwrap_or(&server);
        let mut admin = AsyncMysqlConnection::establish(&format!("{first}/mysql"))
            .await
            .unwrap_or_else(|e| panic!("cannot connect to MySQL at {server}: {e}"));
        if sweep {
            sweep_leftovers(&mut admin).await;
        }
        // The process id lets a later run tell a leftover from a database in use.
        let name = format!("ferrum_t_{}_{}", std::process::id(), random_suffix());
        diesel::sql_query(format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .expect("create test database");
        let url = format!("{server}/{name}");
        TestDb {
            db: Db::connect(&url, 4).expect("pool"),
            url,
            cleanup: Cleanup::MysqlDatabase { server, name },
        }
    }
}

/// The test process a database name says made it: `ferrum_t_<pid>_<random>`.
fn owner_pid(name: &str) -> Option<u32> {
    name.strip_prefix("ferrum_t_")?
        .split_once('_')?
        .0
        .parse()
        .ok()
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// Databases left by test runs that were killed: dropped once per test process, before any test
/// of this process has made its own. Only those of a test process that no longer runs on this
/// machine (and older than a few minutes, in case the server is shared with other machines), or,
/// for names without a process id, with no table made in the last hours: other test processes
/// (other worktrees, other engineers) may be using the same server at the same time.
async fn sweep_leftovers(admin: &mut AsyncMysqlConnection) {
    static SWEPT: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    SWEPT
        .get_or_init(|| async {
            let names: Vec<Name> = diesel::sql_query(
                "SELECT schema_name AS name FROM information_schema.schemata WHERE schema_name LIKE 'ferrum\\_t\\_%'",
            )
            .load(admin)
            .await
            .unwrap_or_default();
            for n in names {
                let name = n.name;
                if !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    continue;
                }
                let min_age_minutes = match owner_pid(&name) {
                    Some(pid) if std::path::Path::new(&format!("/proc/{pid}")).exists() => {
                        continue;
                    }
                    Some(_) => 10,
                    None => 360,
                };
                let recent: Vec<Count> = diesel::sql_query(format!(
                    "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = '{name}' \
                     AND create_time > NOW() - INTERVAL {min_age_minutes} MINUTE"
                ))
                .load(admin)
                .await
                .unwrap_or_default();
                if matches!(recent.as_slice(), [c] if c.n == 0) {
                    let _ = diesel::sql_query(format!("DROP DATABASE IF EXISTS {name}"))
                        .execute(admin)
                        .await;
                }
            }
        })
        .await;
}

impl Drop for TestDb {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::Directory(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Cleanup::MysqlDatabase { server, name } => {
                let (server, name) = (
                    server.split(',').next().unwrap_or(server).to_owned(),
                    name.clone(),
                );
                // Drop may run outside a runtime: use a thread with a small runtime of its own.
                let _ = std::thread::spawn(move || {
                    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    else {
                        return;
                    };
                    rt.block_on(async {
                        if let Ok(mut admin) =
                            AsyncMysqlConnection::establish(&format!("{server}/mysql")).await
                        {
                            let _ = diesel::sql_query(format!("DROP DATABASE IF EXISTS {name}"))
                                .execute(&mut admin)
                                .await;
                        }
                    });
                })
                .join();
            }
        }
    }
}

/// An available `fake-hardware` node as a row, for a test that writes it straight into its
/// database.
pub fn fake_hardware_row() -> Node {
    Node {
        uuid: uuid::Uuid::new_v4().to_string(),
        driver: "fake-hardware".into(),
        interfaces: Interfaces {
            deploy: "fake".into(),
            power: "fake".into(),
            management: "fake".into(),
            bios: "no-bios".into(),
            boot: "fake".into(),
            console: "no-console".into(),
            inspect: "no-inspect".into(),
            network: "noop".into(),
            raid: "no-raid".into(),
            rescue: "no-rescue".into(),
            storage: "noop".into(),
            vendor: "no-vendor".into(),
            firmware: "no-firmware".into(),
        },
        provision_state: ProvisionState::Available,
        created_at: ferrum::node::now(),
        ..Node::default()
    }
}
