//! The kinds of value a setting holds, each read from the TOML file and from the text of a flag
//! or `FERRUM_*` variable, and shown (in TOML syntax) as a default in `--help` and the docs.
//!
//! Must not: know any one setting; those are in `settings.rs`.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use super::{AuthStrategy, DhcpProvider, ImageDownloadSource, TlsVersion, WithoutBroker};
use crate::notifications::Level;

/// A setting's type.
pub(super) trait Value: Sized {
    /// From a flag or environment variable.
    fn parse(text: &str) -> Result<Self, String>;
    /// From the TOML file.
    fn from_toml(value: &toml::Value) -> Result<Self, String>;
    /// In TOML syntax, as the docs show a default; None when unset.
    fn show(&self) -> Option<String>;
}

/// What a TOML value is, for "expected a string, found an integer".
fn found(value: &toml::Value) -> String {
    format!("found {} {value}", value.type_str())
}

fn toml_str(value: &toml::Value) -> Result<&str, String> {
    value
        .as_str()
        .ok_or_else(|| format!("expected a string, {}", found(value)))
}

impl Value for String {
    fn parse(text: &str) -> Result<Self, String> {
        Ok(text.to_owned())
    }
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        toml_str(value).map(str::to_owned)
    }
    fn show(&self) -> Option<String> {
        Some(toml::Value::from(self.as_str()).to_string())
    }
}

impl Value for PathBuf {
    fn parse(text: &str) -> Result<Self, String> {
        Ok(PathBuf::from(text))
    }
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        toml_str(value).map(PathBuf::from)
    }
    fn show(&self) -> Option<String> {
        self.to_string_lossy().into_owned().show()
    }
}

/// `true` or `false`; a flag or variable may also say `yes`/`no`, `on`/`off`, `1`/`0`.
impl Value for bool {
    fn parse(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Ok(true),
            "false" | "no" | "off" | "0" => Ok(false),
            _ => Err(format!("expected true or false, not {text:?}")),
        }
    }
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        value
            .as_bool()
            .ok_or_else(|| format!("expected true or false, {}", found(value)))
    }
    fn show(&self) -> Option<String> {
        Some(self.to_string())
    }
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn parse(text: &str) -> Result<Self, String> {
                text.trim()
                    .parse()
                    .map_err(|_| format!("'{text}' is not a whole number from 0 to {}", <$t>::MAX))
            }
            fn from_toml(value: &toml::Value) -> Result<Self, String> {
                value
                    .as_integer()
                    .and_then(|i| <$t>::try_from(i).ok())
                    .ok_or_else(|| format!("expected a whole number from 0 to {}, {}", <$t>::MAX, found(value)))
            }
            fn show(&self) -> Option<String> {
                Some(self.to_string())
            }
        }
    )*};
}
unsigned!(u32, usize);

/// Seconds, fractions allowed ("0.5").
impl Value for Duration {
    fn parse(text: &str) -> Result<Self, String> {
        parse_seconds(text)
    }
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        let seconds = match value {
            toml::Value::Integer(i) => *i as f64,
            toml::Value::Float(f) => *f,
            other => return Err(format!("expected a number of seconds, {}", found(other))),
        };
        Duration::try_from_secs_f64(seconds).map_err(|e| e.to_string())
    }
    fn show(&self) -> Option<String> {
        Some(self.as_secs_f64().to_string())
    }
}

/// `host:port` ([`parse_bind`]).
impl Value for SocketAddr {
    fn parse(text: &str) -> Result<Self, String> {
        parse_bind(text)
    }
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        parse_bind(toml_str(value)?)
    }
    fn show(&self) -> Option<String> {
        self.to_string().show()
    }
}

/// A list: comma-separated in a flag or variable (each name trimmed), an array in the file.
impl Value for Vec<String> {
    fn parse(text: &str) -> Result<Self, String> {
        Ok(text.split(',').map(|s| s.trim().to_owned()).collect())
    }
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        let array = value
            .as_array()
            .ok_or_else(|| format!("expected an array of strings, {}", found(value)))?;
        array.iter().map(String::from_toml).collect()
    }
    fn show(&self) -> Option<String> {
        Some(toml::Value::from(self.clone()).to_string())
    }
}

