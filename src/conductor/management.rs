//! Management requested through the API (`/v1/nodes/{id}/management/...`): the boot device and
//! NMIs, each a driver call the client waits for, and the boot mode and secure boot (API 1.76,
//! `/states/boot_mode`, `/states/secure_boot`), under the lock Ironic's conductor takes for
//! it (`set_boot_device`, `get_boot_device`, `inject_nmi` take the exclusive lock, as a BMC
//! serves one session at a time; `get_supported_boot_devices` the shared one, which takes
//! nothing). No maintenance or provision-state rule applies, as in Ironic, but for virtual
//! media (1.89, 1.93): attaching or detaching it under the exclusive lock, listing it under the
//! shared one, and neither on a node in maintenance for a power failure.

use tokio::time::Instant;

use super::{
    Ctx,
    task::{Task, with_lock},
    worker::{hw, hw_now},
};
use crate::{
    drivers::{
        BootDevice, BootDeviceSetting, DriverError, IndicatorState, Indicators, ManagementInterface,
    },
    error::{Error, Result},
    node::{Json, Node, NodeChanges, management::BootSetting},
};

/// The node's management interface, its configuration checked (a failure is the client's 400).
fn management(task: &Task) -> Result<std::sync::Arc<dyn ManagementInterface>> {
    let node = &task.node;
    let management = task.ctx().drivers.for_node(node)?.management;
    management
        .validate(node)
        .map_err(|e| e.into_error(&node.driver))?;
    Ok(management)
}

pub async fn get_supported_boot_devices(ctx: &Ctx, node: Node) -> Result<Vec<BootDevice>> {
    let task = Task::shared(ctx, node);
    let management = ctx.drivers.for_node(&task.node)?.management;
    hw_now(&task, management.supported_boot_devices(&task.node)).await
}

pub async fn get_boot_device(
    ctx: &Ctx,
    node: Node,
    deadline: Option<Instant>,
) -> Result<BootDeviceSetting> {
    with_lock(ctx, &node.uuid, deadline, async |task| {
        let management = management(task)?;
        hw_now(task, management.get_boot_device(&task.node)).await
    })
    .await
}

/// Sets the boot device, and records on the node what the driver asks to keep, releasing the
/// lock in the same statement.
pub async fn set_boot_device(
    ctx: &Ctx,
    node: Node,
    device: BootDevice,
    persistent: bool,
    deadline: Option<Instant>,
) -> Result<()> {
    with_lock(ctx, &node.uuid, deadline, async |task| {
        let management = management(task)?;
        let record = hw_now(
            task,
            management.set_boot_device(&task.node, device, persistent),
        )
        .await?;
        record_and_release(task, record).await
    })
    .await
}

/// Records on the node the `driver_internal_info` keys a driver asked to keep (a null value
/// removes its key), releasing the lock in the same statement (nothing to write: the lock scope
/// releases it).
async fn record_and_release(task: &mut Task, record: crate::node::JsonObject) -> Result<()> {
    if record.is_empty() {
        return Ok(());
    }
    let mut info = task.node.driver_internal_info.0.clone();
    for (key, value) in record {
        if value.is_null() {
            info.remove(&key);
        } else {
            info.insert(key, value);
        }
    }
    let changes = NodeChanges {
        driver_internal_info: Some(Json(info)),
        ..NodeChanges::default()
    };
    task.write(changes.release()).await
}

pub async fn inject_nmi(ctx: &Ctx, node: Node, deadline: Option<Instant>) -> Result<()> {
    with_lock(ctx, &node.uuid, deadline, async |task| {
        let management = management(task)?;
        hw_now(task, management.inject_nmi(&task.node)).await
    })
    .await
}

/// The indicators (1.63), under the shared lock as Ironic (it takes nothing).
pub async fn get_supported_indicators(ctx: &Ctx, node: Node) -> Result<Indicators> {
    let task = Task::shared(ctx, node);
    let management = management(&task)?;
    hw_now(&task, management.supported_indicators(&task.node)).await
}

/// An indicator's state, under the shared lock: reading an LED takes no BMC session of its own
/// in the drivers Ferrum has.
pub async fn get_indicator_state(
    ctx: &Ctx,
    node: Node,
    component: &str,
    indicator: &str,
) -> Result<IndicatorState> {
    let task = Task::shared(ctx, node);
    let management = management(&task)?;
    hw_now(
        &task,
        management.get_indicator_state(&task.node, component, indicator),
    )
    .await
}

/// Sets an indicator under the exclusive lock, recording what the driver asks to keep.
pub async fn set_indicator_state(
    ctx: &Ctx,
    node: Node,
    component: &str,
    indicator: &str,
    state: IndicatorState,
    deadline: Option<Instant>,
) -> Result<()> {
    with_lock(ctx, &node.uuid, deadline, async |task| {
        let management = management(task)?;
        let record = hw_now(
            task,
            management.set_indicator_state(&task.node, component, indicator, state),
        )
        .await?;
        record_and_release(task, record).await
    })
    .await
}

