//! Which port or portgroup of a node a VIF (a virtual network interface, Neutron's port) is
//! attached to, recorded in its `internal_info` under `tenant_vif_port_id`.
//!
//! Ironic's `flat` and `neutron` network interfaces choose by its rules
//! (`get_free_port_like_object` in `ironic/drivers/modules/network/common.py`): not a port or
//! portgroup that has a VIF already; a portgroup only if it has a free port and none of its ports
//! has a VIF; portgroups before ports; PXE-enabled ports first. Ironic also asks Neutron for the
//! VIF's physical networks; Ferrum has no Neutron, so every physical network is allowed, as
//! Ironic does for a VIF on a network without segments.

use serde_json::Value;

use super::{Port, Portgroup, TENANT_VIF_KEY, attached_vif};
use crate::error::{Error, Result};

/// Whether the node's network interface records its VIFs. Ironic's `noop` network interface
/// (`ironic/drivers/modules/network/noop.py`) attaches and detaches a VIF by doing nothing and
/// lists none, with or without ports; `flat` and `neutron` record it on a port or portgroup
/// (`VIFPortIDMixin`, in `network/common.py`), as this module chooses.
pub fn recorded(node: &crate::node::Node) -> bool {
    node.interfaces.network != "noop"
}

/// A port or a portgroup: what a VIF can be attached to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Attachment<'a> {
    Port(&'a Port),
    Portgroup(&'a Portgroup),
}

/// The VIFs attached to the node of these ports and portgroups (its ports' first).
pub fn list(ports: &[Port], portgroups: &[Portgroup]) -> Vec<String> {
    ports
        .iter()
        .filter_map(|p| attached_vif(&p.internal_info))
        .chain(
            portgroups
                .iter()
                .filter_map(|pg| attached_vif(&pg.internal_info)),
        )
        .map(str::to_owned)
        .collect()
}

/// Where `vif` should be attached on a node with these ports and portgroups, optionally the port
/// or portgroup the caller named (`port_uuid`, `portgroup_uuid` of API 1.67).
pub fn choose<'a>(
    vif: &str,
    ports: &'a [Port],
    portgroups: &'a [Portgroup],
    wanted_port: Option<&str>,
    wanted_portgroup: Option<&str>,
) -> Result<Attachment<'a>> {
    let already = |uuid: &str, kind: &str| {
        Error::Conflict(format!(
            "Unable to attach VIF {vif}, it is already attached to {kind} {uuid}."
        ))
    };
    for p in ports {
        if attached_vif(&p.internal_info) == Some(vif) {
            return Err(already(&p.uuid, "Port"));
        }
    }
    for pg in portgroups {
        if attached_vif(&pg.internal_info) == Some(vif) {
            return Err(already(&pg.uuid, "Portgroup"));
        }
    }
    let mut free: Vec<Attachment<'a>> = Vec::new();
    if wanted_portgroup.is_none() {
        free.extend(
            ports
                .iter()
                .filter(|p| wanted_port.is_none_or(|w| w == p.uuid))
                .filter(|p| attached_vif(&p.internal_info).is_none())
                // A port of a usable portgroup goes with its group.
                .filter(|p| {
                    p.portgroup_uuid
                        .as_deref()
                        .is_none_or(|pg| !group_usable(pg, ports))
                        || wanted_port.is_some()
                })
                .map(Attachment::Port),
        );
    }
    if wanted_port.is_none() {
        free.extend(
            portgroups
                .iter()
                .filter(|pg| wanted_portgroup.is_none_or(|w| w == pg.uuid))
                .filter(|pg| attached_vif(&pg.internal_info).is_none())
                .filter(|pg| group_usable(&pg.uuid, ports))
                .map(Attachment::Portgroup),
        );
    }
    // Portgroups first, then PXE-enabled ports; stable, so listing order breaks ties.
    free.sort_by_key(|a| match a {
        Attachment::Portgroup(_) => 0,
        Attachment::Port(p) if p.pxe_enabled => 1,
        Attachment::Port(_) => 2,
    });
    free.first().copied().ok_or_else(|| {
        Error::InvalidParameterValue(format!(
            "Unable to attach VIF {vif}, not enough free physical ports."
        ))
    })
}

/// A portgroup a VIF can go to: it has ports, and none of them has a VIF.
fn group_usable(portgroup: &str, ports: &[Port]) -> bool {
    let mut members = ports
        .iter()
        .filter(|p| p.portgroup_uuid.as_deref() == Some(portgroup))
        .peekable();
    members.peek().is_some() && members.all(|p| attached_vif(&p.internal_info).is_none())
}

/// The port or portgroup `vif` is attached to, or VifNotAttached.
pub fn find<'a>(
    vif: &str,
    node: &str,
    ports: &'a [Port],
    portgroups: &'a [Portgroup],
) -> Result<Attachment<'a>> {
    if let Some(pg) = portgroups
        .iter()
        .find(|pg| attached_vif(&pg.internal_info) == Some(vif))
    {
        return Ok(Attachment::Portgroup(pg));
    }
    ports
        .iter()
        .find(|p| attached_vif(&p.internal_info) == Some(vif))
        .map(Attachment::Port)
        .ok_or_else(|| {
            Error::InvalidParameterValue(format!(
                "VIF {vif} is not attached to bare metal node {node}"
            ))
        })
}

/// `internal_info` with `vif` recorded (or, with None, the VIF removed).
pub fn with_vif(
    internal_info: &crate::node::JsonObject,
    vif: Option<&str>,
) -> crate::node::JsonObject {
    let mut info = internal_info.clone();
    match vif {
        Some(vif) => {
            info.insert(TENANT_VIF_KEY.to_owned(), Value::String(vif.to_owned()));
        }
        None => {
            info.remove(TENANT_VIF_KEY);
        }
    }
    info
}
