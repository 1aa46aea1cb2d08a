//! A node's network ports (API 1.1) and portgroups (1.23, bonds of ports), the values they hold
//! and the checks those pass, and which of them a VIF is attached to (`vif.rs`).
//!
//! Ports and portgroups name their node (and a port its portgroup) by UUID, which never changes.
//! Changing or deleting one is a change of its node, made by the node's conductor under the
//! node's exclusion (`db::children::change_children`); creating a port needs no exclusion, as in
//! Ironic (a shared lock there).
//!
//! Must not: run queries, know microversions or HTTP.

mod port;
mod portgroup;
pub mod vif;

use serde_json::Value;

pub use self::{
    port::{Port, PortChanges, SUMMARY as PORT_SUMMARY},
    portgroup::{Portgroup, PortgroupChanges, SUMMARY as PORTGROUP_SUMMARY},
};
use crate::{
    error::{Error, Result},
    node::JsonObject,
};

/// A MAC address as stored: six colon-separated octets, lower-cased (oslo's `is_valid_mac`, then
/// Ironic's `normalize_mac`).
pub fn normalize_mac(address: &str) -> Result<String> {
    let lower = address.to_ascii_lowercase();
    let octets: Vec<&str> = lower.split(':').collect();
    let valid = octets.len() == 6
        && octets
            .iter()
            .all(|o| o.len() == 2 && o.bytes().all(|b| b.is_ascii_hexdigit()));
    if !valid {
        return Err(Error::InvalidParameterValue(format!(
            "Expected a MAC address but received {address}."
        )));
    }
    Ok(lower)
}

/// The keys a `local_link_connection` may have, and the values `network_type` may take.
const LOCAL_LINK_KEYS: &[&str] = &[
    "port_id",
    "switch_id",
    "hostname",
    "switch_info",
    "network_type",
    VTEP_LOGICAL_SWITCH,
    VTEP_PHYSICAL_SWITCH,
];

/// The keys of an OVN VTEP switch's `local_link_connection` (API 1.90): both or neither.
pub const VTEP_LOGICAL_SWITCH: &str = "vtep-logical-switch";
pub const VTEP_PHYSICAL_SWITCH: &str = "vtep-physical-switch";

/// Whether a `local_link_connection` uses the OVN VTEP keys of API 1.90, which a request
/// outside [`vtep_keys_allowed`] may not write, and is shown to it as `{}` (Ironic's
/// `hide_fields_in_newer_versions`).
pub fn has_vtep_keys(link: &JsonObject) -> bool {
    link.contains_key(VTEP_LOGICAL_SWITCH) || link.contains_key(VTEP_PHYSICAL_SWITCH)
}

/// Whether API minor version `minor` has the OVN VTEP keys: they came in 1.90 and went in 1.105
/// (Ironic's `allow_ovn_vtep_version`: a link with them is refused and shown empty from 1.105
/// on, as below 1.90; one stored meanwhile is kept).
pub fn vtep_keys_allowed(minor: u32) -> bool {
    (90..105).contains(&minor)
}