/// The machine's current value of `setting`'s kind; unreadable is unknown (logged), as Ironic's
/// `node_change_boot_mode` and `node_change_secure_boot` go on without it.
async fn current(
    task: &Task,
    management: &dyn ManagementInterface,
    setting: BootSetting,
) -> Result<Option<BootSetting>> {
    let node = &task.node;
    let read = match setting {
        BootSetting::Mode(_) => hw(task, management.get_boot_mode(node))
            .await
            .map_err(Error::TemporaryFailure)?
            .map(|mode| mode.map(BootSetting::Mode)),
        BootSetting::SecureBoot(_) => hw(task, management.get_secure_boot_state(node))
            .await
            .map_err(Error::TemporaryFailure)?
            .map(|on| Some(BootSetting::SecureBoot(on))),
    };
    Ok(read.unwrap_or_else(|e| {
        tracing::warn!(node.uuid = %node.uuid, error = %e,
            "Could not read the {} of node {} while changing it: {e}", setting.what(), node.uuid);
        None
    }))
}

/// Gives the machine `setting`; the outer error is the conductor's (shut down), the inner the
/// machine's refusal.
async fn set(
    task: &Task,
    management: &dyn ManagementInterface,
    setting: BootSetting,
) -> Result<std::result::Result<(), DriverError>> {
    let node = &task.node;
    match setting {
        BootSetting::Mode(mode) => hw(task, management.set_boot_mode(node, mode)).await,
        BootSetting::SecureBoot(on) => hw(task, management.set_secure_boot_state(node, on)).await,
    }
    .map_err(Error::TemporaryFailure)
}

/// Changes the boot mode or secure boot (API 1.76, Ironic's `change_node_boot_mode`,
/// `change_node_secure_boot` and their `utils.node_change_*`) under the exclusive lock:
/// `last_error` cleared, the current value read (unreadable is unknown), nothing done when the
/// machine already has `setting`, else set; the node's field written after the driver's call, or
/// the failure recorded in `last_error` (the client was already answered 202 in Ironic, so it is
/// not the client's error), releasing the lock in the same statement. A management interface
/// that fails validation is the client's 400.
pub async fn change_boot_setting(
    ctx: &Ctx,
    node: Node,
    setting: BootSetting,
    deadline: Option<Instant>,
) -> Result<()> {
    with_lock(ctx, &node.uuid, deadline, async |task| {
        crate::drivers::refuse_unstable(&task.node)?;
        let management = management(task)?;
        let mut changes = NodeChanges {
            last_error: Some(None),
            ..NodeChanges::default()
        };
        if current(task, &*management, setting).await? != Some(setting) {
            match set(task, &*management, setting).await? {
                Ok(()) => match setting {
                    BootSetting::Mode(mode) => {
                        changes.boot_mode = Some(Some(mode.api_name().to_owned()));
                    }
                    BootSetting::SecureBoot(on) => changes.secure_boot = Some(Some(on)),
                },
                Err(e) => changes.last_error = Some(Some(setting.failure(&e))),
            }
        }
        task.write(changes.release()).await
    })
    .await
}

/// Ironic's conductor refuses virtual media on a node in maintenance for a power failure.
fn refuse_on_power_failure(node: &Node, what: &str) -> Result<()> {
    if node.maintenance && node.fault.as_deref() == Some("power failure") {
        return Err(Error::TemporaryFailure(format!(
            "Unable to {what} virtual media for node {} due to power failure state",
            node.uuid
        )));
    }
    Ok(())
}

/// Attaches virtual media (1.89) under the exclusive lock, recording what the driver keeps.
/// Ironic's conductor runs the driver call after replying and records a failure in the node's
/// history; Ferrum's drivers answer at once, so the client is answered with the outcome.
pub async fn attach_virtual_media(
    ctx: &Ctx,
    node: Node,
    device: BootDevice,
    image_url: &str,
    deadline: Option<Instant>,
) -> Result<()> {
    with_lock(ctx, &node.uuid, deadline, async |task| {
        let management = management(task)?;
        refuse_on_power_failure(&task.node, "attach")?;
        let record = hw_now(
            task,
            management.attach_virtual_media(&task.node, device, image_url),
        )
        .await?;
        record_and_release(task, record).await
    })
    .await
}

/// Detaches the virtual media of `devices` (all when None) under the exclusive lock.
pub async fn detach_virtual_media(
    ctx: &Ctx,
    node: Node,
    devices: Option<Vec<BootDevice>>,
    deadline: Option<Instant>,
) -> Result<()> {
    with_lock(ctx, &node.uuid, deadline, async |task| {
        let management = management(task)?;
        refuse_on_power_failure(&task.node, "detach")?;
        let record = hw_now(
            task,
            management.detach_virtual_media(&task.node, devices.as_deref()),
        )
        .await?;
        record_and_release(task, record).await
    })
    .await
}

/// The node's virtual media (1.93), under the shared lock as Ironic (it takes nothing).
pub async fn get_virtual_media(ctx: &Ctx, node: Node) -> Result<Vec<serde_json::Value>> {
    let task = Task::shared(ctx, node);
    let management = management(&task)?;
    hw_now(&task, management.get_virtual_media(&task.node)).await
}
