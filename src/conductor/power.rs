//! Power changes requested through the API (`PUT /v1/nodes/{id}/states/power`): the check
//! under the lock, and the change itself as a flow (`PowerChange`) run by a worker. A power
//! change never changes the provision state.

use std::time::Duration;

use tokio::time::Instant;

use super::{
    Ctx,
    task::{Decision, Hold, Task, change_node},
    worker::{Failure, Flow, Worker, hw},
};
use crate::{
    drivers::Driver,
    error::{Error, Result},
    node::{Node, NodeChanges, PowerState, PowerTarget},
    notifications::{Status, node as notify_node},
};

pub async fn change_node_power_state(
    ctx: &Ctx,
    node: Node,
    requested: PowerTarget,
    timeout: Option<u32>,
    deadline: Option<Instant>,
) -> Result<()> {
    let target = requested.resulting_state();
    // Ironic's defaults: `soft_power_off_timeout` for a soft target, else
    // `power_state_change_timeout`, unless the request gives its own.
    let timeout = match timeout {
        Some(t) => Duration::from_secs(u64::from(t)),
        None if requested.is_soft() => ctx.config.soft_power_off_timeout,
        None => ctx.config.power_state_change_timeout,
    };
    let uuid = node.uuid.clone();
    let mut worker: Option<Worker> = None;
    let (_, task) = change_node(ctx, &uuid, Some(node), deadline, |node| {
        if !node.provision_state.power_change_allowed() {
            return Err(Error::InvalidStateRequested {
                action: requested.api_name().to_owned(),
                node: node.uuid.clone(),
                state: node.provision_state.api_name().to_owned(),
            });
        }
        // Ironic checks this in the API and again in `node_power_action`; here it is checked
        // once, under the lock, on the node as read.
        if target == PowerState::Off && node.disable_power_off {
            tracing::error!(node.uuid = %node.uuid,
                "Refusing to power off node {} with disable_power_off flag set", node.uuid);
            return Err(Error::PowerStateFailure {
                target: requested.api_name().to_owned(),
            });
        }
        let driver = ctx.drivers.for_node(node)?;
        driver.power.validate(node).map_err(|e| {
            Error::InvalidParameterValue(format!(
                "Failed to validate power driver interface for node {}: {e}",
                node.uuid
            ))
        })?;
        Worker::reserve(ctx, &mut worker)?;
        let mut changes = NodeChanges::default().last_error(None);
        changes.target_power_state = Some(Some(target));
        Ok(Decision::Write(changes, Hold::Keep))
    })
    .await?;
    if let (Some(task), Some(worker)) = (task, worker) {
        tracing::info!(node.uuid = %uuid, target = requested.api_name(),
            "Node {uuid} power change to '{}' accepted", requested.api_name());
        let change = PowerChange { requested, timeout };
        worker.run(task, change)?;
    }
    Ok(())
}

/// The worker half of a power change.
struct PowerChange {
    requested: PowerTarget,
    timeout: Duration,
}

#[async_trait::async_trait]
impl Flow for PowerChange {
    fn name(&self) -> &'static str {
        "Power change"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        set_power(task, driver, self.requested, self.timeout).await
    }

    /// A failed power change drops the pending target and leaves the provision state alone.
    fn failure(&self, _: &Node, _: &str) -> Failure {
        Failure {
            extra: NodeChanges {
                target_power_state: Some(None),
                ..NodeChanges::default()
            },
            fail_edge: false,
        }
    }

    /// `baremetal.node.power_set.error`, once the failure is written (Ironic's
    /// `node_power_action` saves `last_error`, then notifies).
    fn failed(&self, ctx: &Ctx, node: &Node) {
        ctx.notifier.emit("node", "power_set", Status::Error, || {
            notify_node::power_set(node, self.requested)
        });
    }

    /// Announced after each write, as Ironic's `node_power_action` does.
    fn announces_power(&self) -> bool {
        true
    }
}

/// Drive the hardware, then record the new state and release the lock.
async fn set_power(
    task: &mut Task,
    driver: &Driver,
    requested: PowerTarget,
    timeout: Duration,
) -> std::result::Result<(), String> {
    let target = requested.resulting_state();
    // Ironic's `node_power_action` announces the change before it calls the driver.
    task.ctx()
        .notifier
        .emit("node", "power_set", Status::Start, || {
            notify_node::power_set(&task.node, requested)
        });
    hw(
        task,
        driver.power.change_power(&task.node, requested, timeout),
    )
    .await?
    .map_err(|e| {
        format!(
            "Failed to change power state to '{}' by '{}': {e}",
            target.api_name(),
            requested.api_name()
        )
    })?;
    let changes = NodeChanges::default().power(Some(target), None).release();
    task.write(changes)
        .await
        .map_err(|e| format!("Failed to record the power state: {e}"))?;
    tracing::info!(node.uuid = %task.node.uuid, power_state = target.api_name(),
        "Node {} power state set to '{}' by '{}'", task.node.uuid, target.api_name(), requested.api_name());
    task.ctx()
        .notifier
        .emit("node", "power_set", Status::End, || {
            notify_node::power_set(&task.node, requested)
        });
    Ok(())
}
