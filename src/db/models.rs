//! Rows as diesel reads and writes them, and the `Node` the rest of Ferrum works with.
//!
//! JSON documents (driver_info, properties, ...) are text columns; they are parsed here, once, so a
//! corrupt row is an error at the edge instead of a surprise deep inside a flow.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::schema::{conductors, nodes};
use crate::{
    error::{Error, Result},
    states::ProvisionState,
};

pub type JsonObject = Map<String, Value>;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = nodes)]
pub struct NodeRow {
    pub id: i32,
    pub uuid: String,
    pub name: Option<String>,
    pub driver: String,
    pub deploy_interface: String,
    pub power_interface: String,
    pub management_interface: String,
    pub resource_class: Option<String>,
    pub conductor_group: String,
    pub driver_info: String,
    pub driver_internal_info: String,
    pub properties: String,
    pub instance_info: String,
    pub instance_uuid: Option<String>,
    pub extra: String,
    pub provision_state: String,
    pub target_provision_state: Option<String>,
    pub provision_updated_at: Option<NaiveDateTime>,
    pub power_state: Option<String>,
    pub target_power_state: Option<String>,
    pub maintenance: bool,
    pub maintenance_reason: Option<String>,
    pub last_error: Option<String>,
    pub reservation: Option<String>,
    pub conductor_affinity: Option<String>,
    pub created_at: NaiveDateTime,
    pub updated_at: Option<NaiveDateTime>,
    pub version: i64,
    pub boot_interface: String,
    pub console_interface: String,
    pub inspect_interface: String,
    pub network_interface: String,
    pub raid_interface: String,
    pub vendor_interface: String,
    pub console_enabled: bool,
    pub storage_interface: String,
    pub rescue_interface: String,
    pub bios_interface: String,
    pub traits: String,
    pub fault: Option<String>,
    pub deploy_step: String,
    pub automated_clean: Option<bool>,
    pub protected: bool,
    pub protected_reason: Option<String>,
    pub inspection_started_at: Option<NaiveDateTime>,
    pub inspection_finished_at: Option<NaiveDateTime>,
    pub last_request_id: Option<String>,
}

/// A node as Ferrum works with it: states typed, JSON parsed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: i32,
    pub uuid: String,
    pub name: Option<String>,
    pub driver: String,
    pub deploy_interface: String,
    pub power_interface: String,
    pub management_interface: String,
    pub resource_class: Option<String>,
    pub conductor_group: String,
    pub driver_info: JsonObject,
    pub driver_internal_info: JsonObject,
    pub properties: JsonObject,
    pub instance_info: JsonObject,
    pub instance_uuid: Option<String>,
    pub extra: JsonObject,
    #[serde(with = "state_name")]
    pub provision_state: ProvisionState,
    #[serde(with = "opt_state_name")]
    pub target_provision_state: Option<ProvisionState>,
    pub provision_updated_at: Option<NaiveDateTime>,
    pub power_state: Option<String>,
    pub target_power_state: Option<String>,
    pub maintenance: bool,
    pub maintenance_reason: Option<String>,
    pub last_error: Option<String>,
    pub reservation: Option<String>,
    pub conductor_affinity: Option<String>,
    pub created_at: NaiveDateTime,
    pub updated_at: Option<NaiveDateTime>,
    pub version: i64,
    pub boot_interface: String,
    pub console_interface: String,
    pub inspect_interface: String,
    pub network_interface: String,
    pub raid_interface: String,
    pub vendor_interface: String,
    pub console_enabled: bool,
    // Fields of API 1.33-1.49: defaulted when absent, so that a node sent by a process of the
    // release before them still decodes (a rolling upgrade has both on the wire).
    #[serde(default = "default_storage_interface")]
    pub storage_interface: String,
    #[serde(default = "default_rescue_interface")]
    pub rescue_interface: String,
    #[serde(default = "default_bios_interface")]
    pub bios_interface: String,
    #[serde(default)]
    pub traits: Vec<String>,
    #[serde(default)]
    pub fault: Option<String>,
    #[serde(default)]
    pub deploy_step: JsonObject,
    #[serde(default)]
    pub automated_clean: Option<bool>,
    #[serde(default)]
    pub protected: bool,
    #[serde(default)]
    pub protected_reason: Option<String>,
    #[serde(default)]
    pub inspection_started_at: Option<NaiveDateTime>,
    #[serde(default)]
    pub inspection_finished_at: Option<NaiveDateTime>,
    /// The id of the last request applied to the node, so that its retry is not applied twice.
    #[serde(default)]
    pub last_request_id: Option<String>,
}

