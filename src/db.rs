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

pub mod allocations;
pub mod bios;
pub mod chassis;
pub mod children;
pub mod conductors;
pub mod deadline;
pub mod deploy_templates;
pub mod durable;
mod errors;
pub mod firmware;
pub mod history;
pub mod inspection_rules;
pub mod inventory;
pub mod models;
pub mod named;
pub mod nodes;
pub mod ports;
pub(crate) mod reuse;
pub mod runbooks;
mod sql_types;
pub mod volume;

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
    /// How many history entries a node keeps (`[conductor]node_history_max_entries`); 0 records
    /// none.
    history_max_entries: u32,
    /// The embedded file's group commit (`durable.rs`): every write waits for it before it
    /// returns. None on MySQL (InnoDB syncs its own commits) and when turned off.
    wal_sync: Option<std::sync::Arc<durable::WalSyncer>>,
}

/// Runs `$body` with `$conn` bound to a `&mut` connection of the pool's backend. The body is
/// compiled once per backend, so a query is written once and runs on both. A body the server
/// refused as a deadlock or lock-wait timeout (rolled back, so nothing was applied) runs again
/// on a fresh checkout after a short backoff: that is a transient answer, not an outcome. With
/// `until $deadline`, no attempt starts once the deadline would pass during its backoff.
macro_rules! with_conn_result {
    ($db:expr, |$conn:ident| $body:expr) => {
        $crate::db::with_conn_result!($db, until None, |$conn| $body)
    };
    ($db:expr, until $deadline:expr, |$conn:ident| $body:expr) => {
        match &$db.pool {
            $crate::db::Pool::Mysql(pool) => {
                let mut attempt = 0;
                loop {
                    let mut checkout = $crate::db::Checkout::new(pool.get().await?);
                    let $conn: &mut diesel_async::AsyncMysqlConnection = &mut checkout;
                    // `?` in the body ends this block, not the caller, so the outcome is seen here.
                    let result: Result<_, diesel::result::Error> = async { Ok($body) }.await;
                    checkout.settle(&result);
                    drop(checkout);
                    if !$crate::db::retry_after(&result, &mut attempt, $deadline).await {
                        break result;
                    }
                }
            }
            $crate::db::Pool::Sqlite(pool) => {
                let mut attempt = 0;
                loop {
                    let mut checkout = $crate::db::Checkout::new(pool.get().await?);
                    let $conn: &mut $crate::db::SqliteConn = &mut checkout;
                    let result: Result<_, diesel::result::Error> = async { Ok($body) }.await;
                    checkout.settle(&result);
                    drop(checkout);
                    if !$crate::db::retry_after(&result, &mut attempt, $deadline).await {
                        break result;
                    }
                }
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

/// [`with_conn_result!`] for a body that writes: once it succeeded, its write is made durable
/// before it returns (on the embedded file, by the group commit of `durable.rs`; InnoDB's own
/// commit is durable). Every body that writes goes through this (a test holds it), so that
/// nobody is told of a write a crash could still take back.
macro_rules! with_write_result {
    ($db:expr, |$conn:ident| $body:expr) => {
        $crate::db::with_write_result!($db, until None, |$conn| $body)
    };
    ($db:expr, until $deadline:expr, |$conn:ident| $body:expr) => {
        match $crate::db::with_conn_result!($db, until $deadline, |$conn| $body) {
            Ok(written) => $db.made_durable().await.map(|()| written),
            Err(e) => Err(e),
        }
    };
}
pub(crate) use with_write_result;

/// [`with_write_result!`], with a database error turned into Ferrum's (`?`).
macro_rules! with_write {
    ($db:expr, |$conn:ident| $body:expr) => {
        $crate::db::with_write_result!($db, |$conn| $body)?
    };
}
pub(crate) use with_write;

/// Orders a boxed listing query by `$id` and keeps only the rows after the marker's id
/// (`$marker`: `Option<i32>`).
macro_rules! order_by_id {
    ($q:expr, $id:expr, $descending:expr, $marker:expr) => {{
        let q = $q;
        match ($descending, $marker) {
            (false, None) => q.order($id.asc()),
            (true, None) => q.order($id.desc()),
            (false, Some(m)) => q.filter($id.gt(m)).order($id.asc()),
            (true, Some(m)) => q.filter($id.lt(m)).order($id.desc()),
        }
    }};
}
pub(crate) use order_by_id;

/// Orders a boxed listing query by the column `$col`, then `$id`, and keeps only the rows after
/// the marker (`$marker`: `Option<(value, id)>` of the marker's row).
macro_rules! order_after {
    ($q:expr, $col:expr, $id:expr, $descending:expr, $marker:expr) => {{
        let q = $q;
        match ($descending, $marker) {
            (false, None) => q.order(($col.asc(), $id.asc())),
            (true, None) => q.order(($col.desc(), $id.desc())),
            (false, Some((v, id))) => q
                .filter($col.gt(v.clone()).or($col.eq(v).and($id.gt(id))))
                .order(($col.asc(), $id.asc())),
            (true, Some((v, id))) => q
                .filter($col.lt(v.clone()).or($col.eq(v).and($id.lt(id))))
                .order(($col.desc(), $id.desc())),
        }
    }};
}
pub(crate) use order_after;

/// [`order_after!`] for a nullable column: nulls come first ascending and last descending, as
/// both backends order them.
macro_rules! order_after_nullable {
    ($q:expr, $col:expr, $id:expr, $descending:expr, $marker:expr) => {{
        let q = $q;
        match ($descending, $marker) {
            (false, None) => q.order(($col.asc(), $id.asc())),
            (true, None) => q.order(($col.desc(), $id.desc())),
            (false, Some((None, id))) => q
                .filter($col.is_not_null().or($col.is_null().and($id.gt(id))))
                .order(($col.asc(), $id.asc())),
            (false, Some((Some(v), id))) => q
                .filter($col.gt(v.clone()).or($col.eq(v).and($id.gt(id))))
                .order(($col.asc(), $id.asc())),
            (true, Some((None, id))) => q
                .filter($col.is_null().and($id.lt(id)))
                .order(($col.desc(), $id.desc())),
            (true, Some((Some(v), id))) => q
                .filter(
                    $col.lt(v.clone())
                        .or($col.eq(v).and($id.lt(id)))
                        .or($col.is_null()),
                )
                .order(($col.desc(), $id.desc())),
        }
    }};
}
pub(crate) use order_after_nullable;

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
    /// answered with an error of its own (a constraint, a deadlock), which leaves the protocol
    /// in step. Any other failure (I/O, a broken or desynchronised connection, a server going
    /// away) closes it on drop.
    pub(crate) fn settle<T>(&mut self, result: &Result<T, diesel::result::Error>) {
        self.finished = match result {
            Ok(_) => true,
            Err(e) => classify(e) != Failure::ConnectionLost,
        };
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

/// What a failed statement says about its connection and about running it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The server answered with an error of its own (a constraint, a bad value): an outcome.
    Answered,
    /// The server rolled the statement back for a reason that goes away (a deadlock, a
    /// lock-wait timeout, SQLite's busy file): nothing was applied, and running it again is safe.
    Transient,
    /// No answer came: the socket died, the server went away or is shutting down. Whether a
    /// write was applied is unknown, and the connection is no good any more.
    ConnectionLost,
    /// The database cannot store the write now: out of space, a read-only file system or
    /// server, a failing disk. Nothing was applied (or, for a failed sync, it may be lost);
    /// running it again at once would fail the same way, and reads still work.
    Storage,
}

/// Client-side failures of the MySQL driver, which diesel-async reports as database errors of
/// unknown kind with the driver error's text (`mysql_async::Error`'s Display): only the prefix
/// tells them from the server's own answers.
const MYSQL_CLIENT_FAILURES: &[&str] = &[
    "Input/output error",
    "Driver error",
    "Other error",
    "TLS error",
    "URL error",
];
/// Server answers that mean the session is ending (MariaDB 1053, 1927, 2006, 2013).
const SESSION_ENDING: &[&str] = &[
    "Server shutdown in progress",
    "Connection was killed",
    "server has gone away",
    "Lost connection to",
];
/// Answers that the database cannot store anything now: SQLite's SQLITE_FULL, SQLITE_READONLY,
/// SQLITE_IOERR (and the group commit's own failed sync, worded as SQLite's); MariaDB's 1114
/// (table full), 1021 (disk full), 1030 with errno 28 (no space), 1290 (`--read-only`), 1036
/// (read-only table) and 3 (error writing a file).
const STORAGE: &[&str] = &[
    "database or disk is full",
    "readonly database",
    "disk I/O error",
    "is full",
    "Disk full",
    "No space left on device",
    "--read-only option",
    "is read only",
    "Error writing file",
];
/// Server answers that roll back and can be tried again (1213, 1205; SQLite's busy file).
const TRANSIENT: &[&str] = &[
    "Deadlock found",
    "Lock wait timeout exceeded",
    "database is locked",
];

pub fn classify(e: &diesel::result::Error) -> Failure {
    use diesel::result::Error as E;
    match e {
        E::NotFound => Failure::Answered,
        E::DatabaseError(_, info) => {
            let message = info.message();
            if MYSQL_CLIENT_FAILURES.iter().any(|p| message.starts_with(p))
                || SESSION_ENDING.iter().any(|m| message.contains(m))
            {
                Failure::ConnectionLost
            } else if TRANSIENT.iter().any(|m| message.contains(m)) {
                Failure::Transient
            } else if STORAGE.iter().any(|m| message.contains(m)) {
                Failure::Storage
            } else {
                Failure::Answered
            }
        }
        // The reply was read whole; only turning it into values (or the query into SQL) failed.
        E::DeserializationError(_) | E::SerializationError(_) | E::QueryBuilderError(_) => {
            Failure::Answered
        }
        // A broken transaction manager or a half-read reply: the connection cannot be trusted.
        _ => Failure::ConnectionLost,
    }
}

/// How often a statement refused as transient is run again, and the first backoff (doubling).
const TRANSIENT_RETRIES: u32 = 5;
const TRANSIENT_BACKOFF: Duration = Duration::from_millis(5);

/// Whether `result` is a transient refusal worth another attempt; if so, waits the backoff.
/// Not when the attempt would start past `deadline`: its caller has stopped waiting.
#[doc(hidden)]
pub async fn retry_after<T>(
    result: &Result<T, diesel::result::Error>,
    attempt: &mut u32,
    deadline: Option<tokio::time::Instant>,
) -> bool {
    let Err(e) = result else { return false };
    if classify(e) != Failure::Transient || *attempt >= TRANSIENT_RETRIES {
        return false;
    }
    let jitter = Duration::from_micros(rand::random_range(0..1000));
    let backoff = TRANSIENT_BACKOFF * 2u32.pow(*attempt) + jitter;
    if deadline.is_some_and(|d| tokio::time::Instant::now() + backoff >= d) {
        return false;
    }
    *attempt += 1;
    tokio::time::sleep(backoff).await;
    tracing::debug!(error = %e, attempt = *attempt, "transient database answer; running the statement again");
    true
}

/// What a write that retried transient refusals only until `deadline` amounts to: a refusal
/// left when the deadline has passed was rolled back, so it is a write that did not happen, as
/// one that matched no row (0 rows); its caller tells the two apart by the deadline.
pub(crate) fn not_written_past(
    result: Result<usize, diesel::result::Error>,
    deadline: Option<tokio::time::Instant>,
) -> Result<usize, diesel::result::Error> {
    match result {
        Err(e) if classify(&e) == Failure::Transient && deadline::passed(deadline) => Ok(0),
        other => other,
    }
}

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
    /// The same pool, keeping at most `max` history entries per node (0: none are recorded).
    pub fn with_history_max_entries(mut self, max: u32) -> Db {
        self.history_max_entries = max;
        self
    }

    /// How many history entries a node keeps.
    pub fn history_max_entries(&self) -> u32 {
        self.history_max_entries
    }

    /// The same pool, with the embedded file's writes acknowledged before they are on disk
    /// (`database.sqlite_durable = false`): a crash of the host (not of Ferrum alone) may then
    /// lose the writes since the last checkpoint. No effect on MySQL.
    pub fn without_durable_commits(mut self) -> Db {
        self.wal_sync = None;
        self
    }

    /// Waits until every write this process committed so far is on disk (see `durable.rs`).
    /// A failed sync is a storage failure: the caller must not report its write as done.
    pub async fn made_durable(&self) -> std::result::Result<(), diesel::result::Error> {
        let Some(wal_sync) = &self.wal_sync else {
            return Ok(());
        };
        wal_sync.sync().await.map_err(|why| {
            diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::Unknown,
                Box::new(why.to_string()),
            )
        })
    }

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
                manager_config.custom_setup = Box::new(|url| {
                    let url = url.to_owned();
                    async move {
                        use diesel_async::SimpleAsyncConnection;
                        let mut conn = AsyncMysqlConnection::establish(&url).await?;
                        // Every statement is one autocommitted conditional write or a read:
                        // READ COMMITTED takes no gap locks, so two single-row updates of
                        // neighbouring nodes cannot deadlock on a secondary index's gaps.
                        conn.batch_execute(
                            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                        )
                        .await
                        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
                        Ok(conn)
                    }
                    .boxed()
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
        let applied = match with_conn_result!(self, |conn| {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn db_error(message: &str) -> diesel::result::Error {
        diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::Unknown,
            Box::new(message.to_owned()),
        )
    }

    #[test]
    fn failures_are_told_apart_by_what_the_server_said() {
        let lost = [
            "Input/output error: Connection reset by peer (os error 104)",
            "Driver error: `Connection to the server is closed.'",
            "Server shutdown in progress",
            "Connection was killed",
        ];
        for message in lost {
            assert_eq!(
                classify(&db_error(message)),
                Failure::ConnectionLost,
                "{message}"
            );
        }
        let transient = [
            "Deadlock found when trying to get lock; try restarting transaction",
            "Lock wait timeout exceeded; try restarting transaction",
            "database is locked",
        ];
        for message in transient {
            assert_eq!(
                classify(&db_error(message)),
                Failure::Transient,
                "{message}"
            );
        }
        assert_eq!(
            classify(&db_error("Duplicate entry 'x' for key 'uuid'")),
            Failure::Answered
        );
        assert_eq!(
            classify(&diesel::result::Error::NotFound),
            Failure::Answered
        );
        // What the API makes of them: 503 for the first two kinds, 500 for the last.
        assert_eq!(
            Error::from(db_error(lost[0])).status(),
            http::StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            Error::from(db_error(transient[0])).status(),
            http::StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            Error::from(db_error("Unknown column 'x'")).status(),
            http::StatusCode::INTERNAL_SERVER_ERROR
        );
    }

    /// Every query body that writes is run by `with_write!`/`with_write_result!`, which make
    /// the write durable before anyone hears of it: a write run by `with_conn!` would be
    /// acknowledged while a crash of the host could still take it back.
    #[test]
    fn every_write_waits_until_it_is_durable() {
        const WRITES: &[&str] = &[
            "diesel::update",
            "insert_into",
            "diesel::delete",
            ".transaction",
            "replace_into",
            "conditional_write",
            "record_entry",
        ];
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/db");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("src/db")
            .map(|e| e.expect("entry").path())
            .collect();
        files.push(dir.with_extension("rs"));
        let mut offenders = Vec::new();
        for file in files {
            let source = std::fs::read_to_string(&file).expect("source");
            // The code, not its tests (this one names the macros in strings).
            let text = source.split("#[cfg(test)]").next().unwrap_or_default();
            for (at, _) in text.match_indices("with_conn") {
                let rest = &text[at..];
                let Some(open) = rest.find("!(") else {
                    continue;
                };
                // Only invocations of with_conn or with_conn_result.
                if !matches!(&rest[..open], "with_conn" | "with_conn_result") {
                    continue;
                }
                let mut depth = 0;
                let body_end = rest[open + 1..]
                    .char_indices()
                    .find_map(|(i, c)| {
                        match c {
                            '(' => depth += 1,
                            ')' => depth -= 1,
                            _ => {}
                        }
                        (depth == 0).then_some(open + 1 + i)
                    })
                    .expect("balanced");
                let body = &rest[open..body_end];
                if WRITES.iter().any(|w| body.contains(w)) {
                    let line = text[..at].lines().count();
                    offenders.push(format!("{}:{line}", file.display()));
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "writes run without with_write!: {offenders:?}"
        );
    }

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
