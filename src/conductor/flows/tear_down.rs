//! Tear down (`deleted`): the instance undone and forgotten, the node powered off, then
//! automated cleaning (`TearDown`).

use tokio::time::Instant;

use super::{
    clean::clean, power_off_or_reboot, service::ServiceSteps, start, step_runner::StepRun,
};
use crate::{
    conductor::{
        Ctx,
        task::Task,
        worker::{Failure, Flow, hw},
    },
    drivers::Driver,
    error::{Error, Result},
    node::{Json, Node, NodeChanges, without_agent_boot},
    states::Event,
};

pub async fn do_node_tear_down(ctx: &Ctx, node: Node, deadline: Option<Instant>) -> Result<()> {
    start(ctx, node, deadline, "deleted", Event::Delete, |node, _| {
        if node.protected {
            return Err(Error::NodeProtected {
                node: node.uuid.clone(),
            });
        }
        // A servicing torn down from `service wait` or `service failed` is forgotten.
        let mut info = without_agent_boot(&node.driver_internal_info);
        let (steps, index) = ServiceSteps.keys();
        info.remove(steps);
        info.remove(index);
        Ok(NodeChanges {
            driver_internal_info: Some(Json(info)),
            service_step: Some(Json::default()),
            ..NodeChanges::default()
        })
    })
    .await
}

/// Tearing the instance down, run by a worker ([`tear_down`]); the node goes on to automated
/// cleaning.
pub(super) struct TearDown;

#[async_trait::async_trait]
impl Flow for TearDown {
    fn name(&self) -> &'static str {
        "Tear down"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        tear_down(task, driver).await
    }

    fn failure(&self, _: &Node, _: &str) -> Failure {
        Failure::fail_edge()
    }
}

/// Tear down, power off, forget the instance, then automated cleaning.
async fn tear_down(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    hw(task, driver.deploy.tear_down(&task.node))
        .await?
        .map_err(|e| format!("Failed to tear down: {e}"))?;
    // A node that may not be powered off (API 1.95) is rebooted out of its instance instead,
    // as Ironic's `clean_up` does for it.
    let power = power_off_or_reboot(task, driver)
        .await
        .map_err(|e| format!("Failed to tear down: {e}"))?;
    hw(task, driver.deploy.clean_up_boot(&task.node, driver))
        .await?
        .map_err(|e| format!("Failed to tear down: {e}"))?;
    let mut changes = NodeChanges::default().power(Some(power), None);
    changes.instance_info = Some(Json::default());
    changes.instance_uuid = Some(None);
    changes.instance_name = Some(None);
    changes.deploy_step = Some(Json::default());
    // The node's allocation (API 1.52) ends with its instance, as in Ironic's tear-down: only a
    // node that has one pays the one more statement.
    let allocation = task.node.allocation_uuid.clone();
    if allocation.is_some() {
        changes.allocation_uuid = Some(None);
    }
    task.process_event(Event::Clean, true, changes)
        .await
        .map_err(|e| format!("Failed to tear down: {e}"))?;
    if let Some(allocation) = allocation
        && let Err(e) = crate::db::allocations::delete(&task.ctx().db, &allocation).await
    {
        tracing::warn!(node.uuid = %task.node.uuid, "Could not delete allocation {allocation} after tear-down: {e}");
    }
    clean(task, driver).await
}