// The column defaults of migration 000004.
fn default_storage_interface() -> String {
    "noop".to_owned()
}

fn default_rescue_interface() -> String {
    "no-rescue".to_owned()
}

fn default_bios_interface() -> String {
    "no-bios".to_owned()
}

impl Node {
    /// The node's interfaces besides deploy, power and management, by kind (see
    /// `HardwareType::passive`).
    pub fn passive_interfaces(&self) -> [(&'static str, &str); 9] {
        [
            ("bios", &self.bios_interface),
            ("boot", &self.boot_interface),
            ("console", &self.console_interface),
            ("inspect", &self.inspect_interface),
            ("network", &self.network_interface),
            ("raid", &self.raid_interface),
            ("rescue", &self.rescue_interface),
            ("storage", &self.storage_interface),
            ("vendor", &self.vendor_interface),
        ]
    }
}

impl TryFrom<NodeRow> for Node {
    type Error = Error;

    fn try_from(r: NodeRow) -> Result<Node> {
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            Error::internal(format!(
                "node {}: corrupt {what} in the database: {e}",
                r.uuid
            ))
        };
        let json = |what: &str, text: &str| -> Result<JsonObject> {
            if text.is_empty() {
                return Ok(JsonObject::new());
            }
            serde_json::from_str(text).map_err(|e| corrupt(what, &e))
        };
        let state = |text: &str| -> Result<ProvisionState> {
            text.parse().map_err(|e| corrupt("provision_state", &e))
        };
        let deploy_step = json("deploy_step", &r.deploy_step)?;
        let traits = traits_from_text(&r.traits).map_err(|e| corrupt("traits", &e))?;
        Ok(Node {
            driver_info: json("driver_info", &r.driver_info)?,
            driver_internal_info: json("driver_internal_info", &r.driver_internal_info)?,
            properties: json("properties", &r.properties)?,
            instance_info: json("instance_info", &r.instance_info)?,
            extra: json("extra", &r.extra)?,
            provision_state: state(&r.provision_state)?,
            target_provision_state: r.target_provision_state.as_deref().map(state).transpose()?,
            id: r.id,
            uuid: r.uuid,
            name: r.name,
            driver: r.driver,
            deploy_interface: r.deploy_interface,
            power_interface: r.power_interface,
            management_interface: r.management_interface,
            resource_class: r.resource_class,
            conductor_group: r.conductor_group,
            instance_uuid: r.instance_uuid,
            provision_updated_at: r.provision_updated_at,
            power_state: r.power_state,
            target_power_state: r.target_power_state,
            maintenance: r.maintenance,
            maintenance_reason: r.maintenance_reason,
            last_error: r.last_error,
            reservation: r.reservation,
            conductor_affinity: r.conductor_affinity,
            created_at: r.created_at,
            updated_at: r.updated_at,
            version: r.version,
            boot_interface: r.boot_interface,
            console_interface: r.console_interface,
            inspect_interface: r.inspect_interface,
            network_interface: r.network_interface,
            raid_interface: r.raid_interface,
            vendor_interface: r.vendor_interface,
            console_enabled: r.console_enabled,
            traits,
            deploy_step,
            storage_interface: r.storage_interface,
            rescue_interface: r.rescue_interface,
            bios_interface: r.bios_interface,
            fault: r.fault,
            automated_clean: r.automated_clean,
            protected: r.protected,
            protected_reason: r.protected_reason,
            inspection_started_at: r.inspection_started_at,
            inspection_finished_at: r.inspection_finished_at,
            last_request_id: r.last_request_id,
        })
    }
}

/// What creating a node writes. The conductor fills in interfaces and the initial state.
#[derive(Debug, Clone, Insertable)]
#[diesel(table_name = nodes)]
pub struct NewNodeRow {
    pub uuid: String,
    pub name: Option<String>,
    pub driver: String,
    pub deploy_interface: String,
    pub power_interface: String,
    pub management_interface: String,
    pub resource_class: Option<String>,
    pub conductor_group: String,
    pub driver_info: String,
    pub driver_internal_info: String,
    pub properties: String,
    pub instance_info: String,
    pub instance_uuid: Option<String>,
    pub extra: String,
    pub provision_state: String,
    pub power_state: Option<String>,
    pub maintenance: bool,
    pub created_at: NaiveDateTime,
    pub boot_interface: String,
    pub console_interface: String,
    pub inspect_interface: String,
    pub network_interface: String,
    pub raid_interface: String,
    pub vendor_interface: String,
    pub storage_interface: String,
    pub rescue_interface: String,
    pub bios_interface: String,
    pub traits: String,
    pub deploy_step: String,
    pub automated_clean: Option<bool>,
    pub last_request_id: Option<String>,
}

