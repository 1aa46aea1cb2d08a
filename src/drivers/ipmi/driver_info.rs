//! An `ipmi` node's `driver_info`, read as Ironic's `ipmitool._parse_driver_info` reads it
//! (with its messages), and the `ipmitool` arguments that reach its BMC.

use serde_json::Value;

use crate::{
    drivers::{DriverError, Properties},
    node::Node,
};

/// The `driver_info` properties the power and management interfaces read (in Ferrum's words).
pub(super) const PROPERTIES: Properties = &[
    (
        "ipmi_address",
        "The BMC's IP address or host name. Required.",
    ),
    (
        "ipmi_username",
        "The BMC user; unset, the anonymous (NULL) user. Optional.",
    ),
    ("ipmi_password", "The BMC user's password. Optional."),
    (
        "ipmi_port",
        "The BMC's UDP port for IPMI over LAN (RMCP); default 623. Optional.",
    ),
    (
        "ipmi_priv_level",
        "The privilege level of the session: ADMINISTRATOR (the default), CALLBACK, OPERATOR or USER. Optional.",
    ),
    (
        "ipmi_protocol_version",
        "The IPMI version spoken: \"2.0\" (RMCP+, the default) or \"1.5\". Optional.",
    ),
    (
        "ipmi_cipher_suite",
        "The number of the RMCP+ cipher suite: 3 (AES-128 with SHA1) or 17 (AES-128 with SHA256, preferred); unset, ipmitool's own choice. Optional.",
    ),
    (
        "ipmi_hex_kg_key",
        "The IPMI 2.0 Kg key, in hexadecimal. Optional.",
    ),
    (
        "ipmi_bridging",
        "Bridging of requests to another controller: \"no\" (the default), \"single\" or \"dual\". Optional.",
    ),
    (
        "ipmi_local_address",
        "The local IPMB address of bridged requests; only with ipmi_bridging. Optional.",
    ),
    (
        "ipmi_transit_channel",
        "The transit channel of a bridged request; required when ipmi_bridging is \"dual\".",
    ),
    (
        "ipmi_transit_address",
        "The transit address of a bridged request; required when ipmi_bridging is \"dual\".",
    ),
    (
        "ipmi_target_channel",
        "The destination channel of a bridged request; required when ipmi_bridging is \"single\" or \"dual\".",
    ),
    (
        "ipmi_target_address",
        "The destination address of a bridged request; required when ipmi_bridging is \"single\" or \"dual\".",
    ),
    (
        "ipmi_force_boot_device",
        "Whether to set the boot device again before every power on, for BMCs that forget it across power cycles; default false. Optional.",
    ),
    (
        "ipmi_disable_boot_timeout",
        "Whether to send the raw command that stops the BMC from dropping a boot device setting after 60 s; unset, the conductor's ipmi_disable_boot_timeout setting. Optional.",
    ),
    (
        "ipmi_terminal_port",
        "The TCP port the node's serial console is offered on; only needed for a console. Optional.",
    ),
];

/// The privilege levels a session may ask for (Ironic's `VALID_PRIV_LEVELS`).
const PRIV_LEVELS: [&str; 4] = ["ADMINISTRATOR", "CALLBACK", "OPERATOR", "USER"];

/// `ipmi_protocol_version`: which `ipmitool` interface speaks to the BMC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// IPMI 2.0, RMCP+: `-I lanplus`.
    V2_0,
    /// IPMI 1.5: `-I lan`.
    V1_5,
}

/// A node's IPMI settings, read from its `driver_info` (its Debug hides the password).
#[derive(Clone, PartialEq, Eq)]
pub struct IpmiInfo {
    pub address: String,
    /// `ipmi_port`, the BMC's UDP port.
    pub port: Option<u16>,
    pub username: Option<String>,
    /// Empty when unset: ipmitool is then given an empty password.
    pub password: String,
    pub priv_level: String,
    pub protocol: Protocol,
    pub cipher_suite: Option<String>,
    pub hex_kg_key: Option<String>,
    /// The bridging options, as `ipmitool` flags and values (`-m`, `-B`, `-T`, `-b`, `-t`).
    pub bridging: Vec<(&'static str, String)>,
    pub force_boot_device: bool,
    /// `ipmi_disable_boot_timeout`, when the node says.
    pub disable_boot_timeout: Option<bool>,
    /// `ipmi_terminal_port`, for a console.
    pub terminal_port: Option<u16>,
}

impl std::fmt::Debug for IpmiInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpmiInfo")
            .field("address", &self.address)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &"******")
            .field("priv_level", &self.priv_level)
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

