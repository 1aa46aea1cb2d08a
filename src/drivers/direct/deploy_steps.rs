//! The work of the direct deploy's steps that is more than a call: booting the deploy ramdisk
//! (prepared by the node's boot interface), having the agent write the image, making the node
//! boot from its disk, and powering the node off once the agent is done. Cleaning boots the
//! ramdisk with the same function.

use serde_json::{Value, json};

use super::{
    DirectDeploy, POWER_TIMEOUT,
    agent::{node_for_agent, refresh_steps},
    image::{agent_write_image_step, is_partition_image},
};
use crate::{
    config::ImageDownloadSource,
    drivers::{
        DriverError, StepContext, StepDone,
        agent_client::{AgentClient, CommandStatus},
        local_image::LocalImages,
    },
    node::{Node, PowerState},
};

/// Boots the deploy ramdisk: the node's boot interface prepares its next boot
/// (`drivers::boot`), then the node is (re)started and the agent waited for. A boot that cannot
/// be prepared whole, or a node that cannot be started, leaves nothing published: no boot
/// files, no DHCP allowance.
pub(super) async fn boot_ramdisk(
    node: &Node,
    ctx: &StepContext<'_>,
) -> Result<StepDone, DriverError> {
    let undo = async |e: DriverError| {
        if let Err(undo) = ctx.driver.boot.clean_up_ramdisk(node, ctx.driver).await {
            tracing::warn!(node.uuid = %node.uuid, error = %undo, "Failed to undo the ramdisk's boot of node {} that did not start", node.uuid);
        }
        e
    };
    let remember = match ctx.driver.boot.prepare_ramdisk(node, ctx).await {
        Ok(remember) => remember,
        Err(e) => return Err(undo(e).await),
    };
    // The power-on reads what preparing the boot recorded (a boot device kept to be set again
    // before each power-on must not undo the one-time boot just set).
    let mut booting = node.clone();
    booting.driver_internal_info.extend(remember.clone());
    let started = match ctx.driver.power.get_power_state(&booting).await {
        Ok(PowerState::On) => ctx.driver.power.reboot(&booting, POWER_TIMEOUT).await,
        Ok(PowerState::Off) => ctx
            .driver
            .power
            .set_power_state(&booting, PowerState::On, POWER_TIMEOUT)
            .await
            .map(|_| ()),
        Err(e) => Err(e),
    };
    if let Err(e) = started {
        return Err(undo(e).await);
    }
    Ok(StepDone {
        power: Some(PowerState::On),
        remember,
        ..StepDone::wait()
    })
}

/// Has the agent write the image, asynchronously: the deploy waits for the command. A `local`
/// image is downloaded, checked and converted by the conductor first.
pub(super) async fn write_image(
    node: &Node,
    ctx: &StepContext<'_>,
    images: &LocalImages,
) -> Result<StepDone, DriverError> {
    let agent = AgentClient::for_node(node)?;
    let mut done = StepDone::wait();
    let version = refresh_steps(&agent, node, ctx, &mut done).await?;
    let local = match images.source_for(node)? {
        ImageDownloadSource::Http => None,
        ImageDownloadSource::Local => {
            let source = DirectDeploy::image_source(node)?;
            tracing::info!(node.uuid = %node.uuid, "Downloading and converting image {source} for node {}", node.uuid);
            Some(images.prepare(node, source).await?)
        }
    };
    let result = agent
        .command(
            "deploy.execute_deploy_step",
            json!({
                "step": agent_write_image_step(node, ctx.config.stream_raw_images, local.as_ref())?,
                "node": node_for_agent(node),
                "ports": ctx.ports,
                "deploy_version": version,
            }),
            false,
        )
        .await?;
    match result.status() {
        CommandStatus::Running => Ok(done),
        // The agent had written this very image already (it caches by image id).
        CommandStatus::Succeeded => {
            done.waits = false;
            Ok(done)
        }
        CommandStatus::Failed | CommandStatus::VersionMismatch | CommandStatus::Other(_) => {
            Err(DriverError::Failed(format!(
                "Deploy step deploy.write_image failed on node {}. {}",
                node.uuid,
                result.error_text()
            )))
        }
    }
}