/// A partial update of a node. `None` leaves a column alone; `Some(None)` writes NULL.
/// Build it with the setters so that states and JSON are written in their one stored form.
#[derive(Debug, Clone, Default, AsChangeset)]
#[diesel(table_name = nodes)]
pub struct NodeChanges {
    pub name: Option<Option<String>>,
    pub driver: Option<String>,
    pub deploy_interface: Option<String>,
    pub power_interface: Option<String>,
    pub management_interface: Option<String>,
    pub resource_class: Option<Option<String>>,
    pub conductor_group: Option<String>,
    pub driver_info: Option<String>,
    pub driver_internal_info: Option<String>,
    pub properties: Option<String>,
    pub instance_info: Option<String>,
    pub instance_uuid: Option<Option<String>>,
    pub extra: Option<String>,
    pub provision_state: Option<String>,
    pub target_provision_state: Option<Option<String>>,
    pub provision_updated_at: Option<Option<NaiveDateTime>>,
    pub power_state: Option<Option<String>>,
    pub target_power_state: Option<Option<String>>,
    pub maintenance: Option<bool>,
    pub maintenance_reason: Option<Option<String>>,
    pub last_error: Option<Option<String>>,
    pub reservation: Option<Option<String>>,
    pub conductor_affinity: Option<Option<String>>,
    pub updated_at: Option<Option<NaiveDateTime>>,
    pub boot_interface: Option<String>,
    pub console_interface: Option<String>,
    pub inspect_interface: Option<String>,
    pub network_interface: Option<String>,
    pub raid_interface: Option<String>,
    pub vendor_interface: Option<String>,
    pub console_enabled: Option<bool>,
    pub storage_interface: Option<String>,
    pub rescue_interface: Option<String>,
    pub bios_interface: Option<String>,
    pub traits: Option<String>,
    pub fault: Option<Option<String>>,
    pub deploy_step: Option<String>,
    pub automated_clean: Option<Option<bool>>,
    pub protected: Option<bool>,
    pub protected_reason: Option<Option<String>>,
    pub inspection_started_at: Option<Option<NaiveDateTime>>,
    pub inspection_finished_at: Option<Option<NaiveDateTime>>,
    pub last_request_id: Option<Option<String>>,
}

impl NodeChanges {
    /// The provision state and its target, stamped with `provision_updated_at`.
    pub fn provision(mut self, state: ProvisionState, target: Option<ProvisionState>) -> Self {
        self.provision_state = Some(state.api_name().to_owned());
        self.target_provision_state = Some(target.map(|t| t.api_name().to_owned()));
        self.provision_updated_at = Some(Some(super::now()));
        self
    }

    pub fn last_error(mut self, message: Option<String>) -> Self {
        self.last_error = Some(message.map(truncate_error));
        self
    }

    pub fn power(mut self, state: Option<String>, target: Option<String>) -> Self {
        self.power_state = Some(state);
        self.target_power_state = Some(target);
        self
    }

