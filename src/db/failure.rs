//! What a failed statement says: an answer, a transient refusal worth running again (with the
//! backoff that [`with_conn_result!`](super::with_conn_result) waits), a lost connection or a
//! storage that cannot write; the API's status follows from it (`db/errors.rs`).

use std::time::Duration;

use super::deadline;

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
    /// The server is up but not serving: a Galera node outside the cluster's primary component
    /// or still joining it (1047, "WSREP has not yet prepared node for application use").
    /// Nothing was applied; the connection is closed, and the statement runs again on a new
    /// one, which goes to another node (`hosts.rs`).
    NotServing,
    /// The database cannot store the write now: out of space, a read-only file system or
    /// server, a failing disk. Nothing was applied (or, for a failed sync, it may be lost);
    /// running it again at once would fail the same way, and reads still work.
    Storage,
}

impl Failure {
    /// Whether nothing was applied and the statement may run again after a backoff.
    pub fn retryable(self) -> bool {
        matches!(self, Failure::Transient | Failure::NotServing)
    }

    /// Whether the connection that failed so can go back to the pool: not when it is dead or
    /// on a node that does not serve.
    pub(crate) fn keeps_connection(self) -> bool {
        !matches!(self, Failure::ConnectionLost | Failure::NotServing)
    }
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
/// How long one attempt of a query body may wait for MySQL's answers. A server that dies takes
/// its sockets with it, but one cut off by the network (a Galera node partitioned, a host
/// powered off) answers nothing, and the driver has no read timeout of its own: without this a
/// request, and a lock release, would wait for the kernel to give up on the socket (~15 min).
/// Far above any statement Ferrum makes.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);
/// The message of an attempt that got no answer within [`STATEMENT_TIMEOUT`].
const NO_ANSWER: &str = "No answer from the database within";

/// Runs one attempt of a query body within [`STATEMENT_TIMEOUT`]: past it, the body is dropped
/// (its connection is then closed, see `Checkout`) and the attempt is a lost connection.
#[doc(hidden)]
pub async fn within_statement_timeout<T>(
    limit: Duration,
    attempt: impl Future<Output = Result<T, diesel::result::Error>>,
) -> Result<T, diesel::result::Error> {
    match tokio::time::timeout(limit, attempt).await {
        Ok(result) => result,
        Err(_) => Err(diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::Unknown,
            Box::new(format!("{NO_ANSWER} {limit:?}")),
        )),
    }
}

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
/// MariaDB Galera's 1047 (also when the node left the cluster's primary component under a
/// running session), and a write's replication refused for the same reason (the transaction
/// is rolled back: nothing was applied).
const NOT_SERVING: &[&str] = &[
    "WSREP has not yet prepared node",
    "Not connected to Primary Component",
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
                || message.starts_with(NO_ANSWER)
                || SESSION_ENDING.iter().any(|m| message.contains(m))
            {
                Failure::ConnectionLost
            } else if NOT_SERVING.iter().any(|m| message.contains(m)) {
                Failure::NotServing
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

/// What a query body does, which decides whether a lost connection is worth another attempt.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    Reads,
    Writes,
}

/// Whether `result` is a transient refusal worth another attempt (or, for a body that only
/// `reads`, a lost connection); if so, waits the backoff. Not when the attempt would start past
/// `deadline`: its caller has stopped waiting.
#[doc(hidden)]
pub async fn retry_after<T>(
    result: &Result<T, diesel::result::Error>,
    attempt: &mut u32,
    deadline: Option<tokio::time::Instant>,
    body: Body,
) -> bool {
    let Err(e) = result else { return false };
    let failure = classify(e);
    let again = failure.retryable() || (body == Body::Reads && failure == Failure::ConnectionLost);
    if !again || *attempt >= TRANSIENT_RETRIES {
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
        Err(e) if classify(&e).retryable() && deadline::passed(deadline) => Ok(0),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn db_error(message: &str) -> diesel::result::Error {
        diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::Unknown,
            Box::new(message.to_owned()),
        )
    }

    /// Runs again: a transient refusal and a node not serving, for any body; a lost
    /// connection only for a body that reads (a write's outcome is unknown); an answer never.
    #[tokio::test]
    async fn what_runs_again_depends_on_the_failure_and_on_the_body() {
        let cases = [
            ("Deadlock found when trying to get lock", true, true),
            (
                "WSREP has not yet prepared node for application use",
                true,
                true,
            ),
            ("Server shutdown in progress", true, false),
            ("Duplicate entry 'x' for key 'uuid'", false, false),
        ];
        for (message, reads, writes) in cases {
            for (body, expected) in [(Body::Reads, reads), (Body::Writes, writes)] {
                let result: Result<(), _> = Err(db_error(message));
                let mut attempt = 0;
                let again = retry_after(&result, &mut attempt, None, body).await;
                assert_eq!(again, expected, "{message} in a body that {body:?}");
                assert_eq!(attempt, u32::from(expected), "{message}");
            }
        }
    }

    /// An attempt that hears nothing within the limit is a lost connection (a read runs again
    /// on another; a write's outcome is unknown); one that ends in time keeps its outcome.
    #[tokio::test]
    async fn an_attempt_without_an_answer_is_a_lost_connection() {
        let limit = Duration::from_millis(20);
        let silent = within_statement_timeout(limit, std::future::pending::<Result<(), _>>());
        let err = silent.await.unwrap_err();
        assert_eq!(classify(&err), Failure::ConnectionLost, "{err}");
        assert!(err.to_string().contains("20ms"), "{err}");
        let answered = within_statement_timeout(limit, async { Ok::<_, diesel::result::Error>(7) });
        assert_eq!(answered.await.unwrap(), 7);
        let refused = within_statement_timeout(limit, async {
            Err::<(), _>(db_error("Duplicate entry 'x' for key 'uuid'"))
        });
        assert_eq!(classify(&refused.await.unwrap_err()), Failure::Answered);
    }

    #[test]
    fn failures_are_told_apart_by_what_the_server_said() {
        let lost = [
            "Input/output error: Connection reset by peer (os error 104)",
            "Driver error: `Connection to the server is closed.'",
            "Server shutdown in progress",
            "Connection was killed",
        ];
        let transient = [
            "Deadlock found when trying to get lock; try restarting transaction",
            "Lock wait timeout exceeded; try restarting transaction",
            "database is locked",
        ];
        for message in [
            "WSREP has not yet prepared node for application use",
            "Error while appending streaming replication fragment(provider status: Not connected to Primary Component)",
        ] {
            assert_eq!(
                classify(&db_error(message)),
                Failure::NotServing,
                "{message}"
            );
        }
        for (messages, failure) in [
            (&lost[..], Failure::ConnectionLost),
            (&transient[..], Failure::Transient),
        ] {
            for message in messages {
                assert_eq!(classify(&db_error(message)), failure, "{message}");
            }
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
}
