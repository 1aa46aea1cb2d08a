//! A node's hardware interfaces, one per [`InterfaceKind`].
//!
//! The conductor drives six of them (deploy, power, management, vendor, bios, firmware); the others are names
//! a hardware type lists (see `drivers::HardwareType::passive`), stored and validated.

use diesel::prelude::*;
use serde::{Deserialize, Serialize};

/// Every kind of interface a node has. Matches on it are exhaustive, so a new kind is a compile
/// error wherever it needs a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InterfaceKind {
    Deploy,
    Power,
    Management,
    Bios,
    Boot,
    Console,
    Inspect,
    Network,
    Raid,
    Rescue,
    Storage,
    Vendor,
    Firmware,
}

impl InterfaceKind {
    /// Every kind: deploy, power and management, then the others in name order.
    pub const ALL: [InterfaceKind; 13] = [
        InterfaceKind::Deploy,
        InterfaceKind::Power,
        InterfaceKind::Management,
        InterfaceKind::Bios,
        InterfaceKind::Boot,
        InterfaceKind::Console,
        InterfaceKind::Firmware,
        InterfaceKind::Inspect,
        InterfaceKind::Network,
        InterfaceKind::Raid,
        InterfaceKind::Rescue,
        InterfaceKind::Storage,
        InterfaceKind::Vendor,
    ];

    /// The kinds the conductor only stores and validates, in name order.
    pub const PASSIVE: [InterfaceKind; 6] = [
        InterfaceKind::Console,
        InterfaceKind::Inspect,
        InterfaceKind::Network,
        InterfaceKind::Raid,
        InterfaceKind::Rescue,
        InterfaceKind::Storage,
    ];

    /// Ironic's name of the kind: `deploy`, `bios`, ...
    pub fn name(self) -> &'static str {
        match self {
            InterfaceKind::Deploy => "deploy",
            InterfaceKind::Power => "power",
            InterfaceKind::Management => "management",
            InterfaceKind::Bios => "bios",
            InterfaceKind::Boot => "boot",
            InterfaceKind::Console => "console",
            InterfaceKind::Inspect => "inspect",
            InterfaceKind::Network => "network",
            InterfaceKind::Raid => "raid",
            InterfaceKind::Rescue => "rescue",
            InterfaceKind::Storage => "storage",
            InterfaceKind::Vendor => "vendor",
            InterfaceKind::Firmware => "firmware",
        }
    }

    /// The node field (and column) naming the interface: `deploy_interface`, ...
    pub fn field(self) -> &'static str {
        match self {
            InterfaceKind::Deploy => "deploy_interface",
            InterfaceKind::Power => "power_interface",
            InterfaceKind::Management => "management_interface",
            InterfaceKind::Bios => "bios_interface",
            InterfaceKind::Boot => "boot_interface",
            InterfaceKind::Console => "console_interface",
            InterfaceKind::Inspect => "inspect_interface",
            InterfaceKind::Network => "network_interface",
            InterfaceKind::Raid => "raid_interface",
            InterfaceKind::Rescue => "rescue_interface",
            InterfaceKind::Storage => "storage_interface",
            InterfaceKind::Vendor => "vendor_interface",
            InterfaceKind::Firmware => "firmware_interface",
        }
    }

    /// The kind a field names (`deploy_interface` → deploy).
    pub fn from_field(field: &str) -> Option<InterfaceKind> {
        InterfaceKind::ALL.into_iter().find(|k| k.field() == field)
    }

    pub fn from_name(name: &str) -> Option<InterfaceKind> {
        InterfaceKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// The interface of each kind a node uses.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Queryable, Selectable, Insertable,
)]
#[diesel(table_name = crate::schema::nodes)]
pub struct Interfaces {
    #[diesel(column_name = deploy_interface)]
    #[serde(rename = "deploy_interface")]
    pub deploy: String,
    #[diesel(column_name = power_interface)]
    #[serde(rename = "power_interface")]
    pub power: String,
    #[diesel(column_name = management_interface)]
    #[serde(rename = "management_interface")]
    pub management: String,
    // Bios, rescue and storage came with API 1.33-1.40: defaulted (to the column defaults of
    // migration 000004) so that a node sent by an older release still decodes.
    #[diesel(column_name = bios_interface)]
    #[serde(rename = "bios_interface", default = "default_bios")]
    pub bios: String,
    #[diesel(column_name = boot_interface)]
    #[serde(rename = "boot_interface")]
    pub boot: String,
    #[diesel(column_name = console_interface)]
    #[serde(rename = "console_interface")]
    pub console: String,
    #[diesel(column_name = inspect_interface)]
    #[serde(rename = "inspect_interface")]
    pub inspect: String,
    #[diesel(column_name = network_interface)]
    #[serde(rename = "network_interface")]
    pub network: String,
    #[diesel(column_name = raid_interface)]
    #[serde(rename = "raid_interface")]
    pub raid: String,
    #[diesel(column_name = rescue_interface)]
    #[serde(rename = "rescue_interface", default = "default_rescue")]
    pub rescue: String,
    #[diesel(column_name = storage_interface)]
    #[serde(rename = "storage_interface", default = "default_storage")]
    pub storage: String,
    #[diesel(column_name = vendor_interface)]
    #[serde(rename = "vendor_interface")]
    pub vendor: String,
    // API 1.86, defaulted as `bios` is.
    #[diesel(column_name = firmware_interface)]
    #[serde(rename = "firmware_interface", default = "default_firmware")]
    pub firmware: String,
}

