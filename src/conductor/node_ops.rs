//! Creating, updating (PATCH) and destroying nodes: the checks that need the node's driver or its
//! lock, as Ironic's `create_node`, `update_node` and `destroy_node` do them.

use tokio::time::Instant;

use super::{
    Ctx,
    task::{Decision, Hold, change_node, with_lock},
    worker::hw,
};
use serde_json::Value;

use crate::{
    db, drivers,
    error::{Error, Result},
    node::{self, InterfaceKind, Json, JsonObject, Node, NodeChanges},
    patch::{self, PatchOp},
    rpc::{InterfaceValidation, NodeCreate},
    states::ProvisionState,
};

pub async fn create(ctx: &Ctx, n: NodeCreate) -> Result<Node> {
    let interfaces = ctx.drivers.resolve_all(&n.driver, |kind| {
        n.fields.get(kind.field()).and_then(Value::as_str)
    })?;
    let request_id = super::task::REQUEST_ID.try_with(Clone::clone).ok();
    let mut row = Node {
        uuid: n.uuid,
        driver: n.driver,
        conductor_group: n.conductor_group,
        interfaces,
        provision_state: n.initial_state,
        created_at: node::now(),
        last_request_id: request_id.clone(),
        ..Node::default()
    };
    patch::changes_for_create(&row, n.fields)?.set_into(&mut row);
    let uuid = row.uuid.clone();
    let created = match db::nodes::insert(&ctx.db, &row).await {
        // The first attempt of this very request created it (its answer was lost with a
        // conductor, and the API sent the request on with the node's UUID it had chosen).
        Err(Error::Conflict(why)) => match db::nodes::get_by_uuid(&ctx.db, &uuid).await {
            Ok(node) if request_id.is_some() && node.last_request_id == request_id => Ok(node),
            _ => Err(Error::Conflict(why)),
        },
        created => created,
    }?;
    tracing::info!(node.uuid = %uuid, driver = %created.driver, "Node {uuid} created");
    Ok(created)
}

/// Applies a JSON patch to the node as it is, in one statement conditional on nobody holding the
/// node's lock and the row being unchanged since it was read: the exclusion Ironic gets from
/// taking the lock for an update, in one round trip.
pub async fn update(
    ctx: &Ctx,
    node: Node,
    ops: &[PatchOp],
    reset_interfaces: bool,
    deadline: Option<Instant>,
) -> Result<Node> {
    let uuid = node.uuid.clone();
    let mut freed = None;
    let (node, _) = change_node(ctx, &uuid, Some(node), deadline, |node| {
        freed = None;
        // Busy means a transition in progress, not merely a target set: failure states keep a
        // target and must stay editable (Ironic bug 1405420).
        if node.target_provision_state.is_some() && !node.provision_state.update_allowed() {
            return Err(Error::InvalidState(format!(
                "Node {} can not be updated while a state transition is in progress.",
                node.uuid
            )));
        }
        let mut changes = patch::apply(node, ops)?;
        if changes.protected == Some(true)
            && !node.provision_state.protect_allowed()
        {
            return Err(Error::InvalidState(format!(
                "Node {} can only be made protected in provision states 'active' or 'rescue', the current state is '{}'",
                node.uuid, node.provision_state
            )));
        }
        // Interfaces back to the driver's default: those the patch removes, and with
        // `reset_interfaces` (the API has checked that the patch sets the driver, perhaps to the
        // same one) every one the patch does not set.
        for kind in InterfaceKind::ALL {
            let removed = patch::resets_interface(ops, kind);
            let unset = reset_interfaces && !ops.iter().any(|op| op.is_on_field(kind.field()));
            if removed || unset {
                let driver = changes.driver.as_deref().unwrap_or(&node.driver);
                let default = ctx.drivers.resolve(driver, kind, None)?;
                // A removal to the interface the node has already is no change; a reset writes
                // it anyway, so that it passes the state gate below like any interface change.
                if reset_interfaces || default != node.interfaces.get(kind) {
                    changes.interfaces.set(kind, default);
                }
            }
        }
        if reset_interfaces {
            changes.driver.get_or_insert_with(|| node.driver.clone());
        }
        if changes.driver.is_some() || changes.interfaces.any() {
            if !node.maintenance && !node.provision_state.interface_change_allowed() {
                return Err(Error::InvalidState(format!(
                    "Node {} must be in maintenance mode or in one of the states enroll, manageable, available, inspecting, inspect wait to change its driver or interfaces; it is in \"{}\".",
                    node.uuid, node.provision_state
                )));
            }
            let driver = changes.driver.as_deref().unwrap_or(&node.driver);
            ctx.drivers.resolve_all(driver, |kind| {
                Some(
                    changes
                        .interfaces
                        .get(kind)
                        .unwrap_or(node.interfaces.get(kind)),
                )
            })?;
        }
        if let (Some(Some(new)), Some(old)) = (&changes.instance_uuid, &node.instance_uuid)
            && new != old
        {
            return Err(Error::NodeAssociated {
                node: node.uuid.clone(),
                instance: old.clone(),
            });
        }
        // Removing the instance of a node with an allocation removes the allocation too
        // (Ironic's `update_node`), in the states where its driver could change.
        if let (Some(None), Some(allocation)) = (&changes.instance_uuid, &node.allocation_uuid) {
            if !node.maintenance && !node.provision_state.interface_change_allowed() {
                return Err(Error::InvalidState(format!(
                    "Node {} with an allocation can not have instance_uuid removed unless it is in one of allowed (enroll, manageable, available, inspecting, inspect wait) states or in maintenance mode. Current state is '{}'.",
                    node.uuid, node.provision_state
                )));
            }
            changes.allocation_uuid = Some(None);
            freed = Some(allocation.clone());
        }
        Ok(Decision::Write(changes, Hold::Release))
    })
    .await?;
    if let Some(allocation) = freed {
        db::allocations::delete(&ctx.db, &allocation).await?;
    }
    Ok(node)
}

