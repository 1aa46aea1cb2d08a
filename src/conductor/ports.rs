//! A node's ports, portgroups and VIFs, with Ironic's checks (`create_port`, `update_port`,
//! `destroy_port`, the portgroup ones, `vif_attach`, `vif_detach` in
//! `ironic/conductor/manager.py`). A create needs no exclusion (Ironic takes a shared lock);
//! every other change is decided on the node's ports and portgroups as they are, under the
//! node's exclusion (`task::change_children`). A port joining a portgroup, at create too, is
//! checked against the portgroup's members in the transaction that writes it.

use std::collections::BTreeSet;

use serde_json::Value;
use tokio::time::Instant;

use super::{Ctx, children::update_child, task::change_children};
use crate::{
    db::{self, children::ChildWrite},
    error::{Error, Result},
    node::{JsonObject, Node, normalize_uuid},
    patch::{self, PatchOp},
    ports::{
        Port, PortChanges, Portgroup, PortgroupChanges, attached_vif,
        vif::{self, Attachment},
    },
    rpc::{PortsChange, RpcReply},
    states::ProvisionState,
};

/// Where a port's connectivity (portgroup, PXE, local link, physical network) or a portgroup's
/// node may change without maintenance (Ironic's `allowed_update_states`).
const CONNECTIVITY_STATES: &[ProvisionState] = &[
    ProvisionState::Enroll,
    ProvisionState::Inspecting,
    ProvisionState::InspectWait,
    ProvisionState::Manageable,
];

pub async fn change(
    ctx: &Ctx,
    node: Node,
    change: PortsChange,
    deadline: Option<Instant>,
) -> Result<RpcReply> {
    match change {
        PortsChange::CreatePort { fields } => create_port(ctx, &node, fields)
            .await
            .map(|p| RpcReply::Port(Box::new(p))),
        PortsChange::CreatePortgroup { fields } => create_portgroup(ctx, &node, fields)
            .await
            .map(|p| RpcReply::Portgroup(Box::new(p))),
        PortsChange::UpdatePort { uuid, patch } => {
            update_child(ctx, &node.uuid.clone(), Some(node), deadline, |n, c| {
                update_port(n, &c.ports, &c.portgroups, &uuid, &patch)
            })
            .await
        }
        PortsChange::UpdatePortgroup { uuid, patch } => {
            update_child(ctx, &node.uuid.clone(), Some(node), deadline, |n, c| {
                update_portgroup(n, &c.ports, &c.portgroups, &uuid, &patch)
            })
            .await
        }
        PortsChange::DestroyPort { uuid } => {
            change_children(ctx, &node.uuid.clone(), Some(node), deadline, |n, c| {
                let port = find_port(&c.ports, &uuid)?;
                if let Some(vif) = attached_vif(&port.internal_info)
                    && !n.maintenance
                {
                    return Err(Error::InvalidState(format!(
                        "Cannot delete the port {uuid} as it is bound to VIF {vif} for use."
                    )));
                }
                Ok(vec![ChildWrite::DeletePort(port.clone())])
            })
            .await
            .map(|_| RpcReply::Done)
        }
        PortsChange::DestroyPortgroup { uuid } => {
            change_children(ctx, &node.uuid.clone(), Some(node), deadline, |_, c| {
                let pg = find_portgroup(&c.portgroups, &uuid)?;
                if c.ports.iter().any(|p| p.portgroup_uuid.as_deref() == Some(&pg.uuid)) {
                    return Err(Error::InvalidParameterValue(format!(
                        "Cannot complete the requested action because portgroup {uuid} contains ports."
                    )));
                }
                Ok(vec![ChildWrite::DeletePortgroup(pg.clone())])
            })
            .await
            .map(|_| RpcReply::Done)
        }
        PortsChange::AttachVif { vif_info } => {
            change_children(ctx, &node.uuid.clone(), Some(node), deadline, |n, c| {
                attach_vif(n, &c.ports, &c.portgroups, &vif_info)
            })
            .await
            .map(|_| RpcReply::Done)
        }
        PortsChange::DetachVif { vif_id } => {
            change_children(ctx, &node.uuid.clone(), Some(node), deadline, |n, c| {
                if !vif::recorded(n) {
                    return Ok(Vec::new());
                }
                Ok(vec![match vif::find(&vif_id, &n.uuid, &c.ports, &c.portgroups)? {
                    Attachment::Port(p) => set_port_vif(p, None),
                    Attachment::Portgroup(pg) => set_portgroup_vif(pg, None),
                }])
            })
            .await
            .map(|_| RpcReply::Done)
        }
    }
}

