//! The node's Redfish `ComputerSystem`, found on its BMC: reading it, its power state (Ironic's
//! map), and a `ComputerSystem.Reset` followed by reading the power state until it is the one
//! asked for.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    client::{Bmc, Connections, RedfishError},
    driver_info::parse_driver_info,
};
use crate::{
    drivers::DriverError,
    node::{Node, PowerState},
};

/// The node's BMC and the path of its system.
pub(super) struct System {
    pub(super) bmc: Bmc,
    pub(super) path: String,
}

impl System {
    /// Connects to the node's BMC and finds its system: `redfish_system_id`, else the one
    /// system the BMC manages (sushy's default system).
    pub(super) async fn of(connections: &Connections, node: &Node) -> Result<System, DriverError> {
        let info = parse_driver_info(node)?;
        let bmc = connections.bmc(&info, &node.uuid)?;
        let path = match &info.system_id {
            Some(id) if id.starts_with('/') => id.clone(),
            Some(id) => format!("{}Systems/{id}", bmc.root()),
            None => {
                let systems = bmc
                    .get(&format!("{}Systems", bmc.root()))
                    .await
                    .map_err(|e| e.into_driver(&node.uuid, ""))?;
                let members: Vec<&str> = systems
                    .get("Members")
                    .and_then(Value::as_array)
                    .map(|m| {
                        m.iter()
                            .filter_map(|m| m.get("@odata.id").and_then(Value::as_str))
                            .collect()
                    })
                    .unwrap_or_default();
                match members.as_slice() {
                    [one] => (*one).to_owned(),
                    [] => {
                        return Err(DriverError::Failed(format!(
                            "Redfish exception occurred. Error: the BMC of node {} manages no system",
                            node.uuid
                        )));
                    }
                    many => {
                        return Err(DriverError::InvalidParameterValue(format!(
                            "The BMC of node {} manages {} systems; set driver_info/redfish_system_id to the path of one of them, e.g. {}",
                            node.uuid,
                            many.len(),
                            many[0]
                        )));
                    }
                }
            }
        };
        Ok(System { bmc, path })
    }

    pub(super) async fn get(&self) -> Result<Value, DriverError> {
        self.bmc.get(&self.path).await.map_err(|e| self.fail(e, ""))
    }

    pub(super) fn fail(&self, e: RedfishError, context: &str) -> DriverError {
        if e.status() == Some(reqwest::StatusCode::NOT_FOUND) && context.is_empty() {
            return DriverError::Failed(format!(
                "Redfish exception occurred. Error: the Redfish System \"{}\" was not found for node {}: {e}",
                self.path,
                self.bmc.node()
            ));
        }
        e.into_driver(self.bmc.node(), context)
    }

    pub(super) async fn power_state(&self) -> Result<PowerState, DriverError> {
        let system = self.get().await?;
        read_power_state(&system).ok_or_else(|| {
            DriverError::Failed(format!(
                "Redfish exception occurred. Error: the BMC of node {} reports the power state {} which is neither on nor off",
                self.bmc.node(),
                system.get("PowerState").unwrap_or(&Value::Null)
            ))
        })
    }

    /// Posts `ComputerSystem.Reset` with `reset_type`, to the target the system names.
    pub(super) async fn reset(&self, reset_type: &str) -> Result<(), RedfishError> {
        let target = format!("{}/Actions/ComputerSystem.Reset", self.path);
        self.bmc
            .post(&target, &json!({ "ResetType": reset_type }))
            .await
    }

    /// Reads the power state until it is `target`, or fails once `timeout` has passed.
    async fn wait_for(&self, target: PowerState, timeout: Duration) -> Result<(), DriverError> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.power_state().await? == target {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(DriverError::Failed(format!(
                    "Timed out after {} secs waiting for {target} on node {}.",
                    timeout.as_secs(),
                    self.bmc.node()
                )));
            }
            tokio::time::sleep(POWER_POLL_INTERVAL.min(deadline - Instant::now())).await;
        }
    }

    /// Resets with `reset_type` to reach `target`, and waits for it. A BMC refusing the reset
    /// with 400 or 409 when the system is already in the target state is a success (Ironic's
    /// handling of BMCs that refuse a no-op).
    pub(super) async fn reset_and_wait(
        &self,
        reset_type: &str,
        target: PowerState,
        timeout: Duration,
        what: &str,
    ) -> Result<(), DriverError> {
        if let Err(e) = self.reset(reset_type).await {
            let no_op = matches!(
                e.status(),
                Some(reqwest::StatusCode::BAD_REQUEST | reqwest::StatusCode::CONFLICT)
            ) && self.power_state().await.ok() == Some(target);
            if !no_op {
                return Err(self.fail(
                    e,
                    &format!(
                        "Setting power state to {what} failed for node {}. Error: ",
                        self.bmc.node()
                    ),
                ));
            }
        }
        self.wait_for(target, timeout).await
    }
}

/// How often the power state is read while a change is awaited.
const POWER_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Ironic's map of a system's `PowerState`.
fn read_power_state(system: &Value) -> Option<PowerState> {
    match system.get("PowerState").and_then(Value::as_str)? {
        "On" | "PoweringOn" => Some(PowerState::On),
        "Off" | "PoweringOff" => Some(PowerState::Off),
        _ => None,
    }
}