impl IpmiInfo {
    /// One name per BMC, whoever writes it how: commands to it are serialised on this.
    pub fn bmc(&self) -> String {
        format!(
            "ipmi://{}:{}",
            self.address.to_ascii_lowercase(),
            self.port.unwrap_or(623)
        )
    }

    /// `ipmitool`'s arguments that reach the BMC: Ironic's `_get_ipmitool_args`, but the
    /// password read from the environment (`-E`: set [`PASSWORD_VARIABLE`](super::ipmitool::PASSWORD_VARIABLE) to
    /// [`password`](Self::password)) rather than from a file written for each command.
    pub fn ipmitool_args(&self) -> Vec<String> {
        let interface = match self.protocol {
            Protocol::V2_0 => "lanplus",
            Protocol::V1_5 => "lan",
        };
        let mut args: Vec<String> = [
            "-I",
            interface,
            "-H",
            self.address.as_str(),
            "-L",
            self.priv_level.as_str(),
        ]
        .map(str::to_owned)
        .to_vec();
        let optional = [
            ("-p", self.port.map(|p| p.to_string())),
            ("-U", self.username.clone()),
            ("-y", self.hex_kg_key.clone()),
            ("-C", self.cipher_suite.clone()),
        ];
        for (flag, value) in optional {
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                args.extend([flag.to_owned(), value]);
            }
        }
        for (flag, value) in &self.bridging {
            args.extend([(*flag).to_owned(), value.clone()]);
        }
        args.push("-E".to_owned());
        args
    }
}

/// A value as Python's `str()` shows it: a string as it is, anything else as JSON.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Python's truth of a value Ironic reads with `info.get(key)`: unset, null and empty are false.
fn given<'a>(info: &'a crate::node::JsonObject, key: &str) -> Option<&'a Value> {
    info.get(key).filter(|v| match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Bool(b) => *b,
        _ => true,
    })
}

/// oslo's lenient `bool_from_string`: what is not a true word is false.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() == Some(1.0),
        Value::String(s) => matches!(
            s.trim().to_ascii_lowercase().as_str(),
            "1" | "t" | "true" | "on" | "y" | "yes"
        ),
        _ => false,
    }
}

/// oslo's `is_valid_port` as Ironic's `validate_network_port` uses it, with its message.
fn port(value: &Value, name: &str) -> Result<u16, DriverError> {
    let shown = text(value);
    let parsed = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    parsed.and_then(|p| u16::try_from(p).ok()).ok_or_else(|| {
        DriverError::InvalidParameterValue(format!("{name} \"{shown}\" is not a valid port."))
    })
}

/// Reads `driver_info` as Ironic's `_parse_driver_info`, with its messages.
pub fn parse_driver_info(node: &Node) -> Result<IpmiInfo, DriverError> {
    let info = &node.driver_info;
    let Some(address) = given(info, "ipmi_address") else {
        return Err(DriverError::MissingParameterValue(
            "Missing the following IPMI credentials in node's driver_info: ['ipmi_address']."
                .to_owned(),
        ));
    };
    let address = text(address);
    let optional = |key: &str| info.get(key).filter(|v| !v.is_null());

    let protocol = match optional("ipmi_protocol_version").map(text).as_deref() {
        None | Some("2.0") => Protocol::V2_0,
        Some("1.5") => Protocol::V1_5,
        Some(other) => {
            return Err(DriverError::InvalidParameterValue(format!(
                "Invalid IPMI protocol version value {other}, the valid value can be one of 2.0, 1.5"
            )));
        }
    };
    let terminal_port = match given(info, "ipmi_terminal_port") {
        Some(v) => Some(port(v, "ipmi_terminal_port")?),
        None => None,
    };
    let dest_port = match optional("ipmi_port") {
        Some(v) => Some(port(v, "ipmi_port")?),
        None => None,
    };
    let bridging = bridging(info)?;
    let priv_level = optional("ipmi_priv_level").map_or_else(|| "ADMINISTRATOR".to_owned(), text);
    if !PRIV_LEVELS.contains(&priv_level.as_str()) {
        return Err(DriverError::InvalidParameterValue(format!(
            "Invalid privilege level value:{priv_level}, the valid value can be one of {}",
            PRIV_LEVELS.join(", ")
        )));
    }
    let hex_kg_key = given(info, "ipmi_hex_kg_key").map(text);
    if hex_kg_key.as_ref().is_some_and(|k| k.len() % 2 != 0) {
        return Err(DriverError::InvalidParameterValue(
            "Number of ipmi_hex_kg_key characters is not even".to_owned(),
        ));
    }
    let cipher_suite = optional("ipmi_cipher_suite").map(text);
    if let Some(suite) = &cipher_suite {
        if suite.trim().parse::<i64>().is_err() {
            return Err(DriverError::InvalidParameterValue(format!(
                "Invalid cipher suite {suite}, expected a number"
            )));
        }
        if protocol == Protocol::V1_5 {
            return Err(DriverError::InvalidParameterValue(
                "Cipher suites cannot be used with IPMI 1.5".to_owned(),
            ));
        }
    }
    let username = given(info, "ipmi_username").map(text);
    if username.is_none() {
        tracing::warn!(node.uuid = %node.uuid,
            "ipmi_username is not defined or empty for node {}: NULL user will be utilized.", node.uuid);
    }
    let password = optional("ipmi_password").map(text).unwrap_or_default();
    Ok(IpmiInfo {
        address,
        port: dest_port,
        username,
        password,
        priv_level,
        protocol,
        cipher_suite: cipher_suite.map(|s| s.trim().to_owned()),
        hex_kg_key,
        bridging,
        force_boot_device: optional("ipmi_force_boot_device").is_some_and(truthy),
        disable_boot_timeout: optional("ipmi_disable_boot_timeout").map(truthy),
        terminal_port,
    })
}

