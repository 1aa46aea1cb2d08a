//! Where the services are, and what happens when they are not there: with
//! `FERRUM_REQUIRE_SERVICES=1` (CI) a test fails; otherwise it says so loudly and returns early.

use std::{
    net::{TcpStream, ToSocketAddrs},
    sync::OnceLock,
    time::Duration,
};

use diesel::{QueryableByName, sql_types::Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use ferrum::db::Db;

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
    let up = *cell.get_or_init(|| reachable(url, port));
    if up {
        return Some(url.to_owned());
    }
    let message = format!(
        "{name} is not reachable at {url} (set {var} to point elsewhere); the tests that need it were NOT run."
    );
    if required() {
        panic!("FERRUM_REQUIRE_SERVICES=1: {message}");
    }
    eprintln!("\n!!!!!!!! {message} !!!!!!!!\n");
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

pub fn random_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_owned()
}

#[derive(QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    name: String,
}

/// A database of its own for one test, migrated; dropped when the test ends.
pub struct TestDb {
    pub name: String,
    pub url: String,
    server: String,
    pub db: Db,
}

impl TestDb {
    pub async fn new() -> Option<TestDb> {
        let server = mysql_url()?;
        let mut admin = AsyncMysqlConnection::establish(&format!("{server}/mysql"))
            .await
            .unwrap_or_else(|e| panic!("cannot connect to MySQL at {server}: {e}"));
        sweep_leftovers(&mut admin).await;
        let name = format!("ferrum_t_{}", random_suffix());
        diesel::sql_query(format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .expect("create test database");
        let url = format!("{server}/{name}");
        let db = Db::connect(&url, 4).expect("pool");
        db.migrate().await.expect("migrate test database");
        Some(TestDb {
            name,
            url,
            server,
            db,
        })
    }
}

/// Databases left by test runs that were killed: dropped once per test process, before any test
/// of this process has made its own.
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
                let _ = diesel::sql_query(format!("DROP DATABASE IF EXISTS {}", n.name))
                    .execute(admin)
                    .await;
            }
        })
        .await;
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        // Drop runs outside async context guarantees: use a thread with its own small runtime.
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
