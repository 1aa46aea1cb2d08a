//! The node: its fields, declared once, and the words of the domain that travel with it
//! (interfaces by kind, power states and targets, provision verbs, JSON documents) and the
//! checks a value must pass wherever it comes from.
//!
//! `Node` is at the same time the row diesel reads and writes (typed columns: states are enums,
//! JSON documents are parsed, on both backends), the value RPC carries and what drivers see.
//! `NodeChanges` is a partial update of it, generated from the same list of fields, so a new
//! field is one line in [`node_type!`] (plus its migration pair and its row in the API's field
//! table, `api/fields.rs`).
//!
//! Owns: the shape and the validity of a node's values. Must not: run queries (that is `db`),
//! know microversions (that is `api`), or decide transitions (that is `states` and `conductor`).

pub mod bios;
pub mod console;
pub mod fields;
pub mod firmware;
pub mod hardware;
pub mod history;
mod interfaces;
pub mod inventory;
pub mod management;
pub mod mask;
pub mod network_data;
mod power;
pub mod raid;
mod verb;

use chrono::NaiveDateTime;
use diesel::prelude::*;
use serde::{Deserialize, Serialize};

pub use self::{
    interfaces::{InterfaceChanges, InterfaceKind, Interfaces},
    power::{PowerState, PowerTarget},
    verb::Verb,
};
// What every resource shares (JSON documents, value checks), by the names the node's code has
// always used.
pub use crate::resource::json::{Json, JsonObject};
pub use crate::resource::validate::{
    normalize_conductor_group, normalize_uuid, validate_length, validate_name,
    validate_resource_class, validate_trait,
};
use crate::states::ProvisionState;

