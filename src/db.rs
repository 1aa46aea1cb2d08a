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
mod connect;
pub mod deadline;
pub mod deploy_templates;
pub mod durable;
mod errors;
mod failure;
pub mod firmware;
pub mod history;
mod hosts;
pub mod inspection_rules;
pub mod inventory;
pub mod listing;
pub mod models;
pub mod named;
pub mod nodes;
pub mod ports;
pub(crate) mod reuse;
pub mod runbooks;
mod sql_types;
pub mod volume;

use diesel::SqliteConnection;
use diesel_async::{AsyncMysqlConnection, sync_connection_wrapper::SyncConnectionWrapper};
use diesel_migrations::{EmbeddedMigrations, embed_migrations};
use futures::FutureExt;

use crate::error::Result;

pub use connect::{Backend, DEFAULT_HISTORY_MAX_ENTRIES, check_url, redact_url, sqlite_path};
pub(crate) use errors::duplicate_is_conflict;
pub(crate) use failure::not_written_past;
#[doc(hidden)]
pub use failure::{Body, STATEMENT_TIMEOUT, retry_after, within_statement_timeout};
pub use failure::{Failure, classify};
pub(crate) use listing::{order_after, order_after_nullable, order_by_id};

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
/// `until $deadline`, no attempt starts once the deadline would pass during its backoff. With
/// `reads`, for a body that only reads, a lost connection (a database node killed, a server
/// restarted) is also such an answer: the body runs again on another connection. A write's is
/// not: whether it was applied is unknown. On MySQL an attempt that gets no answer within
/// [`STATEMENT_TIMEOUT`] is a lost connection.
macro_rules! with_conn_result {
    ($db:expr, |$conn:ident| $body:expr) => {
        $crate::db::with_conn_result!(@run $db, None, $crate::db::Body::Writes, |$conn| $body)
    };
    ($db:expr, reads, |$conn:ident| $body:expr) => {
        $crate::db::with_conn_result!(@run $db, None, $crate::db::Body::Reads, |$conn| $body)
    };
    ($db:expr, until $deadline:expr, |$conn:ident| $body:expr) => {
        $crate::db::with_conn_result!(@run $db, $deadline, $crate::db::Body::Writes, |$conn| $body)
    };
    (@run $db:expr, $deadline:expr, $kind:expr, |$conn:ident| $body:expr) => {
        match &$db.pool {
            $crate::db::Pool::Mysql(pool) => {
                let mut attempt = 0;
                loop {
                    let mut checkout = $crate::db::Checkout::new(pool.get().await?);
                    let $conn: &mut diesel_async::AsyncMysqlConnection = &mut checkout;
                    // `?` in the body ends this block, not the caller, so the outcome is seen here.
                    let result: Result<_, diesel::result::Error> =
                        $crate::db::within_statement_timeout(
                            $crate::db::STATEMENT_TIMEOUT,
                            async { Ok($body) },
                        )
                        .await;
                    checkout.settle(&result);
                    drop(checkout);
                    if !$crate::db::retry_after(&result, &mut attempt, $deadline, $kind).await {
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
                    if !$crate::db::retry_after(&result, &mut attempt, $deadline, $kind).await {
                        break result;
                    }
                }
            }
        }
    };
}
pub(crate) use with_conn_result;

/// [`with_conn_result!`] for a body that only reads, with a database error turned into
/// Ferrum's (`?`).
macro_rules! with_conn {
    ($db:expr, |$conn:ident| $body:expr) => {
        $crate::db::with_conn_result!($db, reads, |$conn| $body)?
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

/// The row (`Option<$row>`) of `$table` that `$ident` names: by its `uuid` (lower-cased) when
/// `$by_uuid`, else by its `name`. One query.
macro_rules! by_uuid_or_name {
    ($db:expr, $table:ident, $row:ty, $ident:expr, $by_uuid:expr) => {{
        let ident: &str = $ident;
        let by_uuid: bool = $by_uuid;
        let found: Option<$row> = $crate::db::with_conn!($db, |conn| {
            let q = $table::table.select(<$row>::as_select()).into_boxed();
            let q = if by_uuid {
                q.filter($table::uuid.eq(ident.to_ascii_lowercase()))
            } else {
                q.filter($table::name.eq(ident))
            };
            q.first(conn).await.optional()?
        });
        found
    }};
}
pub(crate) use by_uuid_or_name;

/// Inserts `$row` into `$table`, then reads it back by its UUID with `$get`; a write the database
/// refused is what `$refused` makes of the diesel error.
macro_rules! insert_and_get {
    ($db:expr, $table:ident, $row:expr, $get:expr, $refused:expr) => {{
        let row = $row;
        let inserted =
            $crate::db::with_write_result!($db, |conn| diesel::insert_into($table::table)
                .values(row)
                .execute(conn)
                .await?);
        match inserted {
            Ok(_) => $get($db, &row.uuid).await,
            Err(e) => Err($refused(e)),
        }
    }};
}
pub(crate) use insert_and_get;

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
    /// away or not serving) closes it on drop.
    pub(crate) fn settle<T>(&mut self, result: &Result<T, diesel::result::Error>) {
        self.finished = match result {
            Ok(_) => true,
            Err(e) => classify(e).keeps_connection(),
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
}

#[cfg(test)]
mod tests {
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
        // Every file below `src/db`, its submodules' folders included, and `src/db.rs`.
        let mut files = vec![dir.with_extension("rs")];
        let mut folders = vec![dir];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).expect("src/db") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    folders.push(path);
                } else {
                    files.push(path);
                }
            }
        }
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
}
