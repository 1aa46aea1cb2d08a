//! `redfish`: the hardware type of servers whose BMC speaks DMTF Redfish, with Ironic's `redfish`
//! power and management interfaces, `ipxe` (the default, as Ironic's `enabled_boot_interfaces`
//! puts it first), `pxe` and `redfish-virtual-media` as boot interfaces (`drivers::boot`), and
//! the `direct` deploy.
//!
//! The node's `driver_info` is read as Ironic's `redfish_utils.parse_driver_info` reads it, with
//! its messages ([`parse_driver_info`], `driver_info.rs`); `redfish_password` is masked wherever
//! a node is shown, as every key naming a password (`node::mask`). The HTTP client is
//! `client.rs`; the node's system on its BMC, found and reset, is `system.rs`.
//!
//! Power ([`RedfishPower`], `power.rs`): the system's `PowerState`, and `ComputerSystem.Reset`
//! with the reset types of Ironic's map (on `On`, off `ForceOff`, soft off `GracefulShutdown`, soft
//! reboot `GracefulRestart`); a reboot is Ironic's: `ForceOff` and, once off, `On` (or
//! `ForceRestart` with `disable_power_off`). Every change is followed by reading the state
//! until it is the one asked for, every half second, within the timeout the conductor gives
//! (`power_state_change_timeout`, `soft_power_off_timeout`, or the request's own).
//!
//! Management ([`RedfishManagement`], `management.rs`): the boot device through
//! `Boot.BootSourceOverride*`, sending `BootSourceOverrideEnabled` only when it differs from what
//! the BMC reports, and Ironic's fallback when a BMC refuses a persistent setting: a one-time
//! setting, with the device kept in `driver_internal_info.redfish_boot_device` and set again
//! before every power on or reboot. A BMC that ignores `Once` (sushy-tools always reports
//! `Continuous`) is reported as it reports itself, as Ironic does. Boot mode through
//! `BootSourceOverrideMode`, NMIs through the reset type `Nmi`, the system's indicator LED, and
//! virtual media through the system's (else its managers') `VirtualMedia` members.

mod boot;
pub mod client;
mod driver_info;
mod management;
mod power;
mod system;

use std::sync::Arc;

use self::{
    boot::VirtualMediaBoot,
    client::{ClientSettings, Connections},
};
pub use self::{
    driver_info::{
        AuthType, RedfishInfo, VerifyCa, parse_driver_info, validate_virtual_media_boot,
    },
    management::RedfishManagement,
    power::RedfishPower,
};
use super::boot::BootSettings;
use super::{HardwareType, NoSteps, NoVendor, direct::DirectDeploy, local_image::LocalImages};
use crate::{config::ConductorConfig, node::InterfaceKind};

/// `redfish`, its clients made as `config` says.
pub fn hardware_type(config: &ConductorConfig) -> HardwareType {
    let connections = Arc::new(Connections::new(ClientSettings {
        connection_attempts: config.redfish_connection_attempts,
        connection_retry_interval: config.redfish_connection_retry_interval,
        ..ClientSettings::default()
    }));
    HardwareType {
        name: "redfish",
        consoles: vec![],
        passive: vec![
            // Ironic's generic consoles follow its Redfish and IPMI ones (not built here).
            (InterfaceKind::Console, vec!["no-console", "fake-graphical"]),
            (InterfaceKind::Inspect, vec!["no-inspect", "agent"]),
            // Ironic's generic order: `flat` first (`generic.GenericHardware`).
            (InterfaceKind::Network, vec!["flat", "noop"]),
            (InterfaceKind::Raid, vec!["no-raid"]),
            (InterfaceKind::Storage, vec!["noop"]),
            (InterfaceKind::Rescue, vec!["no-rescue"]),
        ],
        power: vec![Arc::new(RedfishPower {
            connections: connections.clone(),
        })],
        management: vec![Arc::new(RedfishManagement { connections })],
        boot: {
            let settings = BootSettings::new(config);
            let mut boot = super::boot::network_boot(&settings);
            boot.push(Arc::new(VirtualMediaBoot { settings }));
            boot
        },
        deploy: vec![Arc::new(DirectDeploy {
            images: LocalImages::new(config),
        })],
        vendor: vec![Arc::new(NoVendor)],
        bios: vec![Arc::new(NoSteps("no-bios"))],
        firmware: vec![Arc::new(NoSteps("no-firmware"))],
    }
}
