//! PUT and DELETE /v1/nodes/{id}/maintenance, announced as Ironic's API announces them
//! (`baremetal.node.maintenance_set.{start,end,error}`, `NodePayload`).

use axum::http::StatusCode;
use serde::Deserialize;

use super::{OnNode, call, find};
use crate::{
    api::{
        ApiState,
        extract::{OptionalJson, RequestId},
    },
    error::Result,
    node::Node,
    notifications::{Status, node as payload},
    rpc::RpcRequest,
};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaintenanceBody {
    reason: Option<String>,
}

/// PUT /v1/nodes/{id}/maintenance: 202; the reason is optional.
pub async fn set_maintenance(
    OnNode(state, version, request_id, ident): OnNode,
    OptionalJson(body): OptionalJson<MaintenanceBody>,
) -> Result<StatusCode> {
    let node = find(&state, &ident, version).await?;
    let reason = body.and_then(|b| b.reason);
    set(&state, &request_id, node, true, reason).await
}

/// Sends the change to the node's conductor between Ironic's start and end (or error)
/// notifications.
async fn set(
    state: &ApiState,
    request_id: &RequestId,
    node: Node,
    maintenance: bool,
    reason: Option<String>,
) -> Result<StatusCode> {
    let notifier = &state.notifier;
    notifier.emit("node", ACTION, Status::Start, || payload::node(&node));
    let reply = call(
        state,
        request_id,
        RpcRequest::SetMaintenance {
            node: Box::new(node.clone()),
            maintenance,
            reason,
        },
    )
    .await;
    match reply {
        Ok(reply) => {
            // A conductor of the release before answers without the node.
            let written = reply.into_node().unwrap_or(node);
            notifier.emit("node", ACTION, Status::End, || payload::node(&written));
            Ok(StatusCode::ACCEPTED)
        }
        Err(err) => {
            notifier.emit("node", ACTION, Status::Error, || payload::node(&node));
            Err(err)
        }
    }
}

const ACTION: &str = "maintenance_set";

/// DELETE /v1/nodes/{id}/maintenance: 202.
pub async fn unset_maintenance(
    OnNode(state, version, request_id, ident): OnNode,
) -> Result<StatusCode> {
    let node = find(&state, &ident, version).await?;
    set(&state, &request_id, node, false, None).await
}
