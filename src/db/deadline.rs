//! The caller's deadline as a predicate of a conditional write: the write is applied only if the
//! database evaluates it before the deadline, which it does after any row lock the write waited
//! for was granted. So a write that waited past the time its caller gave up (another client held
//! the row) matches no row and changes nothing, and a 503 for a timed-out call means "not
//! applied". It costs no statement: it is one more term of the write's WHERE clause.
//!
//! No two hosts' clocks are compared. The deadline travels as the time left (the conductor's
//! monotonic clock, measured when the statement is built) and becomes a time of the database's
//! own clock inside the statement: on MySQL/MariaDB, `NOW(6)` (when the statement started, on
//! the server) plus the time left, compared with `SYSDATE(6)` (when the predicate is evaluated).
//! The embedded SQLite runs in the conductor's own process, so its clock is the conductor's: the
//! time left ends at a Unix time compared with `unixepoch('subsec')`, which SQLite reads once per
//! statement, after the statement won the write lock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use diesel::{
    QueryResult,
    expression::{AppearsOnTable, Expression, SelectableExpression, ValidGrouping, is_aggregate},
    mysql::Mysql,
    query_builder::{AstPass, QueryFragment, QueryId},
    sql_types::{BigInt, Bool, Double},
    sqlite::Sqlite,
};
use tokio::time::Instant;

/// Whether `deadline` has passed (never, for no deadline).
pub fn passed(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

/// The predicate "the database is executing this before `deadline`": true for no deadline.
/// Built inside a query body, so that every attempt measures the time left afresh.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BeforeDeadline {
    /// Microseconds left when the statement was built; None for no deadline.
    left_us: Option<i64>,
    /// The Unix time (seconds) the time left ends at, by this process's clock (SQLite).
    ends_at: f64,
}

impl BeforeDeadline {
    pub(crate) fn new(deadline: Option<Instant>) -> Self {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        BeforeDeadline {
            left_us: left.map(|l| i64::try_from(l.as_micros()).unwrap_or(i64::MAX)),
            ends_at: (since_epoch + left.unwrap_or(Duration::ZERO)).as_secs_f64(),
        }
    }
}

impl Expression for BeforeDeadline {
    type SqlType = Bool;
}

impl<QS> AppearsOnTable<QS> for BeforeDeadline {}

impl<QS> SelectableExpression<QS> for BeforeDeadline {}

impl<GB> ValidGrouping<GB> for BeforeDeadline {
    type IsAggregate = is_aggregate::Never;
}

/// The SQL differs with and without a deadline, so the statement cache keys it by its text.
impl QueryId for BeforeDeadline {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl QueryFragment<Mysql> for BeforeDeadline {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Mysql>) -> QueryResult<()> {
        match &self.left_us {
            None => out.push_sql("1 = 1"),
            Some(left_us) => {
                // `NOW(6)` is the statement's start; `SYSDATE(6)` the moment it is evaluated.
                out.push_sql("SYSDATE(6) < NOW(6) + INTERVAL ");
                out.push_bind_param::<BigInt, i64>(left_us)?;
                out.push_sql(" MICROSECOND");
            }
        }
        Ok(())
    }
}

impl QueryFragment<Sqlite> for BeforeDeadline {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        match self.left_us {
            None => out.push_sql("1 = 1"),
            Some(_) => {
                out.push_sql("unixepoch('subsec') < ");
                out.push_bind_param::<Double, f64>(&self.ends_at)?;
            }
        }
        Ok(())
    }
}