/// Sets or clears maintenance (clearing also drops the reason), conditional like [`update`].
pub async fn set_maintenance(
    ctx: &Ctx,
    node: Node,
    maintenance: bool,
    reason: Option<String>,
    deadline: Option<Instant>,
) -> Result<Node> {
    let uuid = node.uuid.clone();
    let (node, _) = change_node(ctx, &uuid, Some(node), deadline, |_| {
        let changes = NodeChanges {
            maintenance: Some(maintenance),
            maintenance_reason: Some(if maintenance {
                reason.clone().map(node::truncate_error)
            } else {
                None
            }),
            // Leaving maintenance clears the fault that may have put the node there.
            fault: (!maintenance).then_some(None),
            ..NodeChanges::default()
        };
        Ok(Decision::Write(changes, Hold::Release))
    })
    .await?;
    if maintenance {
        let reason = node.maintenance_reason.as_deref().unwrap_or("");
        tracing::info!(node.uuid = %uuid, reason, "Node {uuid} put in maintenance");
    } else {
        tracing::info!(node.uuid = %uuid, "Node {uuid} taken out of maintenance");
    }
    Ok(node)
}

/// Ironic's `MAX_TRAITS_PER_NODE`.
const MAX_TRAITS_PER_NODE: usize = 50;

/// Adds traits (or replaces them all), conditional like [`update`]; Ironic takes the node's lock
/// for this, in any state.
pub async fn add_traits(
    ctx: &Ctx,
    node: Node,
    traits: Vec<String>,
    replace: bool,
    deadline: Option<Instant>,
) -> Result<()> {
    let uuid = node.uuid.clone();
    change_node(ctx, &uuid, Some(node), deadline, |node| {
        let mut all = if replace { Vec::new() } else { node.traits.0.clone() };
        for t in &traits {
            if !all.contains(t) {
                all.push(t.clone());
            }
        }
        if all.len() > MAX_TRAITS_PER_NODE {
            return Err(Error::InvalidParameterValue(format!(
                "Could not modify traits for node {} as it would exceed the maximum number of traits per node ({} vs. {MAX_TRAITS_PER_NODE})",
                node.uuid,
                all.len()
            )));
        }
        all.sort();
        let changes = NodeChanges {
            traits: Some(Json(all)),
            ..NodeChanges::default()
        };
        Ok(Decision::Write(changes, Hold::Release))
    })
    .await
    .map(|_| ())
}

/// Removes the given traits (all when None); one the node lacks is NodeTraitNotFound.
pub async fn remove_traits(
    ctx: &Ctx,
    node: Node,
    traits: Option<Vec<String>>,
    deadline: Option<Instant>,
) -> Result<()> {
    let uuid = node.uuid.clone();
    change_node(ctx, &uuid, Some(node), deadline, |node| {
        let kept = match &traits {
            None => Vec::new(),
            Some(gone) => {
                if let Some(missing) = gone.iter().find(|t| !node.traits.contains(t)) {
                    return Err(Error::NodeTraitNotFound {
                        node: node.uuid.clone(),
                        name: missing.clone(),
                    });
                }
                node.traits
                    .iter()
                    .filter(|t| !gone.contains(t))
                    .cloned()
                    .collect()
            }
        };
        let changes = NodeChanges {
            traits: Some(Json(kept)),
            ..NodeChanges::default()
        };
        Ok(Decision::Write(changes, Hold::Release))
    })
    .await
    .map(|_| ())
}

