//! A `redfish` node's `driver_info`: the properties both interfaces read, read as Ironic's
//! `redfish_utils.parse_driver_info` reads them (with its messages), and the check of the
//! `redfish-virtual-media` boot interface.

use serde_json::Value;

use crate::{
    drivers::{DriverError, Properties},
    node::Node,
};

/// The `driver_info` properties both interfaces read (in Ferrum's words).
pub(super) const PROPERTIES: Properties = &[
    (
        "redfish_address",
        "The BMC's Redfish URL: scheme (http or https; https when left out) and authority, and optionally the path of the service root (default /redfish/v1/). Required.",
    ),
    (
        "redfish_system_id",
        "The path of the ComputerSystem to manage, e.g. /redfish/v1/Systems/1; needed only when the BMC manages more than one system. Optional.",
    ),
    (
        "redfish_username",
        "The BMC user (HTTP basic authentication). Optional.",
    ),
    ("redfish_password", "The BMC user's password. Optional."),
    (
        "redfish_verify_ca",
        "true (verify the BMC's certificate against the system's CAs, the default), false (do not verify), or the path of a CA bundle file or a directory of CA certificates. Optional.",
    ),
    (
        "redfish_auth_type",
        "How to authenticate: \"basic\", \"session\" or \"auto\" (the default; basic authentication in Ferrum). Optional.",
    ),
];

/// Whether to verify the BMC's TLS certificate (`redfish_verify_ca`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VerifyCa {
    Bool(bool),
    /// A CA bundle file or a directory of certificates.
    Path(String),
}

/// `redfish_auth_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthType {
    Basic,
    Session,
    Auto,
}

/// A node's Redfish settings, read from its `driver_info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedfishInfo {
    /// `scheme://authority`, no path.
    pub address: String,
    /// The service root's path, ending in `/`.
    pub root_prefix: String,
    pub system_id: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub verify_ca: VerifyCa,
    pub auth_type: AuthType,
}

/// Reads `driver_info` as Ironic's `parse_driver_info`, with its messages.
pub fn parse_driver_info(node: &Node) -> Result<RedfishInfo, DriverError> {
    let info = &node.driver_info;
    let uuid = &node.uuid;
    let address = match info.get("redfish_address") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(v) => Some(v),
    };
    let Some(address) = address else {
        return Err(DriverError::MissingParameterValue(format!(
            "Missing the following Redfish properties in node {uuid} driver_info: ['redfish_address']"
        )));
    };
    let invalid_address = |shown: &str| {
        DriverError::InvalidParameterValue(format!(
            "Invalid Redfish address {shown} set in driver_info/redfish_address on node {uuid}"
        ))
    };
    let Value::String(address) = address else {
        return Err(invalid_address(&address.to_string()));
    };
    let (address, root_prefix) = parse_address(address).ok_or_else(|| invalid_address(address))?;

    let system_id = match info.get("redfish_system_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(DriverError::InvalidParameterValue(format!(
                "Invalid value \"{other}\" set in driver_info/redfish_system_id on node {uuid}. The value should be a path (string) to the resource that the driver will interact with. For example: /redfish/v1/Systems/1"
            )));
        }
    };

    let bad_verify = |v: &dyn std::fmt::Display| {
        DriverError::InvalidParameterValue(format!(
            "Invalid value type set in driver_info/redfish_verify_ca on node {uuid}. The value should be a Boolean or the path to a file/directory, not \"{v}\""
        ))
    };
    let verify_ca = match info.get("redfish_verify_ca") {
        None | Some(Value::Null) => VerifyCa::Bool(true),
        Some(Value::Bool(b)) => VerifyCa::Bool(*b),
        Some(Value::String(s)) => {
            let path = std::path::Path::new(s);
            if path.is_dir() || path.is_file() {
                VerifyCa::Path(s.clone())
            } else {
                VerifyCa::Bool(strict_bool(s).ok_or_else(|| bad_verify(s))?)
            }
        }
        Some(other) => return Err(bad_verify(other)),
    };

    let auth_type = match info.get("redfish_auth_type") {
        None | Some(Value::Null) => AuthType::Auto,
        Some(Value::String(s)) if s == "basic" => AuthType::Basic,
        Some(Value::String(s)) if s == "session" => AuthType::Session,
        Some(Value::String(s)) if s == "auto" => AuthType::Auto,
        Some(other) => {
            let shown = other
                .as_str()
                .map_or_else(|| other.to_string(), str::to_owned);
            return Err(DriverError::InvalidParameterValue(format!(
                "Invalid value \"{shown}\" set in driver_info/redfish_auth_type on node {uuid}. The value should be one of \"basic\", \"session\" or \"auto\"."
            )));
        }
    };
    let text = |key: &str| match info.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    };
    Ok(RedfishInfo {
        address,
        root_prefix,
        system_id,
        username: text("redfish_username").filter(|u| !u.is_empty()),
        password: text("redfish_password"),
        verify_ca,
        auth_type,
    })
}