/// Reads the written disk's identifier from the agent and makes the node boot from its disk
/// (Ironic's `prepare_instance_boot` and the boot interface's local boot).
pub(super) async fn prepare_instance_boot(
    node: &Node,
    ctx: &StepContext<'_>,
) -> Result<StepDone, DriverError> {
    let agent = AgentClient::for_node(node)?;
    let uuids = agent
        .run("standby.get_partition_uuids", json!({}))
        .await
        .map_err(|e| DriverError::Failed(format!("Failed to prepare instance for booting: {e}")))?
        .unwrap_or(Value::Null);
    let mut done = StepDone::done();
    if let Some(root) = uuids.get("root uuid").filter(|v| !v.is_null()) {
        done.remember
            .insert("root_uuid_or_disk_id".into(), root.clone());
    } else if is_partition_image(node) {
        tracing::error!(node.uuid = %node.uuid, partitions = %uuids,
            "No root UUID returned from the ramdisk for node {}, the deploy will likely fail", node.uuid);
    }
    // The ramdisk's boot is undone (its ISO ejected, its network boot withdrawn) and the disk
    // boots from now on.
    let kept = ctx
        .driver
        .boot
        .prepare_instance(node, ctx.driver)
        .await
        .map_err(|e| DriverError::Failed(format!("Failed to prepare instance for booting: {e}")))?;
    done.remember.extend(kept);
    tracing::info!(node.uuid = %node.uuid, "Image successfully written to node {}", node.uuid);
    Ok(done)
}

/// Powers the node off after the image is written (Ironic's `tear_down_agent`): out of band
/// after the agent flushed its writes when `deploy_forces_oob_reboot`, else by the agent, with
/// the power state watched and forced off when it does not go.
pub(super) async fn tear_down_agent(
    node: &Node,
    ctx: &StepContext<'_>,
) -> Result<StepDone, DriverError> {
    let agent = AgentClient::for_node(node)?;
    let fail = |e: DriverError| {
        DriverError::Failed(format!(
            "Error rebooting node {} after deploy. {e}",
            node.uuid
        ))
    };
    let power = ctx.driver.power.as_ref();
    if node.disable_power_off {
        // A node that may not be powered off (API 1.95) is rebooted into its instance. Ironic
        // first locks the agent down (`system.lockdown`) and waits for it to go; Ferrum only
        // flushes its file systems, as Ironic does for a power interface that cannot power on:
        // the reboot ends the agent all the same.
        tracing::info!(node.uuid = %node.uuid,
            "Node {} does not support power off, rebooting it into the instance", node.uuid);
        if let Err(e) = agent.run("standby.sync", json!({})).await {
            tracing::warn!(node.uuid = %node.uuid,
                "Failed to flush the file system prior to rebooting the node {}: {e}", node.uuid);
        }
        power.reboot(node, POWER_TIMEOUT).await.map_err(fail)?;
        return Ok(StepDone {
            power: Some(PowerState::On),
            ..StepDone::done()
        });
    }
    if oob_reboot(node) {
        if let Err(e) = agent.run("standby.sync", json!({})).await {
            tracing::warn!(node.uuid = %node.uuid,
                "Failed to flush the file system prior to hard rebooting the node {}: {e}", node.uuid);
        }
    } else {
        if let Err(e) = agent.command("standby.power_off", json!({}), false).await {
            tracing::warn!(node.uuid = %node.uuid, "Failed to soft power off node {}. {e}", node.uuid);
        }
        let mut attempts = ctx.config.agent_power_off_retries + 1;
        loop {
            if matches!(power.get_power_state(node).await, Ok(PowerState::Off)) {
                return Ok(StepDone {
                    power: Some(PowerState::Off),
                    ..StepDone::done()
                });
            }
            attempts -= 1;
            if attempts == 0 {
                break;
            }
            tokio::time::sleep(ctx.config.agent_power_off_retry_interval).await;
        }
        tracing::warn!(node.uuid = %node.uuid,
            "Failed to soft power off node {} in time. Forcing hard power off and proceeding.", node.uuid);
    }
    power
        .set_power_state(node, PowerState::Off, POWER_TIMEOUT)
        .await
        .map_err(fail)?;
    Ok(StepDone {
        power: Some(PowerState::Off),
        ..StepDone::done()
    })
}

/// `driver_info.deploy_forces_oob_reboot`, read as oslo reads a boolean.
fn oob_reboot(node: &Node) -> bool {
    match node.driver_info.get("deploy_forces_oob_reboot") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => matches!(
            s.trim().to_ascii_lowercase().as_str(),
            "true" | "1" | "yes" | "on" | "t" | "y"
        ),
        _ => false,
    }
}
