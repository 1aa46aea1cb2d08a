//! Power changes requested through the API (`PUT /v1/nodes/{id}/states/power`).

use std::time::Duration;

use tokio::{sync::OwnedSemaphorePermit, time::Instant};

use super::{
    Ctx,
    provision::{Work, hw, spawn_worker},
    task::{Decision, Hold, Task, change_node},
};
use crate::{
    drivers::Driver,
    error::{Error, Result},
    node::{Node, NodeChanges, PowerState, PowerTarget},
    states::ProvisionState,
};

pub async fn change_node_power_state(
    ctx: &Ctx,
    node: Node,
    requested: PowerTarget,
    timeout: Option<u32>,
    deadline: Option<Instant>,
) -> Result<()> {
    let (target, reboot) = (requested.resulting_state(), requested.reboots());
    let timeout = Duration::from_secs(u64::from(timeout.unwrap_or(60)));
    let uuid = node.uuid.clone();
    let mut permit: Option<OwnedSemaphorePermit> = None;
    let (_, task) = change_node(ctx, &uuid, Some(node), deadline, |node| {
        if matches!(
            node.provision_state,
            ProvisionState::Cleaning | ProvisionState::CleanWait
        ) {
            return Err(Error::InvalidStateRequested {
                action: requested.api_name().to_owned(),
                node: node.uuid.clone(),
                state: node.provision_state.api_name().to_owned(),
            });
        }
        let driver = ctx.drivers.for_node(node)?;
        driver.power.validate(node).map_err(|e| {
            Error::InvalidParameterValue(format!(
                "Failed to validate power driver interface for node {}: {e}",
                node.uuid
            ))
        })?;
        if permit.is_none() {
            permit = Some(
                ctx.workers
                    .clone()
                    .try_acquire_owned()
                    .map_err(|_| Error::NoFreeConductorWorker)?,
            );
        }
        let mut changes = NodeChanges::default().last_error(None);
        changes.target_power_state = Some(Some(target));
        Ok(Decision::Write(changes, Hold::Keep))
    })
    .await?;
    if let (Some(task), Some(permit)) = (task, permit) {
        let driver = ctx.drivers.for_node(&task.node)?;
        let work = Work::Power {
            target,
            reboot,
            requested: requested.api_name(),
            timeout,
        };
        spawn_worker(task, driver, work, permit);
    }
    Ok(())
}

/// The worker half: drive the hardware, then record the new state and release the lock.
pub(super) async fn set_power(
    task: &mut Task,
    driver: &Driver,
    target: PowerState,
    reboot: bool,
    requested: &str,
    timeout: Duration,
) -> std::result::Result<(), String> {
    let done = if reboot {
        hw(task, driver.power.reboot(&task.node, timeout)).await?
    } else {
        hw(
            task,
            driver.power.set_power_state(&task.node, target, timeout),
        )
        .await?
    };
    done.map_err(|e| {
        format!(
            "Failed to change power state to '{}' by '{requested}': {e}",
            target.api_name()
        )
    })?;
    let changes = NodeChanges::default().power(Some(target), None).release();
    task.write(changes)
        .await
        .map_err(|e| format!("Failed to record the power state: {e}"))
}