async fn create_port(ctx: &Ctx, node: &Node, fields: JsonObject) -> Result<Port> {
    let mut port = Port::template();
    patch::changes_for_create(&port, fields)?.set_into(&mut port);
    port.node_uuid = node.uuid.clone();
    match &port.portgroup_uuid {
        Some(pg_uuid) => {
            db::children::insert_member_port(&ctx.db, &port, pg_uuid, |pg, members| {
                check_membership(&port, pg)?;
                check_physnet(&port, pg, members)
            })
            .await
        }
        None => db::ports::insert_port(&ctx.db, &port).await,
    }
}

async fn create_portgroup(ctx: &Ctx, node: &Node, fields: JsonObject) -> Result<Portgroup> {
    let mut pg = Portgroup::template();
    patch::changes_for_create(&pg, fields)?.set_into(&mut pg);
    pg.node_uuid = node.uuid.clone();
    db::ports::insert_portgroup(&ctx.db, &pg).await
}

/// A port may join only a portgroup of its own node, and a PXE-enabled one only a portgroup
/// that supports standalone ports.
fn check_membership(port: &Port, pg: &Portgroup) -> Result<()> {
    if pg.node_uuid != port.node_uuid {
        return Err(Error::InvalidParameterValue(
            "Port can not be added to a portgroup belonging to a different node.".to_owned(),
        ));
    }
    if port.pxe_enabled && !pg.standalone_ports_supported {
        return Err(Error::Conflict(format!(
            "Port group {} doesn't support standalone ports. This port cannot be a member of that portgroup as the port's 'pxe_enabled' field is True.",
            pg.uuid
        )));
    }
    Ok(())
}

/// A port joining a portgroup, or changing its physical network in one, must be on the
/// physical network of the portgroup's other members, or, when it has none, of the portgroup
/// itself when that names one (Ironic's `validate_port_physnet`, `ironic/conductor/utils.py`;
/// `ports` may include the port itself, which is left out).
fn check_physnet(port: &Port, pg: &Portgroup, ports: &[Port]) -> Result<()> {
    let others: BTreeSet<Option<&str>> = ports
        .iter()
        .filter(|p| p.portgroup_uuid.as_deref() == Some(pg.uuid.as_str()) && p.uuid != port.uuid)
        .map(|p| p.physical_network.as_deref())
        .collect();
    // Python's `str(None)`, as Ironic's messages print a port without a physical network.
    let shown = |physnet: Option<&str>| physnet.unwrap_or("None").to_owned();
    let group_physnet = match others.len() {
        0 => match pg.physical_network.as_deref() {
            Some(physnet) => Some(physnet),
            None => return Ok(()),
        },
        1 => others.first().copied().flatten(),
        _ => {
            return Err(Error::PortgroupPhysnetInconsistent {
                portgroup: pg.uuid.clone(),
                physical_networks: others.into_iter().map(shown).collect::<Vec<_>>().join(", "),
            });
        }
    };
    if port.physical_network.as_deref() != group_physnet {
        return Err(Error::Conflict(format!(
            "Port with physical network {} cannot become a member of port group {} which has ports in physical network {}.",
            shown(port.physical_network.as_deref()),
            pg.uuid,
            shown(group_physnet)
        )));
    }
    Ok(())
}

fn find_port<'a>(ports: &'a [Port], uuid: &str) -> Result<&'a Port> {
    ports
        .iter()
        .find(|p| p.uuid == uuid)
        .ok_or_else(|| db::ports::port_not_found(uuid))
}

fn find_portgroup<'a>(portgroups: &'a [Portgroup], uuid: &str) -> Result<&'a Portgroup> {
    portgroups
        .iter()
        .find(|p| p.uuid == uuid)
        .ok_or_else(|| db::ports::portgroup_not_found(uuid))
}

