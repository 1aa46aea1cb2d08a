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
    pub const PASSIVE: [InterfaceKind; 7] = [
        InterfaceKind::Boot,
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

impl Interfaces {
    pub fn get(&self, kind: InterfaceKind) -> &str {
        match kind {
            InterfaceKind::Deploy => &self.deploy,
            InterfaceKind::Power => &self.power,
            InterfaceKind::Management => &self.management,
            InterfaceKind::Bios => &self.bios,
            InterfaceKind::Boot => &self.boot,
            InterfaceKind::Console => &self.console,
            InterfaceKind::Inspect => &self.inspect,
            InterfaceKind::Network => &self.network,
            InterfaceKind::Raid => &self.raid,
            InterfaceKind::Rescue => &self.rescue,
            InterfaceKind::Storage => &self.storage,
            InterfaceKind::Vendor => &self.vendor,
            InterfaceKind::Firmware => &self.firmware,
        }
    }

    fn get_mut(&mut self, kind: InterfaceKind) -> &mut String {
        match kind {
            InterfaceKind::Deploy => &mut self.deploy,
            InterfaceKind::Power => &mut self.power,
            InterfaceKind::Management => &mut self.management,
            InterfaceKind::Bios => &mut self.bios,
            InterfaceKind::Boot => &mut self.boot,
            InterfaceKind::Console => &mut self.console,
            InterfaceKind::Inspect => &mut self.inspect,
            InterfaceKind::Network => &mut self.network,
            InterfaceKind::Raid => &mut self.raid,
            InterfaceKind::Rescue => &mut self.rescue,
            InterfaceKind::Storage => &mut self.storage,
            InterfaceKind::Vendor => &mut self.vendor,
            InterfaceKind::Firmware => &mut self.firmware,
        }
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
        match kind {
            InterfaceKind::Deploy => &mut self.deploy,
            InterfaceKind::Power => &mut self.power,
            InterfaceKind::Management => &mut self.management,
            InterfaceKind::Bios => &mut self.bios,
            InterfaceKind::Boot => &mut self.boot,
            InterfaceKind::Console => &mut self.console,
            InterfaceKind::Inspect => &mut self.inspect,
            InterfaceKind::Network => &mut self.network,
            InterfaceKind::Raid => &mut self.raid,
            InterfaceKind::Rescue => &mut self.rescue,
            InterfaceKind::Storage => &mut self.storage,
            InterfaceKind::Vendor => &mut self.vendor,
            InterfaceKind::Firmware => &mut self.firmware,
        }
    }

    pub fn get(&self, kind: InterfaceKind) -> Option<&str> {
        match kind {
            InterfaceKind::Deploy => self.deploy.as_deref(),
            InterfaceKind::Power => self.power.as_deref(),
            InterfaceKind::Management => self.management.as_deref(),
            InterfaceKind::Bios => self.bios.as_deref(),
            InterfaceKind::Boot => self.boot.as_deref(),
            InterfaceKind::Console => self.console.as_deref(),
            InterfaceKind::Inspect => self.inspect.as_deref(),
            InterfaceKind::Network => self.network.as_deref(),
            InterfaceKind::Raid => self.raid.as_deref(),
            InterfaceKind::Rescue => self.rescue.as_deref(),
            InterfaceKind::Storage => self.storage.as_deref(),
            InterfaceKind::Vendor => self.vendor.as_deref(),
            InterfaceKind::Firmware => self.firmware.as_deref(),
        }
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
