//! The fake power interface: the fake machine is in the power state it was last put in, and a
//! test can make a power change fail (`driver_info.fake_power_fail`).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::{
    drivers::{DriverError, PowerInterface},
    node::{Node, PowerState, PowerTarget},
};

pub struct FakePower;

#[async_trait]
impl PowerInterface for FakePower {
    fn name(&self) -> &'static str {
        "fake"
    }

    /// The fake machine is in whatever state it was last put in (off when new).
    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError> {
        Ok(node.power_state.unwrap_or(PowerState::Off))
    }

    async fn change_power(
        &self,
        node: &Node,
        target: PowerTarget,
        _timeout: Duration,
    ) -> Result<(), DriverError> {
        let change = if target.reboots() {
            "rebooting"
        } else {
            target.resulting_state().api_name()
        };
        fake_power_failure(node, change)
    }
}

/// A power change fails with `driver_info.fake_power_fail`'s text when it is set, so a test can
/// see a failed power change (its notifications, its `last_error`); an object fails only the
/// changes it names (`{"power off": "why"}`; `rebooting` for a reboot). Not among the
/// properties: those stay Ironic's fake power's (none).
fn fake_power_failure(node: &Node, change: &str) -> Result<(), DriverError> {
    let why = match node.driver_info.get("fake_power_fail") {
        Some(Value::String(why)) => Some(why.as_str()),
        Some(Value::Object(by_change)) => by_change.get(change).and_then(Value::as_str),
        _ => None,
    };
    why.map_or(Ok(()), |why| Err(DriverError::Failed(why.to_owned())))
}
