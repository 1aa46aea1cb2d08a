//! `ipmi`: the hardware type of servers whose BMC speaks IPMI over LAN, driven by `ipmitool` as
//! Ironic's `ipmi` hardware type drives them: the `ipmitool` power and management interfaces,
//! `ipxe` and `pxe` as boot interfaces (`drivers::boot`), the `direct` deploy.
//!
//! The node's `driver_info` is read as Ironic's `_parse_driver_info` reads it, with its messages
//! (`driver_info.rs`); `ipmi_password` is masked wherever a node is shown, as every key naming a
//! password (`node::mask`), and reaches `ipmitool` only in a file (`ipmitool.rs`, which also
//! retries, kills a command that hangs and keeps commands to one BMC apart).
//!
//! Power ([`IpmiPower`], `power.rs`): `power on|off|soft`, a reboot as Ironic's (off, then on;
//! `power reset` with `disable_power_off`), each waited for by reading `power status`.
//! Management ([`IpmiManagement`], `management.rs`): the boot device (raw Set System Boot
//! Options with the EFI bit in UEFI mode, `chassis bootdev` in BIOS mode), read back from
//! `chassis bootparam get 5`; NMIs by `power diag`. Console ([`SocatConsole`], `console.rs`):
//! `ipmitool-socat`, the serial-over-LAN console on a TCP port.

mod console;
mod driver_info;
mod ipmitool;
mod management;
mod power;

use std::sync::Arc;

pub use self::{
    console::SocatConsole,
    driver_info::{IpmiInfo, Protocol, parse_driver_info},
    management::IpmiManagement,
    power::IpmiPower,
};
use self::{ipmitool::Ipmitool, management::BootSettings};
use super::{HardwareType, NoSteps, NoVendor, direct::DirectDeploy, local_image::LocalImages};
use crate::{config::ConductorConfig, node::InterfaceKind};

/// `ipmi`, its `ipmitool` runner set up as `config` says.
pub fn hardware_type(config: &ConductorConfig) -> HardwareType {
    let tool = Arc::new(Ipmitool::new(ipmitool::Settings {
        command_retry_timeout: config.ipmi_command_retry_timeout,
        min_command_interval: config.ipmi_min_command_interval,
    }));
    let boot = BootSettings {
        disable_boot_timeout: config.ipmi_disable_boot_timeout,
    };
    let console = SocatConsole::new(
        tool.clone(),
        config.console_socat_address.clone(),
        config.console_terminal_timeout,
    );
    HardwareType {
        name: "ipmi",
        consoles: vec![Arc::new(console)],
        passive: vec![
            // Ironic lists `ipmitool-socat` first but enables only `no-console` by default, so
            // a node gets no console unless it asks for one: the same default here.
            (InterfaceKind::Console, vec!["no-console", "ipmitool-socat"]),
            (InterfaceKind::Inspect, vec!["no-inspect", "agent"]),
            // Ironic's generic order: `flat` first (`generic.GenericHardware`).
            (InterfaceKind::Network, vec!["flat", "noop"]),
            (InterfaceKind::Raid, vec!["no-raid"]),
            (InterfaceKind::Storage, vec!["noop"]),
            (InterfaceKind::Rescue, vec!["no-rescue"]),
        ],
        power: vec![Arc::new(IpmiPower {
            tool: tool.clone(),
            boot,
        })],
        management: vec![Arc::new(IpmiManagement { tool, boot })],
        // `ipxe` the default, as in Ironic's default `enabled_boot_interfaces`.
        boot: super::boot::network_boot(&super::boot::BootSettings::new(config)),
        deploy: vec![Arc::new(DirectDeploy {
            images: LocalImages::new(config),
        })],
        vendor: vec![Arc::new(NoVendor)],
        bios: vec![Arc::new(NoSteps("no-bios"))],
        firmware: vec![Arc::new(NoSteps("no-firmware"))],
    }
}
