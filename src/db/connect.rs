//! Opening a pool on a database URL (MySQL/MariaDB or an embedded SQLite file), with the
//! per-connection settings of each backend, and applying the embedded migrations.

use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel_async::{
    AsyncConnection, AsyncMysqlConnection,
    pooled_connection::{AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod},
};
use diesel_migrations::MigrationHarness;
use futures::FutureExt;

use super::hosts::MysqlHosts;
use super::{
    Db, MYSQL_MIGRATIONS, MysqlPool, Pool, SQLITE_MIGRATIONS, SqliteConn, SqlitePool, durable,
    with_conn, with_conn_result,
};
use crate::error::{Error, Result};

/// A pooled MySQL connection unused for this long is checked with a ping before it is handed
/// out: after a server restart the pool holds only dead sockets, and fast recycling would
/// hand each one to a request to fail on. Busy connections are not checked (no extra statement
/// on the hot path); one that dies under use is closed by [`Checkout`].
const IDLE_CHECK_AFTER: Duration = Duration::from_secs(1);
const PING_TIMEOUT: Duration = Duration::from_secs(2);

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

/// Whether `url` is one [`Db::connect`] takes: `sqlite://<file>`, or `mysql://` with one host or
/// several (a Galera cluster's, `hosts.rs`); the problem, in words, when not.
pub fn check_url(url: &str) -> std::result::Result<(), String> {
    match Backend::of_url(url) {
        Some(Backend::Sqlite) => Ok(()),
        Some(Backend::Mysql) => MysqlHosts::parse(url).map(drop),
        None => Err("expected sqlite://<file> or mysql://user@host/database".to_owned()),
    }
}

/// The file of a `sqlite://` URL: `sqlite://ferrum.sqlite` is relative to the working
/// directory, `sqlite:///var/lib/ferrum.sqlite` absolute.
pub fn sqlite_path(url: &str) -> Option<&str> {
    url.strip_prefix("sqlite://").filter(|p| !p.is_empty())
}

/// Per-connection settings of the embedded database: WAL, so readers never wait for the writer;
/// `synchronous = NORMAL`, which in WAL mode cannot corrupt the file and syncs at checkpoints
/// rather than at every commit (each write is made durable after its commit by the group commit
/// of `durable.rs` instead, many commits to one sync); a busy timeout, so concurrent writers
/// queue instead of failing.
/// The busy timeout comes first: switching to WAL needs the file to itself for a moment.
const SQLITE_PRAGMAS: &str = "PRAGMA busy_timeout = 10000; PRAGMA journal_mode = WAL; \
     PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA cache_size = -2048;";

