//! The `ipmitool` power interface: `power status|on|off|soft|reset` and Ironic's reboot (off,
//! then on), each followed by reading the state until it is the one asked for, within the
//! timeout the conductor gives; the boot device set again before a power on where the node asks
//! for it (`ipmi_force_boot_device`).

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use tokio::time::Instant;

use super::{
    driver_info::{IpmiInfo, PROPERTIES, parse_driver_info, validate_address},
    ipmitool::Ipmitool,
    management::{self, BootSettings},
};
use crate::{
    drivers::{DriverError, PowerInterface, Properties},
    node::{Node, PowerState, PowerTarget},
};

pub struct IpmiPower {
    pub(super) tool: Arc<Ipmitool>,
    pub(super) boot: BootSettings,
}

impl IpmiPower {
    /// `power status`: Ironic reads exactly these two answers; anything else is a failure.
    pub(super) async fn power_status(
        &self,
        info: &IpmiInfo,
        node: &Node,
    ) -> Result<PowerState, DriverError> {
        let out = self
            .tool
            .run(info, &node.uuid, &["power", "status"])
            .await?;
        match out.stdout.trim() {
            "Chassis Power is on" => Ok(PowerState::On),
            "Chassis Power is off" => Ok(PowerState::Off),
            other => Err(DriverError::Failed(format!(
                "IPMI call failed: power status. Error: the BMC of node {} answered {other:?}",
                node.uuid
            ))),
        }
    }

    /// `power <action>`, then the state read until it is `target` (Ironic's `_set_and_wait`).
    async fn set_and_wait(
        &self,
        info: &IpmiInfo,
        node: &Node,
        action: &str,
        target: PowerState,
        timeout: Duration,
    ) -> Result<(), DriverError> {
        let deadline = Instant::now() + timeout;
        self.tool.run(info, &node.uuid, &["power", action]).await?;
        // Each read waits for the BMC's turn (`min_command_interval`), so this loop needs no
        // pause of its own beyond a short one when the interval is zero.
        loop {
            if self.power_status(info, node).await? == target {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(DriverError::Failed(format!(
                    "Timed out after {} secs waiting for {target} on node {}.",
                    timeout.as_secs(),
                    node.uuid
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Powers on, setting the boot device again first where the node asks for it.
    async fn power_on(
        &self,
        info: &IpmiInfo,
        node: &Node,
        timeout: Duration,
    ) -> Result<(), DriverError> {
        management::ensure_next_boot_device(&self.tool, &self.boot, info, node).await;
        self.set_and_wait(info, node, "on", PowerState::On, timeout)
            .await
    }
}

#[async_trait]
impl PowerInterface for IpmiPower {
    fn name(&self) -> &'static str {
        "ipmitool"
    }

    fn properties(&self) -> Properties {
        PROPERTIES
    }

    /// Ironic's: `driver_info` and the address read; the BMC is not touched (BMCs are fragile
    /// and validate is called often).
    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        let info = parse_driver_info(node)?;
        validate_address(&info, node)
    }

    fn bmc(&self, node: &Node) -> Option<String> {
        parse_driver_info(node).ok().map(|info| info.bmc())
    }

    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError> {
        let info = parse_driver_info(node)?;
        self.power_status(&info, node).await
    }

    async fn change_power(
        &self,
        node: &Node,
        target: PowerTarget,
        timeout: Duration,
    ) -> Result<(), DriverError> {
        let info = parse_driver_info(node)?;
        // Ironic's conductor leaves a node alone that is already in the state asked.
        if !target.reboots() && self.power_status(&info, node).await? == target.resulting_state() {
            return Ok(());
        }
        match target {
            PowerTarget::On => self.power_on(&info, node, timeout).await,
            PowerTarget::Off => {
                self.set_and_wait(&info, node, "off", PowerState::Off, timeout)
                    .await
            }
            PowerTarget::SoftOff => {
                self.set_and_wait(&info, node, "soft", PowerState::Off, timeout)
                    .await
            }
            PowerTarget::SoftReboot => {
                if node.disable_power_off {
                    // ipmitool has no graceful restart.
                    return Err(DriverError::Failed(format!(
                        "Node {} hardware does not support feature soft power off, which is required.",
                        node.uuid
                    )));
                }
                if self.power_status(&info, node).await? != PowerState::Off {
                    self.set_and_wait(&info, node, "soft", PowerState::Off, timeout)
                        .await?;
                }
                self.power_on(&info, node, timeout).await
            }
            PowerTarget::Reboot => {
                if node.disable_power_off {
                    management::ensure_next_boot_device(&self.tool, &self.boot, &info, node).await;
                    return self
                        .set_and_wait(&info, node, "reset", PowerState::On, timeout)
                        .await;
                }
                // Some BMCs refuse to power off a machine that is off (Ironic's note).
                if self.power_status(&info, node).await? != PowerState::Off {
                    self.set_and_wait(&info, node, "off", PowerState::Off, timeout)
                        .await
                        .map_err(|e| reboot_failed(node, e, "power off"))?;
                }
                self.power_on(&info, node, timeout)
                    .await
                    .map_err(|e| reboot_failed(node, e, "power on"))
            }
        }
    }
}

fn reboot_failed(node: &Node, e: DriverError, state: &str) -> DriverError {
    DriverError::Failed(format!(
        "Reboot failed for node {} when setting power state to {state}. Error: {e}",
        node.uuid
    ))
}