    /// The passive interfaces these changes set, by kind, as [`Node::passive_interfaces`] names them.
    pub fn passive_interfaces(&self) -> [(&'static str, Option<&str>); 9] {
        [
            ("bios", self.bios_interface.as_deref()),
            ("boot", self.boot_interface.as_deref()),
            ("console", self.console_interface.as_deref()),
            ("inspect", self.inspect_interface.as_deref()),
            ("network", self.network_interface.as_deref()),
            ("raid", self.raid_interface.as_deref()),
            ("rescue", self.rescue_interface.as_deref()),
            ("storage", self.storage_interface.as_deref()),
            ("vendor", self.vendor_interface.as_deref()),
        ]
    }

    /// Sets the `<kind>_interface` column (any interface kind, active or passive).
    pub fn set_interface(&mut self, kind: &str, name: String) {
        let slot = match kind {
            "deploy" => &mut self.deploy_interface,
            "power" => &mut self.power_interface,
            "management" => &mut self.management_interface,
            "bios" => &mut self.bios_interface,
            "boot" => &mut self.boot_interface,
            "console" => &mut self.console_interface,
            "inspect" => &mut self.inspect_interface,
            "network" => &mut self.network_interface,
            "raid" => &mut self.raid_interface,
            "rescue" => &mut self.rescue_interface,
            "storage" => &mut self.storage_interface,
            "vendor" => &mut self.vendor_interface,
            _ => return,
        };
        *slot = Some(name);
    }

    pub fn release(mut self) -> Self {
        self.reservation = Some(None);
        self
    }

    /// Stamps `updated_at`; every write does this once, just before it is sent.
    pub fn touch(mut self) -> Self {
        self.updated_at = Some(Some(super::now()));
        self
    }

    /// Makes `node` what the database holds after these changes were written.
    pub fn mirror_into(self, node: &mut Node) -> Result<()> {
        fn set<T>(slot: &mut T, value: Option<T>) {
            if let Some(v) = value {
                *slot = v;
            }
        }
        fn set_json(slot: &mut JsonObject, value: Option<String>) -> Result<()> {
            if let Some(text) = value {
                *slot = serde_json::from_str(&text).map_err(Error::internal)?;
            }
            Ok(())
        }
        fn set_state(slot: &mut ProvisionState, value: Option<String>) -> Result<()> {
            if let Some(text) = value {
                *slot = text.parse().map_err(Error::internal)?;
            }
            Ok(())
        }
        set(&mut node.name, self.name);
        set(&mut node.driver, self.driver);
        set(&mut node.deploy_interface, self.deploy_interface);
        set(&mut node.power_interface, self.power_interface);
        set(&mut node.management_interface, self.management_interface);
        set(&mut node.resource_class, self.resource_class);
        set(&mut node.conductor_group, self.conductor_group);
        set_json(&mut node.driver_info, self.driver_info)?;
        set_json(&mut node.driver_internal_info, self.driver_internal_info)?;
        set_json(&mut node.properties, self.properties)?;
        set_json(&mut node.instance_info, self.instance_info)?;
        set(&mut node.instance_uuid, self.instance_uuid);
        set_json(&mut node.extra, self.extra)?;
        set_state(&mut node.provision_state, self.provision_state)?;
        if let Some(target) = self.target_provision_state {
            node.target_provision_state = target
                .map(|t| t.parse().map_err(Error::internal))
                .transpose()?;
        }
        set(&mut node.provision_updated_at, self.provision_updated_at);
        set(&mut node.power_state, self.power_state);
        set(&mut node.target_power_state, self.target_power_state);
        set(&mut node.maintenance, self.maintenance);
        set(&mut node.maintenance_reason, self.maintenance_reason);
        set(&mut node.last_error, self.last_error);
        set(&mut node.reservation, self.reservation);
        set(&mut node.conductor_affinity, self.conductor_affinity);
        set(&mut node.updated_at, self.updated_at);
        set(&mut node.boot_interface, self.boot_interface);
        set(&mut node.console_interface, self.console_interface);
        set(&mut node.inspect_interface, self.inspect_interface);
        set(&mut node.network_interface, self.network_interface);
        set(&mut node.raid_interface, self.raid_interface);
        set(&mut node.vendor_interface, self.vendor_interface);
        set(&mut node.console_enabled, self.console_enabled);
        set(&mut node.storage_interface, self.storage_interface);
        set(&mut node.rescue_interface, self.rescue_interface);
        set(&mut node.bios_interface, self.bios_interface);
        if let Some(text) = self.traits {
            node.traits = traits_from_text(&text).map_err(Error::internal)?;
        }
        set(&mut node.fault, self.fault);
        set_json(&mut node.deploy_step, self.deploy_step)?;
        set(&mut node.automated_clean, self.automated_clean);
        set(&mut node.protected, self.protected);
        set(&mut node.protected_reason, self.protected_reason);
        set(&mut node.inspection_started_at, self.inspection_started_at);
        set(
            &mut node.inspection_finished_at,
            self.inspection_finished_at,
        );
        set(&mut node.last_request_id, self.last_request_id);
        node.version += 1;
        Ok(())
    }
}

/// Ironic cuts stored errors to `[DEFAULT]log_in_db_max_size`, 4096 characters.
pub fn truncate_error(mut message: String) -> String {
    const MAX: usize = 4096;
    if message.len() > MAX {
        let mut cut = MAX;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
    }
    message
}

/// Traits are stored as a JSON array of strings; an empty column is no traits.
pub fn traits_from_text(text: &str) -> serde_json::Result<Vec<String>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(text)
}

