//! `fake-hardware`: interfaces that succeed without hardware, for tests and benchmarks.
//!
//! The fake deploy reads two optional `driver_info` keys so tests can observe the middle of a
//! deploy and its failure paths: `fake_deploy_delay` (seconds the deploy takes) and
//! `fake_deploy_panic` (a message the deploy panics with, to prove a panicking driver cannot wedge
//! a node). Each run of the deploy step logs "fake deploy started on node <uuid>" at INFO.
//!
//! The fake management interface remembers the boot device it was last set to, and the fake
//! vendor interface offers the methods of Ironic's (`FakeVendorB`), each taking the configured
//! `fake_vendor_delay` (Ironic's `[fake]vendor_delay`).
//!
//! Tests that build the service in process can also hand the fake deploy a [`DeployGate`]: each
//! deploy (and each manual cleaning's ramdisk preparation) then waits at it until the test lets
//! it through, so a test knows the node is in
//! `deploying` with its lock held for as long as it likes, without timing anything. The service
//! itself never sets one.
//!
//! Each interface is in a file of its own (`power.rs`, `management.rs`, `vendor.rs`,
//! `deploy.rs`, and `step_interfaces.rs` for BIOS and firmware); here they make the hardware type.

mod deploy;
mod management;
mod power;
mod step_interfaces;
mod vendor;

use std::sync::Arc;

pub use self::{
    deploy::{DeployGate, FakeDeploy},
    management::FakeManagement,
    power::FakePower,
    step_interfaces::{FakeBios, FakeFirmware},
    vendor::FakeVendor,
};
use super::{
    HardwareType, NoSteps, NoVendor, boot::FakeBoot, direct::DirectDeploy, local_image::LocalImages,
};
use crate::config::ConductorConfig;
use crate::node::InterfaceKind;

/// `fake-hardware`; with a gate, every fake deploy waits at it (see [`DeployGate`]); each fake
/// vendor method takes `vendor_delay`.
///
/// The order of each kind is Ironic's (`ironic/drivers/fake_hardware.py` over
/// `generic.GenericHardware`): `fake` first, then the generic ones, so a node gets the first
/// enabled one (`driver_factory.default_interface`). Storage is the exception: Ironic lists
/// `fake` first too, but its `default_storage_interface` is `noop` unless configured, which the
/// order here stands for.
pub fn hardware_type(gate: Option<DeployGate>, config: &ConductorConfig) -> HardwareType {
    HardwareType {
        name: "fake-hardware",
        consoles: vec![],
        passive: vec![
            (
                InterfaceKind::Console,
                vec!["fake", "no-console", "fake-graphical"],
            ),
            (InterfaceKind::Inspect, vec!["fake", "agent", "no-inspect"]),
            (InterfaceKind::Network, vec!["flat", "noop"]),
            (InterfaceKind::Raid, vec!["fake", "no-raid"]),
            (InterfaceKind::Storage, vec!["noop", "fake"]),
            (InterfaceKind::Rescue, vec!["fake", "no-rescue"]),
        ],
        power: vec![Arc::new(FakePower)],
        management: vec![Arc::new(FakeManagement)],
        boot: vec![Arc::new(FakeBoot)],
        deploy: vec![
            Arc::new(FakeDeploy { gate }),
            Arc::new(DirectDeploy {
                images: LocalImages::new(config),
            }),
        ],
        vendor: vec![
            Arc::new(FakeVendor {
                delay: config.fake_vendor_delay,
            }),
            Arc::new(NoVendor),
        ],
        bios: vec![Arc::new(FakeBios), Arc::new(NoSteps("no-bios"))],
        firmware: vec![Arc::new(FakeFirmware), Arc::new(NoSteps("no-firmware"))],
    }
}
