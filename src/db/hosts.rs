//! The servers of a MySQL URL. `mysql://u:p@h1:3306,h2,h3/ferrum` names the nodes of a Galera
//! cluster, credentials once (each host may also carry its own, `u:p@h1,u:p@h2`, as in a
//! transport URL). Every new connection goes to the node the last one went to and, only when
//! that one cannot be reached or is not serving (a Galera node outside the cluster's primary
//! component, or still joining, says `wsrep_ready` OFF), to the next: so all connections of a
//! process write to one node at a time, and move on together when it goes. Galera's
//! certification keeps every conditional write correct when two processes happen to write to
//! two nodes (after a node comes back, say); one writer at a time only spares them conflicts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use diesel::ConnectionError;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};

/// A host that does not answer is given up on after this long, and the next tried: a dead
/// machine's SYN would otherwise wait for the kernel's two minutes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The one-host URLs of a MySQL URL, in the order given, and the one connected to last.
#[derive(Debug)]
pub(crate) struct MysqlHosts {
    urls: Vec<String>,
    current: AtomicUsize,
}

impl MysqlHosts {
    /// The hosts of `url` (`mysql://[user[:password]@]host[:port][,...][/db][?query]`); a host
    /// without credentials takes those of the host before it.
    pub(crate) fn parse(url: &str) -> Result<MysqlHosts, String> {
        let list = crate::host_list::split(url)?;
        if list.scheme != "mysql" {
            return Err("a MySQL URL starts with mysql://".to_owned());
        }
        let mut credentials: Option<&str> = None;
        let mut urls = Vec::new();
        for (userinfo, host) in list.hosts {
            credentials = userinfo.or(credentials);
            let tail = list.tail;
            urls.push(match credentials {
                Some(userinfo) => format!("mysql://{userinfo}@{host}{tail}"),
                None => format!("mysql://{host}{tail}"),
            });
        }
        Ok(MysqlHosts {
            urls,
            current: AtomicUsize::new(0),
        })
    }

    /// A new connection, to the host connected to last or, when it cannot be had, to the next
    /// ones in turn; the error of the last host tried when none can.
    pub(crate) async fn connect(&self) -> Result<AsyncMysqlConnection, ConnectionError> {
        let first = self.current.load(Ordering::Relaxed);
        let mut last_error = None;
        for i in (0..self.urls.len()).map(|k| (first + k) % self.urls.len()) {
            match self.connect_to(&self.urls[i]).await {
                Ok(conn) => {
                    // Said once a move, by the connection that made it.
                    if i != first
                        && self
                            .current
                            .compare_exchange(first, i, Ordering::Relaxed, Ordering::Relaxed)
                            .is_ok()
                    {
                        tracing::warn!(
                            from = %super::redact_url(&self.urls[first]),
                            to = %super::redact_url(&self.urls[i]),
                            "Database connections move to another host"
                        );
                    }
                    return Ok(conn);
                }
                Err(e) => {
                    if self.urls.len() > 1 {
                        tracing::debug!(host = %super::redact_url(&self.urls[i]), error = %e, "A database host cannot be used");
                    }
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| ConnectionError::BadConnection("no hosts".into())))
    }

    async fn connect_to(&self, url: &str) -> Result<AsyncMysqlConnection, ConnectionError> {
        let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, AsyncMysqlConnection::establish(url))
            .await
            .map_err(|_| {
                ConnectionError::BadConnection(format!(
                    "no answer in {} s",
                    CONNECT_TIMEOUT.as_secs()
                ))
            })??;
        // Every statement is one autocommitted conditional write or a read: READ COMMITTED
        // takes no gap locks, so two single-row updates of neighbouring nodes cannot deadlock on
        // a secondary index's gaps.
        conn.batch_execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            .await
            .map_err(ConnectionError::CouldntSetupConfiguration)?;
        if self.urls.len() > 1 {
            self.check_serving(&mut conn).await?;
        }
        Ok(conn)
    }

    /// A Galera node must be ready (synced, in the primary component); its reads then wait for
    /// what the cluster committed before them (`wsrep_sync_wait`), so that a read on this node
    /// never misses a write another process made on another. Nothing on a server that is not
    /// a Galera node.
    async fn check_serving(&self, conn: &mut AsyncMysqlConnection) -> Result<(), ConnectionError> {
        use diesel_async::RunQueryDsl as _;

        #[derive(diesel::QueryableByName)]
        struct Setting {
            #[diesel(sql_type = diesel::sql_types::Text, column_name = Value)]
            value: String,
        }
        let mut read = async |statement: &'static str| -> Result<Option<String>, ConnectionError> {
            let rows: Vec<Setting> = diesel::sql_query(statement)
                .load(&mut *conn)
                .await
                .map_err(ConnectionError::CouldntSetupConfiguration)?;
            Ok(rows.into_iter().next().map(|row| row.value))
        };
        // MySQL has no wsrep_on; a MariaDB that is not a Galera node has it OFF.
        let galera = read("SHOW GLOBAL VARIABLES LIKE 'wsrep_on'").await?;
        if !galera.is_some_and(|on| on.eq_ignore_ascii_case("ON")) {
            return Ok(());
        }
        let ready = read("SHOW GLOBAL STATUS LIKE 'wsrep_ready'").await?;
        if !ready
            .as_deref()
            .is_some_and(|r| r.eq_ignore_ascii_case("ON"))
        {
            return Err(ConnectionError::BadConnection(format!(
                "the Galera node is not ready (wsrep_ready {})",
                ready.as_deref().unwrap_or("absent")
            )));
        }
        conn.batch_execute("SET SESSION wsrep_sync_wait = 1")
            .await
            .map_err(ConnectionError::CouldntSetupConfiguration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_share_the_credentials_given_before_them() {
        let hosts =
            MysqlHosts::parse("mysql://u:p@h1:3306,h2,v:q@[::1]:3307/ferrum?ssl=0").unwrap();
        assert_eq!(
            hosts.urls,
            [
                "mysql://u:p@h1:3306/ferrum?ssl=0",
                "mysql://u:p@h2/ferrum?ssl=0",
                "mysql://v:q@[::1]:3307/ferrum?ssl=0",
            ]
        );
        let one = MysqlHosts::parse("mysql://db/ferrum").unwrap();
        assert_eq!(one.urls, ["mysql://db/ferrum"]);
        assert!(MysqlHosts::parse("mysql://u@h1,,h2/ferrum").is_err());
        assert!(MysqlHosts::parse("mysql://u@h1,/ferrum").is_err());
        assert!(MysqlHosts::parse("sqlite://x").is_err());
    }
}