/// Turns the node's console on or off, as Ironic's `set_console_mode`: the `no-console`
/// interface refuses; a console already as asked is left alone; otherwise `last_error` is
/// cleared and the console interface's record (`node::console::record`: the fake graphical
/// console's session) written with `console_enabled`.
pub async fn set_console_mode(
    ctx: &Ctx,
    node: Node,
    enabled: bool,
    deadline: Option<Instant>,
) -> Result<()> {
    if let Some(console) = ctx.drivers.console(&node)? {
        return run_console(ctx, node, console, enabled, deadline).await;
    }
    let uuid = node.uuid.clone();
    change_node(ctx, &uuid, Some(node), deadline, |node| {
        if node.interfaces.console == "no-console" {
            return Err(Error::InvalidParameterValue(format!(
                "Driver {} does not support console (disabled or not implemented): node {} uses the no-console interface.",
                node.driver, node.uuid
            )));
        }
        if node.console_enabled == enabled {
            return Ok(Decision::Nothing);
        }
        let changes = NodeChanges {
            console_enabled: Some(enabled),
            last_error: Some(None),
            driver_internal_info: node::console::record(node, enabled).map(Json),
            ..NodeChanges::default()
        };
        Ok(Decision::Write(changes, Hold::Release))
    })
    .await
    .map(|_| ())
}

/// Starts or stops a console that runs something (`ipmitool-socat`), as Ironic's
/// `_set_console_mode`: its `driver_info` checked first (what is missing or wrong is the
/// client's 400), then started or stopped under the node's lock; a console already as asked is
/// left alone. A failure is the node's `last_error`, in Ironic's words, `console_enabled`
/// unchanged.
async fn run_console(
    ctx: &Ctx,
    node: Node,
    console: std::sync::Arc<dyn drivers::ConsoleInterface>,
    enabled: bool,
    deadline: Option<Instant>,
) -> Result<()> {
    console
        .validate(&node)
        .map_err(|e| e.into_error(&node.driver))?;
    with_lock(ctx, &node.uuid, deadline, async |task| {
        if task.node.console_enabled == enabled {
            return Ok(());
        }
        let outcome = if enabled {
            hw(task, console.start(&task.node)).await.map(|r| r.map(Some))
        } else {
            hw(task, console.stop(&task.node)).await.map(|r| r.map(|()| None))
        };
        let changes = match outcome.and_then(|r| r.map_err(|e| e.to_string())) {
            Ok(info) => NodeChanges {
                console_enabled: Some(enabled),
                last_error: Some(None),
                driver_internal_info: Some(Json(node::console::record_running(&task.node, info))),
                ..NodeChanges::default()
            },
            Err(reason) => {
                let op = if enabled { "enabling" } else { "disabling" };
                tracing::error!(node.uuid = %task.node.uuid, "Error {op} the console on node {}: {reason}", task.node.uuid);
                NodeChanges {
                    last_error: Some(Some(format!(
                        "Error {op} the console on node {}. Reason: {reason}",
                        task.node.uuid
                    ))),
                    ..NodeChanges::default()
                }
            }
        };
        task.write(changes.release()).await
    })
    .await
}

/// Starts again the consoles that run something of the nodes this conductor owns whose console
/// is on, as Ironic's `_start_consoles` at start-up: a console runs in its conductor's process,
/// which a stop or a crash ended. One that cannot start is turned off with a `last_error`.
pub async fn restart_consoles(ctx: &Ctx) -> Result<()> {
    for name in ctx.drivers.running_console_names() {
        let nodes = db::nodes::unlocked_with_console_on(&ctx.db, name, i64::MAX).await?;
        if nodes.is_empty() {
            continue;
        }
        let owner = super::Owner::now(ctx).await?;
        for node in nodes {
            if !owner.owns(&node) {
                continue;
            }
            let Ok(Some(console)) = ctx.drivers.console(&node) else {
                continue;
            };
            let uuid = node.uuid.clone();
            let restarted = with_lock(ctx, &uuid, None, async |task| {
                if !task.node.console_enabled {
                    return Ok(());
                }
                let changes = match hw(task, console.start(&task.node)).await {
                    Ok(Ok(info)) => NodeChanges {
                        driver_internal_info: Some(Json(node::console::record_running(
                            &task.node,
                            Some(info),
                        ))),
                        ..NodeChanges::default()
                    },
                    Ok(Err(e)) => NodeChanges {
                        console_enabled: Some(false),
                        last_error: Some(Some(format!(
                            "Failed to start console while taking over the node {uuid}: {e}"
                        ))),
                        driver_internal_info: Some(Json(node::console::record_running(
                            &task.node, None,
                        ))),
                        ..NodeChanges::default()
                    },
                    Err(_) => return Ok(()),
                };
                task.write(changes.release()).await
            })
            .await;
            if let Err(e) = restarted {
                tracing::warn!(node.uuid = %uuid, "The console of node {uuid} was not started again: {e}");
            }
        }
    }
    Ok(())
}

