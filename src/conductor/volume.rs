//! A node's volume connectors and targets, updated and deleted with Ironic's rules
//! (`update_volume_connector`, `destroy_volume_connector` and the target ones in
//! `ironic/conductor/manager.py`): under the node's exclusion (`task::change_children`), an
//! update only while the node is powered off, a delete also when the node is in one of
//! Ironic's `DELETE_ALLOWED_STATES` (`available` is not one). (A create is the API's: Ironic's
//! API writes it with no lock.)

use tokio::time::Instant;

use super::{Ctx, children::update_child, task::change_children};
use crate::{
    db::{self, children::ChildWrite},
    error::{Error, Result},
    node::{Node, PowerState},
    patch,
    rpc::{RpcReply, VolumeChange},
};

pub async fn change(
    ctx: &Ctx,
    node: Node,
    change: VolumeChange,
    deadline: Option<Instant>,
) -> Result<RpcReply> {
    let uuid = node.uuid.clone();
    let hint = Some(node);
    match change {
        VolumeChange::UpdateConnector { uuid: id, patch } => {
            update_child(ctx, &uuid, hint, deadline, |n, c| {
                let found = c.connectors.iter().find(|x| x.uuid == id);
                let connector = found.ok_or_else(|| db::volume::connector_not_found(&id))?;
                let changes = patch::apply(connector, &patch)?;
                check_update(n, "volume connector update", changes.node_uuid.is_some())?;
                Ok(vec![ChildWrite::UpdateConnector(
                    connector.clone(),
                    changes,
                )])
            })
            .await
        }
        VolumeChange::UpdateTarget { uuid: id, patch } => {
            update_child(ctx, &uuid, hint, deadline, |n, c| {
                let found = c.targets.iter().find(|x| x.uuid == id);
                let target = found.ok_or_else(|| db::volume::target_not_found(&id))?;
                let changes = patch::apply(target, &patch)?;
                check_update(n, "volume target update", changes.node_uuid.is_some())?;
                Ok(vec![ChildWrite::UpdateTarget(target.clone(), changes)])
            })
            .await
        }
        VolumeChange::DestroyConnector { uuid: id } => {
            change_children(ctx, &uuid, hint, deadline, |n, c| {
                let found = c.connectors.iter().find(|x| x.uuid == id);
                let connector = found.ok_or_else(|| db::volume::connector_not_found(&id))?;
                check_delete(n, "volume connector deletion")?;
                Ok(vec![ChildWrite::DeleteConnector(connector.clone())])
            })
            .await
            .map(|_| RpcReply::Done)
        }
        VolumeChange::DestroyTarget { uuid: id } => {
            change_children(ctx, &uuid, hint, deadline, |n, c| {
                let found = c.targets.iter().find(|x| x.uuid == id);
                let target = found.ok_or_else(|| db::volume::target_not_found(&id))?;
                check_delete(n, "volume target deletion")?;
                Ok(vec![ChildWrite::DeleteTarget(target.clone())])
            })
            .await
            .map(|_| RpcReply::Done)
        }
    }
}

/// The state a refusal names: the node's power state, as Ironic's does ("None" when unknown).
fn refused(node: &Node, action: &str) -> Error {
    Error::InvalidStateRequested {
        action: action.to_owned(),
        node: node.uuid.clone(),
        state: node
            .power_state
            .map_or("None", PowerState::api_name)
            .to_owned(),
    }
}

/// An update needs the node powered off (whatever its provision state or maintenance). Moving
/// a connector or target to another node is refused, as for ports.
fn check_update(node: &Node, action: &str, moves: bool) -> Result<()> {
    if moves {
        return Err(Error::InvalidParameterValue(
            "Moving a volume connector or target to another node is not supported by Ferrum: delete it and create it on the other node.".to_owned(),
        ));
    }
    if node.power_state != Some(PowerState::Off) {
        return Err(refused(node, action));
    }
    Ok(())
}

/// A delete needs the node powered off, or in one of Ironic's `DELETE_ALLOWED_STATES`
/// (manageable, enroll, adopt failed; not `available`, where the node itself may be deleted).
fn check_delete(node: &Node, action: &str) -> Result<()> {
    if node.power_state != Some(PowerState::Off) && !node.provision_state.delete_allowed() {
        return Err(refused(node, action));
    }
    Ok(())
}
