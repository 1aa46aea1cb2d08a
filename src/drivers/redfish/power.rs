//! The `redfish` power interface: power changes and reboots by `ComputerSystem.Reset` (Ironic's
//! reset types), the boot device a BMC would not keep persistently set again before a power on.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{
    client::Connections,
    driver_info::{PROPERTIES, parse_driver_info},
    management::{ONE_TIME_DEVICE_KEY, redfish_target},
    system::System,
};
use crate::{
    drivers::{BootDevice, DriverError, PowerInterface, Properties},
    node::{Node, PowerState, PowerTarget},
};

pub struct RedfishPower {
    pub(super) connections: Arc<Connections>,
}

impl RedfishPower {
    /// Sets the boot device the BMC would not keep persistently again, before a power on
    /// (Ironic's `restore_boot_device`, called from its power interface); a failure is only
    /// logged, the machine booting from its configured order.
    async fn restore_boot_device(&self, system: &System, node: &Node) {
        if node.interfaces.management != "redfish" {
            return;
        }
        let Some(device) = node
            .driver_internal_info
            .get(ONE_TIME_DEVICE_KEY)
            .and_then(Value::as_str)
            .and_then(|d| BootDevice::parse(d).ok())
        else {
            return;
        };
        let Some(target) = redfish_target(device) else {
            return;
        };
        tracing::debug!(node.uuid = %node.uuid, "Restoring boot device {device:?} on node {}", node.uuid);
        let body = json!({"Boot": {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Once"}});
        if let Err(e) = system.bmc.patch(&system.path, &body).await {
            tracing::warn!(node.uuid = %node.uuid,
                "Unable to recover boot device {target} for node {}, relying on the pre-configured boot order. Error: {e}",
                node.uuid);
        }
    }
}

#[async_trait]
impl PowerInterface for RedfishPower {
    fn name(&self) -> &'static str {
        "redfish"
    }

    fn properties(&self) -> Properties {
        PROPERTIES
    }

    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        parse_driver_info(node).map(|_| ())
    }

    /// `scheme://host[:port]` as `parse_driver_info` reads it (the host lower-cased, a port
    /// that is the scheme's default left out), so one BMC has one name however it is written.
    fn bmc(&self, node: &Node) -> Option<String> {
        parse_driver_info(node).ok().map(|info| info.address)
    }

    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError> {
        System::of(&self.connections, node)
            .await?
            .power_state()
            .await
    }

    async fn change_power(
        &self,
        node: &Node,
        target: PowerTarget,
        timeout: Duration,
    ) -> Result<(), DriverError> {
        let system = System::of(&self.connections, node).await?;
        let current = system.power_state().await?;
        let what = target.api_name();
        match target {
            PowerTarget::On | PowerTarget::Off | PowerTarget::SoftOff => {
                let state = target.resulting_state();
                // Ironic's conductor leaves a node alone that is already in the state asked.
                if current == state {
                    return Ok(());
                }
                if state == PowerState::On {
                    self.restore_boot_device(&system, node).await;
                }
                let reset = match target {
                    PowerTarget::On => "On",
                    PowerTarget::Off => "ForceOff",
                    _ => "GracefulShutdown",
                };
                system.reset_and_wait(reset, state, timeout, what).await
            }
            PowerTarget::SoftReboot => {
                self.restore_boot_device(&system, node).await;
                if current == PowerState::Off {
                    return system
                        .reset_and_wait("On", PowerState::On, timeout, what)
                        .await;
                }
                system
                    .reset_and_wait("GracefulRestart", PowerState::On, timeout, what)
                    .await
            }
            PowerTarget::Reboot => {
                let reboot_failed = |e: DriverError, state: &str| {
                    DriverError::Failed(format!(
                        "Reboot failed for node {} when setting power state to {state}. Error: {e}",
                        node.uuid
                    ))
                };
                if current == PowerState::On && node.disable_power_off {
                    self.restore_boot_device(&system, node).await;
                    return system
                        .reset_and_wait("ForceRestart", PowerState::On, timeout, what)
                        .await
                        .map_err(|e| reboot_failed(e, "rebooting"));
                }
                if current == PowerState::On {
                    system
                        .reset_and_wait("ForceOff", PowerState::Off, timeout, "power off")
                        .await
                        .map_err(|e| reboot_failed(e, "power off"))?;
                }
                self.restore_boot_device(&system, node).await;
                system
                    .reset_and_wait("On", PowerState::On, timeout, "power on")
                    .await
                    .map_err(|e| reboot_failed(e, "power on"))
            }
        }
    }
}
