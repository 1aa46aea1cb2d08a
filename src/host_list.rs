//! The hosts of a URL that names several servers, as oslo writes one for a cluster:
//! `scheme://[user[:password]@]host[:port][,[user[:password]@]host[:port]...][/path][?query]`
//! (database and transport URLs). A `,`, `/` or `?` inside a user name or password must be
//! percent-encoded (`%2C`, `%2F`, `%3F`), as in any URL (the MySQL and AMQP clients decode
//! it): unencoded, it would cut the list in the wrong place, so an entry whose host is not
//! `name[:port]` or `[address][:port]` is refused, and the error never shows the entry.

/// A URL cut into its scheme, its hosts and what follows them.
#[derive(Debug, PartialEq, Eq)]
pub struct HostList<'a> {
    pub scheme: &'a str,
    /// Each host (`name[:port]`, `[address][:port]`) with the credentials written before it
    /// (`user[:password]`), if any, in the URL's order.
    pub hosts: Vec<(Option<&'a str>, &'a str)>,
    /// The path and query, from the first `/` or `?` after the hosts on ("" without either).
    pub tail: &'a str,
}

/// Cuts `url` into its scheme, hosts and tail; the error says what is wrong without quoting
/// the URL, which may hold a password.
pub fn split(url: &str) -> Result<HostList<'_>, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("the URL does not start with scheme://")?;
    let (hosts, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let hosts = hosts
        .split(',')
        .enumerate()
        .map(|(i, entry)| {
            let (userinfo, host) = match entry.rsplit_once('@') {
                Some((userinfo, host)) => (Some(userinfo), host),
                None => (None, entry),
            };
            if !is_host_port(host) {
                return Err(format!(
                    "host {} of the URL is not a host name or [address] with an optional port: \
                     an empty host (two commas, or one at an end), or a `,`, `/` or `?` in a user \
                     name or password, which must be percent-encoded (%2C, %2F, %3F)",
                    i + 1
                ));
            }
            Ok((userinfo, host))
        })
        .collect::<Result<_, _>>()?;
    Ok(HostList {
        scheme,
        hosts,
        tail,
    })
}

/// Whether `entry` is `name[:port]` or `[address][:port]`, the port decimal.
fn is_host_port(entry: &str) -> bool {
    let (host, port, literal) = match entry.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((address, "")) => (address, None, true),
            Some((address, after)) => match after.strip_prefix(':') {
                Some(port) => (address, Some(port), true),
                None => return false,
            },
            None => return false,
        },
        None => match entry.rsplit_once(':') {
            Some((name, port)) => (name, Some(port), false),
            None => (entry, None, false),
        },
    };
    let host_char = |c: char| {
        c.is_ascii_alphanumeric()
            || matches!(c, '.' | '-' | '_')
            // An IPv6 address, with its zone (`%25eth0`).
            || (literal && matches!(c, ':' | '%'))
    };
    let port_ok =
        port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    !host.is_empty() && host.chars().all(host_char) && port_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_with_and_without_credentials() {
        let list = split("amqp://u:p@h1:5672,h2,v:q%2C@[::1]:5673/vhost?heartbeat=5").unwrap();
        assert_eq!(list.scheme, "amqp");
        assert_eq!(
            list.hosts,
            [
                (Some("u:p"), "h1:5672"),
                (None, "h2"),
                (Some("v:q%2C"), "[::1]:5673")
            ]
        );
        assert_eq!(list.tail, "/vhost?heartbeat=5");
        // An `@` in a password is read as one: the host is after the last.
        let list = split("mysql://u:p@ss@db").unwrap();
        assert_eq!(list.hosts, [(Some("u:p@ss"), "db")]);
    }

    /// A `,` left in a password cuts the list in its middle: refused, and the error shows no
    /// part of the password. Encoded as %2C it stays in the credentials.
    #[test]
    fn a_comma_in_a_password_must_be_encoded() {
        for url in [
            "mysql://root:sec,ret@h1,h2/ferrum",
            "amqp://guest:sec,ret@h1:5672/",
            "mysql://root:sec/ret@h1/ferrum",
            "mysql://root:sec?ret@h1/ferrum",
        ] {
            let err = split(url).unwrap_err();
            assert!(err.contains("percent-encoded"), "{url}: {err}");
            assert!(!err.contains("sec") && !err.contains("ret"), "{url}: {err}");
        }
        let list = split("mysql://root:sec%2Cret@h1,h2/ferrum").unwrap();
        assert_eq!(list.hosts, [(Some("root:sec%2Cret"), "h1"), (None, "h2")]);
    }

    #[test]
    fn empty_and_malformed_hosts_are_refused() {
        for url in [
            "mysql://",
            "mysql://h1,,h2/db",
            "mysql://h1,/db",
            "mysql://h1:port/db",
            "mysql://h1:123456/db",
            "mysql://[::1/db",
            "mysql://[::1]x/db",
            "nothing",
        ] {
            assert!(split(url).is_err(), "{url}");
        }
    }
}