/// Turns off the node's graphical console if its session has outlived its token
/// (`node::console::expired`, decided on the node as it is when written), as Ironic's periodic
/// `_expire_console_sessions` stops it.
pub async fn expire_console(ctx: &Ctx, node: Node) -> Result<()> {
    let uuid = node.uuid.clone();
    change_node(ctx, &uuid, Some(node), None, |node| {
        if !node::console::expired(node, node::now()) {
            return Ok(Decision::Nothing);
        }
        tracing::info!(node.uuid = %node.uuid, "Graphical console session has expired for {}, closing.", node.uuid);
        let changes = NodeChanges {
            console_enabled: Some(false),
            driver_internal_info: node::console::record(node, false).map(Json),
            ..NodeChanges::default()
        };
        Ok(Decision::Write(changes, Hold::Release))
    })
    .await
    .map(|_| ())
}

/// Stores the target RAID configuration, in any state, conditional like [`update`] (Ironic's
/// set_target_raid_config). An empty one clears it whatever the RAID interface; another is
/// checked by the node's RAID interface: `no-raid` refuses it, the fake one checks it against
/// Ironic's RAID schema.
pub async fn set_target_raid_config(
    ctx: &Ctx,
    node: Node,
    target_raid_config: JsonObject,
    deadline: Option<Instant>,
) -> Result<()> {
    let uuid = node.uuid.clone();
    change_node(ctx, &uuid, Some(node), deadline, |node| {
        if !target_raid_config.is_empty() {
            drivers::require_interface(node, InterfaceKind::Raid)?;
            crate::node::raid::validate(&target_raid_config)?;
        }
        let changes = NodeChanges {
            target_raid_config: Some(Json(target_raid_config.clone())),
            ..NodeChanges::default()
        };
        Ok(Decision::Write(changes, Hold::Release))
    })
    .await
    .map(|_| ())
}

/// Checks each interface's configuration for the node, without touching hardware.
pub fn validate(ctx: &Ctx, node: &Node) -> Result<Vec<InterfaceValidation>> {
    let driver = ctx.drivers.for_node(node)?;
    let verdict = |checked: std::result::Result<(), crate::drivers::DriverError>| match checked {
        Ok(()) => (Some(true), None),
        Err(e) => (Some(false), Some(e.to_string())),
    };
    let entry = |name: &str, (result, reason)| InterfaceValidation {
        interface: name.to_owned(),
        result,
        reason,
    };
    let mut out = vec![
        entry("boot", verdict(driver.boot.validate(node))),
        entry("deploy", verdict(driver.deploy.validate(node))),
        entry("management", verdict(driver.management.validate(node))),
        entry("power", verdict(driver.power.validate(node))),
    ];
    // The others have nothing to configure on fake hardware; a `no-*` one is Ironic's
    // "not supported".
    let stepped = [InterfaceKind::Bios, InterfaceKind::Firmware]
        .map(|kind| (kind, node.interfaces.get(kind)));
    for (kind, name) in node.interfaces.passive().chain(stepped) {
        let verdict = if name.starts_with("no-") {
            (None, Some("not supported".to_owned()))
        } else {
            (Some(true), None)
        };
        out.push(entry(kind.name(), verdict));
    }
    out.sort();
    Ok(out)
}

/// Deletes the node if its state allows it, in one statement conditional like [`update`]'s.
pub async fn destroy(ctx: &Ctx, node: Node, deadline: Option<Instant>) -> Result<()> {
    let uuid = node.uuid.clone();
    change_node(ctx, &uuid, Some(node), deadline, |node| {
        if let (Some(instance), false) = (&node.instance_uuid, node.maintenance) {
            return Err(Error::NodeAssociated {
                node: node.uuid.clone(),
                instance: instance.clone(),
            });
        }
        if node.protected {
            return Err(Error::NodeProtected {
                node: node.uuid.clone(),
            });
        }
        // Ironic's `destroy_node`: the delete-allowed states, and `available` as its
        // `[conductor]allow_deleting_available_nodes` (true by default) allows.
        let allowed = node.provision_state.delete_allowed()
            || node.provision_state == ProvisionState::Available;
        if !node.maintenance && !allowed {
            return Err(Error::InvalidState(format!(
                "Can not delete node \"{}\" while it is in provision state \"{}\". Valid provision states to start deletion are: available, enroll, manageable, adopt failed, or set maintenance mode first.",
                node.uuid, node.provision_state
            )));
        }
        Ok(Decision::Delete)
    })
    .await?;
    tracing::info!(node.uuid = %uuid, "Node {uuid} deleted");
    Ok(())
}
