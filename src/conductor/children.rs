//! The update of one child of a node (a port, portgroup, volume connector or target) under the
//! node's exclusion ([`change_children`]), answered with the child as written.

use tokio::time::Instant;

use super::{Ctx, task::change_children};
use crate::{
    db::children::{ChildWrite, Children},
    error::{Error, Result},
    node::Node,
    rpc::RpcReply,
};

/// Updates one child of the node (a port, portgroup, volume connector or target) with
/// [`change_children`], and answers with the child as written: the first of the writes `decide`
/// chooses (the others follow from it, as a portgroup's physical network its ports').
pub(super) async fn update_child(
    ctx: &Ctx,
    uuid: &str,
    hint: Option<Node>,
    deadline: Option<Instant>,
    decide: impl FnMut(&Node, &Children) -> Result<Vec<ChildWrite>> + Send,
) -> Result<RpcReply> {
    let writes = change_children(ctx, uuid, hint, deadline, decide).await?;
    match writes.into_iter().next() {
        Some(ChildWrite::UpdatePort(mut port, changes)) => {
            changes.set_into(&mut port);
            Ok(RpcReply::Port(Box::new(port)))
        }
        Some(ChildWrite::UpdatePortgroup(mut portgroup, changes)) => {
            changes.set_into(&mut portgroup);
            Ok(RpcReply::Portgroup(Box::new(portgroup)))
        }
        Some(ChildWrite::UpdateConnector(mut connector, changes)) => {
            changes.set_into(&mut connector);
            Ok(RpcReply::VolumeConnector(Box::new(connector)))
        }
        Some(ChildWrite::UpdateTarget(mut target, changes)) => {
            changes.set_into(&mut target);
            Ok(RpcReply::VolumeTarget(Box::new(target)))
        }
        other => Err(Error::internal(format!("a child's update wrote {other:?}"))),
    }
}
