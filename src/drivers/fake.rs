//! `fake-hardware`: interfaces that succeed without hardware, for tests and benchmarks.
//!
//! The fake deploy reads two optional `driver_info` keys so tests can observe the middle of a
//! deploy and its failure paths: `fake_deploy_delay` (seconds the deploy takes) and
//! `fake_deploy_panic` (a message the deploy panics with, to prove a panicking driver cannot wedge
//! a node). Each run of the deploy step logs "fake deploy started on node <uuid>" at INFO.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use tracing::info;

use super::{
    DeployInterface, DeployOutcome, DriverError, HardwareType, ManagementInterface, PowerInterface,
    direct::DirectDeploy,
};
use crate::node::{InterfaceKind, Node, PowerState};

pub fn hardware_type() -> HardwareType {
    HardwareType {
        name: "fake-hardware",
        passive: &[
            (InterfaceKind::Boot, &["fake"]),
            (InterfaceKind::Console, &["no-console", "fake"]),
            (InterfaceKind::Inspect, &["no-inspect", "fake"]),
            (InterfaceKind::Network, &["noop", "flat"]),
            (InterfaceKind::Raid, &["no-raid", "fake"]),
            (InterfaceKind::Vendor, &["no-vendor", "fake"]),
            (InterfaceKind::Storage, &["noop", "fake"]),
            (InterfaceKind::Rescue, &["no-rescue", "fake"]),
            (InterfaceKind::Bios, &["no-bios", "fake"]),
        ],
        power: vec![Arc::new(FakePower)],
        management: vec![Arc::new(FakeManagement)],
        deploy: vec![Arc::new(FakeDeploy), Arc::new(DirectDeploy)],
    }
}

pub struct FakePower;

#[async_trait]
impl PowerInterface for FakePower {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }

    /// The fake machine is in whatever state it was last put in (off when new).
    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError> {
        Ok(node.power_state.unwrap_or(PowerState::Off))
    }

    async fn set_power_state(
        &self,
        _node: &Node,
        _target: PowerState,
        _timeout: Duration,
    ) -> Result<(), DriverError> {
        Ok(())
    }

    async fn reboot(&self, _node: &Node, _timeout: Duration) -> Result<(), DriverError> {
        Ok(())
    }
}

pub struct FakeManagement;

impl ManagementInterface for FakeManagement {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
}

pub struct FakeDeploy;

impl FakeDeploy {
    fn delay(node: &Node) -> Result<Option<Duration>, DriverError> {
        match node.driver_info.get("fake_deploy_delay") {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|s| (0.0..=3600.0).contains(s))
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .map(Some)
                .ok_or_else(|| {
                    DriverError::InvalidParameterValue(format!(
                        "driver_info/fake_deploy_delay must be 0 to 3600 seconds, not {v}"
                    ))
                }),
        }
    }
}

#[async_trait]
impl DeployInterface for FakeDeploy {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        Self::delay(node).map(|_| ())
    }

    async fn prepare(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }

    async fn deploy(&self, node: &Node) -> Result<DeployOutcome, DriverError> {
        // One stable line per run of the deploy step: the fault suite counts them to find a
        // deploy that ran twice.
        let uuid = &node.uuid;
        info!(node.uuid = %uuid, "fake deploy started on node {uuid}");
        if let Some(delay) = Self::delay(node)? {
            tokio::time::sleep(delay).await;
        }
        if let Some(message) = node.driver_info.get("fake_deploy_panic") {
            panic!("fake deploy asked to panic: {message}");
        }
        Ok(DeployOutcome::Done)
    }

    async fn tear_down(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }

    async fn clean_up(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
}