/// Unset unless given: a setting with no default.
impl<T: Value> Value for Option<T> {
    fn parse(text: &str) -> Result<Self, String> {
        T::parse(text).map(Some)
    }
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        T::from_toml(value).map(Some)
    }
    fn show(&self) -> Option<String> {
        self.as_ref().and_then(T::show)
    }
}

/// A value out of a few names: the same in the file, a flag or a variable.
macro_rules! named {
    ($t:ty: $($name:literal => $v:expr),*) => {
        impl Value for $t {
            fn parse(text: &str) -> Result<Self, String> {
                match text {
                    $($name => Ok($v),)*
                    _ => Err(format!(
                        "expected {}, not {text:?}",
                        [$($name),*].join(" or ")
                    )),
                }
            }
            fn from_toml(value: &toml::Value) -> Result<Self, String> {
                <Self as Value>::parse(toml_str(value)?)
            }
            fn show(&self) -> Option<String> {
                let name = match self {
                    $(v if *v == $v => $name,)*
                    _ => unreachable!("every value is named"),
                };
                name.to_owned().show()
            }
        }
    };
}
named!(AuthStrategy: "noauth" => AuthStrategy::Noauth, "http_basic" => AuthStrategy::HttpBasic, "keystone" => AuthStrategy::Keystone);
named!(TlsVersion: "1.2" => TlsVersion::V1_2, "1.3" => TlsVersion::V1_3);
named!(ImageDownloadSource: "http" => ImageDownloadSource::Http, "local" => ImageDownloadSource::Local);
named!(DhcpProvider: "none" => DhcpProvider::None, "dnsmasq" => DhcpProvider::Dnsmasq);
named!(WithoutBroker: "log" => WithoutBroker::Log, "off" => WithoutBroker::Off);

impl Value for Level {
    fn parse(text: &str) -> Result<Self, String> {
        text.parse()
    }
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        toml_str(value)?.parse()
    }
    fn show(&self) -> Option<String> {
        self.name().to_owned().show()
    }
}

/// A listening address, `host:port`: an IP address, or a host name (`localhost`) resolved now.
/// A name with both IPv4 and IPv6 addresses binds its first IPv4 one, which is what clients of
/// `localhost` try first on most systems.
pub fn parse_bind(s: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if s.rsplit_once(':').is_none_or(|(host, _)| host.is_empty()) {
        return Err(format!("'{s}' is not host:port"));
    }
    let addrs: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(s)
        .map_err(|e| format!("cannot resolve '{s}': {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("'{s}' resolves to no address"))
}

/// A non-negative number of seconds, fractions allowed ("0.5").
pub fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    Duration::try_from_secs_f64(v).map_err(|_| format!("'{s}' is not a non-negative duration"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_and_show() {
        assert_eq!(parse_seconds("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("soon").is_err());
        assert_eq!(Duration::from_millis(500).show().unwrap(), "0.5");
        assert_eq!(Duration::from_secs(60).show().unwrap(), "60");
        assert_eq!(
            Duration::from_toml(&toml::Value::Integer(2)).unwrap(),
            Duration::from_secs(2)
        );
        assert!(u32::from_toml(&toml::Value::Integer(-1)).is_err());
        assert_eq!(
            Vec::<String>::parse("a, b").unwrap(),
            vec!["a".to_owned(), "b".to_owned()]
        );
        assert_eq!(TlsVersion::V1_2.show().unwrap(), "\"1.2\"");
        let err = AuthStrategy::parse("kerberos").unwrap_err();
        assert!(
            err.contains("noauth") && err.contains("http_basic") && err.contains("keystone"),
            "{err}"
        );
        assert_eq!(Option::<String>::None.show(), None);
    }

    #[test]
    fn bind_accepts_host_names() {
        let addr = parse_bind("localhost:6385").unwrap();
        assert!(addr.ip().is_loopback(), "{addr}");
        assert_eq!(addr.port(), 6385);
        assert_eq!(
            parse_bind("[::1]:7000").unwrap(),
            "[::1]:7000".parse().unwrap()
        );
        assert!(parse_bind("6385").is_err());
        assert!(parse_bind(":6385").is_err());
    }
}
