//! The database: connection pools, migrations, and every query Ferrum runs (nobody else writes SQL).
//!
//! Queries are written once with diesel's DSL and run on whichever backend the URL chose: the
//! `with_conn!` macro hands each query body a concrete connection, so the body is compiled per
//! backend: MySQL/MariaDB through diesel-async's pure-Rust driver (the multi-host form), and an
//! embedded SQLite file through diesel's SQLite connection (the all-in-one form). Each backend has
//! its own migrations tree (`migrations/mysql`, `migrations/sqlite`) yielding the same schema.
//!
//! The node lock lives here too (`nodes::reserve`, `nodes::release`): a compare-and-set on
//! `nodes.reservation`, and every write to a locked node is conditional on holding it.

pub mod conductors;
pub mod models;
pub mod nodes;
pub mod schema;

use std::time::Duration;

use diesel::{SqliteConnection, connection::SimpleConnection};
use diesel_async::{
    AsyncConnection, AsyncMysqlConnection,
    pooled_connection::{AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod},
    sync_connection_wrapper::SyncConnectionWrapper,
};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use futures::FutureExt;

use crate::error::{Error, Result};

pub const MYSQL_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/mysql");
pub const SQLITE_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/sqlite");

type MysqlPool = diesel_async::pooled_connection::deadpool::Pool<AsyncMysqlConnection>;
pub type SqliteConn = SyncConnectionWrapper<SqliteConnection, Inline>;

/// Runs an SQLite statement on the calling thread instead of tokio's blocking pool. A statement
/// on the embedded file takes microseconds, while the hand-off to a pool thread and back costs two
/// context switches: most of the CPU of a read. A statement cannot wait on the executor (it holds
/// SQLite's lock only while it runs, on its own thread), so running it inline cannot deadlock; a
/// writer waiting out another connection's statement waits that long, no longer.
pub struct Inline;

impl diesel_async::sync_connection_wrapper::SpawnBlocking for Inline {
    fn spawn_blocking<'a, R>(
        &mut self,
        task: impl FnOnce() -> R + Send + 'static,
    ) -> futures::future::BoxFuture<
        'a,
        std::result::Result<R, Box<dyn std::error::Error + Send + Sync + 'static>>,
    >
    where
        R: Send + 'static,
    {
        futures::future::ready(Ok(task())).boxed()
    }

    fn get_runtime() -> Self {
        Inline
    }
}
type SqlitePool = diesel_async::pooled_connection::deadpool::Pool<SqliteConn>;

/// A pool of connections to one backend.
#[derive(Clone)]
pub enum Pool {
    Mysql(MysqlPool),
    Sqlite(SqlitePool),
}

/// The handle every other module uses: cheap to clone, shared by all tasks of a process.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
}

/// Runs `$body` with `$conn` bound to a `&mut` connection of the pool's backend. The body is
/// compiled once per backend, so a query is written once and runs on both.
macro_rules! with_conn_result {
    ($db:expr, |$conn:ident| $body:expr) => {
        match &$db.pool {
            $crate::db::Pool::Mysql(pool) => {
                let mut checkout = $crate::db::Checkout::new(pool.get().await?);
                let $conn: &mut diesel_async::AsyncMysqlConnection = &mut checkout;
                // `?` in the body ends this block, not the caller, so the outcome is seen here.
                let result: Result<_, diesel::result::Error> = async { Ok($body) }.await;
                checkout.settle(&result);
                result
            }
            $crate::db::Pool::Sqlite(pool) => {
                let mut checkout = $crate::db::Checkout::new(pool.get().await?);
                let $conn: &mut $crate::db::SqliteConn = &mut checkout;
                let result: Result<_, diesel::result::Error> = async { Ok($body) }.await;
                checkout.settle(&result);
                result
            }
        }
    };
}
pub(crate) use with_conn_result;

/// [`with_conn_result!`], with a database error turned into Ferrum's (`?`).
macro_rules! with_conn {
    ($db:expr, |$conn:ident| $body:expr) => {
        $crate::db::with_conn_result!($db, |$conn| $body)?
    };
}
pub(crate) use with_conn;