fn default_bios() -> String {
    "no-bios".to_owned()
}

fn default_firmware() -> String {
    "no-firmware".to_owned()
}

fn default_rescue() -> String {
    "no-rescue".to_owned()
}

fn default_storage() -> String {
    "noop".to_owned()
}

/// The field of `$owner` (an [`Interfaces`] or an [`InterfaceChanges`], whose fields are named
/// after the kinds) for `kind`: `field_of_kind!(kind, &self)` is `&self.deploy` for Deploy.
macro_rules! field_of_kind {
    ($kind:expr, $($owner:tt)+) => {
        match $kind {
            InterfaceKind::Deploy => $($owner)+.deploy,
            InterfaceKind::Power => $($owner)+.power,
            InterfaceKind::Management => $($owner)+.management,
            InterfaceKind::Bios => $($owner)+.bios,
            InterfaceKind::Boot => $($owner)+.boot,
            InterfaceKind::Console => $($owner)+.console,
            InterfaceKind::Inspect => $($owner)+.inspect,
            InterfaceKind::Network => $($owner)+.network,
            InterfaceKind::Raid => $($owner)+.raid,
            InterfaceKind::Rescue => $($owner)+.rescue,
            InterfaceKind::Storage => $($owner)+.storage,
            InterfaceKind::Vendor => $($owner)+.vendor,
            InterfaceKind::Firmware => $($owner)+.firmware,
        }
    };
}

impl Interfaces {
    pub fn get(&self, kind: InterfaceKind) -> &str {
        field_of_kind!(kind, &self)
    }

    fn get_mut(&mut self, kind: InterfaceKind) -> &mut String {
        field_of_kind!(kind, &mut self)
    }

    /// The passive interfaces by kind, as [`InterfaceKind::PASSIVE`] orders them.
    pub fn passive(&self) -> impl Iterator<Item = (InterfaceKind, &str)> {
        InterfaceKind::PASSIVE
            .into_iter()
            .map(move |kind| (kind, self.get(kind)))
    }
}

/// The interfaces a change sets, by kind; None leaves one alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, AsChangeset)]
#[diesel(table_name = crate::schema::nodes)]
pub struct InterfaceChanges {
    #[diesel(column_name = deploy_interface)]
    pub deploy: Option<String>,
    #[diesel(column_name = power_interface)]
    pub power: Option<String>,
    #[diesel(column_name = management_interface)]
    pub management: Option<String>,
    #[diesel(column_name = bios_interface)]
    pub bios: Option<String>,
    #[diesel(column_name = boot_interface)]
    pub boot: Option<String>,
    #[diesel(column_name = console_interface)]
    pub console: Option<String>,
    #[diesel(column_name = inspect_interface)]
    pub inspect: Option<String>,
    #[diesel(column_name = network_interface)]
    pub network: Option<String>,
    #[diesel(column_name = raid_interface)]
    pub raid: Option<String>,
    #[diesel(column_name = rescue_interface)]
    pub rescue: Option<String>,
    #[diesel(column_name = storage_interface)]
    pub storage: Option<String>,
    #[diesel(column_name = vendor_interface)]
    pub vendor: Option<String>,
    #[diesel(column_name = firmware_interface)]
    pub firmware: Option<String>,
}

impl InterfaceChanges {
    fn slot(&mut self, kind: InterfaceKind) -> &mut Option<String> {
        field_of_kind!(kind, &mut self)
    }

    pub fn get(&self, kind: InterfaceKind) -> Option<&str> {
        field_of_kind!(kind, &self).as_deref()
    }

    pub fn set(&mut self, kind: InterfaceKind, name: String) {
        *self.slot(kind) = Some(name);
    }

    /// Which interfaces change, a bit each (in `InterfaceKind::ALL` order).
    pub fn shape(&self) -> u128 {
        InterfaceKind::ALL
            .into_iter()
            .enumerate()
            .filter(|(_, kind)| self.get(*kind).is_some())
            .fold(0, |shape, (bit, _)| shape | 1 << bit)
    }

    /// Whether any interface changes.
    pub fn any(&self) -> bool {
        InterfaceKind::ALL
            .into_iter()
            .any(|k| self.get(k).is_some())
    }

    pub(super) fn set_into(self, interfaces: &mut Interfaces) {
        let mut changes = self;
        for kind in InterfaceKind::ALL {
            if let Some(name) = changes.slot(kind).take() {
                *interfaces.get_mut(kind) = name;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_name_their_fields() {
        for kind in InterfaceKind::ALL {
            assert_eq!(kind.field(), format!("{}_interface", kind.name()));
            assert_eq!(InterfaceKind::from_field(kind.field()), Some(kind));
            assert_eq!(InterfaceKind::from_name(kind.name()), Some(kind));
        }
        assert_eq!(InterfaceKind::from_field("bogus_interface"), None);
        let passive: Vec<_> = InterfaceKind::PASSIVE.iter().map(|k| k.name()).collect();
        let mut sorted = passive.clone();
        sorted.sort_unstable();
        assert_eq!(passive, sorted);
    }
}
