//! How nodes look in responses: the fields of the negotiated version (the field table in
//! `node/fields.rs`), timestamps as Ironic writes them, secrets masked.

use serde_json::{Map, Value, json};

use super::extract::ApiVersion;
use crate::{
    error::Error,
    node::{
        Node,
        fields::{View, opt_timestamp, state_value},
    },
    resource,
};

pub use crate::resource::field_names;

/// The full node, as GET /v1/nodes/{id} shows it at `version`. `conductor` is the node's
/// conductor on the hash ring (shown from 1.49).
pub fn node_detail(node: &Node, version: ApiVersion, base: &str, conductor: Option<&str>) -> Value {
    Value::Object(resource::render(&View {
        conductor,
        ..View::new(node, version.0, base)
    }))
}

/// Checks the node field names of `?fields=` (see [`resource::check_field_names`]).
pub fn check_field_names(version: ApiVersion, names: &[String]) -> Result<(), Error> {
    resource::check_field_names::<Node>(version.0, names)
}

/// Only the fields `names` (checked by [`check_field_names`]) of the node, and its links, for
/// `?fields=`.
pub fn node_fields(
    node: &Node,
    version: ApiVersion,
    base: &str,
    conductor: Option<&str>,
    names: &[String],
) -> Value {
    Value::Object(resource::render_fields(
        &View {
            conductor,
            ..View::new(node, version.0, base)
        },
        names,
    ))
}

/// The fields of the short form of GET /v1/nodes.
const SUMMARY: &[&str] = &[
    "uuid",
    "instance_uuid",
    "maintenance",
    "power_state",
    "provision_state",
    "links",
    "name",
];

/// The short form of GET /v1/nodes.
pub fn node_summary(node: &Node, version: ApiVersion, base: &str) -> Value {
    Value::Object(resource::render_some(
        &View::new(node, version.0, base),
        SUMMARY,
    ))
}

/// GET /v1/nodes/{id}/states.
pub fn node_states(node: &Node, version: ApiVersion) -> Value {
    let mut m = Map::new();
    m.insert("console_enabled".into(), json!(node.console_enabled));
    m.insert("last_error".into(), json!(node.last_error));
    m.insert("power_state".into(), json!(node.power_state));
    m.insert(
        "provision_state".into(),
        state_value(Some(node.provision_state), version.0),
    );
    m.insert(
        "provision_updated_at".into(),
        opt_timestamp(&node.provision_updated_at),
    );
    m.insert("target_power_state".into(), json!(node.target_power_state));
    m.insert(
        "target_provision_state".into(),
        state_value(node.target_provision_state, version.0),
    );
    if version.at_least(12) {
        m.insert("raid_config".into(), json!(node.raid_config.0));
        m.insert(
            "target_raid_config".into(),
            json!(node.target_raid_config.0),
        );
    }
    if version.at_least(75) {
        m.insert("boot_mode".into(), json!(node.boot_mode));
        m.insert("secure_boot".into(), json!(node.secure_boot));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_follow_the_version() {
        let node = crate::node::tests_support::node();
        let old = node_detail(&node, ApiVersion(1), "http://h", None);
        assert!(old.get("name").is_none());
        assert!(old.get("deploy_interface").is_none());
        let new = node_detail(&node, ApiVersion(31), "http://h", None);
        assert_eq!(new["name"], "n1");
        assert_eq!(new["deploy_interface"], "fake");
        assert_eq!(new["target_provision_state"], "active");
        assert_eq!(new["provision_state"], "deploy failed");
    }
}