fn update_port(
    node: &Node,
    ports: &[Port],
    portgroups: &[Portgroup],
    uuid: &str,
    ops: &[PatchOp],
) -> Result<Vec<ChildWrite>> {
    let port = find_port(ports, uuid)?;
    let changes = patch::apply(port, ops)?;
    if changes.node_uuid.is_some() {
        return Err(Error::InvalidParameterValue(
            "Moving a port to another node is not supported by Ferrum: delete it and create it on the other node.".to_owned(),
        ));
    }
    if changes.address.is_some()
        && (node.provision_state == ProvisionState::Active || node.instance_uuid.is_some())
        && !node.maintenance
    {
        return Err(Error::InvalidState(format!(
            "Cannot update hardware address for port {uuid} as node {} is active or has instance UUID assigned",
            node.uuid
        )));
    }
    let connectivity = changes.portgroup_uuid.is_some()
        || changes.pxe_enabled.is_some()
        || changes.local_link_connection.is_some()
        || changes.physical_network.is_some();
    if connectivity && !node.maintenance && !CONNECTIVITY_STATES.contains(&node.provision_state) {
        return Err(Error::InvalidState(format!(
            "Port {uuid} can not have any connectivity attributes (portgroup_uuid, pxe_enabled, local_link_connection, physical_network) updated unless node {} is in a enroll, inspecting, inspect wait, manageable state or in maintenance mode. The current state is {}.",
            node.uuid, node.provision_state
        )));
    }
    let mut updated = port.clone();
    changes.clone().set_into(&mut updated);
    let joins = changes.portgroup_uuid.is_some();
    let checks_membership = joins || changes.pxe_enabled.is_some();
    let checks_physnet = joins || changes.physical_network.is_some();
    if let Some(pg_uuid) = &updated.portgroup_uuid
        && (checks_membership || checks_physnet)
    {
        let pg = portgroups
            .iter()
            .find(|pg| &pg.uuid == pg_uuid)
            .ok_or_else(|| {
                Error::InvalidParameterValue(format!(
                    "Portgroup {pg_uuid} could not be found on node {}.",
                    node.uuid
                ))
            })?;
        if checks_membership {
            check_membership(&updated, pg)?;
        }
        if checks_physnet {
            check_physnet(&updated, pg, ports)?;
        }
    }
    Ok(vec![ChildWrite::UpdatePort(port.clone(), changes)])
}

/// Updates a portgroup; a patch that writes its `physical_network` (API 1.102) writes it on its
/// member ports too, in the same transaction, as Ironic's `update_portgroup_physical_network`
/// does after the update. The portgroup's write comes first.
fn update_portgroup(
    node: &Node,
    ports: &[Port],
    portgroups: &[Portgroup],
    uuid: &str,
    ops: &[PatchOp],
) -> Result<Vec<ChildWrite>> {
    let pg = find_portgroup(portgroups, uuid)?;
    let changes = patch::apply(pg, ops)?;
    if changes.node_uuid.is_some() {
        return Err(Error::InvalidParameterValue(format!(
            "Moving portgroup {uuid} to another node is not supported by Ferrum: delete it and create it on the other node (node {}).",
            node.uuid
        )));
    }
    let writes_physnet = ops.iter().any(|op| op.path == "/physical_network");
    let physnet = changes
        .physical_network
        .clone()
        .unwrap_or_else(|| pg.physical_network.clone());
    let mut writes = vec![ChildWrite::UpdatePortgroup(pg.clone(), changes)];
    if writes_physnet {
        writes.extend(
            ports
                .iter()
                .filter(|p| {
                    p.portgroup_uuid.as_deref() == Some(pg.uuid.as_str())
                        && p.physical_network != physnet
                })
                .map(|p| {
                    let changes = PortChanges {
                        physical_network: Some(physnet.clone()),
                        ..PortChanges::default()
                    };
                    ChildWrite::UpdatePort(p.clone(), changes)
                }),
        );
    }
    Ok(writes)
}

fn attach_vif(
    node: &Node,
    ports: &[Port],
    portgroups: &[Portgroup],
    vif_info: &JsonObject,
) -> Result<Vec<ChildWrite>> {
    let text = |key: &str| -> Result<Option<String>> {
        match vif_info.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(crate::resource::wrong(key, "a string", other)),
        }
    };
    let vif_id = text("id")?.ok_or_else(|| {
        Error::MissingParameterValue("Missing mandatory parameter: id".to_owned())
    })?;
    if !vif::recorded(node) {
        return Ok(Vec::new());
    }
    let port_uuid = text("port_uuid")?
        .map(|u| normalize_uuid("port_uuid", &u))
        .transpose()?;
    let portgroup_uuid = text("portgroup_uuid")?
        .map(|u| normalize_uuid("portgroup_uuid", &u))
        .transpose()?;
    let chosen = vif::choose(
        &vif_id,
        ports,
        portgroups,
        port_uuid.as_deref(),
        portgroup_uuid.as_deref(),
    )?;
    Ok(vec![match chosen {
        Attachment::Port(p) => set_port_vif(p, Some(&vif_id)),
        Attachment::Portgroup(pg) => set_portgroup_vif(pg, Some(&vif_id)),
    }])
}

fn set_port_vif(port: &Port, vif: Option<&str>) -> ChildWrite {
    let changes = PortChanges {
        internal_info: Some(vif::with_vif(&port.internal_info, vif).into()),
        ..PortChanges::default()
    };
    ChildWrite::UpdatePort(port.clone(), changes)
}

fn set_portgroup_vif(pg: &Portgroup, vif: Option<&str>) -> ChildWrite {
    let changes = PortgroupChanges {
        internal_info: Some(vif::with_vif(&pg.internal_info, vif).into()),
        ..PortgroupChanges::default()
    };
    ChildWrite::UpdatePortgroup(pg.clone(), changes)
}