/// Ironic's `[conductor]node_history_max_entries` default.
pub const DEFAULT_HISTORY_MAX_ENTRIES: u32 = 300;

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
                // request. `Checkout` closes instead any connection a query did not finish on,
                // and the pre-recycle hook pings only connections that sat idle.
                manager_config.recycling_method = RecyclingMethod::Fast;
                let hosts = std::sync::Arc::new(MysqlHosts::parse(url).map_err(|e| {
                    Error::InvalidParameterValue(format!("{e}: {}", redact_url(url)))
                })?);
                manager_config.custom_setup = Box::new(move |_url| {
                    let hosts = hosts.clone();
                    async move { hosts.connect().await }.boxed()
                });
                let manager = AsyncDieselConnectionManager::<AsyncMysqlConnection>::new_with_config(
                    url,
                    manager_config,
                );
                let ping_idle = deadpool::managed::Hook::<
                    AsyncDieselConnectionManager<AsyncMysqlConnection>,
                >::async_fn(
                    |conn: &mut AsyncMysqlConnection, metrics| {
                        async move {
                            use diesel_async::SimpleAsyncConnection;
                            if metrics.last_used() < IDLE_CHECK_AFTER {
                                return Ok(());
                            }
                            match tokio::time::timeout(PING_TIMEOUT, conn.batch_execute("SELECT 1"))
                                .await
                            {
                                Ok(Ok(())) => Ok(()),
                                _ => Err(deadpool::managed::HookError::message(
                                    "an idle connection did not answer a ping",
                                )),
                            }
                        }
                        .boxed()
                    },
                );
                let pool = with_limits(MysqlPool::builder(manager), pool_size)
                    .pre_recycle(ping_idle)
                    .build()
                    .map_err(build_error)?;
                Ok(Db {
                    history_max_entries: DEFAULT_HISTORY_MAX_ENTRIES,
                    pool: Pool::Mysql(pool),
                    wal_sync: None,
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
                let wal_sync = durable::WalSyncer::start(std::path::Path::new(path))
                    .map_err(|e| Error::internal(format!("starting the WAL syncer: {e}")))?;
                Ok(Db {
                    history_max_entries: DEFAULT_HISTORY_MAX_ENTRIES,
                    pool: Pool::Sqlite(pool),
                    wal_sync: Some(std::sync::Arc::new(wal_sync)),
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

    /// The pool's connections now, for the metrics.
    pub fn pool_status(&self) -> crate::metrics::PoolStatus {
        let status = match &self.pool {
            Pool::Mysql(pool) => pool.status(),
            Pool::Sqlite(pool) => pool.status(),
        };
        crate::metrics::PoolStatus {
            max_size: status.max_size,
            in_use: status.size.saturating_sub(status.available),
            idle: status.available,
            waiting: status.waiting,
        }
    }

    /// One round trip, to fail early at start-up when the server is not there.
    pub async fn ping(&self) -> Result<()> {
        use diesel_async::SimpleAsyncConnection;
        with_conn!(self, |conn| conn.batch_execute("SELECT 1").await?);
        Ok(())
    }

    /// The versions of the embedded migrations not applied to this database, oldest first, in
    /// one query (no table is created: the API's database user may have no right to). A
    /// database without diesel's bookkeeping table has them all pending.
    pub async fn pending_migrations(&self) -> Result<Vec<String>> {
        use diesel::migration::MigrationSource;
        use diesel_async::RunQueryDsl as _;

        #[derive(diesel::QueryableByName)]
        struct Applied {
            #[diesel(sql_type = diesel::sql_types::Text)]
            version: String,
        }
        let query = "SELECT version FROM __diesel_schema_migrations";
        let applied = match with_conn_result!(self, reads, |conn| {
            diesel::sql_query(query).load::<Applied>(conn).await?
        }) {
            Ok(rows) => rows.into_iter().map(|r| r.version).collect(),
            // The server answered, with an error: there is no such table yet.
            Err(diesel::result::Error::DatabaseError(..)) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let applied: std::collections::HashSet<String> = applied.into_iter().collect();
        let names: Vec<String> = match self.backend() {
            Backend::Mysql => {
                MigrationSource::<diesel::mysql::Mysql>::migrations(&MYSQL_MIGRATIONS)
                    .map_err(|e| Error::internal(format!("embedded migrations: {e}")))?
                    .iter()
                    .map(|m| m.name().version().to_string())
                    .collect()
            }
            Backend::Sqlite => {
                MigrationSource::<diesel::sqlite::Sqlite>::migrations(&SQLITE_MIGRATIONS)
                    .map_err(|e| Error::internal(format!("embedded migrations: {e}")))?
                    .iter()
                    .map(|m| m.name().version().to_string())
                    .collect()
            }
        };
        let mut pending: Vec<String> = names.into_iter().filter(|v| !applied.contains(v)).collect();
        pending.sort();
        Ok(pending)
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
        // The migrations' writes, and the file itself, new or not, made durable.
        if let Some(wal_sync) = &self.wal_sync {
            self.made_durable().await?;
            wal_sync.sync_database_file().map_err(|e| {
                Error::DatabaseUnavailable(format!("syncing the database file: {e}"))
            })?;
        }
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

/// A URL fit for a log line or an error: every password replaced by `***`, also those of the
/// several hosts of a cluster's URL (`amqp://u:p@h1,u:p@h2/vhost`). One whose hosts cannot be
/// told apart (a `,` or `/` left unencoded in a password) shows its scheme alone.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // Without an `@`, no credentials (a SQLite file's path).
    if !rest.contains('@') {
        return url.to_owned();
    }
    // The path may begin inside the password too (a `/` in it): nothing of it shows.
    let Ok(list) = crate::host_list::split(url) else {
        return format!("{scheme}://***");
    };
    let hosts: Vec<String> = list
        .hosts
        .iter()
        .map(
            |(userinfo, host)| match userinfo.map(|u| u.split_once(':')) {
                Some(Some((user, _))) => format!("{user}:***@{host}"),
                Some(None) => format!("{}@{host}", userinfo.unwrap_or_default()),
                None => (*host).to_owned(),
            },
        )
        .collect();
    format!("{scheme}://{}{}", hosts.join(","), list.tail)
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
        assert_eq!(
            redact_url("amqp://u:p1@h1:5672,v:p2@h2,h3/vh?heartbeat=2"),
            "amqp://u:***@h1:5672,v:***@h2,h3/vh?heartbeat=2"
        );
        assert_eq!(redact_url("local"), "local");
        assert_eq!(
            redact_url("sqlite:///var/lib/ferrum.sqlite"),
            "sqlite:///var/lib/ferrum.sqlite"
        );
        // A `,` left in a password: no part of it shows.
        assert_eq!(
            redact_url("mysql://root:sec,ret@h1,h2/ferrum"),
            "mysql://***"
        );
        assert_eq!(redact_url("mysql://root:sec/ret@h1/ferrum"), "mysql://***");
    }
}