/// `ipmi_bridging` and the addresses it needs, as `ipmitool` flags (Ironic's
/// `BRIDGING_OPTIONS`); none when bridging is `no`.
fn bridging(info: &crate::node::JsonObject) -> Result<Vec<(&'static str, String)>, DriverError> {
    let kind = info
        .get("ipmi_bridging")
        .filter(|v| !v.is_null())
        .map_or_else(|| "no".to_owned(), text);
    let value = |key: &str| info.get(key).filter(|v| !v.is_null()).map(text);
    let (needed, flags): (&[&str], &[(&str, &'static str)]) = match kind.as_str() {
        "no" => return Ok(Vec::new()),
        "single" => (
            &["ipmi_target_channel", "ipmi_target_address"],
            &[
                ("ipmi_local_address", "-m"),
                ("ipmi_target_channel", "-b"),
                ("ipmi_target_address", "-t"),
            ],
        ),
        "dual" => (
            &[
                "ipmi_target_channel",
                "ipmi_target_address",
                "ipmi_transit_channel",
                "ipmi_transit_address",
            ],
            &[
                ("ipmi_local_address", "-m"),
                ("ipmi_transit_channel", "-B"),
                ("ipmi_transit_address", "-T"),
                ("ipmi_target_channel", "-b"),
                ("ipmi_target_address", "-t"),
            ],
        ),
        other => {
            return Err(DriverError::InvalidParameterValue(format!(
                "Invalid value for ipmi_bridging: {other}, the valid value can be one of: ['single', 'dual', 'no']"
            )));
        }
    };
    let missing: Vec<String> = needed
        .iter()
        .filter(|k| value(k).is_none())
        .map(|k| format!("'{k}'"))
        .collect();
    if !missing.is_empty() {
        return Err(DriverError::MissingParameterValue(format!(
            "[{}] not provided",
            missing.join(", ")
        )));
    }
    Ok(flags
        .iter()
        .filter_map(|(key, flag)| value(key).map(|v| (*flag, v)))
        .collect())
}

/// Ironic's check of the address in `validate` (`_validate_ipmi_address`): an IP address or a
/// safe host name.
pub(super) fn validate_address(info: &IpmiInfo, node: &Node) -> Result<(), DriverError> {
    let address = info.address.as_str();
    if address.parse::<std::net::IpAddr>().is_ok() || is_hostname_safe(address) {
        return Ok(());
    }
    Err(DriverError::InvalidParameterValue(format!(
        "Invalid IPMI address \"{address}\" for node {}. Must be a valid IP address or hostname.",
        node.uuid
    )))
}

/// Ironic's `is_hostname_safe`: RFC 952/1123 labels, at most 255 characters, an optional
/// trailing dot.
fn is_hostname_safe(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.len() > 255 {
        return false;
    }
    name.split('.').all(|label| {
        let bytes = label.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= 63
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
            && bytes.first() != Some(&b'-')
            && bytes.last() != Some(&b'-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(info: Value) -> Node {
        let mut node = crate::node::tests_support::node();
        node.driver = "ipmi".into();
        node.driver_info = crate::node::Json(info.as_object().cloned().unwrap_or_default());
        node
    }

    fn error(info: Value) -> String {
        parse_driver_info(&node(info)).unwrap_err().to_string()
    }

    #[test]
    fn driver_info_is_read_as_ironic_reads_it() {
        let info = parse_driver_info(&node(json!({
            "ipmi_address": "10.0.0.5", "ipmi_username": "admin", "ipmi_password": "pw",
            "ipmi_port": "6230", "ipmi_cipher_suite": 17, "ipmi_force_boot_device": "yes",
        })))
        .unwrap();
        assert_eq!(info.priv_level, "ADMINISTRATOR");
        assert_eq!(info.protocol, Protocol::V2_0);
        assert_eq!(info.port, Some(6230));
        assert!(info.force_boot_device);
        assert_eq!(info.bmc(), "ipmi://10.0.0.5:6230");
        assert_eq!(
            info.ipmitool_args().join(" "),
            "-I lanplus -H 10.0.0.5 -L ADMINISTRATOR -p 6230 -U admin -C 17 -E"
        );
        let v15 = parse_driver_info(&node(
            json!({"ipmi_address": "bmc", "ipmi_protocol_version": "1.5", "ipmi_priv_level": "OPERATOR"}),
        ))
        .unwrap();
        assert_eq!(
            v15.ipmitool_args().join(" "),
            "-I lan -H bmc -L OPERATOR -E"
        );
        let bridged = parse_driver_info(&node(
            json!({"ipmi_address": "bmc", "ipmi_bridging": "single",
            "ipmi_target_channel": 7, "ipmi_target_address": "0x72", "ipmi_local_address": "0x20"}),
        ))
        .unwrap();
        assert_eq!(
            bridged.ipmitool_args().join(" "),
            "-I lanplus -H bmc -L ADMINISTRATOR -m 0x20 -b 7 -t 0x72 -E"
        );
    }

    #[test]
    fn bad_driver_info_gets_ironic_words() {
        assert_eq!(
            error(json!({"ipmi_username": "a"})),
            "Missing the following IPMI credentials in node's driver_info: ['ipmi_address']."
        );
        assert_eq!(
            error(json!({"ipmi_address": "b", "ipmi_protocol_version": "3.0"})),
            "Invalid IPMI protocol version value 3.0, the valid value can be one of 2.0, 1.5"
        );
        assert_eq!(
            error(json!({"ipmi_address": "b", "ipmi_priv_level": "ROOT"})),
            "Invalid privilege level value:ROOT, the valid value can be one of ADMINISTRATOR, CALLBACK, OPERATOR, USER"
        );
        assert_eq!(
            error(json!({"ipmi_address": "b", "ipmi_port": "x"})),
            "ipmi_port \"x\" is not a valid port."
        );
        assert_eq!(
            error(json!({"ipmi_address": "b", "ipmi_terminal_port": 70000})),
            "ipmi_terminal_port \"70000\" is not a valid port."
        );
        assert_eq!(
            error(json!({"ipmi_address": "b", "ipmi_cipher_suite": "aes"})),
            "Invalid cipher suite aes, expected a number"
        );
        assert_eq!(
            error(
                json!({"ipmi_address": "b", "ipmi_cipher_suite": 3, "ipmi_protocol_version": "1.5"})
            ),
            "Cipher suites cannot be used with IPMI 1.5"
        );
        assert_eq!(
            error(json!({"ipmi_address": "b", "ipmi_hex_kg_key": "abc"})),
            "Number of ipmi_hex_kg_key characters is not even"
        );
        assert_eq!(
            error(json!({"ipmi_address": "b", "ipmi_bridging": "triple"})),
            "Invalid value for ipmi_bridging: triple, the valid value can be one of: ['single', 'dual', 'no']"
        );
        assert_eq!(
            error(json!({"ipmi_address": "b", "ipmi_bridging": "dual", "ipmi_target_channel": 1})),
            "['ipmi_target_address', 'ipmi_transit_channel', 'ipmi_transit_address'] not provided"
        );
        let n = node(json!({"ipmi_address": "bad host!"}));
        let info = parse_driver_info(&n).unwrap();
        assert!(
            validate_address(&info, &n)
                .unwrap_err()
                .to_string()
                .starts_with("Invalid IPMI address \"bad host!\" for node")
        );
        let n = node(json!({"ipmi_address": "bmc-1.example.org"}));
        validate_address(&parse_driver_info(&n).unwrap(), &n).unwrap();
    }
}