/// A pooled connection that goes back to the pool only when the query body using it finished.
/// If the body's future is dropped mid-query (the client hung up, a deadline passed) or failed
/// other than with the server's own error answer, the connection may hold half a reply or be
/// dead: it is closed instead of handed to the next request, which would read that half as its
/// own answer.
/// (Fast recycling checks nothing else, and a verifying check would cost a statement per use.)
pub(crate) struct Checkout<M: deadpool::managed::Manager> {
    conn: Option<deadpool::managed::Object<M>>,
    finished: bool,
}

impl<M: deadpool::managed::Manager> Checkout<M> {
    pub(crate) fn new(conn: deadpool::managed::Object<M>) -> Self {
        Checkout {
            conn: Some(conn),
            finished: false,
        }
    }

    /// Keeps the connection for the pool when the query finished: it succeeded, or the server
    /// answered with an error (a constraint, say), which leaves the protocol in step. Any other
    /// failure (I/O, a broken or desynchronised connection) closes it on drop.
    pub(crate) fn settle<T>(&mut self, result: &Result<T, diesel::result::Error>) {
        self.finished = matches!(
            result,
            Ok(_) | Err(diesel::result::Error::DatabaseError(..) | diesel::result::Error::NotFound)
        );
    }
}

impl<M: deadpool::managed::Manager> std::ops::Deref for Checkout<M> {
    type Target = M::Type;

    fn deref(&self) -> &M::Type {
        // Present until drop.
        self.conn.as_ref().expect("checked-out connection")
    }
}

impl<M: deadpool::managed::Manager> std::ops::DerefMut for Checkout<M> {
    fn deref_mut(&mut self) -> &mut M::Type {
        self.conn.as_mut().expect("checked-out connection")
    }
}

impl<M: deadpool::managed::Manager> Drop for Checkout<M> {
    fn drop(&mut self) {
        if !self.finished
            && let Some(conn) = self.conn.take()
        {
            drop(deadpool::managed::Object::take(conn));
        }
    }
}

/// The database backends, chosen by the URL's scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Mysql,
    Sqlite,
}

impl Backend {
    pub fn of_url(url: &str) -> Option<Backend> {
        if url.starts_with("mysql://") {
            Some(Backend::Mysql)
        } else if url.starts_with("sqlite://") {
            Some(Backend::Sqlite)
        } else {
            None
        }
    }
}

/// The file of a `sqlite://` URL: `sqlite://ferrum.sqlite` is relative to the working
/// directory, `sqlite:///var/lib/ferrum.sqlite` absolute.
pub fn sqlite_path(url: &str) -> Option<&str> {
    url.strip_prefix("sqlite://").filter(|p| !p.is_empty())
}

/// Per-connection settings of the embedded database: WAL, so readers never wait for the writer;
/// `synchronous = NORMAL`, which in WAL mode cannot corrupt the file and syncs at checkpoints
/// rather than at every commit; a busy timeout, so concurrent writers queue instead of failing.
/// The busy timeout comes first: switching to WAL needs the file to itself for a moment.
const SQLITE_PRAGMAS: &str = "PRAGMA busy_timeout = 10000; PRAGMA journal_mode = WAL; \
     PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA cache_size = -2048;";