/// Declares [`Node`] and [`NodeChanges`] from one list of fields. Besides the listed fields,
/// `Node` has its `id` (assigned by the database, never written) and its [`Interfaces`].
macro_rules! node_type {
    ($( $(#[$attr:meta])* $field:ident : $ty:ty, )*) => {
        /// A node as Ferrum stores, sends and works with it.
        #[derive(
            Debug, Clone, Default, PartialEq, Serialize, Deserialize, Queryable, Selectable, Insertable,
        )]
        #[diesel(table_name = crate::schema::nodes)]
        pub struct Node {
            /// The row's key, assigned by the database when the node is inserted.
            #[diesel(skip_insertion)]
            pub id: i32,
            /// The `<kind>_interface` fields (flat on the wire and in the table).
            #[diesel(embed)]
            #[serde(flatten)]
            pub interfaces: Interfaces,
            $( $(#[$attr])* pub $field: $ty, )*
        }

        /// A partial update of a node. `None` leaves a field alone; `Some(v)` writes `v`, so for a
        /// nullable field `Some(None)` writes NULL.
        #[derive(Debug, Clone, Default, AsChangeset)]
        #[diesel(table_name = crate::schema::nodes)]
        pub struct NodeChanges {
            #[diesel(embed)]
            pub interfaces: InterfaceChanges,
            $( pub $field: Option<$ty>, )*
        }

        impl NodeChanges {
            /// Sets the fields these changes name on `node`.
            pub fn set_into(self, node: &mut Node) {
                self.interfaces.set_into(&mut node.interfaces);
                $( if let Some(value) = self.$field { node.$field = value; } )*
            }

            /// Makes `node` what the database holds after these changes were written.
            pub fn mirror_into(self, node: &mut Node) {
                self.set_into(node);
                node.version += 1;
            }

            /// Which fields these changes set, a bit each (the interfaces' from bit 64): the
            /// shape of the UPDATE that writes them (see `db::reuse`).
            pub fn shape(&self) -> u128 {
                let set = [$( self.$field.is_some(), )*];
                set.iter()
                    .enumerate()
                    .filter(|(_, set)| **set)
                    .fold(self.interfaces.shape() << 64, |shape, (bit, _)| shape | 1 << bit)
            }
        }
    };
}

node_type! {
    uuid: String,
    name: Option<String>,
    driver: String,
    resource_class: Option<String>,
    conductor_group: String,
    driver_info: Json<JsonObject>,
    driver_internal_info: Json<JsonObject>,
    properties: Json<JsonObject>,
    instance_info: Json<JsonObject>,
    instance_uuid: Option<String>,
    extra: Json<JsonObject>,
    #[serde(with = "state_name")]
    provision_state: ProvisionState,
    #[serde(with = "opt_state_name")]
    target_provision_state: Option<ProvisionState>,
    provision_updated_at: Option<NaiveDateTime>,
    power_state: Option<PowerState>,
    target_power_state: Option<PowerState>,
    maintenance: bool,
    maintenance_reason: Option<String>,
    last_error: Option<String>,
    /// The node lock: the host name of the conductor holding it.
    reservation: Option<String>,
    conductor_affinity: Option<String>,
    created_at: NaiveDateTime,
    updated_at: Option<NaiveDateTime>,
    /// Bumped by every data write, so that a write conditional on it sees any change since.
    version: i64,
    console_enabled: bool,
    // Fields of API 1.33-1.49: defaulted when absent, so that a node sent by a process of the
    // release before them still decodes (a rolling upgrade has both on the wire).
    #[serde(default)]
    traits: Json<Vec<String>>,
    #[serde(default)]
    fault: Option<String>,
    #[serde(default)]
    deploy_step: Json<JsonObject>,
    #[serde(default)]
    automated_clean: Option<bool>,
    #[serde(default)]
    protected: bool,
    #[serde(default)]
    protected_reason: Option<String>,
    #[serde(default)]
    inspection_started_at: Option<NaiveDateTime>,
    #[serde(default)]
    inspection_finished_at: Option<NaiveDateTime>,
    /// The key of the last request applied to the node, so that its retry is not applied twice.
    #[serde(default)]
    last_request_id: Option<String>,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    description: Option<String>,
    /// The chassis the node is in, by its UUID (which never changes).
    #[serde(default)]
    chassis_uuid: Option<String>,
    /// The RAID configuration the hardware has, and the one asked for (API 1.12).
    #[serde(default)]
    raid_config: Json<JsonObject>,
    #[serde(default)]
    target_raid_config: Json<JsonObject>,
    /// A retired node (API 1.61) is not provided again, and cleaning ends it in manageable.
    #[serde(default)]
    retired: bool,
    #[serde(default)]
    retired_reason: Option<String>,
    #[serde(default)]
    lessee: Option<String>,
    /// The instance's network configuration (API 1.66), checked by `network_data::validate`.
    #[serde(default)]
    network_data: Json<JsonObject>,
    /// The allocation the node is reserved for (API 1.52), by its UUID.
    #[serde(default)]
    allocation_uuid: Option<String>,
    /// The boot mode, `uefi` or `bios` (API 1.75), as the management interface last set it.
    #[serde(default)]
    boot_mode: Option<String>,
    /// Whether UEFI secure boot is on (API 1.75), as the management interface last set it.
    #[serde(default)]
    secure_boot: Option<bool>,
    /// The shard the node belongs to (API 1.82): a client's grouping, listed by `/v1/shards`.
    #[serde(default)]
    shard: Option<String>,
    /// The node's parent (API 1.83), by its UUID; a node with one is listed only on request.
    #[serde(default)]
    parent_node: Option<String>,
    /// The node may never be powered off (API 1.95): power-off requests are refused and the
    /// flows that would power it off reboot it instead.
    #[serde(default)]
    disable_power_off: bool,
    /// The service step running (API 1.87), `{}` when the node is not servicing.
    #[serde(default)]
    service_step: Json<JsonObject>,
    /// The instance's name (API 1.104): written by clients, or copied from
    /// `instance_info.display_name` (what Nova sets) when it has none; forgotten with the instance.
    #[serde(default)]
    instance_name: Option<String>,
    /// The clean step running (API 1.7), `{}` when the node is not cleaning.
    #[serde(default)]
    clean_step: Json<JsonObject>,
    /// The hardware's health (API 1.109): `OK`, `Warning` or `Critical` as the management
    /// interface last reported it; None where the driver reports none (the fake hardware).
    #[serde(default)]
    health: Option<String>,
}

impl NodeChanges {
    /// The provision state and its target, stamped with `provision_updated_at`.
    pub fn provision(mut self, state: ProvisionState, target: Option<ProvisionState>) -> Self {
        self.provision_state = Some(state);
        self.target_provision_state = Some(target);
        self.provision_updated_at = Some(Some(now()));
        self
    }

    pub fn last_error(mut self, message: Option<String>) -> Self {
        self.last_error = Some(message.map(truncate_error));
        self
    }

    pub fn power(mut self, state: Option<PowerState>, target: Option<PowerState>) -> Self {
        self.power_state = Some(state);
        self.target_power_state = Some(target);
        self
    }

    pub fn release(mut self) -> Self {
        self.reservation = Some(None);
        self
    }

    /// Stamps `updated_at`; every write does this once, just before it is sent.
    pub fn touch(mut self) -> Self {
        self.updated_at = Some(Some(now()));
        self
    }
}

/// Where a node's `driver_internal_info` keeps its agent's token (masked wherever a node is
/// shown: the key names a secret).
pub const AGENT_TOKEN_KEY: &str = "agent_secret_token";

/// What a node's `driver_internal_info` says about the agent of its last ramdisk boot: its
/// token, URL and certificate. A new boot of the ramdisk (a deploy) and a tear-down forget them,
/// as Ironic's `wipe_token_and_url` does when it powers a node off or reboots it.
pub const AGENT_BOOT_KEYS: &[&str] = &[
    AGENT_TOKEN_KEY,
    "agent_secret_token_pregenerated",
    "agent_url",
    "agent_verify_ca",
];

/// `info` without the [`AGENT_BOOT_KEYS`].
pub fn without_agent_boot(info: &JsonObject) -> JsonObject {
    let mut info = info.clone();
    for key in AGENT_BOOT_KEYS {
        info.remove(*key);
    }
    info
}

pub use crate::resource::now;

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

/// Provision states cross RPC by their API name, the one stable spelling.
pub(crate) mod state_name {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::states::ProvisionState;

    pub(crate) fn serialize<S: Serializer>(s: &ProvisionState, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(s.api_name())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ProvisionState, D::Error> {
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
            interfaces: Interfaces {
                deploy: "fake".into(),
                power: "fake".into(),
                management: "fake".into(),
                bios: "no-bios".into(),
                boot: "fake".into(),
                console: "no-console".into(),
                inspect: "no-inspect".into(),
                network: "noop".into(),
                raid: "no-raid".into(),
                rescue: "no-rescue".into(),
                storage: "noop".into(),
                vendor: "no-vendor".into(),
                firmware: "no-firmware".into(),
            },
            provision_state: ProvisionState::DeployFail,
            target_provision_state: Some(ProvisionState::Active),
            last_error: Some("x".into()),
            created_at: chrono::DateTime::UNIX_EPOCH.naive_utc(),
            ..Node::default()
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
            "firmware_interface",
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

    /// The wire form stays flat and spelled as before: interfaces as `<kind>_interface`, states
    /// and power states by their API names.
    #[test]
    fn the_wire_form_is_flat_and_uses_api_names() {
        let mut node = tests_support::node();
        node.power_state = Some(PowerState::On);
        let value = serde_json::to_value(&node).unwrap();
        assert_eq!(value["deploy_interface"], "fake");
        assert_eq!(value["vendor_interface"], "no-vendor");
        assert_eq!(value["provision_state"], "deploy failed");
        assert_eq!(value["target_provision_state"], "active");
        assert_eq!(value["power_state"], "power on");
        assert!(value.get("interfaces").is_none());
        let bytes = rmp_serde::to_vec_named(&node).unwrap();
        assert_eq!(rmp_serde::from_slice::<Node>(&bytes).unwrap(), node);
    }

    #[test]
    fn changes_mirror_into_the_node() {
        let mut node = tests_support::node();
        let mut changes = NodeChanges::default()
            .provision(ProvisionState::Active, None)
            .power(Some(PowerState::On), None)
            .last_error(None)
            .release();
        changes.interfaces.set(InterfaceKind::Rescue, "fake".into());
        changes.mirror_into(&mut node);
        assert_eq!(node.provision_state, ProvisionState::Active);
        assert_eq!(node.target_provision_state, None);
        assert_eq!(node.power_state, Some(PowerState::On));
        assert_eq!(node.last_error, None);
        assert_eq!(node.interfaces.get(InterfaceKind::Rescue), "fake");
        assert_eq!(node.version, 1);
    }
}
