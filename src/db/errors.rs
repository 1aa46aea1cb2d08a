//! How database and pool failures become Ferrum's [`Error`]: here, so that `error.rs` does not
//! know diesel. A query that finds no row says which [`Error`] that is itself (`NodeNotFound`,
//! ...); these conversions are for everything else `?` carries out of a query.

use diesel_async::pooled_connection::deadpool::PoolError;

use super::{Failure, classify};
use crate::error::Error;

impl From<diesel::result::Error> for Error {
    /// A database that did not answer, or refused for a passing reason, is unavailable (503,
    /// retry); any other database error is a fault of ours (500).
    fn from(e: diesel::result::Error) -> Self {
        match classify(&e) {
            Failure::ConnectionLost | Failure::Transient | Failure::NotServing => {
                Error::DatabaseUnavailable(e.to_string())
            }
            Failure::Storage => {
                tracing::warn!(error = %e, "The database refused a write");
                Error::DatabaseCannotWrite(storage_cause(&e.to_string()).to_owned())
            }
            Failure::Answered => Error::Internal(format!("database error: {e}")),
        }
    }
}

/// The cause of a [`Failure::Storage`] in a user's words.
fn storage_cause(message: &str) -> &'static str {
    if ["full", "No space"].iter().any(|m| message.contains(m)) {
        "the database is out of space"
    } else if ["read-only", "readonly", "read only"]
        .iter()
        .any(|m| message.contains(m))
    {
        "the database's storage is read-only"
    } else {
        "the database's disk failed to write"
    }
}

impl From<PoolError> for Error {
    /// No connection could be had from the pool (the server is away, none came free in time): 503.
    fn from(e: PoolError) -> Self {
        if matches!(e, PoolError::Timeout(deadpool::managed::TimeoutType::Wait)) {
            crate::metrics::get().db_wait_timeout();
        }
        Error::DatabaseUnavailable(e.to_string())
    }
}

/// A write refused for a duplicate (a unique key) is the client's conflict (409), in the words
/// `message` gives; any other refusal is the database's.
pub(crate) fn duplicate_is_conflict(
    e: diesel::result::Error,
    message: impl FnOnce() -> String,
) -> Error {
    match e {
        diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::UniqueViolation,
            _,
        ) => Error::Conflict(message()),
        other => other.into(),
    }
}