impl Db {
    /// Opens a pool on `url` (`mysql://...` or `sqlite://<file>`). MySQL connections are made
    /// lazily (use [`Db::ping`] to check the server is there); an SQLite file is created if absent.
    pub fn connect(url: &str, pool_size: usize) -> Result<Db> {
        let build_error = |e: diesel_async::pooled_connection::deadpool::BuildError| {
            Error::DatabaseUnavailable(e.to_string())
        };
        match Backend::of_url(url) {
            Some(Backend::Mysql) => {
                let mut manager_config = ManagerConfig::default();
                // The default (`Verified`) runs a query on every checkout: one more statement per
                // request. `Checkout` closes instead any connection a query did not finish on.
                manager_config.recycling_method = RecyclingMethod::Fast;
                let manager = AsyncDieselConnectionManager::<AsyncMysqlConnection>::new_with_config(
                    url,
                    manager_config,
                );
                let pool = with_limits(MysqlPool::builder(manager), pool_size)
                    .build()
                    .map_err(build_error)?;
                Ok(Db {
                    pool: Pool::Mysql(pool),
                })
            }
            Some(Backend::Sqlite) => {
                let path = sqlite_path(url).ok_or_else(|| {
                    Error::InvalidParameterValue(format!("no file in the SQLite URL {url}"))
                })?;
                let mut manager_config = ManagerConfig::<SqliteConn>::default();
                manager_config.recycling_method = RecyclingMethod::Fast;
                manager_config.custom_setup = Box::new(|path| {
                    let path = path.to_owned();
                    async move {
                        let mut conn = SqliteConn::establish(&path).await?;
                        // Turning a new file to WAL needs it to itself for a moment, and SQLite
                        // reports a concurrent opener as busy without waiting: retry briefly.
                        let mut tries = 0;
                        loop {
                            match conn
                                .spawn_blocking(|c| c.batch_execute(SQLITE_PRAGMAS))
                                .await
                            {
                                Ok(()) => return Ok(conn),
                                Err(e) if tries < 100 && e.to_string().contains("locked") => {
                                    tries += 1;
                                    tokio::time::sleep(Duration::from_millis(20)).await;
                                }
                                Err(e) => {
                                    return Err(diesel::ConnectionError::BadConnection(
                                        e.to_string(),
                                    ));
                                }
                            }
                        }
                    }
                    .boxed()
                });
                let manager = AsyncDieselConnectionManager::<SqliteConn>::new_with_config(
                    path,
                    manager_config,
                );
                let pool = with_limits(SqlitePool::builder(manager), pool_size)
                    .build()
                    .map_err(build_error)?;
                Ok(Db {
                    pool: Pool::Sqlite(pool),
                })
            }
            None => Err(Error::InvalidParameterValue(format!(
                "unsupported database URL (expected mysql://... or sqlite://...): {}",
                redact_url(url)
            ))),
        }
    }

    pub fn backend(&self) -> Backend {
        match self.pool {
            Pool::Mysql(_) => Backend::Mysql,
            Pool::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// One round trip, to fail early at start-up when the server is not there.
    pub async fn ping(&self) -> Result<()> {
        use diesel_async::SimpleAsyncConnection;
        with_conn!(self, |conn| conn.batch_execute("SELECT 1").await?);
        Ok(())
    }

    /// Applies pending migrations (`ferrum db-sync`). Returns the versions applied.
    pub async fn migrate(&self) -> Result<Vec<String>> {
        let failed = |e: Box<dyn std::error::Error + Send + Sync>| {
            Error::internal(format!("migration failed: {e}"))
        };
        let applied = match &self.pool {
            Pool::Mysql(pool) => diesel_async::AsyncMigrationHarness::new(pool.get().await?)
                .run_pending_migrations(MYSQL_MIGRATIONS)
                .map_err(failed)?
                .iter()
                .map(ToString::to_string)
                .collect(),
            Pool::Sqlite(pool) => diesel_async::AsyncMigrationHarness::new(pool.get().await?)
                .run_pending_migrations(SQLITE_MIGRATIONS)
                .map_err(failed)?
                .iter()
                .map(ToString::to_string)
                .collect(),
        };
        Ok(applied)
    }
}

/// The same size and timeouts for every backend's pool: a database that does not answer makes a
/// request fail within seconds (503) instead of hanging.
fn with_limits<M: deadpool::managed::Manager>(
    builder: deadpool::managed::PoolBuilder<M>,
    size: usize,
) -> deadpool::managed::PoolBuilder<M> {
    builder
        .max_size(size)
        .runtime(deadpool::Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_secs(10)))
        .create_timeout(Some(Duration::from_secs(5)))
}

/// A URL fit for a log line: the password replaced.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// The current time as stored in the database: UTC, cut to the microseconds DATETIME(6) keeps, so
/// that what is written equals what is read back.
pub fn now() -> chrono::NaiveDateTime {
    use chrono::Timelike;
    let now = chrono::Utc::now().naive_utc();
    now.with_nanosecond(now.nanosecond() / 1_000 * 1_000)
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted() {
        assert_eq!(
            redact_url("mysql://root:secret@db:3306/ferrum"),
            "mysql://root:***@db:3306/ferrum"
        );
        assert_eq!(
            redact_url("mysql://root@db/ferrum"),
            "mysql://root@db/ferrum"
        );
    }
}
