//! The work of the direct deploy's steps that is more than a call: booting the deploy ramdisk
//! (with the deploy ISO in the virtual CD for `redfish-virtual-media`), having the agent write
//! the image, making the node boot from its disk, and powering the node off once the agent is
//! done. Cleaning boots the ramdisk and ejects the ISO with the same functions.

use serde_json::{Value, json};

use super::{
    DirectDeploy, POWER_TIMEOUT,
    agent::{node_for_agent, refresh_steps},
    image::{agent_write_image_step, is_partition_image},
};
use crate::{
    config::ImageDownloadSource,
    drivers::{
        BootDevice, DriverError, ManagementInterface, StepContext, StepDone,
        agent_client::{AgentClient, CommandStatus},
        local_image::LocalImages,
    },
    node::{JsonObject, Node, PowerState},
};

/// Boots the deploy ramdisk: (re)starts the node, then waits for its agent. With the
/// `redfish-virtual-media` boot interface the deploy ISO goes into the virtual CD first.
pub(super) async fn boot_ramdisk(
    node: &Node,
    ctx: &StepContext<'_>,
) -> Result<StepDone, DriverError> {
    let remember = insert_deploy_iso(node, ctx).await?;
    let power = ctx.driver.power.get_power_state(node).await?;
    match power {
        PowerState::On => ctx.driver.power.reboot(node, POWER_TIMEOUT).await?,
        PowerState::Off => {
            ctx.driver
                .power
                .set_power_state(node, PowerState::On, POWER_TIMEOUT)
                .await?;
        }
    }
    Ok(StepDone {
        power: Some(PowerState::On),
        remember,
        ..StepDone::wait()
    })
}

/// The boot interface that inserts the deploy ISO as virtual media.
const VMEDIA_BOOT: &str = "redfish-virtual-media";

/// With the `redfish-virtual-media` boot interface: the deploy ISO (`driver_info.deploy_iso`,
/// an http(s) URL) inserted into the node's virtual CD and the CD set as its next boot device
/// (Ironic's `RedfishVirtualMediaBoot.prepare_ramdisk`, without building an ISO from
/// `deploy_kernel` and `deploy_ramdisk`, which Ferrum does not do yet). What the management
/// interface asks to keep is returned to be remembered.
async fn insert_deploy_iso(node: &Node, ctx: &StepContext<'_>) -> Result<JsonObject, DriverError> {
    if node.interfaces.boot != VMEDIA_BOOT {
        return Ok(JsonObject::new());
    }
    let iso = node
        .driver_info
        .get("deploy_iso")
        .and_then(Value::as_str)
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        .ok_or_else(|| {
            DriverError::InvalidParameterValue(format!(
                "Node {} boots by redfish-virtual-media: driver_info deploy_iso must be the http(s) URL of the deploy ISO (Ferrum does not build one from deploy_kernel and deploy_ramdisk yet)",
                node.uuid
            ))
        })?;
    let management = &ctx.driver.management;
    let mut kept = management
        .attach_virtual_media(node, BootDevice::Cdrom, iso)
        .await?;
    kept.extend(
        management
            .set_boot_device(node, BootDevice::Cdrom, false)
            .await?,
    );
    Ok(kept)
}

/// With the `redfish-virtual-media` boot interface: the virtual CD ejected (Ironic's
/// `_eject_all` of the boot interface, for the CD: Ferrum inserts nothing else).
pub(super) async fn eject_deploy_iso(
    node: &Node,
    management: &dyn ManagementInterface,
) -> Result<(), DriverError> {
    if node.interfaces.boot != VMEDIA_BOOT {
        return Ok(());
    }
    management
        .detach_virtual_media(node, Some(&[BootDevice::Cdrom]))
        .await
        .map(|_| ())
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
    // The ramdisk's work is done: its ISO leaves the virtual CD before the disk boots.
    eject_deploy_iso(node, ctx.driver.management.as_ref())
        .await
        .map_err(|e| DriverError::Failed(format!("Failed to prepare instance for booting: {e}")))?;
    let kept = ctx
        .driver
        .management
        .set_boot_device(node, BootDevice::Disk, true)
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
