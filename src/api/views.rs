//! How nodes look in responses: the fields of the negotiated version (the field table in
//! `node/fields.rs`), timestamps as Ironic writes them, secrets masked.

use serde_json::{Map, Value, json};

use super::extract::ApiVersion;
use crate::{
    error::Error,
    node::{
        Node,
        fields::{self, View, links, opt_timestamp, state_value},
    },
};

/// The full node, as GET /v1/nodes/{id} shows it at `version`. `conductor` is the node's
/// conductor on the hash ring (shown from 1.49).
pub fn node_detail(node: &Node, version: ApiVersion, base: &str, conductor: Option<&str>) -> Value {
    Value::Object(fields::render(&View {
        node,
        minor: version.0,
        base,
        conductor,
    }))
}

/// The names a `?fields=` value lists.
pub fn field_names(fields: &str) -> Vec<String> {
    fields
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Checks the names of `?fields=`: a field the version does not have is 406 when a later
/// version has it; an unknown one is 400.
pub fn check_field_names(version: ApiVersion, names: &[String]) -> Result<(), Error> {
    for name in names {
        match fields::field(name) {
            Some(f) if version.at_least(f.since) => {}
            Some(_) => {
                return Err(Error::NotAcceptable(format!(
                    "Field {name} is not available in API version {version}."
                )));
            }
            None => {
                return Err(Error::InvalidParameterValue(format!(
                    "Field {name} is not a valid field."
                )));
            }
        }
    }
    Ok(())
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
    let view = View {
        node,
        minor: version.0,
        base,
        conductor,
    };
    let mut m: Map<String, Value> = names
        .iter()
        .filter_map(|name| fields::field(name))
        .map(|f| (f.name.to_owned(), (f.show)(&view)))
        .collect();
    m.insert("links".into(), links(base, "nodes", &node.uuid));
    Value::Object(m)
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
    let view = View {
        node,
        minor: version.0,
        base,
        conductor: None,
    };
    Value::Object(
        SUMMARY
            .iter()
            .filter_map(|name| fields::field(name))
            .filter(|f| version.at_least(f.since))
            .map(|f| (f.name.to_owned(), (f.show)(&view)))
            .collect(),
    )
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
