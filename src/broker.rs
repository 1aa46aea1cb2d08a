//! The message broker's address and the connection to it. A transport URL names one broker
//! (`amqp://user:pass@host:5672/%2f`) or several, the nodes of a RabbitMQ cluster, as
//! oslo.messaging writes them: `amqp://u:p@h1:5672,u:p@h2:5672/vhost?heartbeat=2` (each host
//! with its own credentials, lapin's `guest`/`guest` where it gives none; one vhost and one
//! query for all). `rabbit://`, oslo.messaging's scheme, is read as `amqp://`, so Ironic's
//! transport URL works as it is.
//!
//! [`Brokers::connect`] tries the brokers in turn, starting after the one it connected to last
//! (round robin, as oslo.messaging's default failover strategy): a connection is made again
//! when it was lost, and its broker is then the likeliest to be gone.

use std::{
    fmt,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use lapin::{Connection, ConnectionProperties, uri::AMQPUri};

/// The query parameters a transport URL may carry (lapin's). Any other is refused rather than
/// ignored: `?ssl=1` read as nothing would connect in the clear to a broker the operator
/// believes encrypted (TLS is the `amqps://` scheme).
const QUERY_PARAMETERS: &[&str] = &[
    "heartbeat",
    "frame_max",
    "channel_max",
    "connection_timeout",
    "auth_mechanism",
];

fn check_query(tail: &str) -> Result<(), String> {
    let Some((_, query)) = tail.split_once('?') else {
        return Ok(());
    };
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let key = pair.split_once('=').map_or(pair, |(key, _)| key);
        if !QUERY_PARAMETERS.contains(&key) {
            let hint = if key.eq_ignore_ascii_case("ssl") {
                "; for TLS use amqps://"
            } else {
                ""
            };
            return Err(format!(
                "unknown query parameter `{key}` (known: {}){hint}",
                QUERY_PARAMETERS.join(", ")
            ));
        }
    }
    Ok(())
}

/// The brokers of one transport URL, in its order.
pub struct Brokers {
    uris: Vec<AMQPUri>,
    /// The index where the next [`connect`](Self::connect) starts.
    next: AtomicUsize,
}

impl Brokers {
    /// Reads a transport URL; the error names what is wrong, never the credentials.
    pub fn parse(url: &str) -> Result<Brokers, String> {
        let (scheme, _) = url
            .split_once("://")
            .ok_or("expected amqp://host, amqps://host or rabbit://host")?;
        let scheme = match scheme {
            "amqp" | "rabbit" => "amqp",
            "amqps" => "amqps",
            other => return Err(format!("unknown scheme {other}://; expected amqp://")),
        };
        let list = crate::host_list::split(url)?;
        check_query(list.tail)?;
        let uris = list
            .hosts
            .iter()
            .enumerate()
            .map(|(i, &(userinfo, host))| {
                let userinfo = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
                let mut uri = format!("{scheme}://{userinfo}{host}{}", list.tail)
                    .parse::<AMQPUri>()
                    .map_err(|e| format!("host {} ({host}): {e}", i + 1))?;
                // The parser takes an IPv6 literal for no host at all (`localhost`).
                if let Some(literal) = host
                    .strip_prefix('[')
                    .and_then(|rest| rest.split_once(']'))
                    .map(|(address, _)| address)
                {
                    uri.authority.host = literal.to_owned();
                }
                // `amqp://host/` names the vhost "", which RabbitMQ refuses; oslo.messaging
                // (kombu) reads it as the default vhost, `/`, and so does Ferrum.
                if uri.vhost.is_empty() {
                    uri.vhost = "/".to_owned();
                }
                Ok(uri)
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Brokers {
            uris,
            next: AtomicUsize::new(0),
        })
    }

    /// `host:port` of each broker, in the URL's order: for logs, without credentials.
    pub fn hosts(&self) -> Vec<String> {
        self.uris.iter().map(host_port).collect()
    }

    /// Connects to the first broker that accepts, each tried once within `timeout`, starting
    /// after the one connected to last; `tune` sets this side's wishes (frame size,
    /// heartbeat) where the URL's query leaves them open. Returns the connection and its
    /// broker's `host:port`; the error lists each broker's failure.
    pub async fn connect(
        &self,
        properties: &ConnectionProperties,
        timeout: Duration,
        tune: impl Fn(&mut AMQPUri),
    ) -> Result<(Connection, String), String> {
        let start = self.next.load(Ordering::Relaxed);
        let mut failures = Vec::new();
        for i in (0..self.uris.len()).map(|k| (start + k) % self.uris.len()) {
            let mut uri = self.uris[i].clone();
            tune(&mut uri);
            let host = host_port(&uri);
            match tokio::time::timeout(timeout, Connection::connect_uri(uri, properties.clone()))
                .await
            {
                Ok(Ok(connection)) => {
                    self.next
                        .store((i + 1) % self.uris.len(), Ordering::Relaxed);
                    return Ok((connection, host));
                }
                Ok(Err(err)) => failures.push(format!("{host}: {err}")),
                Err(_) => failures.push(format!("{host}: connecting timed out after {timeout:?}")),
            }
        }
        Err(failures.join("; "))
    }
}

impl fmt::Debug for Brokers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Brokers")
            .field("hosts", &self.hosts())
            .finish_non_exhaustive()
    }
}