/// `scheme://authority` and the root path of a `redfish_address`: https when it names no
/// scheme (Ironic's rule), a bare IPv6 address bracketed; only http and https are spoken.
fn parse_address(address: &str) -> Option<(String, String)> {
    let address = address.trim();
    let text = if address.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("https://[{address}]")
    } else if address.contains("://") {
        address.to_owned()
    } else {
        format!("https://{address}")
    };
    let url = reqwest::Url::parse(&text).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return None;
    }
    if url.query().is_some() || url.fragment().is_some() {
        return None;
    }
    let host = url.host_str()?;
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let path = url.path();
    let root = if path.is_empty() || path == "/" {
        "/redfish/v1/".to_owned()
    } else if path.ends_with('/') {
        path.to_owned()
    } else {
        format!("{path}/")
    };
    Some((format!("{}://{authority}", url.scheme()), root))
}

/// oslo's strict `bool_from_string`.
fn strict_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "t" | "true" | "on" | "y" | "yes" => Some(true),
        "0" | "f" | "false" | "off" | "n" | "no" => Some(false),
        _ => None,
    }
}

/// `redfish-virtual-media`'s check of `driver_info` (Ironic's `_parse_driver_info` of the
/// boot interface): a deploy ISO, or a deploy kernel and ramdisk, and the BMC's settings.
pub fn validate_virtual_media_boot(node: &Node) -> Result<(), DriverError> {
    let info = &node.driver_info;
    let has = |k: &str| {
        info.get(k)
            .is_some_and(|v| !v.is_null() && v.as_str() != Some(""))
    };
    if !has("deploy_iso") {
        let missing: Vec<&str> = ["deploy_kernel", "deploy_ramdisk"]
            .into_iter()
            .filter(|k| !has(k))
            .collect();
        if !missing.is_empty() {
            return Err(DriverError::MissingParameterValue(format!(
                "Error validating Redfish virtual media. Some parameters were missing in node's driver_info. Missing are: [{}]",
                missing
                    .iter()
                    .map(|k| format!("'{k}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    parse_driver_info(node).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(info: Value) -> Node {
        let mut node = crate::node::tests_support::node();
        node.driver = "redfish".into();
        node.driver_info = crate::node::Json(info.as_object().cloned().unwrap_or_default());
        node
    }

    #[test]
    fn addresses_are_read_as_ironic_reads_them() {
        let info =
            parse_driver_info(&node(json!({"redfish_address": "bmc.example:8443"}))).unwrap();
        assert_eq!(info.address, "https://bmc.example:8443");
        assert_eq!(info.root_prefix, "/redfish/v1/");
        let info = parse_driver_info(&node(
            json!({"redfish_address": "http://127.0.0.1:8000/custom/v1"}),
        ))
        .unwrap();
        assert_eq!(info.address, "http://127.0.0.1:8000");
        assert_eq!(info.root_prefix, "/custom/v1/");
        let info = parse_driver_info(&node(json!({"redfish_address": "fd00::1"}))).unwrap();
        assert_eq!(info.address, "https://[fd00::1]");
        assert_eq!(info.auth_type, AuthType::Auto);
        assert_eq!(info.verify_ca, VerifyCa::Bool(true));

        let e = parse_driver_info(&node(json!({}))).unwrap_err();
        assert!(matches!(e, DriverError::MissingParameterValue(_)), "{e}");
        assert!(e.to_string().contains("['redfish_address']"), "{e}");
        for bad in ["ftp://bmc", "http://", "http://bmc/x?y=1", "https://b mc"] {
            let e = parse_driver_info(&node(json!({"redfish_address": bad}))).unwrap_err();
            assert!(
                e.to_string().starts_with("Invalid Redfish address"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn verify_ca_and_auth_type_take_ironic_values() {
        let with = |k: &str, v: Value| {
            let mut info = json!({"redfish_address": "http://bmc"});
            info[k] = v;
            parse_driver_info(&node(info))
        };
        assert_eq!(
            with("redfish_verify_ca", json!("no")).unwrap().verify_ca,
            VerifyCa::Bool(false)
        );
        assert_eq!(
            with("redfish_verify_ca", json!("/")).unwrap().verify_ca,
            VerifyCa::Path("/".into())
        );
        let e = with("redfish_verify_ca", json!("/no/such/ca")).unwrap_err();
        assert!(
            e.to_string().contains("should be a Boolean or the path"),
            "{e}"
        );
        let e = with("redfish_verify_ca", json!(3)).unwrap_err();
        assert!(e.to_string().contains("redfish_verify_ca"), "{e}");
        assert_eq!(
            with("redfish_auth_type", json!("basic")).unwrap().auth_type,
            AuthType::Basic
        );
        let e = with("redfish_auth_type", json!("digest")).unwrap_err();
        assert!(
            e.to_string()
                .contains("should be one of \"basic\", \"session\" or \"auto\""),
            "{e}"
        );
        let e = with("redfish_system_id", json!(5)).unwrap_err();
        assert!(e.to_string().contains("redfish_system_id"), "{e}");
    }

    #[test]
    fn virtual_media_boot_needs_a_deploy_image() {
        let e =
            validate_virtual_media_boot(&node(json!({"redfish_address": "http://b"}))).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("Missing are: ['deploy_kernel', 'deploy_ramdisk']"),
            "{e}"
        );
        validate_virtual_media_boot(&node(
            json!({"redfish_address": "http://b", "deploy_iso": "http://i/x.iso"}),
        ))
        .unwrap();
    }
}