pub fn traits_text(traits: &[String]) -> String {
    // Serializing strings cannot fail.
    serde_json::to_string(traits).unwrap_or_else(|_| "[]".to_owned())
}

pub fn json_text(doc: &JsonObject) -> String {
    // Serializing a map of JSON values cannot fail.
    serde_json::to_string(doc).unwrap_or_else(|_| "{}".to_owned())
}

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = conductors)]
pub struct ConductorRow {
    pub id: i32,
    pub hostname: String,
    pub drivers: String,
    pub conductor_group: String,
    pub online: bool,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    pub instance: Option<String>,
}

/// A registered conductor, as the hash ring and the API see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conductor {
    pub hostname: String,
    pub drivers: Vec<String>,
    pub conductor_group: String,
    pub online: bool,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    /// The token of the process holding the host name's lease; None after a clean stop.
    #[serde(default)]
    pub instance: Option<String>,
}

impl From<ConductorRow> for Conductor {
    fn from(r: ConductorRow) -> Conductor {
        Conductor {
            drivers: serde_json::from_str(&r.drivers).unwrap_or_default(),
            hostname: r.hostname,
            conductor_group: r.conductor_group,
            online: r.online,
            created_at: r.created_at,
            updated_at: r.updated_at,
            instance: r.instance,
        }
    }
}

/// Provision states cross RPC by their API name, the one stable spelling.
mod state_name {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::states::ProvisionState;

    pub(super) fn serialize<S: Serializer>(s: &ProvisionState, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(s.api_name())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ProvisionState, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

mod opt_state_name {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::states::ProvisionState;

    pub(super) fn serialize<S: Serializer>(
        s: &Option<ProvisionState>,
        ser: S,
    ) -> Result<S::Ok, S::Error> {
        match s {
            Some(s) => ser.serialize_some(s.api_name()),
            None => ser.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<ProvisionState>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A `fake-hardware` node in `deploy failed`, for unit tests.
    pub(crate) fn node() -> Node {
        Node {
            id: 1,
            uuid: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123".into(),
            name: Some("n1".into()),
            driver: "fake-hardware".into(),
            deploy_interface: "fake".into(),
            power_interface: "fake".into(),
            management_interface: "fake".into(),
            resource_class: None,
            conductor_group: String::new(),
            driver_info: JsonObject::new(),
            driver_internal_info: JsonObject::new(),
            properties: JsonObject::new(),
            instance_info: JsonObject::new(),
            instance_uuid: None,
            extra: JsonObject::new(),
            provision_state: ProvisionState::DeployFail,
            target_provision_state: Some(ProvisionState::Active),
            provision_updated_at: None,
            power_state: None,
            target_power_state: None,
            maintenance: false,
            maintenance_reason: None,
            last_error: Some("x".into()),
            reservation: None,
            conductor_affinity: None,
            created_at: chrono::DateTime::UNIX_EPOCH.naive_utc(),
            updated_at: None,
            version: 0,
            boot_interface: "fake".into(),
            console_interface: "no-console".into(),
            inspect_interface: "no-inspect".into(),
            network_interface: "noop".into(),
            raid_interface: "no-raid".into(),
            vendor_interface: "no-vendor".into(),
            console_enabled: false,
            storage_interface: "noop".into(),
            rescue_interface: "no-rescue".into(),
            bios_interface: "no-bios".into(),
            traits: Vec::new(),
            fault: None,
            deploy_step: JsonObject::new(),
            automated_clean: None,
            protected: false,
            protected_reason: None,
            inspection_started_at: None,
            inspection_finished_at: None,
            last_request_id: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node from a release before API 1.33-1.49's fields still decodes, with their defaults.
    #[test]
    fn a_node_without_the_newer_fields_decodes() {
        let mut old = serde_json::to_value(tests_support::node()).unwrap();
        let map = old.as_object_mut().unwrap();
        for field in [
            "storage_interface",
            "rescue_interface",
            "bios_interface",
            "traits",
            "fault",
            "deploy_step",
            "automated_clean",
            "protected",
            "protected_reason",
            "inspection_started_at",
            "inspection_finished_at",
        ] {
            assert!(map.remove(field).is_some(), "{field}");
        }
        let bytes = rmp_serde::to_vec_named(&old).unwrap();
        let node: Node = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(node, tests_support::node());
    }
}