fn host_port(uri: &AMQPUri) -> String {
    let host = &uri.authority.host;
    if host.contains(':') {
        format!("[{host}]:{}", uri.authority.port)
    } else {
        format!("{host}:{}", uri.authority.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_broker() {
        let brokers = Brokers::parse("amqp://guest:guest@127.0.0.1:5672/%2f").unwrap();
        assert_eq!(brokers.hosts(), ["127.0.0.1:5672"]);
        assert_eq!(brokers.uris[0].vhost, "/");
        assert_eq!(brokers.uris[0].authority.userinfo.username, "guest");
    }

    #[test]
    fn several_brokers_as_oslo_messaging_writes_them() {
        let brokers =
            Brokers::parse("rabbit://ironic:s3cret@h1:5673,other:pw@h2,h3:5674/ironic?heartbeat=7")
                .unwrap();
        assert_eq!(brokers.hosts(), ["h1:5673", "h2:5672", "h3:5674"]);
        let users: Vec<_> = brokers
            .uris
            .iter()
            .map(|u| (u.authority.userinfo.username.as_str(), u.vhost.as_str()))
            .collect();
        // The third host gives no credentials: AMQP's default, as oslo.messaging.
        assert_eq!(
            users,
            [
                ("ironic", "ironic"),
                ("other", "ironic"),
                ("guest", "ironic")
            ]
        );
        assert!(brokers.uris.iter().all(|u| u.query.heartbeat == Some(7)));
        let tuned = Brokers::parse("amqp://h1/?heartbeat=3&connection_timeout=900").unwrap();
        assert_eq!(tuned.uris[0].query.connection_timeout, Some(900));
        assert_eq!(brokers.uris[0].authority.userinfo.password, "s3cret");
    }

    #[test]
    fn an_empty_vhost_is_the_default_one_and_ipv6_literals_are_hosts() {
        let brokers = Brokers::parse("rabbit://u:p@[fd00::1]:5673,h2/").unwrap();
        assert_eq!(brokers.hosts(), ["[fd00::1]:5673", "h2:5672"]);
        assert_eq!(brokers.uris[0].authority.host, "fd00::1");
        assert!(brokers.uris.iter().all(|u| u.vhost == "/"));
        let brokers = Brokers::parse("amqp://h1").unwrap();
        assert_eq!(brokers.uris[0].vhost, "/");
    }

    #[test]
    fn bad_urls_are_refused_without_their_credentials() {
        for (url, expected) in [
            ("amqp://a:secret@h1,,h2/", "host 2 of the URL is not a host"),
            ("amqp://a:sec,ret@h1/", "must be percent-encoded"),
            ("http://h1/", "unknown scheme http://"),
            ("h1:5672", "expected amqp://"),
            (
                "amqp://u:secret@h1:notaport/",
                "host 1 of the URL is not a host",
            ),
            ("amqp://u:secret@h1/?ssl=1", "unknown query parameter `ssl`"),
            (
                "amqp://u:secret@h1/?heartbeat=5&frame_maxx=1",
                "`frame_maxx`",
            ),
        ] {
            let err = Brokers::parse(url).unwrap_err();
            assert!(err.contains(expected), "{url}: {err}");
            assert!(
                !err.contains("secret") && !err.contains("ret@"),
                "{url}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn connecting_tries_each_broker_and_names_each_failure() {
        // Two ports nobody listens on (bound, then closed).
        let ports: Vec<u16> = (0..2)
            .map(|_| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            })
            .collect();
        let url = format!("amqp://127.0.0.1:{},127.0.0.1:{}/", ports[0], ports[1]);
        let brokers = Brokers::parse(&url).unwrap();
        let err = brokers
            .connect(
                &ConnectionProperties::default(),
                Duration::from_secs(5),
                |_| {},
            )
            .await
            .unwrap_err();
        for port in ports {
            assert!(err.contains(&format!("127.0.0.1:{port}: ")), "{err}");
        }
    }
}