/// Checks a port's `local_link_connection` as Ironic's schema does (empty; or `port_id` with
/// `switch_id`; or `port_id` with `hostname` for a Smart NIC; or `network_type: unmanaged`
/// alone; or `port_id` with both OVN VTEP switch keys; `network_type` is of API 1.64 and the
/// VTEP keys of 1.90-1.104, which the API checks), and normalizes its `switch_id` (a MAC address or a
/// 16-hex-digit OpenFlow datapath ID).
pub fn normalize_local_link(mut link: JsonObject) -> Result<JsonObject> {
    let invalid =
        |why: String| Error::InvalidParameterValue(format!("Invalid local_link_connection: {why}"));
    for (key, value) in &link {
        if !LOCAL_LINK_KEYS.contains(&key.as_str()) {
            return Err(invalid(format!("unexpected key '{key}'")));
        }
        if !value.is_string() {
            return Err(invalid(format!("'{key}' must be a string, not {value}")));
        }
    }
    if let Some(network_type) = link.get("network_type").and_then(Value::as_str)
        && !matches!(network_type, "managed" | "unmanaged")
    {
        return Err(invalid(format!(
            "network_type must be 'managed' or 'unmanaged', not '{network_type}'"
        )));
    }
    let has = |key: &str| link.contains_key(key);
    if has(VTEP_LOGICAL_SWITCH) != has(VTEP_PHYSICAL_SWITCH) {
        return Err(invalid(format!(
            "{VTEP_LOGICAL_SWITCH} and {VTEP_PHYSICAL_SWITCH} go together"
        )));
    }
    let unmanaged = link.get("network_type").and_then(Value::as_str) == Some("unmanaged");
    let complete = link.is_empty()
        || unmanaged
        || (has("port_id") && has("switch_id"))
        || (has("port_id") && has("hostname"))
        || (has("port_id") && has(VTEP_LOGICAL_SWITCH));
    if !complete {
        return Err(invalid(
            "it needs port_id and switch_id (or port_id and hostname for a Smart NIC, or port_id, vtep-logical-switch and vtep-physical-switch for an OVN VTEP switch), or network_type 'unmanaged'".to_owned(),
        ));
    }
    if let Some(Value::String(switch_id)) = link.get("switch_id") {
        let normalized = match normalize_mac(switch_id) {
            Ok(mac) => mac,
            Err(_) if switch_id.len() == 16 && switch_id.bytes().all(|b| b.is_ascii_hexdigit()) => {
                switch_id.to_ascii_lowercase()
            }
            Err(_) => {
                return Err(Error::InvalidParameterValue(format!(
                    "Expected a MAC address or OpenFlow datapath ID but received {switch_id}."
                )));
            }
        };
        link.insert("switch_id".into(), Value::String(normalized));
    }
    Ok(link)
}

/// The key of `internal_info` that names the tenant VIF attached to a port or portgroup.
pub const TENANT_VIF_KEY: &str = "tenant_vif_port_id";

/// The tenant VIF attached to a port or portgroup with this `internal_info`, if any.
pub fn attached_vif(internal_info: &JsonObject) -> Option<&str> {
    internal_info.get(TENANT_VIF_KEY).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn macs_are_six_octets_lower_cased() {
        assert_eq!(
            normalize_mac("52:54:00:AB:cd:01").unwrap(),
            "52:54:00:ab:cd:01"
        );
        for bad in [
            "52:54:00:ab:cd",
            "52-54-00-ab-cd-01",
            "52:54:00:ab:cd:0g",
            "",
            "525400abcd01",
        ] {
            assert!(normalize_mac(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn vtep_keys_are_of_1_90_to_1_104() {
        let allowed: Vec<u32> = (1..=115).filter(|m| vtep_keys_allowed(*m)).collect();
        assert_eq!(allowed, (90..=104).collect::<Vec<u32>>());
    }

    #[test]
    fn local_link_connections_follow_the_schema() {
        let obj = |v: Value| v.as_object().unwrap().clone();
        let ok = normalize_local_link(obj(
            json!({"port_id": "Eth1", "switch_id": "AA:BB:CC:DD:EE:FF"}),
        ))
        .unwrap();
        assert_eq!(ok["switch_id"], "aa:bb:cc:dd:ee:ff");
        assert!(normalize_local_link(obj(json!({}))).is_ok());
        assert!(normalize_local_link(obj(json!({"port_id": "p", "hostname": "h"}))).is_ok());
        assert!(normalize_local_link(obj(json!({"network_type": "unmanaged"}))).is_ok());
        let vtep =
            json!({"port_id": "p", "vtep-logical-switch": "ls", "vtep-physical-switch": "ps"});
        assert!(has_vtep_keys(&normalize_local_link(obj(vtep)).unwrap()));
        assert!(!has_vtep_keys(&ok));
        assert!(
            normalize_local_link(obj(
                json!({"switch_id": "0123456789abcdef", "port_id": "p"})
            ))
            .is_ok()
        );
        for bad in [
            json!({"port_id": "p"}),
            json!({"port_id": "p", "switch_id": "nope"}),
            json!({"port_id": "p", "switch_id": "aa:bb:cc:dd:ee:ff", "colour": "red"}),
            json!({"port_id": 1, "switch_id": "aa:bb:cc:dd:ee:ff"}),
            json!({"network_type": "other"}),
            json!({"port_id": "p", "vtep-logical-switch": "ls"}),
            json!({"port_id": "p", "vtep-physical-switch": "ps"}),
            json!({"vtep-logical-switch": "ls", "vtep-physical-switch": "ps"}),
            json!({"port_id": "p", "vtep-logical-switch": 1, "vtep-physical-switch": "ps"}),
        ] {
            assert!(normalize_local_link(obj(bad.clone())).is_err(), "{bad}");
        }
    }
}
