//! The database: connection pools, migrations, and every query Ferrum runs (nobody else writes SQL).
//!
//! Queries are written once with diesel's DSL and run on whichever backend the URL chose: the
//! `with_conn!` macro hands each query body a concrete connection, so the body is compiled per
//! backend. Today that is MySQL/MariaDB through diesel-async's pure-Rust driver; the SQLite backend
//! of the all-in-one form joins as a second arm of [`Pool`].
//!
//! The node lock lives here too (`nodes::reserve`, `nodes::release`): a compare-and-set on
//! `nodes.reservation`, and every write to a locked node is conditional on holding it.

pub mod conductors;
pub mod models;
pub mod nodes;
pub mod schema;

use std::time::Duration;

use diesel_async::{
    AsyncMysqlConnection,
    pooled_connection::{AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod},
};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use crate::error::{Error, Result};

pub const MYSQL_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/mysql");

type MysqlPool = diesel_async::pooled_connection::deadpool::Pool<AsyncMysqlConnection>;

/// A pool of connections to one backend.
#[derive(Clone)]
pub enum Pool {
    Mysql(MysqlPool),
}

/// The handle every other module uses: cheap to clone, shared by all tasks of a process.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
}

/// Runs `$body` with `$conn` bound to a `&mut` connection of the pool's backend.
macro_rules! with_conn {
    ($db:expr, |$conn:ident| $body:expr) => {
        match &$db.pool {
            $crate::db::Pool::Mysql(pool) => {
                let mut pooled = pool.get().await?;
                let $conn: &mut diesel_async::AsyncMysqlConnection = &mut pooled;
                $body
            }
        }
    };
}
pub(crate) use with_conn;

impl Db {
    /// Opens a pool on `url` (`mysql://...`). Connections are made lazily; use [`Db::ping`] to
    /// check the server is there.
    pub fn connect(url: &str, pool_size: usize) -> Result<Db> {
        if !url.starts_with("mysql://") {
            return Err(Error::InvalidParameterValue(format!(
                "unsupported database URL (expected mysql://...): {}",
                redact_url(url)
            )));
        }
        let mut manager_config = ManagerConfig::default();
        // The default (`Verified`) runs a query on every checkout: one more statement per request.
        // diesel-async still discards connections it has seen break.
        manager_config.recycling_method = RecyclingMethod::Fast;
        let manager = AsyncDieselConnectionManager::<AsyncMysqlConnection>::new_with_config(
            url,
            manager_config,
        );
        let pool = MysqlPool::builder(manager)
            .max_size(pool_size)
            .runtime(deadpool::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| Error::DatabaseUnavailable(e.to_string()))?;
        Ok(Db {
            pool: Pool::Mysql(pool),
        })
    }

    /// One round trip, to fail early at start-up when the server is not there.
    pub async fn ping(&self) -> Result<()> {
        use diesel_async::SimpleAsyncConnection;
        with_conn!(self, |conn| conn.batch_execute("SELECT 1").await)?;
        Ok(())
    }

    /// Applies pending migrations (`ferrum db-sync`). Returns the versions applied.
    pub async fn migrate(&self) -> Result<Vec<String>> {
        match &self.pool {
            Pool::Mysql(pool) => {
                let conn = pool.get().await?;
                let mut harness = diesel_async::AsyncMigrationHarness::new(conn);
                let applied = harness
                    .run_pending_migrations(MYSQL_MIGRATIONS)
                    .map_err(|e| Error::internal(format!("migration failed: {e}")))?;
                Ok(applied.iter().map(ToString::to_string).collect())
            }
        }
    }
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
